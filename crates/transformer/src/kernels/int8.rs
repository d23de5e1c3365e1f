//! int8 products for decoding on the CPU (`--compute-type int8`, CTranslate2's scheme): the
//! weight `W` `(out, in)` is quantized once, one symmetric scale per output row; each input
//! row is quantized when it arrives, one scale per row; the products are summed in i32 and
//! scaled back: `y[r][j] = b[j] + s_x[r] s_w[j] sum_k q_x[r][k] q_w[j][k]`.
//!
//! The integer dot products run on the best instructions the CPU has, chosen at run time:
//! AVX-512 VNNI (`vpdpbusd`, 64 bytes a step), AVX-VNNI (the same on 32 bytes), AVX2
//! (`vpmaddubsw` then `vpmaddwd`), or plain Rust. The VNNI instructions multiply unsigned by
//! signed bytes, so there the input is shifted by 128 and `128 sum_k q_w[j][k]` taken off
//! again; AVX2's `vpmaddubsw` would saturate on that, so it multiplies `|q_x|` by `q_w` with
//! `q_x`'s sign instead. Both give exactly the integer sums the plain loop gives, which the
//! tests check. Values are kept in [-127, 127] so that no path overflows.

use std::ops::Range;

use super::few_rows::by_column_ranges;

/// Bytes a row is padded to: one AVX-512 register. The padding is zeros, which add nothing.
const ALIGN: usize = 64;

/// Output rows per parallel task.
const CHUNK: usize = 64;

/// Outputs per block of the packed layout: one AVX-512 register of i32 sums.
const BLOCK: usize = 16;

