//! The element-wise steps around each sublayer in training: the residual sum with the
//! sublayer's dropout, `x + dropout(y)` (paper section 5.4, "Residual Dropout"), and the
//! feed-forward network's `dropout(max(0, h))`.
//!
//! Composed, each is three nodes (the mask upload, the product, the sum or the ReLU), three
//! passes over the activations that allocate their outputs, and the backward pass walks them
//! again (the ReLU's is itself three). On the CPU in f32 each is one pass forward and one
//! backward here, and the mask is kept as one byte per element rather than an f32 tensor. The
//! draws are the composed path's, in the same order, so either path trains the same run.

use std::sync::Arc;

use candle_core::{CpuStorage, CustomOp1, CustomOp2, Layout, Result, Shape, Tensor};
use rayon::prelude::*;

use super::dropout::{dropout, keep_scale, Mode};
use super::simd::fma;
use super::{contiguous_input, fused_runs};

/// Elements per parallel task: large enough that scheduling costs nothing.
const CHUNK: usize = 1 << 15;

/// `xs + dropout(sublayer_out)`, both `(..., d_model)` of one shape.
pub fn residual_dropout(xs: &Tensor, sublayer_out: &Tensor, p: f64, mode: Mode) -> Result<Tensor> {
    #[cfg(feature = "cuda")]
    if matches!(mode, Mode::Train(_)) && p > 0.0 && super::cuda_fused_runs(&[xs, sublayer_out]) {
        return super::cuda::dropout::dropout_sum(xs, sublayer_out, p, false);
    }
    match mode {
        Mode::Train(rng) if p > 0.0 && fused_runs(&[xs, sublayer_out]) => {
            let mask = Mask::draw(rng.keeps(sublayer_out.elem_count(), p), p);
            xs.contiguous()?
                .apply_op2(&sublayer_out.contiguous()?, ResidualOp(mask))
        }
        Mode::Eval if !tracked(&[xs, sublayer_out]) && fused_runs(&[xs, sublayer_out]) => {
            match inference_map(&[xs, sublayer_out], sum_step)? {
                Some(sum) => Ok(sum),
                None => xs + sublayer_out,
            }
        }
        _ => xs + dropout(sublayer_out, p, mode)?,
    }
}

/// `dropout(max(0, hidden))`, the feed-forward network's activation.
pub fn relu_dropout(hidden: &Tensor, p: f64, mode: Mode) -> Result<Tensor> {
    #[cfg(feature = "cuda")]
    if matches!(mode, Mode::Train(_)) && p > 0.0 && super::cuda_fused_runs(&[hidden]) {
        return super::cuda::dropout::dropout_sum(hidden, hidden, p, true);
    }
    match mode {
        Mode::Train(rng) if p > 0.0 && fused_runs(&[hidden]) => {
            let mask = Mask::draw(rng.keeps(hidden.elem_count(), p), p);
            hidden.contiguous()?.apply_op1(ReluDropoutOp(mask))
        }
        Mode::Eval if !tracked(&[hidden]) && fused_runs(&[hidden]) => {
            match inference_map(&[hidden], relu_step)? {
                Some(relu) => Ok(relu),
                None => hidden.relu(),
            }
        }
        _ => dropout(&hidden.relu()?, p, mode),
    }
}

fn tracked(tensors: &[&Tensor]) -> bool {
    tensors.iter().any(|t| t.track_op())
}

