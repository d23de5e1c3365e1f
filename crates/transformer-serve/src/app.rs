//! What every handler shares: the queue, the limits, the key, the metrics, and the checks
//! and the wait every translation request goes through.

use std::sync::Arc;
use std::time::Duration;

use super::auth::ApiKey;
use super::batcher::{Queue, Refused, Reply};
use super::body;
use super::error::ApiError;
use super::files::FileStore;
use super::languages::{Checked, Languages};
use super::prometheus::ServerCounters;
use super::setting_names::ServeSettingNames;
use transformer::infer::settings::{DecodeRequest, DecodeSettings};
use transformer::infer::translator::Translation;
use transformer::infer::Translator;
use transformer::sentences::SentenceSplitter;

/// What a request may ask for.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Largest request body.
    pub max_body_bytes: usize,
    /// Longest text (`q` or one of its list), in characters.
    pub max_chars: usize,
    /// Most texts in one `q` list.
    pub max_texts: usize,
    /// Most source tokens times beam width in one request.
    pub max_request_tokens: usize,
    /// Longest a request may take, from its arrival to its answer.
    pub timeout: Duration,
}

/// Everything the handlers share.
pub struct AppState {
    pub translator: Arc<Translator>,
    pub queue: Queue,
    pub metrics: Arc<ServerCounters>,
    pub languages: Languages,
    pub key: ApiKey,
    pub limits: Limits,
    /// How answers name the settings.
    pub names: ServeSettingNames,
    /// Resolves each request's decoding settings over the checkpoint's and the flags'.
    pub decode: DecodeSettings,
    pub max_batch: usize,
    /// The device, as `/health` reports it.
    pub device: String,
    /// How texts are cut into sentences.
    pub splitter: SentenceSplitter,
    /// Translated files waiting for download; `None` when file translation is off.
    pub files: Option<FileStore>,
    /// The address asked for, and the one listened on once bound (`--port 0` picks one),
    /// for download links when a request has no usable Host header.
    pub addr: std::net::SocketAddr,
    pub listening: std::sync::OnceLock<std::net::SocketAddr>,
}

pub type Shared = Arc<AppState>;

impl AppState {
    /// `options` in a request's checked languages (a multilingual model's tokens), and the
    /// splitter for its source.
    pub fn in_languages(
        &self,
        checked: &Checked,
        options: DecodeSettings,
    ) -> Result<(DecodeSettings, SentenceSplitter), ApiError> {
        if !self.languages.multilingual() {
            return Ok((options, self.splitter.clone()));
        }
        let pair = &checked.pair;
        let languages = self
            .translator
            .language_ids(&pair.source, &pair.target)
            .map_err(|e| ApiError::bad_request(format!("invalid request: {e:#}")))?;
        let splitter = SentenceSplitter::new(Some(&pair.source), self.splitter.enabled());
        Ok((options.with_languages(languages), splitter))
    }

    /// A request's decoding settings (named as its endpoint names them) over the server's;
    /// a value out of bounds is a 400 that names it.
    pub fn decode_settings(&self, request: DecodeRequest) -> Result<DecodeSettings, ApiError> {
        self.decode
            .ask(request)
            .map_err(|e| ApiError::bad_request(format!("invalid request: {e}")))
    }

    /// Checks that a request's `q` holds no more texts than allowed (`/detect` reads no more
    /// either).
    pub fn check_count(&self, texts: &[String]) -> Result<(), ApiError> {
        if texts.len() > self.limits.max_texts {
            return Err(ApiError::bad_request(format!(
                "invalid request: q holds {} texts, more than this server's limit of {} \
                 ({}); send them in several requests",
                texts.len(),
                self.limits.max_texts,
                self.names.max_texts
            )));
        }
        Ok(())
    }

