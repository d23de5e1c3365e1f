//! `transformer generate`: continues a prompt with a decoder-only language model.

use super::stdout::print_line;
use crate::checkpoint;
use crate::cli::GenerateArgs;
use crate::config::Architecture;
use crate::infer::sampling::Sampling;
use crate::progress::Verbosity;

pub fn run(args: GenerateArgs) -> anyhow::Result<()> {
    let device = super::device_from(&args.device, Verbosity::Normal)?;
    let dir = super::checkpoint_or_latest(args.checkpoint.as_deref(), Architecture::DecoderOnly)?;
    let loaded = checkpoint::load(&dir, &device)?;
    let sampling = Sampling {
        temperature: args.temperature,
        top_k: args.top_k,
        seed: args.seed,
    };
    let text = super::text_generator(&loaded, &device)?.continue_text(
        &args.prompt,
        args.max_new,
        sampling,
    )?;
    print_line(&text)
}
