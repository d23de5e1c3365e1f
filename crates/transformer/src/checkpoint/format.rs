//! The format layer: how a weights file names the tensors of the modules. The modules ask a
//! `VarBuilder` for their tensors by module name (each struct field's name, which for our
//! own checkpoints is also the PyTorch reference's state_dict key); a format maps a file's
//! names onto those and back, so a foreign checkpoint (a Hugging Face model) loads into the
//! same modules without a name of its own in the model code.
//!
//! Adding a format: a type implementing [`WeightFormat`] (both directions of the mapping),
//! and the loader that recognises its files choosing it. Strict loading works on module
//! names and reports in the file's: a file tensor the format cannot place, or a module
//! tensor the file lacks, is named as the file names it.

use std::borrow::Cow;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

use candle_core::Tensor;

/// How one kind of weights file names the modules' tensors.
pub trait WeightFormat: Send + Sync {
    /// What the format is called, for errors.
    fn name(&self) -> &'static str;

    /// The module tensors the file's tensor `file_name` holds: one, renamed; several for a
    /// tensor the file stores once for modules that share it; none when the format places it
    /// nowhere (strict loading then reports it as left over). Names only, so that a loader
    /// can choose how to read a tensor before reading it.
    fn module_names(&self, file_name: &str) -> Vec<String>;

    /// A file tensor as the module tensor `module` holds it: reshaped where the file lays it
    /// out otherwise.
    fn as_module(&self, _module: &str, tensor: Tensor) -> candle_core::Result<Tensor> {
        Ok(tensor)
    }

    /// The module tensors the file's tensor `file_name` holds, with their values (see
    /// [`Self::module_names`], [`Self::as_module`]).
    fn module_tensors(
        &self,
        file_name: &str,
        tensor: Tensor,
    ) -> candle_core::Result<Vec<(String, Tensor)>> {
        self.module_names(file_name)
            .into_iter()
            .map(|module| {
                let tensor = self.as_module(&module, tensor.clone())?;
                Ok((module, tensor))
            })
            .collect()
    }

    /// The file's name for the module tensor `module_name`: what a save writes, and how a
    /// missing tensor is reported.
    fn file_name<'a>(&self, module_name: &'a str) -> Cow<'a, str>;
}

/// Our own checkpoints, and The Annotated Transformer's PyTorch state_dict: the module names
/// are the reference's keys, so the mapping is the identity both ways.
pub struct AnnotatedTransformer;

impl WeightFormat for AnnotatedTransformer {
    fn name(&self) -> &'static str {
        "The Annotated Transformer's state_dict"
    }

    fn module_names(&self, file_name: &str) -> Vec<String> {
        vec![file_name.to_string()]
    }

    fn file_name<'a>(&self, module_name: &'a str) -> Cow<'a, str> {
        Cow::Borrowed(module_name)
    }
}

/// The format every checkpoint this tool writes is in.
pub const OURS: &AnnotatedTransformer = &AnnotatedTransformer;

/// A file's tensors under their module names, the file names the format could not place
/// (left over, for strict loading to report), and the format and file, for errors.
#[derive(Clone)]
pub struct ByModule {
    pub tensors: HashMap<String, Tensor>,
    pub unplaced: Vec<String>,
    /// For an int8 checkpoint, the checkpoint it was quantized from (as its metadata says).
    pub quantized_from: Option<String>,
    pub format: Arc<dyn WeightFormat>,
    pub path: PathBuf,
    /// The row scales of matrices quantized as they were read (`read.rs`), by their
    /// names beside their matrices', for the layers that ask: not the file's tensors.
    pub pending_scales: HashMap<String, Tensor>,
}

/// Renames the tensors of the file at `path` to module names through `format`. Two file
/// tensors for one module tensor must be the same values (a state_dict lists a tied matrix
/// under each of its names); different ones are the file's error, named.
pub fn to_modules(
    format: Arc<dyn WeightFormat>,
    tensors: HashMap<String, Tensor>,
    path: PathBuf,
) -> Result<ByModule, String> {
    let mut by_module: HashMap<String, Tensor> = HashMap::with_capacity(tensors.len());
    let mut unplaced = Vec::new();
    let mut origin: HashMap<String, String> = HashMap::new();
    let mut names: Vec<String> = tensors.keys().cloned().collect();
    names.sort();
    let mut tensors = tensors;
    for file_name in names {
        let Some(tensor) = tensors.remove(&file_name) else {
            continue;
        };
        let placed = format
            .module_tensors(&file_name, tensor)
            .map_err(|e| format!("tensor {file_name}: {e}"))?;
        if placed.is_empty() {
            unplaced.push(file_name);
            continue;
        }
        for (module, tensor) in placed {
            if let Some(first) = origin.get(&module) {
                if !same_values(&by_module[&module], &tensor) {
                    return Err(format!(
                        "{first} and {file_name} both map to {module} in {} but hold \
                         different values",
                        format.name()
                    ));
                }
                continue;
            }
            origin.insert(module.clone(), file_name.clone());
            by_module.insert(module, tensor);
        }
    }
    Ok(ByModule {
        tensors: by_module,
        unplaced,
        quantized_from: None,
        format,
        path,
        pending_scales: HashMap::new(),
    })
}

