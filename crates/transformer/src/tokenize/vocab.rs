//! Word vocabularies: one token per line, the line index is the id, specials first.

use std::collections::HashMap;
use std::path::Path;

use anyhow::{bail, Context};

use crate::tokenize::specials::{BOS, EOS, PAD, UNK, UNK_ID};

pub(crate) const SPECIALS: [&str; 4] = [PAD, BOS, EOS, UNK];

/// A word-level vocabulary.
#[derive(Debug, Clone, PartialEq)]
pub struct Vocab {
    tokens: Vec<String>,
    ids: HashMap<String, u32>,
}

/// Ids for a sentence, and the words that were not in the vocabulary.
#[derive(Debug, Clone, PartialEq)]
pub struct Encoded {
    pub ids: Vec<u32>,
    pub unknown: Vec<String>,
}

impl Vocab {
    /// Builds a vocabulary from tokenised sentences: the specials, then every word seen at least
    /// `min_freq` times, most frequent first (ties in alphabetical order, for reproducibility).
    pub fn build<'a>(sentences: impl IntoIterator<Item = &'a [String]>, min_freq: usize) -> Self {
        let mut counts: HashMap<String, usize> = HashMap::new();
        for sentence in sentences {
            count_words(sentence, &mut counts);
        }
        Self::from_counts(counts, min_freq)
    }

    /// The vocabulary of words counted `counts` times (rarer than `min_freq` left out): the
    /// specials first, then by count, ties in byte order.
    pub fn from_counts(counts: HashMap<String, usize>, min_freq: usize) -> Self {
        let mut words: Vec<(String, usize)> = counts
            .into_iter()
            .filter(|(word, count)| *count >= min_freq && !SPECIALS.contains(&word.as_str()))
            .collect();
        words.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        let tokens = SPECIALS
            .iter()
            .map(|s| s.to_string())
            .chain(words.into_iter().map(|(w, _)| w))
            .collect();
        Self::from_tokens(tokens)
    }

    fn from_tokens(tokens: Vec<String>) -> Self {
        let ids = tokens
            .iter()
            .enumerate()
            .map(|(i, t)| (t.clone(), i as u32))
            .collect();
        Self { tokens, ids }
    }

    pub fn len(&self) -> usize {
        self.tokens.len()
    }

    pub fn is_empty(&self) -> bool {
        self.tokens.is_empty()
    }

    /// Words -> ids, unknown words -> `<unk>` (and reported).
    pub fn encode(&self, words: &[String]) -> Encoded {
        let mut unknown = Vec::new();
        let ids = words
            .iter()
            .map(|w| {
                self.ids.get(w).copied().unwrap_or_else(|| {
                    unknown.push(w.clone());
                    UNK_ID
                })
            })
            .collect();
        Encoded { ids, unknown }
    }

    /// The token for an id; out-of-range ids read as `<unk>`.
    pub fn token(&self, id: u32) -> &str {
        self.tokens.get(id as usize).map_or(UNK, String::as_str)
    }

    /// The file format: one token per line.
    pub fn to_text(&self) -> String {
        let mut text = self.tokens.join("\n");
        text.push('\n');
        text
    }

    pub fn load(path: &Path) -> anyhow::Result<Self> {
        let text = crate::small_file::read_text(path, crate::small_file::MOST_TOKENIZER_BYTES)
            .context("cannot read a vocabulary")?;
        // As a corpus is read: a byte-order mark an editor put first is not part of `<pad>`,
        // and a line end is `\n`, `\r\n` or, last, `\r`.
        let text = text.strip_prefix('\u{feff}').unwrap_or(&text);
        let tokens: Vec<String> = text
            .lines()
            .map(|line| line.strip_suffix('\r').unwrap_or(line).to_string())
            .collect();
        if tokens.len() < SPECIALS.len() || tokens[..SPECIALS.len()] != SPECIALS {
            bail!(
                "vocabulary {} must start with the lines {}; the checkpoint is damaged or not ours",
                path.display(),
                SPECIALS.join(", ")
            );
        }
        // A repeated or empty line would give two ids one word (the later one wins the
        // lookup, so every id after it shifts by one against the weights) or an id no input
        // can reach: either way the translations are silently wrong.
        let mut seen: HashMap<&str, usize> = HashMap::new();
        for (index, token) in tokens.iter().enumerate() {
            let line = index + 1;
            if token.trim().is_empty() {
                bail!(
                    "vocabulary {} line {line} is empty; every line must hold one token, so the \
                     file is damaged or was edited: restore it from the run that wrote it",
                    path.display()
                );
            }
            if let Some(first) = seen.insert(token.as_str(), line) {
                bail!(
                    "vocabulary {} line {line} repeats {token:?} from line {first}; every token \
                     must appear once, so the file is damaged or was edited: restore it from the \
                     run that wrote it",
                    path.display()
                );
            }
        }
        Ok(Self::from_tokens(tokens))
    }
}

