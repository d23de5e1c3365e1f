//! A checkpoint directory's parts read: its config, tokenizers and weights (under their
//! module names), ours or a Hugging Face directory's (MarianMT, M2M100, NLLB-200), each
//! failure naming its file. Our own safetensors weights are refused when a tensor cannot be a
//! weight (a dtype other than F32, F16 or BF16, a NaN or an infinity anywhere). Any weights
//! file (safetensors, or a PyTorch `pytorch_model.bin`) can be read straight into the form the
//! model will compute in: each matrix a product reads quantized to int8 a block of rows at a
//! time as it is read (its row scales kept for its layer), or rounded to bf16 as soon as it is
//! read, so that loading a model for int8 decoding never holds its float32 weights whole
//! (NLLB-200-distilled-600M: 2.4 GB in float32, 0.6 GB in int8); a storage several names share
//! is read once.

use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::sync::Arc;

use anyhow::{bail, Context};
use candle_core::{DType, Device, Tensor};

use super::format::{self, same_values, ByModule, WeightFormat};
use super::pth_index::PthIndex;
use super::strict::is_matrix_name;
use super::tensor_index::{self, TensorIndex};
use super::{hugging_face, int8_file, tensor_file, CONFIG_FILE, MODEL_FILE};
use crate::config::{ComputeType, Config, TokenizerKind};
use crate::model::weights::scale_name;
use crate::tokenize::Tokenizers;

/// A checkpoint directory's config, tokenizers and weights (under their module names,
/// through our format, as stored), each failure naming its file.
pub(super) fn read_parts(
    dir: &Path,
    device: &Device,
) -> anyhow::Result<(Config, Tokenizers, ByModule)> {
    let (config, tokenizers) = read_config_and_tokenizers(dir)?;
    let weights = read_weights(dir, &config, device, ComputeType::Float32)?;
    Ok((config, tokenizers, weights))
}

/// Whether the checkpoint in `dir` holds int8 weights (`transformer quantize`'s), from its
/// weights file's header.
pub(super) fn is_int8_checkpoint(dir: &Path) -> bool {
    !hugging_face::is_hugging_face_dir(dir)
        && tensor_file::file_holds_int8(&dir.join(MODEL_FILE)).unwrap_or(false)
}

/// The weights of the checkpoint in `dir`, whose config is `config`, under their module
/// names: its matrices in `form` (converted as the file is read, so that no float copy of
/// the whole model is held; float32 reads them as stored, which an int8 checkpoint's must
/// be).
pub(super) fn read_weights(
    dir: &Path,
    config: &Config,
    device: &Device,
    form: ComputeType,
) -> anyhow::Result<ByModule> {
    if hugging_face::is_hugging_face_dir(dir) {
        let weights = read_hugging_face_weights(dir, config, device, form)?;
        hugging_face::check_sizes(config, &weights)?;
        return Ok(weights);
    }
    let path = dir.join(MODEL_FILE);
    tensor_file::check_model_record(&path, &config.model)?;
    if form != ComputeType::Float32 {
        let ours = Arc::new(format::AnnotatedTransformer);
        return read_modules_as(&path, ours, device, form);
    }
    let file = read_weights_file(&path, device, true)?;
    let mut weights = format::to_modules(
        Arc::new(format::AnnotatedTransformer),
        file.tensors,
        path.clone(),
    )
    .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
    weights.quantized_from = file.metadata.get(int8_file::QUANTIZED_FROM).cloned();
    Ok(weights)
}

/// A checkpoint directory's config and tokenizers (a Hugging Face directory's read from its
/// JSON files and checked against each other), each failure naming its file.
pub(super) fn read_config_and_tokenizers(dir: &Path) -> anyhow::Result<(Config, Tokenizers)> {
    if hugging_face::is_hugging_face_dir(dir) {
        let config = hugging_face::read_config(dir)?;
        let tokenizers = Tokenizers::load(dir, &config.data)?;
        // A multilingual tokenizer was checked against the table's rows as it loaded.
        if config.data.tokenizer != TokenizerKind::Multilingual {
            hugging_face::check_agreement(dir, &config, &tokenizers)?;
        }
        return Ok((config, tokenizers));
    }
    let marian_files = [
        hugging_face::SAFETENSORS_FILE,
        crate::tokenize::marian::VOCAB_FILE,
    ];
    if !dir.join(CONFIG_FILE).is_file() && marian_files.iter().all(|f| dir.join(f).is_file()) {
        bail!(
            "{} looks like a Hugging Face MarianMT directory but has no {}; download that \
             file too (it holds the model's sizes)",
            dir.display(),
            hugging_face::CONFIG_JSON
        );
    }
    let config = Config::load_saved(&dir.join(CONFIG_FILE))?;
    let tokenizers = Tokenizers::load(dir, &config.data).with_context(|| {
        format!(
            "checkpoint {} is incomplete or damaged (train again or pick another run)",
            dir.display()
        )
    })?;
    Ok((config, tokenizers))
}
/// A Hugging Face directory's weights (`model.safetensors` or `pytorch_model.bin`), through
/// [`hugging_face::MarianFormat`], in `form`.
fn read_hugging_face_weights(
    dir: &Path,
    config: &Config,
    device: &Device,
    form: ComputeType,
) -> anyhow::Result<ByModule> {
    let path = hugging_face::weights_file(dir)?;
    let format = Arc::new(hugging_face::MarianFormat {
        shared: config.model.share_source_embeddings,
    });
    // Tensor by tensor, a storage several names share read once.
    read_modules_as(&path, format, device, form)
}

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
