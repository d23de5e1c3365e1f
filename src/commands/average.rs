//! `transformer average RUN --last K`: the element-wise mean of a run's newest K kept
//! checkpoints, written as a checkpoint that `translate` and `eval` read.

use crate::checkpoint::history::{average, AVERAGED_DIR};
use crate::cli::AverageArgs;

pub fn run(args: AverageArgs) -> anyhow::Result<()> {
    let out = args.out.unwrap_or_else(|| args.run_dir.join(AVERAGED_DIR));
    let steps =
        average(&args.run_dir, args.last, &out, args.overwrite).map_err(super::naming_out_flags)?;
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
