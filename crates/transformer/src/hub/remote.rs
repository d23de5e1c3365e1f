//! The Hub's HTTP endpoints this tool reads: a revision's file list with each file's size and
//! hash (`GET /api/models/ID/revision/REV?blobs=true`, as `huggingface_hub`'s `model_info`
//! asks), and a file's bytes (`GET /ID/resolve/COMMIT/FILE`, redirects followed). Every
//! request has a deadline for its answer and for each read of its body, so a server that
//! stalls ends the download with an error instead of hanging it.

use std::io::{Read, Write};
use std::path::Path;
use std::time::Duration;

use anyhow::{anyhow, bail, Context};
use serde::Deserialize;

use super::file_hash::Check;
pub use super::listing::Sibling;
use super::name::HubName;
use super::HubSettings;

/// The largest file kept in git (not LFS) taken: configs and vocabularies are small, and the
/// largest tokenizer.json of the families we run is 17 MB.
pub const MOST_GIT_FILE_BYTES: u64 = 64 << 20;

/// The slowest download kept going, on average, once it has run for [`SLOW_AFTER_TIMEOUTS`]
/// answer deadlines: no real
/// link is this slow, a server trickling a byte at a time is.
const SLOWEST_BYTES_PER_S: f64 = 10_000.0;

/// How many answer deadlines (`HF_HUB_DOWNLOAD_TIMEOUT`, 10 s by default) a download runs
/// before its average rate is held to [`SLOWEST_BYTES_PER_S`].
const SLOW_AFTER_TIMEOUTS: u32 = 3;

/// A revision's commit and files.
#[derive(Debug, Deserialize)]
pub struct Revision {
    /// The commit the revision names now.
    pub sha: String,
    #[serde(default)]
    pub siblings: Vec<Sibling>,
}

/// The Hub's answer that the name cannot be read as asked (no such model or revision, not
/// allowed, not a family this tool runs): the user's to change, unlike a failed transfer.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct Refused(pub String);

/// What went wrong talking to the Hub, when the caller may act on the kind.
#[derive(Debug)]
pub enum HubError {
    /// The server could not be reached or did not answer in time: the cache may still serve.
    Unreachable(String),
    /// Anything else (not found, not allowed, damaged): said as it is.
    Refused(anyhow::Error),
}

/// The HTTP agent for `settings`: answers within `settings.timeout`, each read of a body too.
pub fn agent(settings: &HubSettings) -> ureq::Agent {
    ureq::Agent::config_builder()
        .timeout_connect(Some(settings.timeout))
        .timeout_recv_response(Some(settings.timeout))
        .timeout_per_read(Some(settings.timeout))
        .http_status_as_error(false)
        .user_agent(concat!("transformer/", env!("CARGO_PKG_VERSION")))
        .build()
        .into()
}

/// `GET url` with the token, if any; the whole call within `deadline` when given.
fn get(
    agent: &ureq::Agent,
    url: &str,
    settings: &HubSettings,
    deadline: Option<Duration>,
) -> Result<ureq::http::Response<ureq::Body>, HubError> {
    let mut request = agent.get(url);
    if let Some(deadline) = deadline {
        request = request.config().timeout_global(Some(deadline)).build();
    }
    if let Some(token) = &settings.token {
        request = request.header("Authorization", format!("Bearer {token}"));
    }
    request
        .call()
        .map_err(|e| HubError::Unreachable(e.to_string()))
}

/// The commit and files of `name`'s revision.
pub fn revision(
    agent: &ureq::Agent,
    name: &HubName,
    settings: &HubSettings,
) -> Result<Revision, HubError> {
    let url = format!(
        "{}/api/models/{}/revision/{}?blobs=true",
        settings.endpoint,
        name.id,
        name.revision.replace('/', "%2F")
    );
    // A file list is small: all of it within a few answers' time, however it trickles.
    let mut response = get(agent, &url, settings, Some(settings.timeout * 6))?;
    let status = response.status().as_u16();
    let code = response
        .headers()
        .get("x-error-code")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string();
    match status {
        200 => {}
        404 if code == "RevisionNotFound" => {
            return Err(HubError::Refused(anyhow::Error::new(Refused(format!(
                "{} has no revision {:?} on the Hub at {}",
                name.id, name.revision, settings.endpoint
            )))))
        }
        404 if code.is_empty() => {
            return Err(HubError::Refused(anyhow::Error::new(Refused(format!(
                "the server at {} has no {} (404, and it does not answer as the Hub does: \
                 is HF_ENDPOINT a Hub?)",
                settings.endpoint, name.id
            )))))
        }
        401 | 403 | 404 => {
            let why = match (&settings.token, status) {
                (_, 403) => "it is gated: accept its terms on the Hub, then set HF_TOKEN",
                (None, _) => "or it is private: set HF_TOKEN to a token that can read it",
                (Some(_), _) => "or HF_TOKEN cannot read it",
            };
            return Err(HubError::Refused(anyhow::Error::new(Refused(format!(
                "{} is not a model this tool can read on the Hub at {} ({status}; {why})",
                name.id, settings.endpoint
            )))));
        }
        500.. => {
            return Err(HubError::Unreachable(format!(
                "the Hub at {} answered {status}",
                settings.endpoint
            )))
        }
        _ => {
            return Err(HubError::Refused(anyhow!(
                "the Hub at {} answered {status} for {}",
                settings.endpoint,
                name
            )))
        }
    }
    response
        .body_mut()
        .with_config()
        .limit(16 << 20)
        .read_json::<Revision>()
        .map_err(|e| {
            HubError::Refused(anyhow!(
                "the Hub at {} sent a file list for {name} that is not valid: {e}",
                settings.endpoint
            ))
        })
}

