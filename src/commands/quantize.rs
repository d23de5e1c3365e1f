//! `transformer quantize CHECKPOINT --out DIR`: an int8 checkpoint (see
//! [`crate::checkpoint::quantize`]).
//!
//! Its arguments: the checkpoint and where its int8 copy goes.

use std::path::PathBuf;

use clap::Args;

use crate::checkpoint::quantize::quantize;

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

pub fn run(args: QuantizeArgs) -> anyhow::Result<()> {
    let source = super::download::local_or_hub(&args.checkpoint)?;
    let done =
        quantize(&source, &args.out, args.overwrite).map_err(crate::errors::naming_out_flags)?;
    let mb = |bytes: u64| match bytes {
        0..1_000_000 => format!("{:.1} kB", bytes as f64 / 1e3),
        _ => format!("{:.1} MB", bytes as f64 / 1e6),
    };
    eprintln!(
        "wrote {} from {}: {} matrices in int8, weights {} -> {}",
        args.out.display(),
        done.source.display(),
        done.int8_matrices,
        mb(done.bytes_before),
        mb(done.bytes_after)
    );
    Ok(())
}
