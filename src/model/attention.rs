//! Scaled dot-product attention and MultiHeadedAttention (paper section 3.2, Figure 2).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

use candle_core::{DType, Result, Tensor, D};
use candle_nn::VarBuilder;

use super::linear::Linear;

use super::attention_op::fused_attention;
use super::dropout::{dropout, Mode};
use crate::config::ModelConfig;

/// Score given to masked positions: -1e9 as in the reference, not -inf, so a fully masked row
/// becomes uniform instead of NaN.
pub(super) const MASKED_SCORE: f32 = -1e9;

/// Attention(Q, K, V) = softmax(Q K^T / sqrt(d_k)) V, with masked scores set to -1e9.
///
/// `query` is `(batch, heads, q_len, d_k)`, `key` and `value` are `(batch, heads, k_len, d_k)`,
/// `mask` broadcasts to `(batch, heads, q_len, k_len)` with 0 where attention is not allowed.
/// Returns the attended values `(batch, heads, q_len, d_k)` and, except on the fused training
/// path (which never materialises them outside its scratch), the probabilities.
pub fn attention(
    query: &Tensor,
    key: &Tensor,
    value: &Tensor,
    mask: Option<&Tensor>,
    dropout_p: f64,
    mode: Mode,
) -> Result<(Tensor, Option<Tensor>)> {
    if fused_applies(query, key, value, mode) {
        let factors = match mode {
            Mode::Train(rng) if dropout_p > 0.0 => {
                let (batch, heads, q_len, _) = query.dims4()?;
                // The same draws, in the same order, as the composed path's dropout mask.
                Some(rng.factors(batch * heads * q_len * key.dim(2)?, dropout_p))
            }
            _ => None,
        };
        let out = fused_attention(query, key, value, mask, factors)?;
        return Ok((out, None));
    }
    let d_k = query.dim(D::Minus1)?;
    // Dividing by sqrt(d_k) keeps the dot products from pushing softmax into flat regions.
    // In half precision the scores, the mask's -1e9 and the softmax are f32 (as PyTorch's
    // autocast does): exp and the row sums overflow or lose the small probabilities otherwise.
    let compute_dtype = query.dtype();
    let scores = (query.matmul(&key.t()?)? / (d_k as f64).sqrt())?.to_dtype(DType::F32)?;
    let scores = match mask {
        Some(mask) => masked_fill(&scores, mask, MASKED_SCORE)?,
        None => scores,
    };
    // candle's fused softmax has no backward pass: only where no gradient will be asked for.
    let probabilities = if scores.track_op() {
        softmax_last_dim(&scores)?
    } else {
        candle_nn::ops::softmax_last_dim(&scores)?
    };
    let dropped = dropout(&probabilities, dropout_p, mode)?.to_dtype(compute_dtype)?;
    Ok((dropped.matmul(value)?, Some(probabilities)))
}

/// Whether the fused CPU op computes this attention: a training pass (gradients tracked), f32
/// on the CPU. Evaluation keeps the composed ops (candle's fused softmax where nothing tracks
/// gradients), whose probabilities the attention pictures record.
fn fused_applies(query: &Tensor, key: &Tensor, value: &Tensor, mode: Mode) -> bool {
    let tensors = [query, key, value];
    matches!(mode, Mode::Train(_))
        && tensors
            .iter()
            .all(|t| t.device().is_cpu() && t.dtype() == DType::F32)
        && tensors.iter().any(|t| t.track_op())
}

/// Softmax over the last dimension from differentiable ops (candle's fused
/// `softmax_last_dim` has no backward pass). The row maximum is subtracted for stability and
/// detached: softmax does not depend on it, so its gradient is zero and need not be computed.
fn softmax_last_dim(xs: &Tensor) -> Result<Tensor> {
    let max = xs.max_keepdim(D::Minus1)?.detach();
    let exp = xs.broadcast_sub(&max)?.exp()?;
    exp.broadcast_div(&exp.sum_keepdim(D::Minus1)?)
}

/// `torch.masked_fill(mask == 0, value)`: where `mask` is 0, take `value`; `mask` broadcasts.
fn masked_fill(scores: &Tensor, mask: &Tensor, value: f32) -> Result<Tensor> {
    let mask = mask.broadcast_as(scores.shape())?;
    let fill = Tensor::new(value, scores.device())?
        .to_dtype(scores.dtype())?
        .broadcast_as(scores.shape())?;
    mask.where_cond(scores, &fill)
}

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
    /// Room for this many positions before the first doubling.
    const INITIAL_CAPACITY: usize = 64;

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

    /// Keeps the rows `indices` of the batch, in that order, in new buffers.
    pub fn select(&self, indices: &Tensor) -> Result<Self> {
        Ok(Self {
            buffers: self.buffers.select(indices)?,
            len: self.len,
        })
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
        let (x, probabilities) = attention(
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
    use candle_core::{DType, Device, IndexOp};

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

    #[test]
    fn masked_positions_get_zero_attention() {
        let dev = Device::Cpu;
        let q = Tensor::randn(0f32, 1., (1, 2, 3, 4), &dev).unwrap();
        let k = Tensor::randn(0f32, 1., (1, 2, 5, 4), &dev).unwrap();
        let v = Tensor::randn(0f32, 1., (1, 2, 5, 4), &dev).unwrap();
        // Keys 3 and 4 are padding.
        let mask = Tensor::new(&[[[[1u8, 1, 1, 0, 0]]]], &dev).unwrap();
        let (_, p) = attention(&q, &k, &v, Some(&mask), 0.0, Mode::Eval).unwrap();
        let p = p.unwrap();
        let p = p.squeeze(0).unwrap().to_vec3::<f32>().unwrap();
        for head in &p {
            for row in head {
                assert_eq!(row[3], 0.0);
                assert_eq!(row[4], 0.0);
                assert!((row.iter().sum::<f32>() - 1.0).abs() < 1e-6);
            }
        }
    }

    #[test]
    fn a_fully_masked_row_is_uniform_not_nan() {
        let dev = Device::Cpu;
        let q = Tensor::ones((1, 1, 1, 2), DType::F32, &dev).unwrap();
        let k = Tensor::randn(0f32, 1., (1, 1, 4, 2), &dev).unwrap();
        let mask = Tensor::zeros((1, 1, 1, 4), DType::U8, &dev).unwrap();
        let (_, p) = attention(&q, &k, &k, Some(&mask), 0.0, Mode::Eval).unwrap();
        let p = p.unwrap();
        let p = p.flatten_all().unwrap().to_vec1::<f32>().unwrap();
        assert!(p.iter().all(|&x| (x - 0.25).abs() < 1e-6), "{p:?}");
    }
}
