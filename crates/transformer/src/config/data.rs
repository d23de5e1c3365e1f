//! `[data]`: the corpora and how sentences become token ids.

use std::fmt;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

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
    /// `word`: whitespace-separated words; `bpe`: subwords learned on the training split;
    /// `marian`: a MarianMT model's SentencePiece tokenizer, from `training.init_from`, or
    /// without it learned on the training split (a unigram model per side, OPUS-MT's files).
    pub tokenizer: TokenizerKind,
    /// Subword vocabulary size, specials included: bpe's, or each side's SentencePiece model's
    /// (marian; a joint vocabulary is then both models' pieces).
    pub vocab_size: usize,
    /// One subword vocabulary for both languages (bpe, marian) instead of one per side.
    pub joint_vocab: bool,
    /// Words (word) or merges (bpe) seen fewer times than this are left out.
    pub min_freq: usize,
    /// The source language's code (`de`): what `serve` answers LibreTranslate clients with
    /// and checks their `source` against.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub source_lang: Option<String>,
    /// The target language's code (`en`), as `source_lang`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub target_lang: Option<String>,
    /// Whether the encoded training corpus (and a tokenizer learned from it) is cached on
    /// disk, memory-mapped and reused by a resume or any run over the same files.
    pub cache: CorpusCacheMode,
    /// Where the cache lives; default `$TRANSFORMER_CACHE`, else `$XDG_CACHE_HOME/transformer`,
    /// else `~/.cache/transformer` (each with `corpora/` under it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cache_dir: Option<PathBuf>,
}

/// `data.cache`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CorpusCacheMode {
    /// Corpora of [`CorpusCacheMode::AUTO_BYTES`] or more on disk: re-encoding them takes
    /// seconds; smaller ones encode faster than a cache is checked.
    Auto,
    On,
    Off,
}

impl CorpusCacheMode {
    pub const AUTO_BYTES: u64 = 16 << 20;
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
            source_lang: None,
            target_lang: None,
            cache: CorpusCacheMode::Auto,
            cache_dir: None,
        }
    }
}

/// A parallel corpus on disk.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(
    untagged,
    expecting = "expected a TSV file's path in quotes, { src = \"a.de\", tgt = \"a.en\" }, \
                 { text = \"a.txt\" } or { builtin = \"toy\" }"
)]
pub enum CorpusSource {
    /// One file, `source<TAB>target` per line.
    Tsv(PathBuf),
    /// Two line-aligned files.
    Parallel { src: PathBuf, tgt: PathBuf },
    /// Plain text, one example per line, for a language model (`arch = "decoder-only"`).
    Text { text: PathBuf },
    /// Pairs built into the binary (`{ builtin = "toy" }`), so that the built-in config
    /// trains from any directory.
    Builtin { builtin: BuiltinCorpus },
}

/// The corpora built into the binary.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum BuiltinCorpus {
    /// The tutorial's two German-English pairs, the same as `data/toy.tsv`.
    Toy,
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
            Self::Builtin { builtin } => write!(f, "the built-in {builtin} pairs"),
        }
    }
}

/// As the config spells it: `toy`.
impl fmt::Display for BuiltinCorpus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Toy => "toy",
        })
    }
}

/// How sentences become token ids.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TokenizerKind {
    Word,
    Bpe,
    /// A MarianMT model's SentencePiece models and vocabularies (`source.spm`, `target.spm`,
    /// `vocab.json`), read from the checkpoint a run starts from (`training.init_from`) or
    /// learned on the training split.
    Marian,
    /// An M2M100 or NLLB-200 model's tokenizer (`tokenizer_config.json` with
    /// `sentencepiece.bpe.model` and `vocab.json`, or `tokenizer.json`), read from the
    /// checkpoint a run starts from; never learned.
    Multilingual,
}

/// As the config spells it: `word`, `bpe`, `marian`, `multilingual`.
impl std::fmt::Display for TokenizerKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Word => "word",
            Self::Bpe => "bpe",
            Self::Marian => "marian",
            Self::Multilingual => "multilingual",
        })
    }
}
