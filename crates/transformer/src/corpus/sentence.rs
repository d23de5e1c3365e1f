//! Reading parallel corpora (a TSV file or two aligned text files, plain or gzip) and cleaning
//! them: Unicode composed (NFC), whitespace normalised, a byte-order mark dropped, empty and
//! placeholder pairs dropped and counted. Translation input goes through the same
//! `normalize_sentence`, so that the model sees text as it saw it in training.

use std::path::Path;

use unicode_normalization::UnicodeNormalization;

/// One sentence pair, whitespace-normalised.
#[derive(Debug, Clone, PartialEq)]
pub struct SentencePair {
    /// Empty for a text corpus: a language model reads no source.
    pub src: String,
    pub tgt: String,
}

/// What cleaning did to a corpus.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct CleaningReport {
    pub read: usize,
    pub kept: usize,
    /// Pairs with an empty side (after whitespace normalisation).
    pub empty: usize,
    /// Pairs with a side that has no letter or digit, such as Multi30k's `@@` lines.
    pub placeholder: usize,
}

impl CleaningReport {
    /// Adds what cleaning did to another part of the corpus.
    pub fn add(&mut self, other: &Self) {
        self.read += other.read;
        self.kept += other.kept;
        self.empty += other.empty;
        self.placeholder += other.placeholder;
    }
}

impl std::fmt::Display for CleaningReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} pairs read, {} kept, {} dropped ({} with an empty side, {} placeholders)",
            self.read,
            self.kept,
            self.read - self.kept,
            self.empty,
            self.placeholder
        )
    }
}

