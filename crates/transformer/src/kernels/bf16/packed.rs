//! A fixed weight in bf16, packed once (when a checkpoint is loaded for `--compute-type
//! bfloat16`) into the panels every engine reads, and the products decoding takes of it:
//! `y = x W^T + b` with `x` rounded to bf16 as it is packed and the sums in f32. A decoding
//! step has few rows (1 to a few hundred) and wide weights (a Generator of 58,101 outputs),
//! so the work is split over the weight's columns, never its rows; each task walks its panels
//! with the whole packed input, which stays in L1.

use super::pack::{pack_a, pack_b_padded, pack_rows, pairs, Strided, MR, NR};
use super::{from_bf16, kernel_emulated, Engine};
use crate::kernels::few_rows::by_panels;

/// Columns of `W^T` (outputs) per parallel task: four panels.
const TASK_COLUMNS: usize = 4 * NR;

/// `W` `(out, inp)` as the `B = W^T` operand of a product, in bf16: panels of [`NR`] outputs,
/// each `panel_pairs` pairs of inputs long (whole AMX tiles; zeros past `inp` and `out`).
pub struct PackedWeight {
    out: usize,
    inp: usize,
    panel_pairs: usize,
    words: Vec<u32>,
}

impl PackedWeight {
    /// `w` `(out, inp)` row-major, each value rounded to bf16 (nearest, ties to even).
    pub fn from_rows(w: &[f32], out: usize, inp: usize) -> Self {
        assert_eq!(w.len(), out * inp, "from_rows: {out} x {inp} weight");
        let panel_pairs = pairs(inp).next_multiple_of(TILE_PAIRS);
        let transposed = Strided {
            data: w,
            rows: inp,
            cols: out,
            row_stride: 1,
            col_stride: inp,
        };
        Self {
            out,
            inp,
            panel_pairs,
            words: pack_b_padded(transposed, panel_pairs),
        }
    }

