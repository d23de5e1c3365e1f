//! `transformer average`'s flags: the run and how many kept checkpoints to average.

use std::path::PathBuf;

use clap::Args;

use super::at_least_one;

#[derive(Debug, Args)]
pub struct AverageArgs {
    /// Run directory (holds checkpoints/step-N/)
    pub run_dir: PathBuf,
    /// How many of the newest kept checkpoints to average
    #[arg(long, value_name = "K", value_parser = at_least_one)]
    pub last: usize,
    /// Where to write the averaged checkpoint (default: RUN_DIR/averaged, which is replaced
    /// as the run's average)
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Replace an existing --out that is not this run's own averaged/ (an averaged checkpoint
    /// only)
    #[arg(long)]
    pub overwrite: bool,
}
