//! Adam's update on a GPU as one kernel launch per parameter (`adam_f32` in fused.cu), in
//! place, as the CPU's `adam_fused` does it: candle's in-place ops lend one tensor's storage
//! for writing, so the first moment's op asks the second moment's, which asks the weight's,
//! and the innermost launches the kernel with all three.

use candle_core::cuda_backend::cudarc::driver::{DevicePtr, DevicePtrMut, PushKernelArg};
use candle_core::cuda_backend::WrapErr;
use candle_core::{
    backend::BackendStorage, CpuStorage, CudaStorage, InplaceOp1, InplaceOp2, Layout, Result,
    Tensor,
};

use super::super::adam_fused::AdamStep;

/// Updates `param`, `first` and `second` in place from `grad`: contiguous f32 on one GPU, all
/// of one shape ([`crate::kernels::adam::adam_update`] decides).
pub(in crate::kernels) fn update_in_place(
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

/// The first byte of a contiguous f32 tensor's elements, as a device address.
fn offset_bytes(layout: &Layout) -> Result<u64> {
    let (start, _) = layout
        .contiguous_offsets()
        .ok_or_else(|| candle_core::Error::Msg("adam: a tensor is not contiguous".into()))?;
    Ok(4 * start as u64)
}

fn on_the_cpu() -> Result<()> {
    candle_core::bail!("adam: the CUDA update was given tensors on the CPU")
}

struct LendFirst<'a> {
    second: &'a Tensor,
    param: &'a Tensor,
    grad: &'a Tensor,
    step: AdamStep,
}

impl InplaceOp1 for LendFirst<'_> {
    fn name(&self) -> &'static str {
        "cuda-adam-first-moment"
    }

    fn cpu_fwd(&self, _: &mut CpuStorage, _: &Layout) -> Result<()> {
        on_the_cpu()
    }

    fn cuda_fwd(&self, storage: &mut CudaStorage, layout: &Layout) -> Result<()> {
        let stream = storage.device().cuda_stream();
        let (first, _in_use) = storage.as_cuda_slice_mut::<f32>()?.device_ptr_mut(&stream);
        self.second.inplace_op1(&LendSecond {
            first: first + offset_bytes(layout)?,
            param: self.param,
            grad: self.grad,
            step: self.step,
        })
    }
}

struct LendSecond<'a> {
    /// The first moment's elements, lent for the launch.
    first: u64,
    param: &'a Tensor,
    grad: &'a Tensor,
    step: AdamStep,
}

impl InplaceOp1 for LendSecond<'_> {
    fn name(&self) -> &'static str {
        "cuda-adam-second-moment"
    }

    fn cpu_fwd(&self, _: &mut CpuStorage, _: &Layout) -> Result<()> {
        on_the_cpu()
    }

    fn cuda_fwd(&self, storage: &mut CudaStorage, layout: &Layout) -> Result<()> {
        let stream = storage.device().cuda_stream();
        let (second, _in_use) = storage.as_cuda_slice_mut::<f32>()?.device_ptr_mut(&stream);
        self.param.inplace_op2(
            self.grad,
            &Update {
                first: self.first,
                second: second + offset_bytes(layout)?,
                step: self.step,
            },
        )
    }
}

struct Update {
    first: u64,
    second: u64,
    step: AdamStep,
}

impl InplaceOp2 for Update {
    fn name(&self) -> &'static str {
        "cuda-adam-update"
    }

    fn cpu_fwd(&self, _: &mut CpuStorage, _: &Layout, _: &CpuStorage, _: &Layout) -> Result<()> {
        on_the_cpu()
    }

    fn cuda_fwd(
        &self,
        param: &mut CudaStorage,
        param_layout: &Layout,
        grad: &CudaStorage,
        grad_layout: &Layout,
    ) -> Result<()> {
        let device = param.device().clone();
        let stream = device.cuda_stream();
        let n = param_layout.shape().elem_count() as u64;
        let (grad_ptr, _grad_in_use) = grad.as_cuda_slice::<f32>()?.device_ptr(&stream);
        let grad_ptr = grad_ptr + offset_bytes(grad_layout)?;
        let offset = offset_bytes(param_layout)?;
        let (param_ptr, _param_in_use) = param.as_cuda_slice_mut::<f32>()?.device_ptr_mut(&stream);
        let param_ptr = param_ptr + offset;
        let AdamStep {
            beta1,
            beta2,
            step_size,
            inv_sqrt_bias_correction2,
            eps,
        } = self.step;
        let func = device.get_or_load_custom_func("adam_f32", super::MODULE, super::PTX)?;
        let mut builder = func.builder();
        builder.arg(&n);
        builder.arg(&param_ptr);
        builder.arg(&self.first);
        builder.arg(&self.second);
        builder.arg(&grad_ptr);
        builder.arg(&beta1);
        builder.arg(&beta2);
        builder.arg(&step_size);
        builder.arg(&inv_sqrt_bias_correction2);
        builder.arg(&eps);
        // SAFETY: the four addresses each cover `n` f32s of a live, contiguous tensor (checked
        // by adam_update), and the lent storages stay borrowed until the launch is queued.
        unsafe { builder.launch(super::elementwise(n as usize)) }.w()?;
        Ok(())
    }
}
