//! Parallel corpora as text: reading a TSV file or two aligned files (plain or gzip),
//! cleaning each sentence as the model reads it, and streaming corpora of any size in blocks
//! on every core.

mod files;
mod sentence;
mod stream;

pub use files::{files_of, refuse_unless_regular, total_bytes, ReadCounter};
pub use sentence::{normalize_sentence, read_text, CleaningReport, PathOrigin, SentencePair};
pub use stream::{read_corpus, stream_corpus};
