//! A vocabulary map (CTranslate2's `vmap.txt`, its `use_vmap`): the target tokens a
//! translation of given source n-grams may use, so that a search scores a few thousand
//! candidates a step instead of the whole vocabulary. On OPUS-MT's shape the Generator's
//! product over 58,101 tokens is 57% of a decoding step's multiply-adds; CTranslate2 with a
//! map of about 2,500 candidates decodes greedy 32 sentences 1.7x as fast and beam 4 1.8-2.3x
//! (docs/performance.md). This file reads the map and gives a batch's candidates; the
//! restricted Generator and the searches' id mapping are the next step of issue 43.
//!
//! The format, one rule a line: a source n-gram (tokens separated by spaces), a tab, then
//! the target tokens separated by spaces. The empty n-gram's targets are always candidates,
//! as are the ids the caller names (the end symbol, the unknown word).

use std::collections::HashMap;
use std::io::Read;
use std::path::Path;

use anyhow::{bail, Context};

/// The largest map read (a map of every 1- to 3-gram of a large corpus is some hundreds of
/// megabytes; past this a file is not a vocabulary map).
pub const MOST_BYTES: u64 = 1 << 30;

/// Source n-grams to target ids, both as the model's vocabularies number them.
#[derive(Debug, Default)]
pub struct VocabularyMap {
    /// Target ids that are always candidates.
    fixed: Vec<u32>,
    /// `rules[n - 1]`: source n-grams to the target ids they allow.
    rules: Vec<HashMap<Vec<u32>, Vec<u32>>>,
}

/// What a map named that the vocabularies do not have (left out of the rules).
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Unmatched {
    /// Rules whose n-gram holds a token the source vocabulary lacks: they can never match.
    pub source_rules: usize,
    /// Target tokens the target vocabulary lacks.
    pub target_tokens: usize,
}

impl VocabularyMap {
    /// Reads the map at `path` (a regular file of at most [`MOST_BYTES`]), numbering tokens
    /// with `source` and `target`; `always` are candidates whatever the sources.
    pub fn read(
        path: &Path,
        source: &dyn Fn(&str) -> Option<u32>,
        target: &dyn Fn(&str) -> Option<u32>,
        always: &[u32],
    ) -> anyhow::Result<(Self, Unmatched)> {
        let file = std::fs::File::open(path)
            .with_context(|| format!("cannot read the vocabulary map {}", path.display()))?;
        let meta = file.metadata()?;
        if !meta.is_file() {
            bail!(
                "the vocabulary map {} is not a regular file",
                path.display()
            );
        }
        if meta.len() > MOST_BYTES {
            bail!(
                "the vocabulary map {} is {} bytes, more than the {MOST_BYTES} a map may be",
                path.display(),
                meta.len()
            );
        }
        let mut text = String::new();
        file.take(MOST_BYTES + 1)
            .read_to_string(&mut text)
            .with_context(|| format!("the vocabulary map {} is not UTF-8 text", path.display()))?;
        Self::parse(&text, source, target, always)
            .with_context(|| format!("the vocabulary map {}", path.display()))
    }

    /// [`Self::read`] of the map's text.
    pub fn parse(
        text: &str,
        source: &dyn Fn(&str) -> Option<u32>,
        target: &dyn Fn(&str) -> Option<u32>,
        always: &[u32],
    ) -> anyhow::Result<(Self, Unmatched)> {
        let mut map = Self {
            fixed: always.to_vec(),
            rules: Vec::new(),
        };
        let mut unmatched = Unmatched::default();
        for (number, line) in text.lines().enumerate() {
            let Some((ngram, targets)) = line.split_once('\t') else {
                if line.trim().is_empty() {
                    continue;
                }
                bail!(
                    "line {}: no tab between the source n-gram and its targets",
                    number + 1
                );
            };
            let mut ids = Vec::new();
            for token in targets.split(' ').filter(|t| !t.is_empty()) {
                match target(token) {
                    Some(id) => ids.push(id),
                    None => unmatched.target_tokens += 1,
                }
            }
            let tokens: Vec<&str> = ngram.split(' ').filter(|t| !t.is_empty()).collect();
            if tokens.is_empty() {
                map.fixed.extend(ids);
                continue;
            }
            let Some(key) = tokens
                .iter()
                .map(|t| source(t))
                .collect::<Option<Vec<u32>>>()
            else {
                unmatched.source_rules += 1;
                continue;
            };
            if map.rules.len() < key.len() {
                map.rules.resize_with(key.len(), HashMap::new);
            }
            map.rules[key.len() - 1].entry(key).or_default().extend(ids);
        }
        map.fixed.sort_unstable();
        map.fixed.dedup();
        Ok((map, unmatched))
    }

