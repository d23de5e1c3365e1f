//! `transformer download`'s flags: the Hub name.

use clap::Args;

#[derive(Debug, Args)]
pub struct DownloadArgs {
    /// The model's name on the Hugging Face Hub: ORG/NAME, optionally @REVISION (a branch, tag
    /// or commit)
    pub name: String,
    /// No progress bars
    #[arg(long)]
    pub quiet: bool,
}
