//! `transformer tokenize`: the ids (or pieces) a checkpoint's tokenizer gives a line, framed
//! as the model reads it: a source with its specials (ours `<s> .. </s>`, MarianMT's `..
//! </s>`), a target (`--target`) as the labels the decoder predicts (`.. </s>`). One line of
//! space-separated ids per input line; unknown pieces are warned about on stderr.

use super::stdin_lines::{BatchEnd, StdinLines};
use super::stdout::{print_line, warn};
use crate::checkpoint::{self, Task};
use crate::cli::TokenizeArgs;
use crate::tokenize::Tokenizers;

pub fn run(args: TokenizeArgs) -> anyhow::Result<()> {
    let dir = super::checkpoint_or_latest(args.checkpoint.as_deref(), Task::Translate)?;
    let (_, _, tokenizers) = checkpoint::load_tokenizers(&dir)?;
    let line = |text: &str| tokenized(&tokenizers, text, &args);
    match args.text.as_deref() {
        Some(text) if text != "-" => print_line(&line(text)?),
        _ => {
            let mut lines = StdinLines::new("tokenized");
            loop {
                let batch = lines.next_batch(256)?;
                for text in &batch.lines {
                    print_line(&line(text)?)?;
                }
                match batch.end {
                    BatchEnd::More => {}
                    BatchEnd::Input => return Ok(()),
                    BatchEnd::Error(e) => return Err(e),
                }
            }
        }
    }
}

/// One line's ids or pieces, space-separated.
fn tokenized(tokenizers: &Tokenizers, text: &str, args: &TokenizeArgs) -> anyhow::Result<String> {
    let specials = tokenizers.specials();
    let (side, ids) = if args.target {
        let mut ids = tokenizers.tgt.encode(text)?;
        ids.ids.push(specials.eos);
        (&tokenizers.tgt, ids)
    } else {
        let encoded = tokenizers.src.encode(text)?;
        let ids = specials.source(&encoded.ids);
        (
            &tokenizers.src,
            crate::tokenize::vocab::Encoded {
                ids,
                unknown: encoded.unknown,
            },
        )
    };
    // Each piece once a line: a pasted blob repeats its pieces a million times.
    let mut warned = std::collections::HashSet::new();
    for piece in ids
        .unknown
        .iter()
        .filter(|piece| warned.insert(piece.as_str()))
    {
        warn(format_args!(
            "{piece:?} is not in the vocabulary and becomes <unk>"
        ));
    }
    let words: Vec<String> = if args.pieces {
        ids.ids.iter().map(|&id| side.token(id)).collect()
    } else {
        ids.ids.iter().map(u32::to_string).collect()
    };
    Ok(words.join(" "))
}
