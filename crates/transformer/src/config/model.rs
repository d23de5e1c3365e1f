//! `[model]`: the architecture and its sizes, with the paper's defaults (the base model of
//! Table 3), and the vocabulary sizes the data decides.

use serde::{Deserialize, Serialize};

/// Vocabulary sizes: the only model dimensions that come from the data, not the config (the
/// tokenizers learned on the training split decide them; the model is built from them and
/// the model config).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VocabSizes {
    pub src: usize,
    pub tgt: usize,
}

/// The encoder-decoder's hyper-parameters (the paper's Table 3, "base" row).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ModelConfig {
    /// N: identical layers in the encoder and in the decoder.
    pub layers: usize,
    pub d_model: usize,
    pub d_ff: usize,
    /// h: attention heads; d_k = d_v = d_model / h.
    pub heads: usize,
    /// Dropout on embeddings, sublayer outputs and inside the feed-forward network.
    pub dropout: f64,
    /// Dropout on attention probabilities. The reference's `make_model` never passes its
    /// `dropout` argument to MultiHeadedAttention, so this stays 0.1 whatever `dropout` says.
    pub attention_dropout: f64,
    /// Rows of the position table (the reference's `max_len`): the longest sequence.
    pub max_len: usize,
    /// An encoder-decoder translation model, or a decoder-only language model.
    pub arch: Architecture,
    /// Where LayerNorm sits around each sublayer.
    pub norm: NormPlacement,
    /// How positions are encoded.
    pub positions: PositionEncoding,
    /// Biases on the attention's q/k/v/output projections (`linears.i.bias`).
    pub attention_bias: bool,
    /// Biases on the feed-forward layers (`w_1.bias`, `w_2.bias`).
    pub ffn_bias: bool,
    /// The generator's matrix is the target embedding's (`tgt_embed.0.lut.weight`), as in the
    /// paper's section 3.4; `generator.proj.weight` is then not a separate parameter.
    pub share_embeddings: bool,
    /// The feed-forward network's nonlinearity: the paper's ReLU, or the swish (SiLU) and
    /// GELU that MarianMT models name in their `activation_function`.
    pub activation: Activation,
    /// Decoder layers, when not `layers` (MarianMT's `decoder_layers` may differ from its
    /// `encoder_layers`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub decoder_layers: Option<usize>,
    /// Embeddings multiplied by sqrt(d_model) (the paper's section 3.4; MarianMT's
    /// `scale_embedding`).
    pub scale_embeddings: bool,
    /// One embedding table for both sides (`src_embed.0.lut.weight`, which the target side
    /// reads too): a joint vocabulary's model, as MarianMT's `model.shared`.
    pub share_source_embeddings: bool,
    /// Dropout after the feed-forward activation, when not `dropout` (MarianMT's
    /// `activation_dropout`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub activation_dropout: Option<f64>,
    /// The generator's own bias (`generator.proj.bias`); M2M100 and NLLB have none.
    #[serde(skip_serializing_if = "is_true")]
    pub generator_bias: bool,
}

fn is_true(value: &bool) -> bool {
    *value
}

/// The feed-forward network's nonlinearity.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Activation {
    /// max(0, x), equation 2 of the paper.
    #[default]
    Relu,
    /// x sigmoid(x) (SiLU), OPUS-MT's.
    Swish,
    /// x Phi(x) with the exact normal CDF (PyTorch's and transformers' "gelu").
    Gelu,
}

/// The model family.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Architecture {
    /// Figure 1 of the paper: source encoder, target decoder with cross-attention.
    #[default]
    EncoderDecoder,
    /// Token and position embeddings, N causal self-attention blocks (no cross-attention), a
    /// final norm when pre-norm, and a linear head: a next-token language model.
    DecoderOnly,
    /// The encoder-decoder with MarianMT's conventions (post-norm, swish, sin|cos position
    /// halves, tied embeddings, a SentencePiece tokenizer, transformers' length
    /// normalisation): a preset that reading the config resolves into `EncoderDecoder` and
    /// the settings it implies (config/marian_preset.rs), so no model is built as this.
    Marian,
}

impl Architecture {
    /// Whether the family reads a source sentence (it translates, and trains on pairs) or
    /// continues target-side text (it trains on a `{ text = ... }` corpus).
    pub fn reads_source(self) -> bool {
        match self {
            Self::EncoderDecoder | Self::Marian => true,
            Self::DecoderOnly => false,
        }
    }
}

/// Pre-norm is The Annotated Transformer's `x + dropout(sublayer(norm(x)))` with a final norm
/// per stack and its own LayerNorm (unbiased std, eps 1e-6 added to it, `a_2`/`b_2`);
/// post-norm is the paper's and d2l's `norm(x + dropout(sublayer(x)))` with torch.nn.LayerNorm
/// (biased variance, eps 1e-5 inside the square root, `weight`/`bias`) and no final norm.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum NormPlacement {
    #[default]
    Pre,
    Post,
    /// Pre-norm with torch.nn.LayerNorm (`weight`/`bias`, eps 1e-5 inside the square root)
    /// and a final norm per stack: fairseq's `normalize_before`, M2M100's and NLLB's layers.
    #[serde(rename = "pre-torch")]
    PreTorch,
}

/// The paper's fixed sine/cosine table (sine and cosine interleaved, as the reference lays
/// it out), the same table with all sines first and all cosines after (MarianMT's layout), or
/// a trained embedding of `max_len` positions.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PositionEncoding {
    #[default]
    Sinusoidal,
    SinusoidalHalves,
    Learned,
    /// fairseq's table (M2M100's and NLLB's): sines then cosines, frequencies
    /// exp(-k ln(10000) / (d/2 - 1)), position i at row i + 2 (past the padding index).
    SinusoidalFairseq,
}

impl Default for ModelConfig {
    fn default() -> Self {
        Self {
            layers: 6,
            d_model: 512,
            d_ff: 2048,
            heads: 8,
            dropout: 0.1,
            attention_dropout: 0.1,
            max_len: 5000,
            arch: Architecture::EncoderDecoder,
            norm: NormPlacement::Pre,
            positions: PositionEncoding::Sinusoidal,
            attention_bias: true,
            ffn_bias: true,
            share_embeddings: false,
            activation: Activation::Relu,
            decoder_layers: None,
            scale_embeddings: true,
            share_source_embeddings: false,
            activation_dropout: None,
            generator_bias: true,
        }
    }
}

impl ModelConfig {
    /// d_k = d_v = d_model / h.
    pub fn head_dim(&self) -> usize {
        self.d_model / self.heads
    }

    /// Layers of the decoder stack.
    pub fn decoder_layer_count(&self) -> usize {
        self.decoder_layers.unwrap_or(self.layers)
    }

    /// Dropout after the feed-forward activation.
    pub fn ffn_dropout(&self) -> f64 {
        self.activation_dropout.unwrap_or(self.dropout)
    }
}
