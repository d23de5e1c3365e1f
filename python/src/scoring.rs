//! `bleu` and `chrf`: corpus scores exactly as `sacrebleu.corpus_bleu` and
//! `sacrebleu.corpus_chrf` give them by default, taking what they take (hypotheses and a list
//! of reference streams, a stream's `None` where a segment has fewer references).

use pyo3::prelude::*;
use pyo3::types::PyString;
use transformer::metrics::{self, BleuStatistics, Case, SACREBLEU_VERSION};

use crate::arguments::{strings, text_of};
use crate::errors::{usage, wrong_type};

/// A corpus BLEU score and the counts behind it, in sacreBLEU's names.
#[pyclass(frozen, get_all, name = "BleuScore", module = "transformer")]
pub struct PyBleuScore {
    pub score: f64,
    /// Matching n-grams, orders 1 to 4.
    pub counts: Vec<usize>,
    /// Hypothesis n-grams, orders 1 to 4.
    pub totals: Vec<usize>,
    /// Modified n-gram precisions in percent, orders 1 to 4.
    pub precisions: Vec<f64>,
    /// The brevity penalty.
    pub bp: f64,
    pub sys_len: usize,
    pub ref_len: usize,
    /// sacreBLEU's signature of the settings: `nrefs:1|case:mixed|eff:no|tok:13a|...`.
    pub signature: String,
}

#[pymethods]
impl PyBleuScore {
    /// As sacreBLEU prints it: `BLEU = 35.21 66.7/42.3/29.0/20.3 (BP = 1.000 ratio = ...)`.
    fn __str__(&self) -> String {
        let ratio = if self.ref_len > 0 {
            self.sys_len as f64 / self.ref_len as f64
        } else {
            0.0
        };
        let p = &self.precisions;
        format!(
            "BLEU = {:.2} {:.1}/{:.1}/{:.1}/{:.1} (BP = {:.3} ratio = {ratio:.3} hyp_len = {} \
             ref_len = {})",
            self.score, p[0], p[1], p[2], p[3], self.bp, self.sys_len, self.ref_len
        )
    }

    fn __repr__(&self) -> String {
        self.__str__()
    }

    fn __float__(&self) -> f64 {
        self.score
    }
}

/// A corpus chrF2 score.
#[pyclass(frozen, get_all, name = "ChrfScore", module = "transformer")]
pub struct PyChrfScore {
    pub score: f64,
    /// sacreBLEU's signature of the settings: `nrefs:1|case:mixed|eff:yes|nc:6|nw:0|...`.
    pub signature: String,
}

#[pymethods]
impl PyChrfScore {
    /// As sacreBLEU prints it: `chrF2 = 52.31`.
    fn __str__(&self) -> String {
        format!("chrF2 = {:.2}", self.score)
    }

    fn __repr__(&self) -> String {
        self.__str__()
    }

    fn __float__(&self) -> f64 {
        self.score
    }
}

/// Corpus BLEU of `hypotheses` against `references`, a list of reference streams (each a
/// list with one reference per hypothesis), as `sacrebleu.corpus_bleu` takes them: 13a
/// tokenization, exponential smoothing, mixed case unless `lowercase`.
#[pyfunction]
#[pyo3(signature = (hypotheses, references, *, lowercase = false))]
pub fn bleu(
    hypotheses: &Bound<'_, PyAny>,
    references: &Bound<'_, PyAny>,
    lowercase: bool,
) -> PyResult<PyBleuScore> {
    let case = if lowercase { Case::Lower } else { Case::Mixed };
    let (hypotheses, segments, nrefs) = corpus(hypotheses, references)?;
    let hypotheses = case.apply(hypotheses);
    let segments: Vec<Vec<String>> = segments.into_iter().map(|refs| case.apply(refs)).collect();
    let borrowed = borrowed(&segments);
    let score = BleuStatistics::of_references(&hypotheses, &borrowed).score();
    Ok(PyBleuScore {
        score: score.score,
        counts: score.correct.to_vec(),
        totals: score.total.to_vec(),
        precisions: score.precisions.to_vec(),
        bp: score.brevity_penalty,
        sys_len: score.hyp_len,
        ref_len: score.ref_len,
        signature: bleu_signature(&nrefs, case),
    })
}

