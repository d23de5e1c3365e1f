//! Formatting inside a sentence: carrying inline marks (an HTML `<b>` or `<a>`, a Word run's
//! bold) from the source words to the words of the translation. As LibreTranslate does
//! (argos-translate's tag injection), the whole block is translated as one text, each marked
//! piece is translated alone and looked for in the block's translation, and wraps what it
//! matches. Further than argos: a piece found by its words (another inflection, another
//! number) counts too, and a piece not found at all wraps the words at its relative place in
//! the sentence, so that the translation stays whole. Only when those places overlap is each
//! piece translated on its own (argos's fallback, which keeps the formatting at the price of
//! a translation that reads less well).

/// A stretch of text and the mark it carries (`None`: the block's own formatting).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Piece<M> {
    pub mark: Option<M>,
    pub text: String,
}

impl<M> Piece<M> {
    pub fn new(mark: Option<M>, text: impl Into<String>) -> Self {
        Self {
            mark,
            text: text.into(),
        }
    }
}

/// A block's pieces in reading order, whose text is translated together.
#[derive(Debug, Clone)]
pub struct InlineBlock<M> {
    pieces: Vec<Piece<M>>,
}

impl<M: Clone + PartialEq> InlineBlock<M> {
    /// Whitespace runs inside a piece (a line break in HTML source) read as one space, as a
    /// browser shows them.
    pub fn new(pieces: Vec<Piece<M>>) -> Self {
        let mut merged: Vec<Piece<M>> = Vec::with_capacity(pieces.len());
        for piece in pieces {
            match merged.last_mut() {
                Some(last) if last.mark == piece.mark => last.text.push_str(&piece.text),
                _ => merged.push(piece),
            }
        }
        for piece in &mut merged {
            piece.text = collapse_whitespace(&piece.text);
        }
        Self { pieces: merged }
    }

    fn full_text(&self) -> String {
        self.pieces.iter().map(|p| p.text.as_str()).collect()
    }

    /// Whether the block has a mark to carry (else one translation of the whole suffices).
    fn has_marks(&self) -> bool {
        self.pieces
            .iter()
            .any(|p| p.mark.is_some() && !p.text.trim().is_empty())
    }

    /// The texts to translate: the whole block, then (when it has marks) each piece that is
    /// not blank. Empty for a blank block.
    pub fn requests(&self) -> Vec<String> {
        let full = self.full_text();
        if full.trim().is_empty() {
            return Vec::new();
        }
        let mut requests = vec![full.trim().to_string()];
        if self.has_marks() {
            requests.extend(
                self.pieces
                    .iter()
                    .filter(|p| !p.text.trim().is_empty())
                    .map(|p| p.text.trim().to_string()),
            );
        }
        requests
    }

    /// The translated pieces, given the translations of `requests()` in order; adjacent
    /// pieces with one mark merged, empty pieces left out.
    pub fn carry(&self, translations: &[String]) -> Vec<Piece<M>> {
        let full = self.full_text();
        let Some(whole) = translations.first() else {
            return self.pieces.clone();
        };
        let lead = &full[..full.len() - full.trim_start().len()];
        let trail = &full[full.trim_end().len()..];
        let mut out = vec![Piece::new(None, lead)];
        if !self.has_marks() {
            let mark = self.pieces.iter().find_map(|p| p.mark.clone());
            out.push(Piece::new(mark, whole.as_str()));
        } else if let Some(injected) = self.inject(whole, &translations[1..]) {
            out.extend(injected);
        } else {
            out.extend(self.piece_by_piece(&translations[1..]));
        }
        out.push(Piece::new(None, trail));
        tidy(out)
    }

    /// The fallback alone: each piece with its own translation, in the source's order (for
    /// formats that cannot move their marks).
    pub fn carry_each_alone(&self, translations: &[String]) -> Vec<Piece<M>> {
        if !self.has_marks() || translations.len() < 2 {
            return self.carry(translations);
        }
        tidy(self.piece_by_piece(&translations[1..]))
    }

