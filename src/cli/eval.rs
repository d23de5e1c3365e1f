//! `transformer eval`'s flags: the references, and a hypothesis file or a checkpoint and
//! sources to translate.

use std::path::PathBuf;

use clap::{ArgGroup, Args};

use super::{DecodeArgs, DeviceArgs};

#[derive(Debug, Args)]
#[command(group(ArgGroup::new("input").required(true).args(["hyp", "src"])))]
pub struct EvalArgs {
    /// Reference translations, one per line (plain or .gz; - is stdin)
    #[arg(long = "ref", value_name = "FILE")]
    pub reference: PathBuf,
    /// Score this hypothesis file instead of translating (no model needed; - is stdin)
    #[arg(long, value_name = "FILE", conflicts_with_all = ["checkpoint", "src"])]
    pub hyp: Option<PathBuf>,
    /// Checkpoint or run directory to translate --src with; default: the translation run
    /// under runs/ written most recently
    #[arg(long, value_name = "DIR", requires = "src")]
    pub checkpoint: Option<PathBuf>,
    /// Source sentences to translate, one per line, aligned with --ref (- is stdin)
    #[arg(long, value_name = "FILE")]
    pub src: Option<PathBuf>,
    /// Also write the translations here
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
    /// Print {"bleu": ..., "signature": ..., ...} instead of sacreBLEU's text lines
    #[arg(long)]
    pub json: bool,
    /// Lowercase hypotheses and references for BLEU (sacreBLEU's -lc; chrF keeps the case)
    #[arg(long)]
    pub lowercase: bool,
    /// Cut each --src line into sentences (the checkpoint's data.source_lang rules),
    /// translate them and join them back, for sources with several sentences a line
    /// (Multi30k's lines are one sentence each)
    #[arg(long, requires = "src")]
    pub split_sentences: bool,
    #[command(flatten)]
    pub decode: DecodeArgs,
    #[command(flatten)]
    pub device: DeviceArgs,
}
