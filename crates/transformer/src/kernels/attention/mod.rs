//! Scaled dot-product attention (paper section 3.2.1): in training on the CPU in f32 one fused
//! node with its own backward pass (`fused`), elsewhere composed from
//! candle ops (the attention pictures, a GPU, half precision). A decoding step's attention is
//! [`cached`].

use candle_core::{DType, Result, Tensor, D};

pub mod cached;
mod fused;
mod step;

use super::dropout::{dropout, Mode};
use super::fused_runs;

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
        let out = fused::attention(query, key, value, (mask, MASKED_SCORE), factors)?;
        return Ok((out, None));
    }
    let d_k = query.dim(D::Minus1)?;
    // Dividing by sqrt(d_k) keeps the dot products from pushing softmax into flat regions.
    // In half precision the scores, the mask's -1e9 and the softmax are f32 (as PyTorch's
    // autocast does): exp and the row sums overflow or lose the small probabilities otherwise.
    let compute_dtype = query.dtype();
    // A bf16 autocast scope holds on the composed path too, for products being trained.
    let round = |t: &Tensor| match tracked {
        true => super::bf16::rounded_in_scope(t),
        false => Ok(t.clone()),
    };
    let scores =
        (round(query)?.matmul(&round(key)?.t()?)? / (d_k as f64).sqrt())?.to_dtype(DType::F32)?;
    #[cfg(feature = "cuda")]
    if let (Mode::Train(_), true) = (
        mode,
        tracked && super::cuda_fused_runs(&[query, key, value]),
    ) {
        if mask.is_none_or(|mask| mask.dtype() == DType::U8) {
            // The mask, softmax and dropout in one launch (its backward in one more).
            let dropped = super::cuda::attention::probabilities(&scores, mask, dropout_p)?;
            return Ok((round(&dropped)?.matmul(&round(value)?)?, None));
        }
    }
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
    Ok((
        round(&dropped)?.matmul(&round(value)?)?,
        Some(probabilities),
    ))
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
        // Lower-triangular: position i sees keys 0..=i.
        let allowed: Vec<u8> = (0..len)
            .flat_map(|i| (0..len).map(move |j| u8::from(j <= i)))
            .collect();
        let causal = Tensor::from_vec(allowed, (1, 1, len, len), &dev).unwrap();
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

    /// In a bf16 scope both paths round the products' operands: the fused one against the
    /// composed one within bf16's rounding, forward and backward, on every engine.
    #[test]
    fn in_a_bf16_scope_the_fused_attention_matches_the_composed_one_within_bf16_rounding() {
        use crate::kernels::bf16::{autocast, engine, Engine};
        let dev = Device::Cpu;
        let (batch, heads, q_len, k_len, d_k) = (2, 3, 7, 9, 5);
        let var = |len: usize| {
            let t = Tensor::randn(0f32, 1., (batch, heads, len, d_k), &dev).unwrap();
            Var::from_tensor(&t).unwrap()
        };
        let (qv, kv, vv) = (var(q_len), var(k_len), var(k_len));
        let allowed: Vec<u8> = (0..q_len * k_len).map(|i| u8::from(i % 4 != 3)).collect();
        let mask = Tensor::from_vec(allowed, (1, 1, q_len, k_len), &dev).unwrap();
        for scope in [engine(), Engine::Emulated] {
            let _bf16 = autocast(scope);
            for p in [0.0, 0.2] {
                assert_fused_matches_composed(&[&qv, &kv, &vv], 3e-2, || {
                    let rng = DropoutRng::new(4);
                    let (q, k, v) = (qv.as_tensor(), kv.as_tensor(), vv.as_tensor());
                    scaled_dot_product(q, k, v, Some(&mask), p, Mode::Train(&rng))
                        .unwrap()
                        .0
                });
            }
        }
    }

    /// 1 + 2^-10 is 1 in bf16: one key, so that the output is V itself, rounded in a scope
    /// (on both paths) and exact outside one.
    #[test]
    fn a_bf16_scope_rounds_the_products_operands_and_only_inside_it() {
        use crate::kernels::bf16::{autocast, engine};
        let dev = Device::Cpu;
        let exact = 1.0f32 + 1.0 / 1024.0;
        let one = |x: f32| Var::from_tensor(&Tensor::new(&[[[[x]]]], &dev).unwrap()).unwrap();
        let (q, k, v) = (one(0.5), one(0.25), one(exact));
        let attend = || {
            let rng = DropoutRng::new(1);
            let (q, k, v) = (q.as_tensor(), k.as_tensor(), v.as_tensor());
            let out = scaled_dot_product(q, k, v, None, 0.0, Mode::Train(&rng)).unwrap();
            out.0.flatten_all().unwrap().to_vec1::<f32>().unwrap()[0]
        };
        assert_eq!(attend(), exact);
        let _bf16 = autocast(engine());
        assert_eq!(attend(), 1.0, "fused");
        let _composed = crate::kernels::composed_only();
        assert_eq!(attend(), 1.0, "composed");
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
