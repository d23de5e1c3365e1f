//! The house rules (issues 41 and 55), read from the source tree: no source file over 800
//! lines (past that a file almost always holds two concepts), no import circle, imports that
//! run one way between the crates and between the core's modules (the style guide's "Imports
//! run one way"), and a docs/architecture.md that names only paths that exist. Each check is a function of a root
//! folder that returns every violation; the tests at the end run each on a small made-up tree.

#[path = "house/doc_paths.rs"]
mod doc_paths;
#[path = "house/fake_tree.rs"]
mod fake_tree;
#[path = "house/import_graph.rs"]
mod import_graph;
#[path = "house/library_voice.rs"]
mod library_voice;
#[path = "house/rust_source.rs"]
mod rust_source;

use std::fs;
use std::path::Path;

use fake_tree::{clean_with, tree, CLEAN};
use import_graph::Graph;

/// The most lines a source file may have.
const MAX_LINES: usize = 800;

/// The core library crate, whose top-level modules (the first path segment under it) the
/// module rules below speak of.
const LIBRARY: &str = "crates/transformer/src";

/// The library crates, each over the core: none prints, exits or names a flag.
const LIBRARIES: &[&str] = &[
    LIBRARY,
    "crates/transformer-documents/src",
    "crates/transformer-plot/src",
    "crates/transformer-serve/src",
];

/// The binary crate's name: no file of a library may mention it.
const BINARY_CRATE: &str = "transformer_cli";

/// Which crates each library crate may not name (names split by spaces): the core names none
/// above it, documents and pictures do not know the server, and no library knows the binary.
const CRATES_ONE_WAY: &[(&str, &str)] = &[
    (
        LIBRARY,
        "transformer_cli transformer_documents transformer_plot transformer_serve",
    ),
    (
        "crates/transformer-documents/src",
        "transformer_cli transformer_plot transformer_serve",
    ),
    (
        "crates/transformer-plot/src",
        "transformer_cli transformer_documents transformer_serve",
    ),
    ("crates/transformer-serve/src", "transformer_cli"),
];

/// Which top-level modules of the core may not import which: (importers, what they must not
/// import), names split by spaces.
const ONE_WAY: &[(&str, &str)] = &[
    // `model` uses only candle, the model config and the kernels.
    (
        "model",
        "train infer decoding checkpoint corpus tokenize training_data sentences distributed metrics",
    ),
    // Reading, tokenizing, encoding and cutting text knows nothing of a model or what runs one.
    (
        "corpus tokenize training_data sentences",
        "model train infer decoding checkpoint",
    ),
    // The searches know the model's step contract, not what runs them.
    ("decoding", "infer train checkpoint sentences"),
    // The kernels sit under everything that computes.
    ("kernels", "model train infer decoding corpus tokenize training_data"),
];

/// Whether `ONE_WAY` forbids top-level module `from` to import `to`.
fn forbidden(from: &str, to: &str) -> bool {
    let named = |names: &str, module: &str| names.split_whitespace().any(|n| n == module);
    from != to
        && ONE_WAY
            .iter()
            .any(|(who, not)| named(who, from) && named(not, to))
}

fn workspace() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// Fails with every violation, one a line, under `what`.
fn assert_none(what: &str, violations: Vec<String>) {
    assert!(
        violations.is_empty(),
        "{what} ({}):\n{}",
        violations.len(),
        violations.join("\n")
    );
}

/// `PATH: N lines` for each `.rs` file of a crate's `src/` longer than `MAX_LINES`, longest first.
fn long_files(root: &Path) -> Vec<String> {
    let mut long = Vec::new();
    for (_, src) in import_graph::crate_sources(root) {
        for relative in import_graph::rust_files(&root.join(&src)) {
            let text = fs::read_to_string(root.join(&src).join(&relative)).unwrap_or_default();
            let lines = text.lines().count();
            if lines > MAX_LINES {
                long.push((lines, format!("{src}/{relative}")));
            }
        }
    }
    long.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    long.into_iter()
        .map(|(lines, path)| format!("{path}: {lines} lines"))
        .collect()
}

/// Each import circle: its files, then each import inside it with the names that tie it.
fn circles(root: &Path) -> Vec<String> {
    let graph = Graph::read(root);
    let mut out = Vec::new();
    for circle in graph.circles() {
        let names: Vec<&str> = circle
            .iter()
            .map(|&f| graph.files[f].path.as_str())
            .collect();
        let mut text = format!("{} files: {}", circle.len(), names.join(", "));
        for &from in &circle {
            for &to in &circle {
                let (ties, lines) = graph.ties(from, to);
                if !ties.is_empty() {
                    let lines: Vec<String> = lines.iter().map(usize::to_string).collect();
                    let (a, b) = (&graph.files[from].path, &graph.files[to].path);
                    let ties: Vec<&str> = ties.iter().map(String::as_str).collect();
                    text += &format!(
                        "\n  {a} -> {b}: {} (line {})",
                        ties.join(", "),
                        lines.join(", ")
                    );
                }
            }
        }
        out.push(text);
    }
    out
}

