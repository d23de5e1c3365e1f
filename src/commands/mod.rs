//! Glue per subcommand: arguments -> config -> device -> library call -> output.

mod attention;
mod average;
mod bench;
mod eval;
mod generate;
mod infer_test;
mod init_from;
mod plot;
mod serve;
mod stdout;
mod stop_signals;
mod train;
mod translate;

use std::path::{Path, PathBuf};

use crate::checkpoint::{self, RUNS_ROOT};
use crate::cli::{Command, DecodeSettingsArgs, DeviceArgs};
use crate::config::Architecture;
use crate::device::select;
use crate::infer::text_generator::TextGenerator;
use crate::infer::translator::{DecodeOptions, Translator};
use crate::progress::Verbosity;
pub use stdout::StdoutClosed;

/// The environment variable that sends every op down candle's composed path on the CPU too
/// (`composed`), as a GPU runs it; `fused` or unset is the default.
pub const KERNELS_VARIABLE: &str = "TRANSFORMER_KERNELS";

/// Runs one parsed command.
pub fn run(command: Command) -> anyhow::Result<()> {
    choose_kernels()?;
    match command {
        Command::Train(args) => train::run(args),
        Command::Translate(args) => translate::run(args),
        Command::Generate(args) => generate::run(args),
        Command::Eval(args) => eval::run(args),
        Command::Average(args) => average::run(args),
        Command::Plot(args) => plot::run(args),
        Command::Attention(args) => attention::run(args),
        Command::Serve(args) => serve::run(args),
        Command::Bench(args) => bench::run(args),
        Command::InferTest(args) => infer_test::run(args),
    }
}

/// Reads `TRANSFORMER_KERNELS`; a value other than `fused` or `composed` is a usage error.
fn choose_kernels() -> anyhow::Result<()> {
    match std::env::var(KERNELS_VARIABLE).as_deref() {
        Err(std::env::VarError::NotPresent) | Ok("fused") => Ok(()),
        Ok("composed") => {
            crate::kernels::use_composed_everywhere();
            Ok(())
        }
        Ok(other) => Err(UsageError(format!(
            "{KERNELS_VARIABLE}={other:?} is not a kernel choice; use fused or composed, or unset it"
        ))
        .into()),
        Err(std::env::VarError::NotUnicode(_)) => Err(UsageError(format!(
            "{KERNELS_VARIABLE} is not UTF-8; use fused or composed, or unset it"
        ))
        .into()),
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

/// A flag whose value makes no sense for the command (or for the checkpoint it names), found
/// after parsing; `main` exits with status 2, as for the usage errors clap reports itself.
#[derive(Debug)]
pub struct UsageError(pub String);

impl std::fmt::Display for UsageError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for UsageError {}

/// Resolves `--device`; says on stderr which device was chosen and why when the choice was
/// not the user's own (auto on a CUDA build). Quiet hides the news that a GPU was found,
/// never that none could be used.
fn device_from(args: &DeviceArgs, verbosity: Verbosity) -> anyhow::Result<candle_core::Device> {
    let selected = select(args.device)?;
    let hidden = verbosity == Verbosity::Quiet && selected.note_is_news;
    if let Some(note) = selected.note.filter(|_| !hidden) {
        eprintln!("{note}");
    }
    Ok(selected.device)
}

/// The checkpoint a command reads: `--checkpoint` when given, else the newest run of the
/// `arch` family under runs/, which is then named on stderr so that the user knows which
/// model answered.
fn checkpoint_or_latest(given: Option<&Path>, arch: Architecture) -> anyhow::Result<PathBuf> {
    if let Some(dir) = given {
        return Ok(dir.to_path_buf());
    }
    let run = checkpoint::latest_run(Path::new(RUNS_ROOT), arch)?;
    eprintln!(
        "checkpoint: {} (the newest run under {RUNS_ROOT}/; --checkpoint DIR picks another)",
        checkpoint::resolve(&run)?.display()
    );
    Ok(run)
}

/// The translation checkpoint at `given`, or the newest one under runs/ (see
/// `checkpoint_or_latest`), loaded onto `device`; a language model is refused here, by name.
fn load_translation_model(
    given: Option<&Path>,
    device: &candle_core::Device,
) -> anyhow::Result<checkpoint::Checkpoint> {
    let dir = checkpoint_or_latest(given, Architecture::EncoderDecoder)?;
    let loaded = checkpoint::load(&dir, device)?;
    loaded.translation()?;
    Ok(loaded)
}

/// A translator over a loaded checkpoint's translation model and tokenizers.
fn translator<'a>(
    loaded: &'a checkpoint::Checkpoint,
    device: &'a candle_core::Device,
    options: DecodeOptions,
) -> anyhow::Result<Translator<'a>> {
    Ok(Translator {
        model: loaded.translation()?,
        tokenizers: &loaded.tokenizers,
        max_positions: loaded.config.model.max_len,
        device,
        options,
    })
}

/// A text generator over a loaded checkpoint's language model and tokenizer.
fn text_generator<'a>(
    loaded: &'a checkpoint::Checkpoint,
    device: &'a candle_core::Device,
) -> anyhow::Result<TextGenerator<'a>> {
    Ok(TextGenerator {
        model: loaded.language()?,
        tokenizer: &loaded.tokenizers.tgt,
        max_positions: loaded.config.model.max_len,
        device,
    })
}

/// `options` with the beam no wider than the target vocabulary: a wider one only repeats
/// work (and `--beam 100000` would run for minutes); says so on stderr when it narrows it.
fn bounded_beam(options: DecodeOptions, loaded: &checkpoint::Checkpoint) -> DecodeOptions {
    let vocab = loaded.tokenizers.tgt.vocab_size();
    if options.beam <= vocab {
        return options;
    }
    eprintln!(
        "warning: --beam {} is more than the {vocab} target tokens the model chooses from; \
         searching with --beam {vocab}",
        options.beam
    );
    DecodeOptions {
        beam: vocab,
        ..options
    }
}

/// The decoding flags, already checked by the parser, over the checkpoint's `[decode]`
/// settings: a flag given wins, the run's setting stands in for one left out.
fn decode_options(args: &DecodeSettingsArgs, loaded: &checkpoint::Checkpoint) -> DecodeOptions {
    let saved = DecodeOptions::from(&loaded.config.decode);
    DecodeOptions {
        beam: args.beam.unwrap_or(saved.beam),
        length_penalty: args
            .length_penalty
            .map_or(saved.length_penalty, |alpha| alpha as f32),
        max_len: args.max_len.or(saved.max_len),
        n_best: 1,
    }
}
