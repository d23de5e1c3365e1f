//! One translated sentence as every door reports it (`translate --json`, the server's
//! answers): the text, its tokens, ids and log-probabilities, what was cut or looks short,
//! and the alternatives a beam search ranked after it.

use serde::Serialize;

/// One translated sentence, as `translate --json` prints it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Translation {
    pub source: String,
    pub translation: String,
    /// Generated tokens, `</s>` included when it was produced.
    pub tokens: Vec<String>,
    pub ids: Vec<u32>,
    /// The Generator's log-probability of each generated id.
    pub log_probs: Vec<f32>,
    /// Source pieces that were not in the vocabulary and became `<unk>`.
    #[serde(skip)]
    pub unknown_words: Vec<String>,
    /// The source's token count when it was longer than the model reads and was cut; for a
    /// source so long that only its beginning was tokenized (past 256 characters a token
    /// read), the count of that beginning, a lower bound.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub truncated_from: Option<usize>,
    /// The most tokens decoding could generate for this source, when the translation ran
    /// into it without ending by itself (`--max-len`, `decode.max_len`, or the model's
    /// length): its end is cut off. Written only when set.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stopped_at_limit: Option<usize>,
    /// The translation has under half the tokens the model's length ratio gives its source
    /// (see [`is_short`]): a sentence may be missing. Written only when true.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub short: bool,
    /// The next best hypotheses of a beam search asked for more than one, best first.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub alternatives: Vec<Alternative>,
}

/// A hypothesis after the best, in the same fields as the translation.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Alternative {
    pub translation: String,
    pub tokens: Vec<String>,
    pub ids: Vec<u32>,
    pub log_probs: Vec<f32>,
}

impl Translation {
    /// The translation of a text cut into `sentences`, whose translations read `joined` when
    /// put back together: tokens, ids and log-probabilities one sentence after the other,
    /// alternative `i` each sentence's alternative `i` (its best where it has fewer).
    pub fn concatenate(source: &str, joined: String, sentences: Vec<Translation>) -> Self {
        if sentences.len() == 1 {
            let mut only = sentences.into_iter().next().expect("one sentence");
            only.source = source.to_string();
            only.translation = joined;
            return only;
        }
        let widest = sentences
            .iter()
            .map(|s| s.alternatives.len())
            .max()
            .unwrap_or(0);
        let alternatives = (0..widest)
            .map(|i| {
                let mut alternative = Alternative {
                    translation: String::new(),
                    tokens: Vec::new(),
                    ids: Vec::new(),
                    log_probs: Vec::new(),
                };
                let mut words = Vec::new();
                for s in &sentences {
                    let (translation, tokens, ids, log_probs) = match s.alternatives.get(i) {
                        Some(a) => (&a.translation, &a.tokens, &a.ids, &a.log_probs),
                        None => (&s.translation, &s.tokens, &s.ids, &s.log_probs),
                    };
                    words.push(translation.as_str());
                    alternative.tokens.extend(tokens.iter().cloned());
                    alternative.ids.extend(ids);
                    alternative.log_probs.extend(log_probs);
                }
                alternative.translation = words.join(" ");
                alternative
            })
            .collect();
        let mut out = Translation {
            source: source.to_string(),
            translation: joined,
            tokens: Vec::new(),
            ids: Vec::new(),
            log_probs: Vec::new(),
            unknown_words: Vec::new(),
            truncated_from: None,
            stopped_at_limit: None,
            short: false,
            alternatives,
        };
        for s in sentences {
            out.tokens.extend(s.tokens);
            out.ids.extend(s.ids);
            out.log_probs.extend(s.log_probs);
            out.unknown_words.extend(s.unknown_words);
            out.truncated_from = out.truncated_from.max(s.truncated_from);
            out.stopped_at_limit = out.stopped_at_limit.max(s.stopped_at_limit);
            out.short |= s.short;
        }
        out
    }
}
