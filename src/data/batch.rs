//! Turning sentence pairs into padded id matrices, in a seeded order per epoch.

use rand::seq::SliceRandom;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

use super::corpus::SentencePair;
use super::vocab::{Vocab, BOS_ID, EOS_ID, PAD_ID};

/// A pair as ids: the source `<s> w1 .. wn </s>` and the target `<s> v1 .. vm </s>`.
#[derive(Debug, Clone, PartialEq)]
pub struct EncodedPair {
    pub src: Vec<u32>,
    pub tgt: Vec<u32>,
}

/// Wraps ids in `<s>` ... `</s>`.
pub fn with_boundaries(ids: &[u32]) -> Vec<u32> {
    let mut out = Vec::with_capacity(ids.len() + 2);
    out.push(BOS_ID);
    out.extend_from_slice(ids);
    out.push(EOS_ID);
    out
}

/// Encodes training pairs with their vocabularies (every word is known: they were built here).
pub fn encode_pairs(pairs: &[SentencePair], src: &Vocab, tgt: &Vocab) -> Vec<EncodedPair> {
    pairs
        .iter()
        .map(|pair| EncodedPair {
            src: with_boundaries(&src.encode(&pair.src).ids),
            tgt: with_boundaries(&tgt.encode(&pair.tgt).ids),
        })
        .collect()
}

/// A batch of padded, row-major id matrices, as the reference's `Batch` holds them:
/// the decoder reads `tgt_in` (target without its last token) and predicts `tgt_out`
/// (target without `<s>`).
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
    pub fn new(pairs: &[&EncodedPair]) -> Self {
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
            push_padded(&mut batch.src, &pair.src, src_len);
            push_padded(&mut batch.tgt_in, &pair.tgt[..last], tgt_len);
            push_padded(&mut batch.tgt_out, &pair.tgt[1..], tgt_len);
            batch.ntokens += last;
        }
        batch
    }
}

fn push_padded(out: &mut Vec<u32>, ids: &[u32], len: usize) {
    out.extend_from_slice(ids);
    out.extend(std::iter::repeat_n(PAD_ID, len - ids.len()));
}

/// The batches of one epoch: every pair once, in an order drawn from `seed` and `epoch`.
pub fn epoch_batches(
    pairs: &[EncodedPair],
    batch_size: usize,
    seed: u64,
    epoch: usize,
) -> Vec<PaddedBatch> {
    let mut order: Vec<&EncodedPair> = pairs.iter().collect();
    let mut rng =
        ChaCha8Rng::seed_from_u64(seed ^ (epoch as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15));
    order.shuffle(&mut rng);
    order
        .chunks(batch_size.max(1))
        .map(PaddedBatch::new)
        .collect()
}

/// Batches per epoch, for progress bars and schedules.
pub fn batches_per_epoch(pairs: usize, batch_size: usize) -> usize {
    pairs.div_ceil(batch_size.max(1))
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
    fn an_epoch_uses_every_pair_once_in_a_seeded_order() {
        let pairs: Vec<EncodedPair> = (4..14).map(|i| pair(&[i], &[i])).collect();
        let batches = epoch_batches(&pairs, 3, 9, 0);
        assert_eq!(batches.len(), batches_per_epoch(10, 3));
        let mut seen: Vec<u32> = batches
            .iter()
            .flat_map(|b| b.src.chunks(3).map(|s| s[1]))
            .collect();
        seen.sort();
        assert_eq!(seen, (4..14).collect::<Vec<_>>());
        assert_eq!(epoch_batches(&pairs, 3, 9, 0), batches);
        assert_ne!(epoch_batches(&pairs, 3, 9, 1), batches);
    }
}
