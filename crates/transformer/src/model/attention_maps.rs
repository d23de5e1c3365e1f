//! What each head attends to: the probabilities of every encoder self-attention, decoder
//! self-attention and encoder-decoder attention for one sentence pair under teacher forcing
//! (The Annotated Transformer's "Attention Visualization", for the whole model).

use candle_core::{Result, Tensor};

use crate::model::attention::MultiHeadedAttention;

/// Attention probabilities per layer, each `(heads, queries, keys)`.
pub struct AttentionMaps {
    /// `(heads, src_len, src_len)` per encoder layer.
    pub encoder: Vec<Tensor>,
    /// `(heads, tgt_len, tgt_len)` per decoder layer.
    pub decoder_self: Vec<Tensor>,
    /// `(heads, tgt_len, src_len)` per decoder layer.
    pub cross: Vec<Tensor>,
}

/// The attention modules whose probabilities make the maps, by kind, in layer order.
pub struct AttentionLayers<'a> {
    pub encoder: Vec<&'a MultiHeadedAttention>,
    pub decoder_self: Vec<&'a MultiHeadedAttention>,
    pub cross: Vec<&'a MultiHeadedAttention>,
}

/// Runs `pass` (one sentence pair, teacher-forced, dropout off) with `layers` recording, and
/// returns every one's probabilities; recording is switched off again whatever happens.
pub fn attention_maps(
    layers: AttentionLayers,
    pass: impl FnOnce() -> Result<Tensor>,
) -> Result<AttentionMaps> {
    let all = || {
        layers
            .encoder
            .iter()
            .chain(&layers.decoder_self)
            .chain(&layers.cross)
    };
    all().for_each(|a| a.record(true));
    let outcome = pass();
    let take = |modules: &[&MultiHeadedAttention]| -> Result<Vec<Tensor>> {
        modules
            .iter()
            .map(|a| match a.recorded() {
                Some(p) => p.squeeze(0),
                None => candle_core::bail!("an attention layer recorded nothing"),
            })
            .collect()
    };
    let maps = outcome.and_then(|_| {
        Ok(AttentionMaps {
            encoder: take(&layers.encoder)?,
            decoder_self: take(&layers.decoder_self)?,
            cross: take(&layers.cross)?,
        })
    });
    all().for_each(|a| a.record(false));
    maps
}
