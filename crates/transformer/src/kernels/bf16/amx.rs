//! The AMX-BF16 engine (Intel Sapphire Rapids and later): `tdpbf16ps` multiplies a 16 x 32
//! bf16 tile of `A` by a 32 x 16 tile of `B` into a 16 x 16 f32 tile of sums, 16 times the
//! products of an AVX-512 FMA per instruction.
//!
//! Stable Rust has no AMX intrinsics, so the kernel is inline assembly. Eight tile registers
//! of 16 rows x 64 bytes hold a 32 x 32 block of `C` (four), two tiles of `A`'s rows and two
//! of `B`'s columns; per step of 32 `k` values, four loads and four products. `A` is packed
//! row-major in bf16 ([`pack_rows`]), `B` in the panels every engine reads ([`pack_b_padded`],
//! pairs of `k` per column: the tile layout `tdpbf16ps` takes), both padded with zeros to whole
//! tiles, so that the kernel never tests for edges inside its loop.
//!
//! Linux hands out the tile state on request ([`crate::kernels::amx_tiles::state`] asks
//! once), and a kernel that refuses (older than 5.16, or a virtual machine that hides AMX)
//! leaves the engine unused, never a SIGILL.

use std::arch::asm;
use std::sync::OnceLock;

use rayon::prelude::*;

use super::pack::{pack_b_padded, pack_rows, pairs, Strided, NR};

/// Rows (and columns) of `C` a kernel call covers: two tiles each way.
pub(super) const BLOCK: usize = 32;
/// Pairs of `k` one tile holds along `k` (64 bytes a row).
pub(super) const TILE_PAIRS: usize = 16;
/// Row blocks a parallel task multiplies, so that a panel of `B` stays in L2 over them.
const BLOCKS_PER_TASK: usize = 8;

/// What this process may do with AMX.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Tiles {
    /// The CPU has no AMX-BF16.
    Missing,
    /// The CPU has it, the operating system refused it (the reason).
    Denied(String),
    /// Granted to this process.
    Granted,
}

/// Whether this CPU has AMX-BF16 (CPUID leaf 7: AMX-TILE and AMX-BF16) and the operating
/// system lets this process use its tiles; asked once.
pub(super) fn tiles() -> &'static Tiles {
    static ASKED: OnceLock<Tiles> = OnceLock::new();
    ASKED.get_or_init(|| {
        // CPUID leaf 7, subleaf 0: the structured extended features.
        let features = std::arch::x86_64::__cpuid_count(7, 0);
        let (amx_bf16, amx_tile) = ((features.edx >> 22) & 1 == 1, (features.edx >> 24) & 1 == 1);
        if !(amx_bf16 && amx_tile) {
            return Tiles::Missing;
        }
        match crate::kernels::amx_tiles::state() {
            Ok(()) => Tiles::Granted,
            Err(reason) => Tiles::Denied(reason.clone()),
        }
    })
}

/// `c += a b` (`a` `m x k`, `b` `k x n`, `c` `m x n` row-major), the inputs rounded to bf16
/// and the sums f32, on AMX tiles.
///
/// # Safety
/// [`tiles`] must be [`Tiles::Granted`]; the operands must fit and be non-empty (`gemm`
/// checks).
pub(super) unsafe fn gemm_add(a: Strided, b: Strided, c: &mut [f32]) {
    let (m, k, n) = (a.rows, a.cols, b.cols);
    let panel_pairs = pairs(k).next_multiple_of(TILE_PAIRS);
    let (a, b) = rayon::join(
        || pack_rows(a, panel_pairs, m.next_multiple_of(BLOCK)),
        || pack_b_padded(b, panel_pairs),
    );
    let task_rows = BLOCKS_PER_TASK * BLOCK;
    c.par_chunks_mut(task_rows * n)
        .enumerate()
        .for_each(|(task, rows)| {
            let first_row = task * task_rows;
            // SAFETY: as this function's.
            unsafe { multiply_rows(&a, &b, rows, first_row, (panel_pairs, n)) };
        });
}

