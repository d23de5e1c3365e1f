//! `transformer export --to hf` of a multilingual checkpoint (an M2M100 / NLLB-200 directory,
//! or a run fine-tuned from one): a directory `M2M100ForConditionalGeneration.from_pretrained`
//! and the family's tokenizer (`M2M100Tokenizer`, `NllbTokenizer`) read, and CTranslate2's
//! converter too: `config.json` (`model_type = "m2m_100"`), `generation_config.json`, the
//! weights under transformers' names (the BART family's, as Marian's), and the tokenizer's
//! own files, its `tokenizer_config.json` naming the run's language pair as the default.

use std::collections::HashMap;
use std::path::Path;

use anyhow::bail;
use candle_core::Tensor;
use serde_json::{json, Value};

use super::export_files::{family_config, hugging_face_tensors, write_directory};
use super::{m2m100, CONFIG_JSON, GENERATION_CONFIG_JSON, TOKENIZER_CONFIG_JSON};
use crate::checkpoint::Destination;
use crate::config::PositionEncoding;
use crate::config::{Architecture, Config, LengthNormalization, NormPlacement};
use crate::tokenize::Tokenizers;

/// Writes the multilingual checkpoint read from `source_dir` into `out` (locked, and checked
/// by the caller) as an M2M100-family directory.
pub(super) fn export_m2m100(
    source_dir: &Path,
    config: &Config,
    tokenizers: &Tokenizers,
    tensors: &HashMap<String, Tensor>,
    out: Destination,
) -> anyhow::Result<()> {
    check_exportable(source_dir, config)?;
    let m = &config.model;
    let specials = tokenizers.specials_in(None);
    let Some(table) = tensors.get("src_embed.0.lut.weight") else {
        bail!(
            "{} has no embedding table (src_embed.0.lut.weight): the checkpoint is damaged",
            source_dir.display()
        );
    };
    let model_json = family_config(
        m,
        json!({
            "architectures": ["M2M100ForConditionalGeneration"],
            "model_type": m2m100::MODEL_TYPE,
            "tie_word_embeddings": true,
            "vocab_size": table.dim(0)?,
            "bos_token_id": 0,
            "pad_token_id": specials.pad,
            "eos_token_id": specials.eos,
            "decoder_start_token_id": specials.decoder_start,
        }),
    );
    let d = &config.decode;
    // transformers' max_length counts the decoder's start and the forced language token.
    let max_length = d.max_len.unwrap_or(m.max_len - 2) + 2;
    let generation_json = json!({
        "bos_token_id": 0,
        "decoder_start_token_id": specials.decoder_start,
        "eos_token_id": specials.eos,
        "pad_token_id": specials.pad,
        "max_length": max_length,
        "num_beams": d.beam,
        "length_penalty": d.length_penalty,
        "renormalize_logits": d.renormalize,
    });
    let mut tokenizer_files = tokenizers.files()?;
    let tokenizer_json = tokenizer_config(&mut tokenizer_files, config, source_dir)?;
    let weights = hugging_face_tensors(config, tensors)?;
    let settings = [
        (CONFIG_JSON, model_json),
        (GENERATION_CONFIG_JSON, generation_json),
        (TOKENIZER_CONFIG_JSON, tokenizer_json),
    ];
    write_directory(out, &settings, &tokenizer_files, &weights)
}

/// The tokenizer's `tokenizer_config.json`, taken out of `files`, with the run's language
/// pair as its default `src_lang` / `tgt_lang` (what transformers' tokenizer frames with
/// when a caller names none).
fn tokenizer_config(
    files: &mut Vec<(&'static str, Vec<u8>)>,
    config: &Config,
    source_dir: &Path,
) -> anyhow::Result<Value> {
    let Some(at) = files
        .iter()
        .position(|(name, _)| *name == TOKENIZER_CONFIG_JSON)
    else {
        bail!(
            "{}'s tokenizer has no {TOKENIZER_CONFIG_JSON}: the checkpoint is damaged",
            source_dir.display()
        );
    };
    let (_, bytes) = files.remove(at);
    let mut json: Value = serde_json::from_slice(&bytes).map_err(|e| {
        anyhow::anyhow!(
            "{}'s {TOKENIZER_CONFIG_JSON} is not valid JSON: {e}",
            source_dir.display()
        )
    })?;
    for (key, code) in [
        ("src_lang", &config.data.source_lang),
        ("tgt_lang", &config.data.target_lang),
    ] {
        if let (Some(code), Some(object)) = (code, json.as_object_mut()) {
            object.insert(key.into(), json!(code));
        }
    }
    Ok(json)
}

/// Why the checkpoint cannot be an M2M100-family model, naming the setting, if it cannot.
fn check_exportable(dir: &Path, config: &Config) -> anyhow::Result<()> {
    let m = &config.model;
    let rules = [
        (
            m.arch == Architecture::EncoderDecoder,
            "model.arch = \"encoder-decoder\"",
        ),
        (
            m.norm == NormPlacement::PreTorch,
            "model.norm = \"pre-torch\"",
        ),
        (
            m.positions == PositionEncoding::SinusoidalFairseq,
            "model.positions = \"sinusoidal-fairseq\"",
        ),
        (
            m.share_source_embeddings && m.share_embeddings,
            "one embedding table shared by both sides and the output layer",
        ),
        (
            m.attention_bias && m.ffn_bias && !m.generator_bias,
            "biases in the layers and none on the output layer",
        ),
        (
            config.decode.length_normalization == LengthNormalization::Length,
            "decode.length_normalization = \"length\" (transformers' len^alpha)",
        ),
    ];
    for (holds, rule) in rules {
        if !holds {
            bail!(
                "{} cannot be exported as an M2M100 / NLLB-200 model: its family needs {rule}",
                dir.display()
            );
        }
    }
    Ok(())
}
