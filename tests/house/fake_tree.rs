//! Made-up workspaces for the house checks' own tests: a small library and binary that keep
//! every rule, and that tree with a few files changed to break one.

use std::fs;

/// A made-up workspace: each (path, text) written under a fresh temporary folder.
pub fn tree(files: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for (path, text) in files {
        let path = dir.path().join(path);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, text).unwrap();
    }
    dir
}

/// A small library and binary that keep every rule.
pub const CLEAN: &[(&str, &str)] = &[
    ("crates/transformer/src/lib.rs", "//! The library.\npub mod config;\npub mod corpus;\npub mod model;\n"),
    ("crates/transformer/src/config.rs", "pub struct ModelConfig;\n"),
    (
        "crates/transformer/src/model/mod.rs",
        "pub mod linear;\npub mod table;\npub use linear::Linear;\npub use crate::config::ModelConfig;\n",
    ),
    (
        "crates/transformer/src/model/linear.rs",
        "use super::table::{self, Table};\nuse super::ModelConfig;\npub struct Linear(Table);\n",
    ),
    (
        "crates/transformer/src/model/table.rs",
        "// use super::linear::Linear;\npub struct Table;\nconst S: &str = \"super::linear::Linear\";\n\
         #[cfg(test)]\nmod tests {\n    use super::super::linear::Linear;\n}\n",
    ),
    ("crates/transformer/src/corpus/mod.rs", "pub mod batch;\npub use batch::Batch;\n"),
    ("crates/transformer/src/corpus/batch.rs", "use crate::config::ModelConfig;\npub struct Batch;\n"),
    ("src/main.rs", "mod commands;\nuse transformer::{corpus, model};\nfn main() { commands::run() }\n"),
    ("src/commands.rs", "use crate::model::Linear;\npub fn run() { let _ = crate::corpus::Batch; }\n"),
    (
        "docs/architecture.md",
        "The model (`crates/transformer/src/model/linear.rs:2`, [table](crates/transformer/src/model/table.rs#L1)),\n\
         `src/` `tests/fixtures/*.json` `src/model/<family>.rs` `src/.../x.rs`\n```\nsrc/main.rs   the binary\n```\n",
    ),
];

/// `CLEAN` with the files of `changes` added or replaced.
pub fn clean_with(changes: &[(&str, &str)]) -> tempfile::TempDir {
    let mut files: Vec<(&str, &str)> = CLEAN
        .iter()
        .filter(|(p, _)| !changes.iter().any(|(c, _)| c == p))
        .copied()
        .collect();
    files.extend_from_slice(changes);
    tree(&files)
}
