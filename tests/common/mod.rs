//! Helpers shared by the tests that run the binary.

pub mod data_parallel;
pub mod server;

use std::path::Path;
use std::process::Output;

use assert_cmd::Command;
use tempfile::TempDir;

/// The `transformer` binary of this build.
pub fn transformer() -> Command {
    Command::cargo_bin("transformer").unwrap()
}

/// Runs `command` and fails the test with its stderr unless it succeeded.
pub fn succeeded(command: &mut Command) -> Output {
    let output = command.output().unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    output
}

/// Trains configs/tiny.toml (2 layers, 4 heads) into `DIR/run` of a fresh directory, with
/// `extra` arguments, and returns the directory.
#[allow(dead_code)] // not every test crate trains
pub fn train_tiny(extra: &[&str]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    succeeded(
        transformer()
            .args(["train", "--device", "cpu", "--quiet", "--config"])
            .arg("configs/tiny.toml")
            .arg("--out")
            .arg(dir.path().join("run"))
            .args(extra),
    );
    dir
}

/// A model trained for a whole test file: a fresh directory `name` in the build's scratch
/// space, the config `config` writes for it (given the directory, for files of its own)
/// trained into its `run/`, which is returned. Callers keep it in a `OnceLock`.
#[allow(dead_code)]
pub fn trained_once(name: &str, config: impl FnOnce(&Path) -> String) -> std::path::PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let text = config(&dir);
    std::fs::write(dir.join("config.toml"), text).unwrap();
    succeeded(
        transformer()
            .args(["train", "--device", "cpu", "--quiet", "--config"])
            .arg(dir.join("config.toml"))
            .arg("--out")
            .arg(dir.join("run")),
    );
    dir.join("run")
}

/// Runs `transformer args` in `dir` and checks it failed with status 1 and one error line,
/// the last line of stderr (no `Caused by:` chain or backtrace after it), that contains
/// every one of `needles`.
#[allow(dead_code)]
pub fn fails_naming(dir: &Path, args: &[&str], needles: &[&str]) {
    let output = transformer()
        .current_dir(dir)
        .env("RUST_BACKTRACE", "1")
        .args(args)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    let errors: Vec<&str> = stderr.lines().filter(|l| l.starts_with("error:")).collect();
    assert_eq!(errors.len(), 1, "{stderr}");
    assert_eq!(stderr.lines().last(), Some(errors[0]), "{stderr}");
    for needle in needles {
        assert!(
            errors[0].contains(needle),
            "{needle:?} not in {:?}",
            errors[0]
        );
    }
}

/// A directory holding `config.toml` with `text` (and the toy pairs as toy.tsv).
#[allow(dead_code)]
pub fn with_config(text: &str) -> TempDir {
    let dir = TempDir::new().unwrap();
    std::fs::copy("data/toy.tsv", dir.path().join("toy.tsv")).unwrap();
    std::fs::write(dir.path().join("config.toml"), text).unwrap();
    dir
}

/// A checkpoint of a tiny model with an 8-position table, trained for one epoch.
#[allow(dead_code)]
pub fn small_checkpoint() -> TempDir {
    trained_in(
        "[model]\nlayers = 1\nd_model = 16\nd_ff = 32\nheads = 2\nmax_len = 8\n\
         [data]\ntrain = \"toy.tsv\"\n[training]\nepochs = 1\nmax_tokens = 64\n",
        &[],
    )
}

/// A directory (see `with_config`) where `config_text` was trained into `run/`, with `extra`
/// arguments.
#[allow(dead_code)]
pub fn trained_in(config_text: &str, extra: &[&str]) -> TempDir {
    let dir = with_config(config_text);
    succeeded(train_command(dir.path()).args(extra));
    dir
}

/// `train --device cpu --quiet --config config.toml --out run`, run in `dir`.
#[allow(dead_code)]
pub fn train_command(dir: &Path) -> Command {
    let mut command = transformer();
    command
        .current_dir(dir)
        .args(["train", "--device", "cpu", "--quiet"])
        .args(["--config", "config.toml", "--out", "run"]);
    command
}

/// `translate --json --checkpoint DIR FLAGS -` of `sources`: each line's object.
#[allow(dead_code)]
pub fn translated_json(
    checkpoint: &Path,
    sources: &[String],
    flags: &[&str],
) -> Vec<serde_json::Value> {
    translated_json_under(&[], checkpoint, sources, flags)
}

