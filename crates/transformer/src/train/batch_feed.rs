//! An epoch's batches built ahead, on a thread of their own, while the device computes the
//! step before: the epoch's plan (a shuffle and a sort of the whole corpus) and each step's
//! padded batches are cut from the corpus there and handed over through a short queue, so
//! that a step waits for its batches only when building them is slower than the step.

use std::sync::mpsc::{sync_channel, Receiver};
use std::sync::Arc;
use std::thread::JoinHandle;

use crate::training_data::{EncodedCorpus, EpochPlan, PaddedBatch};

/// Groups of batches (one optimiser step's each) built ahead of the loop.
pub struct BatchFeed {
    groups: Receiver<Vec<PaddedBatch>>,
    /// Joined when the feed is dropped; it ends once the loop stops taking its groups.
    builder: Option<JoinHandle<()>>,
}

/// What an epoch is cut into and where a (resumed) epoch starts.
pub struct FeedPlan {
    pub max_tokens: usize,
    /// The seed and the epoch (from 0), which draw the epoch's order.
    pub seed_and_epoch: (u64, usize),
    /// Batches per optimiser step (`accumulate` x ranks).
    pub group_size: usize,
    /// Steps of the epoch already taken: the feed starts after them.
    pub first_group: usize,
    pub pad: u32,
}

/// Groups built ahead: enough to cover the hand-over, few enough that memory holds little
/// more than one step's batches.
const GROUPS_AHEAD: usize = 2;

impl BatchFeed {
    /// Starts building the epoch's groups of `corpus` as `plan` says.
    pub fn start(corpus: Arc<EncodedCorpus>, plan: FeedPlan) -> std::io::Result<Self> {
        let (sender, groups) = sync_channel(GROUPS_AHEAD);
        let builder = std::thread::Builder::new()
            .name("batch-feed".into())
            .spawn(move || {
                let epoch = EpochPlan::new(&corpus, plan.max_tokens, plan.seed_and_epoch);
                let size = plan.group_size.max(1);
                for group in plan.first_group..epoch.len().div_ceil(size) {
                    let first = group * size;
                    let batches = (first..(first + size).min(epoch.len()))
                        .map(|i| PaddedBatch::from_corpus(&corpus, epoch.batch_pairs(i), plan.pad))
                        .collect();
                    // The loop has stopped taking groups (a stop, an error): nothing to build.
                    if sender.send(batches).is_err() {
                        return;
                    }
                }
            })?;
        Ok(Self {
            groups,
            builder: Some(builder),
        })
    }

    /// The next step's group, waiting for it if it is not built yet; `None` at the epoch's end.
    pub fn next_group(&mut self) -> Option<Vec<PaddedBatch>> {
        self.groups.recv().ok()
    }
}

impl Drop for BatchFeed {
    fn drop(&mut self) {
        // Unblocks a builder waiting to hand over a group, so that the join below returns.
        let (_, closed) = sync_channel(0);
        drop(std::mem::replace(&mut self.groups, closed));
        if let Some(builder) = self.builder.take() {
            let _ = builder.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::training_data::EncodedPair;

    fn corpus(pairs: usize) -> Arc<EncodedCorpus> {
        let pairs: Vec<EncodedPair> = (0..pairs)
            .map(|i| EncodedPair {
                src: vec![4; 1 + i % 7],
                tgt: vec![5; 1 + i % 5],
            })
            .collect();
        Arc::new(EncodedCorpus::from_pairs(
            &pairs,
            crate::training_data::IdWidth::for_vocab(8),
        ))
    }

    fn plan(group_size: usize, first_group: usize) -> FeedPlan {
        FeedPlan {
            max_tokens: 40,
            seed_and_epoch: (7, 2),
            group_size,
            first_group,
            pad: 0,
        }
    }

    /// The batches the loop cut itself before the feed: the plan's, in its order.
    fn expected(corpus: &EncodedCorpus, group_size: usize) -> Vec<Vec<PaddedBatch>> {
        let epoch = EpochPlan::new(corpus, 40, (7, 2));
        (0..epoch.len())
            .map(|i| PaddedBatch::from_corpus(corpus, epoch.batch_pairs(i), 0))
            .collect::<Vec<_>>()
            .chunks(group_size)
            .map(<[PaddedBatch]>::to_vec)
            .collect()
    }

    #[test]
    fn the_feed_hands_over_the_epochs_groups_in_the_plans_order_from_where_it_starts() {
        let corpus = corpus(300);
        for (group_size, first) in [(1, 0), (3, 0), (3, 5), (2, 1000)] {
            let mut feed = BatchFeed::start(corpus.clone(), plan(group_size, first)).unwrap();
            let mut got = Vec::new();
            while let Some(group) = feed.next_group() {
                got.push(group);
            }
            let want: Vec<_> = expected(&corpus, group_size)
                .into_iter()
                .skip(first)
                .collect();
            assert_eq!(got, want, "groups of {group_size} from {first}");
        }
    }

    #[test]
    fn a_feed_dropped_before_its_end_stops_its_thread() {
        let mut feed = BatchFeed::start(corpus(5000), plan(1, 0)).unwrap();
        assert!(feed.next_group().is_some());
        // Returns only once the builder has ended (Drop joins it).
        drop(feed);
    }
}
