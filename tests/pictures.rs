//! The pictures: attention heatmaps from `transformer attention`, and loss.png in the run
//! directory at every checkpoint.

mod common;

use std::path::Path;

use common::{succeeded, train_tiny, transformer};
use predicates::prelude::*;
use predicates::str::contains;
use tempfile::TempDir;

/// Width and height from a PNG's IHDR chunk.
fn png_size(path: &Path) -> (u32, u32) {
    let bytes = std::fs::read(path).unwrap();
    assert!(
        bytes.starts_with(b"\x89PNG\r\n\x1a\n"),
        "{} is not a PNG",
        path.display()
    );
    let word = |at: usize| u32::from_be_bytes(bytes[at..at + 4].try_into().unwrap());
    (word(16), word(20))
}

fn attention(dir: &Path, args: &[&str]) -> assert_cmd::assert::Assert {
    transformer()
        .args(["attention", "--device", "cpu", "--checkpoint"])
        .arg(dir.join("run"))
        .args(args)
        .assert()
}

#[test]
fn attention_draws_every_layer_and_head_and_prints_the_translation_it_drew() {
    let dir = train_tiny(&[]);
    let all = dir.path().join("all.png");
    let one = dir.path().join("one.png");
    attention(
        dir.path(),
        &["ich mochte ein bier", "--out", all.to_str().unwrap()],
    )
    .success()
    .stdout("i want a beer .\n")
    .stderr(contains("2 layer(s) x 4 heads"));
    attention(
        dir.path(),
        &[
            "ich mochte ein bier",
            "--layers",
            "2",
            "--out",
            one.to_str().unwrap(),
        ],
    )
    .success()
    .stderr(contains("1 layer(s) x 4 heads"));
    let (all_w, all_h) = png_size(&all);
    let (one_w, one_h) = png_size(&one);
    assert_eq!(all_w, one_w, "the same heads side by side");
    assert!(
        all_h > one_h + 300,
        "{all_h} vs {one_h}: each layer adds a row to 3 grids"
    );
}

#[test]
fn attention_can_teacher_force_a_given_translation() {
    let dir = train_tiny(&[]);
    let out = dir.path().join("forced.png");
    attention(
        dir.path(),
        &[
            "ich mochte ein bier",
            "--target",
            "i want a coke .",
            "--out",
            out.to_str().unwrap(),
        ],
    )
    .success()
    .stdout("");
    png_size(&out);
}

#[test]
fn attention_names_a_missing_layer_an_empty_sentence_and_an_unwritable_out_path() {
    let dir = train_tiny(&[]);
    attention(dir.path(), &["ich", "--layers", "3"])
        .code(2)
        .stderr(contains("--layers 3").and(contains("layers 1 to 2")));
    attention(dir.path(), &["   "])
        .code(1)
        .stderr(contains("the sentence is empty"));
    attention(dir.path(), &["ich", "--out", "pictures/attn.png"])
        .code(1)
        .stderr(contains("directory pictures does not exist"));
    attention(dir.path(), &["ich", "--out", "attn.jpg"])
        .code(2)
        .stderr(contains("must name a .png file"));
}

#[test]
fn every_checkpoint_redraws_loss_png_as_the_run_goes_on() {
    let dir = TempDir::new().unwrap();
    let data = std::fs::canonicalize("data/toy.tsv").unwrap();
    let config = dir.path().join("config.toml");
    std::fs::write(
        &config,
        format!(
            "[model]\nlayers = 1\nd_model = 16\nd_ff = 32\nheads = 2\n[data]\ntrain = {data:?}\n\
             valid = {data:?}\n[training]\nepochs = 10\nmax_tokens = 8\nlog_every = 1\n\
             checkpoint_every = 3\n"
        ),
    )
    .unwrap();
    let run = dir.path().join("run");
    let train = |extra: &[&str]| {
        succeeded(
            transformer()
                .args(["train", "--device", "cpu", "--quiet", "--config"])
                .arg(&config)
                .arg("--out")
                .arg(&run)
                .args(extra),
        )
    };
    train(&["--stop-at-step", "3"]);
    let early = std::fs::read(run.join("loss.png")).unwrap();
    png_size(&run.join("loss.png"));
    succeeded(
        transformer()
            .args(["train", "--device", "cpu", "--quiet", "--resume"])
            .arg(&run),
    );
    let late = std::fs::read(run.join("loss.png")).unwrap();
    assert_ne!(early, late, "loss.png was redrawn as the run went on");
}
