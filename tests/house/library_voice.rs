//! The library speaks through its caller: it prints nothing (`println!`, `eprintln!`), ends
//! no process (`process::exit`), and no message of it names a flag of the command line
//! (`--out`): progress goes to an observer, warnings to `log`, and an error whose fix is a
//! flag is typed or worded with names the caller passes (docs/architecture.md).

use std::fs;
use std::path::Path;

use super::import_graph;

/// What the library may not write: the macros that print and the call that exits.
const FORBIDDEN: &[&str] = &["eprintln!", "println!", "process::exit"];

/// `FILE:LINE: what` for each line of the library at `library` (under `root`), outside
/// comments and `#[cfg(test)]` modules, that prints, exits, or names a `--flag`. A build
/// instruction (`cargo build --features cuda`) names cargo's flags, not ours.
pub fn violations(root: &Path, library: &str) -> Vec<String> {
    let mut out = Vec::new();
    for relative in import_graph::rust_files(&root.join(library)) {
        if relative.ends_with("tests.rs") {
            continue;
        }
        let text = fs::read_to_string(root.join(library).join(&relative)).unwrap_or_default();
        // Unit tests sit at the end of a file, as the style guide puts them.
        let shipped = text
            .find("#[cfg(test)]\nmod ")
            .map_or(text.as_str(), |at| &text[..at]);
        for (n, line) in shipped.lines().enumerate() {
            let code = line.trim_start();
            if code.starts_with("//") {
                continue;
            }
            let said = FORBIDDEN.iter().find(|f| code.contains(**f)).copied();
            let flag = (!code.contains("cargo build"))
                .then(|| flag_in(code))
                .flatten();
            if let Some(what) = said.map(str::to_string).or(flag) {
                out.push(format!("{library}/{relative}:{}: {what}", n + 1));
            }
        }
    }
    out
}

/// The first `--flag` in `line`: two dashes after a space, a quote, a bracket or the line's
/// start, then a lowercase letter.
fn flag_in(line: &str) -> Option<String> {
    let bytes = line.as_bytes();
    (0..bytes.len().saturating_sub(2)).find_map(|i| {
        let before_ok = i == 0 || b" (\"'`".contains(&bytes[i - 1]);
        let starts = bytes[i] == b'-' && bytes[i + 1] == b'-' && bytes[i + 2].is_ascii_lowercase();
        (before_ok && starts).then(|| {
            let end = line[i + 2..]
                .find(|c: char| !(c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-'))
                .map_or(line.len(), |at| i + 2 + at);
            line[i..end].to_string()
        })
    })
}
