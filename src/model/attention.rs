//! Scaled dot-product attention and MultiHeadedAttention (paper section 3.2, Figure 2).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

use candle_core::{Result, Tensor};
use candle_nn::VarBuilder;

use super::linear::Linear;
use crate::config::ModelConfig;
use crate::kernels::attention::scaled_dot_product;
use crate::kernels::dropout::Mode;

/// Keys and values split into heads, `(batch, heads, len, d_k)` each.
#[derive(Debug, Clone)]
pub struct KeyValues {
    pub keys: Tensor,
    pub values: Tensor,
}

impl KeyValues {
    /// Keeps the rows `indices` of the batch, in that order (beam search reorders beams).
    pub fn select(&self, indices: &Tensor) -> Result<Self> {
        Ok(Self {
            keys: self.keys.index_select(indices, 0)?,
            values: self.values.index_select(indices, 0)?,
        })
    }
}

/// Self-attention keys and values of the positions decoded so far, kept in buffers with room
/// to spare: a new position is written in place, and only when the room runs out are the
/// buffers copied into ones twice as long (concatenating at every step allocated a slightly
/// larger cache each time, which the allocator could not reuse).
#[derive(Debug)]
pub struct KeyValueCache {
    /// `(batch, heads, capacity, d_k)` each; positions `len..` are unused.
    buffers: KeyValues,
    len: usize,
}

impl KeyValueCache {
    /// Room for this many positions before the first doubling: small, because beam search
    /// gathers the whole room of every layer at every step.
    const INITIAL_CAPACITY: usize = 16;

    /// A cache holding `first` `(batch, heads, len, d_k)`.
    fn from(first: &KeyValues) -> Result<Self> {
        let len = first.keys.dim(2)?;
        let mut cache = Self {
            buffers: Self::allocate(&first.keys, len.max(Self::INITIAL_CAPACITY))?,
            len: 0,
        };
        cache.append(first)?;
        Ok(cache)
    }

    fn allocate(like: &Tensor, capacity: usize) -> Result<KeyValues> {
        let (batch, heads, _, d_k) = like.dims4()?;
        let zeros = || Tensor::zeros((batch, heads, capacity, d_k), like.dtype(), like.device());
        Ok(KeyValues {
            keys: zeros()?,
            values: zeros()?,
        })
    }

    fn append(&mut self, new: &KeyValues) -> Result<()> {
        let added = new.keys.dim(2)?;
        let capacity = self.buffers.keys.dim(2)?;
        if self.len + added > capacity {
            let grown = Self::allocate(&new.keys, (2 * capacity).max(self.len + added))?;
            let used = self.view()?;
            grown.keys.slice_set(&used.keys.contiguous()?, 2, 0)?;
            grown.values.slice_set(&used.values.contiguous()?, 2, 0)?;
            self.buffers = grown;
        }
        self.buffers
            .keys
            .slice_set(&new.keys.contiguous()?, 2, self.len)?;
        self.buffers
            .values
            .slice_set(&new.values.contiguous()?, 2, self.len)?;
        self.len += added;
        Ok(())
    }

    /// The positions so far, `(batch, heads, len, d_k)` views into the buffers.
    fn view(&self) -> Result<KeyValues> {
        Ok(KeyValues {
            keys: self.buffers.keys.narrow(2, 0, self.len)?,
            values: self.buffers.values.narrow(2, 0, self.len)?,
        })
    }

    /// Keeps the rows `indices` of the batch, in that order (beam search reorders beams):
    /// one gather of the buffers, room included (at most as much again as the positions used,
    /// since the room starts small and doubles). Gathering only the used positions and
    /// writing them back into the same buffers took three copies and was no faster.
    pub fn reorder(&mut self, indices: &Tensor) -> Result<()> {
        self.buffers = self.buffers.select(indices)?;
        Ok(())
    }
}

