//! Scaled dot-product attention and MultiHeadedAttention (paper section 3.2, Figure 2).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

use candle_core::{Result, Tensor, D};
use candle_nn::VarBuilder;

use crate::config::ModelConfig;
use crate::kernels::attention::cached::{attend_cached, CachedKeys};
use crate::kernels::attention::scaled_dot_product;
use crate::kernels::dropout::Mode;
use crate::model::cache::{KeyValueCache, KeyValues, Lineage};
use crate::model::weights::linear::{Linear, LinearGroup};

/// h parallel attention heads over learned projections of queries, keys and values.
///
/// `linears.0..3` are the query, key, value and output projections, with biases, named as in the
/// reference's state_dict. A decoding step's self-attention reads q, k and v as one product,
/// the encoder memory k and v as one: joins the group owns.
pub struct MultiHeadedAttention {
    linears: LinearGroup,
    heads: usize,
    head_dim: usize,
    dropout: f64,
    recorder: AttentionRecorder,
}

/// Keeps the probabilities of the latest forward pass when switched on: the reference's
/// `self.attn`, opt-in so that training does not hold on to them. Atomic and locked so that
/// the model stays shareable between threads.
#[derive(Default)]
struct AttentionRecorder {
    on: AtomicBool,
    last: Mutex<Option<Tensor>>,
}

impl AttentionRecorder {
    fn keep(&self, probabilities: Option<Tensor>) {
        if let Ok(mut last) = self.last.lock() {
            *last = probabilities;
        }
    }
}

impl MultiHeadedAttention {
    pub fn new(cfg: &ModelConfig, vb: VarBuilder) -> Result<Self> {
        let d = cfg.d_model;
        let vb = vb.pp("linears");
        let linears = (0..4)
            .map(|i| Linear::with_bias(d, d, cfg.attention_bias, vb.pp(i)))
            .collect::<Result<_>>()?;
        Ok(Self {
            linears: LinearGroup::new(linears),
            heads: cfg.heads,
            head_dim: cfg.head_dim(),
            dropout: cfg.attention_dropout,
            recorder: AttentionRecorder::default(),
        })
    }

    /// Starts (or stops, dropping what was kept) keeping each forward pass's probabilities.
    pub fn record(&self, on: bool) {
        self.recorder.on.store(on, Ordering::Relaxed);
        if !on {
            self.recorder.keep(None);
        }
    }

    /// The probabilities `(batch, heads, q_len, k_len)` of the latest pass while recording.
    pub fn recorded(&self) -> Option<Tensor> {
        self.recorder.last.lock().ok()?.clone()
    }

    /// `query` `(batch, q_len, d_model)`, `key`/`value` `(batch, k_len, d_model)`, `mask`
    /// `(batch, 1 or q_len, k_len)`, the same for every head. Returns `(batch, q_len, d_model)`.
    pub fn forward(
        &self,
        query: &Tensor,
        key: &Tensor,
        value: &Tensor,
        mask: Option<&Tensor>,
        mode: Mode,
    ) -> Result<Tensor> {
        let key_values = KeyValues {
            keys: self.split_heads(&self.linears.layer(1).forward(key)?)?,
            values: self.split_heads(&self.linears.layer(2).forward(value)?)?,
        };
        self.attend(query, &key_values, mask, mode)
    }

    /// Projects the encoder memory `(batch, src_len, d_model)` into keys and values, `(batch,
    /// src_len, d_model)` each with the heads side by side, once per sentence for every
    /// decoding step's source attention ([`Self::step_memory`]).
    pub fn project_memory(&self, memory: &Tensor) -> Result<KeyValues> {
        let d_model = memory.dim(D::Minus1)?;
        let kv = self.linears.joined(1..3)?.forward(memory)?;
        Ok(KeyValues {
            keys: kv.narrow(D::Minus1, 0, d_model)?,
            values: kv.narrow(D::Minus1, d_model, d_model)?,
        })
    }

