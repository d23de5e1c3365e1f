//! Sentence splitting: the model translates sentences, people send paragraphs. A text is cut
//! at its line breaks, each line into sentences by Wikimedia's segmenter (`sentencex`, with
//! per-language abbreviation lists and rules for ordinals such as "3. Mai"), each piece again
//! where a sentence end is left inside it ([`sentence_ends`]: lowercased and
//! pre-tokenized text), and after translation the sentences are put back between the text's
//! own whitespace and line breaks.

mod language_codes;
mod marks_at_ends;
mod segmenter_windows;
mod sentence_ends;

use std::ops::Range;

use self::marks_at_ends::{inside_brackets, mend};
use self::segmenter_windows::{windows, WindowCut};
use self::sentence_ends::{further_starts, marker_len};

/// How texts are cut into what the model translates.
#[derive(Debug, Clone)]
pub struct SentenceSplitter {
    /// The language whose rules apply (an ISO 639-1 code; sentencex falls back to English
    /// rules for a language it has none for).
    language: String,
    /// Off: every line is one sentence, as before sentence splitting existed.
    enabled: bool,
}

impl SentenceSplitter {
    /// Splits with `language`'s rules (`de`, `de-AT`, NLLB-200's `deu_Latn`); `None` (a
    /// checkpoint that names no source language) gets English rules.
    pub fn new(language: Option<&str>, enabled: bool) -> Self {
        let language = language
            .map(language_codes::language_of)
            .filter(|code| !code.is_empty())
            .unwrap_or_else(|| "en".into());
        Self { language, enabled }
    }

    /// Each line its own sentence: for corpora of one sentence a line.
    pub fn lines_only() -> Self {
        Self::new(None, false)
    }

    pub fn enabled(&self) -> bool {
        self.enabled
    }

    /// The ISO 639-1 code of the language whose rules apply.
    pub fn language(&self) -> &str {
        &self.language
    }

    /// The byte ranges of `line`'s sentences (no line breaks inside), trimmed of whitespace;
    /// none for a blank line.
    pub fn sentences_of_line(&self, line: &str) -> Vec<Range<usize>> {
        if line.trim().is_empty() {
            return Vec::new();
        }
        if !self.enabled {
            return trimmed(line, 0..line.len()).into_iter().collect();
        }
        let language = sentencex::language_factory(&self.language);
        let base = line.as_ptr() as usize;
        let mut ranges: Vec<Range<usize>> = Vec::new();
        // Whether the window before was cut inside a word: its last piece and this window's
        // first are one piece (a word longer than a window is one sentence, which the model
        // reads cut to its length, not thousands of pseudo-sentences to decode).
        let mut inside_a_word = false;
        for (window, cut) in windows(line) {
            let mut first = true;
            for piece in sentencex::segment(&self.language, &line[window]) {
                let start = piece.as_ptr() as usize - base;
                let mut from = start;
                let mut pieces = Vec::new();
                for further in further_starts(language.as_ref(), piece) {
                    pieces.extend(trimmed(line, from..start + further));
                    from = start + further;
                }
                pieces.extend(trimmed(line, from..start + piece.len()));
                for range in pieces {
                    match ranges.last_mut() {
                        Some(last) if first && inside_a_word => last.end = range.end,
                        _ => ranges.push(range),
                    }
                    first = false;
                }
            }
            inside_a_word = cut == WindowCut::InsideAWord;
        }
        mend(language.as_ref(), line, ranges)
    }
}

/// `range` of `line` without its leading and trailing whitespace; none when that leaves
/// nothing.
fn trimmed(line: &str, range: Range<usize>) -> Option<Range<usize>> {
    let piece = &line[range.clone()];
    let start = range.start + (piece.len() - piece.trim_start().len());
    let end = range.start + piece.trim_end().len();
    (end > start).then_some(start..end)
}

/// One part of a text as it is put back together.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Part {
    /// Whitespace and line breaks, kept as they were.
    Verbatim(String),
    /// The translation of sentence `n` of the batch.
    Sentence(usize),
}

/// Texts cut into one list of sentences, and how to put each text back together from their
/// translations.
#[derive(Debug, Default)]
pub struct SentenceBatch {
    sentences: Vec<String>,
    texts: Vec<Vec<Part>>,
}

impl SentenceBatch {
    /// Cuts each of `texts` into sentences at line breaks (`\r\n` read as `\n`) and, where
    /// the splitter is on, sentence boundaries.
    pub fn new<S: AsRef<str>>(splitter: &SentenceSplitter, texts: &[S]) -> Self {
        let mut batch = Self::default();
        for text in texts {
            batch.push(splitter, text.as_ref());
        }
        batch
    }

