//! The run configuration: TOML sections `[model]`, `[data]`, `[training]` and `[run]`.
//!
//! The paper's (and The Annotated Transformer's) defaults live here and nowhere else: every
//! `Default` impl below. A config file only states what differs. Loading rejects unknown keys and
//! invalid values with an error that names the file, the line, the key and the rule.

use std::fmt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use toml_location::{key_at, line_of_key, line_of_offset, one_line};

mod toml_location;
mod validate;

/// The built-in base config, used by `transformer train` without `--config`.
pub const BUILTIN_BASE: &str = include_str!("../../configs/base.toml");

/// Vocabulary sizes: the only model dimensions that come from the data, not the config (the
/// tokenizers learned on the training split decide them; the model is built from them and
/// the model config).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VocabSizes {
    pub src: usize,
    pub tgt: usize,
}

/// A complete, validated run configuration.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    pub model: ModelConfig,
    pub data: DataConfig,
    pub training: TrainingConfig,
    pub run: RunConfig,
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
}

/// The paper's fixed sine/cosine table, or a trained embedding of `max_len` positions.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PositionEncoding {
    #[default]
    Sinusoidal,
    Learned,
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
        }
    }
}

impl ModelConfig {
    /// d_k = d_v = d_model / h.
    pub fn head_dim(&self) -> usize {
        self.d_model / self.heads
    }
}

/// Where the sentence pairs come from and how text becomes ids.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct DataConfig {
    /// Training pairs: a TSV path (`source<TAB>target` per line) or `{ src = ..., tgt = ... }`,
    /// two line-aligned text files; plain or `.gz`.
    pub train: CorpusSource,
    /// Validation pairs, scored (loss and greedy BLEU) after every epoch; optional.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub valid: Option<CorpusSource>,
    /// `word`: whitespace-separated words; `bpe`: subwords learned on the training split.
    pub tokenizer: TokenizerKind,
    /// Subword vocabulary size (bpe), specials included.
    pub vocab_size: usize,
    /// One subword vocabulary for both languages (bpe) instead of one per side.
    pub joint_vocab: bool,
    /// Words (word) or merges (bpe) seen fewer times than this are left out.
    pub min_freq: usize,
}

impl Default for DataConfig {
    fn default() -> Self {
        Self {
            train: CorpusSource::Tsv(PathBuf::from("data/toy.tsv")),
            valid: None,
            tokenizer: TokenizerKind::Word,
            vocab_size: 8000,
            joint_vocab: true,
            min_freq: 1,
        }
    }
}

/// A parallel corpus on disk.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum CorpusSource {
    /// One file, `source<TAB>target` per line.
    Tsv(PathBuf),
    /// Two line-aligned files.
    Parallel { src: PathBuf, tgt: PathBuf },
    /// Plain text, one example per line, for a language model (`arch = "decoder-only"`).
    Text { text: PathBuf },
}

impl CorpusSource {
    /// Text for a language model: examples with a target side only.
    pub fn is_target_only(&self) -> bool {
        matches!(self, Self::Text { .. })
    }
}

impl fmt::Display for CorpusSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Tsv(path) => write!(f, "{}", path.display()),
            Self::Parallel { src, tgt } => write!(f, "{} + {}", src.display(), tgt.display()),
            Self::Text { text } => write!(f, "{}", text.display()),
        }
    }
}

/// How sentences become token ids.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TokenizerKind {
    Word,
    Bpe,
}

/// As the config spells it: `word`, `bpe`.
impl std::fmt::Display for TokenizerKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Word => "word",
            Self::Bpe => "bpe",
        })
    }
}

/// The optimiser, the schedule, the loss and the loop.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TrainingConfig {
    /// Seeds initialisation, dropout and data order: same seed, same result on the CPU.
    pub seed: u64,
    pub epochs: usize,
    /// Most tokens per batch: sentences x the longer padded side.
    pub max_tokens: usize,
    /// Batches whose gradients are summed before each optimiser step.
    pub accumulate: usize,
    /// Rescale gradients whose global L2 norm exceeds this; absent: no clipping.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub clip_grad_norm: Option<f64>,
    /// The Noam schedule: lr = factor * d_model^-0.5 * min(step^-0.5, step * warmup^-1.5).
    pub lr_factor: f64,
    pub warmup: usize,
    pub adam_beta1: f64,
    pub adam_beta2: f64,
    pub adam_eps: f64,
    /// Probability mass spread over the non-target, non-padding words.
    pub label_smoothing: f64,
    /// Steps between progress log lines and metrics records.
    pub log_every: usize,
    /// Steps between checkpoints (one is always written at the end).
    pub checkpoint_every: usize,
    /// The dtype of the forward and backward passes. The weights and Adam's moments stay f32
    /// (master weights) whatever it says; checkpoints are f32.
    pub dtype: ComputeDtype,
}

/// What training computes in.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ComputeDtype {
    #[default]
    F32,
    /// bfloat16: f32's range with 8 bits of mantissa; GPUs only (candle's CPU backend has no
    /// bf16 matrix product).
    Bf16,
    /// float16: without loss scaling, small gradients can underflow to zero; prefer bf16 on
    /// GPUs that have it. Runs on the CPU too, slowly.
    F16,
}

