//! Turning sentence pairs into padded id matrices, in a seeded order per epoch.

use super::encoded::EncodedCorpus;
use super::epoch_plan::EpochPlan;
use super::pair::EncodedPair;
use crate::corpus::SentencePair;
use crate::tokenize::specials::{BOS_ID, EOS_ID, PAD_ID};
use crate::tokenize::Tokenizers;

/// Wraps ids in `<s>` ... `</s>`.
pub fn with_boundaries(ids: &[u32]) -> Vec<u32> {
    let mut out = Vec::with_capacity(ids.len() + 2);
    out.push(BOS_ID);
    out.extend_from_slice(ids);
    out.push(EOS_ID);
    out
}

/// Encodes pairs framed as the tokenizers' specials say (ours: `<s>`/`</s>` around both
/// sides; an empty source, a text corpus's, stays empty). Pairs longer than `max_positions` on either side are left out; also returns the
/// indices of the pairs kept.
pub fn encode_pairs(
    pairs: &[SentencePair],
    tokenizers: &Tokenizers,
    max_positions: usize,
) -> anyhow::Result<(Vec<EncodedPair>, Vec<usize>)> {
    let specials = tokenizers.specials();
    let mut encoded = Vec::with_capacity(pairs.len());
    let mut kept = Vec::with_capacity(pairs.len());
    for (index, pair) in pairs.iter().enumerate() {
        let src = match pair.src.as_str() {
            "" => Vec::new(),
            text => specials.source(&tokenizers.src.encode(text)?.ids),
        };
        let tgt = specials.target(&tokenizers.tgt.encode(&pair.tgt)?.ids);
        if src.len() <= max_positions && tgt.len() <= max_positions {
            encoded.push(EncodedPair { src, tgt });
            kept.push(index);
        }
    }
    Ok((encoded, kept))
}

/// A batch of padded, row-major id matrices, as the reference's `Batch` holds them:
/// the decoder reads `tgt_in` (target without its last token) and predicts `tgt_out`
/// (target without `<s>`). A language model's batch has no source (`src_len` 0).
#[derive(Debug, Clone, PartialEq)]
pub struct PaddedBatch {
    pub size: usize,
    pub src: Vec<u32>,
    pub src_len: usize,
    pub tgt_in: Vec<u32>,
    pub tgt_out: Vec<u32>,
    pub tgt_len: usize,
    /// Non-padding tokens in `tgt_out`: the loss is normalised by this.
    pub ntokens: usize,
}

impl PaddedBatch {
    /// Pairs padded with this tool's `<pad>`.
    pub fn new(pairs: &[&EncodedPair]) -> Self {
        Self::padded_with(pairs, PAD_ID)
    }

    /// Pairs padded with `pad` (the vocabulary's; a MarianMT model's is its last id).
    pub fn padded_with(pairs: &[&EncodedPair], pad: u32) -> Self {
        let src_len = pairs.iter().map(|p| p.src.len()).max().unwrap_or(0);
        let tgt_len = pairs.iter().map(|p| p.tgt.len() - 1).max().unwrap_or(0);
        let mut batch = Self {
            size: pairs.len(),
            src: Vec::with_capacity(pairs.len() * src_len),
            src_len,
            tgt_in: Vec::with_capacity(pairs.len() * tgt_len),
            tgt_out: Vec::with_capacity(pairs.len() * tgt_len),
            tgt_len,
            ntokens: 0,
        };
        for pair in pairs {
            let last = pair.tgt.len() - 1;
            push_padded(&mut batch.src, &pair.src, src_len, pad);
            push_padded(&mut batch.tgt_in, &pair.tgt[..last], tgt_len, pad);
            push_padded(&mut batch.tgt_out, &pair.tgt[1..], tgt_len, pad);
            batch.ntokens += last;
        }
        batch
    }
}

impl PaddedBatch {
    /// The pairs `indices` of `corpus`, padded with `pad`.
    pub fn from_corpus(corpus: &EncodedCorpus, indices: &[u32], pad: u32) -> Self {
        let lens: Vec<(usize, usize)> = indices.iter().map(|&i| corpus.lens(i as usize)).collect();
        let src_len = lens.iter().map(|l| l.0).max().unwrap_or(0);
        let tgt_len = lens.iter().map(|l| l.1 - 1).max().unwrap_or(0);
        let mut batch = Self {
            size: indices.len(),
            src: Vec::with_capacity(indices.len() * src_len),
            src_len,
            tgt_in: Vec::with_capacity(indices.len() * tgt_len),
            tgt_out: Vec::with_capacity(indices.len() * tgt_len),
            tgt_len,
            ntokens: 0,
        };
        let mut tgt = Vec::new();
        for (&i, &(s, t)) in indices.iter().zip(&lens) {
            corpus.extend(i as usize, false, &mut batch.src);
            batch.src.extend(std::iter::repeat_n(pad, src_len - s));
            tgt.clear();
            corpus.extend(i as usize, true, &mut tgt);
            let last = t - 1;
            push_padded(&mut batch.tgt_in, &tgt[..last], tgt_len, pad);
            push_padded(&mut batch.tgt_out, &tgt[1..], tgt_len, pad);
            batch.ntokens += last;
        }
        batch
    }
}

