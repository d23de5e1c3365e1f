//! A weights file (safetensors, or a PyTorch `pytorch_model.bin`) read straight into the form
//! the model will compute in: each matrix a product reads quantized to int8 a block of rows
//! at a time as it is read (its row scales kept for its layer), or rounded to bf16 as soon as
//! it is read, so that loading a model for int8 decoding never holds its float32 weights
//! whole (NLLB-200-distilled-600M: 2.4 GB in float32, 0.6 GB in int8); a storage several
//! names share is read once. Everything else is read as `read_weights` reads it, and checked
//! the same way.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use anyhow::Context;
use candle_core::{DType, Device, Tensor};

use super::format::{same_values, ByModule, WeightFormat};
use super::pth_index::PthIndex;
use super::read_weights::check_tensor;
use super::strict::is_matrix_name;
use super::tensor_index::TensorIndex;
use crate::config::ComputeType;
use crate::model::weights::scale_name;

/// A weights file read tensor by tensor.
pub(super) trait WeightSource {
    /// The tensors' names, sorted.
    fn names(&self) -> Vec<String>;
    /// The dtype of `name` as safetensors spells it, and its shape.
    fn stored(&self, name: &str) -> anyhow::Result<(String, Vec<usize>)>;
    /// Which values `name` holds: names of one storage hold the same.
    fn storage(&self, name: &str) -> anyhow::Result<String>;
    fn read(&mut self, name: &str, device: &Device) -> anyhow::Result<Tensor>;
    /// A float matrix quantized per row as it is read: values (`U8`) and row scales.
    fn read_int8_rows(&mut self, name: &str) -> anyhow::Result<(Tensor, Tensor)>;
    /// Checks what can be checked once every tensor is read (a checksum).
    fn finish(self: Box<Self>) -> anyhow::Result<()>;
}

impl WeightSource for TensorIndex {
    fn names(&self) -> Vec<String> {
        let mut names = TensorIndex::names(self);
        names.sort();
        names
    }
    fn stored(&self, name: &str) -> anyhow::Result<(String, Vec<usize>)> {
        let entry = self.entry(name)?;
        Ok((entry.dtype.clone(), entry.shape.clone()))
    }
    fn storage(&self, name: &str) -> anyhow::Result<String> {
        Ok(name.to_string())
    }
    fn read(&mut self, name: &str, device: &Device) -> anyhow::Result<Tensor> {
        TensorIndex::read(self, name, device)
    }
    fn read_int8_rows(&mut self, name: &str) -> anyhow::Result<(Tensor, Tensor)> {
        TensorIndex::read_int8_rows(self, name)
    }
    fn finish(self: Box<Self>) -> anyhow::Result<()> {
        self.check_checksum()
    }
}

impl WeightSource for PthIndex {
    fn names(&self) -> Vec<String> {
        PthIndex::names(self)
    }
    fn stored(&self, name: &str) -> anyhow::Result<(String, Vec<usize>)> {
        PthIndex::stored(self, name)
    }
    fn storage(&self, name: &str) -> anyhow::Result<String> {
        PthIndex::storage(self, name)
    }
    fn read(&mut self, name: &str, device: &Device) -> anyhow::Result<Tensor> {
        PthIndex::read(self, name, device)
    }
    fn read_int8_rows(&mut self, name: &str) -> anyhow::Result<(Tensor, Tensor)> {
        PthIndex::read_int8_rows(self, name)
    }
    fn finish(self: Box<Self>) -> anyhow::Result<()> {
        Ok(())
    }
}

/// The weights file at `path`: a PyTorch file (`.bin`, `.pt`, `.pth`) or safetensors.
pub(super) fn open_source(path: &Path) -> anyhow::Result<Box<dyn WeightSource>> {
    let pytorch = path
        .extension()
        .is_some_and(|e| e == "bin" || e == "pt" || e == "pth");
    Ok(if pytorch {
        Box::new(PthIndex::open(path)?)
    } else {
        Box::new(TensorIndex::open(path)?)
    })
}

/// One storage's values as placed: the tensor (or int8 values) and its row scales.
type Values = (Tensor, Option<Tensor>);

/// The module tensors of the weights file at `path` (named by `format`) on `device`, its
/// matrices in `form`; the error names the file and what is wrong with it.
pub(super) fn read_modules_as(
    path: &Path,
    format: Arc<dyn WeightFormat>,
    device: &Device,
    form: ComputeType,
) -> anyhow::Result<ByModule> {
    let damaged = |e: anyhow::Error| {
        anyhow::anyhow!(
            "cannot read {}: {e:#}; the file is damaged: copy it again from where it came \
             from (a run of this tool: train again), or pick another checkpoint",
            path.display()
        )
    };
    let mut source = open_source(path).map_err(damaged)?;
    let mut placed = Placed::default();
    let mut unplaced = Vec::new();
    // Each storage's values once read, for the other names that share it.
    let mut read: HashMap<String, Values> = HashMap::new();
    for file_name in source.names() {
        let modules = format.module_names(&file_name);
        let (stored, shape) = source.stored(&file_name).map_err(damaged)?;
        let storage = source.storage(&file_name).map_err(damaged)?;
        let float = matches!(stored.as_str(), "F32" | "F16" | "BF16");
        let matrix = float
            && shape.len() == 2
            && !modules.is_empty()
            && modules.iter().all(|m| is_matrix_name(m));
        if let Some((values, scales)) = read.get(&storage).cloned() {
            placed.place(&modules, &file_name, values, scales, &*format, path)?;
            continue;
        }
        if form == ComputeType::Int8 && matrix {
            let (values, scales) = source
                .read_int8_rows(&file_name)
                .with_context(|| format!("tensor {file_name}"))
                .map_err(|e| refused(path, e))?;
            read.insert(storage, (values.clone(), Some(scales.clone())));
            placed.place(&modules, &file_name, values, Some(scales), &*format, path)?;
            continue;
        }
        let tensor = source
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
            ComputeType::Bfloat16 if matrix => tensor.to_dtype(DType::BF16)?,
            _ => tensor,
        };
        read.insert(storage, (tensor.clone(), None));
        placed.place(&modules, &file_name, tensor, None, &*format, path)?;
    }
    source.finish().map_err(damaged)?;
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
        "{}: {problem:#}; the file is damaged or holds values no model can use: copy it again \
         from where it came from (a run of this tool: train again), or pick another checkpoint",
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
    /// Places the file tensor `file_name`'s `values` as each of `modules` (shaped as each
    /// holds it), with its row `scales` when it was quantized.
    fn place(
        &mut self,
        modules: &[String],
        file_name: &str,
        values: Tensor,
        scales: Option<Tensor>,
        format: &dyn WeightFormat,
        path: &Path,
    ) -> anyhow::Result<()> {
        for module in modules {
            let shaped = match scales {
                Some(_) => values.clone(),
                None => format.as_module(module, values.clone())?,
            };
            self.insert(module, file_name, shaped, format, path)?;
            if let Some(scales) = &scales {
                self.scales.insert(scale_name(module), scales.clone());
            }
        }
        Ok(())
    }

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
            // One storage under two names is one tensor: nothing to compare.
            let placed = &self.tensors[module];
            if placed.id() != tensor.id() && !same_values(placed, &tensor) {
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
