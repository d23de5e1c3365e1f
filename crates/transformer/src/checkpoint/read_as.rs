//! A safetensors weights file read straight into the form the model will compute in: each
//! matrix a product reads quantized to int8 a block of rows at a time as it is read (its row
//! scales kept for its layer), or rounded to bf16 as soon as it is read, so that loading a
//! model for int8 decoding never holds its float32 weights whole (NLLB-200-distilled-600M:
//! 2.4 GB in float32, 0.6 GB in int8). Everything else is read as `read_weights` reads it,
//! and checked the same way.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use anyhow::Context;
use candle_core::{DType, Device, Tensor};

use super::format::{same_values, ByModule, WeightFormat};
use super::read_weights::check_tensor;
use super::strict::is_matrix_name;
use super::tensor_index::TensorIndex;
use crate::model::weights::scale_name;

/// How the matrices a product reads are read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MatrixForm {
    /// As the file stores them.
    Stored,
    /// Quantized per row as they are read.
    Int8,
    /// Rounded to bf16 as they are read.
    Bfloat16,
}

/// The module tensors of the safetensors file at `path` (named by `format`) on `device`,
/// its matrices in `form`; the error names the file and what is wrong with it.
pub(super) fn read_modules_as(
    path: &Path,
    format: Arc<dyn WeightFormat>,
    device: &Device,
    form: MatrixForm,
) -> anyhow::Result<ByModule> {
    let damaged = |e: anyhow::Error| {
        anyhow::anyhow!(
            "cannot read {}: {e:#}; the file is damaged: copy it again from where it came \
             from, train again, or pick another checkpoint",
            path.display()
        )
    };
    let mut index = TensorIndex::open(path).map_err(damaged)?;
    let mut placed = Placed::default();
    let mut unplaced = Vec::new();
    let mut names = index.names();
    names.sort();
    for file_name in names {
        let modules = format.module_names(&file_name);
        let entry = index.entry(&file_name).map_err(damaged)?;
        let stored = entry.dtype.clone();
        let float = matches!(stored.as_str(), "F32" | "F16" | "BF16");
        let matrix = float
            && entry.shape.len() == 2
            && !modules.is_empty()
            && modules.iter().all(|m| is_matrix_name(m));
        if form == MatrixForm::Int8 && matrix {
            let (values, scales) = index
                .read_int8_rows(&file_name)
                .map_err(|e| refused(path, e))?;
            for module in modules {
                placed.insert(&module, &file_name, values.clone(), &*format, path)?;
                placed.scales.insert(scale_name(&module), scales.clone());
            }
            continue;
        }
        let tensor = index
            .read(&file_name, device)
            .with_context(|| format!("tensor {file_name}"))
            .map_err(damaged)?;
        check_tensor(&tensor, Some(&stored))
            .map_err(|problem| refused(path, anyhow::anyhow!("tensor {file_name} {problem}")))?;
        if modules.is_empty() {
            unplaced.push(file_name);
            continue;
        }
        let tensor = match form {
            MatrixForm::Bfloat16 if matrix => tensor.to_dtype(DType::BF16)?,
            _ => tensor,
        };
        for module in modules {
            let shaped = format.as_module(&module, tensor.clone())?;
            placed.insert(&module, &file_name, shaped, &*format, path)?;
        }
    }
    index.check_checksum().map_err(damaged)?;
    Ok(ByModule {
        tensors: placed.tensors,
        unplaced,
        quantized_from: None,
        format,
        path: path.to_path_buf(),
        pending_scales: placed.scales,
    })
}

/// A tensor that cannot be a weight, as `read_weights` words it.
fn refused(path: &Path, problem: anyhow::Error) -> anyhow::Error {
    anyhow::anyhow!(
        "{} {problem:#}; the file is damaged or not a checkpoint of this tool: train again or \
         pick another run",
        path.display()
    )
}

/// The module tensors placed so far, the file tensor each came from, and the row scales of
/// the matrices quantized.
#[derive(Default)]
struct Placed {
    tensors: HashMap<String, Tensor>,
    origin: HashMap<String, String>,
    scales: HashMap<String, Tensor>,
}

impl Placed {
    /// Places `tensor` (from the file's `file_name`) as `module`; a second file tensor for
    /// one module must hold the same values (a state_dict lists a tied matrix under each of
    /// its names).
    fn insert(
        &mut self,
        module: &str,
        file_name: &str,
        tensor: Tensor,
        format: &dyn WeightFormat,
        path: &Path,
    ) -> anyhow::Result<()> {
        if let Some(first) = self.origin.get(module) {
            if !same_values(&self.tensors[module], &tensor) {
                anyhow::bail!(
                    "{}: {first} and {file_name} both map to {module} in {} but hold different \
                     values",
                    path.display(),
                    format.name()
                );
            }
            return Ok(());
        }
        self.origin
            .insert(module.to_string(), file_name.to_string());
        self.tensors.insert(module.to_string(), tensor);
        Ok(())
    }
}
