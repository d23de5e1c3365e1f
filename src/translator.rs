//! Sentence in, sentence out: tokenize, map to ids, greedy-decode, map back to words.

use anyhow::bail;
use candle_core::{Device, Tensor};
use serde::Serialize;

use crate::data::batch::with_boundaries;
use crate::data::vocab::{BOS_ID, EOS_ID};
use crate::data::{tokenize, Vocab};
use crate::decode::{greedy_decode, DecodeLimits};
use crate::model::{masks, EncoderDecoder};

/// Target tokens allowed beyond the source length when `--max-len` is not given.
const DEFAULT_EXTRA_TARGET_TOKENS: usize = 50;

/// A trained model with its vocabularies, on a device.
pub struct Translator<'a> {
    pub model: &'a EncoderDecoder,
    pub src_vocab: &'a Vocab,
    pub tgt_vocab: &'a Vocab,
    /// Rows of the position table: the longest sequence either side can have.
    pub max_positions: usize,
    pub device: &'a Device,
}

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
    /// Source words that were not in the vocabulary and became `<unk>`.
    #[serde(skip)]
    pub unknown_words: Vec<String>,
}

impl Translator<'_> {
    /// Translates one sentence; an empty sentence gives an empty translation. `max_len` bounds
    /// the generated tokens (`</s>` included).
    pub fn translate(&self, sentence: &str, max_len: Option<usize>) -> anyhow::Result<Translation> {
        let words = tokenize(sentence);
        let mut result = Translation {
            source: sentence.to_string(),
            translation: String::new(),
            tokens: Vec::new(),
            ids: Vec::new(),
            log_probs: Vec::new(),
            unknown_words: Vec::new(),
        };
        if words.is_empty() {
            return Ok(result);
        }
        let encoded = self.src_vocab.encode(&words);
        result.unknown_words = encoded.unknown;
        let src_ids = with_boundaries(&encoded.ids);
        if src_ids.len() > self.max_positions {
            bail!(
                "the input has {} words but the model reads at most {} (model.max_len {} minus \
                 <s> and </s>); split the sentence",
                words.len(),
                self.max_positions - 2,
                self.max_positions
            );
        }
        let max_steps = max_len
            .unwrap_or(words.len() + DEFAULT_EXTRA_TARGET_TOKENS)
            .min(self.max_positions);
        let src = Tensor::from_slice(&src_ids, (1, src_ids.len()), self.device)?;
        let src_mask = masks::full_mask(1, src_ids.len(), self.device)?;
        let limits = DecodeLimits {
            max_steps,
            end: Some(EOS_ID),
        };
        let hypothesis = greedy_decode(self.model, &src, &src_mask, BOS_ID, limits)?;
        result.tokens = hypothesis
            .ids
            .iter()
            .map(|&id| self.tgt_vocab.token(id).to_string())
            .collect();
        result.translation = hypothesis
            .ids
            .iter()
            .filter(|&&id| id != EOS_ID)
            .map(|&id| self.tgt_vocab.token(id))
            .collect::<Vec<_>>()
            .join(" ");
        result.ids = hypothesis.ids;
        result.log_probs = hypothesis.log_probs;
        Ok(result)
    }
}