    /// The candidates for a batch of sources (their ids): the fixed ones and the targets of
    /// every n-gram of every source the map has a rule for, sorted, each once.
    pub fn candidates(&self, sources: &[&[u32]]) -> Vec<u32> {
        let mut candidates = self.fixed.clone();
        for source in sources {
            for (n_minus_1, rules) in self.rules.iter().enumerate() {
                if rules.is_empty() {
                    continue;
                }
                for ngram in source.windows(n_minus_1 + 1) {
                    if let Some(targets) = rules.get(ngram) {
                        candidates.extend_from_slice(targets);
                    }
                }
            }
        }
        candidates.sort_unstable();
        candidates.dedup();
        candidates
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vocab(tokens: &'static [&'static str]) -> impl Fn(&str) -> Option<u32> {
        move |t| tokens.iter().position(|&v| v == t).map(|i| i as u32)
    }

    const SOURCE: &[&str] = &["<pad>", "ein", "hund", "läuft", "katze"];
    const TARGET: &[&str] = &["</s>", "<unk>", "a", "dog", "runs", "cat", "the"];

    #[test]
    fn a_batch_gets_the_fixed_tokens_and_those_of_its_ngrams() {
        let text = "\t</s> the\nein\ta\nhund\tdog\nein hund\tdog a\nläuft\truns\nkatze\tcat\n";
        let (map, unmatched) =
            VocabularyMap::parse(text, &vocab(SOURCE), &vocab(TARGET), &[1]).unwrap();
        assert_eq!(unmatched, Unmatched::default());
        // "ein hund läuft": the 1-grams and the 2-gram "ein hund"; never "cat".
        assert_eq!(map.candidates(&[&[1, 2, 3]]), [0, 1, 2, 3, 4, 6]);
        // Nothing matched: the fixed ones only; a batch is the union of its sources'.
        assert_eq!(map.candidates(&[&[0]]), [0, 1, 6]);
        assert_eq!(map.candidates(&[&[4], &[3]]), [0, 1, 4, 5, 6]);
    }

    #[test]
    fn tokens_the_vocabularies_lack_are_counted_and_left_out() {
        let text = "ein\ta zebra\nzebra\tdog\n\n";
        let (map, unmatched) =
            VocabularyMap::parse(text, &vocab(SOURCE), &vocab(TARGET), &[]).unwrap();
        assert_eq!(
            unmatched,
            Unmatched {
                source_rules: 1,
                target_tokens: 1
            }
        );
        assert_eq!(map.candidates(&[&[1]]), [2]);
    }

    #[test]
    fn a_line_without_a_tab_is_an_error_naming_it() {
        let err = VocabularyMap::parse("ein\ta\nhund dog\n", &vocab(SOURCE), &vocab(TARGET), &[])
            .unwrap_err();
        assert!(err.to_string().contains("line 2"), "{err}");
    }

    #[test]
    fn reading_refuses_what_is_not_a_regular_file() {
        let err = VocabularyMap::read(Path::new("/dev/zero"), &vocab(SOURCE), &vocab(TARGET), &[])
            .unwrap_err();
        assert!(err.to_string().contains("not a regular file"), "{err}");
        let missing = Path::new("/nonexistent/vmap.txt");
        let err = VocabularyMap::read(missing, &vocab(SOURCE), &vocab(TARGET), &[]).unwrap_err();
        assert!(err.to_string().contains("/nonexistent/vmap.txt"), "{err}");
    }
}
