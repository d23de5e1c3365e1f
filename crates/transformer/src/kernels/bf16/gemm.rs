//! `C = A B` (or `C += A B`) over the packed layout: `B` packed once for the whole product,
//! `A` once; then blocks of rows in parallel (rayon), each walking `B`'s panels a chunk of
//! `k` at a time so that the chunk stays in L1 while the block's row panels pass over it.

use rayon::prelude::*;

use super::pack::{pack_a, pack_b, pairs, Strided, MR, NR};
use super::{kernel_avx512, kernel_emulated, Engine};

/// Pairs of `k` a kernel call covers: `B`'s chunk is 128 x 64 words, 32 KB.
const KC_PAIRS: usize = 128;
/// Most rows a parallel task multiplies (16 row panels).
const MOST_BLOCK_ROWS: usize = 16 * MR;

/// One operand of a product: an f32 matrix, rounded to bf16 as it is packed.
pub type Operand<'a> = Strided<'a>;

/// `c` (`m x n`, row-major, contiguous) becomes `a b` (`m x k` times `k x n`), or gets it
/// added with `accumulate`, the inputs rounded to bf16 and the sums kept in f32, on `engine`.
pub fn gemm(
    a: Operand,
    b: Operand,
    c: &mut [f32],
    accumulate: bool,
    engine: Engine,
) -> Result<(), String> {
    let (m, k, n) = (a.rows, a.cols, b.cols);
    if b.rows != k || c.len() != m * n || !a.fits() || !b.fits() {
        return Err(format!(
            "bf16 gemm: A {m}x{k}, B {}x{n} and C of {} do not fit",
            b.rows,
            c.len()
        ));
    }
    if !accumulate {
        c.fill(0.0);
    }
    if m == 0 || n == 0 || k == 0 {
        return Ok(());
    }
    #[cfg(target_arch = "x86_64")]
    if engine == Engine::Amx {
        if *super::amx::tiles() != super::amx::Tiles::Granted {
            return Err("bf16 gemm: AMX tiles are not available to this process".into());
        }
        // SAFETY: the tiles are granted, and the operands fit and are not empty.
        unsafe { super::amx::gemm_add(a, b, c) };
        return Ok(());
    }
    let (a, b) = rayon::join(|| pack_a(a), || pack_b(b));
    let kp = pairs(k);
    let threads = rayon::current_num_threads().max(1);
    // Enough blocks for every thread twice over, each a whole number of row panels.
    let block_rows = m
        .div_ceil(2 * threads)
        .next_multiple_of(MR)
        .clamp(MR, MOST_BLOCK_ROWS);
    c.par_chunks_mut(block_rows * n)
        .enumerate()
        .for_each(|(block, rows)| {
            let first_panel = block * block_rows / MR;
            multiply_block(&a, &b, rows, first_panel, (kp, n), engine);
        });
    Ok(())
}

/// The rows of `c` in `rows` (whole rows, from row panel `first_panel` of packed `a`), every
/// column panel of packed `b`.
fn multiply_block(
    a: &[u32],
    b: &[u32],
    rows: &mut [f32],
    first_panel: usize,
    (kp, n): (usize, usize),
    engine: Engine,
) {
    let m = rows.len() / n;
    let mut tile = [0f32; MR * NR];
    for col_panel in 0..n.div_ceil(NR) {
        let (c0, width) = (col_panel * NR, NR.min(n - col_panel * NR));
        let b_panel = &b[col_panel * kp * NR..][..kp * NR];
        for p0 in (0..kp).step_by(KC_PAIRS) {
            let chunk = KC_PAIRS.min(kp - p0);
            let b_chunk = &b_panel[p0 * NR..][..chunk * NR];
            for row_panel in 0..m.div_ceil(MR) {
                let (r0, height) = (row_panel * MR, MR.min(m - row_panel * MR));
                let a_panel = &a[(first_panel + row_panel) * kp * MR..][..kp * MR];
                // The panel's rows from pair p0 on, kp words apart.
                let a_chunk = &a_panel[p0..][..(MR - 1) * kp + chunk];
                #[cfg(target_arch = "x86_64")]
                if engine == Engine::Avx512Bf16 && (height, width) == (MR, NR) {
                    // A whole tile: summed into `c` in place.
                    let c = &mut rows[r0 * n + c0..][..(MR - 1) * n + NR];
                    // SAFETY: the engine is only chosen where the CPU has AVX512F and
                    // AVX512-BF16; the slices hold `chunk` pairs of their panels and `c` MR
                    // rows of NR floats, n >= NR apart.
                    unsafe {
                        kernel_avx512::tile(chunk, (a_chunk, kp), b_chunk, c.as_mut_ptr(), n)
                    };
                    continue;
                }
                // At the edges, through a scratch tile (what lands past the edge is dropped).
                for r in 0..height {
                    tile[r * NR..][..width].copy_from_slice(&rows[(r0 + r) * n + c0..][..width]);
                }
                run_kernel(engine, chunk, (a_chunk, kp), b_chunk, &mut tile);
                for r in 0..height {
                    rows[(r0 + r) * n + c0..][..width].copy_from_slice(&tile[r * NR..][..width]);
                }
            }
        }
    }
}

#[inline]
fn run_kernel(
    engine: Engine,
    kp: usize,
    (a, a_stride): (&[u32], usize),
    b: &[u32],
    tile: &mut [f32; MR * NR],
) {
    match engine {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: `Engine::Avx512Bf16` is only chosen (by `engine()`, or by a test that
        // checked first) where the CPU has AVX512F and AVX512-BF16; the slices hold `kp`
        // pairs of their panels.
        Engine::Avx512Bf16 => unsafe {
            kernel_avx512::tile(kp, (a, a_stride), b, tile.as_mut_ptr(), NR)
        },
        _ => kernel_emulated::tile(kp, a, a_stride, b, tile),
    }
}
