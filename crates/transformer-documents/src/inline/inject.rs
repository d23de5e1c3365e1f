//! Marks placed in the whole block's translation: each marked piece's own translation
//! looked for there (exactly, else by its words), else the words at its relative place; a
//! piece kept as it is (an `Anchor`) put back where its text is or where it sat.

use super::matching::{find_free, find_similar, same_place, without_added_punctuation, word_spans};
use super::{InlineBlock, Piece, Placed};

impl<M: Clone + PartialEq> InlineBlock<M> {
    /// Each marked piece's own translation found in the whole's (exactly, else by its
    /// words), else the words at the same relative place as the piece in the source; a fixed
    /// piece where its text is, else put in at its place. `None` when places overlap.
    pub(super) fn inject(&self, whole: &str, own: &[String]) -> Option<Vec<Piece<M>>> {
        let source = self.full_text();
        let lead = source.len() - source.trim_start().len();
        let source_chars = source.trim().chars().count().max(1) as f64;
        let position = |byte: usize| {
            let byte = byte.saturating_sub(lead).min(source.trim().len());
            source.trim()[..byte].chars().count() as f64 / source_chars
        };
        let mut found: Vec<Placed<M>> = Vec::new();
        let mut unplaced: Vec<(f64, f64, M)> = Vec::new();
        let mut inserted: Vec<(Anchor, M, String)> = Vec::new();
        // Each translated piece's own translation, and the words of all of them: a fragment
        // translated alone often brings words that belong to its neighbours ("rennt" alone
        // comes back as "A dog runs"), which are no guide to where it went.
        let translations: Vec<Option<&String>> = {
            let mut own = own.iter();
            self.pieces
                .iter()
                .map(|p| if p.translated() { own.next() } else { None })
                .collect()
        };
        if translations
            .iter()
            .zip(&self.pieces)
            .any(|(t, p)| p.translated() && t.is_none())
        {
            return None;
        }
        let words_of = |text: &str| -> Vec<String> {
            word_spans(text)
                .into_iter()
                .map(|(s, e)| text[s..e].to_lowercase())
                .collect()
        };
        // Each piece's translation's words, split once for every mark that asks.
        let piece_words: Vec<Vec<String>> = translations
            .iter()
            .map(|t| t.map_or_else(Vec::new, |t| words_of(t)))
            .collect();
        let mut at = 0;
        for (index, piece) in self.pieces.iter().enumerate() {
            let (start, end) = (at, at + piece.text.len());
            at = end;
            let translation = translations[index];
            let Some(mark) = &piece.mark else { continue };
            let trimmed = piece.text.trim_start();
            let first = start + (piece.text.len() - trimmed.len());
            let last = (first + trimmed.trim_end().len()).min(end);
            let Some(translation) = translation else {
                if piece.fixed || !piece.text.trim().is_empty() {
                    let needle = piece.text.trim();
                    match (!needle.is_empty())
                        .then(|| find_free(whole, needle, &found))
                        .flatten()
                    {
                        Some(span) => found.push(Placed::over(span, mark.clone())),
                        None => inserted.push((
                            Anchor::of(&source, start, end, position(last)),
                            mark.clone(),
                            piece.text.clone(),
                        )),
                    }
                }
                continue;
            };
            let needle = without_added_punctuation(&piece.text, translation);
            let needle_words = words_of(needle);
            let own_words: Vec<&String> = needle_words
                .iter()
                .filter(|w| {
                    !piece_words
                        .iter()
                        .enumerate()
                        .any(|(i, words)| i != index && words.contains(w))
                })
                .collect();
            // A fragment the model answered with a sentence of its own is no guide.
            let believable = word_spans(needle).len() <= 2 * word_spans(&piece.text).len() + 2;
            let span = if !believable || needle.is_empty() || own_words.is_empty() {
                None
            } else if own_words.len() == needle_words.len() {
                find_free(whole, needle, &found).or_else(|| find_similar(whole, needle, &found))
            } else {
                let own: Vec<&str> = own_words.iter().map(|w| w.as_str()).collect();
                find_similar(whole, &own.join(" "), &found)
            };
            match span {
                Some(span) => found.push(Placed::over(span, mark.clone())),
                None => unplaced.push((position(first), position(last), mark.clone())),
            }
        }
        for (from, to, mark) in unplaced {
            found.push(Placed::over(same_place(whole, from, to, &found)?, mark));
        }
        for (anchor, mark, text) in inserted {
            let at = anchor.point_in(whole, &found);
            let spaced = anchor.spaced && whole[..at].ends_with(|c: char| !c.is_whitespace());
            found.push(Placed {
                start: at,
                end: at,
                mark,
                text: Some(text),
                spaced,
            });
        }
        found.sort_by_key(|p| (p.start, p.end));
        let mut out = Vec::new();
        let mut at = 0;
        for placed in found {
            out.push(Piece::new(None, &whole[at..placed.start]));
            if placed.spaced {
                out.push(Piece::new(None, " "));
            }
            match placed.text {
                Some(text) => out.push(Piece {
                    mark: Some(placed.mark),
                    text,
                    fixed: true,
                }),
                None => out.push(Piece::new(
                    Some(placed.mark),
                    &whole[placed.start..placed.end],
                )),
            }
            at = placed.end;
        }
        out.push(Piece::new(None, &whole[at..]));
        Some(out)
    }
}

