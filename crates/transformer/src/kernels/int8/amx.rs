//! int8 products of many rows on AMX tiles (Sapphire Rapids and later): `tdpbusd` adds a
//! 16 x 64 tile of unsigned input bytes times a 64 x 16 tile of signed weight bytes to a
//! 16 x 16 tile of i32 sums, eight times the products of AVX-512 VNNI's `vpdpbusd` per
//! instruction.
//!
//! The weight is read as the AVX-512 VNNI kernel packs it ([`super::QuantizedMatrix`]): per
//! block of 16 outputs and group of 4 inputs, 64 bytes, which is one row of a `B` tile in the
//! layout `tdpbusd` takes, so 16 consecutive groups of a block are one tile at a stride of 64
//! bytes. The input rows (shifted by 128, rows `stride` bytes apart, `stride` a multiple of
//! 64) are `A` tiles as they lie, padded to whole 32-row blocks. Per 32 x 32 block of sums:
//! four `C` tiles, two `A`, two `B`, as the AMX-BF16 kernel (`bf16/amx.rs`). Stable Rust has
//! no AMX intrinsics, so the kernel is inline assembly; configure, compute and release run
//! inside one block, so no tile state outlives it.
//!
//! Used for products of at least [`MIN_ROWS`] rows where the CPU has AMX-INT8, the cap allows
//! AMX and the kernel grants the tiles; the tiles are trusted only after a product whose
//! answer the VNNI kernel gives agrees (else a warning, and VNNI runs).

use std::arch::asm;
use std::ops::Range;
use std::sync::OnceLock;

use super::quantize::QuantizedRows;
use super::QuantizedMatrix;
use crate::kernels::isa::Isa;

/// Rows from which a product runs on the tiles (a 16-row tile half full is still faster than
/// VNNI's registers).
pub(super) const MIN_ROWS: usize = 16;
/// Input rows and outputs one kernel call covers: two tiles each way.
pub(super) const ROWS: usize = 32;
/// Outputs per block of the packed layout (16 sums of a `C` tile row).
const BLOCK: usize = 16;

/// Whether products run on the AMX tiles here: checked once.
pub(super) fn runs() -> bool {
    static CHECKED: OnceLock<bool> = OnceLock::new();
    *CHECKED.get_or_init(|| {
        // CPUID leaf 7: AMX-TILE (edx bit 24) and AMX-INT8 (bit 25).
        let edx = std::arch::x86_64::__cpuid_count(7, 0).edx;
        if !Isa::Amx.runs() || (edx >> 24) & 3 != 3 {
            return false;
        }
        if let Err(reason) = crate::kernels::amx_tiles::state() {
            log::warn!("this CPU has AMX-INT8 but {reason}: int8 products run on AVX-512 VNNI");
            return false;
        }
        match checked() {
            Ok(()) => true,
            Err(wrong) => {
                log::warn!(
                    "AMX-INT8 tiles gave a wrong product ({wrong}): int8 products run on \
                     AVX-512 VNNI"
                );
                false
            }
        }
    })
}

/// A product on the tiles against the AVX-512 VNNI kernel's, across tile edges in every
/// dimension and with the extreme bytes: equal sums, or what differed.
fn checked() -> Result<(), String> {
    let (rows, inp, out) = (37, 200, 45);
    let value = |i: usize| ((i * 7919) % 255) as f32 - 127.0;
    let w: Vec<f32> = (0..out * inp).map(value).collect();
    let x: Vec<f32> = (0..rows * inp).map(|i| value(i + 11)).collect();
    let matrix = QuantizedMatrix::quantize_for(super::DotKernel::Avx512Vnni, &w, out, inp);
    let inputs = QuantizedRows::of(&x, rows, inp, matrix.stride, super::InputBytes::Shifted8)
        .padded_to(rows.next_multiple_of(ROWS));
    let mut want = vec![0i32; rows * out];
    let mut got = vec![0i32; rows * out];
    // SAFETY: the CPU has AVX-512 VNNI (AMX implies it) and the tiles are granted.
    unsafe {
        super::x86::dots_avx512_vnni(&inputs, &matrix, 0..out, &mut want);
        dots(&inputs, &matrix, 0..out, &mut got);
    }
    match want.iter().zip(&got).position(|(a, b)| a != b) {
        None => Ok(()),
        Some(at) => Err(format!("sum {at} is {}, not {}", got[at], want[at])),
    }
}

