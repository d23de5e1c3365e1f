//! int8 decoding (`--compute-type int8`, `decode.compute_type`) against float32 through the
//! binary: the same translations on a trained model, log-probabilities within a stated
//! tolerance, the setting read from the checkpoint and overridden by the flag, and a bad
//! value refused. The kernels' integer sums are checked against plain Rust in
//! src/kernels/int8.rs.

mod common;

use std::path::Path;

use common::server::{post_json, Server};
use common::{multi30k_lines, succeeded, train_tiny, transformer, translated_json};
use serde_json::json;

/// `translate --json` of `sources` with `flags`: (ids, log-probs) per line.
fn translated(checkpoint: &Path, sources: &[String], flags: &[&str]) -> Vec<(Vec<u32>, Vec<f64>)> {
    translated_json(checkpoint, sources, flags)
        .into_iter()
        .map(|value| {
            (
                serde_json::from_value(value["ids"].clone()).unwrap(),
                serde_json::from_value(value["log_probs"].clone()).unwrap(),
            )
        })
        .collect()
}

/// The tolerance int8 keeps to float32's log-probabilities of the same tokens (measured
/// 0.054 at worst on the fixture below).
const LOG_PROB_TOLERANCE: f64 = 0.1;

#[test]
fn int8_translates_as_float32_does_on_most_sentences_within_the_log_prob_tolerance() {
    // A MarianMT directory trained 800 steps in PyTorch (tests/fixtures/marian-gelu): weak
    // enough that its long tails are fragile, which makes it a hard case.
    let checkpoint = Path::new("tests/fixtures/marian-gelu");
    let sources = multi30k_lines("val.de.gz", 40);
    let float = translated(checkpoint, &sources, &["--compute-type", "float32"]);
    let int8 = translated(checkpoint, &sources, &["--compute-type", "int8"]);
    let mut same = 0;
    for ((float_ids, float_lp), (int8_ids, int8_lp)) in float.iter().zip(&int8) {
        if float_ids != int8_ids {
            continue;
        }
        same += 1;
        for (a, b) in float_lp.iter().zip(int8_lp) {
            assert!((a - b).abs() < LOG_PROB_TOLERANCE, "{a} vs {b}");
        }
    }
    assert!(
        same * 10 >= sources.len() * 6,
        "{same} of {} alike",
        sources.len()
    );

    // The toy model says what it learned, in either.
    let tiny = train_tiny(&[]);
    let run = tiny.path().join("run");
    for compute in ["float32", "int8"] {
        let out = succeeded(
            transformer()
                .args(["translate", "--checkpoint"])
                .arg(&run)
                .args(["--compute-type", compute, "ich mochte ein bier"]),
        );
        assert_eq!(String::from_utf8(out.stdout).unwrap(), "i want a beer .\n");
    }
}

#[test]
fn the_checkpoints_compute_type_applies_and_the_flag_wins() {
    let tiny = train_tiny(&[]);
    let last = tiny.path().join("run/last");
    let sources = vec![
        "ich mochte ein bier".to_string(),
        "ich mochte ein cola".into(),
    ];
    let float = translated(&last, &sources, &[]);
    let int8 = translated(&last, &sources, &["--compute-type", "int8"]);
    let config = std::fs::read_to_string(last.join("config.toml")).unwrap();
    let config = config.replace("compute_type = \"float32\"", "compute_type = \"int8\"");
    assert!(config.contains("compute_type = \"int8\""), "{config}");
    std::fs::write(last.join("config.toml"), config).unwrap();
    assert_eq!(translated(&last, &sources, &[]), int8);
    assert_eq!(
        translated(&last, &sources, &["--compute-type", "float32"]),
        float
    );

    // serve and eval take the flag too.
    let server = Server::start_with(&tiny.path().join("run"), &["--compute-type", "int8"]);
    let (status, body) = post_json(
        &server.url("/translate"),
        &json!({"q": "ich mochte ein bier", "source": "de", "target": "en"}),
    );
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["translatedText"], "i want a beer .");
    drop(server);
    std::fs::write(tiny.path().join("src.txt"), "ich mochte ein bier\n").unwrap();
    std::fs::write(tiny.path().join("ref.txt"), "i want a beer .\n").unwrap();
    let out = succeeded(
        transformer()
            .current_dir(tiny.path())
            .args([
                "eval",
                "--checkpoint",
                "run",
                "--src",
                "src.txt",
                "--ref",
                "ref.txt",
            ])
            .args(["--compute-type", "int8"]),
    );
    assert!(
        String::from_utf8(out.stdout).unwrap().contains("= 100.0"),
        "int8 eval of the toy pair is not BLEU 100"
    );
}

#[test]
fn an_unknown_compute_type_is_a_usage_error_naming_the_choices() {
    let out = transformer()
        .args(["translate", "--checkpoint", "tests/fixtures/marian-shared"])
        .args(["--compute-type", "int4", "Hallo"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(stderr.contains("float32 or int8"), "{stderr}");
}
