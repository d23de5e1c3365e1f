//! `/metrics`: what the server has done, in the Prometheus exposition format (OpenMetrics
//! text, through the `prometheus-client` crate): requests by endpoint and status, their
//! latency, sentences and generated tokens, decoder batch sizes, decoding speed and the queue.

use std::sync::atomic::AtomicU64;
use std::sync::Mutex;
use std::time::Duration;

use prometheus_client::encoding::text::encode;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;

/// Labels of one answered request.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RequestLabels {
    pub endpoint: &'static str,
    pub status: u16,
}

/// Labels of one endpoint.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct EndpointLabels {
    pub endpoint: &'static str,
}

type Histograms<L> = Family<L, Histogram, fn() -> Histogram>;

/// Every metric, registered once.
pub struct ServerCounters {
    registry: Registry,
    requests: Family<RequestLabels, Counter>,
    latency: Histograms<EndpointLabels>,
    sentences: Counter,
    abandoned_sentences: Counter,
    generated_tokens: Counter,
    decode_seconds: Counter<f64, AtomicU64>,
    batch_sentences: Histogram,
    tokens_per_second: Gauge<f64, AtomicU64>,
    queued_sentences: Gauge,
    /// Serialises encoding (the registry is read while gauges are set).
    encode_lock: Mutex<()>,
}

/// Seconds from 1 ms to about 33 s, doubling.
fn latency_histogram() -> Histogram {
    Histogram::new(exponential_buckets(0.001, 2.0, 16))
}

impl ServerCounters {
    pub fn new() -> Self {
        let requests = Family::<RequestLabels, Counter>::default();
        let latency: Histograms<EndpointLabels> = Family::new_with_constructor(latency_histogram);
        let sentences = Counter::default();
        let abandoned_sentences = Counter::default();
        let generated_tokens = Counter::default();
        let decode_seconds = Counter::<f64, AtomicU64>::default();
        let batch_sentences = Histogram::new(exponential_buckets(1.0, 2.0, 10));
        let tokens_per_second = Gauge::<f64, AtomicU64>::default();
        let queued_sentences = Gauge::default();
        let mut registry = Registry::with_prefix("transformer");
        registry.register(
            "http_requests",
            "HTTP requests answered, by endpoint and status",
            requests.clone(),
        );
        registry.register(
            "http_request_duration_seconds",
            "Time from a request's arrival to its answer, by endpoint",
            latency.clone(),
        );
        registry.register("sentences", "Sentences translated", sentences.clone());
        registry.register(
            "abandoned_sentences",
            "Sentences whose decoding stopped because every requester of their batch had gone",
            abandoned_sentences.clone(),
        );
        registry.register(
            "generated_tokens",
            "Target tokens generated (</s> included)",
            generated_tokens.clone(),
        );
        registry.register(
            "decode_seconds",
            "Time spent decoding batches",
            decode_seconds.clone(),
        );
        registry.register(
            "batch_sentences",
            "Sentences per decoder batch",
            batch_sentences.clone(),
        );
        registry.register(
            "tokens_per_second",
            "Generated tokens per second of the last decoder batch",
            tokens_per_second.clone(),
        );
        registry.register(
            "queued_sentences",
            "Sentences waiting or being decoded",
            queued_sentences.clone(),
        );
        Self {
            registry,
            requests,
            latency,
            sentences,
            abandoned_sentences,
            generated_tokens,
            decode_seconds,
            batch_sentences,
            tokens_per_second,
            queued_sentences,
            encode_lock: Mutex::new(()),
        }
    }

    /// A request to `endpoint` answered with `status` after `elapsed`.
    pub fn record_request(&self, endpoint: &'static str, status: u16, elapsed: Duration) {
        self.requests
            .get_or_create(&RequestLabels { endpoint, status })
            .inc();
        self.latency
            .get_or_create(&EndpointLabels { endpoint })
            .observe(elapsed.as_secs_f64());
    }

    /// A decoder batch of `sentences` that generated `tokens` in `elapsed`.
    pub fn record_batch(&self, sentences: usize, tokens: usize, elapsed: Duration) {
        self.sentences.inc_by(sentences as u64);
        self.generated_tokens.inc_by(tokens as u64);
        self.decode_seconds.inc_by(elapsed.as_secs_f64());
        self.batch_sentences.observe(sentences as f64);
        let seconds = elapsed.as_secs_f64();
        if seconds > 0.0 {
            self.tokens_per_second.set(tokens as f64 / seconds);
        }
    }

    /// A decoder batch of `sentences` stopped because its requesters had all gone.
    pub fn record_abandoned(&self, sentences: usize) {
        self.abandoned_sentences.inc_by(sentences as u64);
    }

    /// The exposition text, with the queue's length as it is now.
    pub fn encode(&self, queued_sentences: usize) -> Result<String, std::fmt::Error> {
        let _guard = self.encode_lock.lock().unwrap_or_else(|e| e.into_inner());
        self.queued_sentences.set(queued_sentences as i64);
        let mut text = String::new();
        encode(&mut text, &self.registry)?;
        Ok(text)
    }
}

impl Default for ServerCounters {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_exposition_counts_requests_sentences_and_the_queue() {
        let metrics = ServerCounters::new();
        metrics.record_request("translate", 200, Duration::from_millis(3));
        metrics.record_request("translate", 200, Duration::from_millis(5));
        metrics.record_request("translate", 429, Duration::from_millis(1));
        metrics.record_batch(4, 40, Duration::from_millis(100));
        let text = metrics.encode(7).unwrap();
        for line in [
            "transformer_http_requests_total{endpoint=\"translate\",status=\"200\"} 2",
            "transformer_http_requests_total{endpoint=\"translate\",status=\"429\"} 1",
            "transformer_sentences_total 4",
            "transformer_generated_tokens_total 40",
            "transformer_tokens_per_second 400.0",
            "transformer_queued_sentences 7",
            "transformer_http_request_duration_seconds_count{endpoint=\"translate\"} 3",
        ] {
            assert!(text.lines().any(|l| l == line), "no {line:?} in\n{text}");
        }
    }
}