/// The top-level library module of a path under `LIBRARY` (`model/linear.rs` -> `model`).
fn top_module(path: &str) -> Option<&str> {
    let inside = path.strip_prefix(LIBRARY)?.trim_start_matches('/');
    let first = inside.split('/').next()?;
    Some(first.trim_end_matches(".rs"))
}

/// `FILE:LINE: A imports B (PATH)` for each import that `ONE_WAY` forbids, and each library
/// line that names the binary crate.
fn imports_against_the_flow(root: &Path) -> Vec<String> {
    let graph = Graph::read(root);
    let mut out = Vec::new();
    for import in &graph.imports {
        let (file, target) = (&graph.files[import.from].path, &graph.files[import.to].path);
        let (Some(from), Some(to)) = (top_module(file), top_module(target)) else {
            continue;
        };
        if forbidden(from, to) {
            out.push(format!(
                "{file}:{}: {from} imports {to} ({})",
                import.line, import.written
            ));
        }
    }
    for (library, above) in CRATES_ONE_WAY {
        for relative in import_graph::rust_files(&root.join(library)) {
            let text = fs::read_to_string(root.join(library).join(&relative)).unwrap_or_default();
            let code = rust_source::without_comments_and_strings(&text);
            for (n, line) in code.lines().enumerate() {
                for name in above.split_whitespace().filter(|name| line.contains(name)) {
                    let what = if name == BINARY_CRATE {
                        "the library names the binary"
                    } else {
                        "a crate names one above it"
                    };
                    out.push(format!("{library}/{relative}:{}: {what} ({name})", n + 1));
                }
            }
        }
    }
    out.sort();
    out.dedup();
    out
}

/// `PATH (docs/architecture.md, line N, M)` for each path the doc names that does not exist
/// (a path ending in `/` must be a folder), in the order the doc first names them.
fn missing_doc_paths(root: &Path) -> Vec<String> {
    let doc = "docs/architecture.md";
    let text = fs::read_to_string(root.join(doc)).unwrap_or_default();
    let mut missing: Vec<(String, Vec<String>)> = Vec::new();
    for (line, path) in doc_paths::named_paths(&text) {
        let exists = if path.ends_with('/') {
            root.join(&path).is_dir()
        } else {
            root.join(&path).exists()
        };
        match missing.iter_mut().find(|(p, _)| *p == path) {
            _ if exists => {}
            Some((_, lines)) => lines.push(line.to_string()),
            None => missing.push((path, vec![line.to_string()])),
        }
    }
    missing
        .into_iter()
        .map(|(path, lines)| format!("{path} ({doc}, line {})", lines.join(", ")))
        .collect()
}

#[test]
fn no_source_file_is_over_800_lines() {
    assert_none(
        "source files over 800 lines: split each along a real seam",
        long_files(workspace()),
    );
}

#[test]
fn no_two_files_import_each_other_in_a_circle() {
    assert_none(
        "import circles: move what ties them so imports run one way",
        circles(workspace()),
    );
}

#[test]
fn imports_run_one_way() {
    assert_none(
        "imports against the style guide's 'Imports run one way'",
        imports_against_the_flow(workspace()),
    );
}

#[test]
fn the_architecture_doc_names_only_paths_that_exist() {
    assert_none(
        "paths docs/architecture.md names that do not exist",
        missing_doc_paths(workspace()),
    );
}

#[test]
fn the_library_prints_nothing_exits_nowhere_and_names_no_flag() {
    assert_none(
        "library lines that print, exit or name a flag: report through the caller (log, \
         Progress, a typed error, names the caller passes)",
        LIBRARIES
            .iter()
            .flat_map(|library| library_voice::violations(workspace(), library))
            .collect(),
    );
}

#[test]
fn a_print_an_exit_and_a_flag_in_the_library_are_found_and_comments_and_tests_are_not() {
    let file = "//! Mentions --out in a comment, and eprintln! too.\n\
                pub fn f() {\n    eprintln!(\"hi\");\n}\n\
                pub fn g() -> String {\n    \"pass --overwrite to replace it\".into()\n}\n\
                pub fn h() {\n    std::process::exit(1)\n}\n\
                pub const BUILD: &str = \"cargo build --release --features cuda\";\n\
                #[cfg(test)]\nmod tests {\n    fn t() { println!(\"--x\"); }\n}\n";
    let dir = tree(&[("crates/transformer/src/lib.rs", file)]);
    assert_eq!(
        library_voice::violations(dir.path(), LIBRARY),
        [
            "crates/transformer/src/lib.rs:3: eprintln!",
            "crates/transformer/src/lib.rs:6: --overwrite",
            "crates/transformer/src/lib.rs:9: process::exit",
        ]
    );
}

#[test]
fn a_clean_tree_passes_every_check() {
    let dir = tree(CLEAN);
    assert_eq!(long_files(dir.path()), Vec::<String>::new());
    assert_eq!(circles(dir.path()), Vec::<String>::new());
    assert_eq!(imports_against_the_flow(dir.path()), Vec::<String>::new());
    assert_eq!(missing_doc_paths(dir.path()), Vec::<String>::new());
    assert_eq!(
        library_voice::violations(dir.path(), LIBRARY),
        Vec::<String>::new()
    );
}

