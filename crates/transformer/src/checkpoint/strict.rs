//! Strict loading, as PyTorch's `load_state_dict(strict=True)`: every tensor the model asks
//! for must be there with its shape, and every tensor in the file must be asked for.

use std::collections::{HashMap, HashSet};

use std::sync::{Arc, Mutex};

use anyhow::bail;
use candle_core::{DType, Device, Shape, Tensor};
use candle_nn::var_builder::SimpleBackend;
use candle_nn::{Init, VarBuilder, VarMap};

use super::format::{ByModule, WeightFormat};
use super::int8_file;
use crate::config::{ComputeType, Config, ModelConfig, VocabSizes};
use crate::model::positions::POSITION_TABLE;
use crate::model::weights::scale_name;
use crate::model::Model;
use crate::tokenize::Tokenizers;

/// Every tensor a backend served, as served, by module name.
type ServedLog = Arc<Mutex<Vec<(String, Tensor)>>>;

/// Serves a checkpoint's tensors to a `VarBuilder` and remembers which names the model asked
/// for, so that tensors nobody asked for can be reported (PyTorch's strict loading).
struct RecordingBackend {
    /// By module name. Built for int8, a tensor leaves once fetched, so that each f32 weight
    /// is freed as soon as its layer has quantized it.
    tensors: Mutex<HashMap<String, Tensor>>,
    /// How the file names them, for errors.
    format: Arc<dyn WeightFormat>,
    requested: Arc<Mutex<HashSet<String>>>,
    /// The form the model is built to compute in: int8 serves its matrices as int8,
    /// bfloat16 as `BF16` tensors, float32 every tensor as the VarBuilder asks.
    form: ComputeType,
    /// The row scales of float matrices quantized here, until their layer asks for them.
    scales: Mutex<HashMap<String, Tensor>>,
    /// Every tensor served, as served, when asked to keep them (`transformer quantize`).
    served: Option<ServedLog>,
}

impl RecordingBackend {
    fn new(
        tensors: HashMap<String, Tensor>,
        format: Arc<dyn WeightFormat>,
    ) -> (Self, Arc<Mutex<HashSet<String>>>) {
        let requested = Arc::new(Mutex::new(HashSet::new()));
        let backend = Self {
            tensors: Mutex::new(tensors),
            format,
            requested: requested.clone(),
            form: ComputeType::Float32,
            scales: Mutex::new(HashMap::new()),
            served: None,
        };
        (backend, requested)
    }

    /// `name` in the form the build computes in: built for int8, a matrix as int8 (`U8`
    /// values, quantized here when the file holds floats, its scales then kept for
    /// [`scale_name`]), which the layer asked for as float and so knows by its dtype; else
    /// floats (an int8 matrix's values scaled back) as `dtype` asks; built for bfloat16, a
    /// matrix as `BF16` (rounded here), which the layer knows by its dtype too.
    fn serve(&self, name: &str, dtype: DType) -> candle_core::Result<Tensor> {
        let pending = self.scales.lock().ok().and_then(|mut s| s.remove(name));
        let tensor = match pending {
            Some(scales) => scales,
            None => {
                let tensor = self.fetch(name)?;
                match tensor.dtype() {
                    DType::U8 if self.form == ComputeType::Int8 || dtype == DType::U8 => tensor,
                    DType::U8 => {
                        let scales = self.fetch(&scale_name(name))?;
                        let floats = int8_file::dequantized(&tensor, &scales)?;
                        match self.form == ComputeType::Bfloat16 && is_matrix_weight(name, &floats)
                        {
                            true => floats.to_dtype(DType::BF16)?,
                            false => floats.to_dtype(dtype)?,
                        }
                    }
                    _ if self.form == ComputeType::Int8 && is_matrix_weight(name, &tensor) => {
                        let (values, scales) = int8_file::quantized(&tensor)?;
                        if let Ok(mut pending) = self.scales.lock() {
                            pending.insert(scale_name(name), scales);
                        }
                        values
                    }
                    _ if self.form == ComputeType::Bfloat16 && is_matrix_weight(name, &tensor) => {
                        tensor.to_dtype(DType::BF16)?
                    }
                    _ => tensor.to_dtype(dtype)?,
                }
            }
        };
        if let Some(served) = &self.served {
            if let Ok(mut served) = served.lock() {
                served.push((name.to_string(), tensor.clone()));
            }
        }
        Ok(tensor)
    }

