//! Floats to int8: each row by its largest magnitude over 127, one scale per row, for the
//! weights once and for each input row as it arrives.

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
            .map(|(row, q)| quantize_into(row, q, 127.0))
            .collect()
    };
    (values, scales)
}

/// `row` quantized into `q` by its largest magnitude, which becomes `limit` (127, or 63 for
/// AVX2's inputs): returns the scale (1 for a zero row,
/// NaN for a row holding NaN or an infinity, so that the product says so as float32's would
/// instead of turning an overflow into plausible numbers).
fn quantize_into(row: &[f32], q: &mut [i8], limit: f32) -> f32 {
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
    let scale = largest / limit;
    let scale = if scale >= f32::MIN_POSITIVE {
        scale
    } else {
        1.0
    };
    let inverse = 1.0 / scale;
    for (q, &v) in q.iter_mut().zip(row) {
        *q = (((v * inverse).clamp(-limit, limit) + ROUNDING) - ROUNDING) as i32 as i8;
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

/// How a kernel reads the input rows' bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum InputBytes {
    /// Signed, in [-127, 127]: the plain loop.
    Signed,
    /// In [-127, 127] plus 128: VNNI's `vpdpbusd` multiplies unsigned bytes by signed ones.
    Shifted8,
    /// In [-63, 63] plus 64: AVX2's `vpmaddubsw` saturates its pairs of products at i16, and
    /// `2 x 127 x 127` fits where `2 x 255 x 127` would not (fbgemm's `reduce_range`). One
    /// instruction fewer per register than multiplying `|x|` by `w` with `x`'s sign, for
    /// half a bit of the input's precision.
    Shifted7,
}

impl InputBytes {
    /// The largest magnitude a row is quantized to.
    fn limit(self) -> f32 {
        match self {
            Self::Signed | Self::Shifted8 => 127.0,
            Self::Shifted7 => 63.0,
        }
    }

    /// What is added to every quantized value.
    pub(super) fn shift(self) -> i32 {
        match self {
            Self::Signed => 0,
            Self::Shifted8 => 128,
            Self::Shifted7 => 64,
        }
    }
}

/// Input rows quantized for one product: the signed values, and for the SIMD kernels the
/// same plus `shift` as unsigned bytes.
#[derive(Clone)]
pub(super) struct QuantizedRows {
    pub(super) rows: usize,
    pub(super) stride: usize,
    pub(super) signed: Vec<i8>,
    pub(super) shifted: Vec<u8>,
    /// What `shifted` adds to `signed`: the kernels take `shift sum_k w[j][k]` off again.
    pub(super) shift: i32,
    pub(super) scales: Vec<f32>,
}

impl QuantizedRows {
    /// The same rows with the shifted bytes padded to `rows` rows (what the AMX kernel reads
    /// in whole tiles; the padding's sums are dropped).
    pub(super) fn padded_to(mut self, rows: usize) -> Self {
        if self.shifted.len() < rows * self.stride {
            self.shifted.resize(rows * self.stride, 0);
        }
        self
    }

    /// `x`'s rows quantized as `bytes` says.
    pub(super) fn of(x: &[f32], rows: usize, inp: usize, stride: usize, bytes: InputBytes) -> Self {
        let mut signed = vec![0i8; rows * stride];
        let scales = (0..rows)
            .map(|r| {
                quantize_into(
                    &x[r * inp..(r + 1) * inp],
                    &mut signed[r * stride..r * stride + inp],
                    bytes.limit(),
                )
            })
            .collect();
        let shift = bytes.shift();
        let shifted = match shift {
            0 => Vec::new(),
            // Wrapping: -127..=127 plus 128 (or -63..=63 plus 64) is 1..=255 as a byte.
            _ => signed
                .iter()
                .map(|&q| (q as u8).wrapping_add(shift as u8))
                .collect(),
        };
        Self {
            rows,
            stride,
            signed,
            shifted,
            shift,
            scales,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
