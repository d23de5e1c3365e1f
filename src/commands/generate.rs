//! `transformer generate`: continues a prompt (or each line of stdin) with a decoder-only
//! language model, by sampling or beam search.

use std::io::BufRead;

use anyhow::Context;

use super::stdout::print_line;
use super::UsageError;
use crate::checkpoint::{self, Task};
use crate::cli::GenerateArgs;
use crate::infer::sampling::Sampling;
use crate::infer::settings::{self, DecodeRequest, Layer};
use crate::infer::text_generator::{Continuation, TextGenerator};
use crate::progress::Verbosity;

pub fn run(args: GenerateArgs) -> anyhow::Result<()> {
    let device = super::device_from(&args.device, Verbosity::Normal)?;
    let dir = super::checkpoint_or_latest(args.checkpoint.as_deref(), Task::Continue)?;
    let loaded = checkpoint::load(&dir, &device)?;
    let generator = super::text_generator(&loaded, &device)?;
    let how = match args.beam {
        None => Continuation::Sample(Sampling {
            temperature: args.temperature,
            top_k: args.top_k,
            seed: args.seed,
        }),
        // The flags alone: a run's [decode] section is translation's.
        Some(beam) => {
            let asked = DecodeRequest {
                beam: Some(beam),
                length_penalty: args.length_penalty,
                ..DecodeRequest::default()
            };
            let bounds = super::decode_bounds(&loaded, None);
            let options = settings::resolve(&[Layer::asked(asked, settings::FLAGS)], &bounds)
                .map_err(UsageError)?;
            match options.beam_settings() {
                Some(settings) => Continuation::Beam(settings),
                None => Continuation::Sample(Sampling {
                    temperature: 0.0,
                    top_k: None,
                    seed: 0,
                }),
            }
        }
    };
    if args.prompt == "-" {
        return continue_stdin(&generator, &args, how);
    }
    print_line(&generator.continue_text(&args.prompt, args.max_new, how)?)
}

/// Continues each line of stdin, `--batch-size` lines at a time, in order.
fn continue_stdin(
    generator: &TextGenerator,
    args: &GenerateArgs,
    how: Continuation,
) -> anyhow::Result<()> {
    let mut lines = std::io::stdin().lock().lines();
    let mut first = 1;
    loop {
        let batch: Vec<String> = lines
            .by_ref()
            .take(args.batch_size)
            .collect::<Result<_, _>>()
            .with_context(|| format!("reading stdin after line {}", first - 1))?;
        if batch.is_empty() {
            return Ok(());
        }
        let texts = generator
            .continue_texts(&batch, args.max_new, how)
            .with_context(|| {
                format!("continuing stdin lines {first}-{}", first + batch.len() - 1)
            })?;
        for text in texts {
            print_line(&text)?;
        }
        first += batch.len();
    }
}
