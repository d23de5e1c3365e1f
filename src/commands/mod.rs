//! Glue per subcommand: arguments -> config -> device -> library call -> output.

mod attention;
mod bench;
mod eval;
mod generate;
mod infer_test;
mod plot;
mod stop_signals;
mod train;
mod translate;

use anyhow::bail;

use crate::cli::{Command, DecodeArgs, DeviceArgs};
use crate::device::{select, DeviceRequest};
use crate::translator::DecodeOptions;

/// Runs one parsed command.
pub fn run(command: Command) -> anyhow::Result<()> {
    match command {
        Command::Train(args) => train::run(args),
        Command::Translate(args) => translate::run(args),
        Command::Generate(args) => generate::run(args),
        Command::Eval(args) => eval::run(args),
        Command::Plot(args) => plot::run(args),
        Command::Attention(args) => attention::run(args),
        Command::Bench(args) => bench::run(args),
        Command::InferTest(args) => infer_test::run(args),
    }
}

/// A command stopped on request, its work saved; `main` exits with `exit_code` (128 + the
/// signal, as shells report death by a signal).
#[derive(Debug)]
pub struct Interrupted {
    pub exit_code: u8,
    pub message: String,
}

impl std::fmt::Display for Interrupted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Interrupted {}

/// Resolves `--device` and says on stderr which device was chosen and why.
fn device_from(args: &DeviceArgs) -> anyhow::Result<candle_core::Device> {
    let selected = select(args.device.parse::<DeviceRequest>()?)?;
    eprintln!("{}", selected.note);
    Ok(selected.device)
}

/// Validates the decoding flags.
fn decode_options(args: &DecodeArgs) -> anyhow::Result<DecodeOptions> {
    if args.beam == 0 {
        bail!("--beam must be at least 1 (1 is greedy decoding)");
    }
    if args.batch_size == 0 {
        bail!("--batch-size must be at least 1");
    }
    if args.max_len == Some(0) {
        bail!("--max-len must be at least 1");
    }
    let length_penalty = args
        .length_penalty
        .unwrap_or(DecodeOptions::default().length_penalty);
    if !length_penalty.is_finite() {
        bail!("--length-penalty must be a number, got {length_penalty}");
    }
    Ok(DecodeOptions {
        beam: args.beam,
        length_penalty,
        max_len: args.max_len,
    })
}
