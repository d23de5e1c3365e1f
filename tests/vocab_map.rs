//! Vocabulary restriction (`--vocab-map FILE`, CTranslate2's `vmap.txt`) through the binary: a
//! map that allows every token decodes exactly as the whole vocabulary does (greedy and beam,
//! float32 and int8), a map that allows a few keeps each sentence to its candidates, serve
//! and eval take it, and a bad map is a one-line error naming the file and the line.
//! scripts/check_export_ct2.py checks the same restriction against CTranslate2's `use_vmap`.

mod common;

use std::path::Path;

use common::server::{post_json, Server};
use common::{multi30k_lines, succeeded, transformer, translated_json};
use serde_json::{json, Value};

/// Ids, log-probs and tokens of each line.
fn decoded(values: Vec<Value>) -> Vec<(Vec<u32>, Vec<f64>, Vec<String>)> {
    values
        .into_iter()
        .map(|v| {
            (
                serde_json::from_value(v["ids"].clone()).unwrap(),
                serde_json::from_value(v["log_probs"].clone()).unwrap(),
                serde_json::from_value(v["tokens"].clone()).unwrap(),
            )
        })
        .collect()
}

#[test]
fn a_map_allowing_every_token_decodes_as_the_whole_vocabulary() {
    let checkpoint = Path::new("tests/fixtures/marian-gelu");
    let vocab: serde_json::Map<String, Value> =
        serde_json::from_str(&std::fs::read_to_string(checkpoint.join("vocab.json")).unwrap())
            .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let map = dir.path().join("vmap.txt");
    let tokens: Vec<&str> = vocab.keys().map(String::as_str).collect();
    std::fs::write(&map, format!("\t{}\n", tokens.join(" "))).unwrap();
    let map = map.to_str().unwrap();
    let sources = multi30k_lines("val.de.gz", 12);
    for compute in ["float32", "int8"] {
        for beam in ["1", "4"] {
            let flags = ["--beam", beam, "--compute-type", compute];
            let whole = decoded(translated_json(checkpoint, &sources, &flags));
            let mapped = decoded(translated_json(
                checkpoint,
                &sources,
                &[&flags[..], &["--vocab-map", map]].concat(),
            ));
            for ((ids, lp, _), (map_ids, map_lp, _)) in whole.iter().zip(&mapped) {
                assert_eq!(ids, map_ids, "{compute} beam {beam}");
                for (a, b) in lp.iter().zip(map_lp) {
                    assert!((a - b).abs() < 1e-6, "{compute} beam {beam}: {a} vs {b}");
                }
            }
        }
    }
}

/// The toy map: "a" always; "ich" allows "i want", the 2-gram "ein bier" allows "beer",
/// "cola" allows "coke", "water" is named by a rule whose source the vocabulary lacks.
const TOY_MAP: &str = "\ta\nich\ti want\nein bier\tbeer\ncola\tcoke\nzebra\twater\n";

/// What each toy sentence may say under [`TOY_MAP`]: its candidates and `</s>`.
fn toy_candidates(sentence: &str) -> Vec<&'static str> {
    let mut allowed = vec!["</s>", "a"];
    if sentence.contains("ich") {
        allowed.extend(["i", "want"]);
    }
    if sentence.contains("ein bier") {
        allowed.push("beer");
    }
    if sentence.contains("cola") {
        allowed.push("coke");
    }
    allowed
}

