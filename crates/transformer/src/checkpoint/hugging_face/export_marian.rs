//! A checkpoint (ours, fine-tuned from a MarianMT model or trained as one, or a MarianMT
//! directory itself) written as a Hugging Face MarianMT directory, which
//! `MarianMTModel.from_pretrained`, `MarianTokenizer.from_pretrained` and CTranslate2's
//! `ct2-transformers-converter` read: `config.json`, `generation_config.json`,
//! `model.safetensors` under transformers' names, the SentencePiece models and vocabularies,
//! `tokenizer_config.json`.

use std::collections::HashMap;
use std::path::Path;

use anyhow::bail;
use candle_core::Tensor;
use serde_json::json;

use super::export_files::{family_config, hugging_face_tensors, write_directory};
use super::{CONFIG_JSON, GENERATION_CONFIG_JSON, TOKENIZER_CONFIG_JSON};
use crate::checkpoint::Destination;
use crate::config::{Architecture, Config, LengthNormalization, NormPlacement, PositionEncoding};
use crate::tokenize::marian::{TARGET_VOCAB_FILE, VOCAB_FILE};
use crate::tokenize::Tokenizers;

/// Writes the checkpoint as a MarianMT directory.
pub(super) fn export_marian(
    source_dir: &Path,
    config: &Config,
    tokenizers: &Tokenizers,
    tensors: &HashMap<String, Tensor>,
    out: Destination,
) -> anyhow::Result<()> {
    check_exportable(source_dir, config, tokenizers)?;
    let specials = tokenizers.specials();
    let m = &config.model;
    let vocab = tokenizers.vocab_sizes();
    let model_json = family_config(
        m,
        json!({
            "architectures": ["MarianMTModel"],
            "model_type": "marian",
            "share_encoder_decoder_embeddings": m.share_source_embeddings,
            "tie_word_embeddings": m.share_embeddings,
            "vocab_size": vocab.src,
            "decoder_vocab_size": vocab.tgt,
            "pad_token_id": specials.pad,
            "eos_token_id": specials.eos,
            "decoder_start_token_id": specials.decoder_start,
            "forced_eos_token_id": specials.eos,
        }),
    );
    let d = &config.decode;
    // transformers' max_length counts the decoder's start symbol; a model without a length
    // limit of its own gets the position table's.
    let max_length = d.max_len.unwrap_or(m.max_len - 1) + 1;
    let generation_json = json!({
        "bad_words_ids": [[specials.pad]],
        "decoder_start_token_id": specials.decoder_start,
        "eos_token_id": specials.eos,
        "forced_eos_token_id": specials.eos,
        "pad_token_id": specials.pad,
        "max_length": max_length,
        "num_beams": d.beam,
        "length_penalty": d.length_penalty,
        "renormalize_logits": d.renormalize,
    });
    // transformers reads separate embedding tables with their own vocabularies only: one
    // vocabulary under separate tables is written once per side.
    let mut tokenizer_files = tokenizers.files()?;
    let copied_vocab = tokenizers.joint && !m.share_source_embeddings;
    if copied_vocab {
        if let Some((_, vocab)) = tokenizer_files.iter().find(|(name, _)| *name == VOCAB_FILE) {
            let vocab = vocab.clone();
            tokenizer_files.push((TARGET_VOCAB_FILE, vocab));
        }
    }
    let tokenizer_json = json!({
        "tokenizer_class": "MarianTokenizer",
        "source_lang": config.data.source_lang,
        "target_lang": config.data.target_lang,
        "separate_vocabs": !tokenizers.joint || copied_vocab,
        "model_max_length": m.max_len,
        "eos_token": "</s>",
        "unk_token": "<unk>",
        "pad_token": "<pad>",
    });
    let weights = hugging_face_tensors(config, tensors)?;
    let settings = [
        (CONFIG_JSON, model_json),
        (GENERATION_CONFIG_JSON, generation_json),
        (TOKENIZER_CONFIG_JSON, tokenizer_json),
    ];
    write_directory(out, &settings, &tokenizer_files, &weights)
}

/// Why the checkpoint cannot be a MarianMT model, naming the setting, if it cannot.
fn check_exportable(dir: &Path, config: &Config, tokenizers: &Tokenizers) -> anyhow::Result<()> {
    let m = &config.model;
    let refuse = |what: String| -> anyhow::Result<()> {
        bail!(
            "{} cannot be exported as a MarianMT model: {what}",
            dir.display()
        )
    };
    if !matches!(tokenizers.tgt, crate::tokenize::TextTokenizer::Marian(_)) {
        return refuse(format!(
            "its tokenizer is data.tokenizer = \"{}\", and transformers' MarianTokenizer reads \
             SentencePiece models (source.spm, target.spm); train with model.arch = \
             \"marian\" (data.tokenizer = \"marian\") or fine-tune a MarianMT model \
             (training.init_from) to get one",
            config.data.tokenizer
        ));
    }
    // The model's settings are its weights' meaning: a new run chooses them.
    let weights = "as in every MarianMT model (model.arch = \"marian\" sets it for a new run; a \
                   trained model cannot change it)";
    let rules: [(bool, &str, &str); 5] = [
        (
            m.arch == Architecture::EncoderDecoder,
            "model.arch must be \"encoder-decoder\"",
            weights,
        ),
        (
            m.norm == NormPlacement::Post,
            "model.norm must be \"post\"",
            weights,
        ),
        (
            m.positions == PositionEncoding::SinusoidalHalves,
            "model.positions must be \"sinusoidal-halves\"",
            weights,
        ),
        (
            m.attention_bias && m.ffn_bias,
            "model.attention_bias and model.ffn_bias must be true",
            weights,
        ),
        (
            config.decode.length_normalization == LengthNormalization::Length,
            "decode.length_normalization must be \"length\" (transformers' len^alpha)",
            "set it in the checkpoint's config.toml [decode]: it changes how beam search ranks \
             hypotheses, not the weights",
        ),
    ];
    for (holds, rule, remedy) in rules {
        if !holds {
            return refuse(format!("{rule}, {remedy}"));
        }
    }
    Ok(())
}