/// Corpus chrF2 of `hypotheses` against `references` (as for [`bleu`]), as
/// `sacrebleu.corpus_chrf` gives it by default: character 6-grams, beta 2, whitespace
/// removed.
#[pyfunction]
pub fn chrf(hypotheses: &Bound<'_, PyAny>, references: &Bound<'_, PyAny>) -> PyResult<PyChrfScore> {
    let (hypotheses, segments, nrefs) = corpus(hypotheses, references)?;
    let borrowed = borrowed(&segments);
    Ok(PyChrfScore {
        score: metrics::corpus_chrf_references(&hypotheses, &borrowed),
        signature: format!(
            "nrefs:{nrefs}|case:mixed|eff:yes|nc:6|nw:0|space:no|version:{SACREBLEU_VERSION}"
        ),
    })
}

/// sacreBLEU's BLEU signature for `nrefs` references (a number or `var`).
fn bleu_signature(nrefs: &str, case: Case) -> String {
    format!(
        "nrefs:{nrefs}|case:{}|eff:no|tok:13a|smooth:exp|version:{SACREBLEU_VERSION}",
        case.signature()
    )
}

/// Each segment's references as `&str`s.
fn borrowed(segments: &[Vec<String>]) -> Vec<Vec<&str>> {
    segments
        .iter()
        .map(|refs| refs.iter().map(String::as_str).collect())
        .collect()
}

/// The hypotheses, each segment's references (a stream's `None`s left out) and sacreBLEU's
/// `nrefs` (their number, or `var` where segments have different numbers).
fn corpus(
    hypotheses: &Bound<'_, PyAny>,
    references: &Bound<'_, PyAny>,
) -> PyResult<(Vec<String>, Vec<Vec<String>>, String)> {
    let hypotheses = strings(hypotheses, "hypotheses", "one per segment")?;
    let streams: Vec<Bound<'_, PyAny>> = match references.is_instance_of::<PyString>() {
        true => Vec::new(),
        false => references.extract().unwrap_or_default(),
    };
    let is_stream = |s: &Bound<'_, PyAny>| !s.is_instance_of::<PyString>();
    if streams.is_empty() || !streams.iter().all(is_stream) {
        return Err(wrong_type(
            "references must be a list of reference streams, each a list of str with one \
             reference per hypothesis, as sacrebleu.corpus_bleu takes them: for one reference \
             each, pass [references]",
        ));
    }
    let mut segments: Vec<Vec<String>> = vec![Vec::new(); hypotheses.len()];
    for (k, stream) in streams.iter().enumerate() {
        let stream = reference_stream(stream, k)?;
        if stream.len() != hypotheses.len() {
            return Err(usage(format!(
                "references[{k}] has {} segments and hypotheses has {}: each stream needs one \
                 reference per hypothesis (None where a segment has no reference in it)",
                stream.len(),
                hypotheses.len()
            )));
        }
        for (refs, reference) in segments.iter_mut().zip(stream) {
            refs.extend(reference);
        }
    }
    if let Some(i) = segments.iter().position(Vec::is_empty) {
        return Err(usage(format!(
            "segment {i} has no reference in any stream (all None); give it one or leave the \
             segment out"
        )));
    }
    let counts: std::collections::BTreeSet<usize> = segments.iter().map(Vec::len).collect();
    let nrefs = match counts.len() {
        1 => counts.first().map_or("0".into(), usize::to_string),
        _ => "var".to_string(),
    };
    // An empty corpus: sacreBLEU counts its streams.
    let nrefs = if segments.is_empty() {
        streams.len().to_string()
    } else {
        nrefs
    };
    Ok((hypotheses, segments, nrefs))
}

/// `references[k]`: a list of str or None, one per hypothesis.
fn reference_stream(stream: &Bound<'_, PyAny>, k: usize) -> PyResult<Vec<Option<String>>> {
    let name = format!("references[{k}]");
    let not_a_stream = || wrong_type(format!("{name} must be a list of str (or None)"));
    let items: Vec<Bound<'_, PyAny>> = stream.extract().map_err(|_| not_a_stream())?;
    items
        .iter()
        .enumerate()
        .map(|(i, item)| match item.cast::<PyString>() {
            Ok(text) => text_of(text, &format!("{name}[{i}]")).map(Some),
            Err(_) if item.is_none() => Ok(None),
            Err(_) => Err(not_a_stream()),
        })
        .collect()
}
