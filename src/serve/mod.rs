//! `transformer serve`: a translation server on axum (tokio) that LibreTranslate's clients
//! talk to unchanged, with an API of its own for the decoding settings, a page with the
//! attention heatmap, health and Prometheus metrics.
//!
//! One thread owns the model and decodes (see [`batcher`]); the async side parses, checks
//! and queues requests and never blocks on the model. On SIGINT or SIGTERM the server stops
//! accepting connections, answers what is in flight and returns.

mod app;
mod auth;
mod batcher;
mod body;
mod error;
mod languages;
mod libretranslate;
mod metrics;
mod native;
mod page;
mod routes;

use std::net::SocketAddr;
use std::sync::Arc;

use anyhow::Context;
use candle_core::Device;

pub use app::Limits;
pub use batcher::BatchPolicy;

use crate::checkpoint::Checkpoint;
use crate::infer::translator::DecodeOptions;
use app::AppState;
use auth::ApiKey;
use languages::LanguagePair;
use metrics::Metrics;

/// How to serve.
#[derive(Debug, Clone)]
pub struct ServeSettings {
    pub addr: SocketAddr,
    pub policy: BatchPolicy,
    pub limits: Limits,
    pub api_key: Option<String>,
    /// Decoding for requests that name no settings (the checkpoint's `[decode]`).
    pub defaults: DecodeOptions,
}

/// Serves `checkpoint` (a translation model) on `device` until SIGINT or SIGTERM; returns
/// once the requests in flight are answered. `ready` is told the address listened on.
///
/// The calling thread decodes (it should be the command's, one of rayon's: see
/// [`batcher::queue`]); HTTP runs on a runtime of its own threads.
pub fn serve(
    checkpoint: Checkpoint,
    device: Device,
    settings: ServeSettings,
    ready: impl FnOnce(SocketAddr) + Send + 'static,
) -> anyhow::Result<()> {
    checkpoint.translation()?;
    let pair = language_pair(&checkpoint)?;
    let checkpoint = Arc::new(checkpoint);
    let metrics = Arc::new(Metrics::new());
    let device_name = crate::device::describe(&device);
    let (queue, worker) = batcher::queue(
        checkpoint.clone(),
        device,
        settings.defaults,
        settings.policy,
        metrics.clone(),
    );
    let state = Arc::new(AppState {
        checkpoint,
        queue,
        metrics,
        pair,
        key: ApiKey::new(settings.api_key),
        limits: settings.limits,
        defaults: settings.defaults,
        max_batch: settings.policy.max_batch,
        device: device_name,
    });
    let addr = settings.addr;
    let http = std::thread::Builder::new()
        .name("http".into())
        .spawn(move || serve_http(state, addr, ready))
        .context("cannot start the HTTP thread")?;
    // Returns when the HTTP side is gone (and with it the last queue sender) and what it
    // queued is answered.
    worker.run();
    match http.join() {
        Ok(served) => served,
        Err(_) => anyhow::bail!("the HTTP thread panicked"),
    }
}

/// Listens on `addr` and answers until a stop is requested and the requests in flight are
/// answered.
fn serve_http(
    state: Arc<AppState>,
    addr: SocketAddr,
    ready: impl FnOnce(SocketAddr),
) -> anyhow::Result<()> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("http")
        .enable_all()
        .build()
        .context("cannot start the HTTP runtime")?;
    runtime.block_on(async move {
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .with_context(|| format!("cannot listen on {addr}; pick another --port or --host"))?;
        ready(listener.local_addr()?);
        axum::serve(listener, routes::router(state))
            .with_graceful_shutdown(stop_requested())
            .await
            .context("the HTTP server failed")
    })
}

/// The checkpoint's `data.source_lang` and `data.target_lang`, which clients name.
fn language_pair(checkpoint: &Checkpoint) -> anyhow::Result<LanguagePair> {
    let data = &checkpoint.config.data;
    match (&data.source_lang, &data.target_lang) {
        (Some(source), Some(target)) => Ok(LanguagePair {
            source: source.clone(),
            target: target.clone(),
        }),
        _ => anyhow::bail!(
            "{} does not say which languages it translates; add data.source_lang and \
             data.target_lang (e.g. \"de\" and \"en\") to its config.toml, or to the training \
             config for new runs",
            checkpoint.dir.display()
        ),
    }
}

/// Resolves on the first SIGINT or SIGTERM, and says on stderr that the server is stopping.
async fn stop_requested() {
    let interrupt = tokio::signal::ctrl_c();
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        _ = interrupt => {}
        _ = terminate => {}
    }
    eprintln!("stopping: no new connections; answering the requests in flight");
}
