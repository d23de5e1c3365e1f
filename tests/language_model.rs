//! The decoder-only language model end to end through the binary: train on a text file,
//! `generate` (greedy, sampled, seeded), resume, and the errors that keep translation and
//! language models apart.

mod common;

use std::path::{Path, PathBuf};

use common::{succeeded, transformer};

/// Every line is one of two sentences, so a model that learned the text continues a prompt
/// with the rest of its sentence.
const TEXT: &str = "the cat sat on the mat .\nthe dog ran to the park .\n";

/// A tiny decoder-only config over `text`, written into `dir`.
fn write_config(dir: &Path, text: &Path, epochs: usize) -> PathBuf {
    let config = dir.join("lm.toml");
    std::fs::write(
        &config,
        format!(
            r#"[model]
arch = "decoder-only"
layers = 1
d_model = 32
d_ff = 64
heads = 2
max_len = 16
positions = "learned"

[data]
train = {{ text = "{}" }}

[training]
epochs = {epochs}
max_tokens = 200
label_smoothing = 0.0
warmup = 20
log_every = 5
checkpoint_every = 20
"#,
            text.display()
        ),
    )
    .unwrap();
    config
}

/// A temporary directory with the text (20 copies of TEXT) and a config over it:
/// (tempdir, config path, run dir to train into).
fn workspace(epochs: usize) -> (tempfile::TempDir, PathBuf, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let text = dir.path().join("text.txt");
    std::fs::write(&text, TEXT.repeat(20)).unwrap();
    let config = write_config(dir.path(), &text, epochs);
    let run = dir.path().join("run");
    (dir, config, run)
}

/// A trained tiny language model in a temporary directory: (tempdir, run dir).
fn trained(epochs: usize) -> (tempfile::TempDir, PathBuf) {
    let (dir, config, run) = workspace(epochs);
    let output = succeeded(
        transformer()
            .args(["train", "--device", "cpu", "--config"])
            .args([config.as_os_str(), "--out".as_ref(), run.as_os_str()]),
    );
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(stdout.starts_with("sample: "), "{stdout}");
    (dir, run)
}

fn generate(run: &Path, args: &[&str]) -> String {
    let output = succeeded(
        transformer()
            .args(["generate", "--device", "cpu", "--checkpoint"])
            .arg(run)
            .args(args),
    );
    String::from_utf8(output.stdout)
        .unwrap()
        .trim_end()
        .to_string()
}

#[test]
fn a_trained_model_continues_prompts_greedily_and_samples_reproducibly() {
    let (_dir, run) = trained(40);
    let greedy = ["--temperature", "0"];
    assert_eq!(
        generate(&run, &[&["the cat"][..], &greedy].concat()),
        "the cat sat on the mat ."
    );
    assert_eq!(
        generate(&run, &[&["the dog"][..], &greedy].concat()),
        "the dog ran to the park ."
    );
    // Sampling: the same seed gives the same text; the text is made of the corpus's words.
    let sampled = ["the", "--temperature", "1.0", "--top-k", "3", "--seed", "7"];
    let first = generate(&run, &sampled);
    assert_eq!(first, generate(&run, &sampled));
    let words = [
        "the", "cat", "sat", "on", "mat", ".", "dog", "ran", "to", "park",
    ];
    assert!(first.split(' ').all(|w| words.contains(&w)), "{first}");
    // --max-new bounds the continuation.
    assert_eq!(
        generate(&run, &["the dog", "--temperature", "0", "--max-new", "2"]),
        "the dog ran to"
    );
    // Without a prompt the model starts a line of its own: one of the sentences it learned.
    let unprompted = generate(&run, &greedy);
    assert!(
        ["the cat sat on the mat .", "the dog ran to the park ."].contains(&unprompted.as_str()),
        "{unprompted}"
    );
    without_checkpoint_each_command_takes_the_newest_run_of_its_own_family(&run, &unprompted);
    beam_search_and_stdin_batches_continue_as_each_prompt_alone(&run);
}

