//! A run as fast as its steps: where a run's wall time went (its summary line and
//! metrics.jsonl), validation as often as `training.validate_every` and
//! `training.validate_every_steps` say, and early stopping judged by those validations.

mod common;

use std::path::{Path, PathBuf};

use common::{succeeded, transformer};
use serde_json::Value;

/// configs/tiny.toml (two toy pairs, one step an epoch) validated on the toy pairs, for
/// `epochs`, with `training_extra` added to `[training]`.
fn write_config(dir: &Path, epochs: usize, training_extra: &str) -> PathBuf {
    let config = std::fs::read_to_string("configs/tiny.toml")
        .unwrap()
        .replace(
            "train = \"data/toy.tsv\"",
            "train = \"data/toy.tsv\"\nvalid = \"data/toy.tsv\"",
        )
        .replace("epochs = 80", &format!("epochs = {epochs}"))
        .replace("[training]\n", &format!("[training]\n{training_extra}\n"));
    let path = dir.join("tiny.toml");
    std::fs::write(&path, config).unwrap();
    path
}

fn train(args: &[&str], config_or_run: &Path) -> std::process::Output {
    succeeded(
        transformer()
            .args(["train", "--device", "cpu"])
            .args(args)
            .arg(config_or_run),
    )
}

fn metrics_of(run: &Path) -> Vec<Value> {
    std::fs::read_to_string(run.join("metrics.jsonl"))
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}

fn of_kind<'a>(records: &'a [Value], kind: &str) -> Vec<&'a Value> {
    records.iter().filter(|r| r["kind"] == kind).collect()
}

const PARTS: [&str; 7] = [
    "start_s",
    "steps_s",
    "batching_s",
    "validation_loss_s",
    "validation_decoding_s",
    "checkpoints_s",
    "averaging_s",
];

/// The parts of a `time` object add up to no more than its wall time (they do not overlap),
/// each at least zero.
fn assert_parts_within_wall(time: &Value) {
    let wall = time["wall_s"].as_f64().unwrap();
    let mut sum = 0.0;
    for part in PARTS {
        let seconds = time[part]
            .as_f64()
            .unwrap_or_else(|| panic!("{part} in {time}"));
        assert!(seconds >= 0.0, "{part} in {time}");
        sum += seconds;
    }
    // Each figure is rounded to 0.001 s.
    assert!(sum <= wall + 0.01, "parts {sum} > wall {wall}: {time}");
}

#[test]
fn a_run_says_where_its_time_went_in_its_summary_and_its_metrics() {
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(dir.path(), 4, "keep_last = 2\naverage_last = 2");
    let text = std::fs::read_to_string(&config)
        .unwrap()
        .replace("checkpoint_every = 50", "checkpoint_every = 2");
    std::fs::write(&config, text).unwrap();
    let run = dir.path().join("run");
    let output = train(&["--out", run.to_str().unwrap(), "--config"], &config);
    let stderr = String::from_utf8_lossy(&output.stderr);
    let summary = stderr
        .lines()
        .find(|line| line.starts_with("where the time went: "))
        .unwrap_or_else(|| panic!("no summary line in {stderr}"));
    for part in [
        "steps",
        "batching",
        "validation loss",
        "validation decoding",
        "checkpoints",
        "averaging",
        "start-up",
        "other",
    ] {
        assert!(summary.contains(&format!("{part} ")), "{part} in {summary}");
    }
    let records = metrics_of(&run);
    let epochs = of_kind(&records, "epoch");
    assert_eq!(epochs.len(), 4);
    let mut wall_before = 0.0;
    for epoch in &epochs {
        let time = &epoch["time"];
        assert_parts_within_wall(time);
        let wall = time["wall_s"].as_f64().unwrap();
        assert!(wall >= wall_before, "{records:?}");
        wall_before = wall;
        assert!(
            time["validation_decoding_s"].as_f64().unwrap() > 0.0,
            "{time}"
        );
    }
    // The run's last line: its whole time, averaging and the last checkpoint included.
    let last = records.last().unwrap();
    assert_eq!(last["kind"], "run", "{last}");
    assert_eq!(last["step"], 4);
    let time = &last["time"];
    assert_parts_within_wall(time);
    assert!(time["wall_s"].as_f64().unwrap() >= wall_before);
    for part in ["start_s", "steps_s", "checkpoints_s", "averaging_s"] {
        assert!(time[part].as_f64().unwrap() > 0.0, "{part} in {time}");
    }
    // The summary's wall time is the record's (one session).
    let trained = stderr
        .lines()
        .find_map(|line| line.strip_prefix("trained 4 steps in "))
        .and_then(|rest| rest.split('s').next())
        .unwrap_or_else(|| panic!("{stderr}"));
    let wall: f64 = trained.parse().unwrap();
    assert!(
        (wall - time["wall_s"].as_f64().unwrap()).abs() < 0.1,
        "{trained} vs {time}"
    );
}

