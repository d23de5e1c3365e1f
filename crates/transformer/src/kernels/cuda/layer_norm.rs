//! LayerNorm on a GPU in f32: the forward pass as one launch (`layer_norm_f32`, a block per
//! row) and its backward pass as three (`layer_norm_grad_rows_f32` for dx and each row's
//! statistics, then the gain's and bias's sums over chunks of rows and the chunks added up),
//! with the CPU's fused op's formulas (see `kernels/layer_norm_fused.rs`).

use candle_core::backend::BackendStorage;
use candle_core::cuda_backend::cudarc::driver::PushKernelArg;
use candle_core::cuda_backend::WrapErr;
use candle_core::{CudaStorage, CustomOp3, Layout, Result, Shape, Tensor};

use super::super::layer_norm_fused::NormKind;

/// `gain * normalised(xs) + bias` over the last dimension of `xs` `(..., size)`, f32 on one
/// GPU ([`crate::kernels::layer_norm::layer_norm`] decides).
pub(in crate::kernels) fn layer_norm(
    xs: &Tensor,
    gain: &Tensor,
    bias: &Tensor,
    kind: NormKind,
) -> Result<Tensor> {
    let size = xs.dim(candle_core::D::Minus1)?;
    if gain.dims1()? != size || bias.dims1()? != size {
        candle_core::bail!(
            "layer norm: gain {:?} and bias {:?} for {size} features",
            gain.dims(),
            bias.dims()
        )
    }
    xs.contiguous()?
        .apply_op3(&gain.contiguous()?, &bias.contiguous()?, Forward(kind))
}

/// The kernels' (kind, eps): 0 the Annotated Transformer's, 1 torch's.
fn kind_code(kind: NormKind) -> (i32, f32) {
    match kind {
        NormKind::Annotated { eps } => (0, eps),
        NormKind::Torch { eps } => (1, eps),
    }
}

/// The f32 elements of a contiguous tensor on the GPU, from its first.
fn elements<'a>(
    storage: &'a CudaStorage,
    layout: &Layout,
) -> Result<candle_core::cuda_backend::cudarc::driver::CudaView<'a, f32>> {
    let (start, end) = layout.contiguous_offsets().ok_or_else(|| {
        candle_core::Error::Msg("cuda layer norm: inputs must be contiguous".into())
    })?;
    Ok(storage.as_cuda_slice::<f32>()?.slice(start..end))
}

struct Forward(NormKind);

impl CustomOp3 for Forward {
    fn name(&self) -> &'static str {
        "cuda-layer-norm"
    }

    gpu_only_cpu_fwd!("cuda layer norm");

    fn cuda_fwd(
        &self,
        xs: &CudaStorage,
        xl: &Layout,
        gs: &CudaStorage,
        gl: &Layout,
        bs: &CudaStorage,
        bl: &Layout,
    ) -> Result<(CudaStorage, Shape)> {
        let device = xs.device().clone();
        let size = gl.shape().elem_count();
        let count = xl.shape().elem_count();
        let rows = (count / size.max(1)) as i32;
        let (kind, eps) = kind_code(self.0);
        let (x, gain, bias) = (elements(xs, xl)?, elements(gs, gl)?, elements(bs, bl)?);
        // SAFETY: written whole by the kernel before it is read.
        let out = unsafe { device.alloc::<f32>(count)? };
        let func = device.get_or_load_custom_func("layer_norm_f32", super::MODULE, super::PTX)?;
        let mut builder = func.builder();
        let size_arg = size as i32;
        builder.arg(&rows);
        builder.arg(&size_arg);
        builder.arg(&kind);
        builder.arg(&eps);
        builder.arg(&x);
        builder.arg(&gain);
        builder.arg(&bias);
        builder.arg(&out);
        let config = super::per_row(rows as usize, size);
        // SAFETY: every pointer covers rows x size (or size) f32s, as checked by the caller.
        unsafe { builder.launch(config) }.w()?;
        Ok((
            CudaStorage::wrap_cuda_slice(out, device),
            xl.shape().clone(),
        ))
    }

    fn bwd(
        &self,
        xs: &Tensor,
        gain: &Tensor,
        _bias: &Tensor,
        _res: &Tensor,
        grad: &Tensor,
    ) -> Result<(Option<Tensor>, Option<Tensor>, Option<Tensor>)> {
        let grad = grad.contiguous()?;
        let packed = xs.apply_op3_no_bwd(gain, &grad, &Backward(self.0))?;
        let (count, size) = (xs.elem_count(), gain.elem_count());
        Ok((
            Some(packed.narrow(0, 0, count)?.reshape(xs.shape())?),
            Some(packed.narrow(0, count, size)?),
            Some(packed.narrow(0, count + size, size)?),
        ))
    }
}

