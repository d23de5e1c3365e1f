//! The sentence ends a segment holds, by language, style and case.

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
