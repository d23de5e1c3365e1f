//! Layer normalisation for training on the CPU as one graph node with its own backward pass.
//!
//! Composed from candle ops, either LayerNorm is about ten nodes (mean, subtract, square, sum,
//! divide, root, add, divide, scale, shift), each a pass over the activations that allocates
//! its output, and the backward pass walks them all again. Here each row is normalised in one
//! pass, and the backward pass is one pass per row plus the gain and bias sums:
//!
//! ```text
//! The Annotated Transformer's:  c = x - mean(x),  s = sqrt(sum(c^2) / (n - 1)),  d = s + eps,
//!   y = g * c / d + b;   dc = g dy / d - c * sum(g dy c) / (d^2 (n - 1) s),  dx = dc - mean(dc)
//! torch.nn.LayerNorm's:  r = 1 / sqrt(sum(c^2) / n + eps),  h = c r,  y = g h + b;
//!   dx = r (g dy - mean(g dy) - h mean(g dy h))
//! and for both:  dg = sum over rows of dy * (y - b) / g = dy * h,  db = sum over rows of dy
//! ```

use candle_core::{CpuStorage, CustomOp3, Layout, Result, Shape, Tensor};
use rayon::prelude::*;

use super::contiguous_input;

/// Which LayerNorm, with its epsilon.
#[derive(Debug, Clone, Copy)]
pub enum NormKind {
    /// The Annotated Transformer's: `(x - mean) / (std + eps)` with the unbiased (n - 1) std
    /// and eps added to it, outside the square root.
    Annotated { eps: f32 },
    /// torch.nn.LayerNorm's: `(x - mean) / sqrt(var + eps)` with the biased (n) variance.
    Torch { eps: f32 },
}

/// The forward node.
struct LayerNormOp(NormKind);

/// The backward node: `dx | dg | db` packed into one flat tensor.
struct LayerNormGradOp {
    kind: NormKind,
    /// dy `(rows, size)`, row-major.
    grad_out: Vec<f32>,
}

/// `gain * normalised(xs) + bias` over the last dimension of `xs` `(..., size)`; `gain` and
/// `bias` are `(size,)`. f32 on the CPU: [`super::layer_norm::layer_norm`] decides.
pub fn layer_norm(xs: &Tensor, gain: &Tensor, bias: &Tensor, kind: NormKind) -> Result<Tensor> {
    xs.contiguous()?.apply_op3(gain, bias, LayerNormOp(kind))
}

/// A contiguous tensor's f32 slice.
fn contiguous_slice<'a>(storage: &'a CpuStorage, layout: &Layout) -> Result<&'a [f32]> {
    contiguous_input(storage, layout, "layer norm")
}

/// The op's three inputs as slices, with the row length.
struct Inputs<'a> {
    x: &'a [f32],
    gain: &'a [f32],
    bias: &'a [f32],
    size: usize,
}

