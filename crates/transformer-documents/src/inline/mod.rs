//! Formatting inside a sentence: carrying inline marks (an HTML `<b>` or `<a>`, a Word run's
//! bold) from the source words to the words of the translation. As LibreTranslate does
//! (argos-translate's tag injection), the whole block is translated as one text, each marked
//! piece is translated alone and looked for in the block's translation, and wraps what it
//! matches. Further than argos: a piece found by its words (another inflection, another
//! number) counts too, and a piece not found at all wraps the words at its relative place in
//! the sentence, so that the translation stays whole. Only when those places overlap is each
//! piece translated on its own (argos's fallback, which keeps the formatting at the price of
//! a translation that reads less well).
//!
//! This file holds the pieces, the block and the fallback; `inject` places marks in the whole
//! translation, `matching` finds a piece's words there.

mod inject;
mod matching;

/// A stretch of text and the mark it carries (`None`: the block's own formatting).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Piece<M> {
    pub mark: Option<M>,
    pub text: String,
    /// Kept as it is, never translated (code, an image, a footnote number): placed where its
    /// text is found in the translation, else at its relative place.
    pub fixed: bool,
}

impl<M> Piece<M> {
    pub fn new(mark: Option<M>, text: impl Into<String>) -> Self {
        Self {
            mark,
            text: text.into(),
            fixed: false,
        }
    }

    /// A piece kept as it is.
    pub fn fixed(mark: M, text: impl Into<String>) -> Self {
        Self {
            mark: Some(mark),
            text: text.into(),
            fixed: true,
        }
    }

    /// Whether the piece is translated (it has a letter and is not fixed): numbers, symbols
    /// and marks alone read the same in every language.
    fn translated(&self) -> bool {
        !self.fixed && self.text.chars().any(char::is_alphabetic)
    }
}

/// Where a mark went in the translation: the bytes it wraps, or (with `text`) what it puts
/// there instead.
struct Placed<M> {
    start: usize,
    end: usize,
    mark: M,
    text: Option<String>,
    /// A space goes before the put-in text (the source had one before it).
    spaced: bool,
}

impl<M> Placed<M> {
    /// `mark` over the translation's `start..end`, text the translation already has.
    fn over((start, end): (usize, usize), mark: M) -> Self {
        Self {
            start,
            end,
            mark,
            text: None,
            spaced: false,
        }
    }
}

/// A block's pieces in reading order, whose text is translated together.
#[derive(Debug, Clone)]
pub struct InlineBlock<M> {
    pieces: Vec<Piece<M>>,
}