/// Without dropout or gradients (decoding), the plain sum or ReLU, `step` over parallel
/// chunks of one or two contiguous inputs of one shape; None where one is strided. This runs
/// on rayon's threads, as the products and the rest of a decoding step do: candle's own
/// element-wise ops run on a second pool, whose workers spin for a while after each op and,
/// on two cores, take turns with rayon's instead of working beside them.
fn inference_map(
    inputs: &[&Tensor],
    step: fn(&mut [f32], &[f32], &[f32]),
) -> Result<Option<Tensor>> {
    let first = inputs[0];
    if inputs.iter().any(|t| t.shape() != first.shape()) {
        candle_core::bail!("residual: inputs of different shapes")
    }
    let guards: Vec<_> = inputs.iter().map(|t| t.storage_and_layout()).collect();
    let mut slices = Vec::with_capacity(guards.len());
    for (storage, layout) in &guards {
        let candle_core::Storage::Cpu(cpu) = &**storage else {
            return Ok(None);
        };
        match super::contiguous_f32(cpu, layout)? {
            Some(slice) => slices.push(slice),
            None => return Ok(None),
        }
    }
    let (a, b) = (slices[0], slices.get(1).copied().unwrap_or(slices[0]));
    let mut out = vec![0f32; a.len()];
    let task = |(chunk, out): (usize, &mut [f32])| {
        let range = chunk * CHUNK..chunk * CHUNK + out.len();
        step(out, &a[range.clone()], &b[range]);
    };
    if a.len() <= CHUNK {
        // One row of a sentence: not worth waking a thread.
        out.chunks_mut(CHUNK).enumerate().for_each(task);
    } else {
        out.par_chunks_mut(CHUNK).enumerate().for_each(task);
    }
    Ok(Some(Tensor::from_vec(out, first.shape(), first.device())?))
}

vectorized!(
    /// `x + y`.
    fn sum_step(out: &mut [f32], x: &[f32], y: &[f32]) {
        let n = out.len();
        let (x, y) = (&x[..n], &y[..n]);
        for k in 0..n {
            out[k] = x[k] + y[k];
        }
    }
);

vectorized!(
    /// `max(0, h)`.
    fn relu_step(out: &mut [f32], h: &[f32], _unused: &[f32]) {
        let n = out.len();
        let h = &h[..n];
        for k in 0..n {
            out[k] = h[k].max(0.0);
        }
    }
);

/// A dropout mask kept for the backward pass: which elements stay, and their factor.
#[derive(Clone)]
struct Mask {
    keeps: Arc<Vec<bool>>,
    scale: f32,
}

impl Mask {
    fn draw(keeps: Vec<bool>, p: f64) -> Self {
        Self {
            keeps: Arc::new(keeps),
            scale: keep_scale(p),
        }
    }

    fn check(&self, len: usize) -> Result<()> {
        if self.keeps.len() != len {
            candle_core::bail!("dropout: a mask of {} for {len} elements", self.keeps.len())
        }
        Ok(())
    }
}

/// A contiguous tensor's f32 slice.
fn slice<'a>(storage: &'a CpuStorage, layout: &Layout) -> Result<&'a [f32]> {
    contiguous_input(storage, layout, "dropout")
}

/// One element-wise step over aligned chunks: `out`, up to two inputs, the mask, its factor.
type ChunkStep = fn(&mut [f32], &[f32], &[f32], &[bool], f32);

/// Runs `step` over parallel chunks of `len` elements of `inputs` (one or two of that length;
/// the second defaults to the first) and the mask.
fn map_chunks(len: usize, inputs: &[&[f32]], mask: &Mask, step: ChunkStep) -> Vec<f32> {
    let mut out = vec![0f32; len];
    let (a, b) = (inputs[0], inputs.get(1).copied().unwrap_or(inputs[0]));
    out.par_chunks_mut(CHUNK)
        .enumerate()
        .for_each(|(chunk, out)| {
            let range = chunk * CHUNK..chunk * CHUNK + out.len();
            step(
                out,
                &a[range.clone()],
                &b[range.clone()],
                &mask.keeps[range],
                mask.scale,
            );
        });
    out
}

// Each step is branch-free (a kept element's factor is `keep as f32 * scale`), so that it
// compiles to vector code.

vectorized!(
    /// `x + keep * scale * y`.
    fn residual_step(out: &mut [f32], x: &[f32], y: &[f32], keeps: &[bool], scale: f32) {
        let n = out.len();
        let (x, y, keeps) = (&x[..n], &y[..n], &keeps[..n]);
        for k in 0..n {
            out[k] = fma::<FUSED>(y[k], keeps[k] as u8 as f32 * scale, x[k]);
        }
    }
);