/// Where a piece kept as it is sat in the source: before the punctuation that ends its
/// sentence (a footnote number), or at a fraction of the text.
struct Anchor {
    /// The sentence it ends, counted from 0, when punctuation follows it.
    sentence_end: Option<usize>,
    /// Where its end sat, as a fraction of the source's characters.
    fraction: f64,
    /// Whether whitespace came before it.
    spaced: bool,
}

impl Anchor {
    fn of(source: &str, start: usize, end: usize, fraction: f64) -> Self {
        let after = source[end..].trim_start_matches(|c: char| c.is_whitespace() && c != '\n');
        let sentence_end = after
            .starts_with(['.', '!', '?', ';', ':', ','])
            .then(|| sentence_ends(&source[..start]).len());
        Self {
            sentence_end,
            fraction,
            spaced: source[..start].ends_with(char::is_whitespace),
        }
    }

    /// The byte of `text` it goes to: after the last word before the same sentence's final
    /// punctuation, else after the last word that ends by its fraction of the text; moved past
    /// any span of `taken` it would fall inside.
    fn point_in<M>(&self, text: &str, taken: &[Placed<M>]) -> usize {
        let words = word_spans(text);
        let by_sentence = self.sentence_end.and_then(|k| {
            let ends = sentence_ends(text);
            let end = ends.get(k).copied().or_else(|| ends.last().copied())?;
            words.iter().rev().map(|&(_, e)| e).find(|&e| e <= end)
        });
        let mut at = by_sentence.unwrap_or_else(|| {
            let length = text.chars().count().max(1) as f64;
            words
                .iter()
                .map(|&(_, e)| e)
                .rfind(|&e| text[..e].chars().count() as f64 / length <= self.fraction + 1e-9)
                .unwrap_or(0)
        });
        for placed in taken {
            if placed.start < at && at < placed.end {
                at = placed.end;
            }
        }
        at
    }
}

/// The bytes of the punctuation marks that end sentences in `text` (`.`, `!`, `?`, `…` before
/// whitespace or the end).
fn sentence_ends(text: &str) -> Vec<usize> {
    let mut ends = Vec::new();
    let mut chars = text.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        let next = chars.peek().map(|&(_, n)| n);
        if matches!(c, '.' | '!' | '?' | '…') && next.is_none_or(char::is_whitespace) {
            ends.push(i);
        }
    }
    ends
}
