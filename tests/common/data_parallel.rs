//! Helpers of the data-parallel tests (`tests/distributed.rs`, `tests/multi_host.rs`): the
//! small corpus and config they train, and what they read back.
#![allow(dead_code)] // not every test crate trains under mpirun

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// Runs `command` (an mpirun), failing the test with its stderr unless it succeeded.
pub fn ran(command: &mut Command) -> Output {
    let output = command.output().expect("mpirun runs (install openmpi-bin)");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    output
}

/// 25 short pairs over a small vocabulary: a token budget of 24 makes an odd number of
/// batches (the last step of each epoch has one batch, and rank 1 none), 7 steps an epoch on
/// two ranks.
pub fn write_pairs(dir: &Path) -> PathBuf {
    let de = [
        "ich", "du", "er", "wir", "haus", "bier", "hund", "katze", "ball",
    ];
    let en = [
        "i", "you", "he", "we", "house", "beer", "dog", "cat", "ball",
    ];
    let mut text = String::new();
    for i in 0..25usize {
        let words: Vec<usize> = (0..2 + i % 5).map(|j| (i * 7 + j * 3) % de.len()).collect();
        let side = |vocab: &[&str]| -> Vec<String> {
            words.iter().map(|&w| vocab[w].to_string()).collect()
        };
        text.push_str(&format!(
            "{}\t{}\n",
            side(&de).join(" "),
            side(&en).join(" ")
        ));
    }
    let path = dir.join("pairs.tsv");
    std::fs::write(&path, text).unwrap();
    path
}

/// A one-layer model without dropout over `pairs`, accumulating `accumulate` batches a step.
pub fn write_config(dir: &Path, pairs: &Path, accumulate: usize, epochs: usize) -> PathBuf {
    let path = dir.join(format!("a{accumulate}-e{epochs}.toml"));
    std::fs::write(
        &path,
        format!(
            r#"[model]
layers = 1
d_model = 32
d_ff = 64
heads = 4
dropout = 0.0
attention_dropout = 0.0

[data]
train = "{}"

[training]
seed = 1
epochs = {epochs}
max_tokens = 24
accumulate = {accumulate}
warmup = 10
log_every = 1
checkpoint_every = 4
"#,
            pairs.display()
        ),
    )
    .unwrap();
    path
}

/// The loss of every step, from a run's metrics.jsonl.
pub fn step_losses(run: &Path) -> Vec<(u64, f64)> {
    std::fs::read_to_string(run.join("metrics.jsonl"))
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str::<serde_json::Value>(line).unwrap())
        .filter(|record| record.get("lr").is_some())
        .map(|record| {
            (
                record["step"].as_u64().unwrap(),
                record["loss"].as_f64().unwrap(),
            )
        })
        .collect()
}

/// `train --device cpu --config CONFIG --out RUN`.
pub fn train_args(config: &Path, run: &Path) -> Vec<String> {
    ["train", "--device", "cpu", "--config"]
        .iter()
        .map(|s| s.to_string())
        .chain([config.display().to_string(), "--out".into()])
        .chain([run.display().to_string()])
        .collect()
}