impl ComputeDtype {
    pub fn candle(self) -> candle_core::DType {
        match self {
            Self::F32 => candle_core::DType::F32,
            Self::Bf16 => candle_core::DType::BF16,
            Self::F16 => candle_core::DType::F16,
        }
    }
}

impl Default for TrainingConfig {
    fn default() -> Self {
        Self {
            seed: 1,
            epochs: 10,
            max_tokens: 4096,
            accumulate: 1,
            clip_grad_norm: None,
            lr_factor: 1.0,
            warmup: 4000,
            adam_beta1: 0.9,
            adam_beta2: 0.98,
            adam_eps: 1e-9,
            label_smoothing: 0.1,
            log_every: 10,
            checkpoint_every: 1000,
            dtype: ComputeDtype::F32,
        }
    }
}

/// Where the run directory goes.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RunConfig {
    /// Run directory; `runs/<config name>` when absent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dir: Option<PathBuf>,
}

/// A config error that names where it is: file, line (when known) and key.
#[derive(Debug, Clone, PartialEq)]
pub struct ConfigError {
    pub source_name: String,
    pub line: Option<usize>,
    pub key: Option<String>,
    pub message: String,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.source_name)?;
        if let Some(line) = self.line {
            write!(f, " line {line}")?;
        }
        if let Some(key) = &self.key {
            write!(f, ", key `{key}`")?;
        }
        write!(f, ": {}", self.message)
    }
}

impl std::error::Error for ConfigError {}

impl Config {
    /// Reads and validates a config file.
    pub fn load(path: &Path) -> anyhow::Result<Self> {
        let text = std::fs::read_to_string(path).map_err(|e| {
            anyhow::anyhow!(
                "cannot read config {}: {e}; check the path given to --config",
                path.display()
            )
        })?;
        Ok(Self::parse(&text, &path.display().to_string())?)
    }

    /// Parses and validates config text; `source_name` is used in error messages.
    pub fn parse(text: &str, source_name: &str) -> Result<Self, ConfigError> {
        let config: Config = toml::from_str(text).map_err(|e| {
            let line = e.span().map(|span| line_of_offset(text, span.start));
            ConfigError {
                source_name: source_name.to_string(),
                line,
                key: e.span().and_then(|span| key_at(text, span.start)),
                message: one_line(e.message()),
            }
        })?;
        config.validate().map_err(|(key, message)| ConfigError {
            source_name: source_name.to_string(),
            line: line_of_key(text, &key),
            key: Some(key),
            message,
        })?;
        Ok(config)
    }

    /// The resolved config as TOML, every value explicit; it travels with the weights.
    pub fn to_toml(&self) -> anyhow::Result<String> {
        Ok(toml::to_string(self)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Config, ConfigError> {
        Config::parse(text, "test.toml")
    }

    #[test]
    fn an_empty_file_gives_the_papers_base_model() {
        let config = parse("").unwrap();
        assert_eq!(config.model.layers, 6);
        assert_eq!(config.model.d_model, 512);
        assert_eq!(config.model.d_ff, 2048);
        assert_eq!(config.model.heads, 8);
        assert_eq!(config.model.head_dim(), 64);
        assert_eq!(config.model.dropout, 0.1);
        assert_eq!(config.training.adam_beta2, 0.98);
        assert_eq!(config.training.adam_eps, 1e-9);
    }

    #[test]
    fn the_builtin_base_config_is_the_papers_base_model_on_the_toy_pairs() {
        let config = parse(BUILTIN_BASE).unwrap();
        assert_eq!(config.model, ModelConfig::default());
        assert_eq!(
            config.data.train,
            CorpusSource::Tsv(PathBuf::from("data/toy.tsv"))
        );
    }

    #[test]
    fn every_shipped_config_is_valid() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("configs");
        let mut seen = 0;
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|e| e == "toml") {
                Config::load(&path).unwrap_or_else(|e| panic!("{}: {e:#}", path.display()));
                seen += 1;
            }
        }
        assert!(seen >= 5, "found {seen} configs");
    }

    #[test]
    fn a_corpus_is_a_tsv_path_or_two_aligned_files() {
        let config = parse("[data]\ntrain = { src = \"a.de.gz\", tgt = \"a.en.gz\" }\nvalid = \"v.tsv\"\ntokenizer = \"bpe\"\n").unwrap();
        assert_eq!(
            config.data.train,
            CorpusSource::Parallel {
                src: "a.de.gz".into(),
                tgt: "a.en.gz".into()
            }
        );
        assert_eq!(config.data.valid, Some(CorpusSource::Tsv("v.tsv".into())));
        assert_eq!(config.data.tokenizer, TokenizerKind::Bpe);
        let err = parse("[data]\ntokenizer = \"chars\"\n").unwrap_err();
        assert_eq!(err.key.as_deref(), Some("data.tokenizer"));
    }

    #[test]
    fn the_resolved_config_round_trips_through_toml() {
        let mut config = parse(BUILTIN_BASE).unwrap();
        config.run.dir = Some(PathBuf::from("runs/x"));
        config.training.clip_grad_norm = Some(1.0);
        config.data.valid = Some(CorpusSource::Parallel {
            src: "v.de".into(),
            tgt: "v.en".into(),
        });
        let text = config.to_toml().unwrap();
        assert_eq!(parse(&text).unwrap(), config);
    }
}
