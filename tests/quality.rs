//! The tools for getting the last points out of a run: a `[decode]` section that validation
//! and `translate` share, and early stopping (`training.patience`).

mod common;

use std::path::{Path, PathBuf};

use common::{succeeded, transformer};

/// configs/tiny.toml validated on the toy pairs themselves, with `extra` appended.
fn write_config(dir: &Path, training_extra: &str, extra: &str) -> PathBuf {
    let tiny = std::fs::read_to_string("configs/tiny.toml").unwrap();
    let config = tiny
        .replace(
            "train = \"data/toy.tsv\"",
            "train = \"data/toy.tsv\"\nvalid = \"data/toy.tsv\"",
        )
        .replace("[training]\n", &format!("[training]\n{training_extra}\n"));
    let path = dir.join("tiny.toml");
    std::fs::write(&path, format!("{config}\n{extra}\n")).unwrap();
    path
}

/// The tiny config keeping and averaging the last three checkpoints, one every 10 steps, over
/// `epochs` one-step epochs.
fn write_averaging_config(dir: &Path, epochs: usize) -> PathBuf {
    let config = write_config(dir, "keep_last = 3\naverage_last = 3", "");
    let text = std::fs::read_to_string(&config)
        .unwrap()
        .replace("checkpoint_every = 50", "checkpoint_every = 10")
        .replace("epochs = 80", &format!("epochs = {epochs}"));
    std::fs::write(&config, text).unwrap();
    config
}

fn train(config: &Path, run: &Path) -> std::process::Output {
    succeeded(
        transformer()
            .args(["train", "--device", "cpu", "--config"])
            .arg(config)
            .arg("--out")
            .arg(run),
    )
}

/// The validation BLEU of every epoch, from metrics.jsonl.
fn epoch_bleus(run: &Path) -> Vec<f64> {
    std::fs::read_to_string(run.join("metrics.jsonl"))
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str::<serde_json::Value>(line).unwrap())
        .filter(|record| record["kind"] == "epoch")
        .map(|record| record["valid_bleu"].as_f64().unwrap())
        .collect()
}

#[test]
fn a_run_with_patience_stops_when_validation_has_not_improved_for_that_many_epochs() {
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(dir.path(), "patience = 3", "");
    let run = dir.path().join("run");
    let output = train(&config, &run);
    let bleus = epoch_bleus(&run);
    // The rule, applied to what the run logged: the first epoch that is the third in a row
    // without a better BLEU than every epoch before it.
    let expected = common::patience_runs_out(&bleus, 3);
    let expected = expected.expect("the toy run plateaus within its 80 epochs");
    assert_eq!(bleus.len(), expected, "{bleus:?}");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains(&format!(
            "stopped early after epoch {expected}: no better validation"
        )),
        "{stderr}"
    );
    assert!(run.join("best/model.safetensors").is_file());
    // The run is complete: resuming it says so and trains nothing.
    let resumed = succeeded(
        transformer()
            .args(["train", "--device", "cpu", "--resume"])
            .arg(&run),
    );
    let stderr = String::from_utf8_lossy(&resumed.stderr);
    assert!(stderr.contains("stopped early after epoch"), "{stderr}");
    assert_eq!(epoch_bleus(&run).len(), expected);
}

#[test]
fn the_checkpoints_decode_settings_are_what_translate_uses_without_flags() {
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(
        dir.path(),
        "epochs = 2",
        "[decode]\nbeam = 4\nlength_penalty = 0.5\nmax_len = 3",
    );
    let config_text = std::fs::read_to_string(&config)
        .unwrap()
        .replace("epochs = 80\n", "");
    std::fs::write(&config, config_text).unwrap();
    let run = dir.path().join("run");
    train(&config, &run);
    let saved = std::fs::read_to_string(run.join("last/config.toml")).unwrap();
    assert!(
        saved.contains("[decode]") && saved.contains("beam = 4") && saved.contains("max_len = 3"),
        "{saved}"
    );
    let translate = |flags: &[&str]| {
        let output = succeeded(
            transformer()
                .args(["translate", "--device", "cpu", "--json", "--checkpoint"])
                .arg(&run)
                .args(flags)
                .arg("ich mochte ein bier"),
        );
        String::from_utf8_lossy(&output.stdout).into_owned()
    };
    let saved_settings = translate(&[]);
    assert_eq!(
        saved_settings,
        translate(&["--beam", "4", "--length-penalty", "0.5", "--max-len", "3"])
    );
    // A flag wins over its own setting only.
    assert_eq!(
        translate(&["--beam", "2"]),
        translate(&["--beam", "2", "--length-penalty", "0.5", "--max-len", "3"])
    );
}

