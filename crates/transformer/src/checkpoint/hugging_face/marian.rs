//! A MarianMT directory's `config.json` as our `[model]` (transformers' `modeling_marian.py`)
//! and its language pair.

use std::path::Path;

use anyhow::bail;
use serde_json::Value;

use super::json::JsonConfig;
use super::TOKENIZER_CONFIG_JSON;
use crate::config::{ModelConfig, NormPlacement, PositionEncoding};

/// `[model]` from a MarianMT `config.json` (transformers' `modeling_marian.py`: post-norm
/// layers with torch's LayerNorm, sin|cos position tables, biases everywhere).
pub(super) fn model_config(json: &JsonConfig) -> anyhow::Result<ModelConfig> {
    let path = json.path.display();
    // transformers' MarianConfig defaults to gelu; a null is no activation at all.
    if json
        .values
        .get("activation_function")
        .is_some_and(Value::is_null)
    {
        bail!("{path}: activation_function is null; name one (swish, relu or gelu)");
    }
    for refused in [
        "normalize_before",
        "add_final_layer_norm",
        "normalize_embedding",
    ] {
        if json.flag(refused, false)? {
            bail!("{path}: {refused} = true is not MarianMT's architecture, which this tool runs");
        }
    }
    let vocab = json.required_count("vocab_size")?;
    let decoder_vocab = json.count("decoder_vocab_size")?.unwrap_or(vocab);
    let share_source = json.flag("share_encoder_decoder_embeddings", true)?;
    if share_source && decoder_vocab != vocab {
        bail!(
            "{path}: share_encoder_decoder_embeddings with vocab_size {vocab} but \
             decoder_vocab_size {decoder_vocab}; one shared table needs one size"
        );
    }
    Ok(ModelConfig {
        norm: NormPlacement::Post,
        positions: PositionEncoding::SinusoidalHalves,
        scale_embeddings: json.flag("scale_embedding", false)?,
        share_source_embeddings: share_source,
        ..super::bart::bart_family_model(json, "gelu", 0.0)?
    })
}

/// The language pair: `tokenizer_config.json`'s `source_lang` / `target_lang`, else the
/// directory's name when it is a Hub name (`opus-mt-de-en`). A `tokenizer_config.json` that
/// is there but not valid JSON is an error naming it (and the line).
pub(super) fn languages(dir: &Path) -> anyhow::Result<(Option<String>, Option<String>)> {
    let usable =
        |code: &str| (2..=3).contains(&code.len()) && code.chars().all(|c| c.is_ascii_lowercase());
    let tokenizer_config = dir.join(TOKENIZER_CONFIG_JSON);
    if std::fs::symlink_metadata(&tokenizer_config).is_ok() {
        let json = JsonConfig::read(&tokenizer_config)?;
        if let (Some(src), Some(tgt)) = (json.text("source_lang"), json.text("target_lang")) {
            if usable(src) && usable(tgt) {
                return Ok((Some(src.into()), Some(tgt.into())));
            }
        }
    }
    let name = dir
        .canonicalize()
        .ok()
        .and_then(|d| d.file_name().map(|n| n.to_string_lossy().into_owned()))
        .unwrap_or_default();
    let parts: Vec<&str> = name
        .rsplit("opus-mt-")
        .next()
        .unwrap_or("")
        .split('-')
        .collect();
    Ok(match parts.as_slice() {
        [src, tgt] if name.contains("opus-mt-") && usable(src) && usable(tgt) => {
            (Some(src.to_string()), Some(tgt.to_string()))
        }
        _ => (None, None),
    })
}
