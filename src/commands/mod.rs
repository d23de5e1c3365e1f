//! Glue per subcommand: arguments -> config -> device -> library call -> output.

mod attention;
mod average;
mod bench;
mod completions;
mod download;
mod eval;
mod export;
mod generate;
mod infer_test;
mod man;
mod output_guard;
mod plot;
mod quantize;
mod sentences;
mod serve;
mod stdin_lines;
mod stdout;
mod stop_signals;
mod tokenize;
mod train;
mod translate;

use std::path::{Path, PathBuf};

use crate::checkpoint::{self, Checkpoint, Task, RUNS_ROOT};
use crate::cli::{Command, DecodeSettingsArgs, DeviceArgs};
use crate::device::{select, DeviceError};
use crate::infer::settings::DecodeOptions;
use crate::infer::settings::{DecodeRequest, Layer, Refused, Resolver};
use crate::infer::text_generator::TextGenerator;
use crate::infer::{LoadOptions, Translator};
use crate::progress::Verbosity;
pub use stdout::StdoutClosed;

/// The environment variable that sends every op down candle's composed path on the CPU too
/// (`composed`), as a GPU runs it; `fused` or unset is the default.
pub const KERNELS_VARIABLE: &str = "TRANSFORMER_KERNELS";

/// How an MPI rank that gave up waiting for the others says to resume the run.
const MPI_RESUME_ADVICE: &str = "resume with `mpirun ... transformer train --resume RUN_DIR`";

/// `error` in the words of a command that reads the checkpoint its CHECKPOINT argument
/// names and writes `--out` (`quantize`, `average`, `export`): a refused output directory
/// names `--out` and `--overwrite`, a missing checkpoint the argument.
fn naming_out_flags(error: anyhow::Error) -> anyhow::Error {
    if let Some(refused) = error.downcast_ref::<checkpoint::OutRefused>() {
        return anyhow::anyhow!(refused.worded("--out", "--overwrite"));
    }
    if let Some(missing) = error.downcast_ref::<checkpoint::NoCheckpoint>() {
        return anyhow::anyhow!("{missing}; name a checkpoint or run directory as CHECKPOINT");
    }
    error
}