fn push_padded(out: &mut Vec<u32>, ids: &[u32], len: usize, pad: u32) {
    out.extend_from_slice(ids);
    out.extend(std::iter::repeat_n(pad, len - ids.len()));
}

/// The batches of one epoch (see [`EpochPlan`]), all padded at once: for small corpora and
/// the benchmark; training cuts them one step at a time.
pub fn epoch_batches(
    corpus: &EncodedCorpus,
    max_tokens: usize,
    (seed, epoch): (u64, usize),
    pad: u32,
) -> Vec<PaddedBatch> {
    let plan = EpochPlan::new(corpus, max_tokens, (seed, epoch));
    (0..plan.len())
        .map(|i| PaddedBatch::from_corpus(corpus, plan.batch_pairs(i), pad))
        .collect()
}

/// Batches in input order (no shuffling, no sorting), for evaluation; padded with `pad`.
pub fn ordered_batches(pairs: &[EncodedPair], max_tokens: usize, pad: u32) -> Vec<PaddedBatch> {
    let mut batches = Vec::new();
    let mut start = 0;
    while start < pairs.len() {
        let mut end = start + 1;
        let mut longest = pairs[start].src.len().max(pairs[start].tgt.len());
        while end < pairs.len() {
            let next = longest.max(pairs[end].src.len()).max(pairs[end].tgt.len());
            if (end - start + 1) * next > max_tokens {
                break;
            }
            longest = next;
            end += 1;
        }
        let slice: Vec<&EncodedPair> = pairs[start..end].iter().collect();
        batches.push(PaddedBatch::padded_with(&slice, pad));
        start = end;
    }
    batches
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pair(src: &[u32], tgt: &[u32]) -> EncodedPair {
        EncodedPair {
            src: with_boundaries(src),
            tgt: with_boundaries(tgt),
        }
    }

    #[test]
    fn a_batch_pads_and_shifts_the_target() {
        let a = pair(&[5, 6], &[7]);
        let b = pair(&[5], &[7, 8]);
        let batch = PaddedBatch::new(&[&a, &b]);
        assert_eq!(batch.src, vec![1, 5, 6, 2, 1, 5, 2, 0]);
        assert_eq!(batch.tgt_in, vec![1, 7, 0, 1, 7, 8]);
        assert_eq!(batch.tgt_out, vec![7, 2, 0, 7, 8, 2]);
        assert_eq!(batch.ntokens, 5);
    }

    #[test]
    fn an_epoch_uses_every_pair_once_within_the_token_budget_in_a_seeded_order() {
        // Sources of 1..=8 words: 3..=10 tokens with <s> and </s>.
        let pairs: Vec<EncodedPair> = (1..=40u32)
            .map(|i| pair(&vec![i + 3; (i % 8 + 1) as usize], &[i + 3]))
            .collect();
        let corpus = EncodedCorpus::from_pairs(&pairs, crate::training_data::IdWidth::U16);
        let batches = epoch_batches(&corpus, 30, (9, 0), PAD_ID);
        let mut seen: Vec<u32> = Vec::new();
        for b in &batches {
            assert!(b.size * b.src_len.max(b.tgt_len) <= 30);
            seen.extend(b.src.chunks(b.src_len).map(|s| s[1]));
        }
        seen.sort();
        assert_eq!(seen, (4..=43).collect::<Vec<_>>());
        assert_eq!(epoch_batches(&corpus, 30, (9, 0), PAD_ID), batches);
        assert_ne!(epoch_batches(&corpus, 30, (9, 1), PAD_ID), batches);
    }

    #[test]
    fn ordered_batches_keep_the_input_order() {
        let pairs: Vec<EncodedPair> = (4..14).map(|i| pair(&[i], &[i])).collect();
        let batches = ordered_batches(&pairs, 9, PAD_ID);
        let seen: Vec<u32> = batches
            .iter()
            .flat_map(|b| b.src.chunks(3).map(|s| s[1]))
            .collect();
        assert_eq!(seen, (4..14).collect::<Vec<_>>());
        assert!(batches.iter().all(|b| b.size == 3 || b.size == 1));
    }
}
