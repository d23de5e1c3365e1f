//! A fixed f32 weight packed once for decoding's products of several rows, on CPUs with
//! AVX2 + FMA or AVX-512: panels of `nr` outputs, each input's `nr` weights side by side, so
//! that a tile of sums stays in registers while the panel streams past (6 x 64 in 24 of
//! AVX-512's 32 registers; 6 x 16 in 12 of AVX2's 16, BLIS's Haswell kernel). gemm (the crate
//! candle multiplies with) repacked the whole weight on every call, a seventh of a batched
//! beam search; here the packing is paid once, when a product of several rows first asks.
//! The work is split over the weight's columns (a decoding step has 2 to a few hundred rows
//! and a weight up to 58,101 outputs wide).

use super::few_rows::by_panels;
use super::isa::Isa;

/// Rows of the input a kernel call multiplies.
const MR: usize = 6;
/// Outputs per parallel task: four AVX-512 panels, sixteen AVX2 ones.
const TASK_COLUMNS: usize = 256;

/// The instructions a packed product runs on; the panel width follows from them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PackedKernel {
    /// 6 x 64 tiles: four 16-lane registers per row.
    Avx512,
    /// 6 x 16 tiles: two 8-lane registers per row.
    Avx2,
}

impl PackedKernel {
    /// The widest kernel this CPU runs under the ISA cap; None on a CPU without AVX2 + FMA,
    /// whose products stay gemm's.
    pub fn best() -> Option<Self> {
        // Asked on every product of several rows: no list built.
        match (Isa::Avx512.runs(), Isa::Avx2.runs()) {
            (true, _) => Some(Self::Avx512),
            (false, true) => Some(Self::Avx2),
            (false, false) => None,
        }
    }

    /// Every kernel this CPU runs under the cap, narrowest first (for the tests).
    #[cfg(test)]
    pub fn available() -> Vec<Self> {
        let mut kernels = Vec::new();
        if Isa::Avx2.runs() {
            kernels.push(Self::Avx2);
        }
        if Isa::Avx512.runs() {
            kernels.push(Self::Avx512);
        }
        kernels
    }

    /// Outputs a panel holds.
    fn panel_width(self) -> usize {
        match self {
            Self::Avx512 => 64,
            Self::Avx2 => 16,
        }
    }
}

/// `W` `(out, inp)` as panels of `nr` outputs: panel `p` is `inp * nr` floats from
/// `p * inp * nr`, input `k`'s `nr` weights side by side (zeros past `out`).
pub struct PackedF32 {
    out: usize,
    inp: usize,
    kernel: PackedKernel,
    panels: Vec<f32>,
}

impl PackedF32 {
    /// Whether this CPU runs a packed kernel (AVX2 + FMA or AVX-512, under the ISA cap);
    /// elsewhere products stay gemm's.
    pub fn runs_here() -> bool {
        PackedKernel::best().is_some()
    }

    /// Packs `w` `(out, inp)` row-major for the best kernel here, panels in parallel; None
    /// where none runs ([`Self::runs_here`]).
    pub fn new(w: &[f32], out: usize, inp: usize) -> Option<Self> {
        PackedKernel::best().map(|kernel| Self::new_for(kernel, w, out, inp))
    }

    /// Packs `w` `(out, inp)` row-major for `kernel`, which the caller knows runs here (one of
    /// [`PackedKernel::available`]).
    pub fn new_for(kernel: PackedKernel, w: &[f32], out: usize, inp: usize) -> Self {
        use rayon::prelude::*;
        assert_eq!(w.len(), out * inp, "PackedF32: {out} x {inp} weight");
        let nr = kernel.panel_width();
        let mut panels = vec![0f32; out.div_ceil(nr) * inp * nr];
        if inp > 0 {
            panels
                .par_chunks_mut(inp * nr)
                .enumerate()
                .for_each(|(p, panel)| {
                    for lane in 0..nr.min(out - p * nr) {
                        let row = &w[(p * nr + lane) * inp..][..inp];
                        for (k, &value) in row.iter().enumerate() {
                            panel[k * nr + lane] = value;
                        }
                    }
                });
        }
        Self {
            out,
            inp,
            kernel,
            panels,
        }
    }

    /// Output features.
    pub fn out_features(&self) -> usize {
        self.out
    }

    /// Input features.
    pub fn in_features(&self) -> usize {
        self.inp
    }

    /// `x W^T + b` for `x` `(rows, inp)` row-major: `(rows, out)`; an error where the sizes
    /// do not fit.
    pub fn product(
        &self,
        x: &[f32],
        rows: usize,
        bias: Option<&[f32]>,
    ) -> Result<Vec<f32>, String> {
        if x.len() != rows * self.inp || bias.is_some_and(|b| b.len() != self.out) {
            return Err(format!(
                "packed f32 product: {} inputs for {rows} rows of a {}x{} weight",
                x.len(),
                self.out,
                self.inp
            ));
        }
        // The input in whole row panels, zeros past the last row.
        let padded_rows = rows.next_multiple_of(MR);
        let mut input = vec![0f32; padded_rows * self.inp];
        input[..x.len()].copy_from_slice(x);
        let nr = self.kernel.panel_width();
        let panels = (nr, TASK_COLUMNS / nr);
        Ok(by_panels((rows, self.out), panels, bias, |panels| {
            self.columns(&input, padded_rows, panels)
        }))
    }