/// Where a path came from, for the advice in a "cannot read" error.
#[derive(Debug, Clone, Copy)]
pub enum PathOrigin {
    Config,
    /// A command-line flag, such as `--hyp`.
    Flag(&'static str),
}

/// The byte-order mark some editors put at the start of a UTF-8 file.
const BYTE_ORDER_MARK: char = '\u{feff}';

/// The most lines a text read whole may have: ten million, a thousand test sets' worth, whose
/// strings and scores take about a gigabyte when the lines are short.
pub const MOST_TEXT_LINES: usize = 10_000_000;

fn bytecount_lines(bytes: &[u8]) -> usize {
    bytes.iter().filter(|&&b| b == b'\n').count()
}

/// Reads a whole UTF-8 text file (`-`: stdin), decompressing it first when its name ends in
/// `.gz`.
pub fn read_text(path: &Path, origin: PathOrigin) -> anyhow::Result<String> {
    let most = crate::input_text::MOST_INPUT_BYTES;
    let bytes = crate::input_text::read_path(path, most).map_err(|e| {
        let advice = match origin {
            _ if e.kind() == std::io::ErrorKind::FileTooLarge => "split it".to_string(),
            PathOrigin::Config => "check the path in the config (relative paths start from the \
                                   directory you run in)"
                .to_string(),
            PathOrigin::Flag(flag) => format!("check the path given to {flag}"),
        };
        let name = if path == Path::new("-") {
            "stdin".into()
        } else {
            path.display().to_string()
        };
        anyhow::anyhow!("cannot read {name}: {e}; {advice}")
    })?;
    let bytes = if path.extension().is_some_and(|e| e == "gz") {
        crate::input_text::read_at_most(flate2::read::MultiGzDecoder::new(bytes.as_slice()), most)
            .map_err(|e| anyhow::anyhow!("cannot decompress {}: {e}", path.display()))?
    } else {
        bytes
    };
    // Each line is held as its own string and scored: short lines cost many times their bytes.
    let lines = bytecount_lines(&bytes);
    if lines > MOST_TEXT_LINES {
        anyhow::bail!(
            "{} has {lines} lines, more than the {MOST_TEXT_LINES} read at once; split it",
            path.display()
        );
    }
    String::from_utf8(bytes).map_err(|e| {
        let line = 1 + e.as_bytes()[..e.utf8_error().valid_up_to()]
            .iter()
            .filter(|&&b| b == b'\n')
            .count();
        anyhow::anyhow!(
            "{} line {line} is not valid UTF-8; convert the file to UTF-8",
            path.display()
        )
    })
}

/// A sentence as the model reads it: composed Unicode (NFC, so that `ü` typed as one
/// character or as `u` + combining diaeresis is the same word), every run of whitespace
/// (no-break spaces and tabs included) one space, trimmed, without a byte-order mark.
pub fn normalize_sentence(text: &str) -> String {
    // Most lines are already composed and singly spaced: checking is several times faster
    // than rebuilding them, which matters over millions of lines.
    let composed = text.is_ascii()
        || (unicode_normalization::is_nfc_quick(text.chars())
            == unicode_normalization::IsNormalized::Yes
            && !text.contains(BYTE_ORDER_MARK));
    if composed && is_single_spaced(text) {
        return text.to_string();
    }
    let composed: String = text.nfc().filter(|&c| c != BYTE_ORDER_MARK).collect();
    composed.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Whether `text` has no whitespace but single ASCII spaces between words: what
/// `split_whitespace` + `join(" ")` would leave unchanged.
fn is_single_spaced(text: &str) -> bool {
    let bytes = text.as_bytes();
    if bytes.first() == Some(&b' ') || bytes.last() == Some(&b' ') {
        return false;
    }
    if text.is_ascii() {
        // Unicode's ASCII whitespace (what `split_whitespace` splits at): space and U+0009
        // to U+000D, vertical tab included.
        return !bytes.iter().any(|&b| (b'\t'..=b'\r').contains(&b))
            && !bytes.windows(2).any(|w| w == b"  ");
    }
    let mut previous_space = false;
    for c in text.chars() {
        if c == ' ' {
            if previous_space {
                return false;
            }
            previous_space = true;
        } else if c.is_whitespace() {
            return false;
        } else {
            previous_space = false;
        }
    }
    true
}

/// A line with no letter or digit (`@@`, `-`, `...`) stands for a missing sentence.
pub(super) fn is_placeholder(text: &str) -> bool {
    !text.chars().any(char::is_alphanumeric)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::CorpusSource;
    use crate::corpus::read_corpus;

    #[test]
    fn tsv_pairs_are_split_at_the_first_tab_and_blank_lines_skipped() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("pairs.tsv");
        std::fs::write(&path, "ich mochte\ti want\n\n ein  bier \ta beer .\n").unwrap();
        let (pairs, report) = read_corpus(&CorpusSource::Tsv(path)).unwrap();
        assert_eq!(report.kept, 2);
        assert_eq!(pairs[1].src, "ein bier");
        assert_eq!(pairs[1].tgt, "a beer .");
    }

    #[test]
    fn a_text_corpus_gives_target_only_examples_that_encode_and_batch_without_a_source() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("text.txt");
        std::fs::write(&path, "the cat sat .\n\n@@\nthe dog ran .\n").unwrap();
        let source = CorpusSource::Text { text: path };
        let (pairs, report) = read_corpus(&source).unwrap();
        assert_eq!((report.kept, report.empty, report.placeholder), (2, 1, 1));
        assert!(pairs.iter().all(|p| p.src.is_empty()), "{pairs:?}");
        assert_eq!(pairs[1].tgt, "the dog ran .");
        let data = crate::config::DataConfig {
            train: source,
            ..crate::config::DataConfig::default()
        };
        let tokenizers = crate::tokenize::Tokenizers::learn(&data, &pairs).unwrap();
        let (encoded, _) = crate::training_data::encode_pairs(&pairs, &tokenizers, 16).unwrap();
        assert!(encoded.iter().all(|p| p.src.is_empty() && p.tgt.len() == 6));
        let batch = crate::training_data::PaddedBatch::new(&encoded.iter().collect::<Vec<_>>());
        assert_eq!((batch.src_len, batch.src.len(), batch.tgt_len), (0, 0, 5));
        // One vocabulary, learned once from the text, stands on both sides.
        assert_eq!(tokenizers.src.vocab_size(), tokenizers.tgt.vocab_size());
    }

