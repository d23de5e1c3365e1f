//! A fixed f32 weight packed once for decoding's products of several rows, on CPUs with
//! AVX-512: panels of [`NR`] outputs, each input's [`NR`] weights side by side, so that a
//! 6 x 64 tile of sums stays in 24 registers while the panel streams past. gemm (the crate
//! candle multiplies with) repacked the whole weight on every call, a seventh of a batched
//! beam search; here the packing is paid once, when a product of several rows first asks.
//! The work is split over the weight's columns (a decoding step has 2 to a few hundred rows
//! and a weight up to 58,101 outputs wide).

use super::few_rows::by_panels;

/// Rows of the input a kernel call multiplies.
const MR: usize = 6;
/// Outputs a panel holds: four 16-lane registers.
const NR: usize = 64;
/// Outputs per parallel task: four panels.
const TASK_COLUMNS: usize = 4 * NR;

/// `W` `(out, inp)` as panels of [`NR`] outputs: panel `p` is `inp * NR` floats from
/// `p * inp * NR`, input `k`'s [`NR`] weights side by side (zeros past `out`).
pub struct PackedF32 {
    out: usize,
    inp: usize,
    panels: Vec<f32>,
}

impl PackedF32 {
    /// Whether this CPU runs the kernel (AVX-512F); elsewhere products stay gemm's.
    pub fn runs_here() -> bool {
        #[cfg(target_arch = "x86_64")]
        return std::arch::is_x86_feature_detected!("avx512f");
        #[cfg(not(target_arch = "x86_64"))]
        false
    }

    /// Packs `w` `(out, inp)` row-major, panels in parallel.
    pub fn new(w: &[f32], out: usize, inp: usize) -> Self {
        use rayon::prelude::*;
        assert_eq!(w.len(), out * inp, "PackedF32: {out} x {inp} weight");
        let mut panels = vec![0f32; out.div_ceil(NR) * inp * NR];
        if inp > 0 {
            panels
                .par_chunks_mut(inp * NR)
                .enumerate()
                .for_each(|(p, panel)| {
                    for lane in 0..NR.min(out - p * NR) {
                        let row = &w[(p * NR + lane) * inp..][..inp];
                        for (k, &value) in row.iter().enumerate() {
                            panel[k * NR + lane] = value;
                        }
                    }
                });
        }
        Self { out, inp, panels }
    }

    /// Output features.
    pub fn out_features(&self) -> usize {
        self.out
    }

    /// Input features.
    pub fn in_features(&self) -> usize {
        self.inp
    }

    /// `x W^T + b` for `x` `(rows, inp)` row-major: `(rows, out)`; an error where the CPU does
    /// not run the kernel ([`Self::runs_here`]) or the sizes do not fit.
    pub fn product(
        &self,
        x: &[f32],
        rows: usize,
        bias: Option<&[f32]>,
    ) -> Result<Vec<f32>, String> {
        if !Self::runs_here() {
            return Err("packed f32 product: this CPU has no AVX-512F".into());
        }
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
        let panels = (NR, TASK_COLUMNS / NR);
        Ok(by_panels((rows, self.out), panels, bias, |panels| {
            self.columns(&input, padded_rows, panels)
        }))
    }

    /// The product's columns of the panels `panels`, `(padded_rows, panels * NR)` row-major.
    fn columns(
        &self,
        input: &[f32],
        padded_rows: usize,
        panels: std::ops::Range<usize>,
    ) -> Vec<f32> {
        let padded = panels.len() * NR;
        let mut block = vec![0f32; padded_rows * padded];
        for (i, panel) in panels.enumerate() {
            let b = &self.panels[panel * self.inp * NR..][..self.inp * NR];
            for r0 in (0..padded_rows).step_by(MR) {
                let a = &input[r0 * self.inp..][..MR * self.inp];
                let c = &mut block[r0 * padded + i * NR..][..(MR - 1) * padded + NR];
                #[cfg(target_arch = "x86_64")]
                // SAFETY: `product` checked that the CPU has AVX-512F; `a` holds MR rows of
                // `inp` floats, `b` a panel of `inp * NR`, and `c` MR rows of NR floats
                // `padded >= NR` apart.
                unsafe {
                    tile(self.inp, a, b, c.as_mut_ptr(), padded)
                };
            }
        }
        block
    }
}

/// Adds `MR` rows of `a` (`k` floats each, contiguous) times the panel `b` (`k` x [`NR`]) to
/// the `MR x NR` block at `c`, rows `c_stride` floats apart.
///
/// # Safety
/// The CPU must have AVX-512F; `a` holds `MR * k` floats, `b` `k * NR`; `c` holds `MR` rows of
/// `NR` floats, `c_stride >= NR` apart.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn tile(k: usize, a: &[f32], b: &[f32], c: *mut f32, c_stride: usize) {
    use std::arch::x86_64::*;
    debug_assert!(a.len() >= MR * k && b.len() >= k * NR && c_stride >= NR);
    let (a, b) = (a.as_ptr(), b.as_ptr());
    let mut sums = [[_mm512_setzero_ps(); 4]; MR];
    for p in 0..k {
        // SAFETY: `b` holds k * NR floats, so the four 16-float loads at p * NR are inside.
        let columns: [__m512; 4] =
            std::array::from_fn(|v| unsafe { _mm512_loadu_ps(b.add(p * NR + v * 16)) });
        for (r, row) in sums.iter_mut().enumerate() {
            // SAFETY: `a` holds MR rows of k floats.
            let x = _mm512_set1_ps(unsafe { *a.add(r * k + p) });
            for (sum, column) in row.iter_mut().zip(columns) {
                *sum = _mm512_fmadd_ps(x, column, *sum);
            }
        }
    }
    for (r, row) in sums.iter().enumerate() {
        for (v, sum) in row.iter().enumerate() {
            // SAFETY: the caller's `c` holds MR rows of NR floats, c_stride apart.
            unsafe {
                let at = c.add(r * c_stride + v * 16);
                _mm512_storeu_ps(at, _mm512_add_ps(_mm512_loadu_ps(at), *sum));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    #[test]
    fn the_packed_product_is_x_w_transpose_plus_b_at_every_edge() {
        if !PackedF32::runs_here() {
            return;
        }
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        for (rows, inp, out) in [
            (1, 1, 1),
            (2, 37, 70),
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
            let y = PackedF32::new(&w, out, inp)
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
                        "{rows}x{inp}x{out} [{r}][{j}]: {got} vs {want}"
                    );
                }
            }
        }
    }
}
