//! A SentencePiece BPE model (`sentencepiece.bpe.model`, M2M100's and NLLB-200's) segmenting
//! as SentencePiece does, through the tokenizers crate's `BPE`: the merges are every split of a
//! piece into two pieces, ranked by the merged piece's id (a BPE model lists its pieces best
//! first), as Hugging Face's converter derives them; the normalizer and whitespace handling
//! are the unigram models' (the caller's).

use std::collections::HashMap;

use tokenizers::models::bpe::{Vocab, BPE};
use tokenizers::Tokenizer;

/// A tokenizer over the BPE model of `pieces` (each with whether it is a normal piece, which
/// merges may build), in id order, `unk` standing for what they cannot spell; the caller adds
/// the normalizer and pre-tokenizer.
pub(super) fn segmenter(pieces: &[(&str, bool)], unk: Option<&str>) -> anyhow::Result<Tokenizer> {
    let vocab: HashMap<&str, u32> = pieces
        .iter()
        .enumerate()
        .map(|(id, &(piece, _))| (piece, id as u32))
        .collect();
    let mut builder = BPE::builder()
        .vocab_and_merges(
            vocab
                .iter()
                .map(|(k, &v)| (k.to_string(), v))
                .collect::<Vocab>(),
            merges(pieces, &vocab),
        )
        .fuse_unk(true);
    if let Some(unk) = unk {
        builder = builder.unk_token(unk.to_string());
    }
    let model = builder
        .build()
        .map_err(|e| anyhow::anyhow!("its pieces do not make a BPE model: {e}"))?;
    Ok(Tokenizer::new(model))
}

/// The merges that build each normal piece from two others, best first.
fn merges(pieces: &[(&str, bool)], vocab: &HashMap<&str, u32>) -> Vec<(String, String)> {
    let mut merges = Vec::new();
    for (id, &(piece, normal)) in pieces.iter().enumerate() {
        if !normal {
            continue;
        }
        for (cut, _) in piece.char_indices().skip(1) {
            let (left, right) = piece.split_at(cut);
            if let (Some(&l), Some(&r)) = (vocab.get(left), vocab.get(right)) {
                merges.push((id, l, r, left.to_string(), right.to_string()));
            }
        }
    }
    merges.sort_unstable_by_key(|&(id, l, r, _, _)| (id, l, r));
    merges
        .into_iter()
        .map(|(_, _, _, left, right)| (left, right))
        .collect()
}
