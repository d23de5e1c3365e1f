//! Corpus chrF exactly as sacreBLEU computes it by default: character 6-grams, no word n-grams,
//! beta 2, whitespace removed, mixed case, one reference per segment.

use std::collections::HashMap;

use super::tokenizer_13a::{python_rstrip, python_split};
use super::SACREBLEU_VERSION;

const CHAR_ORDER: usize = 6;
const BETA: f64 = 2.0;

/// `nrefs:1|case:mixed|eff:yes|nc:6|nw:0|space:no|version:...`
pub fn chrf_signature() -> String {
    format!("nrefs:1|case:mixed|eff:yes|nc:6|nw:0|space:no|version:{SACREBLEU_VERSION}")
}

/// Corpus chrF2 in [0, 100].
pub fn corpus_chrf(hypotheses: &[String], references: &[String]) -> f64 {
    // Per order: hypothesis n-grams, reference n-grams, matches; summed over the corpus.
    let mut statistics = [[0usize; 3]; CHAR_ORDER];
    for (hyp, reference) in hypotheses.iter().zip(references) {
        let (hyp, reference) = (without_whitespace(hyp), without_whitespace(reference));
        let (hyp, reference) = (char_ngrams(&hyp), char_ngrams(&reference));
        for (order, (h, r)) in hyp.iter().zip(&reference).enumerate() {
            let hyp_count: usize = h.values().sum();
            let matches: usize = h
                .iter()
                .map(|(gram, &count)| r.get(gram).map_or(0, |&rc| count.min(rc)))
                .sum();
            statistics[order][0] += if r.is_empty() { 0 } else { hyp_count };
            statistics[order][1] += r.values().sum::<usize>();
            statistics[order][2] += matches;
        }
    }
    f_score(&statistics)
}

fn without_whitespace(line: &str) -> String {
    python_split(python_rstrip(line)).concat()
}

/// Character n-gram counts for n = 1..=6.
fn char_ngrams(joined: &str) -> Vec<HashMap<&str, usize>> {
    let boundaries: Vec<usize> = joined
        .char_indices()
        .map(|(i, _)| i)
        .chain(std::iter::once(joined.len()))
        .collect();
    let chars = boundaries.len() - 1;
    (1..=CHAR_ORDER)
        .map(|n| {
            let mut counts = HashMap::new();
            for start in 0..(chars + 1).saturating_sub(n) {
                *counts
                    .entry(&joined[boundaries[start]..boundaries[start + n]])
                    .or_insert(0) += 1;
            }
            counts
        })
        .collect()
}

/// sacreBLEU's `CHRF._compute_f_score` without eps smoothing.
fn f_score(statistics: &[[usize; 3]; CHAR_ORDER]) -> f64 {
    let factor = BETA * BETA;
    let (mut avg_precision, mut avg_recall, mut effective_order) = (0.0, 0.0, 0usize);
    for &[n_hyp, n_ref, n_match] in statistics {
        if n_hyp > 0 && n_ref > 0 {
            avg_precision += n_match as f64 / n_hyp as f64;
            avg_recall += n_match as f64 / n_ref as f64;
            effective_order += 1;
        }
    }
    if effective_order == 0 {
        return 0.0;
    }
    avg_precision /= effective_order as f64;
    avg_recall /= effective_order as f64;
    if avg_precision + avg_recall == 0.0 {
        return 0.0;
    }
    100.0 * (1.0 + factor) * avg_precision * avg_recall / (factor * avg_precision + avg_recall)
}
