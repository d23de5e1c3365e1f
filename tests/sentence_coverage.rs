//! Every sentence that goes in comes out: paragraphs written as corpora and people write
//! them (lowercased, pre-tokenized, quoted, full of abbreviations), in German and English,
//! are cut into as many sentences as they hold, and each is translated (one `</s>` per
//! sentence in `translate --json`). A translation much shorter than its source is marked
//! `short` by `translate --json`, `/v1/translate` and LibreTranslate's `/translate`.

mod common;

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use common::server::{post_json, Server};
use common::{succeeded, trained_once, transformer, translated_json};
use serde_json::{json, Value};

/// Paragraphs as their sentences, in each style the splitter must see through.
const GERMAN: &[&[&str]] = &[
    // lowercased
    &[
        "ich mochte ein bier.",
        "ich mochte eine cola.",
        "wir gehen jetzt nach hause!",
    ],
    &["wo ist der bahnhof?", "er ist dort drüben.", "danke!"],
    // pre-tokenized
    &["ich mochte ein bier .", "ich mochte ein cola ."],
    &[
        "ein mann fährt fahrrad .",
        "zwei hunde spielen im schnee ?",
        "eine frau liest ein buch !",
    ],
    // an ellipsis where case cannot tell whether it ends a sentence
    &["ich mochte ein bier...", "ich mochte ein cola."],
    &["ich weiß nicht …", "vielleicht morgen."],
    // quoted
    &["„komm her!“ rief sie.", "er kam sofort."],
    &["er sagte: „ich bleibe hier.“", "dann ging er."],
    &["„Wo bist du?“ fragte er.", "Niemand antwortete."],
    // abbreviation-heavy, lowercased and as written
    &[
        "wir brauchen obst, z. b. äpfel und birnen.",
        "bring bitte auch brot usw. mit.",
        "das treffen ist am 3. mai um 14 uhr.",
    ],
    &[
        "Wir brauchen Obst, z. B. Äpfel und Birnen.",
        "Dr. Meier kommt um 14 Uhr.",
        "Das Haus Nr. 5 ist rot.",
    ],
    &[
        "die firma hat ca. 20 mitarbeiter, d. h. sie ist klein.",
        "sie wurde im 19. jahrhundert gegründet.",
    ],
];

const ENGLISH: &[&[&str]] = &[
    &["i want a beer.", "you want a coke.", "we go home now!"],
    &["where is the station?", "it is over there.", "thanks!"],
    &[
        "a man rides a bike .",
        "two dogs play in the snow ?",
        "a woman reads a book .",
    ],
    &["i want a beer...", "you want a coke."],
    &["\"come here!\" she shouted.", "he came at once."],
    &["she said \"we are late.\"", "they ran."],
    &[
        "mr. smith met dr. jones at 5 p.m. on friday.",
        "they talked about e.g. cats vs. dogs.",
        "then they left.",
    ],
    &[
        "The U.S. team won, i.e. they got gold.",
        "Prof. Lee was there.",
    ],
];

/// `sentences --lang LANG --json` of each paragraph (its sentences joined by one space).
fn cut(lang: &str, paragraphs: &[&[&str]]) -> Vec<Vec<String>> {
    let input: Vec<String> = paragraphs.iter().map(|p| p.join(" ")).collect();
    let output = succeeded(
        transformer()
            .args(["sentences", "--lang", lang, "--json"])
            .write_stdin(input.join("\n") + "\n"),
    );
    String::from_utf8(output.stdout)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}

#[test]
fn every_sentence_of_every_style_of_paragraph_is_found() {
    for (lang, paragraphs) in [("de", GERMAN), ("en", ENGLISH)] {
        let found = cut(lang, paragraphs);
        assert_eq!(found.len(), paragraphs.len());
        for (gold, found) in paragraphs.iter().zip(&found) {
            assert_eq!(found, gold, "{lang}");
        }
    }
}

/// The tiny toy model (lowercase German, one sentence a line), with `source_lang` set to
/// `lang`, trained once per language.
fn toy_model(lang: &'static str) -> PathBuf {
    static DE: OnceLock<PathBuf> = OnceLock::new();
    static EN: OnceLock<PathBuf> = OnceLock::new();
    let cell = if lang == "de" { &DE } else { &EN };
    cell.get_or_init(|| {
        trained_once(&format!("coverage-{lang}"), |_| {
            let toy = Path::new("data/toy.tsv").canonicalize().unwrap();
            std::fs::read_to_string("configs/tiny.toml")
                .unwrap()
                .replace("data/toy.tsv", &toy.display().to_string())
                .replace("source_lang = \"de\"", &format!("source_lang = \"{lang}\""))
        })
    })
    .clone()
}

