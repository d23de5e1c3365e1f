//! A Hugging Face directory's settings as our config: `[model]` from `config.json` (by its
//! family: MarianMT's in `marian.rs`, M2M100's in `m2m100.rs`), `[decode]` from
//! `generation_config.json` (transformers' `generate()` settings, with a note for each one
//! this tool does not apply), `[data]` naming the family's tokenizer and the languages.

use std::path::Path;

use anyhow::bail;
use serde_json::Value;

use super::json::JsonConfig;
use super::{
    m2m100, marian, Unrunnable, CONFIG_JSON, GENERATION_CONFIG_JSON, TOKENIZER_CONFIG_JSON,
};
use crate::config::{
    ComputeType, Config, DataConfig, DecodeConfig, LengthNormalization, TokenizerKind,
};

/// The `model_type` of the Hugging Face families this tool runs, with their names and the
/// files each needs besides its config and weights (`a|b`: either): what a Hub model must
/// say and have to be fetched (M2M100's tokenizer is `sentencepiece.bpe.model` and
/// `vocab.json`, NLLB-200's `tokenizer.json`).
pub const MODEL_TYPES: &[(&str, &str, &[&str])] = &[
    (
        "marian",
        "MarianMT, OPUS-MT",
        &["source.spm", "target.spm", "vocab.json"],
    ),
    (
        m2m100::MODEL_TYPE,
        "M2M100, NLLB-200",
        &[
            TOKENIZER_CONFIG_JSON,
            "sentencepiece.bpe.model|tokenizer.json",
            "vocab.json|tokenizer.json",
        ],
    ),
];

/// The `model_type` of the Hugging Face directory `dir` (in its `config.json`), checked
/// to be one this tool runs, with the files its family needs (an [`Unrunnable`] if not).
pub fn model_type(dir: &Path) -> anyhow::Result<&'static str> {
    let json = JsonConfig::read(&dir.join(CONFIG_JSON))?;
    let runs = || {
        MODEL_TYPES
            .iter()
            .map(|(t, families, _)| format!("{families} (model_type {t:?})"))
            .collect::<Vec<_>>()
            .join(" and ")
    };
    let found = match json.text("model_type") {
        Some(found) => MODEL_TYPES
            .iter()
            .find(|(t, _, _)| *t == found)
            .map(|(t, _, _)| *t)
            .ok_or_else(|| {
                Unrunnable(format!(
                    "{} describes a {found:?} model (model_type); this tool runs {}",
                    json.path.display(),
                    runs()
                ))
            }),
        None => Err(Unrunnable(format!(
            "{} has no model_type (or not as text); this tool runs {}",
            json.path.display(),
            runs()
        ))),
    }?;
    super::check_files(dir, found)?;
    Ok(found)
}

/// The config of the Hugging Face directory `dir` as ours: `[model]` from `config.json` by
/// its family, `[decode]` from `generation_config.json` (or, in older directories,
/// `config.json`), `[data]` naming the family's tokenizer and, where a Marian directory
/// says, the languages (a multilingual model's are named by its user).
pub fn read_config(dir: &Path) -> anyhow::Result<Config> {
    let json = JsonConfig::read(&dir.join(CONFIG_JSON))?;
    let path = json.path.display().to_string();
    let multilingual = model_type(dir)? == m2m100::MODEL_TYPE;
    let (model, data) = if multilingual {
        let data = DataConfig {
            tokenizer: TokenizerKind::Multilingual,
            joint_vocab: true,
            // The embedding table's rows, which the tokenizer's ids need not fill.
            vocab_size: json.required_count("vocab_size")?,
            ..DataConfig::default()
        };
        (m2m100::model_from(&json)?, data)
    } else {
        let model = marian::model_config(&json)?;
        let (source_lang, target_lang) = marian::languages(dir)?;
        let data = DataConfig {
            tokenizer: TokenizerKind::Marian,
            joint_vocab: model.share_source_embeddings,
            source_lang,
            target_lang,
            ..DataConfig::default()
        };
        (model, data)
    };
    let generation_path = dir.join(GENERATION_CONFIG_JSON);
    // A file there that is not a regular JSON file is an error, not a default.
    let generation = if std::fs::symlink_metadata(&generation_path).is_ok() {
        JsonConfig::read(&generation_path)?
    } else {
        // Directories saved before generation_config.json kept these keys in config.json.
        JsonConfig::read(&dir.join(CONFIG_JSON))?
    };
    // max_length counts the decoder's start, and a multilingual model's forced language.
    let decode = decode_config(&generation, 1 + usize::from(multilingual))?;
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
            "{}: {json_key}: {rule} (our model.{}); the file is damaged",
            file.display(),
            key.trim_start_matches("model.")
                .trim_start_matches("decode.")
        );
    }
    if config.model.max_len > MOST_POSITIONS {
        bail!(
            "{path}: max_position_embeddings = {} is more than this tool builds ({MOST_POSITIONS}); \
             the file is damaged (OPUS-MT's models have 512, M2M100's 1024)",
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
/// `[decode]` from transformers' generation settings: `num_beams`, `length_penalty` (over
/// len^alpha), `max_length` (which counts the `prompt` tokens before the first generated
/// one: the decoder's start symbol and a forced language; transformers' default is 20),
/// `forced_eos_token_id`.
fn decode_config(json: &JsonConfig, prompt: usize) -> anyhow::Result<DecodeConfig> {
    let max_length = json.count("max_length")?.unwrap_or(20);
    if max_length <= prompt {
        bail!(
            "{}: max_length = {max_length} leaves no token to generate (it counts the decoder's \
             first {prompt} tokens); use at least {}",
            json.path.display(),
            prompt + 1
        );
    }
    Ok(DecodeConfig {
        beam: json.count("num_beams")?.unwrap_or(1),
        length_penalty: json.number("length_penalty", 1.0)?,
        max_len: Some(max_length - prompt),
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