/// `generate --beam` is translation's beam search, and `-` continues each stdin line in
/// batches (prompts of one token length together): every line as it comes out alone, with
/// sampling (each line from its own seeded stream) and with the beam.
fn beam_search_and_stdin_batches_continue_as_each_prompt_alone(run: &Path) {
    let beam = ["--beam", "3", "--length-penalty", "0.6"];
    assert_eq!(
        generate(run, &[&["the cat"][..], &beam].concat()),
        "the cat sat on the mat ."
    );
    let prompts = ["the cat", "the dog", "", "the", "the dog ran"];
    let sampled = ["--temperature", "1.0", "--top-k", "3", "--seed", "11"];
    for how in [&sampled[..], &beam[..]] {
        let alone: Vec<String> = prompts
            .iter()
            .map(|p| generate(run, &[&[*p][..], how].concat()))
            .collect();
        for batch_size in ["1", "32"] {
            let output = succeeded(
                transformer()
                    .args(["generate", "--device", "cpu", "--checkpoint"])
                    .arg(run)
                    .args(["-", "--batch-size", batch_size])
                    .args(how)
                    .write_stdin(prompts.join("\n") + "\n"),
            );
            let lines: Vec<String> = String::from_utf8(output.stdout)
                .unwrap()
                .lines()
                .map(|l| l.trim_end().to_string())
                .collect();
            assert_eq!(lines, alone, "{how:?}, batches of {batch_size}");
        }
    }
    // The beam meets the resolver's bounds and refuses sampling's flags, as usage errors.
    for (args, needle) in [
        (
            &["the", "--beam", "100000"][..],
            "--beam 100000 is more than the",
        ),
        (
            &["the", "--beam", "2", "--temperature", "0.5"][..],
            "cannot be used with",
        ),
        (&["the", "--length-penalty", "0.5"][..], "--beam"),
    ] {
        let output = transformer()
            .args(["generate", "--device", "cpu", "--checkpoint"])
            .arg(run)
            .args(args)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(needle), "{args:?}: {stderr}");
    }
}

/// With a translation run and a newer language-model run under runs/, `generate` takes the
/// language model and `translate` the translation model, each naming the one it took.
fn without_checkpoint_each_command_takes_the_newest_run_of_its_own_family(
    language_run: &Path,
    unprompted: &str,
) {
    let dir = tempfile::tempdir().unwrap();
    let copy = |from: &Path, to: &Path| {
        std::fs::create_dir_all(to).unwrap();
        for entry in std::fs::read_dir(from).unwrap() {
            let path = entry.unwrap().path();
            if path.is_file() {
                std::fs::copy(&path, to.join(path.file_name().unwrap())).unwrap();
            }
        }
    };
    copy(
        Path::new("tests/fixtures/parity"),
        &dir.path().join("runs/translation/last"),
    );
    std::thread::sleep(std::time::Duration::from_millis(20));
    copy(&language_run.join("last"), &dir.path().join("runs/lm/last"));
    let output = succeeded(transformer().current_dir(dir.path()).args([
        "generate",
        "--device",
        "cpu",
        "--temperature",
        "0",
    ]));
    assert_eq!(
        String::from_utf8_lossy(&output.stdout).trim_end(),
        unprompted
    );
    assert!(String::from_utf8_lossy(&output.stderr).starts_with("checkpoint: runs/lm/last "));
    let output = succeeded(transformer().current_dir(dir.path()).args([
        "translate",
        "--device",
        "cpu",
        "ich mochte ein bier",
    ]));
    assert!(
        String::from_utf8_lossy(&output.stderr).starts_with("checkpoint: runs/translation/last ")
    );
}

#[test]
fn a_stopped_language_model_run_resumes_to_the_same_weights() {
    let (_straight_dir, straight) = trained(6);
    let (_dir, config, run) = workspace(6);
    succeeded(
        transformer()
            .args([
                "train",
                "--device",
                "cpu",
                "--stop-at-step",
                "4",
                "--config",
            ])
            .arg(&config)
            .arg("--out")
            .arg(&run),
    );
    succeeded(
        transformer()
            .args(["train", "--device", "cpu", "--resume"])
            .arg(&run),
    );
    let weights = |run: &Path| std::fs::read(run.join("last/model.safetensors")).unwrap();
    assert!(
        weights(&straight) == weights(&run),
        "resumed weights differ"
    );
}

#[test]
fn translation_and_language_checkpoints_are_not_confused() {
    let (_dir, run) = trained(1);
    let output = transformer()
        .args(["translate", "--device", "cpu", "--checkpoint"])
        .arg(&run)
        .arg("the cat")
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("use `transformer generate`"), "{stderr}");

    let output = transformer()
        .args([
            "generate",
            "--device",
            "cpu",
            "--checkpoint",
            "tests/fixtures/parity",
            "x",
        ])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("use `transformer translate`"), "{stderr}");
}

