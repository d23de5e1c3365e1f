//! The integer dot products: which instructions run them (the best the CPU has, chosen at
//! run time) and the plain loop that every SIMD kernel must equal.

use std::ops::Range;

use super::quantize::QuantizedRows;
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
pub(super) fn integer_dots(
    inputs: &QuantizedRows,
    w: &QuantizedMatrix,
    range: Range<usize>,
) -> Vec<i32> {
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