    fn push(&mut self, splitter: &SentenceSplitter, text: &str) {
        let mut parts = Vec::new();
        for (i, line) in text.split('\n').enumerate() {
            if i > 0 {
                verbatim(&mut parts, "\n");
            }
            // A `\r\n` line break goes back as it came.
            let (line, carriage_return) = match line.strip_suffix('\r') {
                Some(line) => (line, "\r"),
                None => (line, ""),
            };
            let mut at = 0;
            for range in splitter.sentences_of_line(line) {
                // Brackets around a whole sentence stay as they are around its translation.
                let inside = inside_brackets(&line[range.clone()]);
                let range = range.start + inside.start..range.start + inside.end;
                let sentence = &line[range.clone()];
                if !worth_translating(sentence) {
                    continue;
                }
                verbatim(&mut parts, &line[at..range.start]);
                parts.push(Part::Sentence(self.sentences.len()));
                self.sentences.push(sentence.to_string());
                at = range.end;
            }
            verbatim(&mut parts, &line[at..]);
            verbatim(&mut parts, carriage_return);
        }
        self.texts.push(parts);
    }

    /// Every sentence of every text, in order.
    pub fn sentences(&self) -> &[String] {
        &self.sentences
    }

    /// The sentences of each text, for limits checked per text.
    pub fn sentences_per_text(&self) -> impl Iterator<Item = usize> + '_ {
        self.texts.iter().map(|parts| {
            parts
                .iter()
                .filter(|p| matches!(p, Part::Sentence(_)))
                .count()
        })
    }

    /// The numbers of text `index`'s sentences in [`Self::sentences`].
    pub fn sentence_range(&self, index: usize) -> impl Iterator<Item = usize> + '_ {
        self.texts[index].iter().filter_map(|part| match part {
            Part::Sentence(n) => Some(*n),
            Part::Verbatim(_) => None,
        })
    }

    pub fn text_count(&self) -> usize {
        self.texts.len()
    }

    /// Text `index` put back together, each sentence `n` replaced by `translated(n)`.
    pub fn join_with<'a>(&self, index: usize, translated: impl Fn(usize) -> &'a str) -> String {
        let mut out = String::new();
        for part in &self.texts[index] {
            match part {
                Part::Verbatim(text) => out.push_str(text),
                Part::Sentence(n) => out.push_str(translated(*n)),
            }
        }
        out
    }

    /// Every text put back together from its sentences' translations (in `sentences()`'s
    /// order).
    pub fn join_all<S: AsRef<str>>(&self, translations: &[S]) -> Vec<String> {
        (0..self.texts.len())
            .map(|i| self.join_with(i, |n| translations[n].as_ref()))
            .collect()
    }
}

/// Whether a sentence goes to the model: one without a letter (a number, a price, "...")
/// or a lone web or mail address reads the same in every language, and the model would
/// only invent a sentence for it.
fn worth_translating(sentence: &str) -> bool {
    let address = !sentence.contains(char::is_whitespace)
        && (sentence.contains("://") || sentence.contains('@') || sentence.starts_with("www."));
    // A list item's marker alone (`a)`, `(iv)`) is kept as it is.
    let marker = marker_len(sentence) == Some(sentence.len());
    sentence.chars().any(char::is_alphabetic) && !address && !marker
}