    /// `w` `(out, inp)` row-major bf16 values (their bits): packed as they are.
    pub fn from_bf16_rows(w: &[u16], out: usize, inp: usize) -> Self {
        assert_eq!(w.len(), out * inp, "from_bf16_rows: {out} x {inp} weight");
        let panel_pairs = pairs(inp).next_multiple_of(TILE_PAIRS);
        let mut words = vec![0u32; out.div_ceil(NR) * panel_pairs * NR];
        for (j, row) in w.chunks_exact(inp.max(1)).take(out).enumerate() {
            let panel = &mut words[(j / NR) * panel_pairs * NR..][..panel_pairs * NR];
            for (p, pair) in row.chunks(2).enumerate() {
                let high = pair.get(1).copied().unwrap_or(0);
                panel[p * NR + j % NR] = u32::from(pair[0]) | u32::from(high) << 16;
            }
        }
        Self {
            out,
            inp,
            panel_pairs,
            words,
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

    /// Bytes held.
    pub fn bytes(&self) -> usize {
        self.words.len() * 4
    }

    /// Row `j` of `W` as f32 (its bf16 values, exactly), each times `factor`: an embedding
    /// table's lookup. `None` when `j` is not a row.
    pub fn row(&self, j: usize, factor: f32) -> Option<Vec<f32>> {
        if j >= self.out {
            return None;
        }
        let panel = &self.words[(j / NR) * self.panel_pairs * NR..][..self.panel_pairs * NR];
        let lane = j % NR;
        let mut row = Vec::with_capacity(self.inp + 1);
        for p in 0..pairs(self.inp) {
            let pair = panel[p * NR + lane];
            row.push(from_bf16(pair as u16) * factor);
            row.push(from_bf16((pair >> 16) as u16) * factor);
        }
        row.truncate(self.inp);
        Some(row)
    }

    /// Rows `ids` of `W` in f32, each times `factor`, one after another: a bf16 embedding
    /// table's lookup. `None` when an id is not a row.
    pub fn rows(&self, ids: &[u32], factor: f32) -> Option<Vec<f32>> {
        let mut out = Vec::with_capacity(ids.len() * self.inp);
        for &id in ids {
            out.extend(self.row(usize::try_from(id).ok()?, factor)?);
        }
        Some(out)
    }

    /// The rows `ids` of `W`, in that order, as a weight of their own (a Generator restricted
    /// to a vocabulary map's candidates): their bf16 values repacked as they are. `None` when
    /// an id is not a row.
    pub fn selected_rows(&self, ids: &[u32]) -> Option<Self> {
        let row_pairs = pairs(self.inp);
        let mut words = vec![0u32; ids.len().div_ceil(NR) * self.panel_pairs * NR];
        for (i, &id) in ids.iter().enumerate() {
            let j = usize::try_from(id).ok().filter(|&j| j < self.out)?;
            let from = &self.words[(j / NR) * self.panel_pairs * NR..][..self.panel_pairs * NR];
            let to = &mut words[(i / NR) * self.panel_pairs * NR..][..self.panel_pairs * NR];
            for p in 0..row_pairs {
                to[p * NR + i % NR] = from[p * NR + j % NR];
            }
        }
        Some(Self {
            out: ids.len(),
            inp: self.inp,
            panel_pairs: self.panel_pairs,
            words,
        })
    }

    /// The weight back in f32 (its bf16 values), `(out, inp)` row-major.
    pub fn unpacked(&self) -> Vec<f32> {
        (0..self.out)
            .flat_map(|j| self.row(j, 1.0).unwrap_or_default())
            .collect()
    }

    /// The rows of `parts`, one after another, as one weight (their input sizes must agree):
    /// repacked, which rounds nothing again (the values are bf16 already).
    pub fn concatenated(parts: &[&Self]) -> Self {
        let inp = parts[0].inp;
        assert!(
            parts.iter().all(|p| p.inp == inp),
            "concatenated: input sizes differ"
        );
        let rows: Vec<f32> = parts.iter().flat_map(|p| p.unpacked()).collect();
        Self::from_rows(&rows, parts.iter().map(|p| p.out).sum(), inp)
    }

    /// `x W^T + b` for `x` `(rows, inp)` (strided f32, rounded to bf16 as it is packed):
    /// `(rows, out)` row-major, on `engine`.
    pub fn product(
        &self,
        x: Strided,
        bias: Option<&[f32]>,
        engine: Engine,
    ) -> Result<Vec<f32>, String> {
        let rows = x.rows;
        if x.cols != self.inp || !x.fits() || bias.is_some_and(|b| b.len() != self.out) {
            return Err(format!(
                "bf16 linear: input {rows}x{} for a {}x{} weight{}",
                x.cols,
                self.out,
                self.inp,
                if bias.is_some() { " and its bias" } else { "" }
            ));
        }
        #[cfg(target_arch = "x86_64")]
        if engine == Engine::Amx && *super::amx::tiles() != super::amx::Tiles::Granted {
            return Err("bf16 linear: AMX tiles are not available to this process".into());
        }
        if self.inp == 0 {
            // No products: the bias, or zeros.
            return Ok(match bias {
                Some(bias) => bias.repeat(rows),
                None => vec![0.0; rows * self.out],
            });
        }
        let input = PackedInput::of(x, self.panel_pairs, engine);
        let panels = (NR, TASK_COLUMNS / NR);
        Ok(by_panels((rows, self.out), panels, bias, |panels| {
            self.columns(&input, panels, engine)
        }))
    }

    /// The product's columns of the panels `panels`, `(padded_rows, panels * NR)` row-major.
    fn columns(
        &self,
        input: &PackedInput,
        panels: std::ops::Range<usize>,
        engine: Engine,
    ) -> Vec<f32> {
        let padded = panels.len() * NR;
        let kp = pairs(self.inp);
        let mut block = vec![0f32; input.padded_rows * padded];
        for (i, panel) in panels.enumerate() {
            let b = &self.words[panel * self.panel_pairs * NR..][..self.panel_pairs * NR];
            let c = &mut block[i * NR..];
            match engine {
                #[cfg(target_arch = "x86_64")]
                // SAFETY: the tiles are granted (checked in `product`); `input` holds
                // `padded_rows` (whole 32-row blocks) of `panel_pairs` words and `b` a whole
                // panel of as many pairs; each 32x32 block of `c` lies inside `block`, whose
                // rows are `padded >= 64` floats apart.
                Engine::Amx => unsafe {
                    for r0 in (0..input.padded_rows).step_by(super::amx::BLOCK) {
                        let a = &input.words[r0 * self.panel_pairs..];
                        for half in 0..NR / super::amx::BLOCK {
                            let at = r0 * padded + half * super::amx::BLOCK;
                            let b = &b[half * super::amx::BLOCK..];
                            super::amx::block(a, b, self.panel_pairs, c[at..].as_mut_ptr(), padded);
                        }
                    }
                },
                #[cfg(target_arch = "x86_64")]
                // SAFETY: this engine is only chosen where the CPU has AVX512F and
                // AVX512-BF16; each row panel of `input` holds MR rows of `kp` pairs, `b` a
                // panel of at least `kp` pairs, and `c` MR rows of NR floats `padded` apart.
                Engine::Avx512Bf16 => unsafe {
                    for r0 in (0..input.padded_rows).step_by(MR) {
                        let a = &input.words[r0 * kp..][..MR * kp];
                        let c = c[r0 * padded..].as_mut_ptr();
                        super::kernel_avx512::tile(kp, (a, kp), b, c, padded);
                    }
                },
                _ => {
                    let mut tile = [0f32; MR * NR];
                    for r0 in (0..input.padded_rows).step_by(MR) {
                        let a = &input.words[r0 * kp..][..MR * kp];
                        tile.fill(0.0);
                        kernel_emulated::tile(kp, a, kp, b, &mut tile);
                        for r in 0..MR {
                            c[(r0 + r) * padded..][..NR].copy_from_slice(&tile[r * NR..][..NR]);
                        }
                    }
                }
            }
        }
        block
    }
}

/// Pairs of `k` in an AMX tile row (64 bytes); kept whatever the engine, so that one packed
/// weight serves them all.
const TILE_PAIRS: usize = 16;
#[cfg(target_arch = "x86_64")]
const _: () = assert!(TILE_PAIRS == super::amx::TILE_PAIRS);

/// The input of a product packed once for every task: row-major bf16 pairs, in whole row
/// blocks of the engine's kernel (zeros past the last row).
struct PackedInput {
    words: Vec<u32>,
    padded_rows: usize,
}

impl PackedInput {
    fn of(x: Strided, panel_pairs: usize, engine: Engine) -> Self {
        #[cfg(target_arch = "x86_64")]
        if engine == Engine::Amx {
            let padded_rows = x.rows.next_multiple_of(super::amx::BLOCK);
            return Self {
                words: pack_rows(x, panel_pairs, padded_rows),
                padded_rows,
            };
        }
        let _ = (panel_pairs, engine);
        Self {
            words: pack_a(x),
            padded_rows: x.rows.next_multiple_of(MR),
        }
    }
}
