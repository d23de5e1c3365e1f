//! `transformer train`'s flags: the config, resuming, the run directory, the step limit.

use std::path::PathBuf;

use clap::Args;

use super::{at_least_one, DeviceArgs};

#[derive(Debug, Args)]
pub struct TrainArgs {
    /// TOML config; without it, the built-in base config (configs/base.toml)
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Continue the run in RUN_DIR from its last/ checkpoint, exactly where it stopped
    #[arg(long, value_name = "RUN_DIR", conflicts_with_all = ["config", "out", "seed", "overwrite"])]
    pub resume: Option<PathBuf>,
    /// Stop after step N with a checkpoint that --resume continues (for time-limited jobs)
    #[arg(long, value_name = "N", value_parser = at_least_one)]
    pub stop_at_step: Option<usize>,
    /// Run directory (overrides the config's run.dir; default runs/<config name>)
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Seed for initialisation, dropout and data order (overrides training.seed)
    #[arg(long, value_name = "S")]
    pub seed: Option<u64>,
    /// Replace a checkpoint already in the run directory
    #[arg(long)]
    pub overwrite: bool,
    /// What the passes compute in, over the config's training.dtype (a resumed run's too):
    /// f32; bf16 (on the CPU, products in bf16 on its bf16 engine, everything else f32; on a
    /// GPU, the passes in bf16); f16 (GPUs only). Weights and checkpoints stay f32
    #[arg(long, value_name = "DTYPE", value_parser = crate::config::ComputeDtype::parse)]
    pub dtype: Option<crate::config::ComputeDtype>,
    /// No progress output (errors and warnings still go to stderr)
    #[arg(long, short)]
    pub quiet: bool,
    #[command(flatten)]
    pub device: DeviceArgs,
}