/// The backward node over (x, gain, dy): `dx | dgain | dbias` packed into one flat tensor.
struct Backward(NormKind);

/// Rows a block of the gain's and bias's sums adds up: some 16 chunks for a batch of 4,000
/// rows, 64 blocks with 512 features.
const COLUMN_CHUNK_ROWS: usize = 256;

impl CustomOp3 for Backward {
    fn name(&self) -> &'static str {
        "cuda-layer-norm-grad"
    }

    gpu_only_cpu_fwd!("cuda layer norm");

    fn cuda_fwd(
        &self,
        xs: &CudaStorage,
        xl: &Layout,
        gs: &CudaStorage,
        gl: &Layout,
        dys: &CudaStorage,
        dyl: &Layout,
    ) -> Result<(CudaStorage, Shape)> {
        let device = xs.device().clone();
        let size = gl.shape().elem_count();
        let count = xl.shape().elem_count();
        let rows = count / size.max(1);
        let (kind, eps) = kind_code(self.0);
        let (x, gain, dy) = (elements(xs, xl)?, elements(gs, gl)?, elements(dys, dyl)?);
        // SAFETY: both written whole by the kernels below before they are read.
        let packed = unsafe { device.alloc::<f32>(count + 2 * size)? };
        let stats = unsafe { device.alloc::<f32>(2 * rows.max(1))? };
        let (rows_arg, size_arg) = (rows as i32, size as i32);
        {
            let dx = packed.slice(0..count);
            let func = device.get_or_load_custom_func(
                "layer_norm_grad_rows_f32",
                super::MODULE,
                super::PTX,
            )?;
            let mut builder = func.builder();
            builder.arg(&rows_arg);
            builder.arg(&size_arg);
            builder.arg(&kind);
            builder.arg(&eps);
            builder.arg(&x);
            builder.arg(&gain);
            builder.arg(&dy);
            builder.arg(&dx);
            builder.arg(&stats);
            let config = super::per_row(rows, size);
            // SAFETY: x, dy and dx cover rows x size f32s, gain size, stats 2 x rows.
            unsafe { builder.launch(config) }.w()?;
        }
        // The gain's and bias's sums: partial sums over chunks of rows (enough blocks to fill
        // the GPU), then the chunks added up in order.
        let chunk_rows = COLUMN_CHUNK_ROWS;
        let chunks = rows.div_ceil(chunk_rows).max(1);
        // SAFETY: written whole by the first kernel below before the second reads it.
        let partial = unsafe { device.alloc::<f32>(chunks * 2 * size)? };
        {
            let func = device.get_or_load_custom_func(
                "layer_norm_grad_columns_f32",
                super::MODULE,
                super::PTX,
            )?;
            let mut builder = func.builder();
            let chunk_arg = chunk_rows as i32;
            builder.arg(&rows_arg);
            builder.arg(&size_arg);
            builder.arg(&chunk_arg);
            builder.arg(&x);
            builder.arg(&dy);
            builder.arg(&stats);
            builder.arg(&partial);
            let config = super::per_column(size, chunks);
            // SAFETY: x and dy cover rows x size f32s, stats 2 x rows, partial chunks x 2 x size.
            unsafe { builder.launch(config) }.w()?;
        }
        {
            let dgain = packed.slice(count..count + size);
            let dbias = packed.slice(count + size..count + 2 * size);
            let func = device.get_or_load_custom_func(
                "layer_norm_grad_sum_chunks_f32",
                super::MODULE,
                super::PTX,
            )?;
            let mut builder = func.builder();
            let chunks_arg = chunks as i32;
            builder.arg(&chunks_arg);
            builder.arg(&size_arg);
            builder.arg(&partial);
            builder.arg(&dgain);
            builder.arg(&dbias);
            let config = super::per_column(size, 1);
            // SAFETY: partial covers chunks x 2 x size f32s; dgain and dbias are disjoint
            // views of `packed`, size f32s each.
            unsafe { builder.launch(config) }.w()?;
        }
        Ok((
            CudaStorage::wrap_cuda_slice(packed, device),
            Shape::from(count + 2 * size),
        ))
    }
}