#[test]
fn bad_decode_settings_are_named_by_key() {
    let dir = tempfile::tempdir().unwrap();
    for (extra, key) in [
        ("[decode]\nbeam = 0", "decode.beam"),
        ("[decode]\nbeams = 4", "beams"),
        ("[decode]\nlength_penalty = nan", "decode.length_penalty"),
    ] {
        let config = write_config(dir.path(), "", extra);
        let output = transformer()
            .args(["train", "--device", "cpu", "--config"])
            .arg(&config)
            .arg("--out")
            .arg(dir.path().join("never"))
            .output()
            .unwrap();
        assert_eq!(output.status.code(), Some(1), "{extra}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.contains(key), "{extra}: {stderr}");
    }
    let config = write_config(dir.path(), "patience = 2", "");
    let text = std::fs::read_to_string(&config).unwrap();
    std::fs::write(&config, text.replace("valid = \"data/toy.tsv\"\n", "")).unwrap();
    let output = transformer()
        .args(["train", "--device", "cpu", "--config"])
        .arg(&config)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("training.patience") && stderr.contains("data.valid"),
        "{stderr}"
    );
}

/// The directory names under RUN/checkpoints/, sorted.
fn kept_checkpoints(run: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(run.join("checkpoints"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

fn load(dir: &Path) -> std::collections::HashMap<String, candle_core::Tensor> {
    candle_core::safetensors::load(dir.join("model.safetensors"), &candle_core::Device::Cpu)
        .unwrap()
}

#[test]
fn averaging_two_kept_checkpoints_gives_their_mean() {
    let dir = tempfile::tempdir().unwrap();
    let config = write_averaging_config(dir.path(), 40);
    let run = dir.path().join("run");
    let output = train(&config, &run);
    // 40 steps, a checkpoint every 10: the newest three are kept.
    assert_eq!(
        kept_checkpoints(&run),
        ["step-00000020", "step-00000030", "step-00000040"]
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("averaged the last 3 kept checkpoints (steps 20..=40)"),
        "{stderr}"
    );
    assert!(run.join("averaged/model.safetensors").is_file());
    // `average` by hand: the mean of the last two, to 1e-7.
    let out = dir.path().join("mean");
    succeeded(
        transformer()
            .args(["average"])
            .arg(&run)
            .args(["--last", "2", "--out"])
            .arg(&out),
    );
    let (a, b, mean) = (
        load(&run.join("checkpoints/step-00000030")),
        load(&run.join("checkpoints/step-00000040")),
        load(&out),
    );
    assert_eq!(mean.len(), a.len());
    for (name, m) in &mean {
        let expected = ((&a[name] + &b[name]).unwrap() / 2.0).unwrap();
        let diff = (m - expected)
            .unwrap()
            .abs()
            .unwrap()
            .flatten_all()
            .unwrap();
        let diff = diff.max(0).unwrap().to_scalar::<f32>().unwrap();
        assert!(diff <= 1e-7, "{name}: {diff}");
    }
    // The average is a checkpoint like any other.
    let translated = succeeded(
        transformer()
            .args(["translate", "--device", "cpu", "--checkpoint"])
            .arg(&out)
            .arg("ich mochte ein bier"),
    );
    assert!(!translated.stdout.is_empty());
    // More than are kept is refused, naming the setting.
    let refused = transformer()
        .args(["average"])
        .arg(&run)
        .args(["--last", "5"])
        .output()
        .unwrap();
    assert_eq!(refused.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(
        stderr.contains("fewer than the 5") && stderr.contains("keep_last"),
        "{stderr}"
    );
}

#[test]
fn a_replaced_run_starts_a_new_history_and_a_short_one_averages_what_it_kept() {
    let dir = tempfile::tempdir().unwrap();
    let config = write_averaging_config(dir.path(), 40);
    let run = dir.path().join("run");
    train(&config, &run);
    // The same directory again, --overwrite, with a run of 20 steps: two checkpoints of its own.
    write_averaging_config(dir.path(), 20);
    let output = succeeded(
        transformer()
            .args(["train", "--device", "cpu", "--overwrite", "--config"])
            .arg(&config)
            .arg("--out")
            .arg(&run),
    );
    assert_eq!(kept_checkpoints(&run), ["step-00000010", "step-00000020"]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("training.average_last = 3 but the run kept 2 checkpoint(s)")
            && stderr.contains("averaged the last 2 kept checkpoints (steps 10..=20)"),
        "{stderr}"
    );
}

#[test]
fn the_checkpoints_length_penalty_and_max_len_are_what_translate_uses_without_flags() {
    // The parity fixture, whose beam search for this sentence picks a one-word hypothesis
    // only under a strongly negative length penalty.
    let dir = tempfile::tempdir().unwrap();
    for entry in std::fs::read_dir("tests/fixtures/parity").unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(entry.path(), dir.path().join(entry.file_name())).unwrap();
    }
    let with_decode = |decode: &str| {
        let text = std::fs::read_to_string("tests/fixtures/parity/config.toml").unwrap();
        std::fs::write(
            dir.path().join("config.toml"),
            format!("{text}\n{decode}\n"),
        )
        .unwrap();
    };
    let translate = |flags: &[&str], sentence: &str| {
        let output = succeeded(
            transformer()
                .args(["translate", "--device", "cpu", "--checkpoint"])
                .arg(dir.path())
                .args(flags)
                .arg(sentence),
        );
        String::from_utf8(output.stdout).unwrap()
    };
    let long = "sie habe ein haus ein bier ein cola";
    with_decode("[decode]\nbeam = 4\nlength_penalty = -6.0\nmax_len = 12");
    assert_eq!(translate(&[], long), "beer\n");
    assert_eq!(
        translate(&["--length-penalty", "1"], long),
        "i want a beer\n"
    );
    with_decode("[decode]\nmax_len = 2");
    assert_eq!(translate(&[], "ich mochte ein bier"), "i want\n");
    assert_eq!(
        translate(&["--max-len", "12"], "ich mochte ein bier"),
        "i want a beer\n"
    );
}

#[test]
fn a_run_replaced_with_overwrite_keeps_nothing_of_the_old_runs_best_or_averaged() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run");
    train(&write_config(dir.path(), "", ""), &run);
    assert!(run.join("best/model.safetensors").is_file());
    // Another run into the same directory, on other targets and without validation.
    std::fs::write(
        dir.path().join("other.tsv"),
        "ich mochte ein bier\tx y\nich mochte ein cola\ty x\n",
    )
    .unwrap();
    let other = std::fs::read_to_string("configs/tiny.toml")
        .unwrap()
        .replace(
            "data/toy.tsv",
            &dir.path().join("other.tsv").display().to_string(),
        );
    std::fs::write(dir.path().join("other.toml"), other).unwrap();
    succeeded(
        transformer()
            .args([
                "train",
                "--device",
                "cpu",
                "--quiet",
                "--overwrite",
                "--config",
            ])
            .arg(dir.path().join("other.toml"))
            .arg("--out")
            .arg(&run),
    );
    assert!(!run.join("best").exists());
    let output = succeeded(
        transformer()
            .args(["translate", "--device", "cpu", "--checkpoint"])
            .arg(&run)
            .arg("ich mochte ein bier"),
    );
    assert_eq!(String::from_utf8_lossy(&output.stdout), "x y\n");
}

/// `path` made immutable (`chattr +i`) until dropped; `None` where that is not possible (not
/// root, or a file system without the attribute: the test then says so and checks nothing).
struct Immutable(PathBuf);

impl Immutable {
    fn make(path: &Path) -> Option<Self> {
        let done = std::process::Command::new("chattr")
            .arg("+i")
            .arg(path)
            .output()
            .ok()?;
        done.status.success().then(|| Self(path.to_path_buf()))
    }
}

impl Drop for Immutable {
    fn drop(&mut self) {
        let _ = std::process::Command::new("chattr")
            .arg("-i")
            .arg(&self.0)
            .status();
    }
}

#[test]
fn an_overwrite_refused_for_a_leftover_it_cannot_remove_leaves_the_old_run_whole() {
    let dir = tempfile::tempdir().unwrap();
    let config = write_averaging_config(dir.path(), 40);
    let run = dir.path().join("run");
    train(&config, &run);
    let leftover = run.join(".last.tmp");
    std::fs::create_dir(&leftover).unwrap();
    std::fs::write(leftover.join("x"), "").unwrap();
    let Some(_pinned) = Immutable::make(&leftover.join("x")) else {
        eprintln!("skipped: chattr +i is not possible here (run as root on ext4 or tmpfs)");
        return;
    };
    let output = transformer()
        .args(["train", "--device", "cpu", "--overwrite", "--config"])
        .arg(&config)
        .arg("--out")
        .arg(&run)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("which an interrupted save left; remove it by hand"),
        "{stderr}"
    );
    assert_eq!(kept_checkpoints(&run).len(), 3);
    assert!(run.join("best/model.safetensors").is_file());
    assert!(run.join("averaged/model.safetensors").is_file());
}

#[test]
fn average_replaces_only_an_earlier_averaged_checkpoint_never_the_run_or_other_files() {
    let dir = tempfile::tempdir().unwrap();
    let config = write_averaging_config(dir.path(), 20);
    let run = dir.path().join("run");
    train(&config, &run);
    let average_into = |out: &Path| {
        transformer()
            .args(["average", "--last", "1", "--out"])
            .arg(out)
            .arg(&run)
            .output()
            .unwrap()
    };
    let refused = |out: &Path, needle: &str| {
        let output = average_into(out);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(1), "{stderr}");
        assert!(stderr.contains(needle), "{needle:?} not in {stderr}");
    };
    // The run itself, and the folder that holds it, were replaced (and so deleted) before.
    refused(&run, "which is being read");
    refused(dir.path(), "which is being read");
    refused(&run.join("last"), "a training run's own checkpoint");
    let other = dir.path().join("notes");
    std::fs::create_dir(&other).unwrap();
    std::fs::write(other.join("todo.md"), "mine").unwrap();
    refused(&other, "holds todo.md, which no checkpoint has");
    assert!(other.join("todo.md").is_file() && run.join("last/model.safetensors").is_file());
    // Inside the run's kept checkpoints, where later averages would count it as one.
    refused(
        &run.join("checkpoints/step-0"),
        "the run's kept checkpoints",
    );
    // A file, named as the flag names it.
    refused(&other.join("todo.md"), "--out");
    assert_eq!(
        std::fs::read_to_string(other.join("todo.md")).unwrap(),
        "mine"
    );
    // An earlier average elsewhere is replaced only when asked (it could be another run's);
    // the run's own averaged/ always.
    let averaged = dir.path().join("averaged");
    assert!(average_into(&averaged).status.success());
    refused(&averaged, "--overwrite");
    let again = transformer()
        .args(["average", "--last", "1", "--overwrite", "--out"])
        .arg(&averaged)
        .arg(&run)
        .output()
        .unwrap();
    assert!(again.status.success());
    for _ in 0..2 {
        let own = transformer()
            .args(["average", "--last", "1"])
            .arg(&run)
            .output()
            .unwrap();
        assert!(own.status.success());
    }
}