/// h parallel attention heads over learned projections of queries, keys and values.
///
/// `linears.0..3` are the query, key, value and output projections, with biases, named as in the
/// reference's state_dict.
pub struct MultiHeadedAttention {
    linears: [Linear; 4],
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
        let linear = |i: usize| Linear::with_bias(d, d, cfg.attention_bias, vb.pp(i));
        Ok(Self {
            linears: [linear(0)?, linear(1)?, linear(2)?, linear(3)?],
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
            keys: self.split_heads(&self.linears[1].forward(key)?)?,
            values: self.split_heads(&self.linears[2].forward(value)?)?,
        };
        self.attend(query, &key_values, mask, mode)
    }

    /// Projects `xs` `(batch, len, d_model)` into keys and values, e.g. the encoder memory once
    /// per sentence for every decoding step's source attention.
    pub fn key_values(&self, xs: &Tensor) -> Result<KeyValues> {
        Ok(KeyValues {
            keys: self.split_heads(&self.linears[1].forward(xs)?)?,
            values: self.split_heads(&self.linears[2].forward(xs)?)?,
        })
    }

    /// Self-attention for new positions `xs` `(batch, new, d_model)` during incremental
    /// decoding: their keys and values are appended to `cache`, and they attend to every
    /// cached position (earlier positions never see later ones, so no mask is needed when
    /// one position is added at a time).
    pub fn forward_cached(&self, xs: &Tensor, cache: &mut Option<KeyValueCache>) -> Result<Tensor> {
        let new = self.key_values(xs)?;
        let all = match cache {
            Some(cache) => {
                cache.append(&new)?;
                cache.view()?
            }
            None => {
                *cache = Some(KeyValueCache::from(&new)?);
                new
            }
        };
        self.attend(xs, &all, None, Mode::Eval)
    }

    /// Attention of `query` `(batch, q_len, d_model)` over projected keys and values.
    pub fn attend(
        &self,
        query: &Tensor,
        key_values: &KeyValues,
        mask: Option<&Tensor>,
        mode: Mode,
    ) -> Result<Tensor> {
        let (batch, q_len, d_model) = query.dims3()?;
        let query = self.split_heads(&self.linears[0].forward(query)?)?;
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
        self.linears[3].forward(&x)
    }

    /// `(batch, len, d_model)` -> `(batch, heads, len, d_k)`.
    fn split_heads(&self, xs: &Tensor) -> Result<Tensor> {
        let (batch, len, _) = xs.dims3()?;
        xs.reshape((batch, len, self.heads, self.head_dim))?
            .transpose(1, 2)?
            .contiguous()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::{Device, IndexOp};

    #[test]
    fn the_cache_keeps_every_position_across_its_doublings() {
        let dev = Device::Cpu;
        let step = |i: usize| KeyValues {
            keys: Tensor::full(i as f32, (2, 3, 1, 4), &dev).unwrap(),
            values: Tensor::full(-(i as f32), (2, 3, 1, 4), &dev).unwrap(),
        };
        let mut cache = KeyValueCache::from(&step(0)).unwrap();
        for i in 1..150 {
            cache.append(&step(i)).unwrap();
        }
        let view = cache.view().unwrap();
        assert_eq!(view.keys.dims(), &[2, 3, 150, 4]);
        let keys = view
            .keys
            .i((1, 2, .., 0))
            .unwrap()
            .to_vec1::<f32>()
            .unwrap();
        let values = view
            .values
            .i((0, 0, .., 3))
            .unwrap()
            .to_vec1::<f32>()
            .unwrap();
        assert_eq!(keys, (0..150).map(|i| i as f32).collect::<Vec<_>>());
        assert_eq!(values, (0..150).map(|i| -(i as f32)).collect::<Vec<_>>());
    }

    #[test]
    fn the_model_can_be_shared_between_threads() {
        fn shareable<T: Send + Sync>() {}
        shareable::<crate::model::EncoderDecoder>();
    }
}
