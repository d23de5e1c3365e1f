//! `transformer serve`: flags -> checkpoint, device and limits -> the server.
//!
//! Its arguments: where to listen, batching, every limit, the key, decoding.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::Args;

use crate::flags::{at_least_one, DecodeSettingsArgs, DeviceArgs};
use crate::infer::OnePairLanguages;
use crate::progress::Verbosity;
use crate::serve::{
    serve, BatchPolicy, ConnectionLimits, FileSettings, Limits, ServeSettings, WIDEST_BEAM,
};
use crate::stop_signals::StopSignals;

#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Checkpoint or run directory (a run's best/, else last/); default: the translation run
    /// under runs/ written most recently
    #[arg(long, value_name = "DIR")]
    pub checkpoint: Option<PathBuf>,
    /// Address to listen on; 0.0.0.0 or :: opens the server to other machines
    #[arg(long, default_value = "127.0.0.1", value_name = "ADDR")]
    pub host: std::net::IpAddr,
    /// Port to listen on (0: any free port, named on stderr)
    #[arg(long, default_value_t = 5000, value_name = "PORT")]
    pub port: u16,
    /// Most sentences decoded together, from however many requests
    #[arg(long, default_value_t = 32, value_name = "N", value_parser = at_least_one)]
    pub max_batch: usize,
    /// Longest the first sentence of a batch waits for others to join it, in milliseconds
    #[arg(long, default_value_t = 5, value_name = "MS")]
    pub max_wait_ms: u64,
    /// Most sentences waiting or being decoded; requests beyond it get 429 at once
    #[arg(long, default_value_t = 1024, value_name = "N", value_parser = at_least_one)]
    pub max_queue: usize,
    /// Longest a request may take, from its arrival to its answer (503 after), in milliseconds
    #[arg(long, default_value_t = 30_000, value_name = "MS", value_parser = at_least_one)]
    pub timeout_ms: usize,
    /// Largest request body, in bytes (413 beyond)
    #[arg(long, default_value_t = 256 * 1024, value_name = "BYTES", value_parser = at_least_one)]
    pub max_body_bytes: usize,
    /// Longest text, in characters (400 beyond)
    #[arg(long, default_value_t = 5000, value_name = "N", value_parser = at_least_one)]
    pub max_chars: usize,
    /// Most texts in one request's q list (400 beyond)
    #[arg(long, default_value_t = 128, value_name = "N", value_parser = at_least_one)]
    pub max_texts: usize,
    /// Most source tokens times beam width one request may ask to decode (400 beyond): what
    /// bounds the time one request can hold the model
    #[arg(long, default_value_t = 16_384, value_name = "N", value_parser = at_least_one)]
    pub max_request_tokens: usize,
    /// Most connections open at once; more are answered 503 and closed
    #[arg(long, default_value_t = 256, value_name = "N", value_parser = at_least_one)]
    pub max_connections: usize,
    /// Most connections open at once from one client address [default: a quarter of
    /// --max-connections]; behind a reverse proxy, whose connections all come from one
    /// address, set it to --max-connections
    #[arg(long, value_name = "N", value_parser = at_least_one)]
    pub max_connections_per_client: Option<usize>,
    /// Longest a client may take to send a request's head, all of it, from the moment its
    /// connection opens or its last answer ends, in milliseconds (the connection is closed
    /// after: this also closes an idle connection)
    #[arg(long, default_value_t = 10_000, value_name = "MS", value_parser = at_least_one)]
    pub header_timeout_ms: usize,
    /// Key every translation request must carry (api_key, or Authorization: Bearer on /v1);
    /// default: none needed. Also read from TRANSFORMER_API_KEY, which keeps it out of `ps`
    #[arg(
        long,
        value_name = "KEY",
        env = "TRANSFORMER_API_KEY",
        hide_env_values = true
    )]
    pub api_key: Option<String>,
    /// Translate each line of a text as one sentence, instead of cutting it into sentences
    #[arg(long)]
    pub no_sentence_split: bool,
    /// Answer /translate_file with 403 (LibreTranslate's flag)
    #[arg(long)]
    pub disable_files_translation: bool,
    /// Where translated files wait for download (only files named as servers name them are
    /// written or removed there), shared with other servers and kept across restarts until
    /// their links expire; default: this user's own under the system's temporary directory
    #[arg(long, value_name = "DIR")]
    pub files_dir: Option<PathBuf>,
    /// How long a /download_file link works, in seconds
    #[arg(long, default_value_t = 1800, value_name = "S", value_parser = at_least_one)]
    pub file_ttl_s: usize,
    /// Most translated files kept at once; the oldest goes first
    #[arg(long, default_value_t = 256, value_name = "N", value_parser = at_least_one)]
    pub max_files: usize,
    /// Largest file /translate_file takes, in bytes (413 beyond)
    #[arg(long, default_value_t = 2 << 20, value_name = "BYTES", value_parser = at_least_one)]
    pub max_file_bytes: usize,
    /// Most characters of text one file may hold (400 beyond)
    #[arg(long, default_value_t = 100_000, value_name = "N", value_parser = at_least_one)]
    pub max_file_chars: usize,
    /// Longest translating one file may take, in milliseconds (503 after)
    #[arg(long, default_value_t = 600_000, value_name = "MS", value_parser = at_least_one)]
    pub file_timeout_ms: usize,
    /// Decoding for requests that name no settings (all of LibreTranslate's)
    #[command(flatten)]
    pub decode: DecodeSettingsArgs,
    #[command(flatten)]
    pub device: DeviceArgs,
}