/// As [`translated_json`], with the variables `env` set for the binary.
#[allow(dead_code)]
pub fn translated_json_under(
    env: &[(&str, &str)],
    checkpoint: &Path,
    sources: &[String],
    flags: &[&str],
) -> Vec<serde_json::Value> {
    let out = succeeded(
        transformer()
            .envs(env.iter().copied())
            .args(["translate", "--json", "--checkpoint"])
            .arg(checkpoint)
            .args(flags)
            .arg("-")
            .write_stdin(sources.join("\n") + "\n"),
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}

/// As [`translated_json`]: each line's generated ids and their log-probabilities.
#[allow(dead_code)]
pub fn translated_with_log_probs(
    checkpoint: &Path,
    sources: &[String],
    flags: &[&str],
) -> Vec<(Vec<u32>, Vec<f64>)> {
    translated_with_log_probs_under(&[], checkpoint, sources, flags)
}

/// As [`translated_with_log_probs`], with the variables `env` set for the binary.
#[allow(dead_code)]
pub fn translated_with_log_probs_under(
    env: &[(&str, &str)],
    checkpoint: &Path,
    sources: &[String],
    flags: &[&str],
) -> Vec<(Vec<u32>, Vec<f64>)> {
    translated_json_under(env, checkpoint, sources, flags)
        .into_iter()
        .map(|value| {
            (
                serde_json::from_value(value["ids"].clone()).unwrap(),
                serde_json::from_value(value["log_probs"].clone()).unwrap(),
            )
        })
        .collect()
}

/// As [`translated_json`]: each line's generated ids.
#[allow(dead_code)]
pub fn translated_ids(checkpoint: &Path, sources: &[String], flags: &[&str]) -> Vec<Vec<u32>> {
    translated_json(checkpoint, sources, flags)
        .into_iter()
        .map(|value| serde_json::from_value(value["ids"].clone()).unwrap())
        .collect()
}

/// The first `count` lines of `data/multi30k/NAME` (gzipped; scripts/get-multi30k.sh).
#[allow(dead_code)]
pub fn multi30k_lines(name: &str, count: usize) -> Vec<String> {
    let file = std::fs::File::open(format!("data/multi30k/{name}"))
        .unwrap_or_else(|e| panic!("data/multi30k/{name}: {e}; run scripts/get-multi30k.sh"));
    let mut text = String::new();
    std::io::Read::read_to_string(&mut flate2::read::GzDecoder::new(file), &mut text).unwrap();
    text.lines().take(count).map(str::to_string).collect()
}

/// The largest absolute difference between two tensors of one shape.
#[allow(dead_code)]
pub fn largest_difference(a: &candle_core::Tensor, b: &candle_core::Tensor) -> f32 {
    assert_eq!(a.dims(), b.dims());
    (a - b)
        .unwrap()
        .abs()
        .unwrap()
        .flatten_all()
        .unwrap()
        .max(0)
        .unwrap()
        .to_scalar::<f32>()
        .unwrap()
}

/// Rows of ids as one `(rows, longest)` matrix, padded with `<pad>`.
#[allow(dead_code)]
pub fn padded(rows: &[Vec<u32>]) -> candle_core::Tensor {
    let width = rows.iter().map(Vec::len).max().unwrap();
    let flat: Vec<u32> = rows
        .iter()
        .flat_map(|r| {
            r.iter()
                .copied()
                .chain(std::iter::repeat(transformer::tokenize::specials::PAD_ID))
                .take(width)
        })
        .collect();
    candle_core::Tensor::from_vec(flat, (rows.len(), width), &candle_core::Device::Cpu).unwrap()
}

/// Sources as the decoders read them: padded, with their mask, every row starting from
/// `<s>`, each with its own step limit.
#[allow(dead_code)]
pub struct Sources {
    pub source: transformer::model::Source,
    pub prefix: candle_core::Tensor,
    pub max_steps: Vec<usize>,
}

#[allow(dead_code)]
impl Sources {
    pub fn of(rows: &[Vec<u32>], max_steps: &[usize]) -> Self {
        use transformer::tokenize::specials::{BOS_ID, PAD_ID};
        let ids = padded(rows);
        let prefix = candle_core::Tensor::full(BOS_ID, (rows.len(), 1), ids.device()).unwrap();
        Self {
            source: transformer::model::Source {
                mask: transformer::model::masks::padding_mask(&ids, PAD_ID).unwrap(),
                ids,
            },
            prefix,
            max_steps: max_steps.to_vec(),
        }
    }

    /// One row, `steps` steps.
    pub fn one(ids: &[u32], steps: usize) -> Self {
        Self::of(&[ids.to_vec()], &[steps])
    }

    pub fn input(&self, end: Option<u32>) -> transformer::decoding::DecodeInput<'_> {
        transformer::decoding::DecodeInput {
            prompt: transformer::model::Prompt {
                source: Some(&self.source),
                prefix: &self.prefix,
            },
            max_steps: &self.max_steps,
            end,
            never: &transformer::tokenize::specials::NEVER_GENERATED,
            end_at_limit: false,
            still_wanted: &transformer::decoding::always_wanted,
        }
    }
}

/// A padded source and target prefix as a teacher-forced batch.
#[allow(dead_code)]
pub fn teacher_forced(
    src: &candle_core::Tensor,
    tgt_in: &candle_core::Tensor,
) -> transformer::model::TeacherForced {
    let pad = transformer::tokenize::specials::PAD_ID;
    transformer::model::TeacherForced::with_masks(src.clone(), tgt_in.clone(), pad).unwrap()
}

