//! A Hugging Face MarianMT directory (an OPUS-MT model from the Hub) read as a checkpoint,
//! with no conversion step: `config.json` becomes the `[model]` section, the weights
//! (`model.safetensors`, or `pytorch_model.bin`) load through [`MarianFormat`] onto the same
//! modules as our own checkpoints, `generation_config.json` gives the `[decode]` defaults
//! (transformers' `generate()` settings), and `source.spm` / `target.spm` / `vocab.json` are
//! the tokenizer ([`crate::tokenize::marian`]).

use std::borrow::Cow;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context};
use candle_core::Tensor;
use serde_json::Value;

use super::format::{ByModule, WeightFormat};
use crate::config::{
    Activation, Architecture, ComputeType, Config, DataConfig, DecodeConfig, LengthNormalization,
    ModelConfig, NormPlacement, PositionEncoding, TokenizerKind,
};
use crate::tokenize::Tokenizers;

/// transformers' names for a Marian directory's files.
pub const CONFIG_JSON: &str = "config.json";
pub const GENERATION_CONFIG_JSON: &str = "generation_config.json";
pub const TOKENIZER_CONFIG_JSON: &str = "tokenizer_config.json";
pub const SAFETENSORS_FILE: &str = "model.safetensors";
pub const PYTORCH_FILE: &str = "pytorch_model.bin";

/// Whether `dir` is a Hugging Face directory (a `config.json` and no config of ours).
pub fn is_hugging_face_dir(dir: &Path) -> bool {
    dir.join(CONFIG_JSON).is_file() && !dir.join(super::CONFIG_FILE).is_file()
}

/// The weights file of a Marian directory: `model.safetensors`, else `pytorch_model.bin`.
pub fn weights_file(dir: &Path) -> anyhow::Result<PathBuf> {
    [SAFETENSORS_FILE, PYTORCH_FILE]
        .into_iter()
        .map(|name| dir.join(name))
        .find(|path| path.is_file())
        .ok_or_else(|| {
            anyhow::anyhow!(
                "{} has a {CONFIG_JSON} but neither {SAFETENSORS_FILE} nor {PYTORCH_FILE}; \
                 download the model's weights too (git lfs pull in a cloned Hub repository)",
                dir.display()
            )
        })
}

/// A `config.json` read as JSON, its values named by key in errors.
struct JsonConfig {
    path: PathBuf,
    values: serde_json::Map<String, Value>,
}

impl JsonConfig {
    fn read(path: &Path) -> anyhow::Result<Self> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read {}", path.display()))?;
        let value: Value = serde_json::from_str(&text)
            .map_err(|e| anyhow::anyhow!("{} is not valid JSON: {e}", path.display()))?;
        let Value::Object(values) = value else {
            bail!("{} is not a JSON object", path.display())
        };
        Ok(Self {
            path: path.to_path_buf(),
            values,
        })
    }

    fn get(&self, key: &str) -> Option<&Value> {
        self.values.get(key).filter(|v| !v.is_null())
    }

    fn count(&self, key: &str) -> anyhow::Result<Option<usize>> {
        match self.get(key) {
            None => Ok(None),
            Some(value) => match value.as_u64() {
                Some(n) => Ok(Some(n as usize)),
                None => bail!(
                    "{}: {key} is {value}, not a whole number",
                    self.path.display()
                ),
            },
        }
    }

    fn required_count(&self, key: &str) -> anyhow::Result<usize> {
        self.count(key)?.ok_or_else(|| {
            anyhow::anyhow!(
                "{} has no {key}, which a MarianMT config must have",
                self.path.display()
            )
        })
    }

    fn number(&self, key: &str, default: f64) -> anyhow::Result<f64> {
        match self.get(key) {
            None => Ok(default),
            Some(value) => value.as_f64().ok_or_else(|| {
                anyhow::anyhow!("{}: {key} is {value}, not a number", self.path.display())
            }),
        }
    }

    fn flag(&self, key: &str, default: bool) -> anyhow::Result<bool> {
        match self.get(key) {
            None => Ok(default),
            Some(value) => value.as_bool().ok_or_else(|| {
                anyhow::anyhow!(
                    "{}: {key} is {value}, not true or false",
                    self.path.display()
                )
            }),
        }
    }

    fn text(&self, key: &str) -> Option<&str> {
        self.get(key).and_then(Value::as_str)
    }
}

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

