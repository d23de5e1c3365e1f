//! int8 products for decoding on the CPU (`--compute-type int8`, CTranslate2's scheme): the
//! weight `W` `(out, in)` is quantized once, one symmetric scale per output row; each input
//! row is quantized when it arrives, one scale per row; the products are summed in i32 and
//! scaled back: `y[r][j] = b[j] + s_x[r] s_w[j] sum_k q_x[r][k] q_w[j][k]`.
//!
//! The integer dot products run on the best instructions the CPU has, chosen at run time
//! under the ISA cap ([`super::isa`]): AVX-512 VNNI (`vpdpbusd`, 64 bytes a step), AVX-VNNI
//! (the same on 32 bytes), AVX2 (`vpmaddubsw` then `vpmaddwd`), or plain Rust. These
//! instructions multiply unsigned by signed bytes, so the input is shifted (by 128) and
//! `128 sum_k q_w[j][k]` taken off again. AVX2's `vpmaddubsw` would saturate on a shift of
//! 128, so there the input is quantized to [-63, 63] and shifted by 64 (as fbgemm's
//! `reduce_range`; the BLEU this costs is measured in docs/performance.md). Every kernel
//! gives exactly the integer sums the plain loop gives on the same quantized input, which the
//! tests check. Weights are kept in [-127, 127] so that no path overflows. Every SIMD kernel reads the weight packed in blocks of one register's
//! outputs (16 for AVX-512, 8 for AVX2), so that one load feeds one multiply-add into every
//! output's sum of a block and no sum is ever added across a register.
//!
//! `quantize` turns floats into int8 rows and scales, `dots` picks the instructions and runs
//! the integer sums (`x86` holds the SIMD kernels); this file owns the weight's layout and
//! the product.

#[cfg(target_arch = "x86_64")]
mod amx;
mod dots;
mod quantize;
#[cfg(test)]
mod tests;
#[cfg(target_arch = "x86_64")]
mod x86;

use std::ops::Range;

use super::few_rows::by_column_ranges;

use dots::{integer_dots, prepared};
use quantize::{InputBytes, QuantizedRows};

pub use dots::DotKernel;
pub use quantize::{as_signed, quantize_rows};

/// Bytes a row is padded to: one AVX-512 register. The padding is zeros, which add nothing.
const ALIGN: usize = 64;

/// Output rows per parallel task.
const CHUNK: usize = 64;

/// A weight `(out, in)` quantized per output row, laid out for the kernel that reads it.
pub struct QuantizedMatrix {
    out: usize,
    inp: usize,
    /// Row length: `inp` rounded up to [`ALIGN`].
    stride: usize,
    /// The kernel `data` is laid out for.
    kernel: DotKernel,
    /// For the SIMD kernels, packed: for each block of [`DotKernel::block`] outputs (the
    /// last one padded with zero rows) and each group of 4 inputs, the block's 4 bytes per
    /// output side by side, so that one register-wide load feeds one `vpdpbusd` (or AVX2's
    /// three instructions) that adds to all the block's sums at once. For the plain loop,
    /// row-major, each row `stride` long, zero-padded.
    data: Vec<i8>,
    /// Row `j` is `scales[j] * data[j]`.
    scales: Vec<f32>,
    /// `sum_k data[j][k]`: the kernels take `shift` times it off their shifted sums.
    weight_sums: Vec<i32>,
}

impl QuantizedMatrix {
    /// Quantizes `w`, `(out, inp)` row-major, for the best kernel this CPU has.
    pub fn quantize(w: &[f32], out: usize, inp: usize) -> Self {
        Self::quantize_for(DotKernel::best(), w, out, inp)
    }

    /// Quantizes `w`, `(out, inp)` row-major, each row by its largest magnitude over 127, in
    /// the layout `kernel` reads.
    pub fn quantize_for(kernel: DotKernel, w: &[f32], out: usize, inp: usize) -> Self {
        let (values, scales) = quantize_rows(w, out, inp);
        Self::from_rows_for(kernel, &values, scales, out, inp)
    }

    /// From int8 `values` `(out, inp)` row-major and one scale per row (what
    /// [`quantize_rows`] gives and an int8 checkpoint holds), for the best kernel this CPU has.
    pub fn from_rows(values: &[i8], scales: Vec<f32>, out: usize, inp: usize) -> Self {
        Self::from_rows_for(DotKernel::best(), values, scales, out, inp)
    }

