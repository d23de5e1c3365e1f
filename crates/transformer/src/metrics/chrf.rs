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
    let references: Vec<[&str; 1]> = references.iter().map(|r| [r.as_str()]).collect();
    corpus_chrf_references(hypotheses, &references)
}

/// Per order: hypothesis n-grams, reference n-grams, matches.
type Statistics = [[usize; 3]; CHAR_ORDER];

/// Corpus chrF2 against any number of references each (`references[i]` are segment i's), as
/// sacreBLEU scores several: each segment counts with the reference it scores best against
/// (the first of those that score alike).
pub fn corpus_chrf_references<'a, R: AsRef<[&'a str]>>(
    hypotheses: &[String],
    references: &[R],
) -> f64 {
    let mut corpus: Statistics = [[0; 3]; CHAR_ORDER];
    for (hyp, references) in hypotheses.iter().zip(references) {
        let hyp = without_whitespace(hyp);
        let hyp = char_ngrams(&hyp);
        let mut best: Option<(f64, Statistics)> = None;
        for reference in references.as_ref() {
            let reference = without_whitespace(reference);
            let statistics = segment_statistics(&hyp, &char_ngrams(&reference));
            let score = f_score(&statistics);
            if best.as_ref().is_none_or(|(best, _)| score > *best) {
                best = Some((score, statistics));
            }
        }
        for (total, segment) in corpus
            .iter_mut()
            .zip(best.map(|(_, s)| s).unwrap_or_default())
        {
            for (t, s) in total.iter_mut().zip(segment) {
                *t += s;
            }
        }
    }
    f_score(&corpus)
}

/// One segment's statistics against one reference.
fn segment_statistics(
    hyp: &[HashMap<&str, usize>],
    reference: &[HashMap<&str, usize>],
) -> Statistics {
    let mut statistics = [[0; 3]; CHAR_ORDER];
    for (order, (h, r)) in hyp.iter().zip(reference).enumerate() {
        let hyp_count: usize = h.values().sum();
        let matches: usize = h
            .iter()
            .map(|(gram, &count)| r.get(gram).map_or(0, |&rc| count.min(rc)))
            .sum();
        statistics[order][0] = if r.is_empty() { 0 } else { hyp_count };
        statistics[order][1] = r.values().sum::<usize>();
        statistics[order][2] = matches;
    }
    statistics
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
fn f_score(statistics: &Statistics) -> f64 {
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
    // In sacreBLEU's order, so that the score is its own to the last bit.
    let score = (1.0 + factor) * avg_precision * avg_recall / (factor * avg_precision + avg_recall);
    100.0 * score
}
