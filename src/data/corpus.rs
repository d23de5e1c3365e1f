//! Reading parallel corpora (a TSV file or two aligned text files, plain or gzip) and cleaning
//! them: Unicode composed (NFC), whitespace normalised, a byte-order mark dropped, empty and
//! placeholder pairs dropped and counted. Translation input goes through the same
//! `normalize_sentence`, so that the model sees text as it saw it in training.

use std::io::Read;
use std::path::Path;

use anyhow::{bail, Context};
use unicode_normalization::UnicodeNormalization;

use crate::config::{BuiltinCorpus, CorpusSource};

/// One sentence pair, whitespace-normalised.
#[derive(Debug, Clone, PartialEq)]
pub struct SentencePair {
    /// Empty for a text corpus: a language model reads no source.
    pub src: String,
    pub tgt: String,
}

/// What cleaning did to a corpus.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CleaningReport {
    pub read: usize,
    pub kept: usize,
    /// Pairs with an empty side (after whitespace normalisation).
    pub empty: usize,
    /// Pairs with a side that has no letter or digit, such as Multi30k's `@@` lines.
    pub placeholder: usize,
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

/// Reads a whole UTF-8 text file (`-`: stdin), decompressing it first when its name ends in
/// `.gz`.
pub fn read_text(path: &Path, origin: PathOrigin) -> anyhow::Result<String> {
    let read = if path == Path::new("-") {
        let mut bytes = Vec::new();
        std::io::stdin().read_to_end(&mut bytes).map(|_| bytes)
    } else {
        std::fs::read(path)
    };
    let bytes = read.map_err(|e| {
        let advice = match origin {
            PathOrigin::Config => "check the path in the config (relative paths start from the \
                                   directory you run in)"
                .to_string(),
            PathOrigin::Flag(flag) => format!("check the path given to {flag}"),
        };
        anyhow::anyhow!("cannot read {}: {e}; {advice}", path.display())
    })?;
    let bytes = if path.extension().is_some_and(|e| e == "gz") {
        let mut out = Vec::new();
        flate2::read::MultiGzDecoder::new(bytes.as_slice())
            .read_to_end(&mut out)
            .with_context(|| format!("{} is not a valid gzip file", path.display()))?;
        out
    } else {
        bytes
    };
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

/// Lines of a corpus file, without their `\n` / `\r\n` endings or a leading byte-order mark.
fn read_lines(path: &Path) -> anyhow::Result<Vec<String>> {
    let text = read_text(path, PathOrigin::Config)?;
    let text = text.strip_prefix(BYTE_ORDER_MARK).unwrap_or(&text);
    Ok(text
        .lines()
        .map(|l| l.strip_suffix('\r').unwrap_or(l).to_string())
        .collect())
}

/// Reads and cleans a corpus; fails on misaligned files, malformed TSV lines, or when nothing
/// is left.
pub fn read_corpus(source: &CorpusSource) -> anyhow::Result<(Vec<SentencePair>, CleaningReport)> {
    let raw = match source {
        CorpusSource::Tsv(path) => parse_tsv(read_lines(path)?, &path.display().to_string())?,
        CorpusSource::Builtin { builtin } => match builtin {
            BuiltinCorpus::Toy => parse_tsv(
                TOY_PAIRS.lines().map(str::to_string).collect(),
                &source.to_string(),
            )?,
        },
        CorpusSource::Parallel { src, tgt } => {
            let (src_lines, tgt_lines) = (read_lines(src)?, read_lines(tgt)?);
            if src_lines.len() != tgt_lines.len() {
                bail!(
                    "{} has {} lines but {} has {}; parallel files must be aligned line by line",
                    src.display(),
                    src_lines.len(),
                    tgt.display(),
                    tgt_lines.len()
                );
            }
            src_lines.into_iter().zip(tgt_lines).collect()
        }
        // A language model learns the target side only.
        CorpusSource::Text { text } => read_lines(text)?
            .into_iter()
            .map(|line| (String::new(), line))
            .collect(),
    };
    let mut report = CleaningReport {
        read: raw.len(),
        ..CleaningReport::default()
    };
    let mut pairs = Vec::with_capacity(raw.len());
    let has_source = !source.is_target_only();
    for (src, tgt) in raw {
        let (src, tgt) = (normalize_sentence(&src), normalize_sentence(&tgt));
        if (has_source && src.is_empty()) || tgt.is_empty() {
            report.empty += 1;
        } else if (has_source && is_placeholder(&src)) || is_placeholder(&tgt) {
            report.placeholder += 1;
        } else {
            pairs.push(SentencePair { src, tgt });
        }
    }
    report.kept = pairs.len();
    if pairs.is_empty() {
        bail!(
            "{source} holds no usable sentence pairs ({report}); point the config at a corpus \
             with `source<TAB>target` lines or aligned src/tgt files"
        );
    }
    Ok((pairs, report))
}

/// `source<TAB>target` lines; blank lines are skipped, a line without exactly one tab is an
/// error (a third column would otherwise be glued silently into the target).
/// The tutorial's toy pairs, built in for the built-in config (`CorpusSource::Builtin`).
const TOY_PAIRS: &str = include_str!("../../data/toy.tsv");

/// `source<TAB>target` lines of the file called `name` -> pairs; blank lines are skipped.
fn parse_tsv(lines: Vec<String>, name: &str) -> anyhow::Result<Vec<(String, String)>> {
    let mut pairs = Vec::new();
    for (index, line) in lines.into_iter().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let columns: Vec<&str> = line.split('\t').collect();
        let [src, tgt] = columns[..] else {
            let (found, fix) = match columns.len() {
                1 => (
                    "no tab".to_string(),
                    "separate the two sentences with one tab",
                ),
                n => (
                    format!("{n} columns"),
                    "keep the first two columns (cut -f1,2) or remove tabs inside sentences",
                ),
            };
            bail!(
                "{name} line {}: expected `source<TAB>target`, found {found}; {fix}",
                index + 1
            );
        };
        pairs.push((src.to_string(), tgt.to_string()));
    }
    Ok(pairs)
}

/// A sentence as the model reads it: composed Unicode (NFC, so that `ü` typed as one
/// character or as `u` + combining diaeresis is the same word), every run of whitespace
/// (no-break spaces and tabs included) one space, trimmed, without a byte-order mark.
pub fn normalize_sentence(text: &str) -> String {
    let composed: String = text.nfc().filter(|&c| c != BYTE_ORDER_MARK).collect();
    composed.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// A line with no letter or digit (`@@`, `-`, `...`) stands for a missing sentence.
fn is_placeholder(text: &str) -> bool {
    !text.chars().any(char::is_alphanumeric)
}

#[cfg(test)]
mod tests {
    use super::*;

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
        let tokenizers = crate::data::Tokenizers::learn(&data, &pairs).unwrap();
        let (encoded, _) = crate::data::encode_pairs(&pairs, &tokenizers, 16).unwrap();
        assert!(encoded.iter().all(|p| p.src.is_empty() && p.tgt.len() == 6));
        let batch = crate::data::PaddedBatch::new(&encoded.iter().collect::<Vec<_>>());
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