/// Fills `sums` `(rows, range)` as the other kernels do.
///
/// # Safety
/// [`runs`] (or the check inside it) must have found the tiles usable; `w` is in the AVX-512
/// VNNI layout; `inputs.shifted` holds whole blocks of [`ROWS`] rows (`padded_to`).
pub(super) unsafe fn dots(
    inputs: &QuantizedRows,
    w: &QuantizedMatrix,
    range: Range<usize>,
    sums: &mut [i32],
) {
    // The tiles read through raw pointers: what they read is checked here, not per load.
    assert!(
        inputs.shifted.len() >= inputs.rows.next_multiple_of(ROWS) * inputs.stride
            && inputs.stride == w.stride
            && range.end <= w.out,
        "amx int8: inputs or range do not fit the matrix"
    );
    let width = range.len();
    let groups = w.stride / 4;
    let block_bytes = groups * 4 * BLOCK;
    let first = range.start / BLOCK;
    let last = range.end.div_ceil(BLOCK);
    let mut scratch = [0i32; ROWS * ROWS];
    for r0 in (0..inputs.rows).step_by(ROWS) {
        let a = inputs.shifted.as_ptr().add(r0 * inputs.stride);
        for block in (first..last).step_by(2) {
            let b0 = w.data.as_ptr().add(block * block_bytes);
            // An odd last block pairs with itself; its second half is dropped.
            let b1 = if block + 1 < last {
                b0.add(block_bytes)
            } else {
                b0
            };
            tile_block(a, inputs.stride, (b0, b1), w.stride / 64, &mut scratch);
            for t in 0..ROWS.min(inputs.rows - r0) {
                for half in 0..2 {
                    for lane in 0..BLOCK {
                        let j = (block + half) * BLOCK + lane;
                        if block + half < last && range.contains(&j) {
                            let sum = scratch[t * ROWS + half * BLOCK + lane];
                            sums[(r0 + t) * width + j - range.start] =
                                sum - inputs.shift * w.weight_sums[j];
                        }
                    }
                }
            }
        }
    }
}

/// `scratch` (32 x 32 i32, row-major) = 32 input rows at `a` (`a_stride` bytes apart) times
/// two blocks of 16 outputs (`b0`, `b1`, each `steps` tiles of 16 groups, 64 bytes a group),
/// over `steps * 64` inputs.
///
/// # Safety
/// The tiles must be usable; `a` holds 32 rows of `steps * 64` bytes, `b0` and `b1`
/// `steps * 1024` bytes each.
unsafe fn tile_block(
    a: *const u8,
    a_stride: usize,
    (b0, b1): (*const i8, *const i8),
    steps: usize,
    scratch: &mut [i32; ROWS * ROWS],
) {
    if steps == 0 {
        scratch.fill(0);
        return;
    }
    // SAFETY: the caller's guarantees. Tiles: 0-3 the sums (rows 0-15 x block 0, 0-15 x
    // block 1, 16-31 x block 0, 16-31 x block 1), 4-5 A's two row halves, 6-7 the blocks.
    unsafe {
        asm!(
            "ldtilecfg [{config}]",
            "tilezero tmm0",
            "tilezero tmm1",
            "tilezero tmm2",
            "tilezero tmm3",
            "2:",
            "tileloadd tmm4, [{a} + {as_}*1]",
            "tileloadd tmm5, [{a16} + {as_}*1]",
            "tileloadd tmm6, [{b0} + {bs}*1]",
            "tileloadd tmm7, [{b1} + {bs}*1]",
            "tdpbusd tmm0, tmm4, tmm6",
            "tdpbusd tmm1, tmm4, tmm7",
            "tdpbusd tmm2, tmm5, tmm6",
            "tdpbusd tmm3, tmm5, tmm7",
            "add {a}, 64",
            "add {a16}, 64",
            "add {b0}, 1024",
            "add {b1}, 1024",
            "dec {steps}",
            "jnz 2b",
            "tilestored [{c} + {cs}*1], tmm0",
            "tilestored [{c} + {cs}*1 + 64], tmm1",
            "tilestored [{c16} + {cs}*1], tmm2",
            "tilestored [{c16} + {cs}*1 + 64], tmm3",
            "tilerelease",
            config = in(reg) crate::kernels::amx_tiles::CONFIG.0.as_ptr(),
            c = in(reg) scratch.as_mut_ptr(),
            c16 = in(reg) scratch.as_mut_ptr().add(16 * ROWS),
            cs = in(reg) ROWS * 4,
            a = inout(reg) a => _,
            a16 = inout(reg) a.add(16 * a_stride) => _,
            as_ = in(reg) a_stride,
            b0 = inout(reg) b0 => _,
            b1 = inout(reg) b1 => _,
            bs = in(reg) 64usize,
            steps = inout(reg) steps => _,
            options(nostack),
        );
    }
}
