//! The `transformer` binary: parse the command line, run the command, report errors once.
//! Each command is one file of `commands/` (its arguments and its `run`); what several share
//! is named by what it does (`flags`, `device_choice`, `open_checkpoint`, `errors`, `stdout`,
//! `stdin_lines`, `output_guard`, `stop_signals`, `progress`), and the benchmark's workloads
//! are `bench`. The library crates below hold the model, its training and its inference.

/// `eprintln!` that never panics: a closed or full stderr (`2>&1 | head`, `2>/dev/full`) loses
/// the message, never the run (std's panics when the write fails). Defined before the modules,
/// so that theirs is this one.
macro_rules! eprintln {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}

mod bench;
mod commands;
mod device_choice;
mod errors;
mod flags;
mod library_log;
mod open_checkpoint;
mod output_guard;
mod progress;
mod stdin_lines;
mod stdout;
mod stop_signals;

use std::io::Write;
use std::process::ExitCode;

use clap::Parser;
// The library's modules, under the names the command-line modules use (`crate::config`).
use transformer::{
    atomic_file, checkpoint, config, corpus, decoding, device, distributed, infer, input_text,
    kernels, metrics, model, sentences, tokenize, train, training_data,
};
use transformer_documents as document;
use transformer_plot as plot;
use transformer_serve as serve;

use commands::Cli;

/// The exit status of a command-line usage error, as clap exits on its own.
const USAGE_ERROR: u8 = 2;

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

/// What the user can do about a library error, in the command line's words: the library's
/// errors name files and values, never a flag.
fn advice(error: &anyhow::Error) -> &'static str {
    let cause = |is: fn(&(dyn std::error::Error + 'static)) -> bool| error.chain().any(is);
    if cause(|c| c.is::<checkpoint::NoCheckpoint>()) {
        return "; train one with `transformer train` or pass --checkpoint DIR";
    }
    match error
        .chain()
        .find_map(|c| c.downcast_ref::<checkpoint::WrongModel>())
        .map(|wrong| wrong.task)
    {
        Some(checkpoint::Task::Translate) => {
            "; use `transformer generate`: translate, eval, attention and serve need an \
             encoder-decoder"
        }
        Some(checkpoint::Task::Continue) => {
            "; use `transformer translate`: generate needs a decoder-only language model"
        }
        None => "",
    }
}

/// `TRANSFORMER_MAX_ISA` caps this tool's kernels; candle's matrix products (gemm) pick
/// AVX-512 by themselves in a build with `gemm-avx512`, which a capped measurement must know.
fn warn_of_an_isa_cap_gemm_ignores(cap: kernels::isa::Isa) {
    use kernels::isa;
    let gemm = isa::gemm_isa();
    if gemm <= cap {
        return;
    }
    // Only gemm's AVX-512 is a build's choice; it has no kernels below AVX2.
    let fix = match (cap >= isa::Isa::Avx2, gemm > isa::Isa::Avx2) {
        (true, _) => "; build with --no-default-features to cap them too",
        (false, true) => {
            "; gemm has no kernels below avx2 (--no-default-features brings it to avx2)"
        }
        (false, false) => "; gemm has no kernels below avx2",
    };
    log::warn!(
        "{}={}: candle's matrix products still use {}{fix}",
        isa::CAP_VARIABLE,
        cap.name(),
        gemm.name(),
    );
}

fn main() -> ExitCode {
    // SAFETY: sets a process-wide allocator option; no allocation is in flight.
    unsafe { libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, -1) };
    disable_transparent_huge_pages();
    library_log::install();
    let cli = Cli::parse();
    match kernels::isa::requested_cap() {
        Err(unknown) => {
            let _ = writeln!(std::io::stderr(), "error: {unknown}");
            return ExitCode::from(USAGE_ERROR);
        }
        Ok(Some(cap)) => warn_of_an_isa_cap_gemm_ignores(cap),
        Ok(None) => {}
    }
    // The command runs on one of rayon's threads, not beside them: decoding calls into the pool
    // hundreds of times a second, and a third thread on two cores made every call a hand-over
    // (beam search 15% slower).
    let outcome = rayon::scope(|_| commands::run(cli.command));
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        // A reader that closed the pipe wants no more output, and no complaint either.
        Err(e) if e.downcast_ref::<stdout::StdoutClosed>().is_some() => ExitCode::SUCCESS,
        Err(e) => {
            // One line: candle appends a backtrace to its errors when RUST_BACKTRACE is set.
            let message = format!("{e:#}");
            // Written, not `eprintln!`ed: a closed stderr must not turn an error into a panic.
            let line = message.lines().next().unwrap_or_default();
            let _ = writeln!(std::io::stderr(), "error: {line}{}", advice(&e));
            if let Some(interrupted) = e.downcast_ref::<errors::Interrupted>() {
                ExitCode::from(interrupted.exit_code)
            } else if e.downcast_ref::<errors::UsageError>().is_some()
                || e.chain().any(|c| {
                    c.is::<checkpoint::hugging_face::Unrunnable>()
                        || c.is::<infer::LanguageRefused>()
                })
            {
                // A model of a family this tool does not run, or without its tokenizer
                // files, is the user's choice of --checkpoint, as a Hub name's would be; a
                // language it cannot translate in is the choice of --source-lang or
                // --target-lang (the library words it with the flags' names).
                ExitCode::from(USAGE_ERROR)
            } else {
                ExitCode::FAILURE
            }
        }
    }
}
