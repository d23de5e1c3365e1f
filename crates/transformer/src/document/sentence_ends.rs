//! Sentence ends the segmenter leaves inside a segment. sentencex reads a full stop before a
//! lowercase word or a digit as part of the sentence (an abbreviation, an ordinal), and
//! splits nothing inside quotes: right for edited prose, wrong for lowercased or
//! pre-tokenized text (`ich mochte ein bier . ich mochte ein cola .`), where a model trained
//! on one sentence a line then translates one sentence of the two and drops the other. This
//! pass cuts a segment again wherever `.`, `!` or `?` (closing quotes or brackets after it
//! allowed) is followed by a space and a word, unless the segmenter's own language rules
//! know the word before it: an abbreviation (`z. B.`, `usw.`, `Nr.`), an initial, a number
//! (`am 3. mai`), an exclamation word (`Yahoo!`). An ellipsis (`...`, `…`) before a word
//! runs on as often as it ends: in cased text the case of that word tells (the segmenter
//! already cut before a capital), in text without capitals nothing tells, and a cut there
//! costs a fragment translated alone where no cut can cost a whole sentence.

use std::ops::Range;

use sentencex::languages::Language;

/// Characters that may close a sentence after its terminator (`"ja." sagte er`).
const CLOSERS: &[char] = &['"', '\'', '»', '«', '”', '“', '’', '‘', ')', ']', '}'];
/// The closers that are quotation marks (a quotation may be followed by who said it).
const QUOTES: &[char] = &['"', '\'', '»', '«', '”', '“', '’', '‘'];
/// Dashes that may open a line of dialogue (`— ja. — nein.`).
const DASHES: &[char] = &['—', '–'];
/// Characters that may open a sentence before its first word.
const OPENERS: &[char] = &['"', '\'', '„', '“', '‚', '‘', '«', '»', '(', '[', '¿', '¡'];

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
        // A list item's marker at the start is a piece of its own, kept as it is.
        if let Some(marker) = list_marker_len(&line[range.clone()]) {
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

/// The characters that end a sentence.
const TERMINATORS: &[char] = &['.', '!', '?', '…'];

/// The length of the list marker `text` starts with (`2)`, `(2)`, `12.`: one to three digits)
/// when a space and a letter follow it; `None` otherwise.
fn list_marker_len(text: &str) -> Option<usize> {
    let open = usize::from(text.starts_with('('));
    let digits = text[open..].bytes().take_while(u8::is_ascii_digit).count();
    if !(1..=3).contains(&digits) {
        return None;
    }
    let close = &text[open + digits..];
    let marker = match (open, close.chars().next()) {
        (1, Some(')')) | (0, Some(')' | '.')) => open + digits + 1,
        _ => return None,
    };
    let rest = &text[marker..];
    let letter = rest
        .trim_start()
        .trim_start_matches(OPENERS)
        .starts_with(char::is_alphabetic);
    (rest.starts_with(char::is_whitespace) && letter).then_some(marker)
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

/// Where a list number (`2.`, `12)`) that ends `piece` after a sentence end starts: after a
/// whole word ([`whole_word_before`]), not an abbreviation's number (`Abb. 5.`).
fn list_number_at_end(language: &dyn Language, piece: &str) -> Option<usize> {
    let body = piece.strip_suffix(['.', ')'])?;
    let digits = body.len() - body.trim_end_matches(|c: char| c.is_ascii_digit()).len();
    if !(1..=3).contains(&digits) {
        return None;
    }
    let number = body.len() - digits;
    let before = body[..number].trim_end_matches(char::is_whitespace);
    let spaced = before.len() < number;
    let unclosed = before.trim_end_matches(|c| CLOSERS.contains(&c));
    let ended = unclosed.ends_with(|c| TERMINATORS.contains(&c));
    let head = &unclosed[..unclosed.len().saturating_sub(1)];
    (spaced && ended && whole_word_before(language, head)).then_some(number)
}

/// The byte offsets inside `segment` where a further sentence starts, by `language`'s rules;
/// none where the segment holds one sentence.
pub(super) fn further_starts(language: &dyn Language, segment: &str) -> Vec<usize> {
    let bytes = segment.as_bytes();
    let uncased = !segment.chars().any(char::is_uppercase);
    let mut starts = Vec::new();
    let mut at = 0;
    while at < bytes.len() {
        if terminator_len(segment, at) == 0 {
            at += 1;
            continue;
        }
        let run_start = at;
        while at < bytes.len() {
            match terminator_len(segment, at) {
                0 => break,
                len => at += len,
            }
        }
        let run = &segment[run_start..at];
        let after_closers = skip_closers(segment, at);
        let Some(next) = next_word_start(segment, after_closers) else {
            continue;
        };
        // An exclamation or question quoted and followed by a lowercase word is part of a
        // sentence (`„komm!“ rief sie`, `"where?" he asked`); a quoted statement ends with
        // its full stop.
        let quoted = segment[at..after_closers].contains(|c| QUOTES.contains(&c));
        let continues_quote =
            quoted && run != "." && segment[next..].starts_with(char::is_lowercase);
        if !continues_quote
            && ends_sentence(
                language,
                &segment[..run_start],
                run,
                &segment[next..],
                uncased,
            )
        {
            starts.push(next);
        }
        at = next;
    }
    starts
}

/// The length in bytes of the terminator at `at` (`.`, `!`, `?` or `…`); 0 where none is.
fn terminator_len(text: &str, at: usize) -> usize {
    match text.as_bytes()[at] {
        b'.' | b'!' | b'?' => 1,
        // Bytes, not a slice of the text: `at` may stand inside another character.
        _ if text.as_bytes()[at..].starts_with("…".as_bytes()) => ELLIPSIS.len_utf8(),
        _ => 0,
    }
}

const ELLIPSIS: char = '…';

/// The offset after any closing quotes and brackets at `at`, and after a token of them alone
/// that follows (pre-tokenized text: `bestreite . “ weißt du`).
fn skip_closers(text: &str, at: usize) -> usize {
    let rest = &text[at..];
    let at = at + (rest.len() - rest.trim_start_matches(CLOSERS).len());
    let rest = &text[at..];
    let token_start = rest.len() - rest.trim_start().len();
    let token = rest[token_start..]
        .split(char::is_whitespace)
        .next()
        .unwrap_or("");
    let standalone =
        token_start > 0 && !token.is_empty() && token.chars().all(|c| CLOSERS.contains(&c));
    if standalone {
        at + token_start + token.len()
    } else {
        at
    }
}

/// Where the next sentence would start when `at` is followed by whitespace and then a word
/// with a letter or digit in it: an opening quote may come first, or a dash or an opening
/// quote standing alone (`— nein.`, as dialogue is written; `„ kommst du ?`, pre-tokenized).
fn next_word_start(text: &str, at: usize) -> Option<usize> {
    let rest = &text[at..];
    let word = rest.trim_start();
    if word.len() == rest.len() || word.is_empty() {
        return None;
    }
    let start = text.len() - word.len();
    let first_word = word.split(char::is_whitespace).next().unwrap_or("");
    if first_word.chars().any(char::is_alphanumeric) {
        return Some(start);
    }
    // A dash, or an opening mark that closes nothing (`„`, `(`; `"` could be either).
    let lead_in = first_word
        .chars()
        .all(|c| DASHES.contains(&c) || (OPENERS.contains(&c) && !CLOSERS.contains(&c)));
    let after = word[first_word.len()..].trim_start();
    let second = after.split(char::is_whitespace).next().unwrap_or("");
    (lead_in && second.chars().any(char::is_alphanumeric)).then_some(start)
}

/// Whether the sentence starting `next` starts with a letter, after any opening quote,
/// bracket or dialogue dash.
fn starts_with_letter(next: &str) -> bool {
    next.trim_start_matches(|c: char| OPENERS.contains(&c) || DASHES.contains(&c))
        .trim_start()
        .trim_start_matches(OPENERS)
        .starts_with(char::is_alphabetic)
}

/// Whether the terminator `run` between `head` and the word starting `next` ends a sentence;
/// `uncased`: the segment has no capital letter, so the case of `next` tells nothing.
fn ends_sentence(
    language: &dyn Language,
    head: &str,
    run: &str,
    next: &str,
    uncased: bool,
) -> bool {
    // An ellipsis (two or more full stops, or `…`) runs on as often as it ends; where case
    // cannot tell, cut: a fragment translated alone loses nothing, a sentence left inside
    // another is often not translated at all.
    let ellipsis = run.contains(ELLIPSIS) || (run.len() > 1 && run.bytes().all(|b| b == b'.'));
    if ellipsis {
        return uncased && starts_with_letter(next);
    }
    // Pre-tokenized text: a terminator standing alone as a token ends the sentence before
    // it (but a spaced ellipsis, `. . .`, does not).
    if head.ends_with(char::is_whitespace) {
        return last_word(head.trim_end())
            .chars()
            .any(char::is_alphanumeric);
    }
    // A number after a full stop mostly follows an abbreviation the lists lack (`Abs. 3`,
    // `Tel. 030`, `Hauptstr. 7`); a sentence starting with a digit is the rarer reading, but
    // a count of things after a whole word is one (`...Dschungellandschaft. 2 blonde Mädchen
    // sitzen`): left inside the sentence before it, the model drops it.
    if !starts_with_letter(next) {
        // A list item's marker (`2)`, `(2)`, `2.`) and a word: the next item, after a whole
        // word's full stop or after `!` or `?`.
        if list_marker_len(next).is_some() {
            return run != "." || whole_word_before(language, head);
        }
        return run == "." && counts_things(language, head, next);
    }
    if run != "." {
        return !language.is_exclamation(head, "");
    }
    let word = last_word(head);
    // `b.` of `z. b.`, an initial, or letters joined by dots (`p.m.`, `u.s.a.`).
    let initials = word.chars().any(char::is_alphabetic)
        && word
            .split('.')
            .all(|part| part.chars().count() <= 1 && part.chars().all(char::is_alphabetic));
    // An ordinal (`am 3. mai`, `im 19. jahrhundert`); a year (`1945.`, `31.12.2025.`) is
    // rarely one, and ends its sentence.
    let number = word.ends_with(|c: char| c.is_ascii_digit()) && !ends_in_year(word);
    let abbreviation = language.is_abbreviation(head, "", ".")
        || language.is_multi_dot_abbreviation(head, dotless_last_word(head).len());
    !(word.is_empty() || initials || number || abbreviation)
}

/// Whether `next`, after `head` and a full stop, starts a sentence with a count: one to three
/// digits and a word (not an acronym: `Abs. 3 BGB`), after a whole word
/// ([`whole_word_before`]: not `Tel. 030`, `Hauptstr. 7`).
fn counts_things(language: &dyn Language, head: &str, next: &str) -> bool {
    let mut words = next.split_whitespace();
    let (Some(number), Some(then)) = (words.next(), words.next()) else {
        return false;
    };
    let count = (1..=3).contains(&number.len()) && number.bytes().all(|b| b.is_ascii_digit());
    let letters = then.trim_end_matches(|c: char| !c.is_alphanumeric());
    let a_word = letters.chars().count() >= 2
        && letters.chars().all(char::is_alphabetic)
        && letters.chars().any(char::is_lowercase);
    count && a_word && whole_word_before(language, head)
}

/// Whether `head` (the text before a full stop) ends in a whole word: at least four letters
/// with a lowercase one, that the language's lists do not know as an abbreviation and that is
/// no street's (`Hauptstr.`: German's abbreviation of Straße ends street names in addresses).
fn whole_word_before(language: &dyn Language, head: &str) -> bool {
    let before = last_word(head);
    let street = before.to_lowercase().ends_with("str");
    let whole_word = before.chars().count() >= 4
        && before.chars().all(char::is_alphabetic)
        && before.chars().any(char::is_lowercase)
        && !street;
    let abbreviation = language.is_abbreviation(head, "", ".")
        || language.is_multi_dot_abbreviation(head, dotless_last_word(head).len());
    whole_word && !abbreviation
}

/// Whether `word`'s trailing digits are four (a year, or a date's year).
fn ends_in_year(word: &str) -> bool {
    let digits = word.len() - word.trim_end_matches(|c: char| c.is_ascii_digit()).len();
    let before = word[..word.len() - digits].chars().next_back();
    digits == 4 && before.is_none_or(|c| c == '.' || !c.is_alphanumeric())
}

/// The last whitespace-separated word of `head`, with any opening quote or bracket removed.
fn last_word(head: &str) -> &str {
    head.rsplit(char::is_whitespace)
        .next()
        .unwrap_or("")
        .trim_start_matches(OPENERS)
}

/// The last word as the segmenter cuts it (at whitespace, `.` and `/`), whose length its
/// multi-dot abbreviation check wants.
fn dotless_last_word(head: &str) -> &str {
    head.trim_end()
        .rsplit(|c: char| c.is_whitespace() || c == '.' || c == '/')
        .next()
        .unwrap_or("")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cut<'a>(code: &str, segment: &'a str) -> Vec<&'a str> {
        let language = sentencex::language_factory(code);
        let mut pieces = Vec::new();
        let mut from = 0;
        for start in further_starts(language.as_ref(), segment) {
            pieces.push(segment[from..start].trim());
            from = start;
        }
        pieces.push(segment[from..].trim());
        pieces
    }

    #[test]
    fn lowercase_and_pre_tokenized_sentences_are_cut() {
        assert_eq!(
            cut("de", "ich mochte ein bier . ich mochte ein cola ."),
            ["ich mochte ein bier .", "ich mochte ein cola ."]
        );
        assert_eq!(
            cut("de", "das ist gut. wir gehen jetzt! kommst du? ja."),
            ["das ist gut.", "wir gehen jetzt!", "kommst du?", "ja."]
        );
        assert_eq!(
            cut("en", "it was late . 3 men stood outside ."),
            ["it was late .", "3 men stood outside ."]
        );
    }

    #[test]
    fn abbreviations_initials_ordinals_and_ellipses_are_not_ends() {
        for segment in [
            "wir brauchen obst, z. b. äpfel und birnen.",
            "er kam am 3. mai und blieb bis zum 19. juni.",
            "möhren, lauch usw. sind im angebot.",
            "das haus nr. 5 ist rot.",
            "nach abs. 3 gilt die frist, tel. 030 1234.",
            "j. r. r. tolkien schrieb bücher.",
            "Ich weiß nicht ... vielleicht morgen.",
            "Ich versuchte, ihn zu überreden... ohne Erfolg.",
            "Er zögerte … und ging dann doch.",
            "dies gilt u.a. für kinder.",
        ] {
            assert_eq!(cut("de", segment), [segment], "{segment}");
        }
        assert_eq!(
            cut(
                "en",
                "see e.g. mr. smith at 5 p.m. today, or dogs vs. cats."
            ),
            ["see e.g. mr. smith at 5 p.m. today, or dogs vs. cats."]
        );
    }

    #[test]
    fn a_year_ends_a_sentence_where_an_ordinal_does_not() {
        assert_eq!(
            cut("de", "der krieg endete 1945. in asien dauerte er länger."),
            ["der krieg endete 1945.", "in asien dauerte er länger."]
        );
        assert_eq!(
            cut(
                "de",
                "er läuft bis zum 31.12.2025. eine verlängerung ist möglich."
            ),
            [
                "er läuft bis zum 31.12.2025.",
                "eine verlängerung ist möglich."
            ]
        );
        let ordinal = "zu seinem 100. geburtstag kam er.";
        assert_eq!(cut("de", ordinal), [ordinal]);
    }

    #[test]
    fn dialogue_opened_by_a_dash_or_quotes_alone_is_cut() {
        assert_eq!(
            cut("de", "— kommst du? — ja. — gut."),
            ["— kommst du?", "— ja.", "— gut."]
        );
        // A quotation mark standing alone after a stop closes the sentence before it.
        assert_eq!(
            cut(
                "de",
                "sie sagte: „ich bleibe . “ er ging . „ kommst du ? “ fragte sie ."
            ),
            [
                "sie sagte: „ich bleibe . “",
                "er ging .",
                "„ kommst du ? “ fragte sie ."
            ]
        );
    }

    #[test]
    fn a_bracket_is_not_a_quotation() {
        assert_eq!(
            cut(
                "de",
                "wir fuhren los. (das war ein fehler!) nach zehn kilometern hielten wir."
            ),
            [
                "wir fuhren los.",
                "(das war ein fehler!)",
                "nach zehn kilometern hielten wir."
            ]
        );
    }

    #[test]
    fn a_sentence_inside_quotes_ends_after_its_closing_quote() {
        assert_eq!(
            cut("de", "„komm her!“ rief sie. er kam."),
            ["„komm her!“ rief sie.", "er kam."]
        );
        assert_eq!(
            cut(
                "en",
                "she said \"we are late.\" they ran. \"where?\" he asked."
            ),
            [
                "she said \"we are late.\"",
                "they ran.",
                "\"where?\" he asked."
            ]
        );
    }

    #[test]
    fn a_terminator_without_a_word_after_it_ends_nothing() {
        for segment in [
            "ja. ",
            "ja ! ?",
            "es kostet 3.5 kg",
            "so . . . weiter",
            "Eh... na ja",
            "warte …",
        ] {
            assert_eq!(cut("de", segment), [segment.trim()], "{segment}");
        }
    }

    #[test]
    fn an_ellipsis_before_a_word_is_cut_where_case_cannot_tell() {
        assert_eq!(
            cut("de", "ich mochte ein bier... ich mochte ein cola"),
            ["ich mochte ein bier...", "ich mochte ein cola"]
        );
        assert_eq!(
            cut("de", "ich mochte ein bier… ich mochte ein cola"),
            ["ich mochte ein bier…", "ich mochte ein cola"]
        );
        assert_eq!(
            cut("de", "ich weiß nicht ... vielleicht morgen."),
            ["ich weiß nicht ...", "vielleicht morgen."]
        );
    }
}
