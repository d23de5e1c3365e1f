//! Corpus BLEU exactly as sacreBLEU computes it by default: 13a tokenization, mixed case,
//! up to 4-grams, exponential smoothing (NIST), one reference per segment.

use std::collections::HashMap;

use super::tokenizer_13a::{python_rstrip, python_split, tokenize_13a};
use super::{Case, SACREBLEU_VERSION};

const MAX_ORDER: usize = 4;

/// A corpus BLEU score and the statistics behind it, as sacreBLEU reports them.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct BleuScore {
    pub score: f64,
    /// Modified n-gram precisions in percent, orders 1 to 4.
    pub precisions: [f64; MAX_ORDER],
    pub brevity_penalty: f64,
    pub hyp_len: usize,
    pub ref_len: usize,
    pub correct: [usize; MAX_ORDER],
    pub total: [usize; MAX_ORDER],
}

impl BleuScore {
    /// `nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:...`
    pub fn signature(case: Case) -> String {
        format!(
            "nrefs:1|case:{}|eff:no|tok:13a|smooth:exp|version:{SACREBLEU_VERSION}",
            case.signature()
        )
    }

    /// sacreBLEU's text line: `BLEU|<signature> = 35.21 66.7/42.3/29.0/20.3 (BP = ...)`.
    pub fn format_text(&self, case: Case) -> String {
        let ratio = if self.ref_len > 0 {
            self.hyp_len as f64 / self.ref_len as f64
        } else {
            0.0
        };
        format!(
            "BLEU|{} = {:.2} {:.1}/{:.1}/{:.1}/{:.1} (BP = {:.3} ratio = {:.3} hyp_len = {} ref_len = {})",
            Self::signature(case),
            self.score,
            self.precisions[0],
            self.precisions[1],
            self.precisions[2],
            self.precisions[3],
            self.brevity_penalty,
            ratio,
            self.hyp_len,
            self.ref_len
        )
    }
}

/// Corpus BLEU of `hypotheses` against one reference each (same length, same order).
pub fn corpus_bleu(hypotheses: &[String], references: &[String]) -> BleuScore {
    BleuStatistics::of(hypotheses, references).score()
}

/// The counts corpus BLEU is computed from. They add up over parts of a corpus, so that the
/// ranks of a distributed run can each score their share and sum them: the score of the sum
/// is the whole corpus's, exactly.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BleuStatistics {
    pub correct: [usize; MAX_ORDER],
    pub total: [usize; MAX_ORDER],
    pub hyp_len: usize,
    pub ref_len: usize,
}

impl BleuStatistics {
    /// How many numbers [`Self::to_counts`] gives.
    pub const COUNTS: usize = 2 * MAX_ORDER + 2;

    /// The statistics of `hypotheses` against one reference each (same length, same order).
    pub fn of(hypotheses: &[String], references: &[String]) -> Self {
        let references: Vec<[&str; 1]> = references.iter().map(|r| [r.as_str()]).collect();
        Self::of_references(hypotheses, &references)
    }

    /// The statistics of `hypotheses` against any number of references each (`references[i]`
    /// are segment i's), as sacreBLEU counts several: each n-gram matched up to its most
    /// frequent count in any one reference, and the reference length the one closest to the
    /// hypothesis's (the shorter of two as close).
    pub fn of_references<'a, R: AsRef<[&'a str]>>(hypotheses: &[String], references: &[R]) -> Self {
        let mut stats = Self::default();
        for (hyp, references) in hypotheses.iter().zip(references) {
            let hyp = tokenize_13a(python_rstrip(hyp));
            let hyp_tokens = python_split(&hyp);
            let mut most_in_a_reference: HashMap<Vec<&str>, usize> = HashMap::new();
            let tokenized: Vec<String> = references
                .as_ref()
                .iter()
                .map(|reference| tokenize_13a(python_rstrip(reference)))
                .collect();
            let mut closest_len: Option<usize> = None;
            for reference in &tokenized {
                let ref_tokens = python_split(reference);
                let len = ref_tokens.len();
                let distance = |l: usize| l.abs_diff(hyp_tokens.len());
                closest_len = Some(match closest_len {
                    Some(best) if (distance(best), best) <= (distance(len), len) => best,
                    _ => len,
                });
                for (ngram, count) in ngram_counts(&ref_tokens) {
                    let most = most_in_a_reference.entry(ngram).or_insert(0);
                    *most = (*most).max(count);
                }
            }
            stats.hyp_len += hyp_tokens.len();
            stats.ref_len += closest_len.unwrap_or(0);
            for (ngram, count) in ngram_counts(&hyp_tokens) {
                let n = ngram.len() - 1;
                stats.total[n] += count;
                if let Some(&in_ref) = most_in_a_reference.get(&ngram) {
                    stats.correct[n] += count.min(in_ref);
                }
            }
        }
        stats
    }

    /// The counts in a fixed order, as f64 (exact below 2^53), to be summed over ranks.
    pub fn to_counts(&self) -> Vec<f64> {
        let mut counts: Vec<f64> = self.correct.iter().map(|&c| c as f64).collect();
        counts.extend(self.total.iter().map(|&t| t as f64));
        counts.extend([self.hyp_len as f64, self.ref_len as f64]);
        counts
    }

    /// Back from [`Self::to_counts`] (or a sum of them).
    pub fn from_counts(counts: &[f64]) -> anyhow::Result<Self> {
        anyhow::ensure!(
            counts.len() == Self::COUNTS,
            "BLEU statistics need {} counts, got {}",
            Self::COUNTS,
            counts.len()
        );
        let count = |i: usize| counts[i] as usize;
        Ok(Self {
            correct: std::array::from_fn(count),
            total: std::array::from_fn(|n| count(MAX_ORDER + n)),
            hyp_len: count(2 * MAX_ORDER),
            ref_len: count(2 * MAX_ORDER + 1),
        })
    }

    /// sacreBLEU's score of these counts.
    pub fn score(&self) -> BleuScore {
        score_from_statistics(self.correct, self.total, self.hyp_len, self.ref_len)
    }
}

