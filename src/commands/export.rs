//! `transformer export --to hf CHECKPOINT --out DIR`: a checkpoint written in another tool's
//! format (see [`crate::checkpoint::marian_export`]).

use anyhow::bail;

use crate::checkpoint::{self, marian_export};
use crate::cli::{ExportArgs, ExportFormat};

pub fn run(args: ExportArgs) -> anyhow::Result<()> {
    if args.out.exists() && !args.overwrite {
        bail!(
            "{} already exists; pass --overwrite to replace it, or --out DIR to write elsewhere",
            args.out.display()
        );
    }
    // Weights are read and written on the CPU: no device is worth starting for a copy.
    let initial = checkpoint::load_initial_weights(&args.checkpoint, &candle_core::Device::Cpu)?;
    match args.to {
        ExportFormat::Hf => marian_export::export_marian(
            &initial.dir,
            &initial.config,
            &initial.tokenizers,
            &initial.weights,
            &args.out,
        )?,
    }
    eprintln!(
        "wrote {} (MarianMTModel.from_pretrained and ct2-transformers-converter read it)",
        args.out.display()
    );
    Ok(())
}
