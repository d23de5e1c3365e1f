//! A training run's data: its corpora encoded once into flat ids (memory-mapped from an
//! on-disk cache keyed by a digest of the files and checked against checksums), epoch plans
//! of a few bytes a pair, and padded token-budget batches.

pub mod batch;
pub mod cache;
mod cache_entry;
mod cache_key;
mod checksum;
mod copy_task;
mod encode;
pub mod encoded;
mod epoch_plan;
mod learn;
mod pair;

pub use batch::{encode_pairs, epoch_batches, ordered_batches, PaddedBatch};
pub use cache::{CacheUse, CorpusCache, PreparedCorpus};
pub use copy_task::{copy_task_batch, COPY_SYMBOLS};
pub use encode::encode_training_corpus;
pub use encoded::{EncodedCorpus, Fnv1a, IdWidth};
pub use epoch_plan::EpochPlan;
pub use learn::learn_tokenizers;
pub use pair::EncodedPair;
