//! An epoch's batches as positions in the encoded corpus: every pair once, pairs of similar
//! length together, each batch within the token budget, in an order drawn from the seed and
//! the epoch; 4 bytes a pair, so that resuming can draw it again.

use super::encoded::EncodedCorpus;

/// The batches of one epoch as positions in the corpus, cut from it one at a time: every
/// pair exactly once, pairs of similar length together (less padding), each batch within
/// `max_tokens` (sentences x the longer padded side; a pair longer than that gets a batch of
/// its own), in an order drawn from `seed` and `epoch`. Its memory is 4 bytes a pair whatever
/// the corpus's size.
pub struct EpochPlan {
    /// Pair indices, sorted by length (ties in random order).
    order: Vec<u32>,
    /// Each batch's range in `order`, in the epoch's (random) order.
    batches: Vec<(u32, u32)>,
}

impl EpochPlan {
    pub fn new(corpus: &EncodedCorpus, max_tokens: usize, (seed, epoch): (u64, usize)) -> Self {
        use rand::seq::SliceRandom;
        use rand::SeedableRng;
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(
            seed ^ (epoch as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15),
        );
        let longer = |i: u32| {
            let (s, t) = corpus.lens(i as usize);
            s.max(t)
        };
        let mut shuffled: Vec<u32> = (0..corpus.len() as u32).collect();
        shuffled.shuffle(&mut rng);
        let order = stable_sort_by_length(&shuffled, longer);
        drop(shuffled);
        let mut batches = Vec::new();
        let (mut start, mut src_len, mut tgt_len) = (0usize, 0, 0);
        for (at, &pair) in order.iter().enumerate() {
            let (ps, pt) = corpus.lens(pair as usize);
            let (s, t) = (src_len.max(ps), tgt_len.max(pt));
            if at > start && (at - start + 1) * s.max(t) > max_tokens {
                batches.push((start as u32, at as u32));
                start = at;
                (src_len, tgt_len) = (ps, pt);
            } else {
                (src_len, tgt_len) = (s, t);
            }
        }
        if start < order.len() {
            batches.push((start as u32, order.len() as u32));
        }
        batches.shuffle(&mut rng);
        Self { order, batches }
    }

    /// Batches in the epoch.
    pub fn len(&self) -> usize {
        self.batches.len()
    }

    pub fn is_empty(&self) -> bool {
        self.batches.is_empty()
    }

    /// The pair indices of batch `i`.
    pub fn batch_pairs(&self, i: usize) -> &[u32] {
        let (start, end) = self.batches[i];
        &self.order[start as usize..end as usize]
    }
}

/// A stable sort of `items` by `key` (a length: a small number), as a counting sort: linear
/// in the corpus, where a comparison sort of millions of random lookups is not.
pub(super) fn stable_sort_by_length(items: &[u32], key: impl Fn(u32) -> usize) -> Vec<u32> {
    let keys: Vec<u32> = items.iter().map(|&i| key(i) as u32).collect();
    let largest = keys.iter().copied().max().unwrap_or(0) as usize;
    let mut starts = vec![0usize; largest + 2];
    for &k in &keys {
        starts[k as usize + 1] += 1;
    }
    for i in 1..starts.len() {
        starts[i] += starts[i - 1];
    }
    let mut sorted = vec![0u32; items.len()];
    for (&item, &k) in items.iter().zip(&keys) {
        sorted[starts[k as usize]] = item;
        starts[k as usize] += 1;
    }
    sorted
}
