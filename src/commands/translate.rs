//! `transformer translate`: one sentence from the command line, or stdin line by line.

use std::io::{BufRead, Write};
use std::path::Path;

use anyhow::Context;

use crate::checkpoint::{self, RUNS_ROOT};
use crate::cli::TranslateArgs;
use crate::translator::{Translation, Translator};

pub fn run(args: TranslateArgs) -> anyhow::Result<()> {
    let dir = match &args.checkpoint {
        Some(dir) => dir.clone(),
        None => checkpoint::latest_run(Path::new(RUNS_ROOT))?,
    };
    let device = super::device_from(&args.device)?;
    let loaded = checkpoint::load(&dir, &device)?;
    let translator = Translator {
        model: &loaded.model,
        src_vocab: &loaded.src_vocab,
        tgt_vocab: &loaded.tgt_vocab,
        max_positions: loaded.config.model.max_len,
        device: &device,
    };
    let mut out = std::io::stdout().lock();
    if let Some(text) = &args.text {
        return emit(
            &translator.translate(text, args.max_len)?,
            args.json,
            &mut out,
        );
    }
    let mut stdin = std::io::stdin().lock();
    let mut line = Vec::new();
    for number in 1.. {
        line.clear();
        if stdin
            .read_until(b'\n', &mut line)
            .context("cannot read stdin")?
            == 0
        {
            break;
        }
        let text = std::str::from_utf8(&line).map_err(|_| {
            anyhow::anyhow!("stdin line {number} is not valid UTF-8; convert the input to UTF-8")
        })?;
        let text = text.trim_end_matches(['\n', '\r']);
        let translation = translator
            .translate(text, args.max_len)
            .with_context(|| format!("stdin line {number}"))?;
        emit(&translation, args.json, &mut out)?;
    }
    Ok(())
}

/// Warns about unknown words on stderr and prints the result on stdout.
fn emit(translation: &Translation, json: bool, out: &mut impl Write) -> anyhow::Result<()> {
    for word in &translation.unknown_words {
        eprintln!("warning: unknown source word {word:?} is translated as <unk>");
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