/// Runs one parsed command.
pub fn run(command: Command) -> anyhow::Result<()> {
    choose_kernels()?;
    match command {
        Command::Train(args) => train::run(args),
        Command::Translate(args) => translate::run(args),
        Command::Sentences(args) => sentences::run(args),
        Command::Generate(args) => generate::run(args),
        Command::Eval(args) => eval::run(args),
        Command::Average(args) => average::run(args),
        Command::Export(args) => export::run(args),
        Command::Quantize(args) => quantize::run(args),
        Command::Download(args) => download::run(args),
        Command::Tokenize(args) => tokenize::run(args),
        Command::Plot(args) => plot::run(args),
        Command::Attention(args) => attention::run(args),
        Command::Serve(args) => serve::run(args),
        Command::Bench(args) => bench::run(args),
        Command::InferTest(args) => infer_test::run(args),
        Command::Completions(args) => completions::run(args),
        Command::Man(args) => man::run(args),
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
    let selected = select(args.device).map_err(|error| match error {
        DeviceError::CudaUnavailable { ordinal, why } => {
            anyhow::anyhow!("--device cuda:{ordinal} is not available: {why}; use --device cpu")
        }
    })?;
    let hidden = verbosity == Verbosity::Quiet && selected.note_is_news;
    if let Some(note) = selected.note.filter(|_| !hidden) {
        eprintln!("{note}");
    }
    Ok(selected.device)
}

/// The checkpoint a command reads: `--checkpoint` when given, else the newest run of the
/// `arch` family under runs/, which is then named on stderr so that the user knows which
/// model answered.
fn checkpoint_or_latest(given: Option<&Path>, task: Task) -> anyhow::Result<PathBuf> {
    if let Some(dir) = given {
        return download::local_or_hub(dir);
    }
    let run = checkpoint::latest_run(Path::new(RUNS_ROOT), task)?;
    eprintln!(
        "checkpoint: {} (the newest run under {RUNS_ROOT}/; --checkpoint DIR picks another)",
        checkpoint::resolve(&run)?.display()
    );
    Ok(run)
}

/// What `--source-lang` / `--target-lang` may do to a model of one pair that names its own.
#[derive(Clone, Copy, PartialEq, Eq)]
enum OnePairLanguages {
    /// Only name them again: the model translates its pair whatever a flag says.
    Refuse,
    /// Rename them (a server's clients then ask for the pair by the flags' codes), with a
    /// warning.
    Rename,
}

/// The translation checkpoint at `given`, or the newest one under runs/ (see
/// `checkpoint_or_latest`), opened on `device` with `options` (its compute type the
/// checkpoint's `decode.compute_type` when `None`), its notes said on stderr; a language
/// model is refused, by name, and a language the model cannot translate in (see
/// `check_language_flags`) is a usage error naming its flag.
fn open_translator(
    given: Option<&Path>,
    device: &candle_core::Device,
    options: LoadOptions,
    one_pair: OnePairLanguages,
) -> anyhow::Result<Translator> {
    let dir = checkpoint_or_latest(given, Task::Translate)?;
    let (source, target) = (options.source_lang.clone(), options.target_lang.clone());
    let mut translator = Translator::open(
        &dir,
        device,
        LoadOptions {
            source_lang: None,
            target_lang: None,
            ..options
        },
    )?;
    check_language_flags(&translator, source.as_deref(), target.as_deref(), one_pair)?;
    // A model of one pair keeps its own names (its sentences are cut by its source's rules);
    // a server renames them only for its clients (`ServeSettings::pair_names`).
    let data = &translator.checkpoint().config.data;
    let one_pair_named = translator.languages().is_none();
    let unless_own = |code: Option<String>, own: &Option<String>| {
        code.filter(|_| !(one_pair_named && own.is_some()))
    };
    let (source_named, target_named) = (
        unless_own(source, &data.source_lang),
        unless_own(target, &data.target_lang),
    );
    translator.name_languages(source_named.as_deref(), target_named.as_deref())?;
    for note in translator.notes() {
        stdout::warn(format_args!("{note}"));
    }
    Ok(translator)
}

/// Refuses `--source-lang` / `--target-lang` that `translator` cannot translate in: a code a
/// multilingual model lacks, half a pair it cannot complete, or (unless `one_pair` renames)
/// a language other than the one a model of one pair says it reads or writes (it would
/// translate into its own language anyway, under another name).
fn check_language_flags(
    translator: &Translator,
    source: Option<&str>,
    target: Option<&str>,
    one_pair: OnePairLanguages,
) -> Result<(), UsageError> {
    let checkpoint = translator.checkpoint();
    let data = &checkpoint.config.data;
    let multilingual = translator.languages().is_some();
    let flags = [
        ("--source-lang", source, &data.source_lang),
        ("--target-lang", target, &data.target_lang),
    ];
    for (flag, code, own) in flags {
        let Some(code) = code else { continue };
        if multilingual {
            if let Err(error) = translator.language_ids(code, code) {
                return Err(UsageError(format!("{flag} {code}: {error}")));
            }
        } else if let Some(own) = own.as_deref().filter(|own| !own.eq_ignore_ascii_case(code)) {
            if one_pair == OnePairLanguages::Rename {
                stdout::warn(format_args!(
                    "{flag} {code}: clients call the model's {own} \"{code}\"; {} still \
                     translates {} to {}",
                    checkpoint.dir.display(),
                    data.source_lang.as_deref().unwrap_or("?"),
                    data.target_lang.as_deref().unwrap_or("?"),
                ));
                continue;
            }
            return Err(UsageError(format!(
                "{flag} {code}: {} translates {} to {} only; drop {flag}, or name {own}",
                checkpoint.dir.display(),
                data.source_lang.as_deref().unwrap_or("?"),
                data.target_lang.as_deref().unwrap_or("?"),
            )));
        }
    }
    let [(source_flag, source, own_source), (target_flag, target, own_target)] = flags;
    let half = match (source, target) {
        (Some(_), None) if own_target.is_none() => Some((source_flag, target_flag)),
        (None, Some(_)) if own_source.is_none() => Some((target_flag, source_flag)),
        _ => None,
    };
    match half {
        Some((given, missing)) if multilingual => Err(UsageError(format!(
            "{given} names half a language pair: give {missing} too"
        ))),
        _ => Ok(()),
    }
}

/// Refuses to translate with a multilingual model before its language pair is named.
fn require_language_pair(translator: &Translator) -> anyhow::Result<()> {
    let tokenizers = &translator.checkpoint().tokenizers;
    match tokenizers.multilingual_tokenizer() {
        Some(tokenizer) if tokenizers.languages.is_none() => Err(UsageError(format!(
            "{} is a multilingual model of {} languages: name the pair with --source-lang and \
             --target-lang (its codes: {})",
            translator.checkpoint().dir.display(),
            tokenizer.languages().count(),
            tokenizer.codes_like("")
        ))
        .into()),
        _ => Ok(()),
    }
}

/// A text generator over a loaded checkpoint's model and target tokenizer.
fn text_generator<'a>(
    loaded: &'a Checkpoint,
    device: &'a candle_core::Device,
) -> anyhow::Result<TextGenerator<'a>> {
    Ok(TextGenerator {
        model: loaded.model_for(Task::Continue)?.decoding(),
        tokenizer: &loaded.tokenizers.tgt,
        device,
    })
}

/// The decoding flags over the checkpoint's `[decode]` settings, resolved and checked by
/// the one resolver every door uses; a value out of bounds is a usage error that names it.
fn decode_options(
    args: &DecodeSettingsArgs,
    translator: &Translator,
) -> anyhow::Result<DecodeOptions> {
    Ok(decode_resolver(args, translator, None)?.defaults())
}

/// The resolver of a door over `translator`: its checkpoint's `[decode]`, then the flags;
/// `door_beam` is a server's widest beam.
fn decode_resolver(
    args: &DecodeSettingsArgs,
    translator: &Translator,
    door_beam: Option<usize>,
) -> anyhow::Result<Resolver> {
    let flags = DecodeRequest {
        beam: args.beam,
        length_penalty: args.length_penalty,
        max_len: args.max_len,
        n_best: None,
    };
    translator
        .resolver(Some(Layer::asked(flags, crate::cli::FLAGS)), door_beam)
        .map_err(refused)
}

/// A refused decoding setting as the command reports it: a usage error (status 2) when a
/// flag asked for it, the file's error (status 1) when the checkpoint's config holds it.
fn refused(refusal: Refused) -> anyhow::Error {
    if refusal.in_config {
        anyhow::Error::msg(refusal.message)
    } else {
        UsageError(refusal.message).into()
    }
}

/// The first `n` characters of `text`, with an ellipsis when cut.
pub(crate) fn truncate_chars(text: &str, n: usize) -> String {
    match text.char_indices().nth(n) {
        Some((cut, _)) => format!("{}...", &text[..cut]),
        None => text.to_string(),
    }
}
