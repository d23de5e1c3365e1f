//! The tokenizer of a Hugging Face MarianMT (OPUS-MT) directory, as transformers'
//! `MarianTokenizer` tokenizes: `source.spm` segments a source, whose pieces map to ids
//! through `vocab.json` (a piece it lacks becomes `<unk>`), then `</s>`; a leading `>>xx<<`
//! (a multilingual model's target-language token) is kept whole. Targets are segmented by
//! `target.spm` through `target_vocab.json` when the vocabularies are separate. Decoding maps
//! ids back to pieces, drops the special ones and joins the rest, `▁` read as a space.

use std::collections::HashMap;
use std::path::Path;

use anyhow::{bail, Context};

use crate::tokenize::sentencepiece::SentencePiece;

/// The files of a Marian directory's tokenizer, as transformers' `MarianTokenizer` names them.
pub const SOURCE_SPM: &str = "source.spm";
pub const TARGET_SPM: &str = "target.spm";
pub const VOCAB_FILE: &str = "vocab.json";
pub const TARGET_VOCAB_FILE: &str = "target_vocab.json";

/// A Marian directory's SentencePiece models and vocabularies.
pub struct MarianTokenizer {
    source: SentencePiece,
    target: SentencePiece,
    source_ids: HashMap<String, u32>,
    target_ids: HashMap<String, u32>,
    /// Each vocabulary by id, for decoding and for showing tokens.
    source_pieces: HashMap<u32, String>,
    target_pieces: HashMap<u32, String>,
    /// A `target_vocab.json` gave the target its own vocabulary.
    separate: bool,
    /// The target-language tokens (`>>fra<<`) of a multilingual model's source vocabulary,
    /// sorted; empty for a model of one target language.
    language_tokens: Vec<String>,
    /// The files read, as read: a checkpoint of a model fine-tuned from this one carries them.
    files: Vec<(&'static str, Vec<u8>)>,
    pub eos: u32,
    pub unk: u32,
    pub pad: u32,
}

/// Source ids, and the pieces that became `<unk>`.
#[derive(Debug, Clone, PartialEq)]
pub struct MarianEncoding {
    pub ids: Vec<u32>,
    pub unknown: Vec<String>,
}

impl MarianTokenizer {
    /// Reads `dir`'s `source.spm`, `target.spm`, `vocab.json` and, when present,
    /// `target_vocab.json` (separate vocabularies); an error names the file.
    pub fn load(dir: &Path) -> anyhow::Result<Self> {
        let separate = dir.join(TARGET_VOCAB_FILE).is_file();
        let mut files = Vec::new();
        for name in [SOURCE_SPM, TARGET_SPM, VOCAB_FILE, TARGET_VOCAB_FILE] {
            if name == TARGET_VOCAB_FILE && !separate {
                continue;
            }
            let path = dir.join(name);
            let what = match name {
                SOURCE_SPM | TARGET_SPM => "SentencePiece model",
                _ => "the Marian vocabulary",
            };
            let bytes = crate::small_file::read(&path, crate::small_file::MOST_TOKENIZER_BYTES)
                .with_context(|| format!("cannot read {what}"))?;
            files.push((name, bytes));
        }
        Self::from_files(files, &|name| dir.join(name).display().to_string())
    }

