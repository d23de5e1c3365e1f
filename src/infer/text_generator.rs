//! Text in, text out for a model that continues a prompt (the decoder-only language model):
//! tokenizes prompts, continues them by sampling (temperature, top-k) or beam search, and
//! decodes prompt and continuation together. Prompts of one token length are continued as
//! one batch.

use std::collections::BTreeMap;

use candle_core::{Device, Tensor};

use super::beam::{beam_search, BeamSettings};
use super::sampling::{sample, Sampling};
use super::{always_wanted, DecodeInput};
use crate::data::corpus::normalize_sentence;
use crate::data::vocab::{BOS_ID, EOS_ID};
use crate::data::TextTokenizer;
use crate::model::{DecodingModel, Prompt};

/// How a continuation picks its tokens.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Continuation {
    /// One token at a time, greedy at temperature 0.
    Sample(Sampling),
    /// The best hypothesis of a beam search.
    Beam(BeamSettings),
}

/// A language model with its tokenizer, ready to continue prompts.
pub struct TextGenerator<'a> {
    pub model: &'a dyn DecodingModel,
    pub tokenizer: &'a TextTokenizer,
    pub device: &'a Device,
}

impl TextGenerator<'_> {
    /// `prompt` and its continuation, as one text; see [`Self::continue_texts`].
    pub fn continue_text(
        &self,
        prompt: &str,
        max_new: usize,
        how: Continuation,
    ) -> anyhow::Result<String> {
        let mut texts = self.continue_texts(&[prompt.to_string()], max_new, how)?;
        Ok(texts.remove(0))
    }

    /// Each prompt and its continuation, as one text (decoded together, so that a subword
    /// that finishes the prompt's last word joins it), in order. A prompt may be empty: the
    /// model then starts a line of its own. At most `max_new` new tokens, fewer where the
    /// model ends its line or the position table ends. Prompts of the same token length are
    /// decoded as one batch; each continues exactly as it would alone.
    pub fn continue_texts(
        &self,
        prompts: &[String],
        max_new: usize,
        how: Continuation,
    ) -> anyhow::Result<Vec<String>> {
        let max_positions = self.model.max_positions();
        let mut by_length: BTreeMap<usize, Vec<(usize, Vec<u32>)>> = BTreeMap::new();
        for (index, prompt) in prompts.iter().enumerate() {
            // Training examples are lines framed as <s> ... </s>, so a prompt starts after <s>.
            let mut ids = vec![BOS_ID];
            ids.extend(self.tokenizer.encode(&normalize_sentence(prompt))?.ids);
            if ids.len() >= max_positions {
                anyhow::bail!(
                    "the prompt has {} tokens, and the model reads at most {} positions; \
                     shorten the prompt",
                    ids.len() - 1,
                    max_positions - 1
                )
            }
            by_length.entry(ids.len()).or_default().push((index, ids));
        }
        let mut texts = vec![String::new(); prompts.len()];
        for (len, group) in by_length {
            // A step feeds position len - 1 + g for the g-th new token: all below the table.
            let max_steps = vec![max_new.min(max_positions + 1 - len); group.len()];
            let flat: Vec<u32> = group.iter().flat_map(|(_, ids)| ids.clone()).collect();
            let prefix = Tensor::from_vec(flat, (group.len(), len), self.device)?;
            let input = DecodeInput {
                prompt: Prompt {
                    source: None,
                    prefix: &prefix,
                },
                max_steps: &max_steps,
                end: Some(EOS_ID),
                still_wanted: &always_wanted,
            };
            let continued = match how {
                Continuation::Sample(sampling) => sample(self.model, &input, sampling)?,
                Continuation::Beam(settings) => beam_search(self.model, &input, settings)?
                    .into_iter()
                    .map(|ranked| ranked.into_iter().next().map(|h| h.ids).unwrap_or_default())
                    .collect(),
            };
            for ((index, mut ids), new) in group.into_iter().zip(continued) {
                ids.extend(new);
                texts[index] = self.tokenizer.decode(&ids)?;
            }
        }
        Ok(texts)
    }
}
