//! `transformer average RUN --last K`: the element-wise mean of a run's newest K kept
//! checkpoints, written as a checkpoint that `translate` and `eval` read.
//!
//! Its arguments: the run and how many kept checkpoints to average.

use std::path::PathBuf;

use clap::Args;

use crate::checkpoint::history::{average, AVERAGED_DIR};
use crate::flags::at_least_one;

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

pub fn run(args: AverageArgs) -> anyhow::Result<()> {
    let out = args.out.unwrap_or_else(|| args.run_dir.join(AVERAGED_DIR));
    let steps = average(&args.run_dir, args.last, &out, args.overwrite)
        .map_err(crate::errors::naming_out_flags)?;
    eprintln!(
        "averaged the checkpoints of steps {} into {}",
        steps
            .iter()
            .map(usize::to_string)
            .collect::<Vec<_>>()
            .join(", "),
        out.display()
    );
    Ok(())
}