#[test]
fn a_restricted_translation_says_only_its_sentences_candidates() {
    let dir = tempfile::tempdir().unwrap();
    let map = dir.path().join("vmap.txt");
    std::fs::write(&map, TOY_MAP).unwrap();
    let checkpoint = Path::new("tests/fixtures/parity");
    let sources: Vec<String> = [
        "ich mochte ein bier",
        "du habe eine cola",
        "er mochte wasser",
        "ich habe ein haus ein bier",
    ]
    .map(String::from)
    .to_vec();
    for beam in ["1", "3"] {
        let flags = ["--beam", beam, "--batch-size", "1"];
        let whole = decoded(translated_json(checkpoint, &sources, &flags));
        let mapped = decoded(translated_json(
            checkpoint,
            &sources,
            &[&flags[..], &["--vocab-map", map.to_str().unwrap()]].concat(),
        ));
        for (sentence, (_, _, tokens)) in sources.iter().zip(&mapped) {
            let allowed = toy_candidates(sentence);
            assert!(
                tokens.iter().all(|t| allowed.contains(&t.as_str())),
                "beam {beam}: {sentence:?} said {tokens:?}, allowed {allowed:?}"
            );
        }
        // Each sentence keeps to its own candidates in a batch too: the same translations.
        let batched = decoded(translated_json(
            checkpoint,
            &sources,
            &["--beam", beam, "--vocab-map", map.to_str().unwrap()],
        ));
        for ((ids, lp, _), (batch_ids, batch_lp, _)) in mapped.iter().zip(&batched) {
            assert_eq!(ids, batch_ids, "beam {beam}");
            for (a, b) in lp.iter().zip(batch_lp) {
                assert!((a - b).abs() < 1e-5, "beam {beam}: {a} vs {b}");
            }
        }
        // Where every word of the translation is a candidate, the restriction changes
        // nothing; where it is not, it must.
        assert_eq!(whole[0].2, ["i", "want", "a", "beer", "</s>"]);
        assert_eq!(mapped[0].2, whole[0].2, "beam {beam}");
        assert_ne!(mapped[1].2, whole[1].2, "beam {beam}");
    }
}

#[test]
fn serve_and_eval_take_a_vocabulary_map() {
    let dir = tempfile::tempdir().unwrap();
    let map = dir.path().join("vmap.txt");
    std::fs::write(&map, TOY_MAP).unwrap();
    let map = map.to_str().unwrap();
    let checkpoint = Path::new("tests/fixtures/parity");
    let server = Server::start_with(
        checkpoint,
        &[
            "--source-lang",
            "de",
            "--target-lang",
            "en",
            "--vocab-map",
            map,
        ],
    );
    let (status, body) = post_json(
        &server.url("/translate"),
        &json!({"q": "du habe eine cola", "source": "de", "target": "en"}),
    );
    assert_eq!(status, 200, "{body}");
    let said = body["translatedText"].as_str().unwrap();
    assert!(
        said.split(' ')
            .all(|w| toy_candidates("du habe eine cola").contains(&w)),
        "{said}"
    );
    drop(server);
    std::fs::write(dir.path().join("src.txt"), "ich mochte ein bier\n").unwrap();
    std::fs::write(dir.path().join("ref.txt"), "i want a beer\n").unwrap();
    let out = succeeded(
        transformer()
            .current_dir(dir.path())
            .args(["eval", "--checkpoint"])
            .arg(std::fs::canonicalize(checkpoint).unwrap())
            .args(["--src", "src.txt", "--ref", "ref.txt", "--vocab-map", map]),
    );
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert!(stdout.contains("= 100.0"), "{stdout}");
    // The rule whose source the vocabulary lacks is said once, as a warning.
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(
        stderr.contains("vmap.txt") && stderr.contains("1 rules whose source n-gram"),
        "{stderr}"
    );
}

#[test]
fn a_bad_map_is_a_one_line_error_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    // Scoring given hypotheses decodes nothing: a map there is a usage error, not ignored.
    std::fs::write(dir.path().join("hyp.txt"), "i want a beer\n").unwrap();
    let out = transformer()
        .current_dir(dir.path())
        .args([
            "eval",
            "--hyp",
            "hyp.txt",
            "--ref",
            "hyp.txt",
            "--vocab-map",
            "x",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(
        stderr.contains("--vocab-map sets how --src is translated"),
        "{stderr}"
    );
    let no_tab = dir.path().join("no-tab.txt");
    std::fs::write(&no_tab, "ich\ti\nbier beer\n").unwrap();
    let not_text = dir.path().join("binary.txt");
    std::fs::write(&not_text, [0xff, 0xfe, b'\t', 0x80]).unwrap();
    for (map, needle) in [
        (no_tab.to_str().unwrap(), "line 2: no tab"),
        (not_text.to_str().unwrap(), "not UTF-8"),
        ("/nonexistent/vmap.txt", "cannot read the vocabulary map"),
        (dir.path().to_str().unwrap(), "not a regular file"),
    ] {
        let out = transformer()
            .args(["translate", "--checkpoint", "tests/fixtures/parity"])
            .args(["--vocab-map", map, "ich mochte ein bier"])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(1), "{map}");
        let stderr = String::from_utf8(out.stderr).unwrap();
        assert!(
            stderr.contains(needle)
                && stderr.contains(map.rsplit('/').next().unwrap())
                && stderr.trim().lines().count() == 1,
            "{map}: {stderr}"
        );
    }
}
