//! Data: reading and cleaning sentence pairs, tokenizers (words, BPE, MarianMT's
//! SentencePiece), padded batches.

pub mod batch;
mod cache_checksum;
pub mod corpus;
pub mod corpus_stream;
pub mod encoded_corpus;
mod long_words;
pub mod marian;
mod marian_learn;
pub mod sentencepiece;
mod sentencepiece_learn;
pub mod specials;
pub mod tokenizer;
pub mod training_corpus;
pub mod vocab;

pub use batch::{encode_pairs, epoch_batches, ordered_batches, EncodedPair, PaddedBatch};
pub use corpus::{read_corpus, read_text, CleaningReport, PathOrigin, SentencePair};
pub use encoded_corpus::{EncodedCorpus, EpochPlan, Fnv1a, IdWidth};
pub use sentencepiece_learn::MAX_SENTENCE_BYTES as SENTENCEPIECE_MAX_SENTENCE_BYTES;
pub use specials::SpecialIds;
pub use tokenizer::{TextTokenizer, Tokenizers};
pub use vocab::{tokenize, Vocab};