    /// Each marked piece's own translation found in the whole's (exactly, else by its
    /// words), else the words at the same relative place as the piece in the source; `None`
    /// when the places overlap.
    fn inject(&self, whole: &str, own: &[String]) -> Option<Vec<Piece<M>>> {
        let source = self.full_text();
        let lead = source.len() - source.trim_start().len();
        let source_chars = source.trim().chars().count().max(1) as f64;
        let mut found: Vec<(usize, usize, M)> = Vec::new();
        let mut unplaced: Vec<(f64, f64, M)> = Vec::new();
        let mut own = own.iter();
        let mut at = 0;
        for piece in &self.pieces {
            let (start, end) = (at, at + piece.text.len());
            at = end;
            if piece.text.trim().is_empty() {
                continue;
            }
            let translation = own.next()?;
            let Some(mark) = &piece.mark else { continue };
            let needle = without_added_punctuation(&piece.text, translation);
            let span = (!needle.is_empty())
                .then(|| {
                    find_free(whole, needle, &found).or_else(|| find_similar(whole, needle, &found))
                })
                .flatten();
            match span {
                Some((s, e)) => found.push((s, e, mark.clone())),
                None => {
                    let position = |byte: usize| {
                        let byte = byte.saturating_sub(lead).min(source.trim().len());
                        source.trim()[..byte].chars().count() as f64 / source_chars
                    };
                    let trimmed = piece.text.trim_start();
                    let first = start + (piece.text.len() - trimmed.len());
                    let last = first + trimmed.trim_end().len();
                    unplaced.push((position(first), position(last.min(end)), mark.clone()));
                }
            }
        }
        for (from, to, mark) in unplaced {
            let (s, e) = same_place(whole, from, to, &found)?;
            found.push((s, e, mark));
        }
        found.sort_by_key(|&(start, _, _)| start);
        let mut out = Vec::new();
        let mut at = 0;
        for (start, end, mark) in found {
            out.push(Piece::new(None, &whole[at..start]));
            out.push(Piece::new(Some(mark), &whole[start..end]));
            at = end;
        }
        out.push(Piece::new(None, &whole[at..]));
        Some(out)
    }

    /// The fallback: each piece with its own translation, spaced as the source was.
    fn piece_by_piece(&self, own: &[String]) -> Vec<Piece<M>> {
        let mut own = own.iter();
        let mut out = Vec::new();
        for piece in &self.pieces {
            let text = &piece.text;
            if text.trim().is_empty() {
                out.push(piece.clone());
                continue;
            }
            let translation = own.next().map_or(text.trim(), String::as_str);
            let lead = &text[..text.len() - text.trim_start().len()];
            let trail = &text[text.trim_end().len()..];
            out.push(Piece::new(None, lead));
            out.push(Piece::new(piece.mark.clone(), translation));
            out.push(Piece::new(None, trail));
        }
        out
    }
}

/// A fragment's translation without the final full stop the model adds to whatever it reads
/// (a bold word alone comes back as "beer ."), unless the fragment had one.
fn without_added_punctuation<'a>(source: &str, translation: &'a str) -> &'a str {
    let source_ends = source.trim_end().ends_with(['.', '!', '?', '…']);
    let mut out = translation.trim();
    if !source_ends {
        out = out.trim_end_matches(['.', '!', '?', '…']).trim_end();
    }
    out
}

/// The first match of `needle` in `haystack` (ignoring case where that keeps byte offsets)
/// that overlaps none of `taken`.
fn find_free<M>(
    haystack: &str,
    needle: &str,
    taken: &[(usize, usize, M)],
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
        let overlaps = taken.iter().any(|&(s, e, _)| start < e && s < end);
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
fn find_similar<M>(
    haystack: &str,
    needle: &str,
    taken: &[(usize, usize, M)],
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
            if taken.iter().any(|&(s, e, _)| start < e && s < end) {
                continue;
            }
            let mut unused: Vec<&String> = wanted.iter().collect();
            let mut matched = 0;
            for &(s, e) in window {
                let word = haystack[s..e].to_lowercase();
                if let Some(i) = unused.iter().position(|w| same_word(w, &word)) {
                    unused.remove(i);
                    matched += 1;
                }
            }
            let score = matched as f64 / width.max(wanted.len()) as f64;
            if score >= 0.5 && best.is_none_or(|(b, _, _)| score > b) {
                best = Some((score, start, end));
            }
        }
    }
    best.map(|(_, start, end)| (start, end))
}

/// The words of `text` whose middles fall between the fractions `from` and `to` of its
/// length (the nearest word when none does), if they overlap none of `taken`.
fn same_place<M>(
    text: &str,
    from: f64,
    to: f64,
    taken: &[(usize, usize, M)],
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
    let overlaps = taken.iter().any(|&(s, e, _)| start < e && s < end);
    (!overlaps).then_some((start, end))
}

