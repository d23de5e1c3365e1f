//! Marks the segmenter leaves on the wrong side of a sentence end: closing brackets and
//! quotes, list markers (`2)`, `(2)`) and list numbers (`2.`), each put back with the sentence
//! it belongs to or kept as a piece of its own, which is not translated.

use std::ops::Range;

use sentencex::languages::Language;

use super::sentence_ends::{list_marker_len, whole_word_before, CLOSERS, TERMINATORS};

/// Mends what the segmenter leaves on the wrong side of a sentence end, in `ranges` of `line`
/// (each trimmed, in order): closing brackets and quotes that start a piece after a sentence
/// end go back to the sentence they close (`(Ein Kind spielt.) Zwei` is `(Ein Kind spielt.)`
/// and `Zwei`, not `... spielt.` and `) Zwei`, whose translation loses the bracket and the
/// space before it), and stay out of it, as they are, when nothing in it opens them; a list
/// item's marker (`2)`, `(2)`) that starts a piece is a piece of its own, kept as it is; and a
/// list number that ends a piece after a sentence end becomes a piece of its own (`Wasser.
/// 2.` is `Wasser.` and `2.`: read as an ordinal, the number went to the sentence before,
/// whose translation dropped it).
pub(super) fn mend(
    language: &dyn Language,
    line: &str,
    ranges: Vec<Range<usize>>,
) -> Vec<Range<usize>> {
    let mut mended: Vec<Range<usize>> = Vec::with_capacity(ranges.len());
    for mut range in ranges {
        if let Some(last) = mended.last_mut() {
            let closed =
                line[..last.end].ends_with(|c| TERMINATORS.contains(&c) || CLOSERS.contains(&c));
            let closers = line[range.clone()]
                .char_indices()
                .find(|(_, c)| !CLOSERS.contains(c))
                .map_or(range.len(), |(at, _)| at);
            let then_space = line[range.start + closers..range.end]
                .chars()
                .next()
                .is_none_or(char::is_whitespace);
            if closed && closers > 0 && then_space && line[last.end..range.start].trim().is_empty()
            {
                last.end = range.start + closers;
                let rest = &line[last.end..range.end];
                range.start = last.end + (rest.len() - rest.trim_start().len());
                if range.start >= range.end {
                    continue;
                }
            }
        }
        // A list item's markers at the start are pieces of their own, kept as they are.
        while let Some(marker) = list_marker_len(&line[range.clone()]) {
            mended.push(range.start..range.start + marker);
            let rest = &line[range.start + marker..range.end];
            range.start += marker + (rest.len() - rest.trim_start().len());
        }
        match list_number_at_end(language, &line[range.clone()]) {
            Some(at) => {
                let sentence = &line[range.start..range.start + at];
                mended.push(range.start..range.start + sentence.trim_end().len());
                mended.push(range.start + at..range.end);
            }
            None => mended.push(range),
        }
    }
    // Closing brackets no bracket of their piece opens stay out of it, as they are: the model
    // drops what it cannot match.
    for range in &mut mended {
        range.end -= unmatched_closers_at_end(&line[range.clone()]);
    }
    mended
}

/// `sentence` without the brackets around all of it, which the model drops though it could
/// match them (`(Das war ein Fehler!)`): the range of what is translated inside them.
pub(super) fn inside_brackets(sentence: &str) -> Range<usize> {
    let Some((open, close)) = enclosing_brackets(sentence) else {
        return 0..sentence.len();
    };
    let inner = &sentence[open..sentence.len() - close];
    let start = open + (inner.len() - inner.trim_start().len());
    let end = sentence.len() - close - (inner.len() - inner.trim_end().len());
    if start < end {
        start..end
    } else {
        0..sentence.len()
    }
}

/// The bytes of the bracket that opens `piece` and of the one that closes it, when the two are
/// a pair around all of it (`(Ein Kind spielt.)`, not `(2) Ein Kind (spielt).`).
fn enclosing_brackets(piece: &str) -> Option<(usize, usize)> {
    let pairs = [('(', ')'), ('[', ']'), ('{', '}')];
    let first = piece.chars().next()?;
    let (_, close) = pairs.iter().find(|(open, _)| *open == first)?;
    if !piece.ends_with(*close) || piece.len() < 3 {
        return None;
    }
    // The opening bracket's pair must be the last character: depth never back to 0 before.
    let mut depth = 0usize;
    for (at, c) in piece.char_indices() {
        if c == first {
            depth += 1;
        } else if c == *close {
            depth = depth.checked_sub(1)?;
            if depth == 0 && at + c.len_utf8() < piece.len() {
                return None;
            }
        }
    }
    (depth == 0).then_some((first.len_utf8(), close.len_utf8()))
}

/// Whether `piece` ends with closing brackets after its terminator that no bracket in it
/// opens (`Wasser.)` of a parenthesis opened in the sentence before): how many bytes they
/// take.
fn unmatched_closers_at_end(piece: &str) -> usize {
    let closers: usize = piece
        .chars()
        .rev()
        .take_while(|c| matches!(c, ')' | ']' | '}'))
        .map(char::len_utf8)
        .sum();
    let body = &piece[..piece.len() - closers];
    if closers == 0 || !body.ends_with(|c| TERMINATORS.contains(&c)) {
        return 0;
    }
    let opened = body
        .chars()
        .filter(|c| matches!(c, '(' | '[' | '{'))
        .count();
    let closed = piece
        .chars()
        .filter(|c| matches!(c, ')' | ']' | '}'))
        .count();
    if closed > opened {
        closers
    } else {
        0
    }
}

/// Where a list number (`2.`, `12)`, `(2)`, `[2]`) that ends `piece` after a sentence end
/// starts: after a whole word ([`whole_word_before`]), not an abbreviation's number
/// (`Abb. 5.`).
fn list_number_at_end(language: &dyn Language, piece: &str) -> Option<usize> {
    let (body, opener) = match piece.strip_suffix([']', ')']) {
        Some(body) if piece.ends_with(']') => (body, Some('[')),
        Some(body) => (body, Some('(')),
        None => (piece.strip_suffix('.')?, None),
    };
    let digits = body.len() - body.trim_end_matches(|c: char| c.is_ascii_digit()).len();
    if !(1..=3).contains(&digits) {
        return None;
    }
    let mut number = body.len() - digits;
    // `(2)` and `[2]` are one marker; `2)` too, without its opener.
    match opener {
        Some(open) if body[..number].ends_with(open) => number -= 1,
        Some('[') => return None,
        _ => {}
    }
    let before = body[..number].trim_end_matches(char::is_whitespace);
    let spaced = before.len() < number;
    let unclosed = before.trim_end_matches(|c| CLOSERS.contains(&c));
    let ended = unclosed.ends_with(|c| TERMINATORS.contains(&c));
    let head = &unclosed[..unclosed.len().saturating_sub(1)];
    (spaced && ended && whole_word_before(language, head)).then_some(number)
}