/// Splits a sentence into words at whitespace.
/// Adds one tokenized sentence's words to `counts`.
pub fn count_words(words: &[String], counts: &mut HashMap<String, usize>) {
    for word in words {
        match counts.get_mut(word) {
            Some(count) => *count += 1,
            None => {
                counts.insert(word.clone(), 1);
            }
        }
    }
}

pub fn tokenize(sentence: &str) -> Vec<String> {
    sentence.split_whitespace().map(str::to_string).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specials_come_first_then_words_by_frequency() {
        let sentences = [tokenize("b a b"), tokenize("c b a")];
        let vocab = Vocab::build(sentences.iter().map(Vec::as_slice), 1);
        let tokens: Vec<&str> = (0..vocab.len() as u32).map(|i| vocab.token(i)).collect();
        assert_eq!(tokens, ["<pad>", "<s>", "</s>", "<unk>", "b", "a", "c"]);
    }

    #[test]
    fn rare_and_unknown_words_become_unk() {
        let sentences = [tokenize("a a b")];
        let vocab = Vocab::build(sentences.iter().map(Vec::as_slice), 2);
        let encoded = vocab.encode(&tokenize("a b z"));
        assert_eq!(encoded.ids, vec![4, UNK_ID, UNK_ID]);
        assert_eq!(encoded.unknown, vec!["b".to_string(), "z".to_string()]);
    }

    #[test]
    fn a_vocabulary_survives_its_file_format() {
        let sentences = [tokenize("ich mochte ein bier")];
        let vocab = Vocab::build(sentences.iter().map(Vec::as_slice), 1);
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("vocab.txt");
        std::fs::write(&path, vocab.to_text()).unwrap();
        assert_eq!(Vocab::load(&path).unwrap(), vocab);
    }

    #[test]
    fn a_repeated_token_is_refused_naming_both_lines() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("vocab.src.txt");
        std::fs::write(&path, "<pad>\n<s>\n</s>\n<unk>\nbier\nein\nbier\n").unwrap();
        let err = Vocab::load(&path).unwrap_err().to_string();
        assert!(err.contains("vocab.src.txt line 7"), "{err}");
        assert!(err.contains("\"bier\" from line 5"), "{err}");
    }

    #[test]
    fn a_byte_order_mark_and_carriage_returns_are_not_part_of_the_tokens() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("vocab.txt");
        std::fs::write(&path, "\u{feff}<pad>\r\n<s>\r\n</s>\r\n<unk>\r\nbier\r").unwrap();
        let vocab = Vocab::load(&path).unwrap();
        assert_eq!(vocab.len(), 5);
        assert_eq!(vocab.token(4), "bier");
    }

    #[test]
    fn an_empty_line_is_refused_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("vocab.tgt.txt");
        std::fs::write(&path, "<pad>\n<s>\n</s>\n<unk>\nbeer\n\na\n").unwrap();
        let err = Vocab::load(&path).unwrap_err().to_string();
        assert!(err.contains("vocab.tgt.txt line 6 is empty"), "{err}");
    }

    #[test]
    fn a_file_without_the_specials_is_rejected() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("vocab.txt");
        std::fs::write(&path, "a\nb\n").unwrap();
        let err = Vocab::load(&path).unwrap_err().to_string();
        assert!(err.contains("vocab.txt") && err.contains("<pad>"), "{err}");
    }
}
