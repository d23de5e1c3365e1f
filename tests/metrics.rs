//! BLEU and chrF against sacreBLEU's own numbers on committed files
//! (tests/fixtures/sacrebleu, written by scripts/make_sacrebleu_fixture.py with the sacreBLEU
//! command line).

mod common;

use common::{succeeded, transformer};
use std::path::{Path, PathBuf};

use serde_json::Value;
use transformer::metrics::{
    chrf_signature, corpus_bleu, corpus_chrf, read_segments, BleuScore, Case,
};

const FIXTURE: &str = "tests/fixtures/sacrebleu";

fn expected() -> Value {
    let text = std::fs::read_to_string(Path::new(FIXTURE).join("expected.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

fn fixture(name: &str) -> PathBuf {
    Path::new(FIXTURE).join(name)
}

#[test]
fn bleu_chrf_and_signatures_equal_sacrebleus_on_every_system() {
    let expected = expected();
    let references = read_segments(&fixture("ref.en"), "--ref").unwrap();
    for system in expected["systems"].as_array().unwrap() {
        let name = system["hypothesis"].as_str().unwrap();
        let hypotheses = read_segments(&fixture(name), "--hyp").unwrap();
        // sacreBLEU's -lc lowercases for BLEU only; chrF keeps the case.
        let case = if system["lowercase"] == true {
            Case::Lower
        } else {
            Case::Mixed
        };
        let bleu = corpus_bleu(
            &case.apply(hypotheses.clone()),
            &case.apply(references.clone()),
        );
        let want = system["bleu"].as_f64().unwrap();
        assert!(
            (bleu.score - want).abs() < 1e-8,
            "{name}: BLEU {} vs {want}",
            bleu.score
        );
        let text = bleu.format_text(case);
        let verbose = system["bleu_verbose"].as_str().unwrap();
        assert!(text.ends_with(verbose), "{name}: {text}");
        assert_eq!(BleuScore::signature(case), system["bleu_signature"]);
        let chrf = corpus_chrf(&hypotheses, &references);
        let want = system["chrf"].as_f64().unwrap();
        assert!((chrf - want).abs() < 1e-8, "{name}: chrF {chrf} vs {want}");
        assert_eq!(chrf_signature(), system["chrf_signature"]);
    }
}

#[test]
fn eval_scores_a_hypothesis_file_as_json_without_a_model() {
    let expected = expected();
    let system = &expected["systems"][1];
    let output = succeeded(
        transformer()
            .args(["eval", "--json", "--ref"])
            .arg(fixture("ref.en"))
            .arg("--hyp")
            .arg(fixture(system["hypothesis"].as_str().unwrap())),
    );
    let json: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert!((json["bleu"].as_f64().unwrap() - system["bleu"].as_f64().unwrap()).abs() < 0.01);
    assert!((json["chrf"].as_f64().unwrap() - system["chrf"].as_f64().unwrap()).abs() < 0.01);
    assert_eq!(json["signature"], system["bleu_signature"]);
    assert_eq!(json["chrf_signature"], system["chrf_signature"]);
}

#[test]
fn eval_prints_sacrebleus_text_lines() {
    let expected = expected();
    let system = &expected["systems"][0];
    let output = transformer()
        .args(["eval", "--ref"])
        .arg(fixture("ref.en"))
        .arg("--hyp")
        .arg(fixture("good.hyp"))
        .output()
        .unwrap();
    let stdout = String::from_utf8(output.stdout).unwrap();
    let mut lines = stdout.lines();
    let bleu_line = lines.next().unwrap();
    let want = format!(
        "BLEU|{} = {:.2} {}",
        system["bleu_signature"].as_str().unwrap(),
        system["bleu"].as_f64().unwrap(),
        system["bleu_verbose"].as_str().unwrap()
    );
    assert_eq!(bleu_line, want);
    assert!(lines
        .next()
        .unwrap()
        .starts_with("chrF2|nrefs:1|case:mixed|eff:yes|nc:6|nw:0|space:no"));
}

#[test]
fn eval_refuses_files_of_different_lengths() {
    let dir = tempfile::tempdir().unwrap();
    let hyp = dir.path().join("short.hyp");
    std::fs::write(&hyp, "one line\n").unwrap();
    transformer()
        .args(["eval", "--ref"])
        .arg(fixture("ref.en"))
        .arg("--hyp")
        .arg(&hyp)
        .assert()
        .code(1)
        .stderr(predicates::str::contains("short.hyp has 1 lines but"));
}

#[test]
fn eval_translates_a_source_file_with_a_checkpoint() {
    let dir = tempfile::tempdir().unwrap();
    let (src, reference, out) = (
        dir.path().join("src.de"),
        dir.path().join("ref.en"),
        dir.path().join("hyp.en"),
    );
    std::fs::write(&src, "ich mochte ein bier\ndu habe eine cola bier\n").unwrap();
    std::fs::write(&reference, "i want a beer\nyou have coke\n").unwrap();
    let output = succeeded(
        transformer()
            .args([
                "eval",
                "--json",
                "--device",
                "cpu",
                "--beam",
                "3",
                "--checkpoint",
                "tests/fixtures/parity",
            ])
            .arg("--src")
            .arg(&src)
            .arg("--ref")
            .arg(&reference)
            .arg("--out")
            .arg(&out),
    );
    let json: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(
        std::fs::read_to_string(&out).unwrap(),
        "i want a beer\nyou have coke\n"
    );
    assert!((json["bleu"].as_f64().unwrap() - 100.0).abs() < 1e-9);
}

/// `path` gzipped into `dir`, under its own name plus `.gz`.
fn gzipped(path: &Path, dir: &Path) -> PathBuf {
    use std::io::Write;
    let out = dir.join(format!(
        "{}.gz",
        path.file_name().unwrap().to_string_lossy()
    ));
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gz.write_all(&std::fs::read(path).unwrap()).unwrap();
    std::fs::write(&out, gz.finish().unwrap()).unwrap();
    out
}

#[test]
fn eval_lowercases_gzipped_files_and_stdin_as_sacrebleu_does() {
    let expected = expected();
    let lowercased = expected["systems"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["lowercase"] == true)
        .unwrap();
    let mixed = expected["systems"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["hypothesis"] == lowercased["hypothesis"] && s["lowercase"] == false)
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let hyp = gzipped(
        &fixture(lowercased["hypothesis"].as_str().unwrap()),
        dir.path(),
    );
    let reference = gzipped(&fixture("ref.en"), dir.path());
    let score = |extra: &[&str]| {
        let output = succeeded(
            transformer()
                .args(["eval", "--json", "--hyp"])
                .arg(&hyp)
                .arg("--ref")
                .arg(&reference)
                .args(extra),
        );
        serde_json::from_slice::<Value>(&output.stdout).unwrap()
    };
    let lower = score(&["--lowercase"]);
    assert!((lower["bleu"].as_f64().unwrap() - lowercased["bleu"].as_f64().unwrap()).abs() < 1e-3);
    assert_eq!(lower["signature"], lowercased["bleu_signature"]);
    let as_is = score(&[]);
    assert!((as_is["bleu"].as_f64().unwrap() - mixed["bleu"].as_f64().unwrap()).abs() < 1e-3);
    // The hypotheses on stdin (`-`), the reference gzipped.
    let output = succeeded(
        transformer()
            .args(["eval", "--json", "--lowercase", "--hyp", "-", "--ref"])
            .arg(&reference)
            .write_stdin(
                std::fs::read(fixture(lowercased["hypothesis"].as_str().unwrap())).unwrap(),
            ),
    );
    let from_stdin: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(from_stdin["bleu"], lower["bleu"]);
}
