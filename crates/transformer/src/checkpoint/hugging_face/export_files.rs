//! What every family's export writes alike: the directory, whole or not at all, and the
//! weights under transformers' names.

use std::collections::HashMap;

use candle_core::Tensor;

use super::{MarianFormat, CONFIG_JSON, SAFETENSORS_FILE};
use crate::checkpoint::format::WeightFormat;
use crate::checkpoint::write::{write_synced, write_tensors};
use crate::checkpoint::Destination;
use crate::config::{Activation, Config, ModelConfig};
use serde_json::json;

/// Writes a Hugging Face directory whole or not at all: the JSON `settings` files, the
/// tokenizer's files and the weights.
pub(super) fn write_directory(
    out: Destination,
    settings: &[(&str, serde_json::Value)],
    tokenizer_files: &[(&str, Vec<u8>)],
    weights: &[(String, Tensor)],
) -> anyhow::Result<()> {
    out.save_with(|dir| {
        for (name, value) in settings {
            write_synced(
                &dir.join(name),
                serde_json::to_string_pretty(value)?.as_bytes(),
            )?;
        }
        // The tokenizer's own files win over a settings file of the same name.
        for (name, bytes) in tokenizer_files {
            write_synced(&dir.join(name), bytes)?;
        }
        // safetensors writes through a private temporary file (mode 0600): the weights get
        // the mode of the other files.
        let mode = std::fs::metadata(dir.join(CONFIG_JSON))?.permissions();
        write_tensors(&dir.join(SAFETENSORS_FILE), weights, None)?;
        std::fs::set_permissions(dir.join(SAFETENSORS_FILE), mode)?;
        Ok(())
    })
}

/// The module-named `tensors` under transformers' names, each tensor once: a shared
/// embedding as `model.shared.weight`, a tied output matrix and the position tables (which
/// transformers computes itself) left out, the output bias as `final_logits_bias` `(1, vocab)`.
pub(super) fn hugging_face_tensors(
    config: &Config,
    tensors: &HashMap<String, Tensor>,
) -> anyhow::Result<Vec<(String, Tensor)>> {
    let m = &config.model;
    let format = MarianFormat {
        shared: m.share_source_embeddings,
    };
    let mut named = Vec::with_capacity(tensors.len());
    for (module, tensor) in tensors {
        let skip = module.ends_with(".pe")
            || (m.share_source_embeddings && module == "tgt_embed.0.lut.weight")
            || (m.share_embeddings && module == "generator.proj.weight");
        if skip {
            continue;
        }
        let tensor = match module.as_str() {
            "generator.proj.bias" => tensor.unsqueeze(0)?,
            _ => tensor.clone(),
        };
        named.push((format.file_name(module).into_owned(), tensor));
    }
    named.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(named)
}

/// What the BART family's `config.json` says of a model's sizes, dropout rates and
/// activation (MarianMT's and M2M100's alike); each family adds its own keys.
pub(super) fn bart_config(m: &ModelConfig) -> serde_json::Map<String, serde_json::Value> {
    let activation = match m.activation {
        Activation::Swish => "swish",
        Activation::Relu => "relu",
        Activation::Gelu => "gelu",
    };
    let json = json!({
        "activation_function": activation,
        "activation_dropout": m.ffn_dropout(),
        "attention_dropout": m.attention_dropout,
        "dropout": m.dropout,
        "d_model": m.d_model,
        "encoder_layers": m.layers,
        "decoder_layers": m.decoder_layer_count(),
        "encoder_attention_heads": m.heads,
        "decoder_attention_heads": m.heads,
        "encoder_ffn_dim": m.d_ff,
        "decoder_ffn_dim": m.d_ff,
        "encoder_layerdrop": 0.0,
        "decoder_layerdrop": 0.0,
        "max_position_embeddings": m.max_len,
        "scale_embedding": m.scale_embeddings,
        "is_encoder_decoder": true,
        "init_std": 0.02,
        "use_cache": true,
        "dtype": "float32",
    });
    match json {
        serde_json::Value::Object(map) => map,
        _ => unreachable!("a JSON object literal"),
    }
}

/// `bart_config(m)` with a family's own `keys` added.
pub(super) fn family_config(m: &ModelConfig, keys: serde_json::Value) -> serde_json::Value {
    let mut config = bart_config(m);
    if let serde_json::Value::Object(keys) = keys {
        config.extend(keys);
    }
    serde_json::Value::Object(config)
}
