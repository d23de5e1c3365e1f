//! Checkpoint writers that cannot collide: two `quantize`, `average`, `export` or `train`
//! processes started at the same moment on one output, many times over, each leave a whole
//! checkpoint or a clear refusal, and no command says it wrote a directory that is not there
//! whole. A writer killed at each step of a save (staging, between the two renames, before
//! the retired copy is removed, at a random moment) leaves what the next reader and the next
//! writer put right.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;
use std::time::Duration;

use common::{succeeded, trained_once, transformer};

/// How many pairs of writers of each kind start together.
const PAIRS: usize = 50;

/// A tiny run that keeps its last two checkpoints (for `average`), trained once.
fn run_dir() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| trained_once("concurrent-run", |dir| tiny_config(dir, 4)))
}

/// The smallest model that trains in a fraction of a second on the toy pairs, for `epochs`.
fn tiny_config(dir: &Path, epochs: usize) -> String {
    std::fs::copy("data/toy.tsv", dir.join("toy.tsv")).unwrap();
    format!(
        "[model]\nlayers = 1\nd_model = 16\nd_ff = 32\nheads = 2\nmax_len = 16\n\
         [data]\ntrain = \"{}\"\n\
         [training]\nepochs = {epochs}\nmax_tokens = 64\ncheckpoint_every = 1\nkeep_last = 2\n\
         log_every = 1000\n",
        dir.join("toy.tsv").display()
    )
}

fn binary() -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_transformer"));
    command.stdout(Stdio::null()).stderr(Stdio::piped());
    command
}

/// Starts `args` twice at once and waits for both.
fn race(args: &[String]) -> [Output; 2] {
    let spawn = || binary().args(args).spawn().unwrap();
    let (a, b) = (spawn(), spawn());
    [a.wait_with_output().unwrap(), b.wait_with_output().unwrap()]
}

/// Whether `dir` holds a whole checkpoint of ours (or a MarianMT export): every file a
/// loader reads, each non-empty, and no staging leftovers beside it.
fn whole(dir: &Path, files: &[&str]) -> bool {
    files
        .iter()
        .all(|f| std::fs::metadata(dir.join(f)).is_ok_and(|m| m.is_file() && m.len() > 0))
}

/// What is beside `dir` that a save of it left behind.
fn leftovers(dir: &Path) -> Vec<String> {
    let name = dir.file_name().unwrap().to_string_lossy().into_owned();
    std::fs::read_dir(dir.parent().unwrap())
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(&format!(".{name}.")))
        .collect()
}

/// Checks one race: each writer either succeeded and the directory is whole, or failed with
/// one clear line saying why (another writer, or what is already there).
fn check_race(outputs: &[Output; 2], out: &Path, files: &[&str], refusals: &[&str]) {
    for output in outputs {
        let stderr = String::from_utf8_lossy(&output.stderr);
        if output.status.success() {
            assert!(
                whole(out, files),
                "said it wrote {} but: {stderr}",
                out.display()
            );
        } else {
            assert!(!stderr.contains("panicked"), "{stderr}");
            let error = stderr
                .lines()
                .rfind(|l| l.starts_with("error:"))
                .unwrap_or("");
            assert!(
                refusals.iter().any(|r| error.contains(r)),
                "not a clear refusal: {stderr}"
            );
        }
    }
    assert!(
        outputs.iter().any(|o| o.status.success()) || whole(out, files),
        "neither wrote {}",
        out.display()
    );
    assert!(whole(out, files), "{} is not whole", out.display());
    assert_eq!(leftovers(out), Vec::<String>::new());
}

const OURS: &[&str] = &["config.toml", "model.safetensors"];
const EXPORT: &[&str] = &[
    "config.json",
    "model.safetensors",
    "source.spm",
    "vocab.json",
];
const BUSY: &str = "is being written by another process";

fn args(parts: &[&str], out: &Path) -> Vec<String> {
    let mut args: Vec<String> = parts.iter().map(|s| s.to_string()).collect();
    args.push("--out".into());
    args.push(out.display().to_string());
    args
}

#[test]
fn two_quantize_at_once_leave_one_whole_checkpoint_or_refuse() {
    let work = tempfile::tempdir().unwrap();
    let run = run_dir().display().to_string();
    for i in 0..PAIRS {
        let out = work.path().join(format!("q{i}"));
        let outputs = race(&args(&["quantize", &run], &out));
        check_race(&outputs, &out, OURS, &[BUSY, "already exists"]);
        // With --overwrite both may write; the last one's checkpoint stands, whole.
        let outputs = race(&args(&["quantize", &run, "--overwrite"], &out));
        check_race(&outputs, &out, OURS, &[BUSY]);
    }
}

#[test]
fn two_average_at_once_leave_one_whole_checkpoint_or_refuse() {
    let work = tempfile::tempdir().unwrap();
    let run = run_dir().display().to_string();
    for i in 0..PAIRS {
        let out = work.path().join(format!("avg{}", i % 5));
        let outputs = race(&args(&["average", &run, "--last", "2"], &out));
        check_race(&outputs, &out, OURS, &[BUSY, "already exists"]);
        // With --overwrite both may write; the last one's checkpoint stands, whole.
        let outputs = race(&args(
            &["average", &run, "--last", "2", "--overwrite"],
            &out,
        ));
        check_race(&outputs, &out, OURS, &[BUSY]);
    }
}

