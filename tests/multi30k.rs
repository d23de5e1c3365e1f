//! The real-data path on slices of Multi30k (scripts/get-multi30k.sh puts the corpus in
//! data/multi30k/; MULTI30K_DIR overrides). No test trains a full model.

mod common;

use common::{succeeded, transformer};
use std::io::Read;
use std::path::{Path, PathBuf};

use serde_json::Value;
use transformer::config::CorpusSource;
use transformer::corpus::read_corpus;

fn corpus_dir() -> PathBuf {
    let dir = std::env::var_os("MULTI30K_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("data/multi30k"));
    assert!(
        dir.join("train.de.gz").is_file(),
        "Multi30k not found in {}; run scripts/get-multi30k.sh first",
        dir.display()
    );
    dir
}

/// The first `lines` lines of a gzipped corpus file, as a plain file in `out`.
fn slice(name: &str, lines: usize, out: &Path) -> PathBuf {
    let mut text = String::new();
    flate2::read::GzDecoder::new(std::fs::File::open(corpus_dir().join(name)).unwrap())
        .read_to_string(&mut text)
        .unwrap();
    let path = out.join(name.trim_end_matches(".gz"));
    let kept: Vec<&str> = text.lines().take(lines).collect();
    std::fs::write(&path, kept.join("\n") + "\n").unwrap();
    path
}

#[test]
fn cleaning_multi30k_train_drops_exactly_the_two_placeholder_pairs() {
    let dir = corpus_dir();
    let source = CorpusSource::Parallel {
        src: dir.join("train.de.gz"),
        tgt: dir.join("train.en.gz"),
    };
    let (pairs, report) = read_corpus(&source).unwrap();
    assert_eq!(
        (report.read, report.kept, report.placeholder, report.empty),
        (29000, 28998, 2, 0)
    );
    for pair in &pairs {
        for side in [&pair.src, &pair.tgt] {
            assert!(!side.contains('\u{a0}') && !side.contains("  ") && side.trim() == side);
        }
    }
}

/// Epochs of the slice's run.
const EPOCHS: usize = 40;

#[test]
fn a_bpe_model_trains_on_a_slice_keeps_best_and_last_and_translates_and_evaluates() {
    let dir = tempfile::tempdir().unwrap();
    let (train_de, train_en) = (
        slice("train.de.gz", 160, dir.path()),
        slice("train.en.gz", 160, dir.path()),
    );
    // Validation on sentences it trains on: a model this small learns them within seconds,
    // so BLEU climbs from epoch to epoch and each epoch's checkpoint scores its own.
    let (val_de, val_en) = (dir.path().join("val.de"), dir.path().join("val.en"));
    for (from, to) in [(&train_de, &val_de), (&train_en, &val_en)] {
        let text = std::fs::read_to_string(from).unwrap();
        let first: Vec<&str> = text.lines().take(40).collect();
        std::fs::write(to, first.join("\n") + "\n").unwrap();
    }
    let config = dir.path().join("slice.toml");
    std::fs::write(
        &config,
        format!(
            "[model]\nlayers = 1\nd_model = 64\nd_ff = 128\nheads = 4\nmax_len = 128\ndropout = 0.0\n\
             [data]\ntrain = {{ src = {:?}, tgt = {:?} }}\nvalid = {{ src = {:?}, tgt = {:?} }}\n\
             tokenizer = \"bpe\"\nvocab_size = 500\n\
             [training]\nepochs = EPOCHS\nmax_tokens = 400\nwarmup = 40\nlr_factor = 2.0\n\
             clip_grad_norm = 1.0\n",
            train_de, train_en, val_de, val_en
        )
        .replace("EPOCHS", &EPOCHS.to_string()),
    )
    .unwrap();
    let run = dir.path().join("run");
    transformer()
        .args(["train", "--quiet", "--device", "cpu", "--config"])
        .arg(&config)
        .arg("--out")
        .arg(&run)
        .assert()
        .success()
        .stderr(predicates::str::contains("160 pairs read, 160 kept"));
    for file in [
        "best/model.safetensors",
        "best/tokenizer.json",
        "last/config.toml",
        "metrics.jsonl",
    ] {
        assert!(run.join(file).is_file(), "{file} missing");
    }
    let metrics = std::fs::read_to_string(run.join("metrics.jsonl")).unwrap();
    let epochs: Vec<Value> = metrics
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|r| r["kind"] == "epoch")
        .collect();
    assert_eq!(epochs.len(), EPOCHS);
    assert!(epochs
        .iter()
        .all(|r| r["valid_bleu"].is_f64() && r["valid_loss"].is_f64()));

    for beam in ["1", "3"] {
        let output = succeeded(
            transformer()
                .args([
                    "translate",
                    "--device",
                    "cpu",
                    "--max-len",
                    "20",
                    "--beam",
                    beam,
                    "--checkpoint",
                ])
                .arg(&run)
                .write_stdin("Zwei Männer stehen am Herd und bereiten Essen zu.\n\nEin Hund.\n"),
        );
        let stdout = String::from_utf8(output.stdout).unwrap();
        let lines: Vec<&str> = stdout.lines().collect();
        assert_eq!(lines.len(), 3, "{stdout}");
        assert_eq!(lines[1], "");
        assert!(
            !stdout.contains('▁'),
            "output must be detokenized: {stdout}"
        );
    }

    // best/ translates the validation set to the best validation BLEU the run logged, and
    // scoring the translations it wrote gives the same number again.
    let hyp = dir.path().join("best.en");
    let output = succeeded(
        transformer()
            .args(["eval", "--json", "--device", "cpu", "--checkpoint"])
            .arg(run.join("best"))
            .arg("--src")
            .arg(&val_de)
            .arg("--ref")
            .arg(&val_en)
            .arg("--out")
            .arg(&hyp),
    );
    let json: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(json["sentences"], 40);
    let bleu = json["bleu"].as_f64().unwrap();
    let logged: Vec<f64> = epochs
        .iter()
        .map(|r| r["valid_bleu"].as_f64().unwrap())
        .collect();
    let best_logged = logged.iter().copied().fold(f64::MIN, f64::max);
    // A model that learns, whose best epoch no other epoch's checkpoint would pass for.
    assert!(best_logged > logged[0] + 20.0, "validation BLEU {logged:?}");
    let others = logged.iter().filter(|&&b| (b - best_logged).abs() < 1e-3);
    assert_eq!(others.count(), 1, "validation BLEU {logged:?}");
    assert!(
        (bleu - best_logged).abs() < 1e-3,
        "eval of best/ gives {bleu}, training logged {logged:?}"
    );
    let rescored = succeeded(
        transformer()
            .args(["eval", "--json", "--hyp"])
            .arg(&hyp)
            .arg("--ref")
            .arg(&val_en),
    );
    let rescored: Value = serde_json::from_slice(&rescored.stdout).unwrap();
    assert_eq!(rescored["bleu"], json["bleu"]);
    assert_eq!(rescored["chrf"], json["chrf"]);
}
