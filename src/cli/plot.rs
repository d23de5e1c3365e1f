//! `transformer plot`'s flags: the run and where its picture goes.

use std::path::PathBuf;

use clap::Args;

#[derive(Debug, Args)]
pub struct PlotArgs {
    /// Run directory (holds metrics.jsonl)
    pub run_dir: PathBuf,
    /// Where to write the picture (default: RUN_DIR/loss.png)
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
}