    #[test]
    fn a_tsv_line_with_three_columns_is_named_not_glued_into_the_target() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("pairs.tsv");
        std::fs::write(&path, "a\tb\nein bier\ta beer\tCC-BY\n").unwrap();
        let err = read_corpus(&CorpusSource::Tsv(path))
            .unwrap_err()
            .to_string();
        assert!(err.contains("pairs.tsv line 2"), "{err}");
        assert!(err.contains("found 3 columns"), "{err}");
    }

    #[test]
    fn a_byte_order_mark_is_not_part_of_the_first_word() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("pairs.tsv");
        std::fs::write(&path, "\u{feff}ich mochte\ti want\n").unwrap();
        let (pairs, _) = read_corpus(&CorpusSource::Tsv(path)).unwrap();
        assert_eq!(pairs[0].src, "ich mochte");
        assert_eq!(normalize_sentence("\u{feff}ein bier"), "ein bier");
    }

    #[test]
    fn the_fast_path_cleans_exactly_as_the_full_normalisation() {
        let slow = |text: &str| -> String {
            let composed: String = text.nfc().filter(|&c| c != BYTE_ORDER_MARK).collect();
            composed.split_whitespace().collect::<Vec<_>>().join(" ")
        };
        for text in [
            "",
            " ",
            "a",
            "a b",
            " a b",
            "a b ",
            "a  b",
            "a\tb",
            "a\u{a0}b",
            "a\u{b}b",
            "a\rb",
            "a\u{c}b",
            "a b\n",
            "a\u{3000}b",
            "M\u{e4}nner",
            "Ma\u{308}nner",
            "\u{feff}ein bier",
            "ein\u{feff} bier",
            "x\u{2028}y",
            "Grüß Gott!",
        ] {
            assert_eq!(normalize_sentence(text), slow(text), "{text:?}");
        }
    }

    #[test]
    fn composed_and_decomposed_umlauts_are_the_same_word() {
        let composed = "M\u{e4}nner";
        let decomposed = "Ma\u{308}nner";
        assert_ne!(composed, decomposed);
        assert_eq!(normalize_sentence(decomposed), composed);
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("pairs.tsv");
        std::fs::write(&path, format!("{decomposed}\tmen\n")).unwrap();
        let (pairs, _) = read_corpus(&CorpusSource::Tsv(path)).unwrap();
        assert_eq!(pairs[0].src, composed);
    }

    #[test]
    fn a_file_that_is_not_utf8_is_named_with_its_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("latin1.tsv");
        std::fs::write(&path, b"a\tb\nM\xe4nner\tmen\n").unwrap();
        let err = read_corpus(&CorpusSource::Tsv(path))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("latin1.tsv line 2 is not valid UTF-8"),
            "{err}"
        );
    }

    #[test]
    fn a_tsv_line_without_a_tab_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("pairs.tsv");
        std::fs::write(&path, "a\tb\nno tab here\n").unwrap();
        let err = read_corpus(&CorpusSource::Tsv(path))
            .unwrap_err()
            .to_string();
        assert!(err.contains("pairs.tsv line 2"), "{err}");
    }

    #[test]
    fn parallel_gzip_files_are_read_and_cleaned() {
        use std::io::Write;
        let dir = tempfile::tempdir().unwrap();
        let src = dir.path().join("x.de.gz");
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        gz.write_all("Zwei\u{a0}Männer  stehen.\n@@\nein Hund\n\n".as_bytes())
            .unwrap();
        std::fs::write(&src, gz.finish().unwrap()).unwrap();
        let tgt = dir.path().join("x.en");
        std::fs::write(&tgt, "Two men stand.\nA cat.\n a dog \nsomething\n").unwrap();
        let (pairs, report) = read_corpus(&CorpusSource::Parallel { src, tgt }).unwrap();
        assert_eq!(pairs[0].src, "Zwei Männer stehen.");
        assert_eq!(pairs[1].tgt, "a dog");
        assert_eq!(
            (report.read, report.kept, report.placeholder, report.empty),
            (4, 2, 1, 1)
        );
    }

    #[test]
    fn misaligned_parallel_files_are_an_error_naming_both() {
        let dir = tempfile::tempdir().unwrap();
        let (src, tgt) = (dir.path().join("a.de"), dir.path().join("a.en"));
        std::fs::write(&src, "a\nb\n").unwrap();
        std::fs::write(&tgt, "a\n").unwrap();
        let err = read_corpus(&CorpusSource::Parallel { src, tgt })
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("a.de has 2 lines") && err.contains("a.en has 1"),
            "{err}"
        );
    }

    #[test]
    fn an_empty_corpus_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("pairs.tsv");
        std::fs::write(&path, "\n").unwrap();
        let err = read_corpus(&CorpusSource::Tsv(path))
            .unwrap_err()
            .to_string();
        assert!(err.contains("no usable sentence pairs"), "{err}");
    }
}