#[test]
fn two_export_at_once_leave_one_whole_export_or_refuse() {
    let work = tempfile::tempdir().unwrap();
    let source = "tests/fixtures/marian-shared";
    for i in 0..PAIRS {
        let out = work.path().join(format!("hf{i}"));
        let outputs = race(&args(&["export", "--to", "hf", source], &out));
        check_race(&outputs, &out, EXPORT, &[BUSY, "already exists"]);
    }
}

#[test]
fn two_trainings_into_one_run_directory_leave_one_run_or_refuse_naming_the_first() {
    let work = tempfile::tempdir().unwrap();
    std::fs::write(work.path().join("config.toml"), tiny_config(work.path(), 2)).unwrap();
    for i in 0..PAIRS {
        let out = work.path().join(format!("run{i}"));
        let train = args(
            &[
                "train",
                "--device",
                "cpu",
                "--quiet",
                "--config",
                &work.path().join("config.toml").display().to_string(),
            ],
            &out,
        );
        let outputs = race(&train);
        for output in &outputs {
            let stderr = String::from_utf8_lossy(&output.stderr);
            if !output.status.success() {
                // The second either found the first's lock (and names its process) or,
                // started after the first finished, found its checkpoint.
                assert!(
                    stderr.contains("is being trained by another process (pid ")
                        || stderr.contains("already holds a checkpoint"),
                    "{stderr}"
                );
            }
        }
        assert!(outputs.iter().any(|o| o.status.success()));
        assert!(whole(&out.join("last"), OURS));
        assert_eq!(leftovers(&out), Vec::<String>::new());
        assert_eq!(leftovers(&out.join("last")), Vec::<String>::new());
    }
}

/// A copy of the run's last checkpoint in a fresh directory, as `work/NAME`.
fn copy_checkpoint(work: &Path, name: &str) -> PathBuf {
    let from = run_dir().join("last");
    let to = work.join(name);
    std::fs::create_dir_all(&to).unwrap();
    for entry in std::fs::read_dir(from).unwrap().flatten() {
        std::fs::copy(entry.path(), to.join(entry.file_name())).unwrap();
    }
    to
}

fn translates(checkpoint: &Path) -> bool {
    binary()
        .args(["translate", "--checkpoint"])
        .arg(checkpoint)
        .arg("ich mochte ein bier")
        .output()
        .unwrap()
        .status
        .success()
}

#[test]
fn a_save_killed_at_each_step_is_put_right_by_the_next_reader_and_writer() {
    let work = tempfile::tempdir().unwrap();
    let run = run_dir().display().to_string();
    // Killed between the two renames: only the retired copy is left. A reader puts it back.
    let q = work.path().join("q");
    succeeded(transformer().args(args(&["quantize", &run], &q)));
    std::fs::rename(&q, work.path().join(".q.old")).unwrap();
    assert!(translates(&q));
    assert!(whole(&q, OURS));
    assert_eq!(leftovers(&q), Vec::<String>::new());
    // The same, and a writer without --overwrite comes next: it puts the copy back and
    // refuses to replace it (the old `quantize` deleted it and wrote its own).
    std::fs::rename(&q, work.path().join(".q.old")).unwrap();
    let output = transformer()
        .args(args(&["quantize", &run], &q))
        .output()
        .unwrap();
    assert!(!output.status.success());
    assert!(String::from_utf8_lossy(&output.stderr).contains("already exists"));
    assert!(whole(&q, OURS));
    // Killed while staging (a half-written directory under a dead writer's name) and after
    // the second rename (the retired copy still beside the new one), with the dead writer's
    // lock file left: the next writer clears all three and writes.
    let staging = work.path().join(".q.tmp-99999-0000beef");
    std::fs::create_dir(&staging).unwrap();
    std::fs::write(staging.join("model.safetensors"), b"half").unwrap();
    copy_checkpoint(work.path(), ".q.old");
    std::fs::write(
        work.path().join(".q.lock"),
        "pid 99999: transformer quantize\n",
    )
    .unwrap();
    succeeded(transformer().args(args(&["quantize", &run, "--overwrite"], &q)));
    assert!(whole(&q, OURS));
    assert_eq!(leftovers(&q), Vec::<String>::new());
    // A training run's last/ retired by a killed save: the run directory still resolves.
    let trained = work.path().join("trained");
    std::fs::create_dir(&trained).unwrap();
    let last = copy_checkpoint(&trained, ".last.old");
    assert!(translates(&trained));
    assert!(whole(&trained.join("last"), OURS));
    assert!(!last.exists());
}

#[test]
fn writers_killed_at_random_moments_never_leave_a_checkpoint_half_written() {
    let work = tempfile::tempdir().unwrap();
    let run = run_dir().display().to_string();
    let q = work.path().join("q");
    succeeded(transformer().args(args(&["quantize", &run], &q)));
    for i in 0..30u64 {
        let mut child = binary()
            .args(args(&["quantize", &run, "--overwrite"], &q))
            .spawn()
            .unwrap();
        // Spread over a whole save (about a tenth of a second here), a different moment
        // each time.
        std::thread::sleep(Duration::from_millis((i * 37) % 150));
        let _ = child.kill();
        let _ = child.wait();
        // Whatever moment it died at, the next reader finds the checkpoint whole.
        assert!(translates(&q), "after a kill at {} ms", (i * 37) % 150);
        assert!(whole(&q, OURS));
    }
    succeeded(transformer().args(args(&["quantize", &run, "--overwrite"], &q)));
    assert_eq!(leftovers(&q), Vec::<String>::new());
}
