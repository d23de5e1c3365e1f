//! Words too long to segment whole. The BPE trainer's work on a word grows faster than its
//! length (a 400,000-character word without spaces took two minutes to learn from), and no
//! language has such words: a base64 blob, a hash, a run of one key. A word longer than
//! [`MAX_WORD_CHARS`] is segmented as pieces of at most that many characters, the first
//! starting the word (`▁`) and the rest continuing it, so that decoding gives the word back
//! whole and the work stays linear in the text. SentencePiece caps what it learns from the
//! same way (`max_sentence_length`); its encoding (the unigram lattice) is linear already.

use std::sync::Once;

/// The most characters of a word segmented at once.
pub const MAX_WORD_CHARS: usize = 256;

/// `word` in pieces of at most [`MAX_WORD_CHARS`] characters (one piece when it is no
/// longer), cut at character boundaries.
pub fn pieces(word: &str) -> impl Iterator<Item = &str> {
    let mut rest = word;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let cut = rest
            .char_indices()
            .nth(MAX_WORD_CHARS)
            .map_or(rest.len(), |(at, _)| at);
        let (piece, tail) = rest.split_at(cut);
        rest = tail;
        Some(piece)
    })
}

/// Whether `word` is longer than [`MAX_WORD_CHARS`] characters (bytes bound characters, so
/// most words are told by their length alone).
pub fn is_long(word: &str) -> bool {
    word.len() > MAX_WORD_CHARS && word.chars().nth(MAX_WORD_CHARS).is_some()
}

/// Says once per process that long words are cut, as a warning (`log`).
pub fn note_cut(word: &str) {
    static SAID: Once = Once::new();
    SAID.call_once(|| {
        let preview: String = word.chars().take(20).collect();
        log::warn!(
            "a word of {} characters (\"{preview}...\") is segmented in pieces of at \
             most {MAX_WORD_CHARS} characters, as every such word is (said once)",
            word.chars().count()
        );
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_word_comes_back_whole_from_its_pieces_and_a_short_one_is_one_piece() {
        let word: String = "äbc".repeat(300);
        let cut: Vec<&str> = pieces(&word).collect();
        assert_eq!(cut.len(), 4);
        assert!(cut.iter().all(|p| p.chars().count() <= MAX_WORD_CHARS));
        assert_eq!(cut.concat(), word);
        assert!(is_long(&word));
        assert_eq!(pieces("Haus").collect::<Vec<_>>(), ["Haus"]);
        assert!(!is_long(&"ü".repeat(MAX_WORD_CHARS)));
        assert_eq!(pieces("").count(), 0);
    }
}
