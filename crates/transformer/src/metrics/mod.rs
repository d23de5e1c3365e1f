//! Translation quality metrics, computed exactly as sacreBLEU does by default, and a training
//! run's history of metrics (its metrics.jsonl records).

pub mod bleu;
pub mod chrf;
pub mod record;
pub mod time_spent;
pub mod tokenizer_13a;

pub use bleu::{corpus_bleu, BleuScore, BleuStatistics};
pub use chrf::{chrf_signature, corpus_chrf, corpus_chrf_references};
pub use record::MetricRecord;
pub use time_spent::{RunPart, TimeSpent};

/// The sacreBLEU release whose numbers the committed fixtures pin (tests/fixtures/sacrebleu).
pub const SACREBLEU_VERSION: &str = "2.6.0";

/// Whether text is scored as it is (sacreBLEU's default) or lowercased first (`-lc`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Case {
    Mixed,
    Lower,
}

impl Case {
    pub fn signature(self) -> &'static str {
        match self {
            Self::Mixed => "mixed",
            Self::Lower => "lc",
        }
    }

    /// Applies the case setting to segments, as sacreBLEU does before tokenizing.
    pub fn apply(self, segments: Vec<String>) -> Vec<String> {
        match self {
            Self::Mixed => segments,
            Self::Lower => segments.into_iter().map(|s| s.to_lowercase()).collect(),
        }
    }
}

use std::path::Path;

use anyhow::bail;

/// Reads a text file the way the sacreBLEU command line does: UTF-8, universal newlines
/// (`\n`, `\r\n` or `\r` end a line), trailing whitespace stripped from each line. `.gz` files
/// are decompressed first.
pub fn read_segments(path: &Path, flag: &'static str) -> anyhow::Result<Vec<String>> {
    let text = crate::corpus::read_text(path, crate::corpus::PathOrigin::Flag(flag))?;
    let text = text.replace("\r\n", "\n").replace('\r', "\n");
    let text = text.strip_suffix('\n').unwrap_or(&text);
    if text.is_empty() {
        return Ok(Vec::new());
    }
    Ok(text
        .split('\n')
        .map(|line| tokenizer_13a::python_rstrip(line).to_string())
        .collect())
}

/// Checks that hypotheses and references pair up line by line.
pub fn check_aligned(
    hyp_lines: usize,
    ref_lines: usize,
    hyp: &Path,
    reference: &Path,
) -> anyhow::Result<()> {
    if hyp_lines != ref_lines {
        bail!(
            "{} has {hyp_lines} lines but {} has {ref_lines}; hypotheses and references must \
             pair up line by line",
            hyp.display(),
            reference.display()
        );
    }
    Ok(())
}
