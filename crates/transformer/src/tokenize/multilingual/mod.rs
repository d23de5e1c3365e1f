//! The tokenizers of the multilingual families, as transformers runs them: M2M100's
//! (`M2M100Tokenizer`: `sentencepiece.bpe.model` segments, `vocab.json`, the fairseq
//! dictionary, numbers the pieces, and the `__xx__` language tokens follow it) and NLLB-200's
//! (`NllbTokenizer`: `tokenizer.json`, with the `xxx_Yyyy` language codes among its added
//! tokens). A source is its language's token, its pieces and `</s>`, as both tokenizers frame
//! it (NLLB's `legacy_behaviour` puts the language after `</s>`); a translation starts from
//! `</s>` and the target language's token, which generation forces first.

use std::collections::HashMap;
use std::path::Path;

use anyhow::bail;

use super::sentencepiece::SentencePiece;
use super::specials::{LanguageIds, SpecialIds};
use super::vocab::Encoded;

mod load;

use load::read;

/// The files transformers saves a multilingual tokenizer in.
pub const TOKENIZER_CONFIG_FILE: &str = "tokenizer_config.json";
pub const M2M100_MODEL_FILE: &str = "sentencepiece.bpe.model";
pub const M2M100_VOCAB_FILE: &str = "vocab.json";
pub const NLLB_TOKENIZER_FILE: &str = "tokenizer.json";

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
        madeup_words: usize,
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
    /// The files it was read from, to be saved beside a fine-tuned checkpoint.
    files: Vec<(&'static str, Vec<u8>)>,
    /// The rows of the model's embedding table, when more than the tokens it numbers
    /// (NLLB-200's 256206 for its tokenizer's 256204): see [`Self::with_table_rows`].
    table_rows: Option<usize>,
}

impl MultilingualTokenizer {
    /// The tokenizer of the Hugging Face directory `dir`, by its `tokenizer_config.json`'s
    /// `tokenizer_class`; an error names the file that is missing or wrong.
    pub fn load(dir: &Path) -> anyhow::Result<Self> {
        let config_path = dir.join(TOKENIZER_CONFIG_FILE);
        let config_bytes = read(&config_path)?;
        let config: serde_json::Value = serde_json::from_slice(&config_bytes)
            .map_err(|e| anyhow::anyhow!("{} is not valid JSON: {e}", config_path.display()))?;
        let mut tokenizer = match config["tokenizer_class"].as_str() {
            Some("M2M100Tokenizer") => Self::m2m100(dir, &config)?,
            Some("NllbTokenizer" | "NllbTokenizerFast") => Self::nllb(dir, &config)?,
            Some(other) => bail!(
                "{} names the tokenizer {other:?}; a multilingual model's is M2M100Tokenizer or \
                 NllbTokenizer",
                config_path.display()
            ),
            None => bail!(
                "{} has no tokenizer_class (as text); a multilingual model's names \
                 M2M100Tokenizer or NllbTokenizer",
                config_path.display()
            ),
        };
        tokenizer
            .files
            .insert(0, (TOKENIZER_CONFIG_FILE, config_bytes));
        Ok(tokenizer)
    }

    /// The tokenizer of a model whose embedding table has `rows` rows, which may be more
    /// than the tokens it numbers (ids no text gives) or fewer, down to the ids a text and a
    /// language code can produce (M2M100's made-up words are padding no input gives, and a
    /// model made without their rows still runs, as in transformers); fewer than that is an
    /// error, as the tokenizer's ids would be past the table's end.
    pub fn with_table_rows(mut self, rows: usize) -> anyhow::Result<Self> {
        let produced = self.produced();
        if produced > rows {
            bail!(
                "the tokenizer gives ids up to {} (its pieces and language codes) but the \
                 model's table has {rows} rows; the tokenizer files and the model do not \
                 belong together",
                produced - 1
            );
        }
        self.table_rows = Some(rows);
        Ok(self)
    }

    /// How many ids, from 0, a text and a language code can produce: the pieces and the
    /// language tokens (NLLB's added tokens are matched in text, so all of them).
    fn produced(&self) -> usize {
        match &self.pieces {
            Pieces::M2m100 { tokens, .. } => tokens.len() + self.languages.len(),
            Pieces::Nllb { tokenizer, .. } => tokenizer.get_vocab_size(true),
        }
    }

    /// Whether `dir` holds a multilingual tokenizer: its `tokenizer_config.json` names one.
    pub fn is_in(dir: &Path) -> bool {
        crate::small_file::read(
            &dir.join(TOKENIZER_CONFIG_FILE),
            crate::small_file::MOST_CONFIG_BYTES,
        )
        .ok()
        .and_then(|bytes| serde_json::from_slice::<serde_json::Value>(&bytes).ok())
        .and_then(|config| config["tokenizer_class"].as_str().map(str::to_string))
        .is_some_and(|class| class.starts_with("M2M100") || class.starts_with("Nllb"))
    }