#[test]
fn a_resumed_runs_time_goes_on_from_where_the_first_session_left_it() {
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(dir.path(), 6, "");
    let run = dir.path().join("run");
    train(
        &[
            "--out",
            run.to_str().unwrap(),
            "--stop-at-step",
            "3",
            "--config",
        ],
        &config,
    );
    let first = metrics_of(&run);
    let first_time = first.last().unwrap()["time"].clone();
    assert_eq!(first.last().unwrap()["kind"], "run");
    train(&["--resume"], &run);
    let resumed = metrics_of(&run);
    // One run record, the last, covering both sessions.
    assert_eq!(of_kind(&resumed, "run").len(), 1, "{resumed:?}");
    let time = &resumed.last().unwrap()["time"];
    assert_parts_within_wall(time);
    let seconds = |time: &Value, part: &str| time[part].as_f64().unwrap();
    assert!(seconds(time, "wall_s") > seconds(&first_time, "wall_s"));
    for part in [
        "start_s",
        "steps_s",
        "validation_decoding_s",
        "checkpoints_s",
    ] {
        assert!(
            seconds(time, part) > 0.0 && seconds(time, part) >= seconds(&first_time, part),
            "{part}: {first_time} then {time}"
        );
    }
}

#[test]
fn validation_runs_every_n_epochs_and_every_n_steps_as_the_config_says() {
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(dir.path(), 6, "validate_every = 2");
    let run = dir.path().join("every-2");
    train(&["--out", run.to_str().unwrap(), "--config"], &config);
    let records = metrics_of(&run);
    let validated: Vec<bool> = of_kind(&records, "epoch")
        .iter()
        .map(|r| r["valid_bleu"].is_f64() && r["valid_loss"].is_f64())
        .collect();
    assert_eq!(validated, [false, true, false, true, false, true]);
    assert!(of_kind(&records, "validation").is_empty());

    // Every 4 steps (one-step epochs) and every 3 epochs: a validation record at steps 4
    // and 8, the epochs' own at 3 and 6, none twice.
    let config = write_config(
        dir.path(),
        9,
        "validate_every = 3\nvalidate_every_steps = 4",
    );
    let run = dir.path().join("steps");
    train(&["--out", run.to_str().unwrap(), "--config"], &config);
    let records = metrics_of(&run);
    let between: Vec<u64> = of_kind(&records, "validation")
        .iter()
        .map(|r| {
            assert!(r["valid_loss"].is_f64() && r["valid_bleu"].is_f64(), "{r}");
            r["step"].as_u64().unwrap()
        })
        .collect();
    assert_eq!(between, [4, 8]);
    let at_epochs: Vec<u64> = of_kind(&records, "epoch")
        .iter()
        .filter(|r| r["valid_bleu"].is_f64())
        .map(|r| r["epoch"].as_u64().unwrap())
        .collect();
    assert_eq!(at_epochs, [3, 6, 9]);
}

