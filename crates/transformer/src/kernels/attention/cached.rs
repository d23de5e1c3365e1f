//! A decoding step's attention (paper section 3.2.1, one new query per row): over what earlier
//! steps left in the self-attention cache, or over the encoder memory. On the CPU in f32
//! `step.rs` reads the cache in place; elsewhere the cache is gathered into
//! one tensor and attended as in training ([`super::attention::scaled_dot_product`]).

use std::ops::Deref;

use candle_core::{DType, Layout, Result, Storage, Tensor};

use super::scaled_dot_product;
use super::step::{self, Matrix, Visible};
use crate::kernels::dropout::Mode;
use crate::kernels::fused_runs;

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
        CachedKeys::Steps { lineage, keys, .. } => visible_steps(rows, keys.len(), lineage)?,
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
    let out = step::attend(queries[0], heads, &keys, &values, &visible);
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
fn visible_steps(rows: usize, steps: usize, lineage: &[Vec<u32>]) -> Result<Visible> {
    if lineage.len() != steps {
        candle_core::bail!(
            "attention cache: {steps} cached steps but a lineage of {}",
            lineage.len()
        )
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::Device;

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
}