fn ngram_counts<'a>(tokens: &[&'a str]) -> HashMap<Vec<&'a str>, usize> {
    let mut counts = HashMap::new();
    for n in 1..=MAX_ORDER {
        for window in tokens.windows(n) {
            *counts.entry(window.to_vec()).or_insert(0) += 1;
        }
    }
    counts
}

/// sacreBLEU's `BLEU.compute_bleu` with smooth_method="exp" and effective_order=False.
fn score_from_statistics(
    correct: [usize; MAX_ORDER],
    total: [usize; MAX_ORDER],
    hyp_len: usize,
    ref_len: usize,
) -> BleuScore {
    let brevity_penalty = if hyp_len < ref_len {
        if hyp_len > 0 {
            (1.0 - ref_len as f64 / hyp_len as f64).exp()
        } else {
            0.0
        }
    } else {
        1.0
    };
    let mut precisions = [0.0; MAX_ORDER];
    let mut score = 0.0;
    if correct.iter().any(|&c| c > 0) {
        let mut smooth = 1.0;
        for n in 0..MAX_ORDER {
            if total[n] == 0 {
                break;
            }
            precisions[n] = if correct[n] == 0 {
                smooth *= 2.0;
                100.0 / (smooth * total[n] as f64)
            } else {
                100.0 * correct[n] as f64 / total[n] as f64
            };
        }
        let log_sum: f64 = precisions.iter().map(|&p| floored_log(p)).sum();
        score = brevity_penalty * (log_sum / MAX_ORDER as f64).exp();
    }
    BleuScore {
        score,
        precisions,
        brevity_penalty,
        hyp_len,
        ref_len,
        correct,
        total,
    }
}

/// sacreBLEU's `my_log`: log, with log(0) floored to -9999999999.
fn floored_log(x: f64) -> f64 {
    if x == 0.0 {
        -9_999_999_999.0
    } else {
        x.ln()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(text: &[&str]) -> Vec<String> {
        text.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn identical_text_scores_100() {
        let text = lines(&["the cat sat on the mat .", "a dog runs in the park"]);
        let score = corpus_bleu(&text, &text);
        assert!((score.score - 100.0).abs() < 1e-9);
        assert_eq!(score.brevity_penalty, 1.0);
    }

    #[test]
    fn no_matches_score_zero_and_empty_hypotheses_get_no_brevity_credit() {
        let score = corpus_bleu(&lines(&["x y z"]), &lines(&["a b c d"]));
        assert_eq!(score.score, 0.0);
        let score = corpus_bleu(&lines(&[""]), &lines(&["a b"]));
        assert_eq!((score.score, score.brevity_penalty), (0.0, 0.0));
    }

    #[test]
    fn statistics_of_parts_sum_to_the_whole_corpus_score_exactly() {
        let hyps = lines(&[
            "the cat sat on a mat .",
            "a dog runs",
            "x y",
            "the park is big",
        ]);
        let refs = lines(&[
            "the cat sat on the mat .",
            "a dog runs in the park",
            "x y z",
            "a big park",
        ]);
        let whole = corpus_bleu(&hyps, &refs);
        let parts = [
            BleuStatistics::of(&hyps[..1], &refs[..1]),
            BleuStatistics::of(&hyps[1..3], &refs[1..3]),
            BleuStatistics::of(&hyps[3..], &refs[3..]),
        ];
        let summed: Vec<f64> = (0..BleuStatistics::COUNTS)
            .map(|i| parts.iter().map(|p| p.to_counts()[i]).sum())
            .collect();
        let score = BleuStatistics::from_counts(&summed).unwrap().score();
        assert_eq!(score, whole);
        assert!(score.score > 0.0 && score.score < 100.0);
    }
}