/// The MarianMT fixtures scripts/make_marian_fixture.py writes.
#[allow(dead_code)]
pub const MARIAN_FIXTURES: [&str; 3] = [
    "tests/fixtures/marian-shared",
    "tests/fixtures/marian-separate",
    "tests/fixtures/marian-gelu",
];

/// A MarianMT fixture's expected.json: what transformers computed.
#[allow(dead_code)]
pub fn marian_expected(dir: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(dir.join("expected.json")).unwrap()).unwrap()
}

/// The decoding settings named as the command line names them (the binary's own table; the
/// library names no flag).
#[allow(dead_code)]
pub const FLAGS: transformer::infer::settings::SettingNames =
    transformer::infer::settings::SettingNames {
        beam: "--beam",
        length_penalty: "--length-penalty",
        max_len: "--max-len",
        n_best: "--n-best",
    };

/// The subcommands `transformer --help` lists, without `help`.
#[allow(dead_code)]
pub fn subcommand_names() -> Vec<String> {
    let output = succeeded(transformer().arg("--help"));
    let help = String::from_utf8(output.stdout).unwrap();
    help.split_once("Commands:\n")
        .unwrap()
        .1
        .lines()
        .take_while(|line| !line.trim().is_empty())
        .filter_map(|line| line.split_whitespace().next())
        .filter(|name| *name != "help")
        .map(str::to_string)
        .collect()
}

/// That `serve` and `eval` of the toy run trained by [`train_tiny`] in `dir` (as `dir/run`),
/// with `flags`, still say what it learned: `/translate` answers `i want a beer .` and `eval`
/// of the pair scores BLEU 100 (`what` names the setting in the failure).
#[allow(dead_code)]
pub fn serve_and_eval_say_the_toy_pair(dir: &Path, flags: &[&str], what: &str) {
    use serde_json::json;
    let server = server::Server::start_with(&dir.join("run"), flags);
    let (status, body) = server::post_json(
        &server.url("/translate"),
        &json!({"q": "ich mochte ein bier", "source": "de", "target": "en"}),
    );
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["translatedText"], "i want a beer .");
    drop(server);
    std::fs::write(dir.join("src.txt"), "ich mochte ein bier\n").unwrap();
    std::fs::write(dir.join("ref.txt"), "i want a beer .\n").unwrap();
    let out = succeeded(
        transformer()
            .current_dir(dir)
            .args([
                "eval",
                "--checkpoint",
                "run",
                "--src",
                "src.txt",
                "--ref",
                "ref.txt",
            ])
            .args(flags),
    );
    assert!(
        String::from_utf8(out.stdout).unwrap().contains("= 100.0"),
        "{what} eval of the toy pair is not BLEU 100"
    );
}

/// Replaces the file at `path` by a FIFO: a read of it blocks until a writer opens it.
#[allow(dead_code)]
pub fn replaced_by_fifo(path: &Path) {
    std::fs::remove_file(path).unwrap();
    let made = std::process::Command::new("mkfifo").arg(path).status();
    assert!(made.unwrap().success());
}

/// Replaces the file at `path` by a link to `/dev/zero`: a read of it never ends.
#[allow(dead_code)]
pub fn replaced_by_link_to_dev_zero(path: &Path) {
    std::fs::remove_file(path).unwrap();
    std::os::unix::fs::symlink("/dev/zero", path).unwrap();
}

/// A small tmpfs at `path`, unmounted when dropped; `None` where this process may not mount
/// (the test then says so and checks nothing: CI runs as root).
#[allow(dead_code)]
pub struct SmallDisk(pub std::path::PathBuf);

impl SmallDisk {
    #[allow(dead_code)] // not every test crate fills a disk
    pub fn mount(path: &Path, size: &str) -> Option<Self> {
        std::fs::create_dir_all(path).unwrap();
        let mounted = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(path)
            .output()
            .ok()?;
        mounted.status.success().then(|| Self(path.to_path_buf()))
    }

    /// Fills the disk with the file `filler` but for `left` bytes.
    #[allow(dead_code)] // not every test crate fills a disk
    pub fn fill_leaving(&self, left: u64) {
        let path = self.0.join("filler");
        let mut filler = std::fs::File::create(&path).unwrap();
        while std::io::Write::write_all(&mut filler, &[0u8; 4096]).is_ok() {}
        let full = filler.metadata().unwrap().len();
        filler.set_len(full - left).unwrap();
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount").arg(&self.0).status();
    }
}

/// Where `training.patience` runs out over validation scores (BLEU, higher is better): the
/// 1-based count of validations at the first one that is the `patience`-th in a row without
/// a better score than every one before it; `None` if it never does.
#[allow(dead_code)]
pub fn patience_runs_out(scores: &[f64], patience: usize) -> Option<usize> {
    let (mut best, mut since) = (f64::NEG_INFINITY, 0);
    for (at, &score) in scores.iter().enumerate() {
        if score > best {
            (best, since) = (score, 0);
        } else {
            since += 1;
        }
        if since == patience {
            return Some(at + 1);
        }
    }
    None
}