/// `(x, gain, bias)` as slices; checks that they fit.
fn inputs<'a>(
    (xs, xl): (&'a CpuStorage, &Layout),
    (gs, gl): (&'a CpuStorage, &Layout),
    (bs, bl): (&'a CpuStorage, &Layout),
) -> Result<Inputs<'a>> {
    let size = xl.shape().dims().last().copied().unwrap_or(0);
    let (x, gain, bias) = (
        contiguous_slice(xs, xl)?,
        contiguous_slice(gs, gl)?,
        contiguous_slice(bs, bl)?,
    );
    if gain.len() != size || bias.len() != size || size < 2 {
        candle_core::bail!(
            "layer norm: input {:?} with gain of {} and bias of {} do not fit (2 or more \
             features)",
            xl.shape(),
            gain.len(),
            bias.len()
        )
    }
    Ok(Inputs {
        x,
        gain,
        bias,
        size,
    })
}

/// Rows per parallel task: enough work per task to pay for its dispatch.
pub(super) fn rows_per_task(size: usize) -> usize {
    (16_384 / size).max(1)
}

impl NormKind {
    /// The row's mean and the factor `(x - mean) * factor` normalises it with.
    fn statistics(self, row: &[f32]) -> (f32, f32) {
        let n = row.len() as f32;
        let mean = row.iter().sum::<f32>() / n;
        let squares: f32 = row.iter().map(|x| (x - mean) * (x - mean)).sum();
        let factor = match self {
            Self::Annotated { eps } => 1.0 / ((squares / (n - 1.0)).sqrt() + eps),
            Self::Torch { eps } => 1.0 / (squares / n + eps).sqrt(),
        };
        (mean, factor)
    }

    /// dx of one row, from the row `x`, its `statistics` and `g dy` (`scaled_grad`).
    fn row_grad(self, x: &[f32], (mean, factor): (f32, f32), scaled_grad: &[f32], dx: &mut [f32]) {
        let n = x.len() as f32;
        match self {
            Self::Annotated { eps } => {
                let d = 1.0 / factor;
                let s = d - eps;
                let dot: f32 = x.iter().zip(scaled_grad).map(|(x, g)| g * (x - mean)).sum();
                // s = 0 (a constant row): every c is 0, so the second term is 0.
                let coefficient = if s > 0.0 {
                    dot / (d * d * (n - 1.0) * s)
                } else {
                    0.0
                };
                for ((dx, x), g) in dx.iter_mut().zip(x).zip(scaled_grad) {
                    *dx = g / d - (x - mean) * coefficient;
                }
                let dc_mean = dx.iter().sum::<f32>() / n;
                dx.iter_mut().for_each(|dx| *dx -= dc_mean);
            }
            Self::Torch { .. } => {
                let g_mean = scaled_grad.iter().sum::<f32>() / n;
                let gh_mean = x
                    .iter()
                    .zip(scaled_grad)
                    .map(|(x, g)| g * (x - mean) * factor)
                    .sum::<f32>()
                    / n;
                for ((dx, x), g) in dx.iter_mut().zip(x).zip(scaled_grad) {
                    let h = (x - mean) * factor;
                    *dx = factor * (g - g_mean - h * gh_mean);
                }
            }
        }
    }
}

impl CustomOp3 for LayerNormOp {
    fn name(&self) -> &'static str {
        "fused-layer-norm"
    }

    fn cpu_fwd(
        &self,
        xs: &CpuStorage,
        xl: &Layout,
        gs: &CpuStorage,
        gl: &Layout,
        bs: &CpuStorage,
        bl: &Layout,
    ) -> Result<(CpuStorage, Shape)> {
        let Inputs {
            x,
            gain,
            bias,
            size,
        } = inputs((xs, xl), (gs, gl), (bs, bl))?;
        let mut out = vec![0f32; x.len()];
        let task = rows_per_task(size) * size;
        out.par_chunks_mut(task)
            .zip(x.par_chunks(task))
            .for_each(|(out, x)| {
                for (out, x) in out.chunks_exact_mut(size).zip(x.chunks_exact(size)) {
                    let (mean, factor) = self.0.statistics(x);
                    for (((y, x), g), b) in out.iter_mut().zip(x).zip(gain).zip(bias) {
                        *y = g * (x - mean) * factor + b;
                    }
                }
            });
        Ok((CpuStorage::F32(out), xl.shape().clone()))
    }

    fn bwd(
        &self,
        xs: &Tensor,
        gain: &Tensor,
        bias: &Tensor,
        _res: &Tensor,
        grad: &Tensor,
    ) -> Result<(Option<Tensor>, Option<Tensor>, Option<Tensor>)> {
        let op = LayerNormGradOp {
            kind: self.0,
            grad_out: grad.flatten_all()?.to_vec1::<f32>()?,
        };
        let packed = xs.apply_op3_no_bwd(gain, bias, &op)?;
        let (count, size) = (xs.elem_count(), gain.elem_count());
        Ok((
            Some(packed.narrow(0, 0, count)?.reshape(xs.shape())?),
            Some(packed.narrow(0, count, size)?),
            Some(packed.narrow(0, count + size, size)?),
        ))
    }
}

impl CustomOp3 for LayerNormGradOp {
    fn name(&self) -> &'static str {
        "fused-layer-norm-grad"
    }

    fn cpu_fwd(
        &self,
        xs: &CpuStorage,
        xl: &Layout,
        gs: &CpuStorage,
        gl: &Layout,
        bs: &CpuStorage,
        bl: &Layout,
    ) -> Result<(CpuStorage, Shape)> {
        let Inputs { x, gain, size, .. } = inputs((xs, xl), (gs, gl), (bs, bl))?;
        let grad_out = &self.grad_out;
        let mut packed = vec![0f32; x.len() + 2 * size];
        let (dx, sums) = packed.split_at_mut(x.len());
        let task = rows_per_task(size) * size;
        // Each task returns its rows' contributions to dg and db; they are added up after.
        let partial_sums: Vec<Vec<f32>> = dx
            .par_chunks_mut(task)
            .zip(x.par_chunks(task))
            .zip(grad_out.par_chunks(task))
            .map(|((dx, x), dy)| {
                let mut sums = vec![0f32; 2 * size];
                let mut scaled = vec![0f32; size];
                for ((dx, x), dy) in dx
                    .chunks_exact_mut(size)
                    .zip(x.chunks_exact(size))
                    .zip(dy.chunks_exact(size))
                {
                    let statistics = self.kind.statistics(x);
                    let (mean, factor) = statistics;
                    let (dg, db) = sums.split_at_mut(size);
                    for j in 0..size {
                        dg[j] += dy[j] * (x[j] - mean) * factor;
                        db[j] += dy[j];
                        scaled[j] = dy[j] * gain[j];
                    }
                    self.kind.row_grad(x, statistics, &scaled, dx);
                }
                sums
            })
            .collect();
        for partial in partial_sums {
            sums.iter_mut().zip(&partial).for_each(|(s, p)| *s += p);
        }
        Ok((CpuStorage::F32(packed), Shape::from(x.len() + 2 * size)))
    }
}
