//! An M2M100 or NLLB-200 directory's `config.json` (`model_type = "m2m_100"`, transformers'
//! `modeling_m2m_100.py`) as our `[model]`: fairseq's pre-norm layers with torch's LayerNorm
//! and a final norm per stack, fairseq's sinusoidal positions (not stored in the file), one
//! table for both sides and the output layer, no bias on it. The weights' names are Marian's
//! (the BART family's), so [`super::MarianFormat`] maps them.

use std::path::Path;

use anyhow::bail;

use super::json::JsonConfig;
use super::CONFIG_JSON;
use crate::config::{ModelConfig, NormPlacement, PositionEncoding};
use crate::tokenize::Tokenizers;

/// The `model_type` M2M100 and NLLB-200 share.
pub const MODEL_TYPE: &str = "m2m_100";

/// `[model]` from the `config.json` of the M2M100 / NLLB directory `dir`.
pub fn model_config(dir: &Path) -> anyhow::Result<ModelConfig> {
    model_from(&JsonConfig::read(&dir.join(CONFIG_JSON))?)
}

/// `[model]` from an M2M100 / NLLB `config.json`.
pub(super) fn model_from(json: &JsonConfig) -> anyhow::Result<ModelConfig> {
    let path = json.path.display().to_string();
    if json.text("model_type") != Some(MODEL_TYPE) {
        bail!("{path} does not describe an M2M100 / NLLB model (model_type {MODEL_TYPE:?})");
    }
    Ok(ModelConfig {
        norm: NormPlacement::PreTorch,
        positions: PositionEncoding::SinusoidalFairseq,
        scale_embeddings: json.flag("scale_embedding", true)?,
        share_source_embeddings: true,
        generator_bias: false,
        ..super::bart::bart_family_model(json, "relu", 0.1)?
    })
}

/// Refuses a tokenizer whose ids the model's table does not have (`vocab_size` rows), so
/// that a tokenizer from another model is named, not found as an index error mid-sentence.
pub fn check_vocabulary(dir: &Path, tokenizers: &Tokenizers) -> anyhow::Result<()> {
    let json = JsonConfig::read(&dir.join(CONFIG_JSON))?;
    let rows = json.required_count("vocab_size")?;
    let has = tokenizers.src.vocab_size();
    if has > rows {
        bail!(
            "{}'s tokenizer numbers {has} tokens but {} says vocab_size = {rows}; the \
             tokenizer files and the model do not belong together",
            dir.display(),
            json.path.display()
        );
    }
    Ok(())
}
