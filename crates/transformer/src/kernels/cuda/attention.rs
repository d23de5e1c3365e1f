//! Attention's probabilities in training on a GPU, f32: the mask (-1e9 where it is 0, as the
//! reference's masked_fill), the softmax and dropout as one launch forward
//! (`attention_softmax_f32`) and one backward (`attention_softmax_grad_f32`, which recomputes
//! the probabilities from the scores rather than keeping them). Composed, candle takes about
//! ten launches forward (the fill, five for the softmax, four for dropout's mask, the
//! product) and as many backward. Dropout draws the same uniform tensor the composed path
//! draws (`Tensor::rand` on the device's seeded generator), so both paths train the same run.

use candle_core::backend::BackendStorage;
use candle_core::cuda_backend::cudarc::driver::{DeviceRepr, PushKernelArg};
use candle_core::cuda_backend::WrapErr;
use candle_core::{CudaStorage, CustomOp3, DType, Layout, Result, Shape, Tensor};

/// The mask's strides in elements over (batch, heads, query, key), 0 where it broadcasts.
#[repr(C)]
#[derive(Clone, Copy)]
struct MaskStrides([i64; 4]);

// SAFETY: four i64s, laid out as fused.cu's `MaskStrides`.
unsafe impl DeviceRepr for MaskStrides {}

/// Dropout's probability and what a kept element is multiplied by.
#[derive(Clone, Copy)]
struct Dropout {
    p: f32,
    scale: f32,
}

/// The dropped probabilities `(batch, heads, q_len, k_len)` of `scores` (f32, on a GPU) under
/// `mask` (u8, 0 where not allowed, broadcasting to the scores; `None`: all allowed), with
/// dropout `p` drawn from the device's generator (0: none).
pub(in crate::kernels) fn probabilities(
    scores: &Tensor,
    mask: Option<&Tensor>,
    p: f64,
) -> Result<Tensor> {
    let scores = scores.contiguous()?;
    let (_, heads, q_len, _) = scores.dims4()?;
    let mask = match mask {
        Some(mask) if mask.dtype() == DType::U8 => Some(mask.broadcast_as(scores.shape())?),
        Some(mask) => candle_core::bail!("cuda attention: the mask is {:?}, not u8", mask.dtype()),
        None => None,
    };
    // Without dropout the scores stand in for the draws, which the kernel then never reads.
    let uniform = match p > 0.0 {
        true => Tensor::rand(0f32, 1f32, scores.shape(), scores.device())?,
        false => scores.clone(),
    };
    let op = Softmax {
        heads,
        q_len,
        masked: mask.is_some(),
        dropout: Dropout {
            p: p as f32,
            scale: super::super::dropout::keep_scale(p),
        },
    };
    // Without a mask the scores stand in for it too, likewise never read.
    scores.apply_op3(mask.as_ref().unwrap_or(&scores), &uniform, op)
}

#[derive(Clone, Copy)]
struct Softmax {
    heads: usize,
    q_len: usize,
    masked: bool,
    dropout: Dropout,
}

/// The address of a tensor's first element on the GPU, and the guard that keeps it lent.
macro_rules! address {
    ($storage:expr, $layout:expr, $ty:ty, $stream:expr) => {{
        use candle_core::cuda_backend::cudarc::driver::DevicePtr;
        let (ptr, guard) = $storage.as_cuda_slice::<$ty>()?.device_ptr($stream);
        (
            ptr + ($layout.start_offset() * std::mem::size_of::<$ty>()) as u64,
            guard,
        )
    }};
}

impl Softmax {
    /// The mask's strides (zeros without a mask).
    fn strides(&self, layout: &Layout) -> Result<MaskStrides> {
        if !self.masked {
            return Ok(MaskStrides([0; 4]));
        }
        let s = layout.stride();
        if s.len() != 4 {
            candle_core::bail!("cuda attention: a mask of {} dimensions", s.len())
        }
        Ok(MaskStrides([
            s[0] as i64,
            s[1] as i64,
            s[2] as i64,
            s[3] as i64,
        ]))
    }

