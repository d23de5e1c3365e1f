//! `transformer sentences`'s flags: the text and the language whose rules cut it.

use clap::Args;

#[derive(Debug, Args)]
pub struct SentencesArgs {
    /// Text to cut; without it (or with -), each line of stdin
    #[arg(value_name = "TEXT")]
    pub text: Option<String>,
    /// The language whose rules apply (abbreviations, ordinals): de, en, fr, ...; others
    /// get English rules
    #[arg(long, value_name = "CODE")]
    pub lang: String,
    /// Print one JSON list of sentences per input line instead
    #[arg(long)]
    pub json: bool,
}
