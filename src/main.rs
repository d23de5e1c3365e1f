//! The `transformer` binary: the process's allocator and pages, then the command line
//! (`transformer_cli::run_command_line`: parse, run the command, report errors once).

use std::process::ExitCode;

// Training allocates and frees tensors of many megabytes every step. glibc's malloc hands
// them back to the kernel each time, and every reuse then pays page faults and page zeroing
// (a fifth of a training step on the CPU); mimalloc with purging off keeps and reuses them.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// `mi_option_purge_delay` in mimalloc.h (v2 and v3): -1 never returns freed memory to the OS.
const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

/// Keeps the process on 4 KiB pages. With transparent huge pages (which mimalloc asks for),
/// the first touch of any byte of a 2 MiB region zeroes all of it, and on the virtual
/// machines we measure on that runs at well under 1 GB/s: a batched beam search zeroed
/// 1.35 GB for a peak of 0.7 GB and spent a fifth of its time there (2.75 s of system time
/// against 0.58 s without; training is as fast either way). The kernel's per-process switch
/// rather than mimalloc's option, which is read before `main` runs.
fn disable_transparent_huge_pages() {
    #[cfg(target_os = "linux")]
    // SAFETY: prctl with PR_SET_THP_DISABLE takes plain integers and touches no memory of ours.
    unsafe {
        libc::prctl(libc::PR_SET_THP_DISABLE, 1, 0, 0, 0);
    }
}

fn main() -> ExitCode {
    // SAFETY: sets a process-wide allocator option; no allocation is in flight.
    unsafe { libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, -1) };
    disable_transparent_huge_pages();
    transformer_cli::run_command_line()
}
