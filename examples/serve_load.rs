//! A bounded load on a `transformer serve` over loopback, for scripts/bench-serve.sh: `--clients`
//! threads each send single-sentence LibreTranslate requests, one after another, until
//! every sentence of `--sentences` (one per line) has been sent once. Prints one JSON line:
//! sentences per second over the whole load, and the p50 and p99 latency.
//!
//!   cargo run --release --example serve_load -- --url http://127.0.0.1:5000 \
//!     --sentences de.txt --clients 8

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

fn main() {
    if let Err(e) = run() {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}

struct Args {
    url: String,
    sentences: Vec<String>,
    clients: usize,
    source: String,
    target: String,
}

fn parse_args() -> Result<Args, String> {
    let mut args = std::env::args().skip(1);
    let (mut url, mut file, mut clients) = (None, None, 1);
    let (mut source, mut target) = ("de".to_string(), "en".to_string());
    while let Some(flag) = args.next() {
        let mut value = || args.next().ok_or(format!("{flag} needs a value"));
        match flag.as_str() {
            "--url" => url = Some(value()?),
            "--sentences" => file = Some(value()?),
            "--clients" => {
                clients = value()?
                    .parse()
                    .map_err(|_| "--clients must be a whole number".to_string())?
            }
            "--source" => source = value()?,
            "--target" => target = value()?,
            other => return Err(format!("unknown flag {other}")),
        }
    }
    let url = url.ok_or("--url is required")?;
    let file = file.ok_or("--sentences is required")?;
    let text = std::fs::read_to_string(&file).map_err(|e| format!("reading {file}: {e}"))?;
    let sentences: Vec<String> = text.lines().map(str::to_string).collect();
    if !url.starts_with("http://127.") && !url.starts_with("http://localhost") {
        return Err(format!(
            "{url} is not loopback; this load generator only sends to 127.x"
        ));
    }
    Ok(Args {
        url,
        sentences,
        clients: clients.max(1),
        source,
        target,
    })
}

fn run() -> Result<(), String> {
    let args = parse_args()?;
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .timeout_global(Some(Duration::from_secs(120)))
        .max_idle_connections(args.clients * 2)
        .max_idle_connections_per_host(args.clients * 2)
        .build()
        .into();
    let endpoint = format!("{}/translate", args.url.trim_end_matches('/'));
    let next = AtomicUsize::new(0);
    let latencies = Mutex::new(Vec::with_capacity(args.sentences.len()));
    let failures = AtomicUsize::new(0);
    let started = Instant::now();
    std::thread::scope(|scope| {
        for _ in 0..args.clients {
            scope.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(sentence) = args.sentences.get(i) else {
                    break;
                };
                let body = serde_json::json!({
                    "q": sentence, "source": args.source, "target": args.target,
                });
                let sent = Instant::now();
                let ok = agent
                    .post(&endpoint)
                    .header("Content-Type", "application/json")
                    .send(body.to_string())
                    .and_then(|mut r| r.body_mut().read_to_string())
                    .is_ok();
                let elapsed = sent.elapsed();
                if ok {
                    latencies.lock().unwrap().push(elapsed);
                } else {
                    failures.fetch_add(1, Ordering::Relaxed);
                }
            });
        }
    });
    let seconds = started.elapsed().as_secs_f64();
    let mut latencies = latencies.into_inner().unwrap();
    latencies.sort();
    let quantile = |q: f64| {
        let i = ((latencies.len() as f64 * q).ceil() as usize).clamp(1, latencies.len().max(1));
        latencies
            .get(i - 1)
            .map_or(0.0, |d| d.as_secs_f64() * 1000.0)
    };
    println!(
        "{}",
        serde_json::json!({
            "clients": args.clients,
            "sentences": latencies.len(),
            "failed": failures.load(Ordering::Relaxed),
            "seconds": seconds,
            "sentences_per_second": latencies.len() as f64 / seconds,
            "p50_ms": quantile(0.50),
            "p99_ms": quantile(0.99),
        })
    );
    Ok(())
}
