//! The tokenizer of a Hugging Face MarianMT (OPUS-MT) directory, as transformers'
//! `MarianTokenizer` tokenizes: `source.spm` segments a source, whose pieces map to ids
//! through `vocab.json` (a piece it lacks becomes `<unk>`), then `</s>`; a leading `>>xx<<`
//! (a multilingual model's target-language token) is kept whole. Targets are segmented by
//! `target.spm` through `target_vocab.json` when the vocabularies are separate. Decoding maps
//! ids back to pieces, drops the special ones and joins the rest, `▁` read as a space.

use std::collections::HashMap;
use std::path::Path;

use anyhow::{bail, Context};

use super::sentencepiece::SentencePiece;

/// A Marian directory's SentencePiece models and vocabularies.
pub struct MarianTokenizer {
    source: SentencePiece,
    target: SentencePiece,
    source_ids: HashMap<String, u32>,
    target_ids: HashMap<String, u32>,
    /// The target vocabulary by id, for decoding.
    target_pieces: HashMap<u32, String>,
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
        let source = SentencePiece::load(&dir.join("source.spm"))?;
        let target = SentencePiece::load(&dir.join("target.spm"))?;
        let source_ids = read_vocab(&dir.join("vocab.json"))?;
        let separate = dir.join("target_vocab.json");
        let target_ids = if separate.is_file() {
            read_vocab(&separate)?
        } else {
            source_ids.clone()
        };
        let special = |name: &str| -> anyhow::Result<u32> {
            match source_ids.get(name) {
                Some(&id) => Ok(id),
                None => bail!(
                    "{} has no {name} entry, which a Marian vocabulary must have",
                    dir.join("vocab.json").display()
                ),
            }
        };
        let (eos, unk, pad) = (special("</s>")?, special("<unk>")?, special("<pad>")?);
        let target_pieces = target_ids
            .iter()
            .map(|(piece, &id)| (id, piece.clone()))
            .collect();
        Ok(Self {
            source,
            target,
            source_ids,
            target_ids,
            target_pieces,
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
        let pieces = self.target.pieces(text)?;
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

fn read_vocab(path: &Path) -> anyhow::Result<HashMap<String, u32>> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read the Marian vocabulary {}", path.display()))?;
    serde_json::from_str(&text).with_context(|| {
        format!(
            "{} is not a Marian vocabulary (a JSON object of pieces and ids)",
            path.display()
        )
    })
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
