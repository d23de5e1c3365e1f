//! Reading parallel sentence pairs from a TSV file: `source<TAB>target` per line.

use std::path::Path;

use anyhow::{bail, Context};

use super::vocab::tokenize;

/// One tokenised training pair.
#[derive(Debug, Clone, PartialEq)]
pub struct SentencePair {
    pub src: Vec<String>,
    pub tgt: Vec<String>,
}

/// Reads every non-blank line of `path` as a pair; fails naming the file and line of the first
/// malformed one, or when there are no pairs at all.
pub fn read_tsv(path: &Path) -> anyhow::Result<Vec<SentencePair>> {
    let text = std::fs::read_to_string(path).with_context(|| {
        format!(
            "cannot read training data {}; check data.train in the config",
            path.display()
        )
    })?;
    let mut pairs = Vec::new();
    for (index, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let Some((src, tgt)) = line.split_once('\t') else {
            bail!(
                "{} line {}: expected `source<TAB>target`, found no tab",
                path.display(),
                index + 1
            );
        };
        let pair = SentencePair {
            src: tokenize(src),
            tgt: tokenize(tgt),
        };
        if pair.src.is_empty() || pair.tgt.is_empty() {
            bail!(
                "{} line {}: both the source and the target need at least one word",
                path.display(),
                index + 1
            );
        }
        pairs.push(pair);
    }
    if pairs.is_empty() {
        bail!(
            "{} holds no sentence pairs; add lines of `source<TAB>target`",
            path.display()
        );
    }
    Ok(pairs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pairs_are_split_at_the_tab_and_blank_lines_skipped() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("pairs.tsv");
        std::fs::write(&path, "ich mochte\ti want\n\n ein bier \ta beer .\n").unwrap();
        let pairs = read_tsv(&path).unwrap();
        assert_eq!(pairs.len(), 2);
        assert_eq!(pairs[1].src, vec!["ein", "bier"]);
        assert_eq!(pairs[1].tgt, vec!["a", "beer", "."]);
    }

    #[test]
    fn a_line_without_a_tab_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("pairs.tsv");
        std::fs::write(&path, "a\tb\nno tab here\n").unwrap();
        let err = read_tsv(&path).unwrap_err().to_string();
        assert!(err.contains("pairs.tsv line 2"), "{err}");
    }

    #[test]
    fn an_empty_file_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("pairs.tsv");
        std::fs::write(&path, "\n").unwrap();
        assert!(read_tsv(&path)
            .unwrap_err()
            .to_string()
            .contains("no sentence pairs"));
    }
}
