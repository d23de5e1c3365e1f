//! `transformer serve`'s flags: where to listen, batching, every limit, the key, decoding.

use std::path::PathBuf;

use clap::Args;

use super::{at_least_one, DecodeSettingsArgs, DeviceArgs};

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