#[test]
fn patience_counts_validations_between_epochs_too() {
    let dir = tempfile::tempdir().unwrap();
    // Validating only between epochs, every step: the same judgement as every epoch.
    let config = write_config(
        dir.path(),
        80,
        "patience = 3\nvalidate_every = 1000\nvalidate_every_steps = 1",
    );
    let run = dir.path().join("run");
    let output = train(&["--out", run.to_str().unwrap(), "--config"], &config);
    let records = metrics_of(&run);
    let bleus: Vec<f64> = of_kind(&records, "validation")
        .iter()
        .map(|r| r["valid_bleu"].as_f64().unwrap())
        .collect();
    let expected = common::patience_runs_out(&bleus, 3);
    let expected = expected.expect("the toy run plateaus within its 80 steps");
    assert_eq!(bleus.len(), expected, "{bleus:?}");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("stopped early at step"), "{stderr}");
    assert!(run.join("best/model.safetensors").is_file());
}

/// Training with `config` fails; its stderr.
fn refused(config: &Path, run: &Path) -> String {
    let output = transformer()
        .args(["train", "--device", "cpu", "--config"])
        .arg(config)
        .arg("--out")
        .arg(run)
        .output()
        .unwrap();
    assert!(!output.status.success(), "{output:?}");
    String::from_utf8_lossy(&output.stderr).into_owned()
}

#[test]
fn a_validation_interval_of_zero_is_refused_by_name() {
    let dir = tempfile::tempdir().unwrap();
    for (key, line) in [
        ("training.validate_every", "validate_every = 0"),
        ("training.validate_every_steps", "validate_every_steps = 0"),
    ] {
        let config = write_config(dir.path(), 2, line);
        let stderr = refused(&config, &dir.path().join("run"));
        assert!(
            stderr.contains(key) && stderr.contains("at least 1"),
            "{stderr}"
        );
    }
}

#[test]
fn validation_intervals_without_a_validation_set_are_refused_by_name() {
    let dir = tempfile::tempdir().unwrap();
    for (key, line) in [
        ("training.validate_every", "validate_every = 2"),
        ("training.validate_every_steps", "validate_every_steps = 5"),
    ] {
        let config = write_config(dir.path(), 2, line);
        let text = std::fs::read_to_string(&config)
            .unwrap()
            .replace("valid = \"data/toy.tsv\"\n", "");
        std::fs::write(&config, text).unwrap();
        let stderr = refused(&config, &dir.path().join("run"));
        assert!(
            stderr.contains(key) && stderr.contains("set data.valid"),
            "{stderr}"
        );
    }
}

#[test]
fn a_run_stopped_early_between_epochs_names_its_step_and_keeps_its_time_record_on_resume() {
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(
        dir.path(),
        80,
        "patience = 2\nvalidate_every = 1000\nvalidate_every_steps = 1",
    );
    let run = dir.path().join("run");
    let output = train(&["--out", run.to_str().unwrap(), "--config"], &config);
    let stderr = String::from_utf8_lossy(&output.stderr);
    // One-step epochs: each validation comes after the epoch's only step, before its end.
    let line = stderr
        .lines()
        .find(|line| line.starts_with("stopped early at step "))
        .unwrap_or_else(|| panic!("{stderr}"));
    assert!(
        line.contains(", in epoch ") && line.contains("in the last 2 validations"),
        "{line}"
    );
    let before = metrics_of(&run);
    assert_eq!(before.last().unwrap()["kind"], "run");
    // Resuming says the same place, and leaves the time record as it was.
    let resumed = train(&["--resume"], &run);
    let stderr = String::from_utf8_lossy(&resumed.stderr);
    let at = line
        .strip_prefix("stopped early ")
        .and_then(|rest| rest.split(':').next())
        .unwrap();
    assert!(
        stderr.contains(&format!("stopped early {at} (training.patience)")),
        "{stderr}"
    );
    assert_eq!(metrics_of(&run), before);
}
