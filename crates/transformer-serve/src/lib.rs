//! `transformer serve`: a translation server on axum (tokio) that LibreTranslate's clients
//! talk to unchanged, with an API of its own for the decoding settings, a page with the
//! attention heatmap, health and Prometheus metrics.
//!
//! One thread owns the model and decodes (see [`batcher`]); the async side parses, checks
//! and queues requests and never blocks on the model. When the caller's `shutdown` future
//! resolves, the server stops accepting connections, answers what is in flight and returns
//! (the binary resolves it on SIGINT or SIGTERM, and exits at once on a second).

mod app;
mod auth;
mod batcher;
mod body;
mod connections;
mod documents;
mod error;
mod file_names;
mod files;
mod languages;
mod libretranslate;
mod native;
mod page;
mod prometheus;
mod routes;
mod setting_names;
mod spec;

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;

use anyhow::Context;

pub use app::Limits;
pub use batcher::BatchPolicy;
pub use connections::ConnectionLimits;
pub use files::FileSettings;
pub use setting_names::ServeSettingNames;

use app::AppState;
use auth::ApiKey;
use files::FileStore;
use languages::{LanguagePair, Languages};
use prometheus::ServerCounters;
use transformer::infer::settings::DecodeSettings;
use transformer::infer::Translator;
use transformer::sentences::SentenceSplitter;

/// How to serve.
#[derive(Debug, Clone)]
pub struct ServeSettings {
    pub addr: SocketAddr,
    pub policy: BatchPolicy,
    pub limits: Limits,
    pub connections: ConnectionLimits,
    pub api_key: Option<String>,
    /// What clients call a model of one pair's source and target where the flags rename
    /// them (`None`: the checkpoint's own names); its sentences are still cut by its own
    /// source language's rules.
    pub pair_names: (Option<String>, Option<String>),
    /// Decoding settings below a request's: the checkpoint's `[decode]`, then the flags.
    pub decode: DecodeSettings,
    /// Whether texts are cut into sentences (else each line is one).
    pub sentence_split: bool,
    /// Where and how long translated files are kept; `None`: `/translate_file` is off.
    pub files: Option<FileSettings>,
    /// How answers and errors name these settings.
    pub names: ServeSettingNames,
}

/// Widest beam a request may ask for: each beam is a decoder row, so this bounds the work
/// one sentence can cost.
pub const WIDEST_BEAM: usize = 32;

/// Serves `translator` until `shutdown` resolves; returns once the requests in flight are
/// answered. `ready` is told the address listened on.
///
/// The calling thread decodes (it should be the command's, one of rayon's: see
/// [`batcher::queue`]); HTTP runs on a runtime of its own threads.
pub fn serve(
    translator: Translator,
    settings: ServeSettings,
    ready: impl FnOnce(SocketAddr) + Send + 'static,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    let names = settings.names;
    let languages = languages(&translator, &settings.pair_names, names.languages)?;
    let own_source = translator.checkpoint().config.data.source_lang.clone();
    let splitter = SentenceSplitter::new(
        Some(&own_source.unwrap_or_else(|| languages.first_pair().source)),
        settings.sentence_split,
    );
    let files = settings
        .files
        .map(|files| FileStore::open(files, names.files_dir))
        .transpose()?;
    let translator = Arc::new(translator);
    let metrics = Arc::new(ServerCounters::new());
    let device_name = transformer::device::describe(translator.device());
    let (queue, worker) = batcher::queue(translator.clone(), settings.policy, metrics.clone());
    let state = Arc::new(AppState {
        translator,
        queue,
        metrics,
        languages,
        key: ApiKey::new(settings.api_key, names.api_key),
        limits: settings.limits,
        names,
        decode: settings.decode,
        max_batch: settings.policy.max_batch,
        device: device_name,
        splitter,
        files,
        addr: settings.addr,
        listening: std::sync::OnceLock::new(),
    });
    let addr = settings.addr;
    let connections = settings
        .connections
        .within_open_file_limit(names.max_connections);
    let http = std::thread::Builder::new()
        .name("http".into())
        .spawn(move || serve_http(state, addr, connections, ready, shutdown))
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
    connections: ConnectionLimits,
    ready: impl FnOnce(SocketAddr),
    shutdown: impl Future<Output = ()> + Send + 'static,
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
            .with_context(|| format!("cannot listen on {addr}; pick {}", state.names.address))?;
        let _ = state.listening.set(listener.local_addr()?);
        ready(listener.local_addr()?);
        // Expired download links' files go within a minute of expiring.
        let sweeper = state.clone();
        tokio::spawn(async move {
            let mut every = tokio::time::interval(std::time::Duration::from_secs(60));
            loop {
                every.tick().await;
                if let Some(files) = &sweeper.files {
                    files.sweep();
                }
            }
        });
        let limit_name = state.names.max_connections;
        let router = routes::router(state);
        connections::serve(listener, router, connections, limit_name, shutdown).await;
        Ok(())
    })
}

/// The languages `translator` translates: a multilingual model's codes, with the pair named
/// at start (if any) as the default; else the checkpoint's `data.source_lang` and
/// `data.target_lang` or the `renamed` names clients use for them, and where it names none,
/// the error says to give them as `setting`.
fn languages(
    translator: &Translator,
    renamed: &(Option<String>, Option<String>),
    setting: &str,
) -> anyhow::Result<Languages> {
    let checkpoint = translator.checkpoint();
    let data = &checkpoint.config.data;
    let multilingual = translator.languages().is_some();
    let named = |renamed: &Option<String>, own: &Option<String>| {
        renamed
            .clone()
            .filter(|_| !multilingual)
            .or_else(|| own.clone())
    };
    let (source, target) = (
        named(&renamed.0, &data.source_lang),
        named(&renamed.1, &data.target_lang),
    );
    let default = match (source, target) {
        (Some(source), Some(target)) => Some(LanguagePair { source, target }),
        _ => None,
    };
    if let Some(codes) = translator.languages() {
        return Ok(Languages { default, codes });
    }
    if default.is_some() {
        return Ok(Languages {
            default,
            codes: Vec::new(),
        });
    }
    if transformer::checkpoint::hugging_face::is_hugging_face_dir(&checkpoint.dir) {
        anyhow::bail!(
            "{} does not say which languages it translates; pass {setting} (e.g. de and en), \
             or add source_lang and target_lang to its tokenizer_config.json",
            checkpoint.dir.display()
        )
    }
    anyhow::bail!(
        "{} does not say which languages it translates; pass {setting} (e.g. de and en), \
         or add data.source_lang and data.target_lang to its config.toml (or to the \
         training config for new runs)",
        checkpoint.dir.display()
    )
}
