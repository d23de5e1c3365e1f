//! `transformer download NAME`: a Hub model's files into the Hugging Face cache, without
//! running it; prints the directory every command then reads (`--checkpoint NAME` finds it
//! again by name).
//!
//! Its arguments: the Hub name.

use std::path::{Path, PathBuf};

use clap::Args;
use transformer::checkpoint::hugging_face::MODEL_TYPES;
use transformer::hub::{self, HubName, HubSettings};

use crate::errors::UsageError;
use crate::progress::{DataBars, Verbosity};
use crate::stdout::print_line;

#[derive(Debug, Args)]
pub struct DownloadArgs {
    /// The model's name on the Hugging Face Hub: ORG/NAME, optionally @REVISION (a branch, tag
    /// or commit)
    pub name: String,
    /// No progress bars
    #[arg(long)]
    pub quiet: bool,
}

pub fn run(args: DownloadArgs) -> anyhow::Result<()> {
    let Some(name) = HubName::parse(&args.name) else {
        return Err(UsageError(format!(
            "{:?} is not a Hub name: give ORG/NAME, optionally @REVISION \
             (e.g. Helsinki-NLP/opus-mt-de-en)",
            args.name
        ))
        .into());
    };
    let verbosity = if args.quiet {
        Verbosity::Quiet
    } else {
        Verbosity::Normal
    };
    let dir = fetched(&name, verbosity)?;
    print_line(&dir.display().to_string())
}

/// `name`'s directory in the cache, downloaded where missing, with bars unless quiet; a
/// refusal (no such model, not allowed, not a family we run) is a usage error.
fn fetched(name: &HubName, verbosity: Verbosity) -> anyhow::Result<PathBuf> {
    let settings = HubSettings::from_env()?;
    hub::fetch(name, &settings, MODEL_TYPES, &DataBars { verbosity }).map_err(|error| {
        match error.downcast_ref::<hub::Refused>() {
            Some(refused) => UsageError(refused.0.clone()).into(),
            None => error,
        }
    })
}

/// The directory a checkpoint argument names: itself when it exists, or when it does not look
/// like a Hub name, or when its first part exists here (`runs/bse` is a typo, not a Hub
/// model); else the Hub model of that name, downloaded into the cache where missing.
pub fn local_or_hub(given: &Path) -> anyhow::Result<PathBuf> {
    let local_parent = given
        .components()
        .next()
        .is_some_and(|first| Path::new(first.as_os_str()).exists());
    if given.exists() || local_parent {
        return Ok(given.to_path_buf());
    }
    let text = given.to_str().unwrap_or_default();
    let Some(name) = HubName::parse(text) else {
        // A Hub name with a revision no Hub could have (`org/name@/x`) says so, not "missing".
        if let Some((id, revision)) = text.split_once('@') {
            if HubName::parse(id).is_some() {
                return Err(UsageError(format!(
                    "{text:?}: {revision:?} is not a revision (a branch, tag or commit: letters, \
                     digits, -, _, . and / between parts)"
                ))
                .into());
            }
        }
        return Ok(given.to_path_buf());
    };
    // Read as a Hub name only because nothing is here: a mistyped path says so too.
    let not_here = |what: String| {
        format!(
            "{what}; nor is there a directory {} here (if you meant a local checkpoint, check \
             its path)",
            given.display()
        )
    };
    fetched(&name, Verbosity::Normal).map_err(|error| match error.downcast::<UsageError>() {
        Ok(refused) => UsageError(not_here(refused.0)).into(),
        Err(error) => anyhow::anyhow!(not_here(format!("{error:#}"))),
    })
}
