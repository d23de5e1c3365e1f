//! A vocabulary map (CTranslate2's `vmap.txt`, its `use_vmap`): the target tokens a
//! translation of given source n-grams may use, so that a search scores a few thousand
//! candidates a step instead of the whole vocabulary. On OPUS-MT's shape the Generator's
//! product over 58,101 tokens is 57% of a decoding step's multiply-adds; CTranslate2 with a
//! map of about 2,500 candidates decodes greedy 32 sentences 1.7x as fast and beam 4 1.8-2.3x
//! (docs/performance.md). This file reads the map and gives a sentence's or a batch's
//! candidates; [`super::restricted`] decodes over them.
//!
//! The format, one rule a line: a source n-gram (tokens separated by spaces), a tab, then
//! the target tokens separated by spaces. The empty n-gram's targets are always candidates,
//! as are the ids the caller names (the end symbol, the unknown word). A rule given twice
//! keeps its last targets, as CTranslate2 reads it.

use std::collections::HashMap;
use std::io::{BufRead, Read};
use std::path::Path;

use anyhow::{anyhow, bail, Context};

/// The largest map read (a map of every 1- to 3-gram of a large corpus is some hundreds of
/// megabytes; past this a file is not a vocabulary map).
pub const MOST_BYTES: u64 = 1 << 30;

/// Source n-grams to target ids, both as the model's vocabularies number them.
#[derive(Debug, Default)]
pub struct VocabularyMap {
    /// Target ids that are always candidates, sorted, each once.
    fixed: Vec<u32>,
    /// `rules[n - 1]`: source n-grams to the target ids they allow (sorted, each once).
    rules: Vec<HashMap<Vec<u32>, Vec<u32>>>,
    /// One past the largest target id named: the size of a batch's candidate set.
    targets: usize,
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
    /// Reads the map at `path` (a regular file of at most [`MOST_BYTES`], looked at before it
    /// is opened, so a FIFO or a device is refused without a read), numbering tokens with
    /// `source` and `target`; `always` are candidates whatever the sources.
    pub fn read(
        path: &Path,
        source: &dyn Fn(&str) -> Option<u32>,
        target: &dyn Fn(&str) -> Option<u32>,
        always: &[u32],
    ) -> anyhow::Result<(Self, Unmatched)> {
        let meta = std::fs::metadata(path)
            .with_context(|| format!("cannot read the vocabulary map {}", path.display()))?;
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
        let file = std::fs::File::open(path)
            .with_context(|| format!("cannot read the vocabulary map {}", path.display()))?;
        let reader = std::io::BufReader::new(file.take(MOST_BYTES));
        Self::parse_lines(reader, source, target, always)
            .with_context(|| format!("the vocabulary map {}", path.display()))
    }

    /// [`Self::read`] of the map's text.
    pub fn parse(
        text: &str,
        source: &dyn Fn(&str) -> Option<u32>,
        target: &dyn Fn(&str) -> Option<u32>,
        always: &[u32],
    ) -> anyhow::Result<(Self, Unmatched)> {
        Self::parse_lines(text.as_bytes(), source, target, always)
    }

    /// The rules of `reader`, a line at a time (a bad line stops the reading at once). As in
    /// CTranslate2, a rule given twice keeps its last targets.
    fn parse_lines(
        mut reader: impl BufRead,
        source: &dyn Fn(&str) -> Option<u32>,
        target: &dyn Fn(&str) -> Option<u32>,
        always: &[u32],
    ) -> anyhow::Result<(Self, Unmatched)> {
        let mut map = Self::default();
        let mut fixed_rule = Vec::new();
        let mut unmatched = Unmatched::default();
        let mut bytes = Vec::new();
        for number in 1.. {
            bytes.clear();
            if reader.read_until(b'\n', &mut bytes)? == 0 {
                break;
            }
            let line = std::str::from_utf8(&bytes)
                .map_err(|_| anyhow!("line {number}: not UTF-8 text"))?
                .trim_end_matches(['\n', '\r']);
            let Some((ngram, targets)) = line.split_once('\t') else {
                if line.trim().is_empty() {
                    continue;
                }
                bail!("line {number}: no tab between the source n-gram and its targets");
            };
            let mut ids = Vec::new();
            for token in targets.split(' ').filter(|t| !t.is_empty()) {
                match target(token) {
                    Some(id) => ids.push(id),
                    None => unmatched.target_tokens += 1,
                }
            }
            ids.sort_unstable();
            ids.dedup();
            let tokens: Vec<&str> = ngram.split(' ').filter(|t| !t.is_empty()).collect();
            if tokens.is_empty() {
                fixed_rule = ids;
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
            map.rules[key.len() - 1].insert(key, ids);
        }
        map.fixed = [always, &fixed_rule].concat();
        map.fixed.sort_unstable();
        map.fixed.dedup();
        map.targets = map
            .rules
            .iter()
            .flat_map(|rules| rules.values().flatten())
            .chain(&map.fixed)
            .max()
            .map_or(0, |&id| id as usize + 1);
        Ok((map, unmatched))
    }

    /// Whether the map allows nothing beyond the ids given as always allowed: no rule and no
    /// always-allowed token of its own.
    pub fn is_empty(&self, always: &[u32]) -> bool {
        self.rules.iter().all(HashMap::is_empty) && self.fixed.iter().all(|id| always.contains(id))
    }

    /// The candidates for a batch of sources (their ids): the fixed ones and the targets of
    /// every n-gram of every source the map has a rule for, sorted, each once.
    pub fn candidates(&self, sources: &[&[u32]]) -> Vec<u32> {
        let mut allowed = vec![false; self.targets];
        for &id in &self.fixed {
            allowed[id as usize] = true;
        }
        for source in sources {
            for (n_minus_1, rules) in self.rules.iter().enumerate() {
                if rules.is_empty() {
                    continue;
                }
                for ngram in source.windows(n_minus_1 + 1) {
                    for &id in rules.get(ngram).into_iter().flatten() {
                        allowed[id as usize] = true;
                    }
                }
            }
        }
        (0..self.targets as u32)
            .filter(|&id| allowed[id as usize])
            .collect()
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
    fn a_rule_given_twice_keeps_its_last_targets_and_repeats_count_once() {
        let text = "\tthe\n\t</s>\nein\ta a a cat\nein\tdog dog\n";
        let (map, _) = VocabularyMap::parse(text, &vocab(SOURCE), &vocab(TARGET), &[1]).unwrap();
        assert_eq!(map.candidates(&[&[1, 1, 1]]), [0, 1, 3]);
        assert!(!map.is_empty(&[1]));
        let (none, _) =
            VocabularyMap::parse("\t\n\n", &vocab(SOURCE), &vocab(TARGET), &[1]).unwrap();
        assert!(none.is_empty(&[1]));
    }

    #[test]
    fn a_line_that_is_not_utf8_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("vmap.txt");
        std::fs::write(&path, b"ein\ta\nhu\xffnd\tdog\n").unwrap();
        let err = VocabularyMap::read(&path, &vocab(SOURCE), &vocab(TARGET), &[]).unwrap_err();
        assert!(format!("{err:#}").contains("line 2: not UTF-8"), "{err:#}");
    }

    #[test]
    fn a_fifo_is_refused_without_waiting_for_a_writer() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("vmap.fifo");
        let made = std::process::Command::new("mkfifo").arg(&fifo).status();
        if !made.is_ok_and(|s| s.success()) {
            return;
        }
        let err = VocabularyMap::read(&fifo, &vocab(SOURCE), &vocab(TARGET), &[]).unwrap_err();
        assert!(err.to_string().contains("not a regular file"), "{err}");
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
