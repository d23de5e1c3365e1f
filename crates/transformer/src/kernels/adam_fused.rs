//! Adam's update on the CPU as one pass over each parameter: the first moment, the second
//! moment and the weight are each read and written once, with the gradient read once (seven
//! accesses an element; the tensor version made a dozen ops that each allocated a new tensor,
//! and three in-place passes made ten). With the base model's 44M parameters this is most of
//! a toy training step.
//!
//! candle's in-place ops lend one tensor's storage for writing; the update needs three. So the
//! op on the first moment calls the op on the second moment from inside, which calls the
//! weight's: each lends its storage to the next, and the innermost sees all three.

use std::cell::RefCell;

use candle_core::{CpuStorage, InplaceOp1, InplaceOp2, Layout, Result, Tensor};
use rayon::prelude::*;

use super::simd::fma;

/// Elements per parallel chunk: large enough that scheduling costs nothing.
const CHUNK: usize = 1 << 16;

/// Adam's constants for one step.
#[derive(Debug, Clone, Copy)]
pub struct AdamStep {
    pub beta1: f32,
    pub beta2: f32,
    /// lr / (1 - beta1^t)
    pub step_size: f32,
    /// 1 / sqrt(1 - beta2^t)
    pub inv_sqrt_bias_correction2: f32,
    pub eps: f32,
}

/// Updates `param`, `first` and `second` in place from `grad`: contiguous f32 on the CPU, all
/// of one shape ([`super::adam::adam_update`] decides).
pub(super) fn update_in_place(
    param: &Tensor,
    first: &Tensor,
    second: &Tensor,
    grad: &Tensor,
    step: AdamStep,
) -> Result<()> {
    first.inplace_op1(&LendFirst {
        second,
        param,
        grad,
        step,
    })
}

/// Lends the first moment's storage and asks the second moment for its.
struct LendFirst<'a> {
    second: &'a Tensor,
    param: &'a Tensor,
    grad: &'a Tensor,
    step: AdamStep,
}

impl InplaceOp1 for LendFirst<'_> {
    fn name(&self) -> &'static str {
        "adam-first-moment"
    }

    fn cpu_fwd(&self, storage: &mut CpuStorage, layout: &Layout) -> Result<()> {
        let first = slice_mut(storage, layout)?;
        self.second.inplace_op1(&LendSecond {
            first: RefCell::new(first),
            param: self.param,
            grad: self.grad,
            step: self.step,
        })
    }
}

/// Lends the second moment's storage too and updates the weight with both.
struct LendSecond<'a, 'b> {
    first: RefCell<&'b mut [f32]>,
    param: &'a Tensor,
    grad: &'a Tensor,
    step: AdamStep,
}

impl InplaceOp1 for LendSecond<'_, '_> {
    fn name(&self) -> &'static str {
        "adam-second-moment"
    }

    fn cpu_fwd(&self, storage: &mut CpuStorage, layout: &Layout) -> Result<()> {
        let second = slice_mut(storage, layout)?;
        let mut first = self.first.borrow_mut();
        self.param.inplace_op2(
            self.grad,
            &Update {
                moments: RefCell::new((&mut first, second)),
                step: self.step,
            },
        )
    }
}

/// Where a contiguous tensor's elements lie in its storage.
fn elements(layout: &Layout) -> Result<std::ops::Range<usize>> {
    let (start, end) = layout
        .contiguous_offsets()
        .ok_or_else(|| candle_core::Error::Msg("adam: a tensor is not contiguous".into()))?;
    Ok(start..end)
}

fn slice<'a>(storage: &'a CpuStorage, layout: &Layout) -> Result<&'a [f32]> {
    match storage {
        CpuStorage::F32(data) => Ok(&data[elements(layout)?]),
        _ => candle_core::bail!("adam: expected f32"),
    }
}

fn slice_mut<'a>(storage: &'a mut CpuStorage, layout: &Layout) -> Result<&'a mut [f32]> {
    match storage {
        CpuStorage::F32(data) => Ok(&mut data[elements(layout)?]),
        _ => candle_core::bail!("adam: expected f32"),
    }
}

/// The update itself, with both moments lent.
struct Update<'b> {
    moments: RefCell<(&'b mut [f32], &'b mut [f32])>,
    step: AdamStep,
}

impl InplaceOp2 for Update<'_> {
    fn name(&self) -> &'static str {
        "adam-update"
    }

    fn cpu_fwd(
        &self,
        param: &mut CpuStorage,
        param_layout: &Layout,
        grad: &CpuStorage,
        grad_layout: &Layout,
    ) -> Result<()> {
        let param = slice_mut(param, param_layout)?;
        let grad = slice(grad, grad_layout)?;
        let mut moments = self.moments.borrow_mut();
        let (first, second) = &mut *moments;
        let n = param.len();
        if [grad.len(), first.len(), second.len()] != [n; 3] {
            candle_core::bail!("adam: a moment or gradient of another size than its parameter")
        }
        let step = self.step;
        param
            .par_chunks_mut(CHUNK)
            .zip(first.par_chunks_mut(CHUNK))
            .zip(second.par_chunks_mut(CHUNK))
            .zip(grad.par_chunks(CHUNK))
            .for_each(|(((p, m), v), g)| update_chunk(p, m, v, g, step));
        Ok(())
    }
}

vectorized!(
    /// m = b1 m + (1 - b1) g; v = b2 v + (1 - b2) g^2; p -= step_size m / (sqrt(v) / sqrt(bc2) + eps).
    fn update_chunk(p: &mut [f32], m: &mut [f32], v: &mut [f32], g: &[f32], step: AdamStep) {
        let AdamStep {
            beta1,
            beta2,
            step_size,
            inv_sqrt_bias_correction2: scale,
            eps,
        } = step;
        let (rest1, rest2) = (1.0 - beta1, 1.0 - beta2);
        let n = p.len().min(m.len()).min(v.len()).min(g.len());
        for k in 0..n {
            let g = g[k];
            let m_k = fma::<FUSED>(beta1, m[k], rest1 * g);
            let v_k = fma::<FUSED>(beta2, v[k], rest2 * g * g);
            m[k] = m_k;
            v[k] = v_k;
            p[k] -= step_size * m_k / fma::<FUSED>(v_k.sqrt(), scale, eps);
        }
    }
);
