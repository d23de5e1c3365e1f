//! Finding a piece's translation in the block's: exact matches at word edges, runs of
//! similar words (another inflection or number), and the words at a relative place; each
//! avoids the spans other marks have taken.

use super::Placed;

/// A fragment's translation without the final full stop the model adds to whatever it reads
/// (a bold word alone comes back as "beer ."), unless the fragment had one.
pub(super) fn without_added_punctuation<'a>(source: &str, translation: &'a str) -> &'a str {
    let source_ends = source.trim_end().ends_with(['.', '!', '?', '…']);
    let mut out = translation.trim();
    if !source_ends {
        out = out.trim_end_matches(['.', '!', '?', '…']).trim_end();
    }
    out
}

/// The first match of `needle` in `haystack` (ignoring case where that keeps byte offsets)
/// that overlaps none of `taken`.
pub(super) fn find_free<M>(
    haystack: &str,
    needle: &str,
    taken: &[Placed<M>],
) -> Option<(usize, usize)> {
    let (hay, pin) = {
        let (h, n) = (haystack.to_lowercase(), needle.to_lowercase());
        if h.len() == haystack.len() && n.len() == needle.len() {
            (h, n)
        } else {
            (haystack.to_string(), needle.to_string())
        }
    };
    let mut from = 0;
    while let Some(offset) = hay[from..].find(&pin) {
        let start = from + offset;
        let end = start + pin.len();
        let overlaps = taken.iter().any(|p| start < p.end && p.start < end);
        let whole_words = at_word_edge(&hay, start) && at_word_edge(&hay, end);
        if !overlaps && whole_words {
            return Some((start, end));
        }
        from = start + hay[start..].chars().next().map_or(1, char::len_utf8);
    }
    None
}

/// The run of words in `haystack` most like `needle`'s words (a word matching another when
/// one is the other's inflection: a shared start of all but two letters, at least four),
/// when at least half of them match and it overlaps none of `taken`: a fragment translated
/// alone often comes back in another number or form ("red bicycles" in "a red bicycle").
pub(super) fn find_similar<M>(
    haystack: &str,
    needle: &str,
    taken: &[Placed<M>],
) -> Option<(usize, usize)> {
    let words = word_spans(haystack);
    let wanted: Vec<String> = word_spans(needle)
        .into_iter()
        .map(|(s, e)| needle[s..e].to_lowercase())
        .collect();
    if wanted.is_empty() {
        return None;
    }
    let mut best: Option<(f64, usize, usize)> = None;
    for width in wanted.len().saturating_sub(1).max(1)..=wanted.len() + 1 {
        for window in words.windows(width) {
            let (start, end) = (window[0].0, window[width - 1].1);
            if taken.iter().any(|p| start < p.end && p.start < end) {
                continue;
            }
            let mut unused: Vec<&String> = wanted.iter().collect();
            // An exact word counts more than another form of it.
            let mut matched = 0.0;
            // "a", "the", "in" match anywhere: a window counts only with a longer word.
            let mut content = false;
            for &(s, e) in window {
                let word = haystack[s..e].to_lowercase();
                if let Some(i) = unused.iter().position(|w| same_word(w, &word)) {
                    content |= unused[i].chars().count() >= 4;
                    matched += if *unused[i] == word { 1.0 } else { 0.8 };
                    unused.remove(i);
                }
            }
            let score = matched / width.max(wanted.len()) as f64;
            if content && score >= 0.4 && best.is_none_or(|(b, _, _)| score > b) {
                best = Some((score, start, end));
            }
        }
    }
    best.map(|(_, start, end)| (start, end))
}

/// The words of `text` whose middles fall between the fractions `from` and `to` of its
/// length (the nearest word when none does), if they overlap none of `taken`.
pub(super) fn same_place<M>(
    text: &str,
    from: f64,
    to: f64,
    taken: &[Placed<M>],
) -> Option<(usize, usize)> {
    let words = word_spans(text);
    let length = text.chars().count().max(1) as f64;
    let middle = |&(s, e): &(usize, usize)| {
        (text[..s].chars().count() as f64 + text[s..e].chars().count() as f64 / 2.0) / length
    };
    let inside: Vec<&(usize, usize)> = words
        .iter()
        .filter(|w| (from..=to).contains(&middle(w)))
        .collect();
    let (start, end) = match (inside.first(), inside.last()) {
        (Some(first), Some(last)) => (first.0, last.1),
        _ => {
            let centre = (from + to) / 2.0;
            let nearest = words.iter().min_by(|a, b| {
                (middle(a) - centre)
                    .abs()
                    .total_cmp(&(middle(b) - centre).abs())
            })?;
            *nearest
        }
    };
    let overlaps = taken.iter().any(|p| start < p.end && p.start < end);
    (!overlaps).then_some((start, end))
}

/// Byte spans of the words (runs of letters and digits) of `text`.
pub(super) fn word_spans(text: &str) -> Vec<(usize, usize)> {
    let mut spans = Vec::new();
    let mut start = None;
    for (i, c) in text.char_indices() {
        match (c.is_alphanumeric(), start) {
            (true, None) => start = Some(i),
            (false, Some(s)) => {
                spans.push((s, i));
                start = None;
            }
            _ => {}
        }
    }
    if let Some(s) = start {
        spans.push((s, text.len()));
    }
    spans
}

fn same_word(a: &str, b: &str) -> bool {
    if a == b {
        return true;
    }
    let shared = a.chars().zip(b.chars()).take_while(|(x, y)| x == y).count();
    let shorter = a.chars().count().min(b.chars().count());
    shared >= 3 && shared + 2 >= shorter && shared + 4 >= a.chars().count().max(b.chars().count())
}

/// Whether `at` falls between words (not inside one), so that "beer" does not match inside
/// "beers".
fn at_word_edge(text: &str, at: usize) -> bool {
    let before = text[..at].chars().next_back();
    let after = text[at..].chars().next();
    match (before, after) {
        (Some(b), Some(a)) => !(b.is_alphanumeric() && a.is_alphanumeric()),
        _ => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_match_inside_a_word_does_not_count() {
        assert_eq!(
            find_free::<u8>("beers and beer", "beer", &[]),
            Some((10, 14))
        );
    }

    #[test]
    fn words_without_a_shared_content_word_are_not_similar() {
        assert_eq!(find_similar::<u8>("the dog sleeps", "cats", &[]), None);
    }
}
