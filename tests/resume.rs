//! Runs that stop (on request, on a signal, by kill -9, by a crash mid-write, by a diverging
//! loss) lose nothing, and resumed runs take exactly the steps the uninterrupted run takes.

mod common;

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStderr, Command as StdCommand, Stdio};

use common::{succeeded, transformer, SmallDisk};
use predicates::prelude::*;
use predicates::str::contains;
use serde_json::Value;
use tempfile::TempDir;

/// Two one-pair batches per epoch (so runs stop mid-epoch), dropout on, validation on.
fn write_config(dir: &Path, epochs: usize, extra_training: &str) -> PathBuf {
    let data = std::fs::canonicalize("data/toy.tsv").unwrap();
    let text = format!(
        "[model]\nlayers = 2\nd_model = 32\nd_ff = 64\nheads = 4\ndropout = 0.1\n\n\
         [data]\ntrain = {data:?}\nvalid = {data:?}\n\n\
         [training]\nseed = 3\nepochs = {epochs}\nmax_tokens = 8\nlr_factor = 2.0\n\
         warmup = 20\nlog_every = 1\ncheckpoint_every = 5\n{extra_training}"
    );
    let path = dir.join("config.toml");
    std::fs::write(&path, text).unwrap();
    path
}

fn train(config: &Path, out: &Path, extra: &[&str]) -> std::process::Output {
    succeeded(
        transformer()
            .args(["train", "--device", "cpu", "--config"])
            .arg(config)
            .arg("--out")
            .arg(out)
            .args(extra),
    )
}

fn resume(run: &Path, extra: &[&str]) -> std::process::Output {
    succeeded(
        transformer()
            .args(["train", "--device", "cpu", "--resume"])
            .arg(run)
            .args(extra),
    )
}

/// metrics.jsonl without the wall-clock fields.
fn metrics(run: &Path) -> Vec<Value> {
    std::fs::read_to_string(run.join("metrics.jsonl"))
        .unwrap()
        .lines()
        .map(|line| {
            let mut record: Value = serde_json::from_str(line).unwrap();
            let fields = record.as_object_mut().unwrap();
            fields.remove("elapsed_s");
            fields.remove("tokens_per_s");
            // Where the time went: timings, which differ between runs.
            fields.remove("time");
            record
        })
        .collect()
}

/// Every record equal, numbers within 1e-6.
fn assert_same_metrics(a: &[Value], b: &[Value]) {
    assert_eq!(a.len(), b.len(), "{a:?}\n{b:?}");
    for (x, y) in a.iter().zip(b) {
        let (x, y) = (x.as_object().unwrap(), y.as_object().unwrap());
        assert_eq!(x.keys().collect::<Vec<_>>(), y.keys().collect::<Vec<_>>());
        for (key, value) in x {
            match (value.as_f64(), y[key].as_f64()) {
                (Some(p), Some(q)) => assert!((p - q).abs() <= 1e-6, "{key}: {p} vs {q}"),
                _ => assert_eq!(value, &y[key], "{key}"),
            }
        }
    }
}

fn checkpoint_step(run: &Path) -> u64 {
    let text = std::fs::read_to_string(run.join("last/training_state.json")).unwrap();
    let state: Value = serde_json::from_str(&text).unwrap();
    state["position"]["step"].as_u64().unwrap()
}

/// A running `train` and its stderr, read as far as the progress line that was waited for.
struct Running {
    child: Child,
    stderr: BufReader<ChildStderr>,
    step: u64,
}

impl Running {
    /// The rest of stderr, once the process has ended.
    fn finish(mut self) -> (std::process::ExitStatus, String) {
        let mut rest = String::new();
        self.stderr.read_to_string(&mut rest).unwrap();
        (self.child.wait().unwrap(), rest)
    }
}