/// Byte spans of the words (runs of letters and digits) of `text`.
fn word_spans(text: &str) -> Vec<(usize, usize)> {
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
    shared >= 3 && shared + 2 >= shorter && shared + 3 >= a.chars().count().max(b.chars().count())
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

/// Runs of whitespace as one space.
fn collapse_whitespace(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut in_space = false;
    for c in text.chars() {
        if c.is_whitespace() {
            if !in_space {
                out.push(' ');
            }
            in_space = true;
        } else {
            out.push(c);
            in_space = false;
        }
    }
    out
}

/// Adjacent pieces with one mark merged, empty ones dropped.
fn tidy<M: PartialEq>(pieces: Vec<Piece<M>>) -> Vec<Piece<M>> {
    let mut out: Vec<Piece<M>> = Vec::with_capacity(pieces.len());
    for piece in pieces {
        if piece.text.is_empty() {
            continue;
        }
        match out.last_mut() {
            Some(last) if last.mark == piece.mark => last.text.push_str(&piece.text),
            _ => out.push(piece),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn block(pieces: &[(Option<u8>, &str)]) -> InlineBlock<u8> {
        InlineBlock::new(pieces.iter().map(|(m, t)| Piece::new(*m, *t)).collect())
    }

    fn texts(pieces: &[Piece<u8>]) -> Vec<(Option<u8>, &str)> {
        pieces.iter().map(|p| (p.mark, p.text.as_str())).collect()
    }

    #[test]
    fn a_mark_wraps_the_words_its_piece_translates_to() {
        let b = block(&[
            (None, " ich mochte ein "),
            (Some(1), "bier"),
            (None, " .\n"),
        ]);
        assert_eq!(
            b.requests(),
            ["ich mochte ein bier .", "ich mochte ein", "bier", "."]
        );
        let translations = ["i want a beer .", "i want a .", "beer .", "."].map(String::from);
        assert_eq!(
            texts(&b.carry(&translations)),
            [(None, " i want a "), (Some(1), "beer"), (None, " . ")]
        );
    }

    #[test]
    fn marks_may_change_order() {
        let b = block(&[(Some(1), "rot"), (None, " ist "), (Some(2), "das Haus")]);
        let translations = ["the house is red", "red", "is", "the house"].map(String::from);
        assert_eq!(
            texts(&b.carry(&translations)),
            [(Some(2), "the house"), (None, " is "), (Some(1), "red")]
        );
    }

    #[test]
    fn a_piece_not_found_wraps_the_words_at_its_place() {
        let b = block(&[(None, "ein "), (Some(1), "bier"), (None, " bitte")]);
        let translations = ["a beer please", "a", "ale", "please"].map(String::from);
        assert_eq!(
            texts(&b.carry(&translations)),
            [(None, "a "), (Some(1), "beer"), (None, " please")]
        );
    }

    #[test]
    fn pieces_whose_places_collide_are_translated_one_by_one() {
        let b = block(&[(Some(1), "ab"), (None, " "), (Some(2), "cd")]);
        let translations = ["x", "p", "q"].map(String::from);
        assert_eq!(
            texts(&b.carry(&translations)),
            [(Some(1), "p"), (None, " "), (Some(2), "q")]
        );
    }

    #[test]
    fn an_inflected_piece_is_found_by_its_words() {
        let b = block(&[(None, "ein "), (Some(1), "rotes Fahrrad"), (None, " .")]);
        let translations = ["a red bicycle .", "a", "red bicycles .", "."].map(String::from);
        assert_eq!(
            texts(&b.carry(&translations)),
            [(None, "a "), (Some(1), "red bicycle"), (None, " .")]
        );
        assert_eq!(find_similar::<u8>("the dog sleeps", "cats", &[]), None);
    }

    #[test]
    fn a_match_inside_a_word_does_not_count() {
        assert_eq!(
            find_free::<u8>("beers and beer", "beer", &[]),
            Some((10, 14))
        );
    }

    #[test]
    fn a_block_without_marks_is_one_request() {
        let b = block(&[(None, "a\n  b")]);
        assert_eq!(b.requests(), ["a b"]);
        assert_eq!(texts(&b.carry(&["x".into()])), [(None, "x")]);
        assert!(block(&[(Some(1), "  ")]).requests().is_empty());
    }
}
