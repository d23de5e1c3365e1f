//! The checkpoint a command reads: `--checkpoint` (a directory or a Hub name) or the newest run
//! under runs/, opened as a translator (the language flags checked against the model) or a text
//! generator, and the decoding flags over its `[decode]` settings.

use std::path::{Path, PathBuf};

use crate::checkpoint::{self, Checkpoint, Task, RUNS_ROOT};
use crate::commands::download;
use crate::errors::refused;
use crate::flags::DecodeSettingsArgs;
use crate::infer::settings::DecodeRequest;
use crate::infer::settings::DecodeSettings;
use crate::infer::text_generator::TextGenerator;
use crate::infer::{LoadOptions, Translator};
use crate::stdout;

/// The checkpoint a command reads: `--checkpoint` when given, else the newest run of the
/// `arch` family under runs/, which is then named on stderr so that the user knows which
/// model answered.
pub fn checkpoint_or_latest(given: Option<&Path>, task: Task) -> anyhow::Result<PathBuf> {
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

/// The translation checkpoint at `given`, or the newest one under runs/ (see
/// `checkpoint_or_latest`), opened on `device` with `options` (its compute type the
/// checkpoint's `decode.compute_type` when `None`; its language codes checked by the library's
/// rule, `options.one_pair`), its notes said on stderr; a language model is refused, by name,
/// and a language the model cannot translate in is refused naming its flag (a usage error:
/// see `main`).
pub fn open_translator(
    given: Option<&Path>,
    device: &candle_core::Device,
    options: LoadOptions,
) -> anyhow::Result<Translator> {
    let dir = checkpoint_or_latest(given, Task::Translate)?;
    let translator = Translator::open(&dir, device, options)?;
    for note in translator.notes() {
        stdout::warn(format_args!("{note}"));
    }
    Ok(translator)
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
pub fn decode_settings(
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
