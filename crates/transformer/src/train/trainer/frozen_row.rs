//! Embedding rows that training leaves as they are: MarianMT's `<pad>` row.

use candle_core::{Device, Tensor};

use crate::model::TrainedWeights;
use crate::tokenize::specials::SpecialIds;

/// A row of an embedding table that training leaves as it is: its gradient is zeroed before
/// clipping and the optimiser (Adam then never moves it).
pub(crate) struct FrozenRow {
    /// The variable's index in the optimiser's order.
    pub var: usize,
    /// `(vocab, 1)`: 1 everywhere but the frozen row.
    pub keep: Tensor,
}

impl FrozenRow {
    /// The `<pad>` row of every token table, when the decoder starts from `<pad>` (a MarianMT
    /// model): transformers builds those tables with `padding_idx`, so that row gets no
    /// gradient there. Our own vocabularies start from `<s>`, and `<pad>` gets none anyway.
    pub(super) fn padding_rows(
        weights: &TrainedWeights,
        specials: &SpecialIds,
        device: &Device,
    ) -> candle_core::Result<Vec<Self>> {
        if specials.decoder_start != specials.pad {
            return Ok(Vec::new());
        }
        let mut rows = Vec::new();
        for (var, name) in weights.names().iter().enumerate() {
            if !name.ends_with("_embed.0.lut.weight") {
                continue;
            }
            let vocab = weights.vars()[var].dim(0)?;
            let keep: Vec<f32> = (0..vocab)
                .map(|id| {
                    if id == specials.pad as usize {
                        0.0
                    } else {
                        1.0
                    }
                })
                .collect();
            let keep = Tensor::from_vec(keep, (vocab, 1), device)?;
            rows.push(Self { var, keep });
        }
        Ok(rows)
    }

    /// Sets the row to zero, as transformers initialises a `padding_idx` row.
    pub(super) fn clear(&self, weights: &TrainedWeights) -> candle_core::Result<()> {
        let var = &weights.vars()[self.var];
        var.set(&var.as_tensor().broadcast_mul(&self.keep)?)
    }
}
