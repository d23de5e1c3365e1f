//! Data: reading sentence pairs, word vocabularies, and padded batches.

pub mod batch;
pub mod corpus;
pub mod vocab;

pub use batch::{encode_pairs, epoch_batches, EncodedPair, PaddedBatch};
pub use corpus::{read_tsv, SentencePair};
pub use vocab::{tokenize, Vocab};
