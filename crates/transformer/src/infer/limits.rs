//! How much a translator takes at once: how many tokens of one source it reads (and how much
//! of its text it tokenizes to find them), and how many sources it decodes together.

use crate::tokenize::long_words;

/// Most tokens of a source that are translated, whatever the model's position table holds
/// (CTranslate2's `max_input_length`): a source's cost grows with the square of its length
/// (attention over it, and the steps of a translation as long), so a run-on line or one
/// endless word is cut here rather than worked on for minutes. No sentence is this long.
pub const MOST_SOURCE_TOKENS: usize = 1024;

/// How many tokens of a source a model translates: its position table's rows less the
/// source's framing, and at most [`MOST_SOURCE_TOKENS`]; a longer source is cut to them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SourceLimit {
    pub tokens: usize,
    /// The model's `max_len`, to name the bound.
    max_positions: usize,
}

impl SourceLimit {
    /// For a model of `max_positions` positions whose sources take `overhead` of them.
    pub fn of(max_positions: usize, overhead: usize) -> Self {
        Self {
            tokens: max_positions
                .saturating_sub(overhead)
                .min(MOST_SOURCE_TOKENS),
            max_positions,
        }
    }

    /// What sets the bound, for a message: `model.max_len 256`, or the cap on every model.
    pub fn reason(&self) -> String {
        if self.tokens == MOST_SOURCE_TOKENS {
            format!(
                "at most {MOST_SOURCE_TOKENS} tokens of a source are translated, as \
                 CTranslate2's max_input_length"
            )
        } else {
            format!("model.max_len {}", self.max_positions)
        }
    }
}

/// How many sentences are decoded together: at most `sentences` of them, and at most
/// `tokens` source tokens counting padding and every beam (a batch is as wide as its longest
/// source, and each beam reads it), so that a batch of long sources does not take gigabytes
/// where one of short ones takes megabytes. A sentence that alone passes `tokens` is decoded
/// alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Batching {
    pub sentences: usize,
    pub tokens: usize,
}

/// The command line's default `--batch-size`.
pub const DEFAULT_BATCH_SIZE: usize = 32;
/// The command line's default `--batch-tokens`: 32 sentences of 50 tokens with a beam of 5
/// (most of Multi30k's), 8 of 1024 tokens greedily (the encoder's attention over them, some
/// 0.5 GB, grows with the square of their length).
pub const DEFAULT_BATCH_TOKENS: usize = 8192;

impl Default for Batching {
    fn default() -> Self {
        Self {
            sentences: DEFAULT_BATCH_SIZE,
            tokens: DEFAULT_BATCH_TOKENS,
        }
    }
}

impl Batching {
    /// Whether a batch of `rows` sources, the longest `widest` tokens, each read by `beam`
    /// rows, is within the bounds.
    pub fn fits(&self, rows: usize, widest: usize, beam: usize) -> bool {
        rows <= self.sentences.max(1)
            && rows.saturating_mul(widest).saturating_mul(beam.max(1)) <= self.tokens
    }
}

/// The beginning of `text` whose tokens begin as the whole text's do for at least `tokens`
/// tokens and pass that number when the text does: every word is at least one token, and a
/// word longer than [`long_words::MAX_WORD_CHARS`] at least one a piece of that many
/// characters, so `tokens + 1` such pieces of characters other than whitespace are enough.
pub fn readable_beginning(text: &str, tokens: usize) -> &str {
    let most = (tokens + 1).saturating_mul(long_words::MAX_WORD_CHARS);
    if text.len() <= most {
        return text;
    }
    text.char_indices()
        .filter(|(_, c)| !c.is_whitespace())
        .nth(most)
        .map_or(text, |(at, _)| &text[..at])
}

/// [`readable_beginning`] from the other end: the end of `text` whose tokens end as the whole
/// text's do for at least `tokens` tokens (a prompt is read from its last tokens).
pub fn readable_end(text: &str, tokens: usize) -> &str {
    let most = (tokens + 1).saturating_mul(long_words::MAX_WORD_CHARS);
    if text.len() <= most {
        return text;
    }
    text.char_indices()
        .rev()
        .filter(|(_, c)| !c.is_whitespace())
        .nth(most)
        .map_or(text, |(at, c)| &text[at + c.len_utf8()..])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_batch_is_bounded_by_its_rows_and_by_its_padded_tokens_times_the_beam() {
        let batching = Batching {
            sentences: 4,
            tokens: 100,
        };
        assert!(batching.fits(4, 25, 1));
        assert!(!batching.fits(5, 1, 1));
        assert!(!batching.fits(4, 26, 1));
        assert!(!batching.fits(2, 25, 4));
        // One source alone is decoded whatever its length (the caller never splits it).
        assert!(!batching.fits(1, 1000, 1));
    }

    #[test]
    fn only_a_beginning_or_an_end_long_enough_for_the_tokens_read_is_tokenized() {
        let short = "Ein Hund läuft.";
        assert_eq!(readable_beginning(short, 2), short);
        assert_eq!(readable_end(short, 2), short);
        let word = "a".repeat(10_000);
        let most = 3 * long_words::MAX_WORD_CHARS;
        assert_eq!(readable_beginning(&word, 2).len(), most);
        assert_eq!(readable_end(&word, 2).len(), most);
        // Whitespace is not counted: the words are all there.
        let spaced = "a ".repeat(1000);
        assert_eq!(readable_beginning(&spaced, 2).matches('a').count(), most);
    }

    #[test]
    fn a_source_is_read_to_the_table_or_the_cap_whichever_is_less() {
        assert_eq!(SourceLimit::of(256, 2).tokens, 254);
        assert_eq!(SourceLimit::of(5000, 2).tokens, MOST_SOURCE_TOKENS);
        assert!(SourceLimit::of(5000, 2)
            .reason()
            .contains("max_input_length"));
        assert_eq!(SourceLimit::of(256, 2).reason(), "model.max_len 256");
    }
}
