//! What the BART family's `config.json` (MarianMT's, M2M100's, NLLB-200's) says of a model's
//! sizes, dropout rates and activation, shared by each family's reader.

use anyhow::bail;

use super::json::JsonConfig;
use crate::config::{Activation, Architecture, ModelConfig};

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
