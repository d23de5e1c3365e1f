//! Models from the Hugging Face Hub by name: `Helsinki-NLP/opus-mt-de-en` (optionally
//! `@revision`) becomes a directory of the files the model's family needs, downloaded into
//! the standard cache (`HF_HUB_CACHE`, else `HF_HOME/hub`, else
//! `~/.cache/huggingface/hub`) where Python's tools find them too, and found there again
//! without a download. `HF_ENDPOINT` and `HF_TOKEN` are honoured, `HF_HUB_OFFLINE=1` reads
//! the cache only, and every file is checked against the size and hash the Hub lists before
//! it is kept.
//!
//! The `hf-hub` crate is not used: its blocking client has no timeouts (a stalled server
//! hangs it), keeps a file that arrived short, and knows neither `HF_HUB_CACHE` nor
//! `HF_HUB_OFFLINE`; its 1.x line brings reqwest and the Xet storage client. This is the
//! part of it decoding needs, on ureq (the cache's layout is `huggingface_hub`'s).

mod cache;
mod file_hash;
mod listing;
mod name;
mod remote;

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context};

use crate::progress::Progress;
use cache::CachedModel;
pub use name::HubName;
pub use remote::Refused;
use remote::{HubError, Sibling};

/// The Hub's address when `HF_ENDPOINT` does not say.
pub const DEFAULT_ENDPOINT: &str = "https://huggingface.co";

/// How long a request may wait for an answer, and a download for its next bytes, when
/// `HF_HUB_DOWNLOAD_TIMEOUT` does not say (huggingface_hub waits 10 s).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);

/// The files of a model directory this tool reads, any of them that the model has: configs,
/// tokenizers of every family, and the weights (safetensors preferred, see [`WEIGHTS`]).
const WANTED: &[&str] = &[
    "config.json",
    "generation_config.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "vocab.json",
    "target_vocab.json",
    "source.spm",
    "target.spm",
    "sentencepiece.bpe.model",
    "tokenizer.json",
];

/// Weights files in order of preference: the first the model has is fetched.
const WEIGHTS: &[&str] = &["model.safetensors", "pytorch_model.bin"];

/// Where and how to reach the Hub, from the environment.
#[derive(Debug, Clone)]
pub struct HubSettings {
    pub endpoint: String,
    pub token: Option<String>,
    pub cache: PathBuf,
    /// Read the cache only (`HF_HUB_OFFLINE`).
    pub offline: bool,
    /// Deadline for an answer and for each read of a download.
    pub timeout: Duration,
}

impl HubSettings {
    /// `HF_ENDPOINT`, `HF_TOKEN` (else the token file `huggingface-cli login` writes),
    /// `HF_HUB_CACHE` / `HF_HOME`, `HF_HUB_OFFLINE` and `HF_HUB_DOWNLOAD_TIMEOUT`, as
    /// huggingface_hub reads them.
    pub fn from_env() -> anyhow::Result<Self> {
        let var = |name: &str| std::env::var(name).ok().filter(|v| !v.trim().is_empty());
        let home = var("HF_HOME").map(PathBuf::from).or_else(|| {
            let cache = var("XDG_CACHE_HOME")
                .map(PathBuf::from)
                .or_else(|| var("HOME").map(|h| PathBuf::from(h).join(".cache")))?;
            Some(cache.join("huggingface"))
        });
        let cache = match var("HF_HUB_CACHE").map(PathBuf::from) {
            Some(cache) => cache,
            None => match &home {
                Some(home) => home.join("hub"),
                None => bail!(
                    "no Hugging Face cache folder: HOME is not set; set HF_HUB_CACHE or HF_HOME"
                ),
            },
        };
        let token = var("HF_TOKEN").or_else(|| {
            let file = var("HF_TOKEN_PATH")
                .map(PathBuf::from)
                .or_else(|| home.as_ref().map(|h| h.join("token")))?;
            let text = std::fs::read_to_string(file).ok()?;
            Some(text.trim().to_string()).filter(|t| !t.is_empty())
        });
        if token
            .as_ref()
            .is_some_and(|t| !t.chars().all(|c| c.is_ascii_graphic()))
        {
            bail!(
                "the Hugging Face token (HF_TOKEN, or the token file) holds a space or a control \
                 character: it is not a token"
            )
        }
        let offline = var("HF_HUB_OFFLINE").is_some_and(|v| {
            matches!(v.to_ascii_lowercase().as_str(), "1" | "true" | "yes" | "on")
        });
        Ok(Self {
            endpoint: var("HF_ENDPOINT")
                .unwrap_or_else(|| DEFAULT_ENDPOINT.into())
                .trim_end_matches('/')
                .to_string(),
            token,
            cache,
            offline,
            timeout: remote::seconds_from("HF_HUB_DOWNLOAD_TIMEOUT")?.unwrap_or(DEFAULT_TIMEOUT),
        })
    }
}