/// The rows of `c` in `rows` (from row `first_row` of packed `a`), every column of `b`: a
/// panel of `B` at a time, its two 32-column halves over each 32-row block.
///
/// # Safety
/// As [`gemm_add`]'s; `a` and `b` as it packs them.
unsafe fn multiply_rows(
    a: &[u32],
    b: &[u32],
    rows: &mut [f32],
    first_row: usize,
    (panel_pairs, n): (usize, usize),
) {
    let m = rows.len() / n;
    let mut scratch = [0f32; BLOCK * BLOCK];
    for col_panel in 0..n.div_ceil(NR) {
        let panel = &b[col_panel * panel_pairs * NR..][..panel_pairs * NR];
        for half in 0..NR / BLOCK {
            let c0 = col_panel * NR + half * BLOCK;
            if c0 >= n {
                break;
            }
            let width = BLOCK.min(n - c0);
            for r0 in (0..m).step_by(BLOCK) {
                let height = BLOCK.min(m - r0);
                let a_rows = &a[(first_row + r0) * panel_pairs..][..BLOCK * panel_pairs];
                let b_cols = &panel[half * BLOCK..];
                if (height, width) == (BLOCK, BLOCK) {
                    let c = &mut rows[r0 * n + c0..][..(BLOCK - 1) * n + BLOCK];
                    // SAFETY: `c` holds 32 rows of 32 floats, n apart; the packed operands
                    // hold whole tiles (see `block`).
                    unsafe { block(a_rows, b_cols, panel_pairs, c.as_mut_ptr(), n) };
                    continue;
                }
                // At the edges, through a scratch block (what lands past the edge is dropped).
                for r in 0..height {
                    scratch[r * BLOCK..][..width]
                        .copy_from_slice(&rows[(r0 + r) * n + c0..][..width]);
                }
                // SAFETY: as above, the scratch block 32 floats a row.
                unsafe { block(a_rows, b_cols, panel_pairs, scratch.as_mut_ptr(), BLOCK) };
                for r in 0..height {
                    rows[(r0 + r) * n + c0..][..width]
                        .copy_from_slice(&scratch[r * BLOCK..][..width]);
                }
            }
        }
    }
}

/// Adds `A`'s 32 rows (`a`: row-major pairs, rows `panel_pairs` words apart) times 32 columns
/// of `B` (`b`: from the first of them in a packed panel, [`NR`] words a pair) to the 32 x 32
/// block at `c` (rows `c_stride` floats apart), over all `panel_pairs` pairs of `k`.
///
/// # Safety
/// [`tiles`] must be [`Tiles::Granted`]; `a` holds 32 rows of `panel_pairs` words, `b` `panel_pairs` rows
/// of 32 words `NR` apart, `panel_pairs` is a whole number of tiles (16), and `c` holds 32
/// rows of 32 floats `c_stride >= 32` apart.
pub(super) unsafe fn block(a: &[u32], b: &[u32], panel_pairs: usize, c: *mut f32, c_stride: usize) {
    debug_assert!(panel_pairs.is_multiple_of(TILE_PAIRS) && panel_pairs > 0);
    debug_assert!(a.len() >= BLOCK * panel_pairs && b.len() >= (panel_pairs - 1) * NR + BLOCK);
    let a_stride = panel_pairs * 4;
    let b_stride = NR * 4;
    let c_bytes = c_stride * 4;
    // SAFETY: the caller's guarantees. Tiles: 0-3 the sums (rows 0-15 x columns 0-15, 0-15 x
    // 16-31, 16-31 x 0-15, 16-31 x 16-31), 4-5 A's two row halves, 6-7 B's two column halves.
    // Each step reads 64 bytes of every A row (16 pairs) and 16 of B's pair rows; the whole
    // configure-compute-release runs inside this one block, so no tile state outlives it.
    unsafe {
        asm!(
            "ldtilecfg [{config}]",
            "tileloadd tmm0, [{c} + {cs}*1]",
            "tileloadd tmm1, [{c} + {cs}*1 + 64]",
            "tileloadd tmm2, [{c16} + {cs}*1]",
            "tileloadd tmm3, [{c16} + {cs}*1 + 64]",
            "2:",
            "tileloadd tmm4, [{a} + {as_}*1]",
            "tileloadd tmm5, [{a16} + {as_}*1]",
            "tileloadd tmm6, [{b} + {bs}*1]",
            "tileloadd tmm7, [{b} + {bs}*1 + 64]",
            "tdpbf16ps tmm0, tmm4, tmm6",
            "tdpbf16ps tmm1, tmm4, tmm7",
            "tdpbf16ps tmm2, tmm5, tmm6",
            "tdpbf16ps tmm3, tmm5, tmm7",
            "add {a}, 64",
            "add {a16}, 64",
            "add {b}, {b_step}",
            "dec {steps}",
            "jnz 2b",
            "tilestored [{c} + {cs}*1], tmm0",
            "tilestored [{c} + {cs}*1 + 64], tmm1",
            "tilestored [{c16} + {cs}*1], tmm2",
            "tilestored [{c16} + {cs}*1 + 64], tmm3",
            "tilerelease",
            config = in(reg) super::super::amx_tiles::CONFIG.0.as_ptr(),
            c = in(reg) c,
            c16 = in(reg) c.add(16 * c_stride),
            cs = in(reg) c_bytes,
            a = inout(reg) a.as_ptr() => _,
            a16 = inout(reg) a.as_ptr().add(16 * panel_pairs) => _,
            as_ = in(reg) a_stride,
            b = inout(reg) b.as_ptr() => _,
            bs = in(reg) b_stride,
            b_step = in(reg) TILE_PAIRS * b_stride,
            steps = inout(reg) panel_pairs / TILE_PAIRS => _,
            options(nostack),
        );
    }
}