/// Downloads `file` of `name` at `commit` to `into`, telling `read` each chunk's bytes, and
/// checks its size and hash against what the Hub listed; `into` is removed on any error.
pub fn download(
    agent: &ureq::Agent,
    (name, commit, file): (&HubName, &str, &Sibling),
    settings: &HubSettings,
    into: &Path,
    read: &dyn Fn(u64),
) -> anyhow::Result<()> {
    let result = transfer(agent, (name, commit, file), settings, (into, read));
    if result.is_err() {
        let _ = std::fs::remove_file(into);
    }
    result
}

/// [`download`] without the clean-up.
fn transfer(
    agent: &ureq::Agent,
    (name, commit, file): (&HubName, &str, &Sibling),
    settings: &HubSettings,
    (into, read): (&Path, &dyn Fn(u64)),
) -> anyhow::Result<()> {
    let what = format!("{} of {name}", file.rfilename);
    let url = format!(
        "{}/{}/resolve/{commit}/{}",
        settings.endpoint, name.id, file.rfilename
    );
    let mut response = get(agent, &url, settings, None).map_err(|e| match e {
        HubError::Unreachable(why) => anyhow!("cannot download {what}: {why}"),
        HubError::Refused(error) => error,
    })?;
    if response.status().as_u16() != 200 {
        bail!(
            "cannot download {what}: the Hub at {} answered {}",
            settings.endpoint,
            response.status()
        )
    }
    let mut output =
        std::fs::File::create(into).with_context(|| format!("cannot write {}", into.display()))?;
    let mut body = response.body_mut().as_reader();
    let Some(limit) = file.expected_size() else {
        bail!("the Hub listed {what} without its size, so it cannot be checked")
    };
    if file.lfs.is_none() && limit > MOST_GIT_FILE_BYTES {
        bail!("the Hub lists {what} at {limit} bytes, more than a file kept in git may be here")
    }
    let mut check = Check::for_file(file, limit)
        .ok_or_else(|| anyhow!("the Hub listed {what} without a hash it can be checked against"))?;
    let mut buffer = vec![0u8; 1 << 16];
    let mut total = 0u64;
    let started = std::time::Instant::now();
    loop {
        let elapsed = started.elapsed();
        if elapsed > settings.timeout * SLOW_AFTER_TIMEOUTS
            && (total as f64) < SLOWEST_BYTES_PER_S * elapsed.as_secs_f64()
        {
            bail!(
                "{what} arrived at {:.0} bytes/s, slower than any working link; nothing was \
                 kept: try again",
                total as f64 / elapsed.as_secs_f64()
            )
        }
        let n = body.read(&mut buffer).map_err(|e| {
            let timed_out = e.kind() == std::io::ErrorKind::TimedOut
                || e.get_ref()
                    .and_then(|inner| inner.downcast_ref::<ureq::Error>())
                    .is_some_and(|inner| matches!(inner, ureq::Error::Timeout(_)));
            if timed_out {
                anyhow!(
                    "the Hub at {} sent nothing for {} s while {what} was downloading; \
                     nothing was kept: try again (HF_HUB_DOWNLOAD_TIMEOUT sets the wait in \
                     seconds)",
                    settings.endpoint,
                    settings.timeout.as_secs_f32()
                )
            } else {
                anyhow!("downloading {what} failed: {e}; nothing was kept: try again")
            }
        })?;
        if n == 0 {
            break;
        }
        total += n as u64;
        if total > limit {
            bail!("the Hub sent more of {what} than the {limit} bytes it lists; nothing was kept")
        }
        check.update(&buffer[..n]);
        output
            .write_all(&buffer[..n])
            .with_context(|| format!("cannot write {}", into.display()))?;
        read(n as u64);
    }
    output
        .sync_all()
        .with_context(|| format!("cannot write {}", into.display()))?;
    if total != limit {
        bail!(
            "{what} arrived with {total} bytes, not the {limit} the Hub lists (the connection \
             was cut?); nothing was kept: try again"
        )
    }
    check.verify(&what)
}

/// Seconds from the environment variable `var` (unset or empty: `None`), between 0.1 and a
/// day.
pub fn seconds_from(var: &str) -> anyhow::Result<Option<Duration>> {
    let text = std::env::var(var).unwrap_or_default();
    if text.trim().is_empty() {
        return Ok(None);
    }
    match text.trim().parse::<f64>() {
        Ok(secs) if (0.1..=86_400.0).contains(&secs) => Ok(Some(Duration::from_secs_f64(secs))),
        _ => bail!("{var}={text:?} is not a number of seconds from 0.1 to 86400"),
    }
}
