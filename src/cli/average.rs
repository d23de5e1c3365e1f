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
    /// Where to write the averaged checkpoint (default: RUN_DIR/averaged, replaced by each
    /// new average)
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Replace an averaged checkpoint already in --out (a run's last/ and best/ never)
    #[arg(long)]
    pub overwrite: bool,
}
