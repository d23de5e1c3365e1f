//! One text's translation as Python sees it: the text, its tokens and ids, and (asked for
//! with `return_scores`) the log-probability of each token and their sum.

use pyo3::prelude::*;

/// The translation of one text: its sentences' translations put back together between the
/// text's own whitespace, their tokens one after another.
#[pyclass(frozen, get_all, name = "Translation", module = "transformer")]
pub struct PyTranslation {
    /// The text as given.
    pub source: String,
    /// The translated text.
    pub translation: String,
    /// The generated tokens, `</s>` included where the model produced it.
    pub tokens: Vec<String>,
    /// The tokens' ids in the target vocabulary.
    pub ids: Vec<u32>,
    /// Each token's log-probability under the model; `None` unless `return_scores=True`.
    pub log_probs: Option<Vec<f32>>,
    /// The sum of `log_probs`; `None` unless `return_scores=True`.
    pub score: Option<f64>,
    /// Under half the length the model gives such a source: a sentence may be missing.
    pub short: bool,
    /// The source's token count when it was longer than the model reads and was cut.
    pub truncated_from: Option<usize>,
    /// The token limit the translation ran into before it ended (its end is missing).
    pub stopped_at_limit: Option<usize>,
    /// Source words the vocabulary lacks, read as `<unk>`.
    pub unknown_words: Vec<String>,
}

impl PyTranslation {
    pub fn new(translation: transformer::infer::translator::Translation, scores: bool) -> Self {
        let score = scores.then(|| translation.log_probs.iter().map(|&p| f64::from(p)).sum());
        Self {
            source: translation.source,
            translation: translation.translation,
            tokens: translation.tokens,
            ids: translation.ids,
            log_probs: scores.then_some(translation.log_probs),
            score,
            short: translation.short,
            truncated_from: translation.truncated_from,
            stopped_at_limit: translation.stopped_at_limit,
            unknown_words: translation.unknown_words,
        }
    }
}

#[pymethods]
impl PyTranslation {
    fn __str__(&self) -> &str {
        &self.translation
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        let score = self
            .score
            .map_or(String::new(), |s| format!(", score={s:.4}"));
        let short = if self.short { ", short=True" } else { "" };
        let text = crate::values::python_repr(py, &self.translation)?;
        Ok(format!("Translation({text}{score}{short})"))
    }
}
