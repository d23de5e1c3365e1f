//! The products a fused linear layer computes: gemm's f32 ones, read through the operands'
//! strides, and the bf16 ones of an autocast scope.

use candle_core::{CpuStorage, Layout, Result};

use crate::kernels::bf16::{self, Engine};

/// `x W^T (+ b)` with bf16 products ([`bf16::gemm`]), added to the bias rows.
pub(super) fn bf16_product(
    (x_storage, x_layout): (&CpuStorage, &Layout),
    (w_storage, w_layout): (&CpuStorage, &Layout),
    bias: Option<&[f32]>,
    (rows, in_features, out_features): (usize, usize, usize),
    engine: Engine,
) -> Result<Vec<f32>> {
    let mut dst = bias_rows(rows, rows * out_features, bias);
    let x = Strided::of(x_storage, x_layout)?.matrix(rows, in_features);
    let w_t = Strided::of(w_storage, w_layout)?.transposed();
    let w_t = w_t.matrix(in_features, out_features);
    bf16::gemm(x, w_t, &mut dst, true, engine).map_err(candle_core::Error::Msg)?;
    Ok(dst)
}

/// `lhs (m, k) rhs (k, n)` with bf16 products, into a new row-major `(m, n)` buffer.
pub(super) fn bf16_into(
    (m, n, k): (usize, usize, usize),
    lhs: Strided,
    rhs: Strided,
    e: Engine,
) -> Result<Vec<f32>> {
    let mut dst = vec![0f32; m * n];
    bf16::gemm(lhs.matrix(m, k), rhs.matrix(k, n), &mut dst, false, e)
        .map_err(candle_core::Error::Msg)?;
    Ok(dst)
}

/// The `len` elements gemm adds the product to: `bias` in each of the `rows` rows, or zeros.
pub(super) fn bias_rows(rows: usize, len: usize, bias: Option<&[f32]>) -> Vec<f32> {
    let mut dst = Vec::with_capacity(len);
    match bias {
        Some(bias) => (0..rows).for_each(|_| dst.extend_from_slice(bias)),
        None => dst.resize(len, 0.0),
    }
    dst
}

/// gemm on every rayon thread, or on the caller's alone when there is one.
pub(super) fn gemm_parallelism() -> gemm::Parallelism {
    let threads = rayon::current_num_threads();
    if threads > 1 {
        gemm::Parallelism::Rayon(threads)
    } else {
        gemm::Parallelism::None
    }
}

/// A matrix as gemm reads it: its elements from the first, and its row and column strides.
#[derive(Clone, Copy)]
pub(super) struct Strided<'a> {
    pub data: &'a [f32],
    pub row: usize,
    pub col: usize,
}

impl<'a> Strided<'a> {
    pub fn of(storage: &'a CpuStorage, layout: &Layout) -> Result<Self> {
        Ok(Self {
            data: &storage.as_slice::<f32>()?[layout.start_offset()..],
            row: layout.stride()[0],
            col: layout.stride()[1],
        })
    }

    pub fn transposed(self) -> Self {
        Self {
            row: self.col,
            col: self.row,
            ..self
        }
    }

    /// As the bf16 kernels take it, `rows x cols`.
    pub fn matrix(self, rows: usize, cols: usize) -> bf16::Operand<'a> {
        bf16::Operand {
            data: self.data,
            rows,
            cols,
            row_stride: self.row,
            col_stride: self.col,
        }
    }
}

/// `lhs (m, k) rhs (k, n)` into a new row-major `(m, n)` buffer that gemm writes whole.
pub(super) fn gemm_into((m, n, k): (usize, usize, usize), lhs: Strided, rhs: Strided) -> Vec<f32> {
    if k == 0 {
        return vec![0.0; m * n];
    }
    let mut dst: Vec<f32> = Vec::with_capacity(m * n);
    let parallelism = gemm_parallelism();
    // SAFETY: the strides come from the operands' own layouts (or describe their transposes),
    // so every element gemm reads lies in its slice; with `read_dst` false gemm writes each of
    // the m x n elements of `dst` without reading it, after which its length is set.
    unsafe {
        gemm::gemm(
            m,
            n,
            k,
            dst.as_mut_ptr(),
            1,
            n as isize,
            false,
            lhs.data.as_ptr(),
            lhs.col as isize,
            lhs.row as isize,
            rhs.data.as_ptr(),
            rhs.col as isize,
            rhs.row as isize,
            0.0,
            1.0,
            false,
            false,
            false,
            parallelism,
        );
        dst.set_len(m * n);
    }
    dst
}
