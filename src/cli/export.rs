//! `transformer export`'s flags: the checkpoint, the format and where it goes.

use std::path::PathBuf;

use clap::Args;

#[derive(Debug, Args)]
pub struct ExportArgs {
    /// Checkpoint or run directory to export
    pub checkpoint: PathBuf,
    /// The format to write: hf (a Hugging Face directory: MarianMT, or M2M100 / NLLB-200)
    #[arg(long = "to", value_enum)]
    pub to: ExportFormat,
    /// The directory to write
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
    /// Replace DIR when it already exists
    #[arg(long)]
    pub overwrite: bool,
}

/// The formats `export` writes.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum ExportFormat {
    /// transformers' `from_pretrained` and `ct2-transformers-converter` read it
    Hf,
}
