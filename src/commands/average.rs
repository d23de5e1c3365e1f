//! `transformer average RUN --last K`: the element-wise mean of a run's newest K kept
//! checkpoints, written as a checkpoint that `translate` and `eval` read.

use crate::checkpoint::history::{average, AVERAGED_DIR};
use crate::cli::AverageArgs;

pub fn run(args: AverageArgs) -> anyhow::Result<()> {
    let own = args.run_dir.join(AVERAGED_DIR);
    let out = args.out.unwrap_or_else(|| own.clone());
    // The run's own average is replaced by a new one; anything else there is another run's
    // work, replaced only when asked.
    let same = |a: &std::path::Path, b: &std::path::Path| {
        a == b || matches!((a.canonicalize(), b.canonicalize()), (Ok(a), Ok(b)) if a == b)
    };
    if !args.overwrite && !same(&out, &own) && std::fs::symlink_metadata(&out).is_ok() {
        let exists = crate::checkpoint::OutRefused::Exists { out: out.clone() };
        return Err(super::naming_out_flags(exists.into()));
    }
    let steps = average(&args.run_dir, args.last, &out).map_err(super::naming_out_flags)?;
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
