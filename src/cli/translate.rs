//! `transformer translate`'s flags: the text, stdin or a file, its format, sentence
//! splitting, decoding.

use std::path::PathBuf;

use clap::Args;

use super::{DecodeArgs, DeviceArgs};

#[derive(Debug, Args)]
pub struct TranslateArgs {
    /// Sentence to translate; without it (or with -), stdin is translated line by line
    #[arg(value_name = "TEXT")]
    pub text: Option<String>,
    /// Checkpoint or run directory (a run's best/, else last/); default: the translation run
    /// under runs/ written most recently
    #[arg(long, value_name = "DIR")]
    pub checkpoint: Option<PathBuf>,
    /// Print one JSON object per input line, with tokens, ids and log-probabilities (a line of
    /// several sentences: their tokens one after another)
    #[arg(long, conflicts_with_all = ["file", "format"])]
    pub json: bool,
    /// Translate this file into --out: .txt, .html/.htm or .docx (--format names the format
    /// of a file with another extension)
    #[arg(long, value_name = "FILE", requires = "out", conflicts_with = "text")]
    pub file: Option<PathBuf>,
    /// Where the translation is written instead of stdout (atomically, when the command is
    /// done; - is stdout); --file needs it
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
    /// What TEXT, stdin or --file holds: text (line by line), html (one page or fragment:
    /// the text translated, the markup kept) or docx; default: text, or --file's extension
    #[arg(long, value_name = "FORMAT")]
    pub format: Option<FormatArg>,
    #[command(flatten)]
    pub split: SplitArgs,
    #[command(flatten)]
    pub decode: DecodeArgs,
    #[command(flatten)]
    pub device: DeviceArgs,
}

/// The formats `translate` reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum FormatArg {
    Text,
    Html,
    Docx,
}

#[derive(Debug, Args)]
pub struct SplitArgs {
    /// Translate each line as one sentence, instead of cutting it into sentences first
    #[arg(long)]
    pub no_sentence_split: bool,
}
