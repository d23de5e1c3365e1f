//! `transformer infer-test`'s flags: how many untrained models, from which seed.

use clap::Args;

use super::DeviceArgs;

#[derive(Debug, Args)]
pub struct InferTestArgs {
    /// How many freshly initialised models to run
    #[arg(long, default_value_t = 10, value_name = "N")]
    pub runs: usize,
    /// Seed of the first model (run i uses seed + i); random when absent
    #[arg(long, value_name = "S")]
    pub seed: Option<u64>,
    #[command(flatten)]
    pub device: DeviceArgs,
}
