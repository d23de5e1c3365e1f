//! int8 checkpoints (quantized ones): our checkpoint layout, with every matrix the
//! model reads in int8 stored as safetensors `I8` values `(out, in)` under its own name and
//! its row scales as F32 `(out,)` under `<name>_scale` (CTranslate2's naming); the rest
//! (biases, norms, position tables) stays F32. In memory the values travel in `U8` tensors
//! (candle has no `i8`), which only such a file produces.

use std::collections::{HashMap, HashSet};
use std::path::Path;

use anyhow::{bail, Context};
use candle_core::{DType, Device, Tensor};

use crate::kernels::int8::{as_signed, quantize_rows};
use crate::model::weights::scale_name;

/// The metadata key saying which checkpoint an int8 one was quantized from.
pub const QUANTIZED_FROM: &str = "quantized_from";

/// Checks the int8 tensors (`int8`, by name) of the weights file `path`: each is a matrix
/// with row scales beside it (F32, normal, positive, and small enough that the matrix's
/// product with inputs of magnitude up to 1 stays finite in f32) and values in [-127, 127]
/// (what the kernels assume; -128 is no quantizer's output). The error names the tensor;
/// `stored` says how the file spells each dtype.
pub fn check(
    path: &Path,
    tensors: &HashMap<String, Tensor>,
    int8: &HashSet<String>,
    stored: &HashMap<String, String>,
) -> anyhow::Result<()> {
    let mut names: Vec<&String> = int8.iter().collect();
    names.sort();
    for name in names {
        let problem = problem_with(tensors, name, stored);
        if let Some(problem) = problem {
            bail!(
                "{} tensor {name} {problem}; the file is damaged: quantize the float checkpoint \
                 again",
                path.display()
            );
        }
    }
    Ok(())
}

fn problem_with(
    tensors: &HashMap<String, Tensor>,
    name: &str,
    stored: &HashMap<String, String>,
) -> Option<String> {
    let values = &tensors[name];
    let Ok((rows, cols)) = values.dims2() else {
        return Some(format!(
            "is int8 with shape {:?}, where only matrices are",
            values.dims()
        ));
    };
    let scale = scale_name(name);
    let Some(scales) = tensors.get(&scale) else {
        return Some(format!("is int8 but its row scales {scale} are missing"));
    };
    if scales.dtype() != DType::F32 || scales.dims() != [rows] {
        let dtype = stored.get(&scale).map_or(
            super::tensor_file::dtype_name(scales.dtype()),
            String::as_str,
        );
        return Some(format!(
            "has {rows} rows but {scale} is {dtype} {:?}, where F32 [{rows}] belongs",
            scales.dims()
        ));
    }
    let Ok(scales) = scales.to_vec1::<f32>() else {
        return Some(format!("has row scales ({scale}) that cannot be read"));
    };
    let largest = largest_scale(cols);
    let bad: Vec<f32> = scales
        .iter()
        .copied()
        .filter(|v| !(v.is_normal() && *v > 0.0 && *v <= largest))
        .collect();
    if let Some(first) = bad.first() {
        return Some(format!(
            "has {} of {rows} row scales ({scale}) outside what quantize writes, the first \
             {first:e} (each must be a normal positive f32 of at most {largest:.2e}, so that \
             products over {cols} inputs stay finite)",
            bad.len()
        ));
    }
    let in_range = values
        .flatten_all()
        .and_then(|v| v.to_vec1::<u8>())
        .is_ok_and(|v| !v.contains(&0x80));
    if !in_range {
        return Some("holds -128, outside the int8 range [-127, 127] quantize writes".into());
    }
    None
}

/// The largest row scale of a matrix with `cols` inputs: one at which its product with
/// inputs of magnitude up to 1 (127 * scale * cols) still fits an f32. quantize's scales
/// are a row's largest magnitude / 127, far below it for any trained weight.
fn largest_scale(cols: usize) -> f32 {
    f32::MAX / (127.0 * cols.max(1) as f32)
}

/// The float values `scales[j] * values[j][k]` of an int8 matrix.
pub fn dequantized(values: &Tensor, scales: &Tensor) -> candle_core::Result<Tensor> {
    let (rows, cols) = values.dims2()?;
    let bytes = values
        .to_device(&Device::Cpu)?
        .flatten_all()?
        .to_vec1::<u8>()?;
    let scales = scales.to_device(&Device::Cpu)?.to_vec1::<f32>()?;
    let mut floats = Vec::with_capacity(rows * cols);
    for (row, scale) in as_signed(&bytes).chunks_exact(cols.max(1)).zip(&scales) {
        floats.extend(row.iter().map(|&q| f32::from(q) * scale));
    }
    Tensor::from_vec(floats, (rows, cols), values.device())
}

/// A float matrix quantized per row: its int8 values (in a `U8` tensor) and row scales.
pub fn quantized(matrix: &Tensor) -> candle_core::Result<(Tensor, Tensor)> {
    let (rows, cols) = matrix.dims2()?;
    let matrix = matrix.to_dtype(DType::F32)?.contiguous()?;
    let (values, scales) = {
        let (storage, layout) = matrix.storage_and_layout();
        let candle_core::Storage::Cpu(storage) = &*storage else {
            candle_core::bail!("int8: weights are quantized on the CPU")
        };
        let start = layout.start_offset();
        quantize_rows(
            &storage.as_slice::<f32>()?[start..start + rows * cols],
            rows,
            cols,
        )
    };
    let bytes: Vec<u8> = values.into_iter().map(|v| v as u8).collect();
    Ok((
        Tensor::from_vec(bytes, (rows, cols), &Device::Cpu)?,
        Tensor::from_vec(scales, rows, &Device::Cpu)?,
    ))
}

/// Writes `tensors` (int8 ones as `U8` tensors, stored as `I8`) to the safetensors file
/// `path`, with `metadata`.
pub fn write(
    path: &Path,
    tensors: &[(String, Tensor)],
    metadata: HashMap<String, String>,
) -> anyhow::Result<()> {
    use safetensors::tensor::{Dtype, TensorView};
    let mut views = Vec::with_capacity(tensors.len());
    let mut buffers = Vec::with_capacity(tensors.len());
    for (name, tensor) in tensors {
        let tensor = tensor.to_device(&Device::Cpu)?;
        let (dtype, bytes) = match tensor.dtype() {
            DType::U8 => (Dtype::I8, tensor.flatten_all()?.to_vec1::<u8>()?),
            DType::F32 => {
                let values = tensor.flatten_all()?.to_vec1::<f32>()?;
                let bytes = values.iter().flat_map(|v| v.to_le_bytes()).collect();
                (Dtype::F32, bytes)
            }
            other => bail!("int8 checkpoint: tensor {name} is {other:?}, not F32 or int8"),
        };
        buffers.push((name.clone(), dtype, tensor.dims().to_vec(), bytes));
    }
    let mut digest = super::tensor_file::TensorDigest::default();
    for (name, dtype, shape, bytes) in &buffers {
        digest.add(name, bytes);
        views.push((name.clone(), TensorView::new(*dtype, shape.clone(), bytes)?));
    }
    let mut metadata = metadata;
    metadata.insert(
        super::tensor_file::CHECKSUM_KEY.to_string(),
        digest.finish(),
    );
    let cannot = || format!("cannot write {}", path.display());
    safetensors::tensor::serialize_to_file(views, Some(metadata), path).with_context(cannot)?;
    super::tensor_file::sort_header(path).with_context(cannot)?;
    std::fs::File::open(path)
        .and_then(|f| f.sync_all())
        .with_context(cannot)
}
