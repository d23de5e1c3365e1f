//! A long line given to the segmenter a window at a time: its quote matching rescans from every
//! unmatched quotation mark, so its time grows with the square of what it reads.

use std::ops::Range;

/// The most bytes of a line given to the segmenter at once: its quote matching rescans from
/// every unmatched quotation mark, so its time grows with the square of what it is given (a
/// line of 40,000 `“` took 9 s). No sentence is this long; the model reads a few hundred
/// tokens.
const SEGMENTED_AT_ONCE: usize = 4096;

/// Where a window of a long line ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum WindowCut {
    /// After a sentence end or a space, or at the line's end.
    Between,
    /// At a character boundary inside a word longer than the rest of the window.
    InsideAWord,
}

/// `line` in windows of at most [`SEGMENTED_AT_ONCE`] bytes (one window for most lines), each
/// ending after a sentence end (`. ! ?` and a space) where one is in its second half, else
/// at a space, else at a character boundary (inside a word).
pub(super) fn windows(line: &str) -> Vec<(Range<usize>, WindowCut)> {
    let mut windows = Vec::new();
    let mut start = 0;
    while line.len() - start > SEGMENTED_AT_ONCE {
        let mut end = start + SEGMENTED_AT_ONCE;
        while !line.is_char_boundary(end) {
            end -= 1;
        }
        let window = &line[start..end];
        let half = window.len() / 2;
        let sentence_end = window
            .rmatch_indices(['.', '!', '?'])
            .map(|(at, _)| at + 1)
            .find(|&at| at > half && window[at..].starts_with(char::is_whitespace));
        let space = || {
            window
                .rfind(char::is_whitespace)
                .filter(|&at| at > 0)
                .map(|at| at + window[at..].chars().next().map_or(1, char::len_utf8))
        };
        let (cut, how) = match sentence_end.or_else(space) {
            Some(cut) => (cut, WindowCut::Between),
            None => (window.len(), WindowCut::InsideAWord),
        };
        windows.push((start..start + cut, how));
        start += cut;
    }
    windows.push((start..line.len(), WindowCut::Between));
    windows
}

#[cfg(test)]
mod tests {
    use super::super::tests::{german, sentences};
    use super::*;

    #[test]
    fn a_line_longer_than_the_segmenter_reads_at_once_is_cut_in_windows_losing_nothing() {
        let sentence = "Ich mochte ein Bier. ";
        let line = sentence.repeat(1000);
        let cut: Vec<Range<usize>> = windows(&line).into_iter().map(|(w, _)| w).collect();
        assert!(cut.len() > 1);
        assert!(cut.iter().all(|w| w.len() <= SEGMENTED_AT_ONCE));
        assert_eq!(cut.first().unwrap().start, 0);
        assert_eq!(cut.last().unwrap().end, line.len());
        assert!(cut.windows(2).all(|pair| pair[0].end == pair[1].start));
        // Cut after a sentence end, so every sentence is found whole.
        let found = sentences(&german(), &line);
        assert_eq!(found.len(), 1000);
        assert!(found.iter().all(|s| s == sentence.trim()));
        // Without a space or a stop: cut at character boundaries, every byte kept.
        let quotes = "“".repeat(5000);
        let cut = windows(&quotes);
        assert_eq!(
            cut.iter()
                .map(|(w, _)| &quotes[w.clone()])
                .collect::<String>(),
            quotes
        );
        assert_eq!(cut[0].1, WindowCut::InsideAWord);
    }

    #[test]
    fn a_word_longer_than_a_window_stays_one_sentence_between_its_neighbours() {
        let word = "a".repeat(3 * SEGMENTED_AT_ONCE + 7);
        let line = format!("Ich mochte ein Bier. {word}. Ich mochte eine Cola.");
        let found = sentences(&german(), &line);
        assert_eq!(
            found.len(),
            3,
            "{:?}",
            found.iter().map(|s| s.len()).collect::<Vec<_>>()
        );
        assert_eq!(found[0], "Ich mochte ein Bier.");
        assert_eq!(found[1], format!("{word}."));
        assert!(found[2].ends_with("Cola."));
        // A line of one word: one sentence, every byte of it.
        let alone = sentences(&german(), &word);
        assert_eq!(alone, [word]);
    }
}
