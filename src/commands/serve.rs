//! `transformer serve`: flags -> checkpoint, device and limits -> the server.

use std::net::SocketAddr;
use std::time::Duration;

use super::stop_signals::StopSignals;
use crate::cli::ServeArgs;
use crate::progress::Verbosity;
use crate::serve::{
    serve, BatchPolicy, ConnectionLimits, FileSettings, Limits, ServeSettings, WIDEST_BEAM,
};

pub fn run(args: ServeArgs) -> anyhow::Result<()> {
    let device = super::device_from(&args.device, Verbosity::Normal)?;
    let translator = super::open_translator(
        args.checkpoint.as_deref(),
        &device,
        args.decode.load_options(),
        super::OnePairLanguages::Rename,
    )?;
    let decode = super::decode_resolver(&args.decode, &translator, Some(WIDEST_BEAM))?;
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
        names: crate::cli::SERVE_NAMES,
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
