//! `transformer generate`: continues a prompt (or each line of stdin) with a decoder-only
//! language model, by sampling or beam search.
//!
//! Its arguments: the prompt, the language model, sampling or beam search.

use std::path::PathBuf;

use anyhow::Context;
use clap::Args;

use crate::checkpoint::{self, Checkpoint, Task};
use crate::decoding::sampling::Sampling;
use crate::flags::{at_least_one, finite, non_negative, DeviceArgs};
use crate::infer::settings::{self, DecodeRequest};
use crate::infer::text_generator::{Continuation, Continued};
use crate::progress::Verbosity;
use crate::stdin_lines::{BatchEnd, StdinLines};
use crate::stdout::{print_line, warn};

#[derive(Debug, Args)]
pub struct GenerateArgs {
    /// Text to continue; without it, the model starts a line of its own; - continues each
    /// line of stdin, one output line per input line, in batches (prompts of one token
    /// length are decoded together, each exactly as it would be alone)
    #[arg(default_value = "", value_name = "PROMPT")]
    pub prompt: String,
    /// Language-model checkpoint or run directory (a run's best/, else last/); default: the
    /// language-model run under runs/ written most recently
    #[arg(long, value_name = "DIR")]
    pub checkpoint: Option<PathBuf>,
    /// Most tokens to add (fewer when the model ends the line or the position table ends)
    #[arg(long, default_value_t = 100, value_name = "N")]
    pub max_new: usize,
    /// Softmax temperature; 0 always takes the most likely token (greedy)
    #[arg(long, default_value_t = 1.0, value_name = "T", value_parser = non_negative)]
    pub temperature: f64,
    /// Draw only among the K most likely tokens
    #[arg(long, value_name = "K", value_parser = at_least_one)]
    pub top_k: Option<usize>,
    /// Seed of the draws: the same seed, prompt and checkpoint give the same text
    #[arg(long, default_value_t = 0, value_name = "S")]
    pub seed: u64,
    /// Beam search with N beams instead of sampling: the continuation the model scores
    /// highest under the length penalty (N at most the vocabulary's size)
    #[arg(long, value_name = "N", value_parser = at_least_one,
          conflicts_with_all = ["temperature", "top_k", "seed"])]
    pub beam: Option<usize>,
    /// Length penalty exponent for --beam: scores are divided by ((5 + len) / 6)^alpha
    /// [default: 1.0]
    #[arg(long, value_name = "ALPHA", value_parser = finite, allow_negative_numbers = true,
          requires = "beam")]
    pub length_penalty: Option<f64>,
    /// Most prompts from stdin decoded together
    #[arg(long, default_value_t = 32, value_name = "N", value_parser = at_least_one)]
    pub batch_size: usize,
    #[command(flatten)]
    pub device: DeviceArgs,
}

pub fn run(args: GenerateArgs) -> anyhow::Result<()> {
    let device = crate::device_choice::device_from(&args.device, Verbosity::Normal)?;
    let dir =
        crate::open_checkpoint::checkpoint_or_latest(args.checkpoint.as_deref(), Task::Continue)?;
    let loaded = checkpoint::load(&dir, &device)?;
    let generator = crate::open_checkpoint::text_generator(&loaded, &device)?;
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

/// Sampling, or with `--beam` the beam search the decoding settings settle: the flags over the
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
        ..DecodeRequest::by(crate::flags::FLAGS)
    };
    let options =
        settings::settings_of(loaded, Some(asked), None).map_err(crate::errors::refused)?;
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
            crate::errors::truncate_chars(prompt, 40),
            max_positions.saturating_sub(1).max(1)
        ));
    }
    print_line(&continued.text)
}
