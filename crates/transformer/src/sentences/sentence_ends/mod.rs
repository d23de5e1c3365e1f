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

use sentencex::languages::Language;

/// Characters that may close a sentence after its terminator (`"ja." sagte er`).
pub(super) const CLOSERS: &[char] = &['"', '\'', '»', '«', '”', '“', '’', '‘', ')', ']', '}'];
/// The closers that are quotation marks (a quotation may be followed by who said it).
const QUOTES: &[char] = &['"', '\'', '»', '«', '”', '“', '’', '‘'];
/// Dashes that may open a line of dialogue (`— ja. — nein.`).
const DASHES: &[char] = &['—', '–'];
/// Characters that may open a sentence before its first word.
const OPENERS: &[char] = &['"', '\'', '„', '“', '‚', '‘', '«', '»', '(', '[', '¿', '¡'];

/// The characters that end a sentence.
pub(super) const TERMINATORS: &[char] = &['.', '!', '?', '…'];

/// The length of the list marker `text` starts with (`2)`, `(2)`, `12.`: one to three digits)
/// when a space and a letter follow it; `None` otherwise.
pub(super) fn list_marker_len(text: &str) -> Option<usize> {
    let marker = marker_len(text)?;
    let rest = &text[marker..];
    let letter = rest
        .trim_start()
        .trim_start_matches(OPENERS)
        .starts_with(|c: char| c.is_alphabetic() || c.is_ascii_digit() || c == '(');
    (rest.starts_with(char::is_whitespace) && letter).then_some(marker)
}

/// The length of the list marker `text` starts with, whatever follows: one to three digits
/// (`2)`, `(2)`, `2.`), a letter or a small roman numeral (`a)`, `(b)`, `iv)`: a bracket only,
/// as `a.` is a word's end as often).
pub(super) fn marker_len(text: &str) -> Option<usize> {
    let open = usize::from(text.starts_with('('));
    let body = &text[open..];
    let digits = body.bytes().take_while(u8::is_ascii_digit).count();
    let letters = body.bytes().take_while(|b| b.is_ascii_lowercase()).count();
    let roman = body[..letters]
        .bytes()
        .all(|b| matches!(b, b'i' | b'v' | b'x'));
    let (label, dot) = if (1..=3).contains(&digits) {
        (digits, true)
    } else if letters == 1 || (roman && (1..=4).contains(&letters)) {
        (letters, false)
    } else {
        return None;
    };
    match (open, body[label..].chars().next()) {
        (1, Some(')')) | (0, Some(')')) => Some(open + label + 1),
        (0, Some('.')) if dot => Some(label + 1),
        _ => None,
    }
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
pub(super) fn whole_word_before(language: &dyn Language, head: &str) -> bool {
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
mod tests;