vectorized!(
    /// `keep * scale * g`.
    fn mask_step(out: &mut [f32], g: &[f32], _unused: &[f32], keeps: &[bool], scale: f32) {
        let n = out.len();
        let (g, keeps) = (&g[..n], &keeps[..n]);
        for k in 0..n {
            out[k] = g[k] * (keeps[k] as u8 as f32 * scale);
        }
    }
);

vectorized!(
    /// `keep * scale * max(0, h)`.
    fn relu_dropout_step(out: &mut [f32], h: &[f32], _unused: &[f32], keeps: &[bool], scale: f32) {
        let n = out.len();
        let (h, keeps) = (&h[..n], &keeps[..n]);
        for k in 0..n {
            out[k] = h[k].max(0.0) * (keeps[k] as u8 as f32 * scale);
        }
    }
);

vectorized!(
    /// `keep * scale * g` where `h > 0`, else 0.
    fn relu_dropout_grad_step(out: &mut [f32], g: &[f32], h: &[f32], keeps: &[bool], scale: f32) {
        let n = out.len();
        let (g, h, keeps) = (&g[..n], &h[..n], &keeps[..n]);
        for k in 0..n {
            let open = (h[k] > 0.0) as u8 as f32;
            out[k] = g[k] * (keeps[k] as u8 as f32 * scale) * open;
        }
    }
);

/// The forward node of [`residual_dropout`].
struct ResidualOp(Mask);

impl CustomOp2 for ResidualOp {
    fn name(&self) -> &'static str {
        "residual-dropout"
    }

    fn cpu_fwd(
        &self,
        xs: &CpuStorage,
        xs_layout: &Layout,
        ys: &CpuStorage,
        ys_layout: &Layout,
    ) -> Result<(CpuStorage, Shape)> {
        if xs_layout.shape() != ys_layout.shape() {
            candle_core::bail!(
                "residual: input {:?} and sublayer output {:?} differ",
                xs_layout.shape(),
                ys_layout.shape()
            )
        }
        let (xs, ys) = (slice(xs, xs_layout)?, slice(ys, ys_layout)?);
        self.0.check(xs.len())?;
        let out = map_chunks(xs.len(), &[xs, ys], &self.0, residual_step);
        Ok((CpuStorage::F32(out), xs_layout.shape().clone()))
    }

    fn bwd(
        &self,
        _xs: &Tensor,
        _ys: &Tensor,
        _res: &Tensor,
        grad: &Tensor,
    ) -> Result<(Option<Tensor>, Option<Tensor>)> {
        let grad_ys = grad
            .contiguous()?
            .apply_op1_no_bwd(&MaskOp(self.0.clone()))?;
        Ok((Some(grad.clone()), Some(grad_ys)))
    }
}

/// `grad * mask`: the residual's backward pass for the sublayer output.
struct MaskOp(Mask);

impl CustomOp1 for MaskOp {
    fn name(&self) -> &'static str {
        "dropout-mask"
    }

    fn cpu_fwd(&self, storage: &CpuStorage, layout: &Layout) -> Result<(CpuStorage, Shape)> {
        let grad = slice(storage, layout)?;
        self.0.check(grad.len())?;
        let out = map_chunks(grad.len(), &[grad], &self.0, mask_step);
        Ok((CpuStorage::F32(out), layout.shape().clone()))
    }
}

/// The forward node of [`relu_dropout`].
struct ReluDropoutOp(Mask);

impl CustomOp1 for ReluDropoutOp {
    fn name(&self) -> &'static str {
        "relu-dropout"
    }

    fn cpu_fwd(&self, storage: &CpuStorage, layout: &Layout) -> Result<(CpuStorage, Shape)> {
        let hidden = slice(storage, layout)?;
        self.0.check(hidden.len())?;
        let out = map_chunks(hidden.len(), &[hidden], &self.0, relu_dropout_step);
        Ok((CpuStorage::F32(out), layout.shape().clone()))
    }

    fn bwd(&self, hidden: &Tensor, _res: &Tensor, grad: &Tensor) -> Result<Option<Tensor>> {
        let grad = grad
            .contiguous()?
            .apply_op2_no_bwd(hidden, &ReluDropoutGradOp(self.0.clone()))?;
        Ok(Some(grad))
    }
}

