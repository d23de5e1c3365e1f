//! Data-parallel training under a real `mpirun` (OpenMPI): two ranks take the losses and final
//! weights of one process accumulating two batches, learn the toy pairs with dropout on,
//! resume (also on another number of ranks at an epoch's start), stop after a checkpoint on
//! Ctrl-C, and end within seconds when a rank is killed. Built only with `--features mpi`:
//! `cargo test --release --features mpi --test distributed`.
#![cfg(feature = "mpi")]

mod common;

use std::collections::HashMap;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use candle_core::{Device, Tensor};
use common::data_parallel::{ran, step_losses, train_args, write_config, write_pairs};
use common::{succeeded, transformer};

/// `mpirun -np RANKS transformer ...`, one thread per rank, as CI (root, 2 cores) can run it.
fn mpirun(ranks: usize) -> Command {
    let mut command = Command::new("mpirun");
    command
        .args(["--oversubscribe", "-np", &ranks.to_string()])
        .args(["-x", "RAYON_NUM_THREADS=1"])
        // OpenMPI refuses to start as root without both (CI runs as root).
        .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        .arg(assert_cmd::cargo::cargo_bin("transformer"));
    command
}

fn weights(run: &Path) -> HashMap<String, Tensor> {
    candle_core::safetensors::load(run.join("last/model.safetensors"), &Device::Cpu).unwrap()
}

fn largest_difference(a: &HashMap<String, Tensor>, b: &HashMap<String, Tensor>) -> f32 {
    assert_eq!(a.len(), b.len());
    a.iter()
        .map(|(name, x)| {
            let diff = (x - &b[name])
                .unwrap()
                .abs()
                .unwrap()
                .flatten_all()
                .unwrap();
            diff.max(0).unwrap().to_scalar::<f32>().unwrap()
        })
        .fold(0.0, f32::max)
}

#[test]
fn two_ranks_take_the_losses_and_weights_of_one_process_accumulating_two_batches() {
    let dir = tempfile::tempdir().unwrap();
    let pairs = write_pairs(dir.path());
    let (single, ranks) = (dir.path().join("single"), dir.path().join("ranks"));
    succeeded(transformer().args(train_args(&write_config(dir.path(), &pairs, 2, 3), &single)));
    let output = ran(mpirun(2).args(train_args(&write_config(dir.path(), &pairs, 1, 3), &ranks)));
    let (alone, together) = (step_losses(&single), step_losses(&ranks));
    assert_eq!(alone.len(), together.len());
    assert!(alone.len() >= 9, "{alone:?}");
    for ((step, a), (other, b)) in alone.iter().zip(&together) {
        assert_eq!(step, other);
        assert!(
            (a - b).abs() < 1e-6,
            "step {step}: {a} alone, {b} on two ranks"
        );
    }
    assert!(largest_difference(&weights(&single), &weights(&ranks)) < 1e-6);
    let state = std::fs::read_to_string(ranks.join("last/training_state.json")).unwrap();
    assert!(state.contains("\"world\": 2"), "{state}");
    // Rank 0 alone reports: the sample translations are printed once.
    let stdout = String::from_utf8_lossy(&output.stdout);
    let first = stdout.lines().next().unwrap_or_default().to_string();
    assert_eq!(stdout.matches(&first).count(), 1, "{stdout}");
}

#[test]
fn two_ranks_with_dropout_learn_the_toy_pairs() {
    let dir = tempfile::tempdir().unwrap();
    // configs/tiny.toml (dropout 0.1) with a budget that puts each toy pair in its own batch,
    // so that each rank trains on one of them.
    let tiny = std::fs::read_to_string("configs/tiny.toml").unwrap();
    let config = dir.path().join("tiny.toml");
    std::fs::write(&config, tiny.replace("max_tokens = 64", "max_tokens = 8")).unwrap();
    let run = dir.path().join("run");
    ran(mpirun(2).args(train_args(&config, &run)).arg("--quiet"));
    for (source, expected) in [
        ("ich mochte ein bier", "i want a beer ."),
        ("ich mochte ein cola", "i want a coke ."),
    ] {
        let output = succeeded(
            transformer()
                .args(["translate", "--device", "cpu", "--checkpoint"])
                .arg(&run)
                .arg(source),
        );
        assert_eq!(String::from_utf8_lossy(&output.stdout).trim(), expected);
    }
}

