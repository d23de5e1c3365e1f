//! Whether a MarianMT directory's parts belong together: the config's sizes against the
//! weights' shapes, and its vocabulary sizes and special ids against the tokenizer's.

use std::path::Path;

use anyhow::bail;

use super::json::JsonConfig;
use super::CONFIG_JSON;
use crate::checkpoint::format::ByModule;
use crate::config::Config;
use crate::tokenize::Tokenizers;

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