/// `grad * mask * (hidden > 0)`.
struct ReluDropoutGradOp(Mask);

impl CustomOp2 for ReluDropoutGradOp {
    fn name(&self) -> &'static str {
        "relu-dropout-grad"
    }

    fn cpu_fwd(
        &self,
        grad: &CpuStorage,
        grad_layout: &Layout,
        hidden: &CpuStorage,
        hidden_layout: &Layout,
    ) -> Result<(CpuStorage, Shape)> {
        let (grad, hidden) = (slice(grad, grad_layout)?, slice(hidden, hidden_layout)?);
        self.0.check(grad.len())?;
        self.0.check(hidden.len())?;
        let out = map_chunks(grad.len(), &[grad, hidden], &self.0, relu_dropout_grad_step);
        Ok((CpuStorage::F32(out), grad_layout.shape().clone()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::dropout::DropoutRng;
    use crate::kernels::test_support::assert_fused_matches_composed;
    use candle_core::{Device, Var};

    /// More elements than one parallel task holds, a transposed (strided) input, and the same
    /// seed on both paths: the same draws give the same values and gradients.
    #[test]
    fn the_fused_residual_dropout_matches_the_composed_one_forward_and_backward() {
        let dev = Device::Cpu;
        let xs = Var::from_tensor(&Tensor::randn(0f32, 1., (300, 130), &dev).unwrap()).unwrap();
        let ys = Var::from_tensor(&Tensor::randn(0f32, 1., (130, 300), &dev).unwrap()).unwrap();
        assert_fused_matches_composed(&[&xs, &ys], 1e-6, || {
            let rng = DropoutRng::new(11);
            let ys = ys.as_tensor().t().unwrap();
            residual_dropout(xs.as_tensor(), &ys, 0.3, Mode::Train(&rng)).unwrap()
        });
    }

    #[test]
    fn the_fused_relu_dropout_matches_the_composed_one_forward_and_backward() {
        let dev = Device::Cpu;
        let hidden = Var::from_tensor(&Tensor::randn(0f32, 1., (257, 161), &dev).unwrap()).unwrap();
        assert_fused_matches_composed(&[&hidden], 1e-6, || {
            let rng = DropoutRng::new(12);
            relu_dropout(hidden.as_tensor(), 0.2, Mode::Train(&rng)).unwrap()
        });
    }

    #[test]
    fn both_draw_about_p_and_evaluation_is_the_plain_sum_and_relu() {
        let dev = Device::Cpu;
        let xs = Tensor::zeros(20_000, candle_core::DType::F32, &dev).unwrap();
        let ys = Tensor::ones(20_000, candle_core::DType::F32, &dev).unwrap();
        let rng = DropoutRng::new(3);
        let sum = residual_dropout(&xs, &ys, 0.25, Mode::Train(&rng)).unwrap();
        let kept = sum.to_vec1::<f32>().unwrap();
        let zeros = kept.iter().filter(|&&v| v == 0.0).count();
        assert!((4600..5400).contains(&zeros), "{zeros} dropped");
        assert!(kept
            .iter()
            .all(|&v| v == 0.0 || (v - 1.0 / 0.75).abs() < 1e-6));
        let hidden = Tensor::new(&[-1f32, 2., -3., 4.], &dev).unwrap();
        let relu = relu_dropout(&hidden, 0.5, Mode::Eval).unwrap();
        assert_eq!(relu.to_vec1::<f32>().unwrap(), [0., 2., 0., 4.]);
        let plain = residual_dropout(&hidden, &hidden, 0.5, Mode::Eval).unwrap();
        assert_eq!(plain.to_vec1::<f32>().unwrap(), [-2., 4., -6., 8.]);
    }
}
