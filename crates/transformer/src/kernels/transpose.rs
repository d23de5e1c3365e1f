//! A matrix's transpose as a new contiguous f32 matrix on the CPU, in square blocks that stay
//! in L1 while they are read by rows and written by columns, row blocks in parallel. candle's
//! strided copy walks the source one element at a time in the destination's order, every
//! read a cache miss past the first rows: for the transposes of a loaded checkpoint's weights
//! (made the first time a product of several rows asks) it was a sixth of a 32-sentence
//! batch's decoding on OPUS-MT's shape.

use candle_core::{Result, Tensor};
use rayon::prelude::*;

use super::{contiguous_f32, fused_runs};

/// Rows and columns of a block: 32 x 32 floats, 4 KB read and 4 KB written.
const BLOCK: usize = 32;

/// `m` `(rows, cols)` transposed, `(cols, rows)` contiguous: blocked where the fused path runs
/// (f32 on the CPU, contiguous), candle's copy elsewhere.
pub fn transposed(m: &Tensor) -> Result<Tensor> {
    let (rows, cols) = m.dims2()?;
    if fused_runs(&[m]) {
        let (storage, layout) = m.storage_and_layout();
        if let candle_core::Storage::Cpu(cpu) = &*storage {
            if let Some(values) = contiguous_f32(cpu, layout)? {
                let out = transpose(values, rows, cols);
                return Tensor::from_vec(out, (cols, rows), m.device());
            }
        }
    }
    m.t()?.contiguous()
}

/// `values` `(rows, cols)` row-major, transposed into `(cols, rows)` row-major.
fn transpose(values: &[f32], rows: usize, cols: usize) -> Vec<f32> {
    let mut out = vec![0f32; rows * cols];
    if rows == 0 || cols == 0 {
        return out;
    }
    // Each task writes BLOCK whole rows of the output (BLOCK columns of the input).
    out.par_chunks_mut(BLOCK * rows)
        .enumerate()
        .for_each(|(task, out_rows)| {
            let c0 = task * BLOCK;
            let width = BLOCK.min(cols - c0);
            for r0 in (0..rows).step_by(BLOCK) {
                let height = BLOCK.min(rows - r0);
                for r in r0..r0 + height {
                    let source = &values[r * cols + c0..][..width];
                    for (c, &value) in source.iter().enumerate() {
                        out_rows[c * rows + r] = value;
                    }
                }
            }
        });
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::Device;

    #[test]
    fn the_blocked_transpose_is_candles_for_every_edge() {
        let dev = Device::Cpu;
        for (rows, cols) in [(1, 1), (1, 70), (70, 1), (33, 65), (64, 32), (100, 257)] {
            let m = Tensor::randn(0f32, 1., (rows, cols), &dev).unwrap();
            let ours = transposed(&m).unwrap().to_vec2::<f32>().unwrap();
            let candles = m
                .t()
                .unwrap()
                .contiguous()
                .unwrap()
                .to_vec2::<f32>()
                .unwrap();
            assert_eq!(ours, candles, "{rows} x {cols}");
        }
    }
}
