//! The checkpoint a command reads: `--checkpoint` (a directory or a Hub name) or the newest run
//! under runs/, opened as a translator (the language flags checked against the model) or a text
//! generator, and the decoding flags over its `[decode]` settings.

use std::path::{Path, PathBuf};

use crate::checkpoint::{self, Checkpoint, Task, RUNS_ROOT};
use crate::commands::download;
use crate::errors::{refused, UsageError};
use crate::flags::DecodeSettingsArgs;
use crate::infer::settings::DecodeRequest;
use crate::infer::settings::DecodeSettings;
use crate::infer::text_generator::TextGenerator;
use crate::infer::{LoadOptions, Translator};
use crate::stdout;

/// The checkpoint a command reads: `--checkpoint` when given, else the newest run of the
/// `arch` family under runs/, which is then named on stderr so that the user knows which
/// model answered.
pub(crate) fn checkpoint_or_latest(given: Option<&Path>, task: Task) -> anyhow::Result<PathBuf> {
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
pub(crate) enum OnePairLanguages {
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
pub(crate) fn open_translator(
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
pub(crate) fn check_language_flags(
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
pub(crate) fn require_language_pair(translator: &Translator) -> anyhow::Result<()> {
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
pub(crate) fn text_generator<'a>(
    loaded: &'a Checkpoint,
    device: &'a candle_core::Device,
) -> anyhow::Result<TextGenerator<'a>> {
    Ok(TextGenerator {
        model: loaded.model_for(Task::Continue)?.decoding(),
        tokenizer: &loaded.tokenizers.tgt,
        device,
    })
}

/// The decoding flags over the checkpoint's `[decode]` settings, settled and checked as
/// every door's are; `door_beam` is a server's widest beam. A value out of bounds is a usage
/// error that names it.
pub(crate) fn decode_settings(
    args: &DecodeSettingsArgs,
    translator: &Translator,
    door_beam: Option<usize>,
) -> anyhow::Result<DecodeSettings> {
    let flags = DecodeRequest {
        beam: args.beam,
        length_penalty: args.length_penalty,
        max_len: args.max_len,
        n_best: None,
        ..DecodeRequest::by(crate::flags::FLAGS)
    };
    translator
        .decode_settings(Some(flags), door_beam)
        .map_err(refused)
}
