//! A MarianMT directory's settings as our config: `[model]` from `config.json`, `[decode]`
//! from `generation_config.json` (transformers' `generate()` settings, with a note for each
//! one this tool does not apply), `[data]` naming the Marian tokenizer and the languages.

use std::path::Path;

use anyhow::bail;
use serde_json::Value;

use super::json::JsonConfig;
use super::{CONFIG_JSON, GENERATION_CONFIG_JSON, TOKENIZER_CONFIG_JSON};
use crate::config::{
    Activation, Architecture, ComputeType, Config, DataConfig, DecodeConfig, LengthNormalization,
    ModelConfig, NormPlacement, PositionEncoding, TokenizerKind,
};

/// The `model_type` of the Hugging Face families this tool runs, with their names and the
/// tokenizer files each needs: what a Hub model must say and have to be fetched.
pub const MODEL_TYPES: &[(&str, &str, &[&str])] = &[(
    "marian",
    "MarianMT, OPUS-MT",
    &["source.spm", "target.spm", "vocab.json"],
)];

/// The config of the Marian directory `dir` as ours: `[model]` from `config.json`, `[decode]`
/// from `generation_config.json` (or, in older directories, `config.json`), `[data]` naming
/// the Marian tokenizer and, where the directory says, the languages.
pub fn read_config(dir: &Path) -> anyhow::Result<Config> {
    let json = JsonConfig::read(&dir.join(CONFIG_JSON))?;
    let path = json.path.display().to_string();
    match json.text("model_type") {
        Some("marian") => {}
        Some(other) => bail!(
            "{path} describes a {other:?} model (model_type); this tool runs MarianMT \
             (model_type \"marian\") checkpoints only"
        ),
        None => bail!(
            "{path} has no model_type (or not as text); a Hugging Face MarianMT config says \
             model_type = \"marian\""
        ),
    }
    let model = model_config(&json)?;
    let generation_path = dir.join(GENERATION_CONFIG_JSON);
    let generation = if generation_path.is_file() {
        JsonConfig::read(&generation_path)?
    } else {
        // Directories saved before generation_config.json kept these keys in config.json.
        JsonConfig::read(&dir.join(CONFIG_JSON))?
    };
    let decode = decode_config(&generation)?;
    let (source_lang, target_lang) = languages(dir);
    let data = DataConfig {
        tokenizer: TokenizerKind::Marian,
        joint_vocab: model.share_source_embeddings,
        source_lang,
        target_lang,
        ..DataConfig::default()
    };
    let config = Config {
        model,
        data,
        decode,
        source_name: generation.path.display().to_string(),
        notes: unapplied_settings(&generation),
        ..Config::default()
    };
    if let Some((key, rule)) = config.broken_rule() {
        let (file, json_key) = JSON_KEYS.iter().find(|(ours, _, _)| *ours == key).map_or(
            (&json.path, key.as_str()),
            |(_, generation_key, model_key)| {
                if key.starts_with("decode.") {
                    (&generation.path, *generation_key)
                } else {
                    (&json.path, *model_key)
                }
            },
        );
        bail!(
            "{}: {json_key}: {rule} (our model.{}); the file is damaged or not a MarianMT model's",
            file.display(),
            key.trim_start_matches("model.")
                .trim_start_matches("decode.")
        );
    }
    if config.model.max_len > MOST_POSITIONS {
        bail!(
            "{path}: max_position_embeddings = {} is more than this tool builds ({MOST_POSITIONS}); \
             the file is damaged (OPUS-MT's models have 512)",
            config.model.max_len
        );
    }
    Ok(config)
}

/// The largest position table built (OPUS-MT's models have 512 positions): a damaged
/// config's 10^12 would otherwise be allocated before the weights could disagree.
const MOST_POSITIONS: usize = 1 << 16;

/// Our config keys, as transformers' generation config and model config name them.
const JSON_KEYS: &[(&str, &str, &str)] = &[
    ("model.layers", "", "encoder_layers"),
    ("model.decoder_layers", "", "decoder_layers"),
    ("model.d_model", "", "d_model"),
    ("model.d_ff", "", "encoder_ffn_dim"),
    ("model.heads", "", "encoder_attention_heads"),
    ("model.max_len", "", "max_position_embeddings"),
    ("model.dropout", "", "dropout"),
    ("model.attention_dropout", "", "attention_dropout"),
    ("model.activation_dropout", "", "activation_dropout"),
    ("decode.beam", "num_beams", ""),
    ("decode.max_len", "max_length", ""),
    ("decode.length_penalty", "length_penalty", ""),
];
/// `[model]` from a MarianMT `config.json` (transformers' `modeling_marian.py`: post-norm
/// layers with torch's LayerNorm, sin|cos position tables, biases everywhere).
fn model_config(json: &JsonConfig) -> anyhow::Result<ModelConfig> {
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
        ..bart_family_model(json, "gelu", 0.0)?
    })
}

