//! `transformer tokenize`: the ids (or pieces) a checkpoint's tokenizer gives a line, framed
//! as the model reads it: a source with its specials (ours `<s> .. </s>`, MarianMT's `..
//! </s>`, a multilingual model's `--lang` token first), a target (`--target`) as the labels
//! the decoder predicts (`.. </s>`, after a multilingual model's language token). One line
//! of space-separated ids per input line; unknown pieces are warned about on stderr.
//!
//! Its arguments: the text, the checkpoint, which side, ids or pieces.

use std::path::PathBuf;

use clap::Args;

use crate::checkpoint::{self, Task};
use crate::errors::UsageError;
use crate::stdin_lines::{BatchEnd, StdinLines};
use crate::stdout::{print_line, warn};
use crate::tokenize::Tokenizers;

#[derive(Debug, Args)]
pub struct TokenizeArgs {
    /// Text to tokenize; without it (or with -), each line of stdin
    #[arg(value_name = "TEXT")]
    pub text: Option<String>,
    /// Checkpoint or run directory (default: the translation run under runs/ written most
    /// recently)
    #[arg(long, value_name = "DIR")]
    pub checkpoint: Option<PathBuf>,
    /// Tokenize as a target (reference) sentence instead of a source
    #[arg(long)]
    pub target: bool,
    /// Print the pieces instead of their ids
    #[arg(long)]
    pub pieces: bool,
    /// The text's language, for a multilingual model (M2M100: de; NLLB-200: deu_Latn): its
    /// token frames the line, as the model's tokenizer frames it
    #[arg(long, value_name = "CODE")]
    pub lang: Option<String>,
}

pub fn run(args: TokenizeArgs) -> anyhow::Result<()> {
    let dir =
        crate::open_checkpoint::checkpoint_or_latest(args.checkpoint.as_deref(), Task::Translate)?;
    let (_, _, mut tokenizers) = checkpoint::load_tokenizers(&dir)?;
    if let Some(tokenizer) = tokenizers.multilingual_tokenizer() {
        let Some(lang) = &args.lang else {
            return Err(UsageError(format!(
                "{} is a multilingual model: name the text's language with --lang (its codes: \
                 {})",
                dir.display(),
                tokenizer.codes_like("")
            ))
            .into());
        };
        if let Err(error) = tokenizers.name_languages(lang, lang) {
            return Err(UsageError(format!("--lang {lang}: {error}")).into());
        }
    } else if args.lang.is_some() {
        return Err(UsageError(format!(
            "--lang names a multilingual model's language, and {} is a model of one pair: \
             drop --lang",
            dir.display()
        ))
        .into());
    }
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

/// The most bytes of a line tokenized: a tokenizer holds about a hundred bytes for each
/// character it reads, so a 16 MiB line (the most a line may be) took 1.7 GB; 4 MiB are
/// thousands of times what a model reads.
const MOST_TOKENIZED_BYTES: usize = 4 << 20;

/// One line's ids or pieces, space-separated; of a line longer than
/// [`MOST_TOKENIZED_BYTES`], its beginning's, with a warning.
fn tokenized(tokenizers: &Tokenizers, text: &str, args: &TokenizeArgs) -> anyhow::Result<String> {
    let mut cut = text.len().min(MOST_TOKENIZED_BYTES);
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    if cut < text.len() {
        warn(format_args!(
            "a line of {} bytes is longer than {MOST_TOKENIZED_BYTES} bytes, thousands of times \
             what a model reads; only the tokens of its first {cut} bytes are shown",
            text.len()
        ));
    }
    let text = &text[..cut];
    let specials = tokenizers.specials();
    let (side, ids) = if args.target {
        let mut ids = tokenizers.tgt.encode(text)?;
        // The labels: a multilingual model's forced language token, the ids, `</s>`.
        ids.ids.splice(0..0, specials.forced);
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
