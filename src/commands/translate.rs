//! `transformer translate`: one sentence from the command line, or stdin line by line. Lines
//! already waiting on stdin are decoded together; a line typed at a terminal is translated as
//! soon as it is complete.

use std::io::{BufRead, BufReader, Stdin};

use anyhow::Context;

use super::stdout::print_line;
use crate::cli::TranslateArgs;
use crate::infer::translator::{Translation, Translator};
use crate::progress::Verbosity;

pub fn run(args: TranslateArgs) -> anyhow::Result<()> {
    let device = super::device_from(&args.device, Verbosity::Normal)?;
    let loaded = super::load_translation_model(args.checkpoint.as_deref(), &device)?;
    let options = super::decode_options(&args.decode.settings, &loaded)?;
    let translator = super::translator(&loaded, &device, options)?;
    let output = Output {
        json: args.json,
        max_positions: loaded.config.model.max_len,
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
    let mut lines = StdinLines::new();
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

/// Stdin as UTF-8 lines (a leading byte-order mark dropped).
struct StdinLines {
    reader: BufReader<Stdin>,
    read: usize,
}

/// Lines read together, numbered from `first_line`, and what stopped the batch.
struct Batch {
    first_line: usize,
    lines: Vec<String>,
    end: BatchEnd,
}

enum BatchEnd {
    /// The batch is full, or no more input has arrived yet.
    More,
    /// Stdin is at its end.
    Input,
    /// The next line cannot be read (not UTF-8, or a read error).
    Error(anyhow::Error),
}

impl StdinLines {
    fn new() -> Self {
        Self {
            // Large reads take a whole redirected file's lines at once; from a terminal or a
            // slow pipe a read returns what has arrived, often one line.
            reader: BufReader::with_capacity(1 << 16, std::io::stdin()),
            read: 0,
        }
    }

    /// Up to `size` lines: those already buffered after the first, so that the batch never
    /// waits for input that has not been typed yet.
    fn next_batch(&mut self, size: usize) -> anyhow::Result<Batch> {
        let first_line = self.read + 1;
        let mut lines = Vec::with_capacity(size);
        let end = loop {
            match self.next_line() {
                Ok(Some(line)) => lines.push(line),
                Ok(None) => break BatchEnd::Input,
                Err(e) => break BatchEnd::Error(e),
            }
            if lines.len() == size || self.reader.buffer().is_empty() {
                break BatchEnd::More;
            }
        };
        Ok(Batch {
            first_line,
            lines,
            end,
        })
    }

    fn next_line(&mut self) -> anyhow::Result<Option<String>> {
        let mut bytes = Vec::new();
        if self
            .reader
            .read_until(b'\n', &mut bytes)
            .context("cannot read stdin")?
            == 0
        {
            return Ok(None);
        }
        self.read += 1;
        let text = String::from_utf8(bytes).map_err(|_| {
            anyhow::anyhow!(
                "stdin line {} is not valid UTF-8; the lines before it were translated; \
                 convert the input to UTF-8 (iconv -t UTF-8)",
                self.read
            )
        })?;
        let text = text.trim_end_matches(['\n', '\r']);
        let text = if self.read == 1 {
            text.trim_start_matches('\u{feff}')
        } else {
            text
        };
        Ok(Some(text.to_string()))
    }
}

/// How results are printed.
struct Output {
    json: bool,
    /// The model's `max_len`, for the warning about cut sentences.
    max_positions: usize,
}

impl Output {
    /// Warns about unknown words and cut sentences on stderr, prints the result on stdout.
    fn emit(&self, translation: &Translation) -> anyhow::Result<()> {
        for word in &translation.unknown_words {
            eprintln!("warning: unknown source word {word:?} is translated as <unk>");
        }
        if let Some(tokens) = translation.truncated_from {
            eprintln!(
                "warning: {:?} has {tokens} tokens, more than the model reads; only the first \
                 {} were translated (model.max_len {}); split long sentences",
                truncate_chars(&translation.source, 40),
                self.max_positions - 2,
                self.max_positions
            );
        }
        if self.json {
            print_line(&serde_json::to_string(translation)?)
        } else {
            print_line(&translation.translation)
        }
    }
}

/// The first `n` characters of `text`, with an ellipsis when cut.
fn truncate_chars(text: &str, n: usize) -> String {
    match text.char_indices().nth(n) {
        Some((cut, _)) => format!("{}...", &text[..cut]),
        None => text.to_string(),
    }
}
