//! SentencePiece models (`.spm`, the files OPUS-MT's MarianMT checkpoints carry) read in pure
//! Rust and run as SentencePiece runs them: the model file is a protobuf (`ModelProto`) of
//! scored pieces and a normalizer spec, and encoding is the normalizer (the precompiled
//! character map, e.g. nmt_nfkc), whitespace handling (extra whitespace removed, a dummy `▁`
//! prefix, spaces escaped as `▁`) and a Viterbi segmentation over the unigram scores. The
//! segmentation and the character map are the tokenizers crate's (`Unigram`, `Precompiled`),
//! put together as Hugging Face's own converter from `.spm` files puts them; a BPE model's
//! segmentation is `sentencepiece_bpe`'s.

use std::path::Path;

use anyhow::{bail, Context};
use tokenizers::models::unigram::Unigram;
use tokenizers::normalizers::replace::ReplacePattern;
use tokenizers::normalizers::{Precompiled, Replace, Sequence};
use tokenizers::pre_tokenizers::metaspace::{Metaspace, PrependScheme};
use tokenizers::{NormalizerWrapper, Tokenizer};

/// What a piece is, as `SentencePiece.Type` says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PieceKind {
    Normal,
    Unknown,
    Control,
    UserDefined,
    Unused,
    Byte,
}

/// A `.spm` model: its pieces and how it normalizes, ready to segment text.
pub struct SentencePiece {
    pieces: Vec<(String, f32, PieceKind)>,
    tokenizer: Tokenizer,
}

/// The fields of `NormalizerSpec` that change encoding.
pub(super) struct NormalizerSpec {
    pub charsmap: Vec<u8>,
    pub add_dummy_prefix: bool,
    pub remove_extra_whitespaces: bool,
}

/// SentencePiece's defaults for a spec (or a model) that leaves them out.
impl Default for NormalizerSpec {
    fn default() -> Self {
        Self {
            charsmap: Vec::new(),
            add_dummy_prefix: true,
            remove_extra_whitespaces: true,
        }
    }
}

impl SentencePiece {
    /// Reads `path`; an error names the file and what is wrong with it.
    pub fn load(path: &Path) -> anyhow::Result<Self> {
        let bytes = crate::small_file::read(path, crate::small_file::MOST_TOKENIZER_BYTES)
            .context("cannot read a SentencePiece model")?;
        Self::from_bytes(&bytes).with_context(|| {
            format!(
                "{} is not a SentencePiece model (.spm) this tool can read",
                path.display()
            )
        })
    }

    /// Reads a model from its file's bytes: a unigram model (OPUS-MT's) or a BPE one
    /// (M2M100's and NLLB's `sentencepiece.bpe.model`).
    pub fn from_bytes(bytes: &[u8]) -> anyhow::Result<Self> {
        let mut pieces = Vec::new();
        let mut normalizer = NormalizerSpec::default();
        let mut bpe = false;
        for field in Fields::new(bytes) {
            match field? {
                (1, Value::Bytes(piece)) => pieces.push(read_piece(piece)?),
                (2, Value::Bytes(trainer)) => bpe = read_model_type(trainer)? == MODEL_TYPE_BPE,
                (3, Value::Bytes(spec)) => normalizer = read_normalizer(spec)?,
                _ => {}
            }
        }
        if pieces.is_empty() {
            bail!("it holds no pieces");
        }
        let tokenizer = if bpe {
            let named: Vec<(&str, bool)> = pieces
                .iter()
                .map(|(piece, _, kind)| (piece.as_str(), *kind == PieceKind::Normal))
                .collect();
            let unk = pieces.iter().find(|p| p.2 == PieceKind::Unknown);
            let mut tokenizer =
                super::sentencepiece_bpe::segmenter(&named, unk.map(|p| p.0.as_str()))?;
            prepare_text_as(&normalizer, &mut tokenizer)?;
            tokenizer
        } else {
            segmenter(&pieces, &normalizer)?
        };
        Ok(Self { pieces, tokenizer })
    }

    /// The pieces of `text`, as `SentencePieceProcessor.encode(text, out_type=str)` gives them.
    pub fn pieces(&self, text: &str) -> anyhow::Result<Vec<String>> {
        let encoding = self
            .tokenizer
            .encode(text, false)
            .map_err(|e| anyhow::anyhow!("cannot segment {text:?}: {e}"))?;
        Ok(encoding.get_tokens().to_vec())
    }

    /// Every piece with its score and kind, in id order.
    pub fn vocabulary(&self) -> &[(String, f32, PieceKind)] {
        &self.pieces
    }
}

/// The tokenizers pipeline SentencePiece's encoding amounts to.
fn segmenter(
    pieces: &[(String, f32, PieceKind)],
    spec: &NormalizerSpec,
) -> anyhow::Result<Tokenizer> {
    let unk = pieces
        .iter()
        .position(|(_, _, kind)| *kind == PieceKind::Unknown);
    let vocab: Vec<(String, f64)> = pieces
        .iter()
        .map(|(piece, score, _)| (piece.clone(), f64::from(*score)))
        .collect();
    let model = Unigram::from(vocab, unk, false)
        .map_err(|e| anyhow::anyhow!("its pieces do not make a unigram model: {e}"))?;
    let mut tokenizer = Tokenizer::new(model);
    prepare_text_as(spec, &mut tokenizer)?;
    Ok(tokenizer)
}