    fn fetch(&self, name: &str) -> candle_core::Result<Tensor> {
        if let Ok(mut requested) = self.requested.lock() {
            requested.insert(name.to_string());
        }
        let mut tensors = self
            .tensors
            .lock()
            .map_err(|_| candle_core::Error::Msg("lock poisoned".into()))?;
        // Served in another form, each float weight is freed once its layer has it.
        let tensor = if self.form != ComputeType::Float32 {
            tensors.remove(name)
        } else {
            tensors.get(name).cloned()
        };
        tensor.ok_or_else(|| {
            candle_core::Error::Msg(format!("tensor {} is missing", self.format.file_name(name)))
        })
    }
}

impl SimpleBackend for RecordingBackend {
    fn get(
        &self,
        shape: Shape,
        name: &str,
        _: Init,
        dtype: DType,
        device: &Device,
    ) -> candle_core::Result<Tensor> {
        let tensor = self.serve(name, dtype)?;
        if tensor.shape() != &shape {
            let name = self.format.file_name(name);
            candle_core::bail!(
                "tensor {name} has shape {:?} but the config needs {:?}",
                tensor.dims(),
                shape.dims()
            )
        }
        tensor.to_device(device)
    }

    fn get_unchecked(
        &self,
        name: &str,
        dtype: DType,
        device: &Device,
    ) -> candle_core::Result<Tensor> {
        self.serve(name, dtype)?.to_device(device)
    }

    fn contains_tensor(&self, name: &str) -> bool {
        self.tensors
            .lock()
            .is_ok_and(|tensors| tensors.contains_key(name))
    }
}

/// Whether `tensor` is a matrix a product reads (a linear layer's or a token embedding
/// table's: torch's `weight` of two dimensions, not a learned position table, which is
/// added), the tensors decoding in int8 quantizes, as CTranslate2's converter quantizes.
fn is_matrix_weight(name: &str, tensor: &Tensor) -> bool {
    is_matrix_name(name) && tensor.rank() == 2 && tensor.dtype().is_float()
}

/// Whether the module tensor `name` is a module's `weight` other than a learned position
/// table: a matrix a product reads, when it has two dimensions.
pub(super) fn is_matrix_name(name: &str) -> bool {
    let Some(module) = name.strip_suffix("weight") else {
        return false;
    };
    let module = module.strip_suffix('.').unwrap_or(module);
    let is_module = module.is_empty() || name.ends_with(".weight");
    let positions = module == POSITION_TABLE || module.ends_with(&format!(".{POSITION_TABLE}"));
    is_module && !positions
}

/// The model `config` describes (any family) from `weights` (in our format), loaded
/// strictly: a tensor missing, of the wrong shape, or left over is named.
pub(super) fn build_model(
    config: &Config,
    tokenizers: &Tokenizers,
    weights: ByModule,
    device: &Device,
) -> anyhow::Result<Model> {
    build_model_as(config, tokenizers, weights, device, ComputeType::Float32)
}

/// As [`build_model`], its matrices served in the form `compute` reads (int8: see
/// [`crate::model::weights`]).
pub(super) fn build_model_as(
    config: &Config,
    tokenizers: &Tokenizers,
    weights: ByModule,
    device: &Device,
    compute: ComputeType,
) -> anyhow::Result<Model> {
    let vocab = tokenizers.vocab_sizes();
    let module_names: Vec<String> = weights.tensors.keys().cloned().collect();
    let format = weights.format.clone();
    build_strictly(weights, device, compute, (&config.model, vocab), || {
        names_apart(config, tokenizers, &module_names, &*format)
    })
}

/// As [`build_model_as`] for int8, with every tensor the model was served, as served: the
/// int8 matrices' values (in `U8` tensors) and row scales, and the float tensors, under
/// their module names.
pub(super) fn build_model_int8_served(
    config: &Config,
    tokenizers: &Tokenizers,
    weights: ByModule,
    device: &Device,
) -> anyhow::Result<(Model, Vec<(String, Tensor)>)> {
    let vocab = tokenizers.vocab_sizes();
    let module_names: Vec<String> = weights.tensors.keys().cloned().collect();
    let format = weights.format.clone();
    let served = Arc::new(Mutex::new(Vec::new()));
    let model = build_strictly_with(
        weights,
        device,
        ComputeType::Int8,
        Some(served.clone()),
        (&config.model, vocab),
        || names_apart(config, tokenizers, &module_names, &*format),
    )?;
    let served = std::mem::take(
        &mut *served
            .lock()
            .map_err(|_| anyhow::anyhow!("lock poisoned"))?,
    );
    Ok((model, served))
}

/// A model of `config`'s shape over `tensors` (module names, this tool's format, as
/// [`crate::model::TrainedWeights::named_tensors`] gives them) in the form `compute` reads: what a
/// checkpoint of these tensors loads as, for models made in memory (the decoding benchmarks).
pub fn model_from_tensors(
    config: &crate::config::ModelConfig,
    vocab: crate::model::VocabSizes,
    tensors: HashMap<String, Tensor>,
    device: &Device,
    compute: ComputeType,
) -> anyhow::Result<Model> {
    let weights = ByModule {
        tensors,
        unplaced: Vec::new(),
        quantized_from: None,
        format: Arc::new(super::format::AnnotatedTransformer),
        path: "(tensors in memory)".into(),
        pending_scales: HashMap::new(),
    };
    build_strictly(weights, device, compute, (config, vocab), || None)
}

