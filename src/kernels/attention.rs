//! Scaled dot-product attention (paper section 3.2.1): in training on the CPU in f32 one fused
//! node with its own backward pass ([`super::attention_fused`]), elsewhere composed from
//! candle ops (the attention pictures, a GPU, half precision). A decoding step's attention,
//! one new query per row over what earlier steps and the encoder left, is [`attend_cached`]:
//! on the CPU in f32 [`super::attention_step`], which reads the cache in place.

use std::ops::Deref;

use candle_core::{DType, Layout, Result, Storage, Tensor, D};

use super::attention_step::{self, Matrix, Visible};
use super::dropout::{dropout, Mode};
use super::{attention_fused, fused_runs};

/// Score given to masked positions: -1e9 as in the reference, not -inf, so a fully masked row
/// becomes uniform instead of NaN.
const MASKED_SCORE: f32 = -1e9;

/// Attention(Q, K, V) = softmax(Q K^T / sqrt(d_k)) V, with masked scores set to -1e9 and
/// dropout on the probabilities in training.
///
/// `query` is `(batch, heads, q_len, d_k)`, `key` and `value` are `(batch, heads, k_len, d_k)`,
/// `mask` broadcasts to `(batch, heads, q_len, k_len)` with 0 where attention is not allowed.
/// Returns the attended values `(batch, heads, q_len, d_k)` and, except on the fused training
/// path (which never materialises them outside its scratch), the probabilities.
pub fn scaled_dot_product(
    query: &Tensor,
    key: &Tensor,
    value: &Tensor,
    mask: Option<&Tensor>,
    dropout_p: f64,
    mode: Mode,
) -> Result<(Tensor, Option<Tensor>)> {
    let tracked = [query, key, value].iter().any(|t| t.track_op());
    if let (Mode::Train(rng), true) = (mode, tracked && fused_runs(&[query, key, value])) {
        let factors = (dropout_p > 0.0)
            .then(|| {
                let (batch, heads, q_len, _) = query.dims4()?;
                // The same draws, in the same order, as the composed path's dropout mask.
                Ok::<_, candle_core::Error>(
                    rng.factors(batch * heads * q_len * key.dim(2)?, dropout_p),
                )
            })
            .transpose()?;
        let out = attention_fused::attention(query, key, value, (mask, MASKED_SCORE), factors)?;
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

/// Where one decoding step's queries find their keys and values, each `d_model` wide with the
/// heads side by side (as the projections produce them; the heads are split where they are
/// read).
pub enum CachedKeys<'a> {
    /// Self-attention over every step so far: step `p`'s keys and values `(rows_p, d_model)`,
    /// and `lineage[p][r]`, the row of step `p` that query row `r` continues. Beam search
    /// reorders this table, not the cache.
    Steps {
        keys: &'a [Tensor],
        values: &'a [Tensor],
        lineage: &'a [Vec<u32>],
    },
    /// Source attention: the encoder memory's keys and values `(sentences, src_len, d_model)`,
    /// kept once per sentence however many beams it has; `sentence_of[r]` is query row `r`'s,
    /// `mask` `(sentences, 1, src_len)` its padding mask.
    Memory {
        keys: &'a Tensor,
        values: &'a Tensor,
        sentence_of: &'a [u32],
        mask: &'a Tensor,
    },
}

/// Attention of one new query per row, `query` `(rows, d_model)`, split into `heads` heads,
/// over what `cached` holds; no dropout (decoding). Returns `(rows, d_model)`, the heads
/// concatenated.
pub fn attend_cached(query: &Tensor, heads: usize, cached: CachedKeys) -> Result<Tensor> {
    let (keys, values): (Vec<&Tensor>, Vec<&Tensor>) = match &cached {
        CachedKeys::Steps { keys, values, .. } => (keys.iter().collect(), values.iter().collect()),
        CachedKeys::Memory { keys, values, .. } => (vec![*keys], vec![*values]),
    };
    let mut all = vec![query];
    all.extend(keys.iter().chain(&values));
    if fused_runs(&all) {
        if let Some(out) = attend_cached_fused(query, heads, &keys, &values, &cached)? {
            return Ok(out);
        }
    }
    attend_cached_composed(query, heads, &cached)
}

/// The fused path, or None where a tensor's layout is not one it reads in place.
fn attend_cached_fused(
    query: &Tensor,
    heads: usize,
    keys: &[&Tensor],
    values: &[&Tensor],
    cached: &CachedKeys,
) -> Result<Option<Tensor>> {
    let rows = query.dim(0)?;
    let visible = match cached {
        CachedKeys::Steps { lineage, .. } => visible_steps(rows, lineage)?,
        CachedKeys::Memory {
            keys,
            sentence_of,
            mask,
            ..
        } => visible_memory(keys.dim(1)?, sentence_of, mask)?,
    };
    let query_guard = [query.storage_and_layout()];
    let key_guards: Vec<_> = keys.iter().map(|t| t.storage_and_layout()).collect();
    let value_guards: Vec<_> = values.iter().map(|t| t.storage_and_layout()).collect();
    let (Some(queries), Some(keys), Some(values)) = (
        matrices(&query_guard)?,
        matrices(&key_guards)?,
        matrices(&value_guards)?,
    ) else {
        return Ok(None);
    };
    let out = attention_step::attend(queries[0], heads, &keys, &values, &visible);
    Ok(Some(Tensor::from_vec(out, query.shape(), query.device())?))
}

/// Every tensor of `guards` as a matrix, or None if one is not readable in place.
fn matrices<'a, G: Deref<Target = Storage>>(
    guards: &'a [(G, &Layout)],
) -> Result<Option<Vec<Matrix<'a>>>> {
    guards
        .iter()
        .map(|(storage, layout)| matrix(storage, layout))
        .collect()
}

