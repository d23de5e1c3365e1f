//! A checkpoint directory's parts read: its config, tokenizers and weights (under their
//! module names), ours or a Hugging Face directory's (MarianMT, M2M100, NLLB-200), each
//! failure naming its file.

use std::path::Path;
use std::sync::Arc;

use anyhow::{bail, Context};
use candle_core::Device;

use super::format::{self, ByModule};
use super::read_as::read_modules_as;
use super::read_weights::read_weights_file;
use super::{hugging_face, int8_file, tensor_file, CONFIG_FILE, MODEL_FILE};
use crate::config::{ComputeType, Config, TokenizerKind};
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
/// the whole model is held; an int8 checkpoint's as stored).
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
    if form != ComputeType::Float32 && !is_int8_checkpoint(dir) {
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
