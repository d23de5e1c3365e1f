//! One of this tool's safetensors weights files read for loading and refused when a tensor
//! cannot be a weight: a dtype other than F32, F16 or BF16, or a NaN or an infinity anywhere.
//! (A Hugging Face directory's weights, safetensors or PyTorch, read through `read_as.rs`.)

use std::collections::{HashMap, HashSet};
use std::path::Path;

use candle_core::{DType, Device, Tensor};

use super::{int8_file, tensor_file, tensor_index};

/// A safetensors file of this format: float tensors only (our own are F32; F16 and BF16 are
/// what a PyTorch user's half-precision state_dict holds), every value finite. Anything else
/// would be converted or used silently: integer weights truncated, F64 rounded, NaN weights
/// translating every line to nothing.
pub(super) fn read_tensors(
    path: &Path,
    device: &Device,
) -> anyhow::Result<HashMap<String, Tensor>> {
    Ok(read_weights_file(path, device, false)?.tensors)
}

/// As [`read_tensors`], and, with `int8_allowed`, an int8 checkpoint's int8 matrices (see
/// [`int8_file`]), checked.
pub(super) fn read_weights_file(
    path: &Path,
    device: &Device,
    int8_allowed: bool,
) -> anyhow::Result<tensor_index::TensorFile> {
    let file = tensor_index::read(path, device).map_err(|e| {
        anyhow::anyhow!(
            "cannot read {}: {e:#}; the file is damaged: copy it again from where it came from, train again, or pick another checkpoint",
            path.display()
        )
    })?;
    let int8 = if int8_allowed {
        int8_file::check(path, &file.tensors, &file.int8, &file.stored_dtypes)?;
        file.int8.clone()
    } else {
        HashSet::new()
    };
    check_tensors(path, &file.tensors, &int8, &file.stored_dtypes)?;
    Ok(file)
}

/// Refuses a weights file with a tensor that cannot be a weight (see [`check_tensor`]);
/// the `int8` ones are checked apart. `stored` names the dtypes as the file spells them.
fn check_tensors(
    path: &Path,
    tensors: &HashMap<String, Tensor>,
    int8: &HashSet<String>,
    stored: &HashMap<String, String>,
) -> anyhow::Result<()> {
    let mut names: Vec<&String> = tensors.keys().filter(|n| !int8.contains(*n)).collect();
    names.sort();
    for name in names {
        let dtype = stored.get(name).map(String::as_str);
        check_tensor(&tensors[name], dtype).map_err(|problem| {
            anyhow::anyhow!(
                "{} tensor {name} {problem}; the file is damaged or not a checkpoint of this \
                 tool: train again or pick another run",
                path.display()
            )
        })?;
    }
    Ok(())
}

/// Why a tensor (stored as `stored`, where the file says) cannot be a weight (or one of
/// Adam's moments), if it cannot.
pub(super) fn check_tensor(tensor: &Tensor, stored: Option<&str>) -> Result<(), String> {
    if !matches!(tensor.dtype(), DType::F32 | DType::F16 | DType::BF16) {
        return Err(format!(
            "has dtype {}, where a checkpoint holds {}",
            stored.unwrap_or(tensor_file::dtype_name(tensor.dtype())),
            tensor_file::CHECKPOINT_DTYPES
        ));
    }
    let bad = non_finite_count(tensor).map_err(|e| format!("cannot be read: {e}"))?;
    if bad == 0 {
        Ok(())
    } else {
        Err(format!(
            "holds {bad} NaN or infinite value{} of {}",
            if bad == 1 { "" } else { "s" },
            tensor.elem_count()
        ))
    }
}

/// How many values of `tensor` are NaN or infinite: read in place for an f32 tensor on the
/// CPU (a copy of OPUS-MT's output layer, 119 MB, would raise the load's peak), else
/// through `0 x`, which is 0 for every finite x and NaN for NaN and the infinities.
pub(crate) fn non_finite_count(tensor: &Tensor) -> candle_core::Result<usize> {
    let tensor = tensor.contiguous()?;
    let (storage, layout) = tensor.storage_and_layout();
    if let (candle_core::Storage::Cpu(cpu), DType::F32) = (&*storage, tensor.dtype()) {
        let start = layout.start_offset();
        let values = &cpu.as_slice::<f32>()?[start..start + tensor.elem_count()];
        return Ok(values.iter().filter(|v| !v.is_finite()).count());
    }
    drop(storage);
    let zeros = tensor.to_dtype(DType::F32)?.affine(0.0, 0.0)?;
    if zeros.sum_all()?.to_scalar::<f32>()?.is_finite() {
        return Ok(0);
    }
    // Counted on the host only for a tensor already known to be damaged.
    let values = zeros.flatten_all()?.to_vec1::<f32>()?;
    Ok(values.iter().filter(|v| v.is_nan()).count())
}
