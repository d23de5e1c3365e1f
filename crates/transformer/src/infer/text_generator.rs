//! Text in, text out for a model that continues a prompt (the decoder-only language model):
//! tokenizes prompts, continues them by sampling (temperature, top-k) or beam search, and
//! decodes prompt and continuation together. Prompts of one token length are continued as
//! one batch.

use std::collections::BTreeMap;

use candle_core::{Device, Tensor};

use crate::decoding::sampling::{sample, Sampling};
use crate::decoding::{always_wanted, beam_search, BeamSettings, DecodeInput};
use crate::model::{DecodingModel, Prompt};
use crate::tokenize::specials::NEVER_GENERATED;
use crate::tokenize::specials::{BOS_ID, EOS_ID};
use crate::tokenize::TextTokenizer;

/// How a continuation picks its tokens.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Continuation {
    /// One token at a time, greedy at temperature 0.
    Sample(Sampling),
    /// The best hypothesis of a beam search.
    Beam(BeamSettings),
}

/// A prompt and its continuation.
#[derive(Debug, Clone, PartialEq)]
pub struct Continued {
    /// The prompt (as read) and its continuation, decoded together.
    pub text: String,
    /// Prompt pieces that were not in the vocabulary and became `<unk>`.
    pub unknown_words: Vec<String>,
    /// The prompt's token count when it was longer than the model reads: only its last
    /// `max_positions - 1` tokens were read.
    pub truncated_from: Option<usize>,
}

/// A language model with its tokenizer, ready to continue prompts.
pub struct TextGenerator<'a> {
    pub model: &'a dyn DecodingModel,
    pub tokenizer: &'a TextTokenizer,
    pub device: &'a Device,
}

impl TextGenerator<'_> {
    /// `prompt` and its continuation; see [`Self::continue_texts`].
    pub fn continue_text(
        &self,
        prompt: &str,
        max_new: usize,
        how: Continuation,
    ) -> anyhow::Result<Continued> {
        let mut continued = self.continue_texts(&[prompt.to_string()], max_new, how)?;
        Ok(continued.remove(0))
    }

    /// Each prompt and its continuation, as one text (decoded together, so that a subword
    /// that finishes the prompt's last word joins it), in order. A prompt may be empty: the
    /// model then starts a line of its own. At most `max_new` new tokens, fewer where the
    /// model ends its line or the position table ends. A prompt longer than the model reads
    /// is read from its last tokens that fit (and marked). Prompts of the same token length
    /// are decoded as one batch; each continues exactly as it would alone.
    pub fn continue_texts(
        &self,
        prompts: &[String],
        max_new: usize,
        how: Continuation,
    ) -> anyhow::Result<Vec<Continued>> {
        // <s> and at least the prompt's last token, and room for one new one.
        let readable = self.model.max_positions().saturating_sub(1).max(1);
        let mut by_length: BTreeMap<usize, Vec<(usize, Vec<u32>)>> = BTreeMap::new();
        let mut continued = Vec::with_capacity(prompts.len());
        for (index, prompt) in prompts.iter().enumerate() {
            // Only an end that surely holds the readable tokens is tokenized (a 16 MB line
            // took gigabytes).
            let encoded = self
                .tokenizer
                .encode(super::translator::readable_end(prompt, readable))?;
            let tokens = encoded.ids.len();
            let kept = &encoded.ids[tokens.saturating_sub(readable)..];
            // Training examples are lines framed as <s> ... </s>, so a prompt starts after <s>.
            let ids: Vec<u32> = std::iter::once(BOS_ID)
                .chain(kept.iter().copied())
                .collect();
            by_length.entry(ids.len()).or_default().push((index, ids));
            continued.push(Continued {
                text: String::new(),
                unknown_words: encoded.unknown,
                truncated_from: (tokens > readable).then_some(tokens),
            });
        }
        for (len, group) in by_length {
            let texts = self.continue_group(len, &group, max_new, how)?;
            for ((index, _), text) in group.iter().zip(texts) {
                continued[*index].text = text;
            }
        }
        Ok(continued)
    }

    /// The texts of `group`, prompts of `len` ids each (`<s>` included), as one batch.
    fn continue_group(
        &self,
        len: usize,
        group: &[(usize, Vec<u32>)],
        max_new: usize,
        how: Continuation,
    ) -> anyhow::Result<Vec<String>> {
        // A step feeds position len - 1 + g for the g-th new token: all within the table.
        let room = (self.model.max_positions() + 1).saturating_sub(len);
        let max_steps = vec![max_new.min(room); group.len()];
        let flat: Vec<u32> = group.iter().flat_map(|(_, ids)| ids.clone()).collect();
        let prefix = Tensor::from_vec(flat, (group.len(), len), self.device)?;
        let input = DecodeInput {
            prompt: Prompt {
                source: None,
                prefix: &prefix,
            },
            max_steps: &max_steps,
            end: Some(EOS_ID),
            never: &NEVER_GENERATED,
            end_at_limit: false,
            still_wanted: &always_wanted,
        };
        let continuations = match how {
            Continuation::Sample(sampling) => sample(self.model, &input, sampling)?,
            Continuation::Beam(settings) => beam_search(self.model, &input, settings)?
                .into_iter()
                .map(|ranked| ranked.into_iter().next().map(|h| h.ids).unwrap_or_default())
                .collect(),
        };
        group
            .iter()
            .zip(continuations)
            .map(|((_, prompt), new)| {
                let ids: Vec<u32> = prompt.iter().copied().chain(new).collect();
                self.tokenizer.decode(&ids)
            })
            .collect()
    }
}