impl<M: Clone + PartialEq> InlineBlock<M> {
    /// Adjacent pieces with one mark are merged; with `collapse`, runs of ASCII whitespace (a
    /// line break in HTML source) read as one space, as a browser shows them (a no-break
    /// space stays).
    pub fn new(pieces: Vec<Piece<M>>, collapse: bool) -> Self {
        let mut merged: Vec<Piece<M>> = Vec::with_capacity(pieces.len());
        for piece in pieces {
            match merged.last_mut() {
                Some(last) if last.mark == piece.mark && !last.fixed && !piece.fixed => {
                    last.text.push_str(&piece.text)
                }
                _ => merged.push(piece),
            }
        }
        if collapse {
            for piece in &mut merged {
                piece.text = collapse_whitespace(&piece.text);
            }
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
            .any(|p| p.mark.is_some() && (p.fixed || !p.text.trim().is_empty()))
    }

    /// The texts to translate: the whole block, then (when it has marks) each piece that is
    /// translated. Empty for a block without a word.
    pub fn requests(&self) -> Vec<String> {
        let full = self.full_text();
        // Only pieces kept as they are (inline code alone): nothing to translate.
        let words = self
            .pieces
            .iter()
            .any(|p| !p.fixed && p.text.chars().any(char::is_alphabetic));
        if !words {
            return Vec::new();
        }
        let mut requests = vec![full.trim().to_string()];
        if self.has_marks() {
            requests.extend(
                self.pieces
                    .iter()
                    .filter(|p| p.translated())
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

    /// The fallback: each piece with its own translation, spaced as the source was; fixed
    /// pieces and pieces without a word as they were.
    fn piece_by_piece(&self, own: &[String]) -> Vec<Piece<M>> {
        let mut own = own.iter();
        let mut out = Vec::new();
        for piece in &self.pieces {
            let text = &piece.text;
            if !piece.translated() {
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

/// Runs of ASCII whitespace (HTML's: a no-break space is not one) as one space.
fn collapse_whitespace(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut in_space = false;
    for c in text.chars() {
        if c.is_ascii_whitespace() {
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

/// Adjacent pieces with one mark merged, empty ones dropped (a fixed piece, an image, stays).
fn tidy<M: PartialEq>(pieces: Vec<Piece<M>>) -> Vec<Piece<M>> {
    let mut out: Vec<Piece<M>> = Vec::with_capacity(pieces.len());
    for piece in pieces {
        if piece.text.is_empty() && !piece.fixed {
            continue;
        }
        match out.last_mut() {
            Some(last) if last.mark == piece.mark && !last.fixed && !piece.fixed => {
                last.text.push_str(&piece.text)
            }
            _ => out.push(piece),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn block(pieces: &[(Option<u8>, &str)]) -> InlineBlock<u8> {
        InlineBlock::new(
            pieces.iter().map(|(m, t)| Piece::new(*m, *t)).collect(),
            true,
        )
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
        // The full stop alone has no word: it is not translated.
        assert_eq!(
            b.requests(),
            ["ich mochte ein bier .", "ich mochte ein", "bier"]
        );
        let translations = ["i want a beer .", "i want a .", "beer ."].map(String::from);
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
    }

    #[test]
    fn fixed_pieces_and_numbers_stay_and_go_where_they_were() {
        // "Ein Hund rennt im Schnee<sup>1</sup>." and a code word the model never copies.
        let b = InlineBlock::new(
            vec![
                Piece::new(None, "Ein Hund rennt im Schnee"),
                Piece::new(Some(1u8), "1"),
                Piece::new(None, ". Tippe "),
                Piece::fixed(2u8, "ls"),
                Piece::new(None, " ein."),
            ],
            true,
        );
        let requests = b.requests();
        assert_eq!(requests.len(), 4, "{requests:?}");
        let translations = [
            "A dog runs in the snow. Type it.",
            "A dog runs in the snow",
            ". Type",
            "a.",
        ]
        .map(String::from);
        assert_eq!(
            texts(&b.carry(&translations)),
            [
                (None, "A dog runs in the snow"),
                (Some(1), "1"),
                (None, ". Type "),
                (Some(2), "ls"),
                (None, " it."),
            ]
        );
    }

    #[test]
    fn a_fragment_answered_with_a_whole_sentence_is_placed_by_its_position() {
        // "Fahrrad" alone came back as a sentence of its own.
        let b = block(&[(None, "Ein Mann fährt "), (Some(1), "Fahrrad"), (None, ".")]);
        let translations = [
            "A man is riding a bicycle.",
            "A man is riding",
            "A man is riding a bicycle.",
            ".",
        ]
        .map(String::from);
        let carried = b.carry(&translations);
        assert_eq!(carried[1].mark, Some(1), "{carried:?}");
        assert!(carried[1].text.contains("bicycle") && !carried[1].text.contains("man"));
    }

    #[test]
    fn a_block_without_marks_is_one_request() {
        let b = block(&[(None, "a\n  b")]);
        assert_eq!(b.requests(), ["a b"]);
        assert_eq!(texts(&b.carry(&["x".into()])), [(None, "x")]);
        assert!(block(&[(Some(1), "  ")]).requests().is_empty());
    }
}
