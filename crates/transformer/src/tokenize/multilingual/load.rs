//! Reading each family's tokenizer from a Hugging Face directory: M2M100's SentencePiece
//! model and `vocab.json`, NLLB-200's `tokenizer.json`; an error names the file.

use std::collections::HashMap;
use std::path::Path;

use anyhow::{bail, Context};

use super::super::language_codes::{is_nllb_code, M2M100_LANGUAGES, WMT21_LANGUAGES};
use super::super::sentencepiece::SentencePiece;
use super::{
    MultilingualTokenizer, Pieces, M2M100_MODEL_FILE, M2M100_VOCAB_FILE, NLLB_TOKENIZER_FILE,
};

impl MultilingualTokenizer {
    pub(super) fn m2m100(dir: &Path, config: &serde_json::Value) -> anyhow::Result<Self> {
        let model_path = dir.join(M2M100_MODEL_FILE);
        let model_bytes = read(&model_path)?;
        let model = SentencePiece::from_bytes(&model_bytes)
            .with_context(|| format!("{} is not a SentencePiece model", model_path.display()))?;
        let vocab_path = dir.join(M2M100_VOCAB_FILE);
        let vocab_bytes = read(&vocab_path)?;
        let ids: HashMap<String, u32> =
            serde_json::from_slice(&vocab_bytes).with_context(|| {
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
        // fairseq's dictionary ends with words no text has, which the model's table counts.
        let madeup_words = config["num_madeup_words"].as_u64().unwrap_or(8) as usize;
        Ok(Self {
            pieces: Pieces::M2m100 {
                model: Box::new(model),
                ids,
                tokens,
                madeup_words,
            },
            languages,
            files: vec![
                (M2M100_MODEL_FILE, model_bytes),
                (M2M100_VOCAB_FILE, vocab_bytes),
            ],
            table_rows: None,
        })
    }

    pub(super) fn nllb(dir: &Path, config: &serde_json::Value) -> anyhow::Result<Self> {
        let path = dir.join(NLLB_TOKENIZER_FILE);
        let bytes = read(&path)?;
        let mut tokenizer = tokenizers::Tokenizer::from_bytes(&bytes)
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
        let mut files = vec![(NLLB_TOKENIZER_FILE, bytes)];
        // transformers' slow NllbTokenizer reads the SentencePiece model; kept to be saved.
        if let Ok(model) = std::fs::read(dir.join(M2M100_MODEL_FILE)) {
            files.push((M2M100_MODEL_FILE, model));
        }
        Ok(Self {
            pieces: Pieces::Nllb {
                tokenizer: Box::new(tokenizer),
                legacy: config["legacy_behaviour"].as_bool().unwrap_or(false),
            },
            languages,
            files,
            table_rows: None,
        })
    }
}

/// The bytes of `path`, an error naming it.
pub(super) fn read(path: &Path) -> anyhow::Result<Vec<u8>> {
    crate::small_file::read(path, crate::small_file::MOST_TOKENIZER_BYTES)
}
