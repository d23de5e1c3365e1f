//! What the AMX kernels share (`bf16/amx.rs`, `int8/amx.rs`): the operating system's grant of
//! the tile state, asked once, and the one tile configuration both use.

use std::sync::OnceLock;

/// Whether the operating system lets this process use the AMX tiles, asked once: Linux hands
/// out their state on request (`arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA)`), and a
/// kernel that refuses (older than 5.16, or a virtual machine that hides AMX) leaves the AMX
/// kernels unused, never a SIGILL. The reason where it refused. Ask only where the CPU has
/// AMX-TILE.
pub(crate) fn state() -> &'static Result<(), String> {
    static ASKED: OnceLock<Result<(), String>> = OnceLock::new();
    ASKED.get_or_init(request_tile_state)
}

#[cfg(target_os = "linux")]
fn request_tile_state() -> Result<(), String> {
    // From arch/x86/include/uapi/asm/prctl.h and the kernel's xstate numbering.
    const ARCH_REQ_XCOMP_PERM: libc::c_long = 0x1023;
    const XFEATURE_XTILEDATA: libc::c_long = 18;
    // SAFETY: arch_prctl with this request takes two integers and writes no memory of ours.
    let status = unsafe {
        libc::syscall(
            libc::SYS_arch_prctl,
            ARCH_REQ_XCOMP_PERM,
            XFEATURE_XTILEDATA,
        )
    };
    match status {
        0 => Ok(()),
        _ => Err(format!(
            "the kernel refused its tile state (arch_prctl: {})",
            std::io::Error::last_os_error()
        )),
    }
}

#[cfg(not(target_os = "linux"))]
fn request_tile_state() -> Result<(), String> {
    Err("its tile state is only asked for on Linux".into())
}

/// The tile configuration: palette 1, tiles 0-7 all 16 rows of 64 bytes.
#[repr(C, align(64))]
pub(crate) struct TileConfig(pub(crate) [u8; 64]);

pub(crate) static CONFIG: TileConfig = {
    let mut bytes = [0u8; 64];
    bytes[0] = 1;
    let mut tile = 0;
    while tile < 8 {
        // colsb[tile] (u16 little-endian at 16 + 2 tile), rows[tile] (at 48 + tile).
        bytes[16 + 2 * tile] = 64;
        bytes[48 + tile] = 16;
        tile += 1;
    }
    TileConfig(bytes)
};
