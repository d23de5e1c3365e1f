//! The tokenizers of the multilingual families, as transformers runs them: M2M100's
//! (`M2M100Tokenizer`: `sentencepiece.bpe.model` segments, `vocab.json`, the fairseq
//! dictionary, numbers the pieces, and the `__xx__` language tokens follow it) and NLLB-200's
//! (`NllbTokenizer`: `tokenizer.json`, with the `xxx_Yyyy` language codes among its added
//! tokens). A source is its language's token, its pieces and `</s>`, as both tokenizers frame
//! it (NLLB's `legacy_behaviour` puts the language after `</s>`); a translation starts from
//! `</s>` and the target language's token, which generation forces first.

use std::collections::HashMap;
use std::path::Path;

use anyhow::{bail, Context};

use super::sentencepiece::SentencePiece;

/// M2M100's language codes (`language_codes = "m2m100"`), in the order their tokens follow
/// the dictionary.
pub const M2M100_LANGUAGES: &[&str] = &[
    "af", "am", "ar", "ast", "az", "ba", "be", "bg", "bn", "br", "bs", "ca", "ceb", "cs", "cy",
    "da", "de", "el", "en", "es", "et", "fa", "ff", "fi", "fr", "fy", "ga", "gd", "gl", "gu", "ha",
    "he", "hi", "hr", "ht", "hu", "hy", "id", "ig", "ilo", "is", "it", "ja", "jv", "ka", "kk",
    "km", "kn", "ko", "lb", "lg", "ln", "lo", "lt", "lv", "mg", "mk", "ml", "mn", "mr", "ms", "my",
    "ne", "nl", "no", "ns", "oc", "or", "pa", "pl", "ps", "pt", "ro", "ru", "sd", "si", "sk", "sl",
    "so", "sq", "sr", "ss", "su", "sv", "sw", "ta", "th", "tl", "tn", "tr", "uk", "ur", "uz", "vi",
    "wo", "xh", "yi", "yo", "zh", "zu",
];

/// The WMT21 models' codes (`language_codes = "wmt21"`).
pub const WMT21_LANGUAGES: &[&str] = &["en", "ha", "is", "ja", "cs", "ru", "zh", "de"];

/// The fairseq dictionary's special ids, both families'.
const BOS: u32 = 0;
const PAD: u32 = 1;
const EOS: u32 = 2;
const UNK: u32 = 3;

/// How a family's tokenizer turns text into pieces and pieces into ids.
enum Pieces {
    /// M2M100: SentencePiece's pieces, numbered by `vocab.json`.
    M2m100 {
        model: Box<SentencePiece>,
        ids: HashMap<String, u32>,
        tokens: Vec<String>,
    },
    /// NLLB: `tokenizer.json` as it is.
    Nllb {
        tokenizer: Box<tokenizers::Tokenizer>,
        legacy: bool,
    },
}

/// A multilingual model's tokenizer: its pieces, and its languages with their token ids.
pub struct MultilingualTokenizer {
    pieces: Pieces,
    /// (code, token id), in the tokenizer's order.
    languages: Vec<(String, u32)>,
}

