//! The repository paths a markdown file names: in `backticks`, as [link](targets), and in
//! fenced code blocks (a code map is the part of a doc that goes stale first).

/// The folders a named path must start with to be checked.
pub const CHECKED_PREFIXES: &[&str] = &[
    "src/",
    "crates/",
    "tests/",
    "scripts/",
    "configs/",
    "examples/",
    "docs/",
    "vendor/",
];

/// Each checkable path in `markdown` with its line (1-based): `:line` suffixes and `#anchors`
/// stripped; globs (`*`), ellipses and placeholders (`<family>`) left out.
pub fn named_paths(markdown: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let mut in_fence = false;
    for (n, line) in markdown.lines().enumerate() {
        if line.trim_start().starts_with("```") {
            in_fence = !in_fence;
            continue;
        }
        let mut words: Vec<&str> = Vec::new();
        if in_fence {
            words.extend(line.split_whitespace());
        } else {
            // The odd pieces between backticks are code spans; a span's path is its first word.
            words.extend(
                line.split('`')
                    .skip(1)
                    .step_by(2)
                    .filter_map(|span| span.split_whitespace().next()),
            );
            words.extend(
                line.split("](")
                    .skip(1)
                    .filter_map(|rest| rest.split(')').next()),
            );
        }
        for word in words {
            let word = word
                .trim_matches(|c: char| "()[],;\"'".contains(c))
                .trim_end_matches('.');
            let path = word.split('#').next().unwrap_or_default();
            let path = path.split(':').next().unwrap_or_default();
            let skipped = ["*", "...", "…", "<"].iter().any(|s| path.contains(s));
            if !skipped && CHECKED_PREFIXES.iter().any(|p| path.starts_with(p)) {
                out.push((n + 1, path.to_string()));
            }
        }
    }
    out
}