/// Refuses a config whose sizes the weights do not have, before a model of those sizes is
/// built (a damaged `d_model` of 10^12 would be allocated first): the embedding table's
/// width, the feed-forward width and the number of layers of each stack.
pub fn check_sizes(config: &Config, weights: &ByModule) -> anyhow::Result<()> {
    let m = &config.model;
    let file = weights.path.display();
    let format = &weights.format;
    let shape = |module: &str| weights.tensors.get(module).map(|t| t.dims().to_vec());
    let expectations = [
        ("src_embed.0.lut.weight", 1, m.d_model, "d_model"),
        (
            "encoder.layers.0.feed_forward.w_1.weight",
            0,
            m.d_ff,
            "encoder_ffn_dim",
        ),
    ];
    for (module, dim, wants, key) in expectations {
        if let Some(has) = shape(module).and_then(|dims| dims.get(dim).copied()) {
            if has != wants {
                bail!(
                    "config.json says {key} = {wants} but {file}'s {} is {:?}; the config and \
                     the weights do not belong together",
                    format.file_name(module),
                    shape(module).unwrap_or_default()
                );
            }
        }
    }
    for (stack, wants, key) in [
        ("encoder", m.layers, "encoder_layers"),
        ("decoder", m.decoder_layer_count(), "decoder_layers"),
    ] {
        let prefix = format!("{stack}.layers.");
        let has = weights
            .tensors
            .keys()
            .filter_map(|name| name.strip_prefix(&prefix)?.split('.').next()?.parse().ok())
            .map(|layer: usize| layer + 1)
            .max()
            .unwrap_or(0);
        if has != wants {
            bail!(
                "config.json says {key} = {wants} but {file} holds {has} {stack} layers; the \
                 config and the weights do not belong together"
            );
        }
    }
    Ok(())
}

