//! `transformer generate`'s flags: the prompt, the language model, sampling or beam search.

use std::path::PathBuf;

use clap::Args;

use super::{at_least_one, finite, non_negative, DeviceArgs};

#[derive(Debug, Args)]
pub struct GenerateArgs {
    /// Text to continue; without it, the model starts a line of its own; - continues each
    /// line of stdin, one output line per input line, in batches (prompts of one token
    /// length are decoded together, each exactly as it would be alone)
    #[arg(default_value = "", value_name = "PROMPT")]
    pub prompt: String,
    /// Language-model checkpoint or run directory (a run's best/, else last/); default: the
    /// language-model run under runs/ written most recently
    #[arg(long, value_name = "DIR")]
    pub checkpoint: Option<PathBuf>,
    /// Most tokens to add (fewer when the model ends the line or the position table ends)
    #[arg(long, default_value_t = 100, value_name = "N")]
    pub max_new: usize,
    /// Softmax temperature; 0 always takes the most likely token (greedy)
    #[arg(long, default_value_t = 1.0, value_name = "T", value_parser = non_negative)]
    pub temperature: f64,
    /// Draw only among the K most likely tokens
    #[arg(long, value_name = "K", value_parser = at_least_one)]
    pub top_k: Option<usize>,
    /// Seed of the draws: the same seed, prompt and checkpoint give the same text
    #[arg(long, default_value_t = 0, value_name = "S")]
    pub seed: u64,
    /// Beam search with N beams instead of sampling: the continuation the model scores
    /// highest under the length penalty (N at most the vocabulary's size)
    #[arg(long, value_name = "N", value_parser = at_least_one,
          conflicts_with_all = ["temperature", "top_k", "seed"])]
    pub beam: Option<usize>,
    /// Length penalty exponent for --beam: scores are divided by ((5 + len) / 6)^alpha
    /// [default: 1.0]
    #[arg(long, value_name = "ALPHA", value_parser = finite, allow_negative_numbers = true,
          requires = "beam")]
    pub length_penalty: Option<f64>,
    /// Most prompts from stdin decoded together
    #[arg(long, default_value_t = 32, value_name = "N", value_parser = at_least_one)]
    pub batch_size: usize,
    #[command(flatten)]
    pub device: DeviceArgs,
}