/// What the BART family's config.json (MarianMT's, M2M100's) says of the sizes, dropout
/// rates and activation (`activation` when it names none), as our `[model]` with biases
/// everywhere and the output layer tied unless it says otherwise; the norms, positions and
/// embedding sharing are each family's.
pub(super) fn bart_family_model(
    json: &JsonConfig,
    activation: &str,
    attention_dropout: f64,
) -> anyhow::Result<ModelConfig> {
    let path = json.path.display();
    let same = |encoder: &str, decoder: &str| -> anyhow::Result<usize> {
        let (a, b) = (json.required_count(encoder)?, json.count(decoder)?);
        match b {
            Some(b) if b != a => bail!(
                "{path}: {encoder} = {a} but {decoder} = {b}; this tool's encoder and decoder \
                 share one width and head count"
            ),
            _ => Ok(a),
        }
    };
    let activation = match json.text("activation_function").unwrap_or(activation) {
        "swish" | "silu" => Activation::Swish,
        "relu" => Activation::Relu,
        "gelu" => Activation::Gelu,
        other => bail!(
            "{path}: activation_function {other:?} is not one this tool has (swish, silu, \
             relu, gelu)"
        ),
    };
    let layers = json.required_count("encoder_layers")?;
    let decoder_layers = json.required_count("decoder_layers")?;
    Ok(ModelConfig {
        layers,
        decoder_layers: (decoder_layers != layers).then_some(decoder_layers),
        d_model: json.required_count("d_model")?,
        d_ff: same("encoder_ffn_dim", "decoder_ffn_dim")?,
        heads: same("encoder_attention_heads", "decoder_attention_heads")?,
        dropout: json.number("dropout", 0.1)?,
        attention_dropout: json.number("attention_dropout", attention_dropout)?,
        activation_dropout: Some(json.number("activation_dropout", 0.0)?),
        max_len: json.required_count("max_position_embeddings")?,
        arch: Architecture::EncoderDecoder,
        attention_bias: true,
        ffn_bias: true,
        share_embeddings: json.flag("tie_word_embeddings", true)?,
        activation,
        ..ModelConfig::default()
    })
}

/// `[decode]` from transformers' generation settings: `num_beams`, `length_penalty` (over
/// len^alpha), `max_length` (which counts the decoder's start symbol, so one more than the
/// tokens generated; transformers' default is 20), `forced_eos_token_id`.
fn decode_config(json: &JsonConfig) -> anyhow::Result<DecodeConfig> {
    let max_length = json.count("max_length")?.unwrap_or(20);
    if max_length < 2 {
        bail!(
            "{}: max_length = {max_length} leaves no token to generate (it counts the decoder's \
             start symbol); use at least 2",
            json.path.display()
        );
    }
    Ok(DecodeConfig {
        beam: json.count("num_beams")?.unwrap_or(1),
        length_penalty: json.number("length_penalty", 1.0)?,
        max_len: Some(max_length - 1),
        length_normalization: LengthNormalization::Length,
        end_at_max_len: json.get("forced_eos_token_id").is_some(),
        renormalize: json.flag("renormalize_logits", false)?,
        compute_type: ComputeType::Float32,
        length_ratio: None,
    })
}

/// transformers' generation settings this tool does not apply, each as a warning naming the
/// file: its searches are greedy and beam search with the settings above.
fn unapplied_settings(json: &JsonConfig) -> Vec<String> {
    let file = json.path.display();
    let mut notes = Vec::new();
    let mut note = |key: &str, value: &Value| {
        notes.push(format!(
            "{file}: {key} = {value} is not applied; this tool decodes greedily or with beam \
             search, so its output can differ from generate()'s"
        ))
    };
    for key in ["do_sample", "early_stopping"] {
        if let Some(value) = json.get(key).filter(|v| v.as_bool() != Some(false)) {
            note(key, value);
        }
    }
    let neutral = [
        ("no_repeat_ngram_size", 0.0),
        ("repetition_penalty", 1.0),
        ("min_length", 0.0),
        ("num_beam_groups", 1.0),
        ("diversity_penalty", 0.0),
    ];
    for (key, neutral) in neutral {
        if let Some(value) = json.get(key).filter(|v| v.as_f64() != Some(neutral)) {
            note(key, value);
        }
    }
    notes
}

/// The language pair: `tokenizer_config.json`'s `source_lang` / `target_lang`, else the
/// directory's name when it is a Hub name (`opus-mt-de-en`).
fn languages(dir: &Path) -> (Option<String>, Option<String>) {
    let usable =
        |code: &str| (2..=3).contains(&code.len()) && code.chars().all(|c| c.is_ascii_lowercase());
    if let Ok(json) = JsonConfig::read(&dir.join(TOKENIZER_CONFIG_JSON)) {
        if let (Some(src), Some(tgt)) = (json.text("source_lang"), json.text("target_lang")) {
            if usable(src) && usable(tgt) {
                return (Some(src.into()), Some(tgt.into()));
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
    match parts.as_slice() {
        [src, tgt] if name.contains("opus-mt-") && usable(src) && usable(tgt) => {
            (Some(src.to_string()), Some(tgt.to_string()))
        }
        _ => (None, None),
    }
}