    /// The files it was read from, (name, contents), to be saved beside a checkpoint.
    pub fn files(&self) -> &[(&'static str, Vec<u8>)] {
        &self.files
    }

    /// Whether a source's language token follows its `</s>` (NLLB's `legacy_behaviour`).
    pub fn legacy_framing(&self) -> bool {
        matches!(self.pieces, Pieces::Nllb { legacy: true, .. })
    }

    /// The ids of the language pair `source` -> `target`; an unknown code is an error that
    /// lists codes like it.
    pub fn pair(&self, source: &str, target: &str) -> anyhow::Result<LanguageIds> {
        let id = |code: &str| {
            self.language_id(code).ok_or_else(|| {
                anyhow::anyhow!(
                    "{code:?} is not one of this model's {} language codes; it has {}",
                    self.languages.len(),
                    self.codes_like(code)
                )
            })
        };
        Ok(LanguageIds {
            source: id(source)?,
            target: id(target)?,
        })
    }

    /// A few codes for an error about `code`: those that start as it does (`de` finds
    /// `deu_Latn`), else the first few, each list ending with how many are left out.
    pub fn codes_like(&self, code: &str) -> String {
        const SHOWN: usize = 8;
        let prefix: String = code.chars().take(2).collect::<String>().to_lowercase();
        let mut like: Vec<&str> = self
            .languages()
            .filter(|c| !prefix.is_empty() && c.to_lowercase().starts_with(&prefix))
            .collect();
        if like.is_empty() {
            like = self.languages().collect();
        }
        let more = like.len().saturating_sub(SHOWN);
        let shown = like[..like.len().min(SHOWN)].join(", ");
        match more {
            0 => shown,
            n => format!("{shown} and {n} more"),
        }
    }

    /// The size of the vocabulary the model's tables number: the rows named with
    /// [`Self::with_table_rows`], else the tokens it numbers.
    pub fn vocab_size(&self) -> usize {
        self.table_rows.unwrap_or_else(|| self.numbered())
    }

    /// The tokens it numbers: the pieces, the language tokens and (M2M100) fairseq's made-up
    /// words.
    fn numbered(&self) -> usize {
        match &self.pieces {
            Pieces::M2m100 {
                tokens,
                madeup_words,
                ..
            } => tokens.len() + self.languages.len() + madeup_words,
            Pieces::Nllb { tokenizer, .. } => tokenizer.get_vocab_size(true),
        }
    }

    /// The token of `id`, as the tokenizer names it.
    pub fn token(&self, id: u32) -> String {
        if let Some((code, _)) = self.languages.iter().find(|l| l.1 == id) {
            return match &self.pieces {
                Pieces::M2m100 { .. } => format!("__{code}__"),
                Pieces::Nllb { .. } => code.clone(),
            };
        }
        match &self.pieces {
            Pieces::M2m100 { tokens, .. } => {
                tokens.get(id as usize).cloned().unwrap_or_else(|| {
                    let first_madeup = (tokens.len() + self.languages.len()) as u32;
                    format!("madeupword{:04}", id.saturating_sub(first_madeup))
                })
            }
            Pieces::Nllb { tokenizer, .. } => tokenizer
                .id_to_token(id)
                .unwrap_or_else(|| "<unk>".to_string()),
        }
    }

    /// `text`'s pieces as ids, nothing around them (the language and `</s>` are the
    /// framing: [`SpecialIds::multilingual`]), and the pieces that became `<unk>`.
    pub fn encode(&self, text: &str) -> anyhow::Result<Encoded> {
        match &self.pieces {
            Pieces::M2m100 { model, ids, .. } => {
                let mut unknown = Vec::new();
                let ids = model
                    .pieces(text)?
                    .into_iter()
                    .map(|piece| {
                        ids.get(&piece).copied().unwrap_or_else(|| {
                            unknown.push(piece.trim_start_matches('▁').to_string());
                            UNK
                        })
                    })
                    .collect();
                Ok(Encoded { ids, unknown })
            }
            Pieces::Nllb { tokenizer, .. } => {
                let encoding = tokenizer
                    .encode(text, false)
                    .map_err(|e| anyhow::anyhow!("cannot segment {text:?}: {e}"))?;
                let unknown = (encoding.get_ids().iter())
                    .zip(encoding.get_offsets())
                    .filter(|(&id, _)| id == UNK)
                    .map(|(_, &(start, end))| text.get(start..end).unwrap_or("?").to_string())
                    .collect();
                Ok(Encoded {
                    ids: encoding.get_ids().to_vec(),
                    unknown,
                })
            }
        }
    }

    /// The language codes, in the tokenizer's order.
    pub fn languages(&self) -> impl Iterator<Item = &str> {
        self.languages.iter().map(|(code, _)| code.as_str())
    }

    /// The ids no text holds: every language's token, `<s>`, `<pad>`, `<mask>` and
    /// M2M100's made-up words (rows the fairseq dictionary was padded with).
    pub fn not_text_ids(&self) -> Vec<u32> {
        let mut ids: Vec<u32> = self.languages.iter().map(|&(_, id)| id).collect();
        let named = ["<s>", "<pad>", "<mask>"];
        match &self.pieces {
            Pieces::M2m100 {
                ids: table, tokens, ..
            } => {
                ids.extend(named.iter().filter_map(|token| table.get(*token)));
                let first_madeup = (tokens.len() + self.languages.len()) as u32;
                ids.extend(first_madeup..self.vocab_size() as u32);
            }
            Pieces::Nllb { tokenizer, .. } => {
                ids.extend(
                    named
                        .iter()
                        .filter_map(|token| tokenizer.token_to_id(token)),
                );
            }
        }
        ids
    }

    /// The token id of language `code` (in any case: `DEU_LATN` is `deu_Latn`).
    pub fn language_id(&self, code: &str) -> Option<u32> {
        self.languages
            .iter()
            .find(|(c, _)| c.eq_ignore_ascii_case(code))
            .map(|&(_, id)| id)
    }

    /// The ids of `text` in language `lang` as the encoder reads them: framed by the language's
    /// token and `</s>`, as the family's tokenizer frames a source.
    pub fn encode_source(&self, text: &str, lang: &str) -> anyhow::Result<Vec<u32>> {
        let pair = self.pair(lang, lang)?;
        let specials = SpecialIds::multilingual(Some(pair), self.legacy_framing());
        Ok(specials.source(&self.encode(text)?.ids))
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
}
