//! `import transformer`: the engine of the `transformer` command from Python, as
//! CTranslate2's users call theirs. [`translator`] opens a checkpoint as `translate` does and
//! decodes with the GIL released; [`training`] runs the `train` command's run; [`scoring`]
//! gives sacreBLEU's BLEU and chrF; [`errors`] turns the library's errors into Python's
//! exceptions with the command line's messages. No model logic lives here.

mod arguments;
mod errors;
mod pool;
mod scoring;
mod training;
mod translation;
mod translator;
mod values;

use std::io::Write;
use std::sync::Once;

use pyo3::prelude::*;

// As the binary's (see src/main.rs): training frees and takes back tensors of many megabytes
// every step, and mimalloc keeps them instead of paying page faults for each. This is the
// extension's own allocator; Python's is untouched.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// `mi_option_purge_delay` in mimalloc.h (v2 and v3): -1 never returns freed memory to the OS.
const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

/// The settings the command reads from the environment at its start, read before each
/// model is opened or run trained: TRANSFORMER_KERNELS, TRANSFORMER_TF32 and
/// TRANSFORMER_MAX_ISA; a bad value is the command's usage error.
fn read_environment() -> anyhow::Result<()> {
    transformer_cli::device_choice::choose_kernels()?;
    transformer_cli::device_choice::choose_tf32()?;
    transformer_cli::read_isa_cap()
}

/// A line on stderr, as the command says what it does (a closed stderr loses it).
fn say(line: &str) {
    let _ = writeln!(std::io::stderr(), "{line}");
}

#[pymodule]
#[pyo3(name = "transformer")]
fn python_module(m: &Bound<'_, PyModule>) -> PyResult<()> {
    static START: Once = Once::new();
    START.call_once(|| {
        // SAFETY: sets an option of the extension's own allocator, before its first use
        // matters (freed memory kept instead of returned).
        unsafe { libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, -1) };
        // The library's warnings (`log` records) on stderr, as the command shows them.
        transformer_cli::library_log::install();
    });
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add_class::<translator::PyTranslator>()?;
    m.add_class::<translation::PyTranslation>()?;
    m.add_class::<training::PyTrainResult>()?;
    m.add_class::<scoring::PyBleuScore>()?;
    m.add_class::<scoring::PyChrfScore>()?;
    m.add_function(wrap_pyfunction!(training::train, m)?)?;
    m.add_function(wrap_pyfunction!(scoring::bleu, m)?)?;
    m.add_function(wrap_pyfunction!(scoring::chrf, m)?)?;
    Ok(())
}
