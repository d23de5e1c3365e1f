//! `transformer attention`: translate a sentence (or take `--target`), run the pair through
//! the model under teacher forcing, and draw every head's attention.
//!
//! Its arguments: the sentence, the checkpoint, the layers, the picture.

use std::path::Path;
use std::path::PathBuf;

use anyhow::{bail, Context};
use clap::Args;

use crate::checkpoint::Task;
use crate::corpus::normalize_sentence;
use crate::errors::UsageError;
use crate::flags::{at_least_one, DeviceArgs};
use crate::infer::attention::{attention_grids, TeacherForcedPair};
use crate::infer::settings::DecodeSettings;
use crate::infer::LoadOptions;
use crate::plot::write_attention_heatmaps;
use crate::progress::Verbosity;
use crate::stdout::print_line;

#[derive(Debug, Args)]
pub struct AttentionArgs {
    /// The source sentence
    pub text: String,
    /// Checkpoint or run directory (default: the latest run under runs/)
    #[arg(long, value_name = "DIR")]
    pub checkpoint: Option<PathBuf>,
    /// Where to write the picture
    #[arg(long, value_name = "FILE", default_value = "attention.png")]
    pub out: PathBuf,
    /// Teacher-force this translation instead of the model's own greedy one
    #[arg(long, value_name = "TEXT")]
    pub target: Option<String>,
    /// Draw only these layers (1-based, comma-separated; default: all)
    #[arg(long, value_name = "N,...", value_delimiter = ',', value_parser = at_least_one)]
    pub layers: Vec<usize>,
    /// What the linear layers compute in: float32, int8 or bfloat16 [default: the
    /// checkpoint's decode.compute_type, else float32]
    #[arg(long, value_name = "TYPE", value_parser = crate::config::ComputeType::parse)]
    pub compute_type: Option<crate::config::ComputeType>,
    #[command(flatten)]
    pub device: DeviceArgs,
}

pub fn run(args: AttentionArgs) -> anyhow::Result<()> {
    check_out_path(&args.out)?;
    let device = crate::device_choice::device_from(&args.device, Verbosity::Normal)?;
    let opened = crate::open_checkpoint::open_translator(
        args.checkpoint.as_deref(),
        &device,
        LoadOptions {
            compute_type: args.compute_type,
            language_names: crate::flags::LANGUAGE_FLAGS,
            ..LoadOptions::default()
        },
    )?;
    if opened.languages().is_some() {
        return Err(UsageError(
            "attention draws models of one language pair; this checkpoint is a multilingual \
             model (M2M100 / NLLB-200), whose pictures are not drawn yet"
                .into(),
        )
        .into());
    }
    let loaded = opened.checkpoint();
    let layers = loaded.config.model.layers;
    if let Some(&bad) = args.layers.iter().find(|&&l| l > layers) {
        return Err(UsageError(format!(
            "--layers {bad} is not a layer of this model; it has layers 1 to {layers}"
        ))
        .into());
    }
    let text = normalize_sentence(&args.text);
    let src = loaded.tokenizers.src.encode(&text)?.ids;
    if src.is_empty() {
        bail!("the sentence is empty; give the source sentence whose attention to draw");
    }
    let target = match &args.target {
        Some(target) => {
            let mut ids = loaded.tokenizers.tgt.encode(target)?.ids;
            ids.push(loaded.tokenizers.specials().eos);
            ids
        }
        None => {
            let translation = opened.with(DecodeSettings::default()).translate(&text)?;
            print_line(&translation.translation)?;
            translation.ids
        }
    };
    let pair = TeacherForcedPair::new(&src, &target, &loaded.tokenizers.specials());
    pair.check_fits(loaded.config.model.max_len)?;
    let model = loaded.model_for(Task::Translate)?;
    let grids = attention_grids(&**model, &loaded.tokenizers, &pair, &args.layers, &device)?;
    write_attention_heatmaps(&grids, &args.out)
        .with_context(|| format!("drawing the attention of {text:?}"))?;
    eprintln!(
        "wrote {}: {} layer(s) x {} heads of encoder, decoder and encoder-decoder attention",
        args.out.display(),
        grids[0].layers.len(),
        loaded.config.model.heads
    );
    Ok(())
}

/// Fails early, before any model work, on an output path the picture cannot be written to.
fn check_out_path(out: &Path) -> anyhow::Result<()> {
    if !out
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("png"))
    {
        return Err(UsageError(format!("--out {} must name a .png file", out.display())).into());
    }
    match out.parent() {
        Some(dir) if !dir.as_os_str().is_empty() && !dir.is_dir() => bail!(
            "--out {}: directory {} does not exist; create it or pick another path",
            out.display(),
            dir.display()
        ),
        _ => Ok(()),
    }
}