/// A tensor of rows `d_model` wide as the fused step reads it: `(rows, d)` or `(n, len, d)`
/// whose rows are evenly spaced, each contiguous; None for any other layout.
fn matrix<'a>(storage: &'a Storage, layout: &Layout) -> Result<Option<Matrix<'a>>> {
    let Storage::Cpu(cpu) = storage else {
        return Ok(None);
    };
    let (dims, strides) = (layout.dims(), layout.stride());
    let evenly_spaced = match dims.len() {
        2 => true,
        3 => dims[0] <= 1 || strides[0] == dims[1] * strides[1],
        _ => false,
    };
    let width = dims.last().copied().unwrap_or(0);
    if !evenly_spaced || (width > 1 && strides[dims.len() - 1] != 1) {
        return Ok(None);
    }
    let stride = strides[dims.len() - 2];
    Ok(Some(Matrix {
        data: &cpu.as_slice::<f32>()?[layout.start_offset()..],
        stride,
        width,
    }))
}

/// Row `r` sees step `p`'s row `lineage[p][r]`, for every step so far.
fn visible_steps(rows: usize, lineage: &[Vec<u32>]) -> Result<Visible> {
    if let Some(steps) = lineage
        .iter()
        .find(|rows_of_step| rows_of_step.len() != rows)
    {
        candle_core::bail!(
            "attention cache: {} query rows but a step's lineage has {}",
            rows,
            steps.len()
        )
    }
    let mut seen = Vec::with_capacity(rows * lineage.len());
    let mut starts = Vec::with_capacity(rows + 1);
    starts.push(0);
    for r in 0..rows {
        seen.extend(lineage.iter().enumerate().map(|(p, of)| (p as u32, of[r])));
        starts.push(seen.len());
    }
    Ok(Visible {
        seen,
        starts,
        uniform: Vec::new(),
    })
}