impl ByModule {
    /// Whether these are an int8 checkpoint's weights (`transformer quantize`).
    pub fn is_int8(&self) -> bool {
        self.tensors
            .values()
            .any(|t| t.dtype() == candle_core::DType::U8)
    }

    /// Refuses int8 weights for `purpose` (what cannot be done with them), naming the way
    /// back to the float checkpoint.
    pub fn refuse_int8(&self, purpose: &str) -> anyhow::Result<()> {
        if !self.is_int8() {
            return Ok(());
        }
        let source = self.quantized_from.as_deref().map_or_else(
            || "the float checkpoint it was quantized from".to_string(),
            |from| format!("the float checkpoint it was quantized from ({from})"),
        );
        anyhow::bail!(
            "{} holds int8 weights (a quantized checkpoint), which {purpose}; use {source} \
             instead",
            self.path.display()
        )
    }
}

/// Whether two tensors have one shape and equal values.
pub(super) fn same_values(a: &Tensor, b: &Tensor) -> bool {
    a.shape() == b.shape()
        && a.to_dtype(candle_core::DType::F32)
            .and_then(|a| a.ne(&b.to_dtype(candle_core::DType::F32)?))
            .and_then(|ne| {
                ne.to_dtype(candle_core::DType::F32)?
                    .sum_all()?
                    .to_scalar::<f32>()
            })
            .is_ok_and(|differing| differing == 0.0)
}

/// Module-named `tensors` under the file's names, for a save.
pub fn to_file(format: &dyn WeightFormat, tensors: Vec<(String, Tensor)>) -> Vec<(String, Tensor)> {
    tensors
        .into_iter()
        .map(|(module, tensor)| (format.file_name(&module).into_owned(), tensor))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::Device;

    /// A format that prefixes every name, as a foreign one renames them.
    struct Prefixed;

    impl WeightFormat for Prefixed {
        fn name(&self) -> &'static str {
            "prefixed"
        }

        fn module_names(&self, file_name: &str) -> Vec<String> {
            match file_name.strip_prefix("model.") {
                Some(name) => vec![name.to_string()],
                None if file_name == "both" => vec!["a.weight".into(), "b.weight".into()],
                None => Vec::new(),
            }
        }

        fn file_name<'a>(&self, module_name: &'a str) -> Cow<'a, str> {
            Cow::Owned(format!("model.{module_name}"))
        }
    }

    fn tensors(names: &[&str]) -> HashMap<String, Tensor> {
        let zero = Tensor::zeros(1, candle_core::DType::F32, &Device::Cpu).unwrap();
        names
            .iter()
            .map(|n| (n.to_string(), zero.clone()))
            .collect()
    }

    #[test]
    fn names_map_both_ways_and_unplaced_ones_are_kept_for_the_strict_check() {
        let ours = to_modules(
            Arc::new(AnnotatedTransformer),
            tensors(&["a.weight", "b.1.pe"]),
            "f".into(),
        )
        .unwrap();
        assert!(ours.tensors.contains_key("b.1.pe") && ours.unplaced.is_empty());
        let foreign = to_modules(
            Arc::new(Prefixed),
            tensors(&["model.a.weight", "extra"]),
            "f".into(),
        )
        .unwrap();
        assert_eq!(foreign.tensors.keys().collect::<Vec<_>>(), vec!["a.weight"]);
        assert_eq!(foreign.unplaced, vec!["extra".to_string()]);
        let saved = to_file(&Prefixed, foreign.tensors.into_iter().collect());
        assert_eq!(saved[0].0, "model.a.weight");
        // One file tensor for two modules, and a tied copy listed again with equal values.
        let tied = to_modules(
            Arc::new(Prefixed),
            tensors(&["both", "model.a.weight"]),
            "f".into(),
        )
        .unwrap();
        assert_eq!(tied.tensors.len(), 2);
    }

    #[test]
    fn two_file_tensors_for_one_module_tensor_must_hold_the_same_values() {
        let mut file = tensors(&["model.a.weight"]);
        let ones = Tensor::ones(1, candle_core::DType::F32, &Device::Cpu).unwrap();
        file.insert("both".into(), ones);
        let error = to_modules(Arc::new(Prefixed), file, "f".into())
            .err()
            .unwrap();
        assert!(error.contains("both and model.a.weight both map to a.weight in prefixed but hold different values"), "{error}");
    }
}