impl MultilingualTokenizer {
    /// The tokenizer of the Hugging Face directory `dir`, by its `tokenizer_config.json`'s
    /// `tokenizer_class`; an error names the file that is missing or wrong.
    pub fn load(dir: &Path) -> anyhow::Result<Self> {
        let config_path = dir.join("tokenizer_config.json");
        let config: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(&config_path)
                .with_context(|| format!("cannot read {}", config_path.display()))?,
        )
        .with_context(|| format!("{} is not JSON", config_path.display()))?;
        match config["tokenizer_class"].as_str() {
            Some("M2M100Tokenizer") => Self::m2m100(dir, &config),
            Some("NllbTokenizer" | "NllbTokenizerFast") => Self::nllb(dir, &config),
            other => bail!(
                "{} names the tokenizer {other:?}; a multilingual model's is M2M100Tokenizer or \
                 NllbTokenizer",
                config_path.display()
            ),
        }
    }

    fn m2m100(dir: &Path, config: &serde_json::Value) -> anyhow::Result<Self> {
        let model = SentencePiece::load(&dir.join("sentencepiece.bpe.model"))?;
        let vocab_path = dir.join("vocab.json");
        let ids: HashMap<String, u32> = serde_json::from_str(
            &std::fs::read_to_string(&vocab_path)
                .with_context(|| format!("cannot read {}", vocab_path.display()))?,
        )
        .with_context(|| {
            format!(
                "{} is not a JSON map of tokens to ids",
                vocab_path.display()
            )
        })?;
        let codes = match config["language_codes"].as_str().unwrap_or("m2m100") {
            "m2m100" => M2M100_LANGUAGES,
            "wmt21" => WMT21_LANGUAGES,
            other => bail!(
                "tokenizer_config.json names the language codes {other:?}, not m2m100 or wmt21"
            ),
        };
        let size = ids.len() as u32;
        let languages = codes
            .iter()
            .enumerate()
            .map(|(i, code)| (code.to_string(), size + i as u32))
            .collect();
        let mut tokens = vec![String::new(); ids.len()];
        for (token, &id) in &ids {
            match tokens.get_mut(id as usize) {
                Some(slot) => *slot = token.clone(),
                None => bail!(
                    "{} numbers {token:?} {id}, past its {size} tokens",
                    vocab_path.display()
                ),
            }
        }
        Ok(Self {
            pieces: Pieces::M2m100 {
                model: Box::new(model),
                ids,
                tokens,
            },
            languages,
        })
    }

    fn nllb(dir: &Path, config: &serde_json::Value) -> anyhow::Result<Self> {
        let path = dir.join("tokenizer.json");
        let mut tokenizer = tokenizers::Tokenizer::from_file(&path)
            .map_err(|e| anyhow::anyhow!("cannot read {}: {e}", path.display()))?;
        // A saved file may carry the truncation and padding its last user set; transformers
        // applies neither unless asked, and a long source is cut by the caller, who says so.
        tokenizer
            .with_truncation(None)
            .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
        tokenizer.with_padding(None);
        // The language codes are the added tokens shaped `xxx_Yyyy` (eng_Latn, zho_Hans).
        let mut languages: Vec<(String, u32)> = tokenizer
            .get_added_tokens_decoder()
            .into_iter()
            .filter(|(_, token)| is_nllb_code(&token.content))
            .map(|(id, token)| (token.content, id))
            .collect();
        languages.sort_by_key(|&(_, id)| id);
        if languages.is_empty() {
            bail!(
                "{} has no language codes (eng_Latn, ...) among its added tokens",
                path.display()
            );
        }
        Ok(Self {
            pieces: Pieces::Nllb {
                tokenizer: Box::new(tokenizer),
                legacy: config["legacy_behaviour"].as_bool().unwrap_or(false),
            },
            languages,
        })
    }

    /// The language codes, in the tokenizer's order.
    pub fn languages(&self) -> impl Iterator<Item = &str> {
        self.languages.iter().map(|(code, _)| code.as_str())
    }

    /// The token id of language `code`.
    pub fn language_id(&self, code: &str) -> Option<u32> {
        self.languages
            .iter()
            .find(|(c, _)| c == code)
            .map(|&(_, id)| id)
    }

    /// The ids of `text` in language `lang` as the encoder reads them: framed by the language's
    /// token and `</s>`, as the family's tokenizer frames a source.
    pub fn encode_source(&self, text: &str, lang: &str) -> anyhow::Result<Vec<u32>> {
        let Some(lang_id) = self.language_id(lang) else {
            bail!("{lang:?} is not one of this model's languages");
        };
        let pieces = self.piece_ids(text)?;
        Ok(match &self.pieces {
            Pieces::Nllb { legacy: true, .. } => [&pieces[..], &[EOS, lang_id]].concat(),
            _ => [&[lang_id][..], &pieces, &[EOS]].concat(),
        })
    }

    /// The first ids a translation into `lang` decodes from: `</s>` (the decoder's start)
    /// and the language's token (generation's forced first token).
    pub fn target_prefix(&self, lang: &str) -> Option<[u32; 2]> {
        Some([EOS, self.language_id(lang)?])
    }

    /// The text of `ids`: the special and language tokens left out.
    pub fn decode(&self, ids: &[u32]) -> anyhow::Result<String> {
        let kept: Vec<u32> = ids
            .iter()
            .copied()
            .filter(|&id| {
                ![BOS, PAD, EOS].contains(&id) && !self.languages.iter().any(|l| l.1 == id)
            })
            .collect();
        match &self.pieces {
            Pieces::M2m100 { tokens, .. } => {
                let text: String = kept
                    .iter()
                    .map(|&id| tokens.get(id as usize).map_or("", String::as_str))
                    .collect();
                Ok(text.replace('▁', " ").trim_start().to_string())
            }
            Pieces::Nllb { tokenizer, .. } => tokenizer
                .decode(&kept, true)
                .map_err(|e| anyhow::anyhow!("cannot decode {ids:?}: {e}")),
        }
    }

    /// The ids of `text`'s pieces, nothing around them.
    fn piece_ids(&self, text: &str) -> anyhow::Result<Vec<u32>> {
        match &self.pieces {
            Pieces::M2m100 { model, ids, .. } => Ok(model
                .pieces(text)?
                .iter()
                .map(|piece| ids.get(piece).copied().unwrap_or(UNK))
                .collect()),
            Pieces::Nllb { tokenizer, .. } => Ok(tokenizer
                .encode(text, false)
                .map_err(|e| anyhow::anyhow!("cannot segment {text:?}: {e}"))?
                .get_ids()
                .to_vec()),
        }
    }
}

/// Whether `token` is shaped as an NLLB language code: three lowercase letters, `_`, a
/// capital and three lowercase letters (a script).
fn is_nllb_code(token: &str) -> bool {
    let bytes = token.as_bytes();
    bytes.len() == 8
        && bytes[..3].iter().all(u8::is_ascii_lowercase)
        && bytes[3] == b'_'
        && bytes[4].is_ascii_uppercase()
        && bytes[5..].iter().all(u8::is_ascii_lowercase)
}
