//! `transformer translate`: one sentence from the command line, or stdin in batches of lines.

use std::io::{BufRead, Write};
use std::path::Path;

use anyhow::Context;

use crate::checkpoint::{self, RUNS_ROOT};
use crate::cli::TranslateArgs;
use crate::translator::Translation;

pub fn run(args: TranslateArgs) -> anyhow::Result<()> {
    let options = super::decode_options(&args.decode)?;
    let dir = match &args.checkpoint {
        Some(dir) => dir.clone(),
        None => checkpoint::latest_run(Path::new(RUNS_ROOT))?,
    };
    let device = super::device_from(&args.device)?;
    let loaded = checkpoint::load(&dir, &device)?;
    let translator = loaded.translator(&device, options);
    let max_positions = loaded.config.model.max_len;
    let mut out = std::io::stdout().lock();
    if let Some(text) = &args.text {
        return emit(
            &translator.translate(text)?,
            args.json,
            max_positions,
            &mut out,
        );
    }
    let mut lines = StdinLines::new();
    loop {
        let (first_line, batch) = lines.next_batch(args.decode.batch_size)?;
        if batch.is_empty() {
            return Ok(());
        }
        let translations = translator.translate_batch(&batch).with_context(|| {
            format!("stdin lines {first_line}-{}", first_line + batch.len() - 1)
        })?;
        for translation in &translations {
            emit(translation, args.json, max_positions, &mut out)?;
        }
    }
}

/// Stdin as UTF-8 lines, read a batch at a time.
struct StdinLines {
    stdin: std::io::StdinLock<'static>,
    read: usize,
}

impl StdinLines {
    fn new() -> Self {
        Self {
            stdin: std::io::stdin().lock(),
            read: 0,
        }
    }

    /// Up to `size` lines (fewer at the end of input); returns the first one's line number.
    fn next_batch(&mut self, size: usize) -> anyhow::Result<(usize, Vec<String>)> {
        let first = self.read + 1;
        let mut batch = Vec::with_capacity(size);
        let mut bytes = Vec::new();
        while batch.len() < size {
            bytes.clear();
            if self
                .stdin
                .read_until(b'\n', &mut bytes)
                .context("cannot read stdin")?
                == 0
            {
                break;
            }
            self.read += 1;
            let text = String::from_utf8(std::mem::take(&mut bytes)).map_err(|_| {
                anyhow::anyhow!(
                    "stdin line {} is not valid UTF-8; convert the input to UTF-8",
                    self.read
                )
            })?;
            batch.push(text.trim_end_matches(['\n', '\r']).to_string());
        }
        Ok((first, batch))
    }
}

/// Warns about unknown words on stderr and prints the result on stdout.
fn emit(
    translation: &Translation,
    json: bool,
    max_positions: usize,
    out: &mut impl Write,
) -> anyhow::Result<()> {
    for word in &translation.unknown_words {
        eprintln!("warning: unknown source word {word:?} is translated as <unk>");
    }
    if let Some(tokens) = translation.truncated_from {
        eprintln!(
            "warning: {:?} has {tokens} tokens, more than the model reads; only the first \
             {} were translated (model.max_len {}); split long sentences",
            truncate_chars(&translation.source, 40),
            max_positions - 2,
            max_positions
        );
    }
    if json {
        writeln!(out, "{}", serde_json::to_string(translation)?)?;
    } else {
        writeln!(out, "{}", translation.translation)?;
    }
    // Flushing per line keeps `translate` usable as a filter in a pipe.
    out.flush()?;
    Ok(())
}

/// The first `n` characters of `text`, with an ellipsis when cut.
fn truncate_chars(text: &str, n: usize) -> String {
    match text.char_indices().nth(n) {
        Some((cut, _)) => format!("{}...", &text[..cut]),
        None => text.to_string(),
    }
}