/// `[model]` from a MarianMT `config.json` (transformers' `modeling_marian.py`: post-norm
/// layers with torch's LayerNorm, sin|cos position tables, biases everywhere).
fn model_config(json: &JsonConfig) -> anyhow::Result<ModelConfig> {
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
    // transformers' MarianConfig defaults to gelu; a null is no activation at all.
    if json
        .values
        .get("activation_function")
        .is_some_and(Value::is_null)
    {
        bail!("{path}: activation_function is null; name one (swish, relu or gelu)");
    }
    let activation = match json.text("activation_function").unwrap_or("gelu") {
        "swish" | "silu" => Activation::Swish,
        "relu" => Activation::Relu,
        "gelu" => Activation::Gelu,
        other => bail!(
            "{path}: activation_function {other:?} is not one this tool has (swish, silu, \
             relu, gelu)"
        ),
    };
    for refused in [
        "normalize_before",
        "add_final_layer_norm",
        "normalize_embedding",
    ] {
        if json.flag(refused, false)? {
            bail!("{path}: {refused} = true is not MarianMT's architecture, which this tool runs");
        }
    }
    let layers = json.required_count("encoder_layers")?;
    let decoder_layers = json.required_count("decoder_layers")?;
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
        layers,
        decoder_layers: (decoder_layers != layers).then_some(decoder_layers),
        d_model: json.required_count("d_model")?,
        d_ff: same("encoder_ffn_dim", "decoder_ffn_dim")?,
        heads: same("encoder_attention_heads", "decoder_attention_heads")?,
        dropout: json.number("dropout", 0.1)?,
        attention_dropout: json.number("attention_dropout", 0.0)?,
        activation_dropout: Some(json.number("activation_dropout", 0.0)?),
        max_len: json.required_count("max_position_embeddings")?,
        arch: Architecture::EncoderDecoder,
        norm: NormPlacement::Post,
        positions: PositionEncoding::SinusoidalHalves,
        attention_bias: true,
        ffn_bias: true,
        share_embeddings: json.flag("tie_word_embeddings", true)?,
        activation,
        scale_embeddings: json.flag("scale_embedding", false)?,
        share_source_embeddings: share_source,
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

/// Checks that the directory's config and tokenizer agree: the vocabulary sizes and the
/// special ids `generate()` uses.
pub fn check_agreement(dir: &Path, config: &Config, tokenizers: &Tokenizers) -> anyhow::Result<()> {
    let json = JsonConfig::read(&dir.join(CONFIG_JSON))?;
    let path = json.path.display();
    let vocab = json.required_count("vocab_size")?;
    let decoder_vocab = json.count("decoder_vocab_size")?.unwrap_or(vocab);
    let sizes = tokenizers.vocab_sizes();
    for (file, has, key, wants) in [
        ("vocab.json", sizes.src, "vocab_size", vocab),
        (
            if tokenizers.joint {
                "vocab.json"
            } else {
                "target_vocab.json"
            },
            sizes.tgt,
            "decoder_vocab_size",
            decoder_vocab,
        ),
    ] {
        if has != wants {
            bail!(
                "{} has {has} tokens but {path} says {key} = {wants}; the tokenizer files and \
                 the model do not belong together",
                dir.join(file).display()
            );
        }
    }
    if config.model.share_source_embeddings != tokenizers.joint {
        bail!(
            "{path}: share_encoder_decoder_embeddings is {} but the directory {} \
             target_vocab.json",
            config.model.share_source_embeddings,
            if tokenizers.joint { "has no" } else { "has a" }
        );
    }
    let specials = tokenizers.specials();
    for (key, wants) in [
        ("pad_token_id", specials.pad),
        ("eos_token_id", specials.eos),
        ("decoder_start_token_id", specials.decoder_start),
    ] {
        if let Some(id) = json.count(key)? {
            if id != wants as usize {
                bail!(
                    "{path}: {key} = {id}, but the vocabulary puts that token at {wants}; \
                     this tool decodes MarianMT models with the vocabulary's ids"
                );
            }
        }
    }
    Ok(())
}

/// MarianMT's state_dict names (`modeling_marian.py`) for our modules.
pub struct MarianFormat {
    /// One table for both sides (`model.shared.weight`).
    pub shared: bool,
}

/// (Marian's name within a layer, ours), for the encoder's and the decoder's layers.
const ENCODER_LAYER: &[(&str, &str)] = &[
    ("self_attn.q_proj", "self_attn.linears.0"),
    ("self_attn.k_proj", "self_attn.linears.1"),
    ("self_attn.v_proj", "self_attn.linears.2"),
    ("self_attn.out_proj", "self_attn.linears.3"),
    ("self_attn_layer_norm", "sublayer.0.norm"),
    ("fc1", "feed_forward.w_1"),
    ("fc2", "feed_forward.w_2"),
    ("final_layer_norm", "sublayer.1.norm"),
];
const DECODER_LAYER: &[(&str, &str)] = &[
    ("self_attn.q_proj", "self_attn.linears.0"),
    ("self_attn.k_proj", "self_attn.linears.1"),
    ("self_attn.v_proj", "self_attn.linears.2"),
    ("self_attn.out_proj", "self_attn.linears.3"),
    ("self_attn_layer_norm", "sublayer.0.norm"),
    ("encoder_attn.q_proj", "src_attn.linears.0"),
    ("encoder_attn.k_proj", "src_attn.linears.1"),
    ("encoder_attn.v_proj", "src_attn.linears.2"),
    ("encoder_attn.out_proj", "src_attn.linears.3"),
    ("encoder_attn_layer_norm", "sublayer.1.norm"),
    ("fc1", "feed_forward.w_1"),
    ("fc2", "feed_forward.w_2"),
    ("final_layer_norm", "sublayer.2.norm"),
];

/// Tensors outside the layers: (Marian's name, ours).
const OUTSIDE_LAYERS: &[(&str, &str)] = &[
    (
        "model.encoder.embed_tokens.weight",
        "src_embed.0.lut.weight",
    ),
    (
        "model.decoder.embed_tokens.weight",
        "tgt_embed.0.lut.weight",
    ),
    ("model.encoder.embed_positions.weight", "src_embed.1.pe"),
    ("model.decoder.embed_positions.weight", "tgt_embed.1.pe"),
    ("lm_head.weight", "generator.proj.weight"),
    ("final_logits_bias", "generator.proj.bias"),
];

/// `name` (`<prefix>.<i>.<rest>`) with its layer part mapped through `table`, in the
/// direction `from_marian` says.
fn map_layer(name: &str, from_marian: bool) -> Option<String> {
    let (stacks, to_prefix) = if from_marian {
        (
            [
                ("model.encoder.layers.", "encoder.layers."),
                ("model.decoder.layers.", "decoder.layers."),
            ],
            true,
        )
    } else {
        (
            [
                ("encoder.layers.", "model.encoder.layers."),
                ("decoder.layers.", "model.decoder.layers."),
            ],
            false,
        )
    };
    for (index, (from, to)) in stacks.into_iter().enumerate() {
        let Some(rest) = name.strip_prefix(from) else {
            continue;
        };
        let (layer, inside) = rest.split_once('.')?;
        layer.parse::<usize>().ok()?;
        let (module, leaf) = inside.rsplit_once('.')?;
        let table = if index == 0 {
            ENCODER_LAYER
        } else {
            DECODER_LAYER
        };
        let mapped = table.iter().find_map(|(marian, ours)| {
            let (have, give) = if to_prefix {
                (marian, ours)
            } else {
                (ours, marian)
            };
            (module == *have).then_some(*give)
        })?;
        return Some(format!("{to}{layer}.{mapped}.{leaf}"));
    }
    None
}

impl WeightFormat for MarianFormat {
    fn name(&self) -> &'static str {
        "MarianMT's state_dict"
    }

    fn module_tensors(
        &self,
        file_name: &str,
        tensor: Tensor,
    ) -> candle_core::Result<Vec<(String, Tensor)>> {
        if file_name == "model.shared.weight" {
            return Ok(vec![
                ("src_embed.0.lut.weight".into(), tensor.clone()),
                ("tgt_embed.0.lut.weight".into(), tensor),
            ]);
        }
        if let Some((_, ours)) = OUTSIDE_LAYERS
            .iter()
            .find(|(marian, _)| *marian == file_name)
        {
            let tensor = match *ours {
                // (1, vocab) in the file, a bias vector here.
                "generator.proj.bias" => tensor.flatten_all()?,
                // (positions, d_model) in the file, (1, positions, d_model) here.
                "src_embed.1.pe" | "tgt_embed.1.pe" => tensor.unsqueeze(0)?,
                _ => tensor,
            };
            return Ok(vec![(ours.to_string(), tensor)]);
        }
        Ok(map_layer(file_name, true)
            .map(|name| vec![(name, tensor)])
            .unwrap_or_default())
    }

    fn file_name<'a>(&self, module_name: &'a str) -> Cow<'a, str> {
        if self.shared && module_name.ends_with("_embed.0.lut.weight") {
            return Cow::Borrowed("model.shared.weight");
        }
        if let Some((marian, _)) = OUTSIDE_LAYERS.iter().find(|(_, ours)| *ours == module_name) {
            return Cow::Borrowed(marian);
        }
        map_layer(module_name, false).map_or(Cow::Borrowed(module_name), Cow::Owned)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layer_names_map_both_ways() {
        let ours = map_layer("model.decoder.layers.3.encoder_attn.k_proj.bias", true).unwrap();
        assert_eq!(ours, "decoder.layers.3.src_attn.linears.1.bias");
        assert_eq!(
            map_layer(&ours, false).unwrap(),
            "model.decoder.layers.3.encoder_attn.k_proj.bias"
        );
        let ours = map_layer("model.encoder.layers.0.final_layer_norm.weight", true).unwrap();
        assert_eq!(ours, "encoder.layers.0.sublayer.1.norm.weight");
        assert_eq!(
            map_layer("model.decoder.layers.0.final_layer_norm.weight", true).unwrap(),
            "decoder.layers.0.sublayer.2.norm.weight"
        );
        assert_eq!(map_layer("model.encoder.layers.x.fc1.weight", true), None);
        assert_eq!(map_layer("model.encoder.layers.0.lost.weight", true), None);
        let format = MarianFormat { shared: true };
        assert_eq!(
            format.file_name("tgt_embed.0.lut.weight"),
            "model.shared.weight"
        );
        assert_eq!(format.file_name("generator.proj.bias"), "final_logits_bias");
    }
}