/// Gives `tokenizer` the normaliser and pre-tokenizer that read text as a model of `spec`
/// reads it, so that a model learned through it segments as SentencePiece will.
pub(super) fn prepare_text_as(
    spec: &NormalizerSpec,
    tokenizer: &mut Tokenizer,
) -> anyhow::Result<()> {
    let mut normalizers: Vec<NormalizerWrapper> = Vec::new();
    if !spec.charsmap.is_empty() {
        let precompiled = Precompiled::from(&spec.charsmap)
            .map_err(|e| anyhow::anyhow!("its precompiled character map is damaged: {e}"))?;
        normalizers.push(precompiled.into());
    }
    if spec.remove_extra_whitespaces {
        // SentencePiece drops leading and trailing spaces and keeps one of a run: spaces
        // only (a tab is a character like any other unless the character map folds it).
        for (pattern, with) in [("^ +", ""), (" +$", ""), (" {2,}", " ")] {
            let replace = Replace::new(ReplacePattern::Regex(pattern.into()), with)
                .map_err(|e| anyhow::anyhow!("{e}"))?;
            normalizers.push(replace.into());
        }
    }
    tokenizer
        .with_normalizer(Some(Sequence::new(normalizers)))
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    let prepend = if spec.add_dummy_prefix {
        PrependScheme::Always
    } else {
        PrependScheme::Never
    };
    tokenizer.with_pre_tokenizer(Some(Metaspace::new('▁', prepend, true)));
    Ok(())
}

fn read_piece(bytes: &[u8]) -> anyhow::Result<(String, f32, PieceKind)> {
    let (mut piece, mut score, mut kind) = (None, 0.0, PieceKind::Normal);
    for field in Fields::new(bytes) {
        match field? {
            (1, Value::Bytes(text)) => {
                piece = Some(String::from_utf8(text.to_vec()).context("a piece is not UTF-8")?)
            }
            (2, Value::Fixed32(bits)) => score = f32::from_bits(bits),
            (3, Value::Varint(value)) => {
                kind = match value {
                    1 => PieceKind::Normal,
                    2 => PieceKind::Unknown,
                    3 => PieceKind::Control,
                    4 => PieceKind::UserDefined,
                    5 => PieceKind::Unused,
                    6 => PieceKind::Byte,
                    other => bail!("a piece has the unknown type {other}"),
                }
            }
            _ => {}
        }
    }
    let Some(piece) = piece else {
        bail!("a piece has no text")
    };
    Ok((piece, score, kind))
}

/// `TrainerSpec.model_type`'s value for a BPE model (unigram is 1, its default).
const MODEL_TYPE_BPE: u64 = 2;

/// `TrainerSpec.model_type`: how the pieces segment text.
fn read_model_type(bytes: &[u8]) -> anyhow::Result<u64> {
    let mut model_type = 1;
    for field in Fields::new(bytes) {
        if let (3, Value::Varint(value)) = field? {
            model_type = value;
        }
    }
    Ok(model_type)
}

fn read_normalizer(bytes: &[u8]) -> anyhow::Result<NormalizerSpec> {
    let mut spec = NormalizerSpec::default();
    for field in Fields::new(bytes) {
        match field? {
            (2, Value::Bytes(charsmap)) => spec.charsmap = charsmap.to_vec(),
            (3, Value::Varint(flag)) => spec.add_dummy_prefix = flag != 0,
            (4, Value::Varint(flag)) => spec.remove_extra_whitespaces = flag != 0,
            _ => {}
        }
    }
    Ok(spec)
}

/// A protobuf field's value, by wire type.
enum Value<'a> {
    Varint(u64),
    Fixed64,
    Bytes(&'a [u8]),
    Fixed32(u32),
}

/// The fields of one protobuf message: (field number, value).
struct Fields<'a> {
    bytes: &'a [u8],
}

impl<'a> Fields<'a> {
    fn new(bytes: &'a [u8]) -> Self {
        Self { bytes }
    }

    fn varint(&mut self) -> anyhow::Result<u64> {
        let mut value = 0u64;
        for shift in (0..64).step_by(7) {
            let Some((&byte, rest)) = self.bytes.split_first() else {
                bail!("it ends inside a number")
            };
            self.bytes = rest;
            value |= u64::from(byte & 0x7f) << shift;
            if byte & 0x80 == 0 {
                return Ok(value);
            }
        }
        bail!("a number runs over 64 bits")
    }

    fn take(&mut self, n: usize) -> anyhow::Result<&'a [u8]> {
        if n > self.bytes.len() {
            bail!("a field runs past the end of the file")
        }
        let (taken, rest) = self.bytes.split_at(n);
        self.bytes = rest;
        Ok(taken)
    }

    fn field(&mut self) -> anyhow::Result<(u64, Value<'a>)> {
        let key = self.varint()?;
        let value = match key & 7 {
            0 => Value::Varint(self.varint()?),
            1 => {
                self.take(8)?;
                Value::Fixed64
            }
            2 => {
                let len = usize::try_from(self.varint()?).context("a field is too long")?;
                Value::Bytes(self.take(len)?)
            }
            5 => {
                let bytes = self.take(4)?;
                Value::Fixed32(u32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]))
            }
            wire => bail!("a field has the wire type {wire}, which .spm files do not use"),
        };
        Ok((key >> 3, value))
    }
}

impl<'a> Iterator for Fields<'a> {
    type Item = anyhow::Result<(u64, Value<'a>)>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.bytes.is_empty() {
            return None;
        }
        let field = self.field();
        if field.is_err() {
            // One error, then the end: the rest cannot be framed.
            self.bytes = &[];
        }
        Some(field)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_that_is_not_a_model_is_refused_naming_why() {
        let error = SentencePiece::from_bytes(&[0x0a, 0x05, 0x01])
            .err()
            .unwrap();
        assert!(error.to_string().contains("runs past the end"), "{error}");
        let error = SentencePiece::from_bytes(&[]).err().unwrap();
        assert!(error.to_string().contains("no pieces"), "{error}");
    }
}
