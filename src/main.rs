//! The `transformer` binary: parse the command line, run the command, report errors once.

use std::process::ExitCode;

use clap::Parser;
use transformer::cli::Cli;

fn main() -> ExitCode {
    let cli = Cli::parse();
    match transformer::commands::run(cli.command) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