    /// The product's columns of the panels `panels`, `(padded_rows, panels * nr)` row-major.
    fn columns(
        &self,
        input: &[f32],
        padded_rows: usize,
        panels: std::ops::Range<usize>,
    ) -> Vec<f32> {
        let nr = self.kernel.panel_width();
        let padded = panels.len() * nr;
        let mut block = vec![0f32; padded_rows * padded];
        for (i, panel) in panels.enumerate() {
            let b = &self.panels[panel * self.inp * nr..][..self.inp * nr];
            for r0 in (0..padded_rows).step_by(MR) {
                let a = &input[r0 * self.inp..][..MR * self.inp];
                let c = &mut block[r0 * padded + i * nr..][..(MR - 1) * padded + nr];
                #[cfg(target_arch = "x86_64")]
                // SAFETY: the packing chose a kernel the CPU runs; `a` holds MR rows of `inp`
                // floats, `b` a panel of `inp * nr`, and `c` MR rows of nr floats `padded >=
                // nr` apart.
                unsafe {
                    match self.kernel {
                        PackedKernel::Avx512 => tile_avx512(self.inp, a, b, c.as_mut_ptr(), padded),
                        PackedKernel::Avx2 => tile_avx2(self.inp, a, b, c.as_mut_ptr(), padded),
                    }
                };
            }
        }
        block
    }
}

/// Defines a tile kernel: adds `MR` rows of `a` (`k` floats each, contiguous) times the panel
/// `b` (`k` x `$lanes * $vectors`) to the `MR` rows at `c`, `c_stride` floats apart.
///
/// # Safety
/// The CPU must have `$features`; `a` holds `MR * k` floats, `b` `k * nr`; `c` holds `MR`
/// rows of `nr` floats, `c_stride >= nr` apart.
macro_rules! tile_kernel {
    ($name:ident, $features:literal, $vector:ty, $lanes:literal, $vectors:literal,
     $zero:path, $load:path, $store:path, $broadcast:path, $fmadd:path, $add:path) => {
        #[cfg(target_arch = "x86_64")]
        #[target_feature(enable = $features)]
        unsafe fn $name(k: usize, a: &[f32], b: &[f32], c: *mut f32, c_stride: usize) {
            use std::arch::x86_64::*;
            const NR: usize = $lanes * $vectors;
            debug_assert!(a.len() >= MR * k && b.len() >= k * NR && c_stride >= NR);
            let (a, b) = (a.as_ptr(), b.as_ptr());
            let mut sums: [[$vector; $vectors]; MR] = [[$zero(); $vectors]; MR];
            for p in 0..k {
                // SAFETY: `b` holds k * NR floats, so the loads at p * NR are inside.
                let columns: [$vector; $vectors] =
                    std::array::from_fn(|v| unsafe { $load(b.add(p * NR + v * $lanes)) });
                for (r, row) in sums.iter_mut().enumerate() {
                    // SAFETY: `a` holds MR rows of k floats.
                    let x = $broadcast(unsafe { *a.add(r * k + p) });
                    for (sum, column) in row.iter_mut().zip(columns) {
                        *sum = $fmadd(x, column, *sum);
                    }
                }
            }
            for (r, row) in sums.iter().enumerate() {
                for (v, sum) in row.iter().enumerate() {
                    // SAFETY: the caller's `c` holds MR rows of NR floats, c_stride apart.
                    unsafe {
                        let at = c.add(r * c_stride + v * $lanes);
                        $store(at, $add($load(at), *sum));
                    }
                }
            }
        }
    };
}

tile_kernel!(
    tile_avx512,
    "avx512f",
    __m512,
    16,
    4,
    _mm512_setzero_ps,
    _mm512_loadu_ps,
    _mm512_storeu_ps,
    _mm512_set1_ps,
    _mm512_fmadd_ps,
    _mm512_add_ps
);

tile_kernel!(
    tile_avx2,
    "avx2,fma",
    __m256,
    8,
    2,
    _mm256_setzero_ps,
    _mm256_loadu_ps,
    _mm256_storeu_ps,
    _mm256_set1_ps,
    _mm256_fmadd_ps,
    _mm256_add_ps
);

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    #[test]
    fn the_packed_product_is_x_w_transpose_plus_b_at_every_edge_on_every_kernel() {
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        for (rows, inp, out) in [
            (1, 1, 1),
            (1, 0, 5),
            (2, 37, 70),
            (5, 3, 17),
            (6, 8, 16),
            (12, 9, 65),
            (7, 64, 64),
            (13, 130, 300),
            (160, 512, 777),
        ] {
            let x: Vec<f32> = (0..rows * inp)
                .map(|_| rng.random_range(-1.0..1.0))
                .collect();
            let w: Vec<f32> = (0..out * inp)
                .map(|_| rng.random_range(-1.0..1.0))
                .collect();
            let b: Vec<f32> = (0..out).map(|_| rng.random_range(-1.0..1.0)).collect();
            for kernel in PackedKernel::available() {
                let y = PackedF32::new_for(kernel, &w, out, inp)
                    .product(&x, rows, Some(&b))
                    .unwrap();
                assert_eq!(y.len(), rows * out);
                for r in 0..rows {
                    for j in 0..out {
                        let want: f64 = f64::from(b[j])
                            + (0..inp)
                                .map(|k| f64::from(x[r * inp + k]) * f64::from(w[j * inp + k]))
                                .sum::<f64>();
                        let got = f64::from(y[r * out + j]);
                        assert!(
                            (got - want).abs() < 1e-4,
                            "{kernel:?} {rows}x{inp}x{out} [{r}][{j}]: {got} vs {want}"
                        );
                    }
                }
            }
        }
    }
}
