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

use candle_core::Tensor;

/// How one kind of weights file names the modules' tensors.
pub trait WeightFormat: Send + Sync {
    /// What the format is called, for errors.
    fn name(&self) -> &'static str;

    /// The module name of the file's tensor `file_name`; `None` when the format places it
    /// nowhere (strict loading then reports it as left over).
    fn module_name<'a>(&self, file_name: &'a str) -> Option<Cow<'a, str>>;

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

    fn module_name<'a>(&self, file_name: &'a str) -> Option<Cow<'a, str>> {
        Some(Cow::Borrowed(file_name))
    }

    fn file_name<'a>(&self, module_name: &'a str) -> Cow<'a, str> {
        Cow::Borrowed(module_name)
    }
}

/// The format every checkpoint this tool writes is in.
pub const OURS: &AnnotatedTransformer = &AnnotatedTransformer;

/// A file's tensors under their module names, and the file names the format could not
/// place (left over, for strict loading to report).
#[derive(Clone)]
pub struct ByModule {
    pub tensors: HashMap<String, Tensor>,
    pub unplaced: Vec<String>,
}

/// Renames a file's `tensors` to module names through `format`. Two file names mapped to one
/// module name is the format's error, named.
pub fn to_modules(
    format: &dyn WeightFormat,
    tensors: HashMap<String, Tensor>,
) -> Result<ByModule, String> {
    let mut by_module = HashMap::with_capacity(tensors.len());
    let mut unplaced = Vec::new();
    let mut origin: HashMap<String, String> = HashMap::new();
    for (file_name, tensor) in tensors {
        let Some(module) = format.module_name(&file_name).map(Cow::into_owned) else {
            unplaced.push(file_name);
            continue;
        };
        if let Some(first) = origin.insert(module.clone(), file_name.clone()) {
            return Err(format!(
                "{first} and {file_name} both map to {module} in {}",
                format.name()
            ));
        }
        by_module.insert(module, tensor);
    }
    unplaced.sort();
    Ok(ByModule {
        tensors: by_module,
        unplaced,
    })
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

        fn module_name<'a>(&self, file_name: &'a str) -> Option<Cow<'a, str>> {
            file_name.strip_prefix("model.").map(Cow::Borrowed)
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
        let ours = to_modules(OURS, tensors(&["a.weight", "b.1.pe"])).unwrap();
        assert!(ours.tensors.contains_key("b.1.pe") && ours.unplaced.is_empty());
        let foreign = to_modules(&Prefixed, tensors(&["model.a.weight", "extra"])).unwrap();
        assert_eq!(foreign.tensors.keys().collect::<Vec<_>>(), vec!["a.weight"]);
        assert_eq!(foreign.unplaced, vec!["extra".to_string()]);
        let saved = to_file(&Prefixed, foreign.tensors.into_iter().collect());
        assert_eq!(saved[0].0, "model.a.weight");
    }

    #[test]
    fn two_file_names_for_one_module_name_are_refused() {
        struct Lossy;
        impl WeightFormat for Lossy {
            fn name(&self) -> &'static str {
                "lossy"
            }
            fn module_name<'a>(&self, _: &'a str) -> Option<Cow<'a, str>> {
                Some(Cow::Borrowed("same"))
            }
            fn file_name<'a>(&self, module_name: &'a str) -> Cow<'a, str> {
                Cow::Borrowed(module_name)
            }
        }
        let error = to_modules(&Lossy, tensors(&["x", "y"])).err().unwrap();
        assert!(error.contains("both map to same in lossy"), "{error}");
    }
}
