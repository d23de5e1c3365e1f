//! Both LayerNorms, the reference's and torch's: on the CPU in f32 one fused node with its own
//! backward pass ([`super::layer_norm_fused`]), elsewhere composed from differentiable candle
//! ops (candle's own fused layer norm has no backward pass).

use candle_core::{DType, Result, Tensor, D};

pub use super::layer_norm_fused::NormKind;
use super::linear::broadcast_rows;
use super::{fused_runs, layer_norm_fused};

/// `gain * normalised(xs) + bias` over the last dimension of `xs` `(..., size)`; `gain` and
/// `bias` are `(size,)`; size at least 2 (an unbiased std needs two).
pub fn layer_norm(xs: &Tensor, gain: &Tensor, bias: &Tensor, kind: NormKind) -> Result<Tensor> {
    let size = xs.dim(D::Minus1)?;
    if size < 2 {
        candle_core::bail!("LayerNorm needs at least 2 features, got {size}")
    }
    if fused_runs(&[xs, gain, bias]) {
        return layer_norm_fused::layer_norm(xs, gain, bias, kind);
    }
    #[cfg(feature = "cuda")]
    if super::cuda_fused_runs(&[xs, gain, bias]) {
        return super::cuda::layer_norm::layer_norm(xs, gain, bias, kind);
    }
    normalize_rows(xs, gain, bias, |centered| match kind {
        NormKind::Annotated { eps } => {
            let variance = (centered.sqr()?.sum_keepdim(D::Minus1)? / (size - 1) as f64)?;
            variance.sqrt()? + f64::from(eps)
        }
        NormKind::Torch { eps } => {
            (centered.sqr()?.mean_keepdim(D::Minus1)? + f64::from(eps))?.sqrt()
        }
    })
}

/// `gain * (x - mean) / denominator(x - mean) + bias` over the last dimension, the part both
/// LayerNorms share. In half precision the statistics are f32 (as PyTorch's autocast does): a
/// sum of 512 squares overflows f16 and loses most of its digits in bf16. Gain and bias
/// broadcast as products with ones, for a fast backward pass (see `linear`).
fn normalize_rows(
    xs: &Tensor,
    gain: &Tensor,
    bias: &Tensor,
    denominator: impl FnOnce(&Tensor) -> Result<Tensor>,
) -> Result<Tensor> {
    let size = xs.dim(D::Minus1)?;
    let rows = xs.elem_count() / size.max(1);
    let flat = xs.reshape((rows, size))?.to_dtype(DType::F32)?;
    let centered = flat.broadcast_sub(&flat.mean_keepdim(D::Minus1)?)?;
    let normalized = centered
        .broadcast_div(&denominator(&centered)?)?
        .to_dtype(xs.dtype())?;
    let scaled = (normalized * broadcast_rows(gain, rows)?)?;
    (scaled + broadcast_rows(bias, rows)?)?.reshape(xs.shape())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::composed_only;
    use crate::kernels::test_support::assert_fused_matches_composed;
    use candle_core::{Device, Var};

    const KINDS: [NormKind; 2] = [
        NormKind::Annotated { eps: 1e-6 },
        NormKind::Torch { eps: 1e-5 },
    ];

    /// Values and the gradients of the input, gain and bias, for both LayerNorms, over more
    /// rows than one parallel task holds, with a transposed input.
    #[test]
    fn the_fused_layer_norms_match_the_composed_ones_forward_and_backward() {
        let dev = Device::Cpu;
        let size = 24;
        let rows = layer_norm_fused::rows_per_task(size) * 2 + 5;
        let x = Var::from_tensor(&Tensor::randn(0.5f32, 2., (size, rows), &dev).unwrap()).unwrap();
        let gain = Var::from_tensor(&Tensor::randn(1f32, 0.3, size, &dev).unwrap()).unwrap();
        let bias = Var::from_tensor(&Tensor::randn(0f32, 0.3, size, &dev).unwrap()).unwrap();
        for kind in KINDS {
            assert_fused_matches_composed(&[&x, &gain, &bias], 1e-5, || {
                let input = x.as_tensor().t().unwrap();
                layer_norm(&input, gain.as_tensor(), bias.as_tensor(), kind).unwrap()
            });
        }
    }

    /// The composed path by hand: mean 3, deviations -2 -1 0 3, variance 14 / 3 (unbiased) or
    /// 14 / 4 (biased).
    #[test]
    fn both_paths_divide_by_the_right_spread() {
        let dev = Device::Cpu;
        let xs = Tensor::new(&[[1f32, 2., 3., 6.]], &dev).unwrap();
        let (gain, bias) = (
            Tensor::ones(4, DType::F32, &dev).unwrap(),
            Tensor::zeros(4, DType::F32, &dev).unwrap(),
        );
        let spreads = [(14f64 / 3.).sqrt() + 1e-6, (14f64 / 4. + 1e-5).sqrt()];
        for composed in [false, true] {
            let _path = composed.then(composed_only);
            for (kind, spread) in KINDS.into_iter().zip(spreads) {
                let out = layer_norm(&xs, &gain, &bias, kind)
                    .unwrap()
                    .to_vec2::<f32>()
                    .unwrap();
                for (got, d) in out[0].iter().zip([-2f64, -1., 0., 3.]) {
                    assert!((*got as f64 - d / spread).abs() < 1e-6, "{kind:?}: {got}");
                }
            }
        }
    }

    #[test]
    fn one_feature_is_refused_by_name() {
        let xs = Tensor::ones((2, 1), DType::F32, &Device::Cpu).unwrap();
        let one = Tensor::ones(1, DType::F32, &Device::Cpu).unwrap();
        let err = layer_norm(&xs, &one, &one, KINDS[0])
            .unwrap_err()
            .to_string();
        assert!(err.contains("at least 2 features"), "{err}");
    }
}