#[test]
fn a_distributed_run_resumes_to_the_weights_of_an_uninterrupted_one() {
    let dir = tempfile::tempdir().unwrap();
    let pairs = write_pairs(dir.path());
    let config = write_config(dir.path(), &pairs, 1, 3);
    let (whole, parts) = (dir.path().join("whole"), dir.path().join("parts"));
    ran(mpirun(2).args(train_args(&config, &whole)));
    // Stopped mid-epoch (epochs have 7 steps on two ranks), then resumed on two ranks.
    let stopped = ran(mpirun(2)
        .args(train_args(&config, &parts))
        .args(["--stop-at-step", "5"]));
    // Rank 0 alone says how the run ended.
    let stderr = String::from_utf8_lossy(&stopped.stderr);
    assert_eq!(
        stderr.matches("stopped at step 5 of").count(),
        1,
        "{stderr}"
    );
    let resume = ["train", "--device", "cpu", "--resume"];
    // One process cannot take over mid-epoch: the batches were dealt to two.
    let refused = transformer().args(resume).arg(&parts).output().unwrap();
    assert_eq!(refused.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(
        stderr.contains("saved by 2 process(es) and is resumed by 1"),
        "{stderr}"
    );
    ran(mpirun(2).args(resume).arg(&parts));
    assert_eq!(step_losses(&whole), step_losses(&parts));
    assert_eq!(largest_difference(&weights(&whole), &weights(&parts)), 0.0);
}

#[test]
fn another_number_of_ranks_takes_over_at_an_epoch_end() {
    let dir = tempfile::tempdir().unwrap();
    let pairs = write_pairs(dir.path());
    let config = write_config(dir.path(), &pairs, 1, 3);
    let run = dir.path().join("run");
    // Two ranks train to the end of epoch 1 (its step count from a one-epoch run's log) ...
    let probe = dir.path().join("probe");
    ran(mpirun(2).args(train_args(&write_config(dir.path(), &pairs, 1, 1), &probe)));
    let steps_per_epoch = step_losses(&probe).len();
    ran(mpirun(2)
        .args(train_args(&config, &run))
        .args(["--stop-at-step", &steps_per_epoch.to_string()]));
    // ... and one process takes the run over after epoch 1, to its end.
    let output = succeeded(
        transformer()
            .args(["train", "--device", "cpu", "--resume"])
            .arg(&run),
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains(&format!("at step {steps_per_epoch} (epoch 1")),
        "{stderr}"
    );
    let state = std::fs::read_to_string(run.join("last/training_state.json")).unwrap();
    assert!(
        state.contains("\"world\": 1") && state.contains("\"epoch\": 4"),
        "{state}"
    );
}

#[test]
fn ctrl_c_on_mpirun_stops_every_rank_after_a_checkpoint() {
    let dir = tempfile::tempdir().unwrap();
    let pairs = write_pairs(dir.path());
    // No checkpoint falls due on its own: the one in last/ is the stop's.
    let config = std::fs::read_to_string(write_config(dir.path(), &pairs, 1, 100_000))
        .unwrap()
        .replace("checkpoint_every = 4", "checkpoint_every = 1000000");
    let config_path = dir.path().join("rare.toml");
    std::fs::write(&config_path, config).unwrap();
    let run = dir.path().join("run");
    let mut job = mpirun(2)
        .args(train_args(&config_path, &run))
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Progress lines (stderr is a pipe, so plain lines, every step): wait for a few steps.
    let mut lines = std::io::BufRead::lines(std::io::BufReader::new(job.stderr.take().unwrap()));
    let started = Instant::now();
    loop {
        let line = lines.next().expect("the run prints progress").unwrap();
        if line.starts_with("step 20/") {
            break;
        }
        assert!(started.elapsed() < Duration::from_secs(60), "no progress");
    }
    // SAFETY: kill(2) on the mpirun this test started.
    assert_eq!(unsafe { libc::kill(job.id() as i32, libc::SIGINT) }, 0);
    let interrupted = Instant::now();
    let _ = lines.count();
    job.wait().unwrap();
    assert!(interrupted.elapsed() < Duration::from_secs(30));
    let state = std::fs::read_to_string(run.join("last/training_state.json")).unwrap();
    let state: serde_json::Value = serde_json::from_str(&state).unwrap();
    assert!(state["position"]["step"].as_u64().unwrap() >= 20, "{state}");
}

#[test]
fn a_killed_rank_ends_the_job_within_seconds_and_the_last_checkpoint_stays_readable() {
    let dir = tempfile::tempdir().unwrap();
    let pairs = write_pairs(dir.path());
    let config = write_config(dir.path(), &pairs, 1, 100_000);
    let run = dir.path().join("run");
    let mut job = mpirun(2)
        .args(train_args(&config, &run))
        .arg("--quiet")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let waited = Instant::now();
    while !run.join("last/training_state.json").exists() {
        assert!(waited.elapsed() < Duration::from_secs(60), "no checkpoint");
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_millis(300));
    let ranks = children_named(job.id(), "transformer");
    assert_eq!(ranks.len(), 2, "{ranks:?}");
    let killed = Instant::now();
    // SAFETY: kill(2) on a child process of this test.
    assert_eq!(unsafe { libc::kill(ranks[1], libc::SIGKILL) }, 0);
    let status = loop {
        if let Some(status) = job.try_wait().unwrap() {
            break status;
        }
        assert!(killed.elapsed() < Duration::from_secs(30), "the job hangs");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(!status.success());
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut job.stderr.take().unwrap(), &mut stderr).unwrap();
    assert!(stderr.contains("exited on signal 9"), "{stderr}");
    let output = succeeded(
        transformer()
            .args(["translate", "--device", "cpu", "--checkpoint"])
            .arg(run.join("last"))
            .arg("ich du"),
    );
    assert!(!output.stdout.is_empty());
}

/// The pids of `parent`'s children whose command is `name`, in pid order.
fn children_named(parent: u32, name: &str) -> Vec<i32> {
    let mut pids: Vec<i32> = std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
                return false;
            };
            // `pid (comm) state ppid ...`; comm may hold spaces, so split after its `)`.
            let Some((head, tail)) = stat.rsplit_once(')') else {
                return false;
            };
            let comm = head.split_once('(').map(|(_, c)| c).unwrap_or_default();
            let ppid = tail.split_whitespace().nth(1).and_then(|p| p.parse().ok());
            comm == name && ppid == Some(parent)
        })
        .collect();
    pids.sort_unstable();
    pids
}

