//! `transformer man`: the roff man pages of `transformer` and of each subcommand, generated
//! from the clap definitions by clap_mangen: all of them on stdout (`transformer man | man -l
//! -`), or with `--out-dir DIR` one file per page (`transformer.1`, `transformer-train.1`, ...),
//! each written atomically.
//!
//! Its arguments: where to write the pages instead of stdout.

use std::path::Path;
use std::path::PathBuf;

use anyhow::Context;
use clap::Args;
use clap::CommandFactory;
use clap_mangen::Man;

use super::Cli;
use crate::atomic_file::write_atomic;
use crate::stdout;

#[derive(Debug, Args)]
pub struct ManArgs {
    /// Write transformer.1 and one transformer-SUBCOMMAND.1 per subcommand into DIR (created
    /// if missing), each replaced whole, instead of printing them all to stdout
    #[arg(long, value_name = "DIR")]
    pub out_dir: Option<PathBuf>,
}

pub fn run(args: ManArgs) -> anyhow::Result<()> {
    let pages = pages()?;
    match args.out_dir {
        None => stdout::print(
            &pages
                .iter()
                .map(|(_, page)| page.as_str())
                .collect::<String>(),
        ),
        Some(dir) => write_pages(&dir, &pages),
    }
}

/// (file name, roff text) for `transformer` and then each subcommand, as clap_mangen's
/// `generate_to` names them: the subcommands' pages are titled `transformer-SUBCOMMAND` and
/// their synopses read `transformer SUBCOMMAND`.
fn pages() -> anyhow::Result<Vec<(String, String)>> {
    // The `help` subcommand is clap's, not a page of ours; `build` gives every subcommand its
    // display name (`transformer-train`) and its usage's name (`transformer train`).
    let mut cli = Cli::command().disable_help_subcommand(true);
    cli.build();
    let commands = std::iter::once(cli.clone()).chain(
        cli.get_subcommands()
            .filter(|command| !command.is_hide_set())
            .cloned(),
    );
    commands
        .map(|command| {
            let man = Man::new(command);
            let mut page = Vec::new();
            man.render(&mut page)?;
            Ok((man.get_filename(), String::from_utf8(page)?))
        })
        .collect()
}

/// Writes each page into `dir` (created if missing), replacing an earlier version whole, and
/// says on stderr how many it wrote.
fn write_pages(dir: &Path, pages: &[(String, String)]) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir).with_context(|| {
        format!(
            "cannot create {}; pass --out-dir a directory you can write to",
            dir.display()
        )
    })?;
    for (name, page) in pages {
        write_atomic(&dir.join(name), page.as_bytes())?;
    }
    eprintln!("wrote {} man pages into {}", pages.len(), dir.display());
    Ok(())
}