    /// Launches `kernel` over the rows of `scores` with the mask and draws, then the extra
    /// arguments (`grad` for the backward kernel), writing `out`.
    #[allow(clippy::too_many_arguments)]
    fn launch(
        &self,
        kernel: &str,
        (scores, sl): (&CudaStorage, &Layout),
        (mask, ml): (&CudaStorage, &Layout),
        (uniform, ul): (&CudaStorage, &Layout),
        grad: Option<(&CudaStorage, &Layout)>,
    ) -> Result<CudaStorage> {
        let device = scores.device().clone();
        let stream = device.cuda_stream();
        let count = sl.shape().elem_count();
        let k_len = sl.dims().last().copied().unwrap_or(1);
        let rows = (count / k_len.max(1)) as i32;
        for layout in [Some(sl), Some(ul), grad.map(|(_, l)| l)]
            .into_iter()
            .flatten()
        {
            if !layout.is_contiguous() {
                candle_core::bail!(
                    "cuda attention: the scores, draws and gradient must be contiguous"
                )
            }
        }
        let (scores_ptr, _scores) = address!(scores, sl, f32, &stream);
        // Without a mask the scores stand in for it (f32): never read, so no address taken.
        let mask_address = if self.masked {
            Some(address!(mask, ml, u8, &stream))
        } else {
            None
        };
        let mask_ptr = mask_address.as_ref().map_or(0, |(ptr, _lent)| *ptr);
        let (uniform_ptr, _uniform) = address!(uniform, ul, f32, &stream);
        let strides = self.strides(ml)?;
        // SAFETY: written whole by the kernel before it is read.
        let out = unsafe { device.alloc::<f32>(count)? };
        let func = device.get_or_load_custom_func(kernel, super::MODULE, super::PTX)?;
        let mut builder = func.builder();
        let (k_arg, heads, q_len) = (k_len as i32, self.heads as i32, self.q_len as i32);
        builder.arg(&rows);
        builder.arg(&k_arg);
        builder.arg(&heads);
        builder.arg(&q_len);
        builder.arg(&scores_ptr);
        builder.arg(&mask_ptr);
        builder.arg(&strides);
        builder.arg(&uniform_ptr);
        builder.arg(&self.dropout.p);
        builder.arg(&self.dropout.scale);
        let grad_address = match grad {
            Some((grad, gl)) => Some(address!(grad, gl, f32, &stream)),
            None => None,
        };
        if let Some((grad_ptr, _lent)) = &grad_address {
            builder.arg(grad_ptr);
        }
        builder.arg(&out);
        // SAFETY: the scores, draws, gradient and output each cover rows x k_len f32s, and
        // the mask's strides stay inside its storage (a broadcast of a tensor it holds).
        unsafe { builder.launch(super::per_row(rows as usize, k_len)) }.w()?;
        Ok(CudaStorage::wrap_cuda_slice(out, device))
    }
}

fn on_the_cpu<T>() -> Result<T> {
    candle_core::bail!("cuda attention: the gradient is on the CPU")
}

impl CustomOp3 for Softmax {
    fn name(&self) -> &'static str {
        "cuda-attention-softmax"
    }

    gpu_only_cpu_fwd!("cuda attention");

    fn cuda_fwd(
        &self,
        scores: &CudaStorage,
        sl: &Layout,
        mask: &CudaStorage,
        ml: &Layout,
        uniform: &CudaStorage,
        ul: &Layout,
    ) -> Result<(CudaStorage, Shape)> {
        let out = self.launch(
            "attention_softmax_f32",
            (scores, sl),
            (mask, ml),
            (uniform, ul),
            None,
        )?;
        Ok((out, sl.shape().clone()))
    }

    fn bwd(
        &self,
        scores: &Tensor,
        mask: &Tensor,
        uniform: &Tensor,
        _res: &Tensor,
        grad: &Tensor,
    ) -> Result<(Option<Tensor>, Option<Tensor>, Option<Tensor>)> {
        let grad = grad.contiguous()?;
        let backward = SoftmaxGrad {
            forward: *self,
            grad,
        };
        let dscores = scores.apply_op3_no_bwd(mask, uniform, &backward)?;
        Ok((Some(dscores), None, None))
    }
}

/// The backward node: the scores' gradient, from the dropped probabilities' (`grad`).
struct SoftmaxGrad {
    forward: Softmax,
    grad: Tensor,
}

impl CustomOp3 for SoftmaxGrad {
    fn name(&self) -> &'static str {
        "cuda-attention-softmax-grad"
    }

    gpu_only_cpu_fwd!("cuda attention");

    fn cuda_fwd(
        &self,
        scores: &CudaStorage,
        sl: &Layout,
        mask: &CudaStorage,
        ml: &Layout,
        uniform: &CudaStorage,
        ul: &Layout,
    ) -> Result<(CudaStorage, Shape)> {
        let (grad, gl) = self.grad.storage_and_layout();
        let candle_core::Storage::Cuda(grad) = &*grad else {
            return on_the_cpu();
        };
        let out = self.forward.launch(
            "attention_softmax_grad_f32",
            (scores, sl),
            (mask, ml),
            (uniform, ul),
            Some((grad, gl)),
        )?;
        Ok((out, sl.shape().clone()))
    }
}
