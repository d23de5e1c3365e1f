//! The `transformer` command line as a library: each command is one file of `commands/` (its
//! arguments and its `run`); what several share is named by what it does (`flags`,
//! `device_choice`, `open_checkpoint`, `errors`, `stdout`, `stdin_lines`, `output_guard`,
//! `stop_signals`, `progress`), and the benchmark's workloads are `bench`. The binary
//! (`main.rs`) runs [`run_command_line`]; the Python package runs the same commands' doors
//! (a checkpoint named as `--checkpoint` names it, `train`'s run) and words errors as
//! [`error_line`] does. The library crates below hold the model, its training and its
//! inference.

/// `eprintln!` that never panics: a closed or full stderr (`2>&1 | head`, `2>/dev/full`) loses
/// the message, never the run (std's panics when the write fails). Defined before the modules,
/// so that theirs is this one.
macro_rules! eprintln {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}

pub mod bench;
pub mod commands;
pub mod device_choice;
pub mod errors;
pub mod flags;
pub mod library_log;
pub mod open_checkpoint;
pub mod output_guard;
pub mod progress;
pub mod stdin_lines;
pub mod stdout;
pub mod stop_signals;

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

/// How a command failed, as its exit status tells it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Failure {
    /// Something the user asked for makes no sense (exit status 2).
    Usage,
    /// Stopped on request, its work saved; the status is 128 + the signal.
    Interrupted(u8),
    /// Anything else (exit status 1).
    Other,
}

/// What kind of failure `error` is (see [`Failure`]).
pub fn failure(error: &anyhow::Error) -> Failure {
    if let Some(interrupted) = error.downcast_ref::<errors::Interrupted>() {
        return Failure::Interrupted(interrupted.exit_code);
    }
    let usage = error.downcast_ref::<errors::UsageError>().is_some()
        || error.chain().any(|c| {
            c.is::<checkpoint::hugging_face::Unrunnable>() || c.is::<infer::LanguageRefused>()
        });
    // A model of a family this tool does not run, or without its tokenizer files, is the
    // user's choice of --checkpoint, as a Hub name's would be; a language it cannot translate
    // in is the choice of --source-lang or --target-lang (the library words it with the
    // flags' names).
    if usage {
        Failure::Usage
    } else {
        Failure::Other
    }
}

/// `error` as the command line reports it, without the `error: ` before it: one line (candle
/// appends a backtrace to its errors when RUST_BACKTRACE is set), and what to do about it.
pub fn error_line(error: &anyhow::Error) -> String {
    let message = format!("{error:#}");
    let line = message.lines().next().unwrap_or_default();
    format!("{line}{}", advice(error))
}

/// Reads `TRANSFORMER_MAX_ISA` (warning of a cap candle's products ignore); an unknown ISA
/// is an error naming the choices.
pub fn read_isa_cap() -> anyhow::Result<()> {
    match kernels::isa::requested_cap() {
        Err(unknown) => Err(errors::UsageError(unknown.to_string()).into()),
        Ok(Some(cap)) => {
            warn_of_an_isa_cap_gemm_ignores(cap);
            Ok(())
        }
        Ok(None) => Ok(()),
    }
}

/// Parses the command line, runs the command and reports its error once, on stderr; the
/// exit status says how it ended ([`Failure`]).
pub fn run_command_line() -> ExitCode {
    library_log::install();
    let cli = Cli::parse();
    if let Err(unknown) = read_isa_cap() {
        let _ = writeln!(std::io::stderr(), "error: {unknown}");
        return ExitCode::from(USAGE_ERROR);
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
            // Written, not `eprintln!`ed: a closed stderr must not turn an error into a panic.
            let _ = writeln!(std::io::stderr(), "error: {}", error_line(&e));
            match failure(&e) {
                Failure::Interrupted(status) => ExitCode::from(status),
                Failure::Usage => ExitCode::from(USAGE_ERROR),
                Failure::Other => ExitCode::FAILURE,
            }
        }
    }
}