    fn from_rows_for(
        kernel: DotKernel,
        values: &[i8],
        scales: Vec<f32>,
        out: usize,
        inp: usize,
    ) -> Self {
        assert!(
            values.len() == out * inp && scales.len() == out,
            "from_rows: {out} x {inp} weight of {} values and {} scales",
            values.len(),
            scales.len()
        );
        let stride = inp.div_ceil(ALIGN) * ALIGN;
        let weight_sums = (0..out)
            .map(|j| {
                values[j * inp..(j + 1) * inp]
                    .iter()
                    .map(|&q| i32::from(q))
                    .sum::<i32>()
            })
            .collect();
        if let Some(block) = kernel.block() {
            // Packed straight from `values`: no padded copy of a large table on the way.
            let data = packed(values, inp, out, stride, block);
            return Self::from_parts(kernel, out, inp, data, scales, weight_sums);
        }
        let mut data = vec![0i8; out * stride];
        for j in 0..out {
            data[j * stride..j * stride + inp].copy_from_slice(&values[j * inp..(j + 1) * inp]);
        }
        Self::from_parts(kernel, out, inp, data, scales, weight_sums)
    }

    /// From row-major `rows`, in the layout `kernel` reads.
    fn laid_out(
        kernel: DotKernel,
        out: usize,
        inp: usize,
        rows: Vec<i8>,
        scales: Vec<f32>,
        weight_sums: Vec<i32>,
    ) -> Self {
        let stride = inp.div_ceil(ALIGN) * ALIGN;
        let data = match kernel.block() {
            Some(block) => packed(&rows, stride, out, stride, block),
            None => rows,
        };
        Self::from_parts(kernel, out, inp, data, scales, weight_sums)
    }

    /// A matrix whose `data` is already in `kernel`'s layout.
    fn from_parts(
        kernel: DotKernel,
        out: usize,
        inp: usize,
        data: Vec<i8>,
        scales: Vec<f32>,
        weight_sums: Vec<i32>,
    ) -> Self {
        Self {
            out,
            inp,
            stride: inp.div_ceil(ALIGN) * ALIGN,
            kernel,
            data,
            scales,
            weight_sums,
        }
    }

    /// The quantized rows, row-major with rows `stride` long, whatever the layout.
    fn rows(&self) -> Vec<i8> {
        if self.kernel.block().is_none() {
            return self.data[..self.out * self.stride].to_vec();
        }
        let mut rows = vec![0i8; self.out * self.stride];
        for (j, row) in rows.chunks_exact_mut(self.stride).enumerate() {
            self.copy_row(j, row);
        }
        rows
    }

    /// Row `j`'s `stride` quantized values into `into`, whatever the layout.
    fn copy_row(&self, j: usize, into: &mut [i8]) {
        let Some(outputs) = self.kernel.block() else {
            into.copy_from_slice(&self.data[j * self.stride..(j + 1) * self.stride]);
            return;
        };
        let groups = self.stride / 4;
        let (block, lane) = (j / outputs, j % outputs);
        for (g, four) in into.chunks_exact_mut(4).enumerate() {
            let at = (block * groups + g) * 4 * outputs + lane * 4;
            four.copy_from_slice(&self.data[at..at + 4]);
        }
    }

    /// The rows `ids` of this matrix, in that order, as a matrix of their own (a Generator
    /// restricted to a vocabulary map's candidates); `None` when an id is not a row.
    pub fn selected_rows(&self, ids: &[u32]) -> Option<Self> {
        let mut rows = vec![0i8; ids.len() * self.stride];
        let (mut scales, mut weight_sums) = (Vec::with_capacity(ids.len()), Vec::new());
        for (&id, row) in ids.iter().zip(rows.chunks_exact_mut(self.stride)) {
            let j = usize::try_from(id).ok().filter(|&j| j < self.out)?;
            self.copy_row(j, row);
            scales.push(self.scales[j]);
            weight_sums.push(self.weight_sums[j]);
        }
        Some(Self::laid_out(
            self.kernel,
            ids.len(),
            self.inp,
            rows,
            scales,
            weight_sums,
        ))
    }

    /// The rows of `parts`, one after another, as one matrix (their input sizes must agree).
    pub fn concatenated(parts: &[&Self]) -> Self {
        let inp = parts[0].inp;
        assert!(
            parts
                .iter()
                .all(|p| p.inp == inp && p.kernel == parts[0].kernel),
            "concatenated: input sizes or layouts differ"
        );
        let (mut rows, mut scales, mut weight_sums) = (Vec::new(), Vec::new(), Vec::new());
        for part in parts {
            rows.extend(part.rows());
            scales.extend_from_slice(&part.scales);
            weight_sums.extend_from_slice(&part.weight_sums);
        }
        let out = parts.iter().map(|p| p.out).sum();
        Self::laid_out(parts[0].kernel, out, inp, rows, scales, weight_sums)
    }