#[test]
fn a_file_of_801_lines_is_found_and_one_of_800_is_not() {
    let long = "//\n".repeat(801);
    let just = "//\n".repeat(800);
    let dir = clean_with(&[
        ("src/long.rs", &long),
        ("crates/transformer/src/corpus/just.rs", &just),
    ]);
    assert_eq!(long_files(dir.path()), vec!["src/long.rs: 801 lines"]);
}

#[test]
fn a_circle_through_use_lines_is_found_with_the_names_that_tie_it() {
    let dir = clean_with(&[(
        "crates/transformer/src/model/table.rs",
        "use super::linear::{fetch, MARKER as M};\npub struct Table;\n",
    )]);
    let found = circles(dir.path());
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(found[0].starts_with(
        "2 files: crates/transformer/src/model/linear.rs, crates/transformer/src/model/table.rs"
    ));
    assert!(
        found[0]
            .contains("linear.rs -> crates/transformer/src/model/table.rs: Table, table (line 1)"),
        "{}",
        found[0]
    );
    assert!(
        found[0]
            .contains("table.rs -> crates/transformer/src/model/linear.rs: MARKER, fetch (line 1)"),
        "{}",
        found[0]
    );
}

#[test]
fn a_circle_through_inline_paths_and_reexported_modules_is_found() {
    // In the binary, `crate::model` is the library's module that main.rs re-exports, and
    // `cli` <-> `commands` tie only through paths written in code.
    let dir = clean_with(&[
        (
            "src/main.rs",
            "mod cli;\nmod commands;\nuse transformer::{corpus, model};\nfn main() {}\n",
        ),
        (
            "src/commands.rs",
            "use crate::model::Linear;\npub fn run() { crate::cli::parse(); }\n",
        ),
        (
            "src/cli.rs",
            "pub fn parse() {\n    super::commands::run()\n}\n",
        ),
    ]);
    let found = circles(dir.path());
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(
        found[0].contains("src/cli.rs -> src/commands.rs: run (line 2)"),
        "{}",
        found[0]
    );
    assert!(
        found[0].contains("src/commands.rs -> src/cli.rs: parse (line 2)"),
        "{}",
        found[0]
    );
}

#[test]
fn a_mod_rs_in_a_circle_with_a_file_outside_its_module_is_found() {
    // model/mod.rs <-> model/linear.rs is a module and its child (no circle), but
    // model/mod.rs <-> config.rs is one.
    let dir = clean_with(&[(
        "crates/transformer/src/config.rs",
        "pub struct ModelConfig(crate::model::Linear);\n",
    )]);
    let found = circles(dir.path());
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(found[0].starts_with(
        "2 files: crates/transformer/src/config.rs, crates/transformer/src/model/mod.rs"
    ));
    assert!(!found[0].contains("linear.rs"), "{}", found[0]);
}

#[test]
fn a_forbidden_import_and_a_mention_of_a_crate_above_are_found_with_file_and_line() {
    let dir = clean_with(&[
        (
            "crates/transformer/src/model/linear.rs",
            "use super::table::Table;\n\nuse crate::corpus::{batch::Batch};\n",
        ),
        (
            "crates/transformer/src/corpus/batch.rs",
            // A raw string and a quote in a char literal hide no path and swallow no code.
            "pub struct Batch;\nfn q<'a>(_: &'a str) -> char { let _ = r#\"crate::model::X\"#; '\"' }\n\
             fn f() { crate::model::table::Table; }\n",
        ),
        (
            "crates/transformer/src/config.rs",
            "pub struct ModelConfig;\nuse transformer_cli::Args;\n",
        ),
        (
            "crates/transformer-plot/src/lib.rs",
            "use transformer::metrics::Record;\nuse transformer_serve::Limits;\n",
        ),
    ]);
    assert_eq!(
        imports_against_the_flow(dir.path()),
        vec![
            "crates/transformer-plot/src/lib.rs:2: a crate names one above it (transformer_serve)",
            "crates/transformer/src/config.rs:2: the library names the binary (transformer_cli)",
            "crates/transformer/src/corpus/batch.rs:3: corpus imports model (crate::model::table::Table)",
            "crates/transformer/src/model/linear.rs:3: model imports corpus (crate::corpus::batch::Batch)",
        ]
    );
}

#[test]
fn a_doc_path_that_does_not_exist_is_found_and_a_file_is_no_folder() {
    let dir = clean_with(&[(
        "docs/architecture.md",
        "`src/model/embeddings.rs` and `crates/transformer/src/model/linear.rs/`\n```\nsrc/data/   gone\n```\n\
         [the embeddings](src/model/embeddings.rs#L3)\n",
    )]);
    assert_eq!(
        missing_doc_paths(dir.path()),
        vec![
            "src/model/embeddings.rs (docs/architecture.md, line 1, 5)",
            "crates/transformer/src/model/linear.rs/ (docs/architecture.md, line 1)",
            "src/data/ (docs/architecture.md, line 3)",
        ]
    );
}