/// `translate --json` of each paragraph with `checkpoint`, decoding at most 20 tokens.
fn translated(checkpoint: &Path, paragraphs: &[String], flags: &[&str]) -> Vec<Value> {
    let mut all = vec!["--max-len", "20"];
    all.extend_from_slice(flags);
    translated_json(checkpoint, paragraphs, &all)
}

fn ends(translation: &Value) -> usize {
    translation["tokens"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| *t == "</s>")
        .count()
}

#[test]
fn every_sentence_of_every_paragraph_is_translated() {
    for (lang, paragraphs) in [("de", GERMAN), ("en", ENGLISH)] {
        let model = toy_model(lang);
        let input: Vec<String> = paragraphs.iter().map(|p| p.join(" ")).collect();
        let out = translated(&model, &input, &[]);
        assert_eq!(out.len(), paragraphs.len());
        for (gold, translation) in paragraphs.iter().zip(&out) {
            assert_eq!(ends(translation), gold.len(), "{lang}: {translation}");
        }
    }
}

#[test]
fn the_lowercase_toy_line_gives_both_sentences() {
    let output = succeeded(
        transformer()
            .args(["translate", "--checkpoint"])
            .arg(toy_model("de"))
            .arg("ich mochte ein bier . ich mochte ein cola ."),
    );
    assert_eq!(
        String::from_utf8(output.stdout).unwrap().trim(),
        "i want a beer . i want a coke ."
    );
}

#[test]
fn a_translation_much_shorter_than_its_source_is_marked_short() {
    let model = toy_model("de");
    let two = "ich mochte ein bier . ich mochte ein cola .".to_string();
    // Read as one sentence, the model translates one of the two: marked, and warned about.
    let output = succeeded(
        transformer()
            .args(["translate", "--json", "--no-sentence-split", "--checkpoint"])
            .arg(&model)
            .arg(&two),
    );
    let whole: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(whole["short"], json!(true), "{whole}");
    assert!(String::from_utf8_lossy(&output.stderr).contains("a sentence may be missing"));
    // Cut into sentences, or a sentence alone: not marked (the field is left out).
    let cut = &translated(&model, &[two.clone(), "ich mochte ein bier".into()], &[]);
    assert!(cut.iter().all(|t| t.get("short").is_none()), "{cut:?}");
    // The ratio it is measured against is the training pairs', kept in the checkpoint.
    let config = std::fs::read_to_string(model.join("last/config.toml")).unwrap();
    assert!(config.contains("length_ratio = 1.25"), "{config}");

    let server = Server::start_with(&model, &["--no-sentence-split"]);
    let (status, body) = post_json(
        &server.url("/v1/translate"),
        &json!({ "q": [two, "ich mochte ein bier"] }),
    );
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["translations"][0]["short"], json!(true), "{body}");
    assert!(body["translations"][1].get("short").is_none(), "{body}");
    let (status, body) = post_json(
        &server.url("/translate"),
        &json!({ "q": two, "source": "de", "target": "en" }),
    );
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["short"], json!(true), "{body}");
    let (status, body) = post_json(
        &server.url("/translate"),
        &json!({ "q": ["ich mochte ein bier", two], "source": "de", "target": "en" }),
    );
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["short"], json!([false, true]), "{body}");
    let (status, body) = post_json(
        &server.url("/translate"),
        &json!({ "q": "ich mochte ein bier", "source": "de", "target": "en" }),
    );
    assert_eq!(status, 200, "{body}");
    assert!(body.get("short").is_none(), "{body}");
}

#[test]
fn a_megabyte_line_of_quotes_or_sentences_is_cut_whole_in_linear_time() {
    // The segmenter's quote matching is quadratic in what it is given: a line of 40,000 `“`
    // took 9 s and 500,000 did not end. Cut in windows, each line here takes a second or so;
    // every character comes back in order.
    for line in [
        "“ ".repeat(500_000),
        ". “ ".repeat(250_000),
        "Wir kommen. „ ".repeat(80_000),
    ] {
        let output = succeeded(
            transformer()
                .args(["sentences", "--lang", "de", "--json"])
                .write_stdin(format!("{line}\n")),
        );
        let found: Vec<Vec<String>> = String::from_utf8(output.stdout)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        let visible = |text: &str| text.split_whitespace().collect::<String>();
        assert_eq!(visible(&found[0].concat()), visible(&line));
    }
}
