//! The `short` mark: a translation much shorter than the model makes of such a source, where a
//! sentence may have been left out (a paragraph read as one sentence).

/// Sources shorter than this many tokens are never marked short: a few words translate to
/// more or fewer too often to tell.
const SHORTEST_CHECKED_SOURCE: usize = 6;

/// Whether a translation of `output_tokens` (without `</s>`) is under half what
/// `length_ratio` gives a source of `source_tokens`: the mark of a sentence the model left
/// out (a paragraph read as one sentence) or a translation that stopped early.
pub fn is_short(source_tokens: usize, output_tokens: usize, length_ratio: f32) -> bool {
    is_shorter_than(source_tokens, output_tokens, length_ratio, 0.5)
}

/// [`is_short`] for a source that looks as if it held two sentences the splitter left whole
/// ([`may_hold_two_sentences`]): one of them left out takes a third or a half of the length,
/// not more, so under four fifths of the expected length is marked.
pub(super) fn is_short_for(
    source: &str,
    source_tokens: usize,
    output_tokens: usize,
    ratio: f32,
) -> bool {
    let share = if may_hold_two_sentences(source) {
        0.8
    } else {
        0.5
    };
    is_shorter_than(source_tokens, output_tokens, ratio, share)
}

fn is_shorter_than(source_tokens: usize, output_tokens: usize, ratio: f32, share: f32) -> bool {
    source_tokens >= SHORTEST_CHECKED_SOURCE
        && (output_tokens as f32) < share * ratio * source_tokens as f32
}

/// Whether `source` has, inside it, a sentence end followed by a space and a capital or a
/// digit (`bemalt ist. 3 Jungen`), which the sentence rules read as an abbreviation or an
/// ordinal and left inside one sentence; or an article or a count with a capital after a
/// word that nothing ends (`in einer Stadt Der Mann`: a full stop missing, which no rule can
/// see), in German or English, where these are written small inside a sentence.
fn may_hold_two_sentences(source: &str) -> bool {
    let trimmed = source.trim_end();
    let end_inside = trimmed.match_indices(['.', '!', '?']).any(|(at, _)| {
        let mut after = trimmed[at + 1..].chars();
        after.next().is_some_and(char::is_whitespace)
            && after
                .next()
                .is_some_and(|c| c.is_uppercase() || c.is_ascii_digit())
    });
    let words: Vec<&str> = trimmed.split_whitespace().collect();
    let start_inside = words
        .windows(2)
        .any(|pair| pair[0].ends_with(char::is_alphabetic) && SENTENCE_OPENERS.contains(&pair[1]));
    end_inside || start_inside
}

/// Words that open a sentence written with a capital, and are written small inside one.
const SENTENCE_OPENERS: &[&str] = &[
    "Der", "Die", "Das", "Ein", "Eine", "Zwei", "Drei", "Vier", "Fünf", "The", "Two", "Three",
    "Four", "Five",
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_source_with_a_sentence_end_inside_is_held_to_four_fifths_of_its_length() {
        assert!(may_hold_two_sentences(
            "Das Haus ist bemalt ist. 3 Jungen stehen."
        ));
        assert!(may_hold_two_sentences(
            "Ein Hund läuft. Eine Katze schläft."
        ));
        assert!(!may_hold_two_sentences("Ein Hund läuft im Park."));
        assert!(!may_hold_two_sentences("Wir kommen am 3. mai."));
        assert!(may_hold_two_sentences(
            "Zwei Männer in einer Stadt Der Mann hebt die Arme."
        ));
        assert!(!may_hold_two_sentences(
            "Zwei Männer lesen „Die Welt“ im Park."
        ));
        // 10 source tokens at a ratio of 1: under 5 is short alone, under 8 with two inside.
        assert!(!is_short_for("Ein Hund läuft im Park.", 10, 6, 1.0));
        assert!(is_short_for("Ein Hund läuft. Eine Katze.", 10, 6, 1.0));
        assert!(is_short(10, 4, 1.0) && !is_short(5, 0, 1.0));
    }
}
