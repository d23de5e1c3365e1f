//! `transformer plot`: redraws a run's loss.png from its metrics.jsonl.

use crate::checkpoint::{self, LOSS_PLOT_FILE};
use crate::cli::PlotArgs;
use crate::plot::write_training_curves;

pub fn run(args: PlotArgs) -> anyhow::Result<()> {
    let metrics = checkpoint::load_metrics(&args.run_dir)?;
    let out = args
        .out
        .unwrap_or_else(|| args.run_dir.join(LOSS_PLOT_FILE));
    write_training_curves(&metrics, &out)?;
    eprintln!("wrote {}", out.display());
    Ok(())
}
