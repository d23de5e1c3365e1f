//! The integer dot products: which instructions run them (the best the CPU has, chosen at
//! run time) and the plain loop that every SIMD kernel must equal.

use std::ops::Range;

use super::super::isa::Isa;
use super::quantize::{InputBytes, QuantizedRows};
#[cfg(target_arch = "x86_64")]
use super::x86;
use super::QuantizedMatrix;

/// Which instructions the integer dot products run on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DotKernel {
    Avx512Vnni,
    AvxVnni,
    Avx2,
    Portable,
}

impl DotKernel {
    /// The best this CPU runs under the ISA cap.
    pub fn best() -> Self {
        *Self::available().last().unwrap_or(&Self::Portable)
    }

    /// Every kernel this CPU runs under the ISA cap, worst first (for the tests).
    pub fn available() -> Vec<Self> {
        let mut kernels = vec![Self::Portable];
        if Isa::Avx2.runs() {
            kernels.push(Self::Avx2);
        }
        if Isa::Avx2Vnni.runs() {
            kernels.push(Self::AvxVnni);
        }
        if Isa::Avx512Vnni.runs() {
            kernels.push(Self::Avx512Vnni);
        }
        kernels
    }

    /// Outputs per block of the packed layout this kernel reads (one register of i32 sums),
    /// or None for the plain loop's row-major layout.
    pub(super) fn block(self) -> Option<usize> {
        match self {
            Self::Avx512Vnni => Some(16),
            Self::AvxVnni | Self::Avx2 => Some(8),
            Self::Portable => None,
        }
    }

    /// How the kernel reads its input rows.
    pub(super) fn input_bytes(self) -> InputBytes {
        match self {
            Self::Avx512Vnni | Self::AvxVnni => InputBytes::Shifted8,
            Self::Avx2 => InputBytes::Shifted7,
            Self::Portable => InputBytes::Signed,
        }
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
pub(super) fn integer_dots(
    inputs: &QuantizedRows,
    w: &QuantizedMatrix,
    range: Range<usize>,
) -> Vec<i32> {
    let mut sums = vec![0i32; inputs.rows * range.len()];
    #[cfg(target_arch = "x86_64")]
    if on_tiles(w.kernel, inputs.rows) {
        // SAFETY: `on_tiles` found the tiles usable; `w` is in the AVX-512 VNNI layout, and
        // `amx::dots` checks that the inputs hold whole tiles (`prepared` pads them).
        unsafe { super::amx::dots(inputs, w, range, &mut sums) };
        return sums;
    }
    match w.kernel {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: `best` and `available` offer a kernel only where the CPU has its features.
        DotKernel::Avx512Vnni => unsafe { x86::dots_avx512_vnni(inputs, w, range, &mut sums) },
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

/// `x`'s rows quantized as `kernel` reads them, padded to whole tiles where the product runs
/// on them: once per product, before its parallel tasks.
pub(super) fn prepared(
    x: &[f32],
    rows: usize,
    (inp, stride): (usize, usize),
    kernel: DotKernel,
) -> QuantizedRows {
    let inputs = QuantizedRows::of(x, rows, inp, stride, kernel.input_bytes());
    #[cfg(target_arch = "x86_64")]
    if on_tiles(kernel, rows) {
        return inputs.padded_to(rows.next_multiple_of(super::amx::ROWS));
    }
    inputs
}

/// Whether a product of `rows` rows by a matrix laid out for `kernel` runs on the AMX tiles:
/// AVX-512 VNNI's layout is theirs, and from [`super::amx::MIN_ROWS`] rows they are faster.
pub(super) fn on_tiles(kernel: DotKernel, rows: usize) -> bool {
    #[cfg(target_arch = "x86_64")]
    return kernel == DotKernel::Avx512Vnni && rows >= super::amx::MIN_ROWS && super::amx::runs();
    #[cfg(not(target_arch = "x86_64"))]
    false
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
