//! The element-wise steps around each sublayer in training on a GPU, f32: `x + dropout(y)`
//! and `dropout(max(0, y))` as one launch forward (`dropout_sum_f32`) and one backward
//! (`dropout_grad_f32`), over the uniform draws the composed path makes (`Tensor::rand` on
//! the device's seeded generator, so both paths train the same run). Composed, candle takes
//! six launches forward (four for dropout's mask, the product, the sum or the ReLU).

use candle_core::backend::BackendStorage;
use candle_core::cuda_backend::cudarc::driver::{DevicePtr, PushKernelArg};
use candle_core::cuda_backend::WrapErr;
use candle_core::{CudaStorage, CustomOp3, Layout, Result, Shape, Tensor};

/// `xs + dropout(ys)` (`relu` false) or `dropout(max(0, ys))` (`relu` true; `xs` unused), both
/// f32 on a GPU, of one shape, with dropout `p` > 0 drawn from the device's generator.
pub(in crate::kernels) fn dropout_sum(
    xs: &Tensor,
    ys: &Tensor,
    p: f64,
    relu: bool,
) -> Result<Tensor> {
    let ys = ys.contiguous()?;
    let uniform = Tensor::rand(0f32, 1f32, ys.shape(), ys.device())?;
    let op = DropoutSum {
        relu,
        p: p as f32,
        scale: super::super::dropout::keep_scale(p),
    };
    xs.contiguous()?.apply_op3(&ys, &uniform, op)
}

#[derive(Clone, Copy)]
struct DropoutSum {
    relu: bool,
    p: f32,
    scale: f32,
}

/// A contiguous f32 tensor's first element on the GPU, and the guard that keeps it lent.
fn address<'a>(
    storage: &'a CudaStorage,
    layout: &Layout,
    stream: &'a std::sync::Arc<candle_core::cuda_backend::cudarc::driver::CudaStream>,
) -> Result<(u64, impl Drop + 'a)> {
    if !layout.is_contiguous() {
        candle_core::bail!("cuda dropout: inputs must be contiguous")
    }
    let (ptr, guard) = storage.as_cuda_slice::<f32>()?.device_ptr(stream);
    Ok((ptr + 4 * layout.start_offset() as u64, guard))
}

impl CustomOp3 for DropoutSum {
    fn name(&self) -> &'static str {
        "cuda-dropout-sum"
    }

    gpu_only_cpu_fwd!("cuda dropout");

    fn cuda_fwd(
        &self,
        xs: &CudaStorage,
        xl: &Layout,
        ys: &CudaStorage,
        yl: &Layout,
        uniform: &CudaStorage,
        ul: &Layout,
    ) -> Result<(CudaStorage, Shape)> {
        let device = xs.device().clone();
        let stream = device.cuda_stream();
        let n = yl.shape().elem_count();
        if xl.shape().elem_count() != n || ul.shape().elem_count() != n {
            candle_core::bail!("cuda dropout: inputs of different sizes")
        }
        let (x, _x) = address(xs, xl, &stream)?;
        let (y, _y) = address(ys, yl, &stream)?;
        let (u, _u) = address(uniform, ul, &stream)?;
        let out = self.launch_sum(&device, n, x, y, u)?;
        Ok((out, yl.shape().clone()))
    }

    fn bwd(
        &self,
        _xs: &Tensor,
        ys: &Tensor,
        uniform: &Tensor,
        _res: &Tensor,
        grad: &Tensor,
    ) -> Result<(Option<Tensor>, Option<Tensor>, Option<Tensor>)> {
        let grad = grad.contiguous()?;
        let dy = ys.apply_op3_no_bwd(uniform, &grad, &DropoutGrad(*self))?;
        // The residual passes its gradient straight through; the ReLU's input is ys alone.
        let dx = (!self.relu).then_some(grad);
        Ok((dx, Some(dy), None))
    }
}

impl DropoutSum {
    fn launch_sum(
        &self,
        device: &candle_core::CudaDevice,
        n: usize,
        x: u64,
        y: u64,
        u: u64,
    ) -> Result<CudaStorage> {
        // SAFETY: written whole by the kernel before it is read.
        let out = unsafe { device.alloc::<f32>(n)? };
        let func = device.get_or_load_custom_func("dropout_sum_f32", super::MODULE, super::PTX)?;
        let mut builder = func.builder();
        let (count, relu) = (n as u64, i32::from(self.relu));
        builder.arg(&count);
        builder.arg(&relu);
        builder.arg(&x);
        builder.arg(&y);
        builder.arg(&u);
        builder.arg(&self.p);
        builder.arg(&self.scale);
        builder.arg(&out);
        // SAFETY: x, y and u each cover `n` f32s of live contiguous tensors, lent by the caller.
        unsafe { builder.launch(super::elementwise(n)) }.w()?;
        Ok(CudaStorage::wrap_cuda_slice(out, device.clone()))
    }
}

/// The backward node over (ys, draws, grad): dy.
struct DropoutGrad(DropoutSum);

impl CustomOp3 for DropoutGrad {
    fn name(&self) -> &'static str {
        "cuda-dropout-grad"
    }

    gpu_only_cpu_fwd!("cuda dropout");

    fn cuda_fwd(
        &self,
        ys: &CudaStorage,
        yl: &Layout,
        uniform: &CudaStorage,
        ul: &Layout,
        grad: &CudaStorage,
        gl: &Layout,
    ) -> Result<(CudaStorage, Shape)> {
        let device = ys.device().clone();
        let stream = device.cuda_stream();
        let n = yl.shape().elem_count();
        let (y, _y) = address(ys, yl, &stream)?;
        let (u, _u) = address(uniform, ul, &stream)?;
        let (g, _g) = address(grad, gl, &stream)?;
        // SAFETY: written whole by the kernel before it is read.
        let out = unsafe { device.alloc::<f32>(n)? };
        let func = device.get_or_load_custom_func("dropout_grad_f32", super::MODULE, super::PTX)?;
        let mut builder = func.builder();
        let (count, relu) = (n as u64, i32::from(self.0.relu));
        builder.arg(&count);
        builder.arg(&relu);
        builder.arg(&y);
        builder.arg(&u);
        builder.arg(&self.0.p);
        builder.arg(&self.0.scale);
        builder.arg(&g);
        builder.arg(&out);
        // SAFETY: y, u and g each cover `n` f32s of live contiguous tensors, lent above.
        unsafe { builder.launch(super::elementwise(n)) }.w()?;
        Ok((
            CudaStorage::wrap_cuda_slice(out, device),
            yl.shape().clone(),
        ))
    }
}
