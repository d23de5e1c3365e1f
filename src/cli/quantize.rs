//! `transformer quantize`'s flags: the checkpoint and where its int8 copy goes.

use std::path::PathBuf;

use clap::Args;

#[derive(Debug, Args)]
pub struct QuantizeArgs {
    /// Checkpoint or run directory to quantize (ours, or a Hugging Face MarianMT directory)
    pub checkpoint: PathBuf,
    /// The checkpoint directory to write
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
    /// Replace DIR when it is an earlier quantized checkpoint
    #[arg(long)]
    pub overwrite: bool,
}