/// Starts a long run and returns it once its progress shows step `at_least`.
fn spawn_until_step(config: &Path, out: &Path, at_least: u64) -> Running {
    let mut child = StdCommand::new(env!("CARGO_BIN_EXE_transformer"))
        .args(["train", "--device", "cpu", "--config"])
        .arg(config)
        .arg("--out")
        .arg(out)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    while stderr.read_line(&mut line).unwrap() > 0 {
        let step = line
            .strip_prefix("step ")
            .and_then(|rest| rest.split('/').next())
            .and_then(|n| n.parse::<u64>().ok());
        if let Some(step) = step.filter(|&s| s >= at_least) {
            return Running {
                child,
                stderr,
                step,
            };
        }
        line.clear();
    }
    let status = child.wait().unwrap();
    panic!("the run ended ({status}) before step {at_least}");
}

fn send_signal(flag: &str, child: &Child) {
    let status = StdCommand::new("kill")
        .args([flag, &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
}

#[test]
fn a_run_stopped_mid_epoch_and_resumed_logs_exactly_the_losses_of_an_uninterrupted_run() {
    stopped_and_resumed_runs_match_the_uninterrupted_one("");
}

#[test]
fn a_bf16_run_resumes_exactly_too() {
    // bf16 products on the CPU are deterministic: each output is summed by one thread in
    // one order, whatever the split.
    stopped_and_resumed_runs_match_the_uninterrupted_one("dtype = \"bf16\"\n");
}

fn stopped_and_resumed_runs_match_the_uninterrupted_one(extra_training: &str) {
    let dir = TempDir::new().unwrap();
    let config = write_config(dir.path(), 6, extra_training);
    let (whole, parts) = (dir.path().join("whole"), dir.path().join("parts"));
    train(&config, &whole, &[]);
    let stopped = train(&config, &parts, &["--stop-at-step", "7"]);
    let stderr = String::from_utf8_lossy(&stopped.stderr);
    assert!(stderr.contains("--resume"), "{stderr}");
    assert_eq!(checkpoint_step(&parts), 7);
    resume(&parts, &["--stop-at-step", "10"]);
    resume(&parts, &[]);
    assert_same_metrics(&metrics(&whole), &metrics(&parts));
    for file in [
        "last/model.safetensors",
        "last/optimizer.safetensors",
        "best/model.safetensors",
    ] {
        let (a, b) = (whole.join(file), parts.join(file));
        assert!(
            std::fs::read(a).unwrap() == std::fs::read(b).unwrap(),
            "{file} differs"
        );
    }
}

#[test]
fn sigint_finishes_the_step_saves_it_exits_130_and_the_resumed_run_matches() {
    let dir = TempDir::new().unwrap();
    let config = write_config(dir.path(), 5000, "");
    let run = dir.path().join("run");
    let running = spawn_until_step(&config, &run, 12);
    let seen = running.step;
    send_signal("-INT", &running.child);
    let (exit, rest) = running.finish();
    assert_eq!(exit.code(), Some(130), "{rest}");
    let stopped_at = checkpoint_step(&run);
    // The step in progress when the signal came is finished and saved, and the message
    // names the step that was saved.
    assert!(stopped_at >= seen, "saw step {seen}, saved {stopped_at}");
    assert!(
        rest.contains(&format!("interrupted by SIGINT at step {stopped_at} of "))
            && rest.contains(&format!("--resume {}", run.display())),
        "{rest}"
    );
    let until = (stopped_at + 6).to_string();
    resume(&run, &["--stop-at-step", &until]);
    let straight = dir.path().join("straight");
    train(&config, &straight, &["--stop-at-step", &until]);
    assert_same_metrics(&metrics(&straight), &metrics(&run));
}

#[test]
fn sigterm_also_stops_with_a_checkpoint_of_the_current_step() {
    let dir = TempDir::new().unwrap();
    let config = write_config(dir.path(), 5000, "");
    let run = dir.path().join("run");
    let running = spawn_until_step(&config, &run, 3);
    let seen = running.step;
    send_signal("-TERM", &running.child);
    let (exit, rest) = running.finish();
    assert_eq!(exit.code(), Some(143), "{rest}");
    assert!(rest.contains("interrupted by SIGTERM"), "{rest}");
    assert!(checkpoint_step(&run) >= seen);
}

#[test]
fn kill_9_loses_at_most_checkpoint_every_steps_and_the_run_resumes() {
    let dir = TempDir::new().unwrap();
    let config = write_config(dir.path(), 5000, "");
    let run = dir.path().join("run");
    let mut running = spawn_until_step(&config, &run, 23);
    let seen = running.step;
    running.child.kill().unwrap();
    running.finish();
    let saved = checkpoint_step(&run);
    // Progress for step s is printed before step s's checkpoint is written, so when step
    // `seen` showed, every checkpoint up to the one before it was complete.
    assert!(saved + 5 > seen, "saw step {seen}, checkpoint at {saved}");
    let until = (saved + 3).to_string();
    resume(&run, &["--stop-at-step", &until]);
    assert_eq!(checkpoint_step(&run), saved + 3);
    let steps: Vec<u64> = metrics(&run)
        .iter()
        .filter(|r| r["kind"] == "step")
        .map(|r| r["step"].as_u64().unwrap())
        .collect();
    let expected: Vec<u64> = (1..=saved + 3).collect();
    assert_eq!(
        steps, expected,
        "each step logged once, none from after the kill"
    );
}

#[test]
fn a_crash_while_writing_a_checkpoint_leaves_the_previous_one_usable() {
    let dir = TempDir::new().unwrap();
    let config = write_config(dir.path(), 6, "");
    let run = dir.path().join("run");
    train(&config, &run, &["--stop-at-step", "5"]);
    // What a crash halfway through writing the next checkpoint leaves behind.
    let staging = run.join(".last.tmp");
    std::fs::create_dir(&staging).unwrap();
    let weights = std::fs::read(run.join("last/model.safetensors")).unwrap();
    std::fs::write(
        staging.join("model.safetensors"),
        &weights[..weights.len() / 3],
    )
    .unwrap();
    std::fs::write(run.join(".tmp.metrics.jsonl"), "{\"kind\": \"st").unwrap();
    transformer()
        .args(["translate", "--device", "cpu", "--checkpoint"])
        .arg(run.join("last"))
        .arg("ich mochte ein bier")
        .assert()
        .success();
    resume(&run, &["--stop-at-step", "8"]);
    assert_eq!(checkpoint_step(&run), 8);
    assert!(
        !staging.exists(),
        "the half-written checkpoint was cleaned up"
    );
    assert!(
        !run.join(".tmp.metrics.jsonl").exists(),
        "the half-written metrics file was cleaned up"
    );
}

#[test]
fn a_second_ctrl_c_exits_at_once_without_waiting_for_the_checkpoint() {
    let dir = TempDir::new().unwrap();
    // Steps and checkpoints slow enough (a 20M-parameter model, 240 MB with Adam's moments)
    // that the second signal arrives while the first stop is still under way.
    let config = write_config(dir.path(), 5000, "");
    let text = std::fs::read_to_string(&config)
        .unwrap()
        .replace("d_model = 32\nd_ff = 64", "d_model = 512\nd_ff = 2048");
    std::fs::write(&config, text).unwrap();
    let run = dir.path().join("run");
    let running = spawn_until_step(&config, &run, 1);
    send_signal("-INT", &running.child);
    std::thread::sleep(std::time::Duration::from_millis(30));
    send_signal("-INT", &running.child);
    let (exit, rest) = running.finish();
    assert_eq!(exit.code(), Some(130), "{rest}");
    assert!(
        !rest.contains("checkpoint saved"),
        "the second signal should not wait for the clean stop: {rest}"
    );
}

/// Source and target sides of the toy pairs as two files in `dir`, for `eval`.
fn toy_sides(dir: &Path) -> (PathBuf, PathBuf) {
    let toy = std::fs::read_to_string("data/toy.tsv").unwrap();
    let (src, tgt): (Vec<&str>, Vec<&str>) = toy.lines().filter_map(|l| l.split_once('\t')).unzip();
    let (src_file, tgt_file) = (dir.join("valid.de"), dir.join("valid.en"));
    std::fs::write(&src_file, src.join("\n") + "\n").unwrap();
    std::fs::write(&tgt_file, tgt.join("\n") + "\n").unwrap();
    (src_file, tgt_file)
}

/// BLEU of `checkpoint` on the toy pairs, as `eval` computes it (greedy, as validation).
fn eval_bleu(checkpoint: &Path, src: &Path, reference: &Path) -> f64 {
    let output = succeeded(
        transformer()
            .args(["eval", "--device", "cpu", "--json", "--checkpoint"])
            .arg(checkpoint)
            .arg("--src")
            .arg(src)
            .arg("--ref")
            .arg(reference),
    );
    let json: Value = serde_json::from_slice(&output.stdout).unwrap();
    json["bleu"].as_f64().unwrap()
}

#[test]
fn best_holds_the_weights_of_the_best_validation_bleu_and_survives_a_nan() {
    let dir = TempDir::new().unwrap();
    let config = write_config(dir.path(), 30, "");
    let run = dir.path().join("run");
    train(&config, &run, &["--stop-at-step", "41"]);
    let bleus: Vec<f64> = metrics(&run)
        .iter()
        .filter_map(|r| r["valid_bleu"].as_f64())
        .collect();
    let best = bleus.iter().cloned().fold(f64::MIN, f64::max);
    assert!(
        best > bleus[0],
        "validation BLEU should improve, so that best/ is a choice: {bleus:?}"
    );
    let (src, reference) = toy_sides(dir.path());
    let scored = eval_bleu(&run.join("best"), &src, &reference);
    assert!(
        (scored - best).abs() < 1e-3,
        "best/ scores {scored}, the best epoch {best}"
    );

    // The same run, diverging after it resumes: best/ must stay as it was.
    let best_weights = std::fs::read(run.join("best/model.safetensors")).unwrap();
    let saved_config = run.join("last/config.toml");
    let text = std::fs::read_to_string(&saved_config).unwrap();
    std::fs::write(
        &saved_config,
        text.replace("lr_factor = 2.0", "lr_factor = 1e30"),
    )
    .unwrap();
    transformer()
        .args(["train", "--device", "cpu", "--resume"])
        .arg(&run)
        .assert()
        .code(1)
        .stderr(contains("the loss became NaN at step"));
    assert!(
        std::fs::read(run.join("best/model.safetensors")).unwrap() == best_weights,
        "best/ changed after the loss became NaN"
    );
    assert!((eval_bleu(&run.join("best"), &src, &reference) - best).abs() < 1e-3);
}

#[test]
fn a_crash_between_the_two_renames_falls_back_to_the_retired_checkpoint() {
    let dir = TempDir::new().unwrap();
    let config = write_config(dir.path(), 6, "");
    let run = dir.path().join("run");
    train(&config, &run, &["--stop-at-step", "5"]);
    std::fs::rename(run.join("last"), run.join(".last.old")).unwrap();
    std::fs::remove_dir_all(run.join("best")).unwrap();
    transformer()
        .args(["translate", "--device", "cpu", "--checkpoint"])
        .arg(&run)
        .arg("ich mochte ein bier")
        .assert()
        .success();
    resume(&run, &["--stop-at-step", "7"]);
    assert_eq!(checkpoint_step(&run), 7);
    assert!(!run.join(".last.old").exists());
}

#[test]
fn a_retired_checkpoint_left_half_deleted_by_a_kill_never_blocks_a_later_save() {
    let dir = TempDir::new().unwrap();
    let config = write_config(dir.path(), 6, "");
    let run = dir.path().join("run");
    train(&config, &run, &["--stop-at-step", "5"]);
    // What a SIGKILL while the last save deleted `.last.old` leaves behind.
    let leftover = run.join(".last.old");
    std::fs::create_dir(&leftover).unwrap();
    std::fs::write(leftover.join("vocab.src.txt"), "x\n").unwrap();
    resume(&run, &["--stop-at-step", "7"]);
    assert_eq!(checkpoint_step(&run), 7);
    assert!(!leftover.exists());
    // The same leftover, as a file this time, before a run that replaces the old one, with
    // `last` a link to nowhere.
    std::fs::write(&leftover, "x").unwrap();
    std::fs::remove_dir_all(run.join("last")).unwrap();
    std::os::unix::fs::symlink("/nonexistent", run.join("last")).unwrap();
    train(&config, &run, &["--overwrite", "--stop-at-step", "5"]);
    assert_eq!(checkpoint_step(&run), 5);
    assert!(!leftover.exists());
    assert!(!run.join(".last.tmp").exists());
}

#[test]
fn what_kills_leave_among_the_kept_checkpoints_is_cleared_by_the_next_run() {
    let dir = TempDir::new().unwrap();
    let config = write_config(dir.path(), 6, "keep_last = 2");
    let run = dir.path().join("run");
    train(&config, &run, &["--stop-at-step", "5"]);
    let leftovers = [".step-00000003.tmp", ".step-00000004.old"];
    for name in leftovers {
        let path = run.join("checkpoints").join(name);
        std::fs::create_dir_all(&path).unwrap();
        std::fs::write(path.join("model.safetensors"), "half").unwrap();
    }
    resume(&run, &["--stop-at-step", "6"]);
    for name in leftovers {
        assert!(
            !run.join("checkpoints").join(name).exists(),
            "{name} is left"
        );
    }
}

#[test]
fn a_full_disk_at_a_checkpoint_names_the_disk_removes_its_partial_save_and_keeps_the_last() {
    let dir = TempDir::new().unwrap();
    let Some(disk) = SmallDisk::mount(&dir.path().join("disk"), "16m") else {
        eprintln!("skipped: this process may not mount a tmpfs (run as root to check it)");
        return;
    };
    let config = write_config(dir.path(), 6, "");
    let run = disk.0.join("run");
    train(&config, &run, &["--stop-at-step", "5"]);
    // Fill the disk but for a few kilobytes, less than a checkpoint.
    disk.fill_leaving(16 * 1024);
    let output = transformer()
        .args(["train", "--device", "cpu", "--resume"])
        .arg(&run)
        .args(["--stop-at-step", "7"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "error: cannot write checkpoint {}: No space left on device",
            run.join("last").display()
        )) && stderr.contains("the disk is full"),
        "{stderr}"
    );
    assert!(!run.join(".last.tmp").exists(), "the partial save is left");
    assert_eq!(checkpoint_step(&run), 5);
    std::fs::remove_file(disk.0.join("filler")).unwrap();
    resume(&run, &["--stop-at-step", "7"]);
    assert_eq!(checkpoint_step(&run), 7);
}

/// A run of 20 steps that checkpoints every step at `lr_factor`, trained with `flags`: what it
/// printed on stderr, and its directory.
fn diverging_run(
    dir: &TempDir,
    lr_factor: &str,
    flags: &[&str],
) -> (assert_cmd::assert::Assert, std::path::PathBuf) {
    let config = write_config(dir.path(), 20, "");
    let text = std::fs::read_to_string(&config).unwrap();
    let text = text
        .replace("lr_factor = 2.0", &format!("lr_factor = {lr_factor}"))
        .replace("checkpoint_every = 5", "checkpoint_every = 1");
    std::fs::write(&config, text).unwrap();
    let run = dir.path().join("run");
    let outcome = transformer()
        .args(["train", "--device", "cpu", "--config"])
        .arg(&config)
        .arg("--out")
        .arg(&run)
        .args(flags)
        .assert();
    (outcome, run)
}

#[test]
fn a_diverging_loss_stops_with_the_step_keeps_the_checkpoint_and_suggests_a_fix() {
    let dir = TempDir::new().unwrap();
    let (outcome, run) = diverging_run(&dir, "1e30", &[]);
    outcome.code(1).stderr(
        contains("the loss became NaN at step 2")
            .and(contains("checkpoint of step 1 is kept"))
            .and(contains("training.lr_factor")),
    );
    assert_eq!(checkpoint_step(&run), 1);
}

/// An update so large that the weights overflow while the loss before it was still a number:
/// those weights are never written as a checkpoint (a resume would start from NaN).
#[test]
fn weights_an_update_overflowed_are_not_written_as_a_checkpoint() {
    let dir = TempDir::new().unwrap();
    let (outcome, run) = diverging_run(&dir, "1e300", &["--stop-at-step", "1"]);
    outcome.code(1).stderr(
        contains("the weights became NaN or infinite at step 1")
            .and(contains("no checkpoint was written"))
            .and(contains("training.lr_factor")),
    );
    assert!(!run.join("last").join("model.safetensors").exists());
}

#[test]
fn resuming_a_finished_run_says_there_is_nothing_to_do() {
    let dir = TempDir::new().unwrap();
    let config = write_config(dir.path(), 2, "");
    let run = dir.path().join("run");
    train(&config, &run, &[]);
    let out = resume(&run, &[]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("nothing to resume"));
}

#[test]
fn resuming_on_different_data_is_refused_by_name() {
    let dir = TempDir::new().unwrap();
    let data = dir.path().join("pairs.tsv");
    std::fs::write(&data, "ich mochte ein bier\ti want a beer\n").unwrap();
    let config = dir.path().join("config.toml");
    let text = format!(
        "[model]\nlayers = 1\nd_model = 16\nd_ff = 32\nheads = 2\n[data]\ntrain = {data:?}\n\
         [training]\nepochs = 3\nmax_tokens = 8\n"
    );
    std::fs::write(&config, text).unwrap();
    let run = dir.path().join("run");
    train(&config, &run, &["--stop-at-step", "1"]);
    std::fs::write(&data, "ich mochte ein bier\ti want a beer .\n").unwrap();
    transformer()
        .args(["train", "--device", "cpu", "--resume"])
        .arg(&run)
        .assert()
        .code(1)
        .stderr(contains("training data differs").and(contains("cannot resume from")));
}

#[test]
fn resuming_a_directory_without_a_run_says_what_to_pass() {
    let dir = TempDir::new().unwrap();
    transformer()
        .args(["train", "--device", "cpu", "--resume"])
        .arg(dir.path())
        .assert()
        .code(1)
        .stderr(contains("has no last/model.safetensors"));
}

#[test]
fn a_checkpoint_without_training_state_cannot_be_resumed_and_says_why() {
    let dir = TempDir::new().unwrap();
    let config = write_config(dir.path(), 3, "");
    let run = dir.path().join("run");
    train(&config, &run, &["--stop-at-step", "2"]);
    std::fs::remove_file(run.join("last/training_state.json")).unwrap();
    transformer()
        .args(["train", "--device", "cpu", "--resume"])
        .arg(&run)
        .assert()
        .code(1)
        .stderr(contains("training_state.json").and(contains("not written for resuming")));
}

/// A run killed before its first checkpoint left files but nothing to resume: the error says
/// so (and what to do), instead of asking for the directory it was given.
#[test]
fn resuming_a_run_stopped_before_its_first_checkpoint_says_to_start_it_again() {
    let dir = TempDir::new().unwrap();
    let started = dir.path().join("started");
    std::fs::create_dir(&started).unwrap();
    std::fs::write(started.join("metrics.jsonl"), "").unwrap();
    let empty = dir.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    let file = dir.path().join("file");
    std::fs::write(&file, "").unwrap();
    let missing = dir.path().join("missing");
    for (run, says) in [
        (
            &started,
            "has no checkpoint yet: its run stopped before writing one",
        ),
        (
            &empty,
            "has no last/model.safetensors; pass the run directory",
        ),
        (&file, "is a file, not a run directory"),
        (&missing, "does not exist"),
    ] {
        transformer()
            .args(["train", "--device", "cpu", "--resume"])
            .arg(run)
            .assert()
            .code(1)
            .stderr(contains(says));
    }
}

/// A run killed after its last checkpoint but before `training.average_last` wrote
/// `averaged/` (the state a kill -9 there leaves: every checkpoint, no average) is averaged
/// by `--resume`, into the same weights the uninterrupted end wrote.
#[test]
fn a_run_killed_before_its_averaging_is_averaged_on_resume() {
    let dir = TempDir::new().unwrap();
    let config = write_config(dir.path(), 6, "keep_last = 3\naverage_last = 3\n");
    let run = dir.path().join("run");
    train(&config, &run, &["--quiet"]);
    let averaged = run.join("averaged");
    let whole = std::fs::read(averaged.join("model.safetensors")).unwrap();
    std::fs::remove_dir_all(&averaged).unwrap();
    let output = resume(&run, &[]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("stopped before averaging its checkpoints")
            && stderr.contains("averaged the last 3"),
        "{stderr}"
    );
    assert_eq!(
        std::fs::read(averaged.join("model.safetensors")).unwrap(),
        whole
    );
    // Averaged, the finished run has nothing left to do.
    let again = resume(&run, &[]);
    assert!(String::from_utf8_lossy(&again.stderr).contains("nothing to resume"));
    // An average older than the run's newest kept checkpoint (one made by hand while it
    // trained) is not the run's: it is made again.
    std::fs::File::options()
        .write(true)
        .open(averaged.join("model.safetensors"))
        .unwrap()
        .set_modified(std::time::SystemTime::now() - std::time::Duration::from_secs(3600))
        .unwrap();
    let stale = resume(&run, &[]);
    assert!(
        String::from_utf8_lossy(&stale.stderr).contains("averaged the last 3"),
        "{}",
        String::from_utf8_lossy(&stale.stderr)
    );
    assert_eq!(
        std::fs::read(averaged.join("model.safetensors")).unwrap(),
        whole
    );
}

/// What writers killed mid-write leave in a run directory (`.tmp-XXXXXXXX.metrics.jsonl`,
/// `.tmp-XXXXXXXX.loss.png`, however young) is cleared when the run is resumed or replaced
/// with --overwrite, which hold the run's lock: no other writer is at work; nothing else there
/// is touched.
#[test]
fn temporaries_of_killed_writers_go_on_resume_and_overwrite() {
    let dir = TempDir::new().unwrap();
    let config = write_config(dir.path(), 2, "");
    let run = dir.path().join("run");
    train(&config, &run, &["--quiet", "--stop-at-step", "2"]);
    let plant = || {
        for name in [".tmp-0123abcd.metrics.jsonl", ".tmp-89abcdef.loss.png"] {
            std::fs::write(run.join(name), b"half").unwrap();
        }
        std::fs::write(run.join("notes.txt"), b"mine").unwrap();
    };
    let temporaries = || {
        std::fs::read_dir(&run)
            .unwrap()
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().starts_with(".tmp-"))
            .count()
    };
    plant();
    resume(&run, &["--quiet"]);
    assert_eq!(temporaries(), 0);
    plant();
    train(&config, &run, &["--quiet", "--overwrite"]);
    assert_eq!(temporaries(), 0);
    assert_eq!(std::fs::read(run.join("notes.txt")).unwrap(), b"mine");
}