#[test]
fn two_ranks_split_validation_and_score_the_bleu_one_process_scores() {
    let dir = tempfile::tempdir().unwrap();
    let pairs = write_pairs(dir.path());
    // 150 validation pairs: three blocks of decoding (64, 64, 22), two for rank 0, one for
    // rank 1; and an odd number of loss batches.
    let (valid_de, valid_en) = (dir.path().join("valid.de"), dir.path().join("valid.en"));
    let lines: Vec<String> = std::fs::read_to_string(&pairs)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect();
    let (mut de, mut en) = (String::new(), String::new());
    for i in 0..150 {
        let (src, tgt) = lines[i % lines.len()].split_once('\t').unwrap();
        de.push_str(&format!("{src}\n"));
        en.push_str(&format!("{tgt}\n"));
    }
    std::fs::write(&valid_de, de).unwrap();
    std::fs::write(&valid_en, en).unwrap();
    let config = write_config(dir.path(), &pairs, 1, 2);
    let text = std::fs::read_to_string(&config).unwrap().replace(
        "[training]",
        &format!(
            "valid = {{ src = \"{}\", tgt = \"{}\" }}\n\n[training]",
            valid_de.display(),
            valid_en.display()
        ),
    );
    std::fs::write(&config, text).unwrap();
    let run = dir.path().join("run");
    ran(mpirun(2).args(train_args(&config, &run)).arg("--quiet"));
    let epochs: Vec<serde_json::Value> = std::fs::read_to_string(run.join("metrics.jsonl"))
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str::<serde_json::Value>(line).unwrap())
        .filter(|record| record.get("valid_bleu").is_some())
        .collect();
    assert_eq!(epochs.len(), 2, "{epochs:?}");
    let split_bleu = epochs[1]["valid_bleu"].as_f64().unwrap();
    let split_loss = epochs[1]["valid_loss"].as_f64().unwrap();
    assert!(split_bleu > 0.0, "{epochs:?}");
    // One process scores the same weights (the run's last/, written after the last
    // validation) on the whole set.
    let output = succeeded(
        transformer()
            .args(["eval", "--device", "cpu", "--json", "--checkpoint"])
            .arg(run.join("last"))
            .arg("--src")
            .arg(&valid_de)
            .arg("--ref")
            .arg(&valid_en),
    );
    let report: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let alone = report["bleu"].as_f64().unwrap();
    assert_eq!((split_bleu * 1e4).round() / 1e4, alone, "{report}");
    // The loss sums add in another order over two ranks: equal to rounding.
    assert!(split_loss.is_finite() && split_loss > 0.0);
}
