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
    // The fairseq dictionary's ids, which this family's tokenizers and decoding use.
    for (key, id) in [
        ("bos_token_id", 0),
        ("pad_token_id", 1),
        ("eos_token_id", 2),
        ("decoder_start_token_id", 2),
    ] {
        if json.get(key).is_some_and(|v| v.as_u64() != Some(id)) {
            bail!(
                "{path}: {key} is {}, where the M2M100 family's dictionary has {id}; the file \
                 is damaged",
                json.get(key).map_or(String::new(), ToString::to_string)
            );
        }
    }
    // A source needs its language token, a token and `</s>`.
    let positions = json.required_count("max_position_embeddings")?;
    if positions < 4 {
        bail!(
            "{path}: max_position_embeddings = {positions} leaves no room for a sentence (its \
             language token and </s> take two); the file is damaged"
        );
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