#[test]
fn bad_sampling_settings_and_mismatched_configs_are_named() {
    let (dir, run) = trained(1);
    for (flag, says) in [
        (
            "--temperature=-1",
            "for '--temperature <T>': must be 0 or more",
        ),
        ("--top-k=0", "for '--top-k <K>': must be at least 1"),
    ] {
        let output = transformer()
            .args(["generate", "--device", "cpu", "--checkpoint"])
            .arg(&run)
            .args(["the", flag])
            .output()
            .unwrap();
        assert_eq!(output.status.code(), Some(2), "{flag}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.contains(says), "{flag}: {stderr}");
    }

    // A prompt the position table (max_len 16) cannot hold is continued from its last 15
    // tokens, with a warning; on stdin the stream goes on after it. A line that is not UTF-8
    // ends the stream after the lines before it, naming its number.
    let long_prompt = vec!["the"; 20].join(" ");
    let input = format!("the cat\n{long_prompt}\nthe dog\n\u{7f}\n");
    let mut input = input.into_bytes();
    input.extend_from_slice(b"\xff\xfe bad\nthe cat\n");
    let output = transformer()
        .args([
            "generate",
            "--device",
            "cpu",
            "--temperature",
            "0",
            "--max-new",
            "3",
        ])
        .arg("--checkpoint")
        .arg(&run)
        .arg("-")
        .write_stdin(input)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert_eq!(stdout.lines().count(), 4, "{stdout}");
    assert!(stdout.starts_with("the cat "), "{stdout}");
    assert!(
        stderr.contains("has 20 tokens, more than the model reads; it was continued from its last 15 (model.max_len 16)"),
        "{stderr}"
    );
    assert!(
        stderr
            .contains("error: stdin line 5 is not valid UTF-8; the lines before it were continued"),
        "{stderr}"
    );
    assert!(!stderr.contains("panicked"), "{stderr}");
    // The longest prompt the table holds (15 tokens and <s>) gets its one new token.
    let longest = vec!["the"; 15].join(" ");
    let output = transformer()
        .args([
            "generate",
            "--device",
            "cpu",
            "--temperature",
            "0",
            "--checkpoint",
        ])
        .arg(&run)
        .arg(&longest)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success() && !stderr.contains("warning"),
        "{stderr}"
    );
    // A word the vocabulary lacks is read as <unk>, with a warning.
    let output = transformer()
        .args([
            "generate",
            "--device",
            "cpu",
            "--temperature",
            "0",
            "--checkpoint",
        ])
        .arg(&run)
        .arg("the zebra")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("warning: unknown prompt word \"zebra\" is read as <unk>"),
        "{stderr}"
    );

    // A decoder-only model needs a text corpus, and a text corpus a decoder-only model.
    let pairs = dir.path().join("pairs.toml");
    std::fs::write(&pairs, "[model]\narch = \"decoder-only\"\n").unwrap();
    let text = dir.path().join("text.toml");
    std::fs::write(&text, "[data]\ntrain = { text = \"x.txt\" }\n").unwrap();
    for (config, key) in [(pairs, "model.arch"), (text, "data.train")] {
        let output = transformer()
            .args(["train", "--device", "cpu", "--config"])
            .arg(&config)
            .output()
            .unwrap();
        assert_eq!(output.status.code(), Some(1));
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.contains(key), "{stderr}");
    }
}

/// `<pad>` and `<s>` are never generated, however likely the model makes them: sampling and
/// greedy decoding skip them as beam search does (they would print as nothing and use up
/// `--max-new`).
#[test]
fn generation_never_draws_padding_or_the_start_symbol() {
    let (_dir, run) = trained(20);
    let weights = run.join("last/model.safetensors");
    let mut tensors = candle_core::safetensors::load(&weights, &candle_core::Device::Cpu).unwrap();
    let mut bias = tensors["generator.proj.bias"].to_vec1::<f32>().unwrap();
    bias[0] += 50.0; // <pad>
    bias[1] += 40.0; // <s>
    tensors.insert(
        "generator.proj.bias".into(),
        candle_core::Tensor::new(bias, &candle_core::Device::Cpu).unwrap(),
    );
    candle_core::safetensors::save(&tensors, &weights).unwrap();
    let last = run.join("last");
    for how in [
        &["--temperature", "0"][..],
        &["--temperature", "1", "--seed", "3"],
        &["--beam", "3"],
    ] {
        let text = generate(&last, &[&["the", "--max-new", "4"][..], how].concat());
        assert_eq!(text.split(' ').count(), 5, "{how:?}: {text:?}");
    }
}