/// The local directory of `name`'s files (its snapshot in the cache), downloading what the
/// cache lacks; each download is one pass `progress` follows. A model whose config.json's
/// `model_type` is none of `model_types` (each with the families' names, for the error) is
/// refused before its weights are fetched.
pub fn fetch(
    name: &HubName,
    settings: &HubSettings,
    model_types: &[FamilyFiles],
    progress: &dyn Progress,
) -> anyhow::Result<PathBuf> {
    let cached = CachedModel::new(&settings.cache, name);
    if settings.offline {
        return cached_snapshot(&cached, name, settings).map_err(|_| {
            anyhow::Error::new(Refused(format!(
                "HF_HUB_OFFLINE is set and {name} is not in the cache {}; unset \
                 HF_HUB_OFFLINE to download it",
                settings.cache.display()
            )))
        });
    }
    let agent = remote::agent(settings);
    let revision = match remote::revision(&agent, name, settings) {
        Ok(revision) => revision,
        Err(HubError::Refused(error)) => return Err(error),
        Err(HubError::Unreachable(why)) => {
            // As huggingface_hub: a model already in the cache is used when the Hub is away.
            return match cached_snapshot(&cached, name, settings) {
                Ok(dir) => {
                    log::warn!(
                        "the Hub at {} cannot be reached ({why}); using {name} from the cache",
                        settings.endpoint
                    );
                    Ok(dir)
                }
                Err(_) => bail!(
                    "cannot reach the Hub at {} for {name}: {why}; check the network, \
                     HF_ENDPOINT, or set HF_HUB_OFFLINE=1 to use the cache only",
                    settings.endpoint
                ),
            };
        }
    };
    if !name::is_commit(&revision.sha) {
        bail!(
            "the Hub at {} named commit {:?} for {name}, which is not a commit",
            settings.endpoint,
            revision.sha
        )
    }
    if name.revision_is_commit() && !revision.sha.eq_ignore_ascii_case(&name.revision) {
        bail!(
            "the Hub at {} answered commit {} for {name}, pinned to another",
            settings.endpoint,
            revision.sha
        )
    }
    let files = wanted_files(name, &revision.siblings)?;
    // The config comes first (WANTED's first): a family this tool does not run is refused
    // before the weights are asked for.
    for file in &files {
        if !cached.has(&revision.sha, &file.rfilename, file.expected_size()) {
            // A file listed without its hash (a mirror's list) is checked against the hash
            // its download's answer gives, as huggingface_hub checks it; one already in the
            // cache at this commit is taken from there either way.
            let hashed;
            let file = match file.etag().filter(|e| is_hash(e)) {
                Some(_) => *file,
                None => {
                    let at = (name, revision.sha.as_str(), *file);
                    hashed = file_hash::with_hash_from_etag(&agent, at, settings)?;
                    &hashed
                }
            };
            let at = (name, revision.sha.as_str(), file);
            download_one(&agent, &cached, at, settings, progress)?;
        }
        if file.rfilename == "config.json" {
            let config = cached.snapshot(&revision.sha).join("config.json");
            check_family(name, &config, model_types, &revision.siblings)?;
        }
    }
    if let Err(error) = cached.set_ref(&name.revision, &revision.sha) {
        // The files are all there; only finding them by branch name offline needs the ref.
        log::warn!("{error:#}; {name} is complete, but HF_HUB_OFFLINE runs will not find it");
    }
    Ok(cached.snapshot(&revision.sha))
}

