//! With the `cuda` feature: compiles the fused CUDA kernels (src/kernels/cuda/fused.cu) to
//! PTX with the toolkit's `nvcc`, for the GPU generation in `CUDA_COMPUTE_CAP` (80 when
//! unset: PTX is compiled on for newer GPUs by the driver), as candle-kernels compiles its own.
//! Without the feature there is nothing to build.

use std::path::PathBuf;
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=CUDA_COMPUTE_CAP");
    println!("cargo:rerun-if-env-changed=NVCC");
    if std::env::var_os("CARGO_FEATURE_CUDA").is_none() {
        return;
    }
    let source = "src/kernels/cuda/fused.cu";
    println!("cargo:rerun-if-changed={source}");
    let out =
        PathBuf::from(std::env::var("OUT_DIR").expect("cargo sets OUT_DIR")).join("fused.ptx");
    let cap = std::env::var("CUDA_COMPUTE_CAP").unwrap_or_else(|_| "80".into());
    let cap: String = cap.chars().filter(char::is_ascii_digit).collect();
    let nvcc = std::env::var("NVCC").unwrap_or_else(|_| "nvcc".into());
    let status = Command::new(&nvcc)
        .args(["-ptx", "-O3", "-std=c++17"])
        .arg(format!("-arch=compute_{cap}"))
        .arg(source)
        .arg("-o")
        .arg(&out)
        .status();
    match status {
        Ok(status) if status.success() => {}
        Ok(status) => panic!("{nvcc} -ptx {source} failed ({status})"),
        Err(e) => panic!(
            "the cuda feature needs {nvcc} (the CUDA toolkit) on the PATH to compile {source}: {e}; \
             see docs/gpu.md (scripts/setup-cuda.sh installs one)"
        ),
    }
}
