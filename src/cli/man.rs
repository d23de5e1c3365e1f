//! `transformer man`'s flag: where to write the pages instead of stdout.

use std::path::PathBuf;

use clap::Args;

#[derive(Debug, Args)]
pub struct ManArgs {
    /// Write transformer.1 and one transformer-SUBCOMMAND.1 per subcommand into DIR (created
    /// if missing), each replaced whole, instead of printing them all to stdout
    #[arg(long, value_name = "DIR")]
    pub out_dir: Option<PathBuf>,
}