/// The snapshot the cache holds for `name`, with a config.json in it.
fn cached_snapshot(
    cached: &CachedModel,
    name: &HubName,
    settings: &HubSettings,
) -> anyhow::Result<PathBuf> {
    let Some(commit) = cached.commit_of(&name.revision) else {
        bail!(
            "the cache {} has no revision {:?} of {}",
            settings.cache.display(),
            name.revision,
            name.id
        )
    };
    // Weights come last: a snapshot with them was fetched whole.
    let complete = cached.has(&commit, "config.json", None)
        && WEIGHTS.iter().any(|w| cached.has(&commit, w, None));
    if !complete {
        bail!(
            "the cache {} has no complete copy of {name} at {commit}",
            settings.cache.display()
        )
    }
    Ok(cached.snapshot(&commit))
}

/// The listed files this tool reads: every [`WANTED`] one the model has and its preferred
/// weights; an error when it has no config or no weights this tool reads.
fn wanted_files<'a>(name: &HubName, listed: &'a [Sibling]) -> anyhow::Result<Vec<&'a Sibling>> {
    let find = |file: &str| listed.iter().find(|s| s.rfilename == file);
    if find("config.json").is_none() {
        bail!("{name} has no config.json on the Hub: it is not a model directory this tool reads")
    }
    let Some(weights) = WEIGHTS.iter().find_map(|w| find(w)) else {
        bail!(
            "{name} has none of {} on the Hub (sharded or other weights files are not read)",
            WEIGHTS.join(", ")
        )
    };
    let mut files: Vec<&Sibling> = WANTED.iter().filter_map(|w| find(w)).collect();
    files.push(weights);
    Ok(files)
}

/// Whether `etag` is a hash a file can be checked against and named by in the cache: hex,
/// sha1 or sha256 long.
fn is_hash(etag: &str) -> bool {
    name::is_commit(etag) || (etag.len() == 64 && etag.chars().all(|c| c.is_ascii_hexdigit()))
}

/// Downloads one file into the cache, checked, under a progress pass.
fn download_one(
    agent: &ureq::Agent,
    cached: &CachedModel,
    (name, commit, file): (&HubName, &str, &Sibling),
    settings: &HubSettings,
    progress: &dyn Progress,
) -> anyhow::Result<()> {
    let etag = file.etag().unwrap_or_default();
    let partial = cached.partial_blob(&etag)?;
    let read = Arc::new(AtomicU64::new(0));
    let seen = Arc::clone(&read);
    let _pass = progress.data_pass(
        &format!("downloading {}", file.rfilename),
        file.expected_size().unwrap_or(0),
        Box::new(move || seen.load(Ordering::Relaxed)),
    );
    remote::download(agent, (name, commit, file), settings, &partial, &|n| {
        read.fetch_add(n, Ordering::Relaxed);
    })?;
    cached.place(&partial, &etag, commit, &file.rfilename)
}

/// A family of Hugging Face models this tool runs: its `model_type`, its names (for errors)
/// and the files besides config.json and the weights it cannot do without.
pub type FamilyFiles = (&'static str, &'static str, &'static [&'static str]);

/// Refuses a model whose `model_type` (in `config`) is not one this tool runs, or whose
/// revision (`listed`) lacks a file its family needs.
fn check_family(
    name: &HubName,
    config: &std::path::Path,
    model_types: &[FamilyFiles],
    listed: &[Sibling],
) -> anyhow::Result<()> {
    let refused = |why: String| anyhow::Error::new(Refused(why));
    let text = std::fs::read_to_string(config)
        .with_context(|| format!("cannot read {}", config.display()))?;
    let json: serde_json::Value = serde_json::from_str(&text)
        .map_err(|e| refused(format!("{name}'s config.json is not JSON: {e}")))?;
    let found = json
        .get("model_type")
        .and_then(|v| v.as_str())
        .unwrap_or("");
    let Some((_, families, needs)) = model_types.iter().find(|(t, _, _)| *t == found) else {
        let runs: Vec<String> = model_types
            .iter()
            .map(|(t, families, _)| format!("{t:?} ({families})"))
            .collect();
        return Err(refused(format!(
            "{name} is a {found:?} model (config.json's model_type); this tool runs model_type {}",
            runs.join(", ")
        )));
    };
    // A need `a|b` is met by either file.
    let has = |need: &str| {
        need.split('|')
            .any(|file| listed.iter().any(|s| s.rfilename == file))
    };
    if let Some(missing) = needs.iter().find(|need| !has(need)) {
        return Err(refused(format!(
            "{name} has no {} on the Hub, which a {families} model needs (its tokenizer): \
             this tool cannot run it",
            missing.replace('|', " or ")
        )));
    }
    Ok(())
}