/// Row `r` sees the unmasked positions of sentence `sentence_of[r]`'s memory, rows
/// `sentence * src_len + j` of the `(sentences * src_len, d)` matrix.
fn visible_memory(src_len: usize, sentence_of: &[u32], mask: &Tensor) -> Result<Visible> {
    let allowed = mask.to_dtype(DType::U8)?.flatten_all()?.to_vec1::<u8>()?;
    let rows = sentence_of.len();
    let mut seen = Vec::with_capacity(rows * src_len);
    let mut starts = Vec::with_capacity(rows + 1);
    let mut uniform = Vec::with_capacity(rows);
    starts.push(0);
    for &sentence in sentence_of {
        let first = sentence as usize * src_len;
        let Some(mask_row) = allowed.get(first..first + src_len) else {
            candle_core::bail!("source attention: no mask row for sentence {sentence}")
        };
        let before = seen.len();
        let at = |j: usize| (0, (first + j) as u32);
        seen.extend((0..src_len).filter(|&j| mask_row[j] != 0).map(at));
        let nothing_allowed = seen.len() == before;
        if nothing_allowed {
            seen.extend((0..src_len).map(at));
        }
        uniform.push(nothing_allowed);
        starts.push(seen.len());
    }
    Ok(Visible {
        seen,
        starts,
        uniform,
    })
}