/// How the server's answers and errors name its settings: by these flags.
pub const NAMES: crate::serve::ServeSettingNames = crate::serve::ServeSettingNames {
    max_body_bytes: "serve --max-body-bytes",
    max_chars: "serve --max-chars",
    max_texts: "serve --max-texts",
    max_request_tokens: "serve --max-request-tokens",
    max_queue: "serve --max-queue",
    timeout: "serve --timeout-ms",
    file_timeout: "serve --file-timeout-ms",
    max_file_bytes: "serve --max-file-bytes",
    max_file_chars: "serve --max-file-chars",
    max_connections: "serve --max-connections",
    api_key: "serve --api-key",
    files_dir: "--files-dir",
    files_off: "serve --disable-files-translation",
    address: "another --port or --host",
    languages: "--source-lang and --target-lang",
};

pub fn run(args: ServeArgs) -> anyhow::Result<()> {
    let device = crate::device_choice::device_from(&args.device, Verbosity::Normal)?;
    let translator = crate::open_checkpoint::open_translator(
        args.checkpoint.as_deref(),
        &device,
        args.decode.load_options(OnePairLanguages::Rename),
    )?;
    let decode =
        crate::open_checkpoint::decode_settings(&args.decode, &translator, Some(WIDEST_BEAM))?;
    let settings = ServeSettings {
        addr: SocketAddr::new(args.host, args.port),
        policy: BatchPolicy {
            max_batch: args.max_batch,
            max_wait: Duration::from_millis(args.max_wait_ms),
            capacity: args.max_queue,
        },
        limits: Limits {
            max_body_bytes: args.max_body_bytes,
            max_chars: args.max_chars,
            max_texts: args.max_texts,
            max_request_tokens: args.max_request_tokens,
            timeout: Duration::from_millis(args.timeout_ms as u64),
        },
        connections: ConnectionLimits {
            max_connections: args.max_connections,
            max_per_client: args
                .max_connections_per_client
                .unwrap_or((args.max_connections / 4).max(1))
                .min(args.max_connections),
            header_timeout: Duration::from_millis(args.header_timeout_ms as u64),
            // What a request already being read or decoded may still take.
            drain: Duration::from_millis(
                (args.timeout_ms.max(args.file_timeout_ms) + args.header_timeout_ms) as u64,
            ),
        },
        api_key: args.api_key.filter(|key| !key.is_empty()),
        pair_names: (
            args.decode.source_lang.clone(),
            args.decode.target_lang.clone(),
        ),
        decode,
        sentence_split: !args.no_sentence_split,
        files: (!args.disable_files_translation).then(|| FileSettings {
            dir: args.files_dir.clone(),
            ttl: Duration::from_secs(args.file_ttl_s as u64),
            max_files: args.max_files,
            max_file_bytes: args.max_file_bytes,
            max_file_chars: args.max_file_chars,
            timeout: Duration::from_millis(args.file_timeout_ms as u64),
        }),
        names: NAMES,
    };
    let loaded = translator.checkpoint();
    let data = &loaded.config.data;
    let languages = match (translator.languages(), &data.source_lang, &data.target_lang) {
        (Some(codes), Some(source), Some(target)) => {
            format!("{} languages, {source} -> {target} by default", codes.len())
        }
        (Some(codes), _, _) => format!("{} languages", codes.len()),
        (None, source, target) => format!(
            "{} -> {}",
            source.as_deref().unwrap_or(""),
            target.as_deref().unwrap_or("")
        ),
    };
    let dir = loaded.dir.display().to_string();
    let open_to_others = !args.host.is_loopback();
    let policy = settings.policy;
    let key = settings.api_key.is_some();
    let compute = loaded.config.decode.compute_type.name();
    // Listening for the signals before the server says it is ready: a SIGTERM that came
    // between the two would otherwise kill the process with nothing answered.
    let shutdown = shutdown_on_signals()?;
    let ready = move |addr: SocketAddr| {
        eprintln!(
            "serving {dir} ({languages}, {compute}) on http://{addr} (batches of up to \
             {} sentences, waiting up to {} ms; queue {}{}); Ctrl-C stops",
            policy.max_batch,
            policy.max_wait.as_millis(),
            policy.capacity,
            if key { "; API key required" } else { "" },
        );
        if open_to_others {
            eprintln!(
                "warning: listening on {addr}, reachable from other machines{}",
                if key {
                    ""
                } else {
                    " by anyone: consider --api-key"
                }
            );
        }
    };
    serve(translator, settings, ready, shutdown)?;
    eprintln!("stopped: every request in flight was answered");
    Ok(())
}

/// Resolves on the first SIGINT or SIGTERM, saying on stderr that the server is stopping; a
/// second one ends the process at once, whatever is still in flight.
fn shutdown_on_signals() -> anyhow::Result<impl std::future::Future<Output = ()>> {
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let on_first = move |_| {
        eprintln!(
            "stopping: no new connections; answering the requests in flight (a second signal \
             stops at once)"
        );
        let _ = stop.send(());
    };
    // Kept for the life of the process: the listening thread holds what it needs.
    let _signals = StopSignals::install(on_first, "requests in flight were dropped")?;
    Ok(async move {
        let _ = stopped.await;
    })
}
