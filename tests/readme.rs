//! The usage lines of docs/usage.md (the command reference the README links to) against the
//! binary's own `--help`: a flag added, renamed or removed in one must be changed in the other.

mod common;

use std::collections::{BTreeMap, BTreeSet};

use common::{subcommand_names, succeeded, transformer};

/// The long flags (`--name`) in `text`, without `--help`.
fn long_flags(text: &str) -> BTreeSet<String> {
    text.split(|c: char| c.is_whitespace() || "[]()|,=".contains(c))
        .filter_map(|word| word.strip_prefix("--"))
        .map(|name| {
            name.chars()
                .take_while(|c| c.is_ascii_lowercase() || *c == '-')
                .collect::<String>()
        })
        .filter(|name| !name.is_empty() && name != "help")
        .collect()
}

/// Subcommand -> the flags its lines in docs/usage.md's usage block name.
fn readme_usage() -> BTreeMap<String, BTreeSet<String>> {
    let readme = std::fs::read_to_string("docs/usage.md").unwrap();
    let block = readme
        .split_once("## Usage\n\n```sh\n")
        .and_then(|(_, rest)| rest.split_once("```"))
        .map(|(block, _)| block)
        .expect("docs/usage.md has a ## Usage section opening with a sh block");
    let mut usage: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut current = String::new();
    for line in block.lines() {
        if let Some(rest) = line.strip_prefix("transformer ") {
            current = rest.split_whitespace().next().unwrap().to_string();
        }
        usage
            .entry(current.clone())
            .or_default()
            .extend(long_flags(line));
    }
    usage
}

/// The flags `transformer SUBCOMMAND --help` lists.
fn help_flags(subcommand: &str) -> BTreeSet<String> {
    let output = succeeded(transformer().args([subcommand, "--help"]));
    let help = String::from_utf8(output.stdout).unwrap();
    let options: String = help
        .lines()
        .map(str::trim_start)
        .filter(|line| line.starts_with('-'))
        .map(|line| line.split("  ").next().unwrap_or(line).to_string() + "\n")
        .collect();
    long_flags(&options)
}

#[test]
fn the_readme_usage_lines_name_exactly_the_flags_of_each_subcommands_help() {
    let usage = readme_usage();
    let listed: BTreeSet<String> = usage.keys().cloned().collect();
    assert_eq!(
        listed,
        subcommand_names().into_iter().collect::<BTreeSet<String>>(),
        "the usage block of docs/usage.md lists every subcommand"
    );
    for (subcommand, flags) in &usage {
        assert_eq!(
            flags,
            &help_flags(subcommand),
            "docs/usage.md usage of `transformer {subcommand}` against its --help"
        );
    }
}