    /// Self-attention of one new position per row, `xs` `(rows, 1, d_model)`, during
    /// incremental decoding: its keys and values join `cache`, and it attends to every cached
    /// position through `lineage`, which already has this step (earlier positions never see
    /// later ones, so no mask is needed).
    pub fn step(
        &self,
        xs: &Tensor,
        cache: &mut KeyValueCache,
        lineage: &Lineage,
    ) -> Result<Tensor> {
        let (rows, d_model) = one_position(xs)?;
        let qkv = self
            .linears
            .joined(0..3)?
            .forward(&xs.reshape((rows, d_model))?)?;
        // Copied out of the product so that the cache does not hold on to the queries.
        let kv = qkv.narrow(1, d_model, 2 * d_model)?.contiguous()?;
        cache.push(KeyValues {
            keys: kv.narrow(1, 0, d_model)?,
            values: kv.narrow(1, d_model, d_model)?,
        });
        let query = qkv.narrow(1, 0, d_model)?;
        let x = attend_cached(&query, self.heads, cache.cached(lineage))?;
        self.linears
            .layer(3)
            .forward(&x)?
            .reshape((rows, 1, d_model))
    }

    /// Source attention of one new position per row, `xs` `(rows, 1, d_model)`, over the
    /// memory of each row's sentence: `memory` from [`Self::project_memory`] for every
    /// sentence, `sentence_of[r]` row `r`'s, `src_mask` `(sentences, 1, src_len)`.
    pub fn step_memory(
        &self,
        xs: &Tensor,
        memory: &KeyValues,
        sentence_of: &[u32],
        src_mask: &Tensor,
    ) -> Result<Tensor> {
        let (rows, d_model) = one_position(xs)?;
        let query = self
            .linears
            .layer(0)
            .forward(&xs.reshape((rows, d_model))?)?;
        let cached = CachedKeys::Memory {
            keys: &memory.keys,
            values: &memory.values,
            sentence_of,
            mask: src_mask,
        };
        let x = attend_cached(&query, self.heads, cached)?;
        self.linears
            .layer(3)
            .forward(&x)?
            .reshape((rows, 1, d_model))
    }

    /// Attention of `query` `(batch, q_len, d_model)` over projected keys and values.
    fn attend(
        &self,
        query: &Tensor,
        key_values: &KeyValues,
        mask: Option<&Tensor>,
        mode: Mode,
    ) -> Result<Tensor> {
        let (batch, q_len, d_model) = query.dims3()?;
        let query = self.split_heads(&self.linears.layer(0).forward(query)?)?;
        let mask = mask.map(|m| m.unsqueeze(1)).transpose()?;
        let (x, probabilities) = scaled_dot_product(
            &query,
            &key_values.keys,
            &key_values.values,
            mask.as_ref(),
            self.dropout,
            mode,
        )?;
        if self.recorder.on.load(Ordering::Relaxed) {
            self.recorder.keep(probabilities);
        }
        // "Concat" the heads back into (batch, q_len, d_model).
        let x = x.transpose(1, 2)?.reshape((batch, q_len, d_model))?;
        self.linears.layer(3).forward(&x)
    }

    /// `(batch, len, d_model)` -> `(batch, heads, len, d_k)`.
    fn split_heads(&self, xs: &Tensor) -> Result<Tensor> {
        let (batch, len, _) = xs.dims3()?;
        xs.reshape((batch, len, self.heads, self.head_dim))?
            .transpose(1, 2)?
            .contiguous()
    }
}

/// `(rows, 1, d_model)` -> `(rows, d_model)`: a decoding step adds one position per row.
fn one_position(xs: &Tensor) -> Result<(usize, usize)> {
    let (rows, new, d_model) = xs.dims3()?;
    if new != 1 {
        candle_core::bail!("a decoding step takes one new position per row, got {new}")
    }
    Ok((rows, d_model))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reordering_composes_the_lineage() {
        let mut lineage = Lineage::default();
        lineage.push_step(2);
        // Two rows become three (0, 0, 1), then the last two are kept swapped (1, 0).
        lineage.reorder(&[0, 0, 1]).unwrap();
        lineage.push_step(3);
        lineage.reorder(&[2, 1]).unwrap();
        lineage.push_step(2);
        assert_eq!(
            lineage.rows_of_steps,
            vec![vec![1, 0], vec![2, 1], vec![0, 1]]
        );
        let error = lineage.reorder(&[5]).unwrap_err().to_string();
        assert!(error.contains("reorder to [5] of 2 rows"), "{error}");
    }

    #[test]
    fn the_model_can_be_shared_between_threads() {
        fn shareable<T: Send + Sync>() {}
        shareable::<crate::model::Model>();
    }
}
