//! `transformer translate`: one sentence from the command line, or stdin line by line. Lines
//! already waiting on stdin are decoded together; a line typed at a terminal is translated as
//! soon as it is complete.

use anyhow::Context;

use super::stdin_lines::{BatchEnd, StdinLines};
use super::stdout::{print_line, warn};
use crate::cli::TranslateArgs;
use crate::infer::translator::{Translation, Translator};
use crate::progress::Verbosity;

pub fn run(args: TranslateArgs) -> anyhow::Result<()> {
    let device = super::device_from(&args.device, Verbosity::Normal)?;
    let loaded = super::load_translation_model(
        args.checkpoint.as_deref(),
        &device,
        args.decode.settings.compute_type,
    )?;
    let options = super::decode_options(&args.decode.settings, &loaded)?;
    let translator = super::translator(&loaded, &device, options)?;
    let output = Output {
        tokenizers: &loaded.tokenizers,
        warned_of_language: std::cell::Cell::new(false),
        json: args.json,
        max_positions: loaded.config.model.max_len,
        source_overhead: loaded.tokenizers.specials().source_overhead(),
    };
    match args.text.as_deref() {
        Some(text) if text != "-" => output.emit(&translator.translate(text)?),
        _ => translate_stdin(&translator, args.decode.batch_size, &output),
    }
}

/// Translates stdin in batches of the lines already there; a line that is not UTF-8 ends
/// the stream after the lines before it are translated.
fn translate_stdin(
    translator: &Translator,
    batch_size: usize,
    output: &Output,
) -> anyhow::Result<()> {
    let mut lines = StdinLines::new("translated");
    loop {
        let batch = lines.next_batch(batch_size)?;
        if !batch.lines.is_empty() {
            let last = batch.first_line + batch.lines.len() - 1;
            let translations = translator
                .translate_batch(&batch.lines)
                .with_context(|| format!("stdin lines {}-{last}", batch.first_line))?;
            for translation in &translations {
                output.emit(translation)?;
            }
        }
        match batch.end {
            BatchEnd::More => {}
            BatchEnd::Input => return Ok(()),
            BatchEnd::Error(e) => return Err(e),
        }
    }
}

/// How results are printed.
struct Output<'a> {
    /// For the warning a multilingual model's source without a target-language token gets,
    /// and whether it was given.
    tokenizers: &'a crate::data::Tokenizers,
    warned_of_language: std::cell::Cell<bool>,
    json: bool,
    /// The model's `max_len` and the positions a source's specials take, for the warning
    /// about cut sentences.
    max_positions: usize,
    source_overhead: usize,
}

impl Output<'_> {
    /// Warns about unknown words and cut sentences on stderr, prints the result on stdout.
    fn emit(&self, translation: &Translation) -> anyhow::Result<()> {
        // Once: a file of lines without the token would otherwise say it on every line.
        if !self.warned_of_language.get() {
            if let Some(warning) = self.tokenizers.missing_language_token(&translation.source) {
                warn(format_args!("{warning} (said once)"));
                self.warned_of_language.set(true);
            }
        }
        for word in &translation.unknown_words {
            warn(format_args!(
                "unknown source word {word:?} is translated as <unk>"
            ));
        }
        if let Some(tokens) = translation.truncated_from {
            warn(format_args!(
                "{:?} has {tokens} tokens, more than the model reads; only the first {} were \
                 translated (model.max_len {}); split long sentences",
                super::truncate_chars(&translation.source, 40),
                self.max_positions - self.source_overhead,
                self.max_positions
            ));
        }
        if self.json {
            print_line(&serde_json::to_string(translation)?)
        } else {
            print_line(&translation.translation)
        }
    }
}
