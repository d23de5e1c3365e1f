//! How to decode (`--beam`, `--length-penalty`, `--max-len`, `--compute-type`,
//! `--vocab-map`) and how many
//! sentences together, as translate, eval and serve take them.

use clap::Args;

use super::{at_least_one, finite};
use crate::config::ComputeType;
use crate::infer::{LanguageNames, OnePairLanguages};

#[derive(Debug, Args)]
pub struct DecodeArgs {
    #[command(flatten)]
    pub settings: DecodeSettingsArgs,
    /// Most sentences decoded together (from stdin: of the lines already waiting, so that a
    /// line typed at a terminal is translated at once)
    #[arg(long, default_value_t = crate::infer::translator::DEFAULT_BATCH_SIZE, value_name = "N", value_parser = at_least_one)]
    pub batch_size: usize,
    /// Most source tokens decoded together, counting padding and each beam (a batch is as wide
    /// as its longest source): bounds the memory a batch of long sentences takes; a sentence
    /// longer than this is decoded alone
    #[arg(long, default_value_t = crate::infer::translator::DEFAULT_BATCH_TOKENS, value_name = "N", value_parser = at_least_one)]
    pub batch_tokens: usize,
}

impl DecodeArgs {
    /// The batch bounds the flags give.
    pub fn batching(&self) -> crate::infer::translator::Batching {
        crate::infer::translator::Batching {
            sentences: self.batch_size,
            tokens: self.batch_tokens,
        }
    }
}

/// How to decode, each over the checkpoint's `[decode]` setting.
#[derive(Debug, Args)]
pub struct DecodeSettingsArgs {
    /// Beam size; 1 is greedy decoding (at most the target vocabulary's size) [default: the
    /// checkpoint's decode.beam (a MarianMT directory's num_beams), else 1]
    #[arg(long, value_name = "N", value_parser = at_least_one)]
    pub beam: Option<usize>,
    /// Length penalty exponent for beam search: scores are divided by ((5 + len) / 6)^alpha
    /// (len^alpha for a MarianMT checkpoint, as transformers divides); negative values favour
    /// short translations [default: the checkpoint's decode.length_penalty, else 1.0]
    #[arg(long, value_name = "ALPHA", value_parser = finite, allow_negative_numbers = true)]
    pub length_penalty: Option<f64>,
    /// Most target tokens to generate, </s> included [default: the checkpoint's
    /// decode.max_len, else source length + 50]
    #[arg(long, value_name = "N", value_parser = at_least_one)]
    pub max_len: Option<usize>,
    /// What the linear layers compute in: float32; int8 (weights quantized per output row
    /// when the checkpoint loads, CPU only); or bfloat16 (bf16 weights and products, f32
    /// sums: on a CPU with AMX-BF16 or AVX512-BF16, or a GPU) [default: the checkpoint's
    /// decode.compute_type, else float32]
    #[arg(long, value_name = "TYPE", value_parser = ComputeType::parse)]
    pub compute_type: Option<ComputeType>,
    /// A vocabulary map (CTranslate2's vmap.txt: a source n-gram, a tab, the target tokens it
    /// allows; an empty n-gram's tokens always allowed): each sentence is decoded over the
    /// target tokens its own words allow instead of the whole vocabulary, faster on a large
    /// vocabulary; log-probabilities are over those tokens
    #[arg(long, value_name = "FILE")]
    pub vocab_map: Option<std::path::PathBuf>,
    /// The language the text is in: one of a multilingual model's codes (M2M100: de; NLLB-200:
    /// deu_Latn), which frames the source; for a server, the language clients name as the
    /// source (LibreTranslate's `source`) [default: the checkpoint's data.source_lang (a
    /// MarianMT directory's from its tokenizer_config.json or its opus-mt-xx-yy name)]
    #[arg(long, value_name = "CODE", value_parser = language_code)]
    pub source_lang: Option<String>,
    /// The language to translate into (a multilingual model's code: en, eng_Latn), forced as
    /// the first token; for a server, the target clients name [default: the checkpoint's
    /// data.target_lang]
    #[arg(long, value_name = "CODE", value_parser = language_code)]
    pub target_lang: Option<String>,
}

impl DecodeSettingsArgs {
    /// How to open the checkpoint: these flags' compute type, vocabulary map and languages,
    /// which may rename a model of one pair's (a server's clients) or not (`one_pair`).
    pub fn load_options(&self, one_pair: OnePairLanguages) -> crate::infer::LoadOptions {
        crate::infer::LoadOptions {
            compute_type: self.compute_type,
            vocab_map: self.vocab_map.clone(),
            source_lang: self.source_lang.clone(),
            target_lang: self.target_lang.clone(),
            one_pair,
            language_names: LANGUAGE_FLAGS,
        }
    }
}

/// The language codes as the command line names them, for the library's refusals.
pub const LANGUAGE_FLAGS: LanguageNames = LanguageNames {
    source: "--source-lang",
    target: "--target-lang",
};

/// The decoding settings as the command line names them, for their refusals.
pub const FLAGS: crate::infer::settings::SettingNames = crate::infer::settings::SettingNames {
    beam: "--beam",
    length_penalty: "--length-penalty",
    max_len: "--max-len",
    n_best: "--n-best",
};

/// A language code as LibreTranslate's clients send it (`de`, `pt-BR`) or NLLB-200 spells it
/// (`deu_Latn`).
pub fn language_code(text: &str) -> Result<String, String> {
    let well_formed = (2..=16).contains(&text.len())
        && text
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
    if well_formed && text != "auto" {
        Ok(text.to_string())
    } else {
        Err(format!(
            "{text:?} is not a language code such as \"de\", \"en\" or \"deu_Latn\""
        ))
    }
}