/// Every tensor the file lacks and every one the model does not have, by the file's names,
/// when there is more than the first missing one to say (a renamed tensor is both): the
/// model's names come from building it afresh, on the error path only.
fn names_apart(
    config: &Config,
    tokenizers: &Tokenizers,
    file_names: &[String],
    format: &dyn WeightFormat,
) -> Option<String> {
    let varmap = VarMap::new();
    let vb = VarBuilder::from_varmap(&varmap, DType::F32, &Device::Cpu);
    let model = Model::new(&config.model, tokenizers.vocab_sizes(), vb).ok()?;
    let required: HashSet<String> = varmap.data().lock().ok()?.keys().cloned().collect();
    let optional: HashSet<String> = model.buffers().into_iter().map(|(n, _)| n).collect();
    let in_file: HashSet<&str> = file_names.iter().map(String::as_str).collect();
    let listed = |mut names: Vec<String>| {
        names.sort();
        names
            .iter()
            .map(|n| format.file_name(n).into_owned())
            .collect::<Vec<_>>()
            .join(", ")
    };
    let missing: Vec<String> = required
        .iter()
        .filter(|n| !in_file.contains(n.as_str()))
        .cloned()
        .collect();
    let extra: Vec<String> = file_names
        .iter()
        .filter(|n| !required.contains(*n) && !optional.contains(*n))
        .cloned()
        .collect();
    if missing.len() <= 1 && extra.is_empty() {
        return None;
    }
    let mut parts = Vec::new();
    if !missing.is_empty() {
        parts.push(format!("missing: {}", listed(missing)));
    }
    if !extra.is_empty() {
        parts.push(format!("not in the model: {}", listed(extra)));
    }
    Some(parts.join("; "))
}

/// Builds a model with `build` over `weights`, then refuses the file's tensors it did not
/// read (and those its format could not place), by the file's names; `explain_failure` may
/// give a fuller account of a failed build than its first error.
fn build_strictly(
    weights: ByModule,
    device: &Device,
    compute: ComputeType,
    shape: (&ModelConfig, VocabSizes),
    explain_failure: impl FnOnce() -> Option<String>,
) -> anyhow::Result<Model> {
    build_strictly_with(weights, device, compute, None, shape, explain_failure)
}

/// As [`build_strictly`], keeping every tensor served in `served` when given.
fn build_strictly_with(
    weights: ByModule,
    device: &Device,
    compute: ComputeType,
    served: Option<ServedLog>,
    (model_config, vocab): (&ModelConfig, VocabSizes),
    explain_failure: impl FnOnce() -> Option<String>,
) -> anyhow::Result<Model> {
    let weights_path = weights.path.clone();
    let mismatch = |account: String| {
        anyhow::anyhow!(
            "{} does not match its config and tokenizers: {account}",
            weights_path.display()
        )
    };
    // The one check of the model's size on this path: a config no device here could hold is
    // refused before the model is built.
    crate::model::footprint::refuse_if_too_large(model_config, vocab, device).map_err(mismatch)?;
    let format = weights.format.clone();
    let module_names: Vec<String> = weights.tensors.keys().cloned().collect();
    let (mut backend, requested) = RecordingBackend::new(weights.tensors, format.clone());
    // Matrices quantized as they were read: their scales wait for their layers.
    backend.scales = std::sync::Mutex::new(weights.pending_scales);
    backend.form = compute;
    backend.served = served;
    let vb = VarBuilder::from_backend(Box::new(backend), DType::F32, device.clone());
    // The first tensor the build missed, or the whole account of what is missing and left
    // over when there is more to say.
    let model = Model::new(model_config, vocab, vb)
        .map_err(|e| mismatch(explain_failure().unwrap_or_else(|| e.to_string())))?;
    let requested = requested
        .lock()
        .map_err(|_| anyhow::anyhow!("lock poisoned"))?;
    let mut unused: Vec<String> = module_names
        .iter()
        .filter(|n| !requested.contains(*n))
        .map(|n| format.file_name(n).into_owned())
        .chain(weights.unplaced)
        .collect();
    if !unused.is_empty() {
        unused.sort();
        bail!(
            "{} holds tensors that a model of its config does not have: {}; the weights and the \
             config do not belong together",
            weights_path.display(),
            unused
                .iter()
                .map(|n| n.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    Ok(model)
}
