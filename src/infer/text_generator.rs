//! Text in, text out for the decoder-only language model: tokenizes a prompt, continues it
//! with `decoder_only::sample` (KV cache, temperature, top-k) and decodes the new tokens.

use candle_core::Device;

use crate::data::corpus::normalize_sentence;
use crate::data::vocab::{BOS_ID, EOS_ID};
use crate::data::TextTokenizer;
use crate::infer::sampling::{sample, Sampling};
use crate::model::decoder_only::DecoderOnly;

/// A language model with its tokenizer, ready to continue prompts.
pub struct TextGenerator<'a> {
    pub model: &'a DecoderOnly,
    pub tokenizer: &'a TextTokenizer,
    /// Rows of the position table: prompt and continuation together stay below it.
    pub max_positions: usize,
    pub device: &'a Device,
}

impl TextGenerator<'_> {
    /// `prompt` and its continuation, as one text (decoded together, so that a subword that
    /// finishes the prompt's last word joins it). The prompt may be empty: the model then
    /// starts a line of its own. At most `max_new` new tokens, fewer where the model ends
    /// its line.
    pub fn continue_text(
        &self,
        prompt: &str,
        max_new: usize,
        sampling: Sampling,
    ) -> anyhow::Result<String> {
        // Training examples are lines framed as <s> ... </s>, so a prompt starts after <s>.
        let mut ids = vec![BOS_ID];
        ids.extend(self.tokenizer.encode(&normalize_sentence(prompt))?.ids);
        if ids.len() >= self.max_positions {
            anyhow::bail!(
                "the prompt has {} tokens, and the model reads at most {} positions; \
                 shorten the prompt",
                ids.len() - 1,
                self.max_positions - 1
            )
        }
        let new = sample(
            self.model,
            &ids,
            max_new,
            Some(EOS_ID),
            self.max_positions,
            sampling,
            self.device,
        )?;
        ids.extend(new);
        self.tokenizer.decode(&ids)
    }
}
