//! Text to ids and back: word vocabularies, BPE (learned with the tokenizers crate), MarianMT's
//! SentencePiece models (read and learned), the special tokens and their ids, and words too
//! long to segment whole.

pub mod bpe;
mod language_codes;
pub mod long_words;
pub mod marian;
mod marian_learn;
pub mod multilingual;
pub mod sentencepiece;
mod sentencepiece_bpe;
mod sentencepiece_learn;
pub mod specials;
pub mod tokenizer;
pub(crate) mod tokenizer_pair;
pub mod vocab;

pub use sentencepiece_learn::MAX_SENTENCE_BYTES as SENTENCEPIECE_MAX_SENTENCE_BYTES;
pub use specials::SpecialIds;
pub use tokenizer::TextTokenizer;
pub use tokenizer_pair::Tokenizers;
pub use vocab::{tokenize, Vocab};
