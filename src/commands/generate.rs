//! `transformer generate`: continues a prompt with a decoder-only language model.

use anyhow::bail;

use crate::checkpoint;
use crate::cli::GenerateArgs;
use crate::model::decoder_only::Sampling;

pub fn run(args: GenerateArgs) -> anyhow::Result<()> {
    if !(args.temperature >= 0.0 && args.temperature.is_finite()) {
        bail!(
            "--temperature {} is not a temperature; use 0 (greedy) or a positive number",
            args.temperature
        )
    }
    if args.top_k == Some(0) {
        bail!("--top-k 0 leaves no token to draw; use 1 or more, or leave it out");
    }
    let device = super::device_from(&args.device)?;
    let loaded = checkpoint::load_language_model(&args.checkpoint, &device)?;
    let sampling = Sampling {
        temperature: args.temperature,
        top_k: args.top_k,
        seed: args.seed,
    };
    let text = loaded
        .generator(&device)
        .continue_text(&args.prompt, args.max_new, sampling)?;
    println!("{text}");
    Ok(())
}
