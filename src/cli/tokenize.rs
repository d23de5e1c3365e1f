//! `transformer tokenize`'s flags: the text, the checkpoint, which side, ids or pieces.

use std::path::PathBuf;

use clap::Args;

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