    /// The tokenizer of `files` (name, contents): `source.spm`, `target.spm`, `vocab.json`
    /// and, for separate vocabularies, `target_vocab.json`. `shown` gives a file's name as
    /// errors show it.
    pub fn from_files(
        files: Vec<(&'static str, Vec<u8>)>,
        shown: &dyn Fn(&str) -> String,
    ) -> anyhow::Result<Self> {
        let file = |name: &str| -> anyhow::Result<&[u8]> {
            match files.iter().find(|(n, _)| *n == name) {
                Some((_, bytes)) => Ok(bytes),
                None => bail!("{} is missing", shown(name)),
            }
        };
        let spm = |name: &str| -> anyhow::Result<SentencePiece> {
            SentencePiece::from_bytes(file(name)?).with_context(|| {
                format!(
                    "{} is not a SentencePiece model (.spm) this tool can read",
                    shown(name)
                )
            })
        };
        let (source, target) = (spm(SOURCE_SPM)?, spm(TARGET_SPM)?);
        let source_ids = read_vocab(file(VOCAB_FILE)?, &shown(VOCAB_FILE))?;
        let separate = files.iter().any(|(n, _)| *n == TARGET_VOCAB_FILE);
        let target_ids = if separate {
            read_vocab(file(TARGET_VOCAB_FILE)?, &shown(TARGET_VOCAB_FILE))?
        } else {
            source_ids.clone()
        };
        let special = |name: &str| -> anyhow::Result<u32> {
            match source_ids.get(name) {
                Some(&id) => Ok(id),
                None => bail!(
                    "{} has no {name} entry, which a Marian vocabulary must have",
                    shown(VOCAB_FILE)
                ),
            }
        };
        let (eos, unk, pad) = (special("</s>")?, special("<unk>")?, special("<pad>")?);
        let by_id = |ids: &HashMap<String, u32>| -> HashMap<u32, String> {
            ids.iter().map(|(piece, &id)| (id, piece.clone())).collect()
        };
        let (source_pieces, target_pieces) = (by_id(&source_ids), by_id(&target_ids));
        let mut language_tokens: Vec<String> = source_ids
            .keys()
            .filter(|piece| language_code(piece).0 == Some(piece.as_str()))
            .cloned()
            .collect();
        language_tokens.sort_unstable();
        Ok(Self {
            language_tokens,
            source,
            target,
            source_ids,
            target_ids,
            source_pieces,
            target_pieces,
            separate,
            files,
            eos,
            unk,
            pad,
        })
    }

    /// A source sentence's ids, `</s>` last.
    pub fn encode_source(&self, text: &str) -> anyhow::Result<MarianEncoding> {
        let (code, rest) = language_code(text);
        let mut pieces: Vec<String> = code.map(str::to_string).into_iter().collect();
        pieces.extend(self.source.pieces(rest)?);
        Ok(self.ids(pieces, &self.source_ids))
    }

    /// A target sentence's ids (teacher forcing, evaluation), `</s>` last.
    pub fn encode_target(&self, text: &str) -> anyhow::Result<MarianEncoding> {
        // MarianTokenizer keeps a leading language code whole on this side too.
        let (code, rest) = language_code(text);
        let mut pieces: Vec<String> = code.map(str::to_string).into_iter().collect();
        pieces.extend(self.target.pieces(rest)?);
        Ok(self.ids(pieces, &self.target_ids))
    }

    fn ids(&self, pieces: Vec<String>, vocab: &HashMap<String, u32>) -> MarianEncoding {
        let mut ids = Vec::with_capacity(pieces.len() + 1);
        let mut unknown = Vec::new();
        for piece in pieces {
            match vocab.get(&piece) {
                Some(&id) => ids.push(id),
                None => {
                    ids.push(self.unk);
                    unknown.push(piece);
                }
            }
        }
        ids.push(self.eos);
        MarianEncoding { ids, unknown }
    }

    /// Generated ids as text: special ids (`</s>`, `<pad>`, `<unk>`) dropped, the pieces
    /// joined, `▁` read as a space, the ends trimmed.
    pub fn decode(&self, ids: &[u32]) -> String {
        let text: String = ids
            .iter()
            .filter(|id| ![self.eos, self.unk, self.pad].contains(id))
            .filter_map(|id| self.target_pieces.get(id))
            .map(String::as_str)
            .collect();
        text.replace('▁', " ").trim().to_string()
    }

    /// The piece of id `id` on one side, `<unk>` for an id the vocabulary lacks.
    pub fn piece(&self, id: u32, target: bool) -> String {
        let pieces = if target {
            &self.target_pieces
        } else {
            &self.source_pieces
        };
        pieces.get(&id).cloned().unwrap_or_else(|| "<unk>".into())
    }

    /// The tokenizer's files, (name, contents), as they were read.
    pub fn files(&self) -> &[(&'static str, Vec<u8>)] {
        &self.files
    }

    /// Whether the source and target share one vocabulary (no `target_vocab.json`).
    pub fn shared_vocabulary(&self) -> bool {
        !self.separate
    }

    /// The warning for a source `text` that a multilingual model cannot translate well: it
    /// does not start with a target-language token.
    pub fn missing_language_token(&self, text: &str) -> Option<String> {
        let tokens = &self.language_tokens;
        if tokens.is_empty() || language_code(text.trim_start()).0.is_some() {
            return None;
        }
        Some(format!(
            "this model translates into {} languages and the sentence does not say which: \
             start it with a target-language token, such as {} (every one is in vocab.json)",
            tokens.len(),
            tokens[..tokens.len().min(3)].join(", ")
        ))
    }

    /// Tokens of the target vocabulary.
    pub fn target_vocab_size(&self) -> usize {
        self.target_ids.len()
    }

    /// Tokens of the source vocabulary.
    pub fn source_vocab_size(&self) -> usize {
        self.source_ids.len()
    }
}

/// A leading `>>xx<<` and the text after it.
fn language_code(text: &str) -> (Option<&str>, &str) {
    if let Some(end) = text.strip_prefix(">>").and_then(|rest| rest.find("<<")) {
        let split = end + 4;
        return (Some(&text[..split]), &text[split..]);
    }
    (None, text)
}

fn read_vocab(bytes: &[u8], path: &str) -> anyhow::Result<HashMap<String, u32>> {
    let vocab: HashMap<String, u32> = serde_json::from_slice(bytes).with_context(|| {
        format!("{path} is not a Marian vocabulary (a JSON object of pieces and ids)")
    })?;
    // Ids 0..n, each once: the rows of the embedding table, in order.
    let mut seen = vec![None::<&str>; vocab.len()];
    let mut pieces: Vec<(&String, &u32)> = vocab.iter().collect();
    pieces.sort();
    for (piece, &id) in pieces {
        match seen.get_mut(id as usize) {
            None => bail!(
                "{path}: {piece:?} has id {id}, but the vocabulary's {} pieces take ids 0 to {}; \
                 the file is damaged",
                vocab.len(),
                vocab.len().saturating_sub(1)
            ),
            Some(Some(first)) => {
                bail!("{path}: {first:?} and {piece:?} both have id {id}; the file is damaged")
            }
            Some(slot) => *slot = Some(piece),
        }
    }
    Ok(vocab)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_target_language_token_is_kept_whole() {
        assert_eq!(
            language_code(">>fra<< Bonjour"),
            (Some(">>fra<<"), " Bonjour")
        );
        assert_eq!(language_code("Bonjour >>fra<<"), (None, "Bonjour >>fra<<"));
        assert_eq!(language_code(">>open"), (None, ">>open"));
    }
}