/// A weight `(out, in)` quantized per output row, laid out for the kernel that reads it.
pub struct QuantizedMatrix {
    out: usize,
    inp: usize,
    /// Row length: `inp` rounded up to [`ALIGN`].
    stride: usize,
    /// The kernel `data` is laid out for.
    kernel: DotKernel,
    /// Row-major, each row `stride` long, zero-padded; for AVX-512 VNNI packed instead: for
    /// each block of [`BLOCK`] outputs (the last one padded with zero rows) and each group of
    /// 4 inputs, the 16 outputs' 4 bytes side by side, so that one 64-byte load feeds one
    /// `vpdpbusd` that adds to all 16 outputs' sums at once (no horizontal sums).
    data: Vec<i8>,
    /// Row `j` is `scales[j] * data[j]`.
    scales: Vec<f32>,
    /// `128 sum_k data[j][k]`: what the VNNI paths take off their shifted sums.
    offsets: Vec<i32>,
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
        let mut data = vec![0i8; out * stride];
        let mut offsets = Vec::with_capacity(out);
        for j in 0..out {
            let row = &values[j * inp..(j + 1) * inp];
            data[j * stride..j * stride + inp].copy_from_slice(row);
            offsets.push(128 * row.iter().map(|&q| i32::from(q)).sum::<i32>());
        }
        Self::laid_out(kernel, out, inp, data, scales, offsets)
    }

    /// From row-major `rows`, in the layout `kernel` reads.
    fn laid_out(
        kernel: DotKernel,
        out: usize,
        inp: usize,
        rows: Vec<i8>,
        scales: Vec<f32>,
        offsets: Vec<i32>,
    ) -> Self {
        let stride = inp.div_ceil(ALIGN) * ALIGN;
        let data = if kernel == DotKernel::Avx512Vnni {
            let groups = stride / 4;
            let mut packed = vec![0i8; out.div_ceil(BLOCK) * BLOCK * stride];
            for j in 0..out {
                let (block, lane) = (j / BLOCK, j % BLOCK);
                for g in 0..groups {
                    let at = (block * groups + g) * 4 * BLOCK + lane * 4;
                    packed[at..at + 4].copy_from_slice(&rows[j * stride + g * 4..][..4]);
                }
            }
            packed
        } else {
            rows
        };
        Self {
            out,
            inp,
            stride,
            kernel,
            data,
            scales,
            offsets,
        }
    }

    /// The quantized rows, row-major with rows `stride` long, whatever the layout.
    fn rows(&self) -> Vec<i8> {
        if self.kernel != DotKernel::Avx512Vnni {
            return self.data[..self.out * self.stride].to_vec();
        }
        let groups = self.stride / 4;
        let mut rows = vec![0i8; self.out * self.stride];
        for j in 0..self.out {
            let (block, lane) = (j / BLOCK, j % BLOCK);
            for g in 0..groups {
                let at = (block * groups + g) * 4 * BLOCK + lane * 4;
                rows[j * self.stride + g * 4..][..4].copy_from_slice(&self.data[at..at + 4]);
            }
        }
        rows
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
        let (mut rows, mut scales, mut offsets) = (Vec::new(), Vec::new(), Vec::new());
        for part in parts {
            rows.extend(part.rows());
            scales.extend_from_slice(&part.scales);
            offsets.extend_from_slice(&part.offsets);
        }
        let out = parts.iter().map(|p| p.out).sum();
        Self::laid_out(parts[0].kernel, out, inp, rows, scales, offsets)
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
            if self.kernel == DotKernel::Avx512Vnni {
                let (block, lane) = (j / BLOCK, j % BLOCK);
                let base = block * groups * 4 * BLOCK + lane * 4;
                out.extend(
                    (0..self.inp)
                        .map(|k| f32::from(self.data[base + (k / 4) * 4 * BLOCK + k % 4]) * scale),
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
        // The VNNI kernels read the input shifted by 128, the others signed.
        let shifted = matches!(self.kernel, DotKernel::Avx512Vnni | DotKernel::AvxVnni);
        let inputs = QuantizedRows::of(x, rows, self.inp, self.stride, shifted);
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

/// Bytes read as the `i8`s they hold (an int8 tensor is carried in a `U8` one).
pub fn as_signed(bytes: &[u8]) -> &[i8] {
    // SAFETY: u8 and i8 have one size and alignment, and every bit pattern is valid for both.
    unsafe { std::slice::from_raw_parts(bytes.as_ptr().cast::<i8>(), bytes.len()) }
}

/// `w` `(out, inp)` row-major quantized row by row (see [`quantize_into`]): the int8 values,
/// row-major, and one scale per row.
pub fn quantize_rows(w: &[f32], out: usize, inp: usize) -> (Vec<i8>, Vec<f32>) {
    assert_eq!(
        w.len(),
        out * inp,
        "quantize: {out} x {inp} weight of {}",
        w.len()
    );
    let mut values = vec![0i8; out * inp];
    let scales = if inp == 0 {
        vec![1.0; out]
    } else {
        w.chunks_exact(inp)
            .zip(values.chunks_exact_mut(inp))
            .map(|(row, q)| quantize_into(row, q))
            .collect()
    };
    (values, scales)
}

/// `row` quantized into `q` by its largest magnitude: returns the scale (1 for a zero row,
/// NaN for a row holding NaN or an infinity, so that the product says so as float32's would
/// instead of turning an overflow into plausible numbers).
fn quantize_into(row: &[f32], q: &mut [i8]) -> f32 {
    const ROUNDING: f32 = 12_582_912.0;
    // Plain maps over slices, which the compiler vectorizes: rounding to nearest (even) by
    // adding and taking off 1.5 * 2^23, which leaves no fraction bits, where `round` and
    // `round_ties_even` are library calls without SSE4.1.
    let (largest, finite) = largest_magnitude(row);
    if !finite {
        return f32::NAN;
    }
    // A zero row, or one so small that its scale would not be a normal float (and its
    // inverse overflow), is stored as zeros with scale 1.
    let scale = largest / 127.0;
    let scale = if scale >= f32::MIN_POSITIVE {
        scale
    } else {
        1.0
    };
    let inverse = 1.0 / scale;
    for (q, &v) in q.iter_mut().zip(row) {
        *q = (((v * inverse).clamp(-127.0, 127.0) + ROUNDING) - ROUNDING) as i32 as i8;
    }
    scale
}

/// The largest `|v|` of `row`, and whether every value is finite: 16 lanes side by side
/// (one register), because a float fold over one accumulator is not reordered (so not
/// vectorized) by the compiler.
fn largest_magnitude(row: &[f32]) -> (f32, bool) {
    const LANES: usize = 16;
    let mut largest = [0f32; LANES];
    // 0 v is 0 for a finite v and NaN for NaN and the infinities.
    let mut zeros = [0f32; LANES];
    let chunks = row.chunks_exact(LANES);
    let tail = chunks.remainder();
    for chunk in chunks {
        for i in 0..LANES {
            largest[i] = largest[i].max(chunk[i].abs());
            zeros[i] += chunk[i] * 0.0;
        }
    }
    for (i, &v) in tail.iter().enumerate() {
        largest[i] = largest[i].max(v.abs());
        zeros[i] += v * 0.0;
    }
    let finite = zeros.iter().all(|&z| z == 0.0);
    (largest.iter().fold(0f32, |m, &v| m.max(v)), finite)
}

/// Input rows quantized for one product: signed (AVX2, plain) and shifted by 128 (VNNI).
struct QuantizedRows {
    rows: usize,
    stride: usize,
    signed: Vec<i8>,
    shifted: Vec<u8>,
    scales: Vec<f32>,
}

impl QuantizedRows {
    /// `x`'s rows quantized, and shifted by 128 as well when the kernel reads them so (the
    /// signed bytes are then not read again).
    fn of(x: &[f32], rows: usize, inp: usize, stride: usize, shift: bool) -> Self {
        let mut signed = vec![0i8; rows * stride];
        let scales = (0..rows)
            .map(|r| {
                quantize_into(
                    &x[r * inp..(r + 1) * inp],
                    &mut signed[r * stride..r * stride + inp],
                )
            })
            .collect();
        let shifted = if shift {
            signed.iter().map(|&q| (q as u8) ^ 0x80).collect()
        } else {
            Vec::new()
        };
        Self {
            rows,
            stride,
            signed,
            shifted,
            scales,
        }
    }
}

/// Which instructions the integer dot products run on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DotKernel {
    Avx512Vnni,
    AvxVnni,
    Avx2,
    Portable,
}

impl DotKernel {
    /// The best this CPU has.
    pub fn best() -> Self {
        #[cfg(target_arch = "x86_64")]
        {
            use std::arch::is_x86_feature_detected as has;
            if has!("avx512f") && has!("avx512bw") && has!("avx512vnni") {
                return Self::Avx512Vnni;
            }
            if has!("avx2") && has!("avxvnni") {
                return Self::AvxVnni;
            }
            if has!("avx2") {
                return Self::Avx2;
            }
        }
        Self::Portable
    }

    /// Every kernel this CPU can run (for the tests).
    pub fn available() -> Vec<Self> {
        let mut kernels = vec![Self::Portable];
        #[cfg(target_arch = "x86_64")]
        {
            use std::arch::is_x86_feature_detected as has;
            if has!("avx2") {
                kernels.push(Self::Avx2);
            }
            if has!("avx2") && has!("avxvnni") {
                kernels.push(Self::AvxVnni);
            }
            if has!("avx512f") && has!("avx512bw") && has!("avx512vnni") {
                kernels.push(Self::Avx512Vnni);
            }
        }
        kernels
    }

    /// For tables of measurements: the instructions' name.
    pub fn name(self) -> &'static str {
        match self {
            Self::Avx512Vnni => "avx512-vnni",
            Self::AvxVnni => "avx-vnni",
            Self::Avx2 => "avx2",
            Self::Portable => "portable",
        }
    }
}

/// `sum_k q_x[r][k] q_w[j][k]` for every row and every `j` in `range`, `(rows, range)`, by the
/// kernel `w` is laid out for.
fn integer_dots(inputs: &QuantizedRows, w: &QuantizedMatrix, range: Range<usize>) -> Vec<i32> {
    let mut sums = vec![0i32; inputs.rows * range.len()];
    match w.kernel {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: `best` and `available` offer a kernel only where the CPU has its features.
        DotKernel::Avx512Vnni => unsafe { x86::dots_packed(inputs, w, range, &mut sums) },
        #[cfg(target_arch = "x86_64")]
        // SAFETY: as above.
        DotKernel::AvxVnni => unsafe { x86::dots_avx_vnni(inputs, w, range, &mut sums) },
        #[cfg(target_arch = "x86_64")]
        // SAFETY: as above.
        DotKernel::Avx2 => unsafe { x86::dots_avx2(inputs, w, range, &mut sums) },
        _ => dots_portable(inputs, w, range, &mut sums),
    }
    sums
}

fn dots_portable(
    inputs: &QuantizedRows,
    w: &QuantizedMatrix,
    range: Range<usize>,
    sums: &mut [i32],
) {
    let width = range.len();
    for (i, j) in range.enumerate() {
        let row = &w.data[j * w.stride..(j + 1) * w.stride];
        for r in 0..inputs.rows {
            let x = &inputs.signed[r * inputs.stride..(r + 1) * inputs.stride];
            sums[r * width + i] = x
                .iter()
                .zip(row)
                .map(|(&a, &b)| i32::from(a) * i32::from(b))
                .sum();
        }
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::*;
    use std::ops::Range;

    use super::{QuantizedMatrix, QuantizedRows, BLOCK};

    /// The packed layout's kernel (see [`QuantizedMatrix`]): for each tile of up to 8 input
    /// rows and each step of `B` blocks of 16 outputs, `T x B` accumulators of 16 sums; per
    /// group of 4 inputs, one 64-byte load per block and, per row, a broadcast of its 4 bytes
    /// and `B` `vpdpbusd`s. Several blocks a step keep enough independent sums in flight to
    /// hide `vpdpbusd`'s latency when the tile has few rows (one row: four blocks).
    #[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
    pub(super) unsafe fn dots_packed(
        inputs: &QuantizedRows,
        w: &QuantizedMatrix,
        range: Range<usize>,
        sums: &mut [i32],
    ) {
        let mut r0 = 0;
        while r0 < inputs.rows {
            match inputs.rows - r0 {
                1 => packed_tile::<1, 4>(inputs, w, &range, r0, sums),
                2 => packed_tile::<2, 4>(inputs, w, &range, r0, sums),
                3 => packed_tile::<3, 4>(inputs, w, &range, r0, sums),
                4 => packed_tile::<4, 2>(inputs, w, &range, r0, sums),
                5 => packed_tile::<5, 2>(inputs, w, &range, r0, sums),
                6 => packed_tile::<6, 2>(inputs, w, &range, r0, sums),
                7 => packed_tile::<7, 2>(inputs, w, &range, r0, sums),
                _ => packed_tile::<8, 2>(inputs, w, &range, r0, sums),
            }
            r0 += (inputs.rows - r0).min(8);
        }
    }

    /// Rows `r0..r0 + T` against every block of `range`, `B` blocks a step (one at a time
    /// for the blocks left over).
    #[inline]
    #[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
    unsafe fn packed_tile<const T: usize, const B: usize>(
        inputs: &QuantizedRows,
        w: &QuantizedMatrix,
        range: &Range<usize>,
        r0: usize,
        sums: &mut [i32],
    ) {
        let last = range.end.div_ceil(BLOCK);
        let mut block = range.start / BLOCK;
        while block + B <= last {
            packed_blocks::<T, B>(inputs, w, range, r0, block, sums);
            block += B;
        }
        while block < last {
            packed_blocks::<T, 1>(inputs, w, range, r0, block, sums);
            block += 1;
        }
    }

    #[inline]
    #[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
    unsafe fn packed_blocks<const T: usize, const B: usize>(
        inputs: &QuantizedRows,
        w: &QuantizedMatrix,
        range: &Range<usize>,
        r0: usize,
        first_block: usize,
        sums: &mut [i32],
    ) {
        let width = range.len();
        let groups = w.stride / 4;
        let block_bytes = groups * 4 * BLOCK;
        let weights = w.data.as_ptr().add(first_block * block_bytes);
        let mut acc = [[_mm512_setzero_si512(); B]; T];
        for g in 0..groups {
            let mut wv = [_mm512_setzero_si512(); B];
            for (b, wv) in wv.iter_mut().enumerate() {
                *wv = _mm512_loadu_si512(weights.add(b * block_bytes + g * 4 * BLOCK).cast());
            }
            for (t, acc) in acc.iter_mut().enumerate() {
                let x = inputs
                    .shifted
                    .as_ptr()
                    .add((r0 + t) * inputs.stride + g * 4);
                let xb = _mm512_set1_epi32(x.cast::<i32>().read_unaligned());
                for (acc, wv) in acc.iter_mut().zip(&wv) {
                    *acc = _mm512_dpbusd_epi32(*acc, xb, *wv);
                }
            }
        }
        for (t, acc) in acc.iter().enumerate() {
            for (b, acc) in acc.iter().enumerate() {
                let mut lanes = [0i32; BLOCK];
                _mm512_storeu_si512(lanes.as_mut_ptr().cast(), *acc);
                for (lane, sum) in lanes.iter().enumerate() {
                    let j = (first_block + b) * BLOCK + lane;
                    if range.contains(&j) {
                        sums[(r0 + t) * width + j - range.start] = sum - w.offsets[j];
                    }
                }
            }
        }
    }

    /// Defines a kernel that fills `sums` `(rows, range)`: outputs outer and input rows inner,
    /// so that each weight row is read from memory once and then from L1. Per output and row,
    /// `$step` adds one register's worth (`$bytes`) of products of the `$inputs` bytes (shifted
    /// or signed) and the weight row into an i32 accumulator, which `$sum` totals; `$offset`
    /// subtracts the shift's share (`128 sum_k w`) or not.
    macro_rules! dot_kernel {
        ($name:ident, $features:literal, $bytes:literal, $load:path, $inputs:ident,
         $offset:literal, $zero:expr, |$acc:ident, $x:ident, $w:ident| $step:expr, |$total:ident| $sum:expr) => {
            #[target_feature(enable = $features)]
            pub(crate) unsafe fn $name(
                inputs: &QuantizedRows,
                w: &QuantizedMatrix,
                range: Range<usize>,
                sums: &mut [i32],
            ) {
                let width = range.len();
                for (i, j) in range.enumerate() {
                    let row = w.data.as_ptr().add(j * w.stride);
                    for r in 0..inputs.rows {
                        let x = inputs.$inputs.as_ptr().add(r * inputs.stride);
                        let mut $acc = $zero;
                        for k in (0..w.stride).step_by($bytes) {
                            let $x = $load(x.add(k).cast());
                            let $w = $load(row.add(k).cast());
                            $acc = $step;
                        }
                        let $total = $acc;
                        let offset = if $offset { w.offsets[j] } else { 0 };
                        sums[r * width + i] = $sum - offset;
                    }
                }
            }
        };
    }

    mod avx_vnni {
        use super::*;
        dot_kernel!(
            dots,
            "avx2,avxvnni",
            32,
            _mm256_loadu_si256,
            shifted,
            true,
            _mm256_setzero_si256(),
            |acc, x, w| _mm256_dpbusd_avx_epi32(acc, x, w),
            |acc| horizontal_sum(acc)
        );
    }

    mod avx2 {
        use super::*;
        // |x| (unsigned) times w with x's sign: at most 2 * 127 * 127 per pair, inside i16.
        dot_kernel!(
            dots,
            "avx2",
            32,
            _mm256_loadu_si256,
            signed,
            false,
            _mm256_setzero_si256(),
            |acc, x, w| _mm256_add_epi32(
                acc,
                _mm256_madd_epi16(
                    _mm256_maddubs_epi16(_mm256_sign_epi8(x, x), _mm256_sign_epi8(w, x)),
                    _mm256_set1_epi16(1),
                ),
            ),
            |acc| horizontal_sum(acc)
        );
    }

    pub(super) use avx2::dots as dots_avx2;
    pub(super) use avx_vnni::dots as dots_avx_vnni;

    #[inline]
    #[target_feature(enable = "avx2")]
    unsafe fn horizontal_sum(v: __m256i) -> i32 {
        let halves = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256::<1>(v));
        let pairs = _mm_add_epi32(halves, _mm_shuffle_epi32::<0b01_00_11_10>(halves));
        let one = _mm_add_epi32(pairs, _mm_shuffle_epi32::<0b10_11_00_01>(pairs));
        _mm_cvtsi128_si32(one)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn values(n: usize, seed: u32) -> Vec<f32> {
        (0..n)
            .map(|i| {
                ((i as u32).wrapping_mul(2_654_435_761).wrapping_add(seed) % 2001) as f32 / 1000.0
                    - 1.0
            })
            .collect()
    }

    /// A row too small for a normal scale is stored as zeros with scale 1 (a scale of 0
    /// would make the checkpoint unloadable), and a non-finite row gets a NaN scale.
    #[test]
    fn tiny_and_non_finite_rows_get_usable_scales() {
        let (values, scales) = quantize_rows(&[5e-45, 0.0, 1e-40, -1e-39, 0.5, 1.0], 3, 2);
        assert_eq!(&values[..4], &[0, 0, 0, 0]);
        assert_eq!(&scales[..2], &[1.0, 1.0]);
        assert_eq!(&values[4..], &[64, 127]);
        assert!(scales[2] > 0.0);
        let (_, scales) = quantize_rows(&[f32::INFINITY, 1.0], 1, 2);
        assert!(scales[0].is_nan());
    }

    /// Every kernel this CPU has, each on its own layout, gives the plain loop's integer sums
    /// exactly, for sizes that are and are not multiples of a register or a block, for tiles
    /// of rows full and partial, and for the extreme values -127 and 127.
    #[test]
    fn every_kernel_gives_the_plain_integer_sums() {
        for (rows, inp, out) in [(1, 512, 70), (3, 37, 130), (11, 100, 64), (17, 64, 21)] {
            let mut w = values(out * inp, 1);
            w[0] = -5.0; // row 0 reaches -127
            let mut x = values(rows * inp, 2);
            x[1] = 9.0; // row 0 reaches 127
            let plain = QuantizedMatrix::quantize_for(DotKernel::Portable, &w, out, inp);
            let inputs = QuantizedRows::of(&x, rows, inp, plain.stride, true);
            let want = integer_dots(&inputs, &plain, 0..out);
            for kernel in DotKernel::available() {
                let matrix = QuantizedMatrix::quantize_for(kernel, &w, out, inp);
                assert_eq!(matrix.dequantized(), plain.dequantized(), "{kernel:?}");
                let got = integer_dots(&inputs, &matrix, 3..out);
                let width = out - 3;
                for r in 0..rows {
                    assert_eq!(
                        got[r * width..(r + 1) * width],
                        want[r * out + 3..(r + 1) * out],
                        "{kernel:?}, {rows} x {inp} x {out}"
                    );
                }
            }
        }
    }

    /// The int8 product is the float one to within what 8 bits can say: each term is off by at
    /// most half a step of either operand.
    #[test]
    fn the_int8_product_is_the_float_product_within_quantization_error() {
        let (rows, inp, out) = (4, 300, 90);
        let w = values(out * inp, 3);
        let x = values(rows * inp, 4);
        let bias = values(out, 5);
        let matrix = QuantizedMatrix::quantize(&w, out, inp);
        let y = matrix.product(&x, rows, Some(&bias));
        for r in 0..rows {
            for j in 0..out {
                let exact: f32 = (0..inp)
                    .map(|k| x[r * inp + k] * w[j * inp + k])
                    .sum::<f32>()
                    + bias[j];
                // |x|, |w| <= 1: each product is off by at most (1/127) * 1 (both halves).
                let bound = inp as f32 / 127.0;
                let error = (y[r * out + j] - exact).abs();
                assert!(error < bound * 0.1, "{error} at ({r}, {j}), exact {exact}");
            }
        }
        let back = matrix.dequantized();
        assert!(back
            .iter()
            .zip(&w)
            .all(|(a, b)| (a - b).abs() <= 0.5 / 127.0 + 1e-6));
    }

    /// An input row that overflowed gives NaN, as float32's product would, so that decoding
    /// reports damaged weights instead of translating garbage.
    #[test]
    fn a_row_holding_an_infinity_gives_nan_not_numbers() {
        let matrix = QuantizedMatrix::quantize(&values(8 * 64, 9), 8, 64);
        let mut x = values(2 * 64, 10);
        x[70] = f32::INFINITY;
        let y = matrix.product(&x, 2, None);
        assert!(y[..8].iter().all(|v| v.is_finite()));
        assert!(y[8..].iter().all(|v| v.is_nan()));
    }

    #[test]
    fn concatenated_matrices_multiply_as_their_parts() {
        let (a, b) = (values(20 * 64, 6), values(30 * 64, 7));
        for kernel in DotKernel::available() {
            let (qa, qb) = (
                QuantizedMatrix::quantize_for(kernel, &a, 20, 64),
                QuantizedMatrix::quantize_for(kernel, &b, 30, 64),
            );
            let joined = QuantizedMatrix::concatenated(&[&qa, &qb]);
            let x = values(2 * 64, 8);
            let y = joined.product(&x, 2, None);
            let (ya, yb) = (qa.product(&x, 2, None), qb.product(&x, 2, None));
            for r in 0..2 {
                assert_eq!(
                    y[r * 50..r * 50 + 20],
                    ya[r * 20..(r + 1) * 20],
                    "{kernel:?}"
                );
                assert_eq!(
                    y[r * 50 + 20..(r + 1) * 50],
                    yb[r * 30..(r + 1) * 30],
                    "{kernel:?}"
                );
            }
        }
    }
}
