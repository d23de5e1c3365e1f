//! `transformer attention`'s flags: the sentence, the checkpoint, the layers, the picture.

use std::path::PathBuf;

use clap::Args;

use super::{at_least_one, DeviceArgs};

#[derive(Debug, Args)]
pub struct AttentionArgs {
    /// The source sentence
    pub text: String,
    /// Checkpoint or run directory (default: the latest run under runs/)
    #[arg(long, value_name = "DIR")]
    pub checkpoint: Option<PathBuf>,
    /// Where to write the picture
    #[arg(long, value_name = "FILE", default_value = "attention.png")]
    pub out: PathBuf,
    /// Teacher-force this translation instead of the model's own greedy one
    #[arg(long, value_name = "TEXT")]
    pub target: Option<String>,
    /// Draw only these layers (1-based, comma-separated; default: all)
    #[arg(long, value_name = "N,...", value_delimiter = ',', value_parser = at_least_one)]
    pub layers: Vec<usize>,
    /// What the linear layers compute in: float32, int8 or bfloat16 [default: the
    /// checkpoint's decode.compute_type, else float32]
    #[arg(long, value_name = "TYPE", value_parser = crate::config::ComputeType::parse)]
    pub compute_type: Option<crate::config::ComputeType>,
    #[command(flatten)]
    pub device: DeviceArgs,
}
