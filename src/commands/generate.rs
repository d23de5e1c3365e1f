//! `transformer generate`: continues a prompt (or each line of stdin) with a decoder-only
//! language model, by sampling or beam search.

use anyhow::Context;

use super::stdin_lines::{BatchEnd, StdinLines};
use super::stdout::{print_line, warn};
use crate::checkpoint::{self, Checkpoint, Task};
use crate::cli::GenerateArgs;
use crate::decoding::sampling::Sampling;
use crate::infer::settings::{self, DecodeRequest, Layer};
use crate::infer::text_generator::{Continuation, Continued};
use crate::progress::Verbosity;

pub fn run(args: GenerateArgs) -> anyhow::Result<()> {
    let device = super::device_from(&args.device, Verbosity::Normal)?;
    let dir = super::checkpoint_or_latest(args.checkpoint.as_deref(), Task::Continue)?;
    let loaded = checkpoint::load(&dir, &device)?;
    let generator = super::text_generator(&loaded, &device)?;
    let how = continuation(&args, &loaded)?;
    let max_positions = loaded.model.max_positions();
    if args.prompt != "-" {
        let continued = generator.continue_text(&args.prompt, args.max_new, how)?;
        return emit(&continued, &args.prompt, max_positions);
    }
    let mut lines = StdinLines::new("continued");
    loop {
        let batch = lines.next_batch(args.batch_size)?;
        if !batch.lines.is_empty() {
            let last = batch.first_line + batch.lines.len() - 1;
            let continued = generator
                .continue_texts(&batch.lines, args.max_new, how)
                .with_context(|| format!("stdin lines {}-{last}", batch.first_line))?;
            for (prompt, continued) in batch.lines.iter().zip(&continued) {
                emit(continued, prompt, max_positions)?;
            }
        }
        match batch.end {
            BatchEnd::More => {}
            BatchEnd::Input => return Ok(()),
            BatchEnd::Error(e) => return Err(e),
        }
    }
}

/// Sampling, or with `--beam` the beam search the resolver settles: the flags over the
/// checkpoint's `[decode]` (its length penalty stands in for a flag left out).
fn continuation(args: &GenerateArgs, loaded: &Checkpoint) -> anyhow::Result<Continuation> {
    let Some(beam) = args.beam else {
        return Ok(Continuation::Sample(Sampling {
            temperature: args.temperature,
            top_k: args.top_k,
            seed: args.seed,
        }));
    };
    let asked = DecodeRequest {
        beam: Some(beam),
        length_penalty: args.length_penalty,
        ..DecodeRequest::default()
    };
    let options = settings::resolver_of(loaded, Some(Layer::asked(asked, crate::cli::FLAGS)), None)
        .map_err(super::refused)?
        .defaults();
    Ok(match options.beam_settings() {
        Some(settings) => Continuation::Beam(settings),
        None => Continuation::Sample(Sampling {
            temperature: 0.0,
            top_k: None,
            seed: 0,
        }),
    })
}

/// Warns about unknown words and a cut prompt on stderr, prints the text on stdout.
fn emit(continued: &Continued, prompt: &str, max_positions: usize) -> anyhow::Result<()> {
    for word in &continued.unknown_words {
        warn(format_args!(
            "unknown prompt word {word:?} is read as <unk>"
        ));
    }
    if let Some(tokens) = continued.truncated_from {
        warn(format_args!(
            "{:?} has {tokens} tokens, more than the model reads; it was continued from its \
             last {} (model.max_len {max_positions}); shorten the prompt",
            super::truncate_chars(prompt, 40),
            max_positions.saturating_sub(1).max(1)
        ));
    }
    print_line(&continued.text)
}
