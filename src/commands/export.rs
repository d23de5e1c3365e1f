//! `transformer export --to hf CHECKPOINT --out DIR`: a checkpoint written in another tool's
//! format (see [`crate::checkpoint::hugging_face::export`]).
//!
//! Its arguments: the checkpoint, the format and where it goes.

use std::path::Path;
use std::path::PathBuf;

use anyhow::bail;
use clap::Args;

use crate::checkpoint::{self, hugging_face::export as hf_export};

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

pub fn run(args: ExportArgs) -> anyhow::Result<()> {
    export(args).map_err(crate::errors::naming_out_flags)
}

fn export(args: ExportArgs) -> anyhow::Result<()> {
    // Taken before anything is checked: what --out holds cannot change until the save.
    let destination = checkpoint::Destination::lock(&args.out, checkpoint::WhenHeld::BRIEFLY)?;
    // symlink_metadata: a dangling link, a device or a pipe is there too, and none of them is
    // ours to replace.
    if let Ok(meta) = std::fs::symlink_metadata(&args.out) {
        if !meta.is_dir() {
            bail!(
                "--out {} exists and is not a directory; name a new directory",
                args.out.display()
            );
        }
        if !args.overwrite {
            bail!(
                "{} already exists; pass --overwrite to replace it, or --out DIR to write \
                 elsewhere",
                args.out.display()
            );
        }
    }
    // Weights are read and written on the CPU: no device is worth starting for a copy.
    let source = super::download::local_or_hub(&args.checkpoint)?;
    let initial = checkpoint::load_initial_weights(
        &source,
        &candle_core::Device::Cpu,
        "cannot be exported (other tools read float weights)",
    )?;
    check_replaceable(&args.out, &[&source, &initial.dir])?;
    match args.to {
        ExportFormat::Hf => hf_export::export_hugging_face(
            &initial.dir,
            &initial.config,
            &initial.tokenizers,
            &initial.weights,
            destination,
        )?,
    }
    let readers = if initial.tokenizers.multilingual_tokenizer().is_some() {
        "M2M100ForConditionalGeneration.from_pretrained and ct2-transformers-converter"
    } else {
        "MarianMTModel.from_pretrained and ct2-transformers-converter"
    };
    eprintln!("wrote {} ({readers} read it)", args.out.display());
    Ok(())
}

/// Refuses an `--out` whose replacement would lose work: one that is, or holds, the
/// checkpoint being exported, or an existing directory that is not a Hugging Face one (a
/// run directory, a folder of other files).
fn check_replaceable(out: &Path, sources: &[&Path]) -> anyhow::Result<()> {
    checkpoint::refuse_inside_a_run(out)?;
    let Ok(out_real) = out.canonicalize() else {
        return Ok(());
    };
    for source in sources {
        if let Ok(source) = source.canonicalize() {
            if source.starts_with(&out_real) {
                bail!(
                    "--out {} is or holds the checkpoint being exported ({}); write the export \
                     somewhere else",
                    out.display(),
                    source.display()
                );
            }
        }
    }
    // Only what an export writes may be replaced: anything else in the directory is someone's.
    let entries = std::fs::read_dir(&out_real)
        .map_err(|e| anyhow::anyhow!("cannot read --out {}: {e}", out.display()))?;
    for entry in entries {
        let entry = entry?;
        let name = entry.file_name();
        let ours = entry.file_type()?.is_file()
            && hf_export::WRITTEN
                .iter()
                .any(|written| name.to_str() == Some(*written));
        if !ours {
            bail!(
                "--out {} holds {}, which an export does not write; --overwrite replaces only an \
                 earlier export: choose another --out",
                out.display(),
                name.to_string_lossy()
            );
        }
    }
    Ok(())
}
