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

    /// Each marked piece's own translation found in the whole's (exactly, else by its
    /// words), else the words at the same relative place as the piece in the source; a fixed
    /// piece where its text is, else put in at its place. `None` when places overlap.
    fn inject(&self, whole: &str, own: &[String]) -> Option<Vec<Piece<M>>> {
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
                        Some((s, e)) => found.push(Placed {
                            start: s,
                            end: e,
                            mark: mark.clone(),
                            text: None,
                            spaced: false,
                        }),
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
                Some((s, e)) => found.push(Placed {
                    start: s,
                    end: e,
                    mark: mark.clone(),
                    text: None,
                    spaced: false,
                }),
                None => unplaced.push((position(first), position(last), mark.clone())),
            }
        }
        for (from, to, mark) in unplaced {
            let (start, end) = same_place(whole, from, to, &found)?;
            found.push(Placed {
                start,
                end,
                mark,
                text: None,
                spaced: false,
            });
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
fn find_free<M>(haystack: &str, needle: &str, taken: &[Placed<M>]) -> Option<(usize, usize)> {
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
fn find_similar<M>(haystack: &str, needle: &str, taken: &[Placed<M>]) -> Option<(usize, usize)> {
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
fn same_place<M>(text: &str, from: f64, to: f64, taken: &[Placed<M>]) -> Option<(usize, usize)> {
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
        assert_eq!(find_similar::<u8>("the dog sleeps", "cats", &[]), None);
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
