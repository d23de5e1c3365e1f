//! `transformer sentences`: text cut into sentences exactly as `translate` and `serve` cut
//! it, to see (and measure) where the boundaries fall.
//!
//! Its arguments: the text and the language whose rules cut it.

use clap::Args;

use crate::sentences::SentenceSplitter;
use crate::stdin_lines::{BatchEnd, StdinLines};
use crate::stdout::print_line;

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

pub fn run(args: SentencesArgs) -> anyhow::Result<()> {
    let splitter = SentenceSplitter::new(Some(&args.lang), true);
    let print = |line: &str| -> anyhow::Result<()> {
        let sentences: Vec<&str> = splitter
            .sentences_of_line(line)
            .into_iter()
            .map(|range| &line[range])
            .collect();
        if args.json {
            print_line(&serde_json::to_string(&sentences)?)
        } else {
            for sentence in sentences {
                print_line(sentence)?;
            }
            print_line("")
        }
    };
    match args.text.as_deref() {
        Some(text) if text != "-" => {
            for line in text.lines() {
                print(line)?;
            }
            Ok(())
        }
        _ => {
            let mut lines = StdinLines::new("cut into sentences");
            loop {
                let batch = lines.next_batch(1024)?;
                for line in &batch.lines {
                    print(line)?;
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
