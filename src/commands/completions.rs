//! `transformer completions SHELL`: the shell's completion script for every subcommand and
//! flag, generated from the clap definitions (as ripgrep ships its own), on stdout.
//!
//! Its arguments: the shell whose completion script to print.

use clap::Args;
use clap::CommandFactory;
use clap_complete::Shell;

use super::Cli;
use crate::stdout;

#[derive(Debug, Args)]
pub struct CompletionsArgs {
    /// The shell to complete in: bash, zsh, fish, elvish or powershell
    #[arg(value_name = "SHELL")]
    pub shell: Shell,
}

/// The name the scripts complete: the installed binary's.
const BIN_NAME: &str = "transformer";

pub fn run(args: CompletionsArgs) -> anyhow::Result<()> {
    let mut script = Vec::new();
    // Into memory first: clap_complete panics on a failed write, and stdout's failures (a
    // closed pipe, a full disk) have their own wording.
    clap_complete::generate(args.shell, &mut Cli::command(), BIN_NAME, &mut script);
    stdout::print(&String::from_utf8(script)?)
}