fn verbatim(parts: &mut Vec<Part>, text: &str) {
    if text.is_empty() {
        return;
    }
    if let Some(Part::Verbatim(last)) = parts.last_mut() {
        last.push_str(text);
    } else {
        parts.push(Part::Verbatim(text.to_string()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(crate) fn german() -> SentenceSplitter {
        SentenceSplitter::new(Some("de"), true)
    }

    pub(crate) fn sentences(splitter: &SentenceSplitter, text: &str) -> Vec<String> {
        SentenceBatch::new(splitter, &[text]).sentences().to_vec()
    }

    #[test]
    fn a_paragraph_is_cut_into_sentences_and_put_back_with_its_whitespace() {
        let text = "  Ich bin hier.  Du bist dort!\n\nWo ist er?\r\nEnde 3,50 €";
        let batch = SentenceBatch::new(&german(), &[text]);
        assert_eq!(
            batch.sentences(),
            [
                "Ich bin hier.",
                "Du bist dort!",
                "Wo ist er?",
                "Ende 3,50 €"
            ]
        );
        let upper: Vec<String> = batch.sentences().iter().map(|s| s.to_uppercase()).collect();
        assert_eq!(
            batch.join_all(&upper),
            ["  ICH BIN HIER.  DU BIST DORT!\n\nWO IST ER?\r\nENDE 3,50 €"]
        );
    }

    #[test]
    fn german_abbreviations_and_ordinals_do_not_end_a_sentence() {
        assert_eq!(
            sentences(
                &german(),
                "Wir kommen am 3. Mai um 14 Uhr. Bring z. B. Brot mit, bzw. Käse."
            ),
            [
                "Wir kommen am 3. Mai um 14 Uhr.",
                "Bring z. B. Brot mit, bzw. Käse."
            ]
        );
    }

    #[test]
    fn switched_off_each_line_is_one_sentence() {
        let splitter = SentenceSplitter::new(Some("de"), false);
        assert_eq!(
            sentences(&splitter, "Eins. Zwei.\nDrei."),
            ["Eins. Zwei.", "Drei."]
        );
    }

    #[test]
    fn blank_texts_and_lines_have_no_sentences() {
        let batch = SentenceBatch::new(
            &german(),
            &["", " \n\t", "a", "42. 3,50 € ...", "https://x.de/a"],
        );
        assert_eq!(batch.sentences(), ["a"]);
        assert_eq!(
            batch.sentences_per_text().collect::<Vec<_>>(),
            [0, 0, 1, 0, 0]
        );
        assert_eq!(
            batch.join_all(&["b"]),
            ["", " \n\t", "b", "42. 3,50 € ...", "https://x.de/a"]
        );
    }

    #[test]
    fn list_numbers_and_closing_brackets_stay_on_their_side_of_a_sentence_end() {
        assert_eq!(
            sentences(
                &german(),
                "1. Ein Kind spielt im Wasser. 2. Zwei Männer stehen am Herd."
            ),
            // The numbers have no word to translate: they stay as they are, between.
            ["Ein Kind spielt im Wasser.", "Zwei Männer stehen am Herd."]
        );
        assert_eq!(
            sentences(
                &german(),
                "(Ein Kind spielt im Wasser.) Zwei Männer stehen am Herd."
            ),
            // The brackets around a whole sentence stay as they are, around its translation.
            ["Ein Kind spielt im Wasser.", "Zwei Männer stehen am Herd."]
        );
        // An ordinal inside a sentence is not a list number.
        assert_eq!(
            sentences(&german(), "Wir kommen am 3. Mai. Bring Brot mit."),
            ["Wir kommen am 3. Mai.", "Bring Brot mit."]
        );
        // Joined back, nothing is lost: the numbers stay, and so do the spaces.
        let text = "1. Ein Kind spielt. 2. Zwei Männer stehen.) Drei Hunde.";
        let batch = SentenceBatch::new(&german(), &[text]);
        assert_eq!(batch.join_all(batch.sentences()), [text]);
        let shown: Vec<&str> = batch.sentences().iter().map(String::as_str).collect();
        assert_eq!(
            shown,
            ["Ein Kind spielt.", "Zwei Männer stehen.", "Drei Hunde."]
        );
        // Markers of the form `2)` and `(2)` end the sentence before them and are kept as
        // they are; a bracket nothing opens stays out of the sentence.
        for text in [
            "1) Ein Hund läuft. 2) Eine Katze schläft.",
            "Ein Hund läuft. (2) Eine Katze schläft.",
            "Zwei Hunde spielen im Wasser.) Zwei Katzen schlafen.",
            "(Ein Hund läuft.) Eine Katze schläft.",
            "Ein Hund läuft. (Eine Katze schläft.)",
            "a) Ein Hund läuft. b) Eine Katze schläft.",
            "ii) Ein Hund läuft. iv) Eine Katze schläft.",
            "Ein Hund läuft. 2) 3) Eine Katze schläft.",
            "Ein Hund läuft. Eine Katze schläft. (2)",
            "Ein Hund läuft. Eine Katze schläft. [2]",
        ] {
            let batch = SentenceBatch::new(&german(), &[text]);
            assert_eq!(batch.join_all(batch.sentences()), [text]);
            assert_eq!(batch.sentences().len(), 2, "{:?}", batch.sentences());
            let whole = |s: &String| s.starts_with(char::is_alphabetic) && s.ends_with('.');
            assert!(
                batch.sentences().iter().all(whole),
                "{:?}",
                batch.sentences()
            );
        }
    }

    #[test]
    fn a_region_code_picks_its_language() {
        assert_eq!(SentenceSplitter::new(Some("DE-at"), true).language, "de");
        assert_eq!(SentenceSplitter::new(None, true).language, "en");
    }
}