    /// Checks a request's `texts`, cut into `sentences` to be decoded with `options`,
    /// against the limits before they are queued: their number, the character limit, the
    /// source tokens the model can read (a longer sentence would be cut), and the request's
    /// cost: the tokens each sentence may read and generate (its `max_len`, else its length
    /// + 50), times the beam. The cost bounds how long one request can hold the model.
    pub fn check_texts(
        &self,
        texts: &[String],
        sentences: &[String],
        options: &DecodeSettings,
    ) -> Result<(), ApiError> {
        self.check_count(texts)?;
        for (i, text) in texts.iter().enumerate() {
            let chars = text.chars().count();
            if chars > self.limits.max_chars {
                return Err(ApiError::bad_request(format!(
                    "invalid request: text {} has {chars} characters, more than this server's \
                     limit of {} ({}); split it",
                    i + 1,
                    self.limits.max_chars,
                    self.names.max_chars
                )));
            }
        }
        let max_positions = self.translator.checkpoint().config.model.max_len;
        let limit = self.translator.source_limit();
        let readable = limit.tokens;
        let beam = options.beam.max(1);
        let mut cost = 0usize;
        for sentence in sentences {
            let tokens = self
                .translator
                .checkpoint()
                .tokenizers
                .src
                .encode(sentence)
                .map_err(|e| ApiError::bad_request(format!("invalid request: {e:#}")))?
                .ids
                .len();
            if tokens > readable {
                return Err(ApiError::bad_request(format!(
                    "invalid request: the sentence {:?} has {tokens} tokens, more than the \
                     {readable} this model reads ({}); split it into shorter sentences",
                    super::error::truncate_chars(sentence, 40),
                    limit.reason()
                )));
            }
            let generated = options.max_steps(tokens, max_positions);
            cost = cost.saturating_add((tokens + 1 + generated).saturating_mul(beam));
        }
        if cost > self.limits.max_request_tokens {
            return Err(ApiError::bad_request(format!(
                "invalid request: it may decode {cost} tokens (the tokens each sentence reads \
                 and may generate, times the beam of {beam}), more than this server's limit of \
                 {} per request ({}); send fewer or shorter texts, a smaller max_len or a \
                 narrower beam",
                self.limits.max_request_tokens, self.names.max_request_tokens
            )));
        }
        Ok(())
    }

    /// The answer to work the queue would not take.
    pub fn refused(&self, why: Refused) -> ApiError {
        match why {
            Refused::Full { queued, capacity } => ApiError::too_many_requests(format!(
                "slow down: the server's queue holds {queued} of {capacity} sentences ({}); \
                 retry in a moment",
                self.names.max_queue
            )),
            Refused::Stopped => {
                ApiError::unavailable("the server is stopping; retry elsewhere or later")
            }
        }
    }

    /// A request's body as `T` (see [`body::parse`]), within the server's body limit, and
    /// its API key (`key_of` the request) checked: every handler's first steps.
    pub fn accept<T: serde::de::DeserializeOwned>(
        &self,
        headers: &axum::http::HeaderMap,
        body: Result<axum::body::Bytes, axum::extract::rejection::BytesRejection>,
        accepts: body::Accepts,
        key_of: impl FnOnce(&T) -> Option<String>,
    ) -> Result<T, ApiError> {
        let limit = (self.limits.max_body_bytes, self.names.max_body_bytes);
        let request = body::parse(headers, body, limit, accepts)?;
        self.key.check(key_of(&request).as_deref())?;
        Ok(request)
    }

    /// Queues `sentences` and waits for their translations.
    pub async fn translate(
        &self,
        sentences: Vec<String>,
        options: DecodeSettings,
    ) -> Result<Vec<Translation>, ApiError> {
        if sentences.len() > self.queue.capacity() {
            return Err(ApiError::bad_request(format!(
                "invalid request: {} sentences are more than this server queues at once ({}, \
                 {}); send them in several requests",
                sentences.len(),
                self.queue.capacity(),
                self.names.max_queue
            )));
        }
        let reply = self
            .queue
            .translate(sentences, options)
            .map_err(|why| self.refused(why))?;
        answer(reply).await
    }
}

/// The model thread's answer to queued work.
pub async fn answer<T>(reply: Reply<T>) -> Result<T, ApiError> {
    match reply.await {
        Ok(Ok(value)) => Ok(value),
        Ok(Err(message)) => Err(ApiError::internal(format!("translation failed: {message}"))),
        Err(_) => Err(ApiError::internal(
            "translation failed: the model thread stopped; restart the server",
        )),
    }
}