    /// The int8 values `(out, inp)` row-major and the row scales: what an int8 checkpoint
    /// holds.
    pub fn to_rows(&self) -> (Vec<i8>, Vec<f32>) {
        let rows = self.rows();
        let mut values = Vec::with_capacity(self.out * self.inp);
        for j in 0..self.out {
            values.extend_from_slice(&rows[j * self.stride..j * self.stride + self.inp]);
        }
        (values, self.scales.clone())
    }

    /// Rows `ids` back in f32, each times `factor`, one after another: an int8 embedding
    /// table's lookup. `None` when an id is not a row.
    pub fn rows_dequantized(&self, ids: &[u32], factor: f32) -> Option<Vec<f32>> {
        let mut out = Vec::with_capacity(ids.len() * self.inp);
        let groups = self.stride / 4;
        for &id in ids {
            let j = usize::try_from(id).ok().filter(|&j| j < self.out)?;
            let scale = self.scales[j] * factor;
            if let Some(outputs) = self.kernel.block() {
                let (block, lane) = (j / outputs, j % outputs);
                let base = block * groups * 4 * outputs + lane * 4;
                out.extend(
                    (0..self.inp).map(|k| {
                        f32::from(self.data[base + (k / 4) * 4 * outputs + k % 4]) * scale
                    }),
                );
            } else {
                let row = &self.data[j * self.stride..j * self.stride + self.inp];
                out.extend(row.iter().map(|&q| f32::from(q) * scale));
            }
        }
        Some(out)
    }

    /// Output features.
    pub fn out_features(&self) -> usize {
        self.out
    }

    /// Input features.
    pub fn in_features(&self) -> usize {
        self.inp
    }

    /// Bytes held.
    pub fn bytes(&self) -> usize {
        self.data.len() + 8 * self.out
    }

    /// The weight back in f32, `(out, inp)` row-major.
    pub fn dequantized(&self) -> Vec<f32> {
        let rows = self.rows();
        let mut w = Vec::with_capacity(self.out * self.inp);
        for j in 0..self.out {
            let row = &rows[j * self.stride..j * self.stride + self.inp];
            w.extend(row.iter().map(|&q| f32::from(q) * self.scales[j]));
        }
        w
    }

    /// `x W^T + b` for `x` `(rows, inp)` row-major: `(rows, out)`.
    pub fn product(&self, x: &[f32], rows: usize, bias: Option<&[f32]>) -> Vec<f32> {
        let inputs = prepared(x, rows, (self.inp, self.stride), self.kernel);
        by_column_ranges(rows, self.out, CHUNK, |range| {
            let sums = integer_dots(&inputs, self, range.clone());
            self.rescaled(&inputs, &sums, range, bias)
        })
    }

    /// A block of integer sums `(rows, range)` as floats, scaled, plus the bias: one plain
    /// loop per row over slices, which the compiler vectorizes.
    fn rescaled(
        &self,
        inputs: &QuantizedRows,
        sums: &[i32],
        range: Range<usize>,
        bias: Option<&[f32]>,
    ) -> Vec<f32> {
        let width = range.len();
        let mut block = vec![0f32; sums.len()];
        let scales = &self.scales[range.clone()];
        let bias = bias.map(|b| &b[range]);
        for ((out, sums), &x_scale) in block
            .chunks_exact_mut(width.max(1))
            .zip(sums.chunks_exact(width.max(1)))
            .zip(&inputs.scales)
        {
            match bias {
                Some(bias) => {
                    for (((y, &sum), &w_scale), &b) in
                        out.iter_mut().zip(sums).zip(scales).zip(bias)
                    {
                        *y = sum as f32 * (x_scale * w_scale) + b;
                    }
                }
                None => {
                    for ((y, &sum), &w_scale) in out.iter_mut().zip(sums).zip(scales) {
                        *y = sum as f32 * (x_scale * w_scale);
                    }
                }
            }
        }
        block
    }
}

/// `out` rows of `row_len` values (row-major) in the SIMD kernels' layout: blocks of
/// `outputs` rows, each row's values in groups of 4 side by side, rows padded with zeros to
/// `stride`.
fn packed(rows: &[i8], row_len: usize, out: usize, stride: usize, outputs: usize) -> Vec<i8> {
    let groups = stride / 4;
    let mut packed = vec![0i8; out.div_ceil(outputs) * outputs * stride];
    for j in 0..out {
        let (block, lane) = (j / outputs, j % outputs);
        let row = &rows[j * row_len..(j + 1) * row_len];
        for g in 0..groups {
            let start = (g * 4).min(row_len);
            let group = &row[start..(start + 4).min(row_len)];
            let at = (block * groups + g) * 4 * outputs + lane * 4;
            packed[at..at + group.len()].copy_from_slice(group);
        }
    }
    packed
}
