//! `transformer plot`: redraws a run's loss.png from its metrics.jsonl.
//!
//! Its arguments: the run and where its picture goes.

use std::path::PathBuf;

use anyhow::bail;
use clap::Args;

use crate::checkpoint::{self, LOSS_PLOT_FILE, METRICS_FILE};
use crate::plot::write_training_curves;

#[derive(Debug, Args)]
pub struct PlotArgs {
    /// Run directory (holds metrics.jsonl)
    pub run_dir: PathBuf,
    /// Where to write the picture (default: RUN_DIR/loss.png)
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
}

pub fn run(args: PlotArgs) -> anyhow::Result<()> {
    let metrics = checkpoint::load_metrics(&args.run_dir)?;
    let out = args
        .out
        .unwrap_or_else(|| args.run_dir.join(LOSS_PLOT_FILE));
    if !write_training_curves(&metrics, &out)? {
        bail!(
            "{} holds no loss records yet, so there is nothing to draw; train past \
             training.log_every steps or one epoch first",
            args.run_dir.join(METRICS_FILE).display()
        );
    }
    eprintln!("wrote {}", out.display());
    Ok(())
}