/// The composed path: the cache gathered into `(rows, heads, len, d_k)` and attended as in
/// training.
fn attend_cached_composed(query: &Tensor, heads: usize, cached: &CachedKeys) -> Result<Tensor> {
    let (rows, d_model) = query.dims2()?;
    let split = |xs: Tensor| -> Result<Tensor> {
        let len = xs.dim(1)?;
        xs.reshape((rows, len, heads, d_model / heads))?
            .transpose(1, 2)?
            .contiguous()
    };
    let device = query.device();
    let (keys, values, mask) = match cached {
        CachedKeys::Steps {
            keys,
            values,
            lineage,
        } => {
            let gather = |tensors: &[Tensor]| -> Result<Tensor> {
                let rows_of_steps = tensors
                    .iter()
                    .zip(lineage.iter())
                    .map(|(t, of)| {
                        t.contiguous()?
                            .index_select(&Tensor::new(of.as_slice(), device)?, 0)
                    })
                    .collect::<Result<Vec<_>>>()?;
                Tensor::stack(&rows_of_steps, 1)
            };
            (split(gather(keys)?)?, split(gather(values)?)?, None)
        }
        CachedKeys::Memory {
            keys,
            values,
            sentence_of,
            mask,
        } => {
            let sentences = Tensor::new(*sentence_of, device)?;
            let gather = |t: &Tensor| t.contiguous()?.index_select(&sentences, 0);
            let mask = mask.index_select(&sentences, 0)?.unsqueeze(1)?;
            (split(gather(keys)?)?, split(gather(values)?)?, Some(mask))
        }
    };
    let query = query
        .reshape((rows, 1, heads, d_model / heads))?
        .transpose(1, 2)?;
    let (out, _) = scaled_dot_product(&query, &keys, &values, mask.as_ref(), 0.0, Mode::Eval)?;
    out.transpose(1, 2)?.reshape((rows, d_model))
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::dropout::DropoutRng;
    use crate::kernels::test_support::assert_fused_matches_composed;
    use candle_core::{Device, Var};

    /// Values and the gradients of Q, K and V against the composed path, for padding masks
    /// (a fully masked row included), a causal mask, and dropout from one seed on both paths.
    #[test]
    fn the_fused_attention_matches_the_composed_one_forward_and_backward() {
        let dev = Device::Cpu;
        let (batch, heads, len, d_k) = (2, 3, 5, 4);
        let var = |spread: f64| {
            let t = Tensor::randn(0f32, spread as f32, (batch, len, heads, d_k), &dev).unwrap();
            Var::from_tensor(&t).unwrap()
        };
        let (qv, kv, vv) = (var(1.0), var(1.5), var(2.0));
        // Row 0 may see keys 0-2, row 1 nothing at all (uniform, as in the reference).
        let padding = Tensor::from_vec(
            vec![1u8, 1, 1, 0, 0, 0, 0, 0, 0, 0],
            (batch, 1, 1, len),
            &dev,
        )
        .unwrap();
        let causal = crate::model::masks::subsequent_mask(len, &dev)
            .unwrap()
            .unsqueeze(0)
            .unwrap();
        let cases = [
            (None, 0.0),
            (Some(&padding), 0.0),
            (Some(&causal), 0.1),
            (Some(&padding), 0.3),
        ];
        for (mask, p) in cases {
            assert_fused_matches_composed(&[&qv, &kv, &vv], 2e-5, || {
                let rng = DropoutRng::new(9);
                // Split heads as the model does: a transposed view, made contiguous.
                let split = |v: &Var| v.as_tensor().transpose(1, 2).unwrap().contiguous().unwrap();
                let (q, k, v) = (split(&qv), split(&kv), split(&vv));
                scaled_dot_product(&q, &k, &v, mask, p, Mode::Train(&rng))
                    .unwrap()
                    .0
            });
        }
    }

    /// A decoding step's attention over a reordered self-attention cache (strided views of
    /// a joint key/value product, as the model keeps them) and over a padded memory with a
    /// fully masked sentence: the fused step against the composed gather-then-attend.
    #[test]
    fn the_fused_step_attention_matches_the_composed_one() {
        let dev = Device::Cpu;
        let (heads, d_model) = (2, 8);
        let rows_per_step = [2, 3, 3];
        let kv: Vec<Tensor> = rows_per_step
            .iter()
            .map(|&rows| Tensor::randn(0f32, 1., (rows, 2 * d_model), &dev).unwrap())
            .collect();
        let keys: Vec<Tensor> = kv
            .iter()
            .map(|t| t.narrow(1, 0, d_model).unwrap())
            .collect();
        let values: Vec<Tensor> = kv
            .iter()
            .map(|t| t.narrow(1, d_model, d_model).unwrap())
            .collect();
        let lineage = vec![vec![1, 0, 0], vec![2, 0, 1], vec![0, 1, 2]];
        let query = Tensor::randn(0f32, 1., (3, d_model), &dev).unwrap();
        let memory = Tensor::randn(0f32, 1., (2, 4, 2 * d_model), &dev).unwrap();
        let mask = Tensor::new(&[[[1u8, 1, 0, 0]], [[0u8, 0, 0, 0]]], &dev).unwrap();
        let sentence_of = [1u32, 0, 0];
        let (memory_keys, memory_values) = (
            memory.narrow(2, 0, d_model).unwrap(),
            memory.narrow(2, d_model, d_model).unwrap(),
        );
        let steps = || CachedKeys::Steps {
            keys: &keys,
            values: &values,
            lineage: &lineage,
        };
        let memory = || CachedKeys::Memory {
            keys: &memory_keys,
            values: &memory_values,
            sentence_of: &sentence_of,
            mask: &mask,
        };
        for self_attention in [true, false] {
            let cached = || if self_attention { steps() } else { memory() };
            let fused = attend_cached(&query, heads, cached()).unwrap();
            let composed = {
                let _composed = crate::kernels::composed_only();
                attend_cached(&query, heads, cached()).unwrap()
            };
            assert_eq!(fused.dims(), &[3, d_model]);
            let difference = crate::kernels::test_support::largest_difference(&fused, &composed);
            assert!(difference < 1e-5, "{difference}");
        }
    }

    #[test]
    fn masked_positions_get_zero_attention() {
        let dev = Device::Cpu;
        let q = Tensor::randn(0f32, 1., (1, 2, 3, 4), &dev).unwrap();
        let k = Tensor::randn(0f32, 1., (1, 2, 5, 4), &dev).unwrap();
        let v = Tensor::randn(0f32, 1., (1, 2, 5, 4), &dev).unwrap();
        // Keys 3 and 4 are padding.
        let mask = Tensor::new(&[[[[1u8, 1, 1, 0, 0]]]], &dev).unwrap();
        let (_, p) = scaled_dot_product(&q, &k, &v, Some(&mask), 0.0, Mode::Eval).unwrap();
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
        let (_, p) = scaled_dot_product(&q, &k, &k, Some(&mask), 0.0, Mode::Eval).unwrap();
        let p = p.unwrap();
        let p = p.flatten_all().unwrap().to_vec1::<f32>().unwrap();
        assert!(p.iter().all(|&x| (x - 0.25).abs() < 1e-6), "{p:?}");
    }
}
