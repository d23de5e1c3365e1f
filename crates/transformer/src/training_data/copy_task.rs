//! The Annotated Transformer's copy task (its `data_gen`): random sequences that the model
//! learns to copy, the smallest task that needs attention to work. The benchmark trains on
//! it, and the tests hold bf16 training to f32's loss curve on it.

use rand::Rng;

use super::{EncodedPair, PaddedBatch};
use crate::tokenize::specials::BOS_ID;

/// Symbols after the four special ids: a vocabulary of 11, as the reference's.
pub const COPY_SYMBOLS: std::ops::Range<u32> = 4..11;

/// A batch of `count` sequences, each `<s>` and 9 random symbols (the reference's first
/// column is 1, here `<s>`), the target the same as the source.
pub fn copy_task_batch(rng: &mut impl Rng, count: usize) -> PaddedBatch {
    let pairs: Vec<EncodedPair> = (0..count)
        .map(|_| {
            let mut ids = vec![BOS_ID];
            ids.extend((0..9).map(|_| rng.random_range(COPY_SYMBOLS)));
            EncodedPair {
                src: ids.clone(),
                tgt: ids,
            }
        })
        .collect();
    PaddedBatch::new(&pairs.iter().collect::<Vec<_>>())
}
