//! The `transformer` binary as a user runs it.

mod common;

use common::{subcommand_names, succeeded, train_tiny, transformer};
use std::path::{Path, PathBuf};

use predicates::prelude::*;
use predicates::str::contains;
use tempfile::TempDir;

fn translate(run: &Path, text: &str) -> String {
    let output = succeeded(
        transformer()
            .args(["translate", "--device", "cpu", "--checkpoint"])
            .arg(run)
            .arg(text),
    );
    String::from_utf8(output.stdout).unwrap()
}

#[test]
fn help_lists_the_subcommands() {
    transformer().arg("--help").assert().success().stdout(
        contains("train")
            .and(contains("translate"))
            .and(contains("infer-test")),
    );
}

#[test]
fn infer_test_prints_one_prediction_per_run_starting_from_zero() {
    let output = transformer()
        .args([
            "infer-test",
            "--runs",
            "3",
            "--seed",
            "5",
            "--device",
            "cpu",
        ])
        .output()
        .unwrap();
    assert!(output.status.success());
    let stdout = String::from_utf8(output.stdout).unwrap();
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 3);
    for line in &lines {
        let list = line
            .strip_prefix("Example Untrained Model Prediction: [")
            .and_then(|rest| rest.strip_suffix(']'))
            .unwrap_or_else(|| panic!("unexpected line {line:?}"));
        let ids: Vec<u32> = list.split(", ").map(|n| n.parse().unwrap()).collect();
        assert_eq!(ids.len(), 10);
        assert_eq!(ids[0], 0);
        assert!(ids.iter().all(|&id| id < 11));
    }
}

/// `TRANSFORMER_KERNELS=composed` runs the whole of training through candle's composed ops,
/// as a GPU does: the tiny model still learns both toy sentences, and the losses it logs are
/// not the fused kernels' to the last bit (they round differently), so the variable was read.
#[test]
fn a_tiny_model_trained_through_the_composed_kernels_translates_both_toy_sentences() {
    let dir = tempfile::tempdir().unwrap();
    let losses = |kernels: &str| {
        let run = dir.path().join(kernels);
        succeeded(
            transformer()
                .env("TRANSFORMER_KERNELS", kernels)
                .args(["train", "--device", "cpu", "--quiet", "--config"])
                .arg("configs/tiny.toml")
                .arg("--out")
                .arg(&run),
        );
        let metrics = std::fs::read_to_string(run.join("metrics.jsonl")).unwrap();
        let losses: Vec<String> = metrics
            .lines()
            .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
            .filter(|r| r["kind"] == "step")
            .map(|r| r["loss"].to_string())
            .collect();
        (run, losses)
    };
    let (run, composed) = losses("composed");
    assert_eq!(translate(&run, "ich mochte ein bier"), "i want a beer .\n");
    assert_eq!(translate(&run, "ich mochte ein cola"), "i want a coke .\n");
    let (_, fused) = losses("fused");
    assert_eq!(composed.len(), fused.len());
    assert_ne!(
        composed, fused,
        "the same losses to the last bit either way"
    );
}

#[test]
fn infer_test_with_a_seed_is_reproducible() {
    let run = || {
        transformer()
            .args([
                "infer-test",
                "--runs",
                "2",
                "--seed",
                "11",
                "--device",
                "cpu",
            ])
            .output()
            .unwrap()
            .stdout
    };
    assert_eq!(run(), run());
}

#[test]
fn a_trained_tiny_model_translates_both_toy_sentences() {
    let dir = train_tiny(&[]);
    let run = dir.path().join("run");
    for file in [
        "last/model.safetensors",
        "last/config.toml",
        "last/vocab.src.txt",
        "last/vocab.tgt.txt",
        "metrics.jsonl",
    ] {
        assert!(run.join(file).is_file(), "{file} missing");
    }
    assert_eq!(translate(&run, "ich mochte ein bier"), "i want a beer .\n");
    assert_eq!(translate(&run, "ich mochte ein cola"), "i want a coke .\n");
    let metrics = std::fs::read_to_string(run.join("metrics.jsonl")).unwrap();
    let records: Vec<serde_json::Value> = metrics
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let epochs: Vec<_> = records.iter().filter(|r| r["kind"] == "epoch").collect();
    assert_eq!(
        epochs.len(),
        80,
        "one record per epoch of configs/tiny.toml"
    );
    for record in records.iter().filter(|r| r["kind"] == "step") {
        assert!(record["loss"].as_f64().unwrap().is_finite());
    }
    assert!(epochs
        .iter()
        .all(|r| r["train_loss"].as_f64().unwrap().is_finite()));
    let picture = std::fs::read(run.join("loss.png")).unwrap();
    assert!(picture.starts_with(b"\x89PNG\r\n\x1a\n") && picture.len() > 10_000);
    let vocab = std::fs::read_to_string(run.join("last/vocab.src.txt")).unwrap();
    assert!(vocab.starts_with("<pad>\n<s>\n</s>\n<unk>\n"));
}

#[test]
fn stdin_is_translated_line_by_line_and_an_empty_line_stays_empty() {
    let dir = train_tiny(&[]);
    transformer()
        .args(["translate", "--device", "cpu", "--checkpoint"])
        .arg(dir.path().join("run"))
        .write_stdin("ich mochte ein bier\n\nich mochte ein cola\n")
        .assert()
        .success()
        .stdout("i want a beer .\n\ni want a coke .\n");
}

#[test]
fn json_output_has_tokens_ids_and_log_probs_ending_at_the_end_token() {
    let dir = train_tiny(&[]);
    let output = transformer()
        .args(["translate", "--device", "cpu", "--json", "--checkpoint"])
        .arg(dir.path().join("run"))
        .arg("ich mochte ein bier")
        .output()
        .unwrap();
    let json: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(json["source"], "ich mochte ein bier");
    assert_eq!(json["translation"], "i want a beer .");
    assert_eq!(json["tokens"].as_array().unwrap().last().unwrap(), "</s>");
    assert_eq!(json["ids"].as_array().unwrap().last().unwrap(), 2);
    let log_probs = json["log_probs"].as_array().unwrap();
    assert_eq!(log_probs.len(), json["ids"].as_array().unwrap().len());
    assert!(log_probs.iter().all(|p| p.as_f64().unwrap() <= 0.0));
}

#[test]
fn max_len_bounds_the_output() {
    let dir = train_tiny(&[]);
    transformer()
        .args([
            "translate",
            "--device",
            "cpu",
            "--max-len",
            "2",
            "--checkpoint",
        ])
        .arg(dir.path().join("run"))
        .arg("ich mochte ein bier")
        .assert()
        .success()
        .stdout("i want\n");
}

#[test]
fn an_unknown_word_becomes_unk_with_a_warning() {
    let dir = train_tiny(&[]);
    transformer()
        .args(["translate", "--device", "cpu", "--checkpoint"])
        .arg(dir.path().join("run"))
        .arg("ich mochte ein auto")
        .assert()
        .success()
        .stderr(contains("warning: unknown source word \"auto\""));
}

#[test]
fn a_flood_of_unknown_words_is_listed_briefly() {
    let dir = train_tiny(&[]);
    // 40 lines of one distinct 2,000-character unknown word each.
    let lines: String = (0..40)
        .map(|i| format!("{}{i}\n", "x".repeat(2000)))
        .collect();
    let output = succeeded(
        transformer()
            .args(["translate", "--device", "cpu", "--checkpoint"])
            .arg(dir.path().join("run"))
            .write_stdin(lines),
    );
    let stderr = String::from_utf8(output.stderr).unwrap();
    let listed = stderr.matches("warning: unknown source word").count();
    assert_eq!(listed, 20, "{stderr}");
    assert_eq!(
        stderr.matches("more unknown source words").count(),
        1,
        "{stderr}"
    );
    assert!(stderr.len() < 8000, "{} bytes of warnings", stderr.len());
    assert_eq!(
        String::from_utf8(output.stdout).unwrap().lines().count(),
        40
    );
}

#[test]
fn the_same_seed_trains_the_same_weights() {
    let a = train_tiny(&["--seed", "3"]);
    let b = train_tiny(&["--seed", "3"]);
    let weights = |d: &TempDir| std::fs::read(d.path().join("run/last/model.safetensors")).unwrap();
    assert_eq!(weights(&a), weights(&b));
}

#[test]
fn train_writes_runs_by_config_name_and_translate_finds_the_latest() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("data")).unwrap();
    std::fs::copy("data/toy.tsv", dir.path().join("data/toy.tsv")).unwrap();
    let config = std::fs::canonicalize("configs/tiny.toml").unwrap();
    transformer()
        .current_dir(dir.path())
        .args(["train", "--quiet", "--device", "cpu", "--config"])
        .arg(&config)
        .assert()
        .success();
    assert!(dir
        .path()
        .join("runs/tiny/last/model.safetensors")
        .is_file());
    transformer()
        .current_dir(dir.path())
        .args(["translate", "--device", "cpu", "ich mochte ein cola"])
        .assert()
        .success()
        .stdout("i want a coke .\n");
}

/// `train` of configs/tiny.toml into `out`, with `--overwrite` or not.
fn train_tiny_into(out: &Path, overwrite: bool) -> assert_cmd::assert::Assert {
    let mut cmd = transformer();
    cmd.args([
        "train",
        "--quiet",
        "--device",
        "cpu",
        "--config",
        "configs/tiny.toml",
        "--out",
    ])
    .arg(out);
    if overwrite {
        cmd.arg("--overwrite");
    }
    cmd.assert()
}

#[test]
fn train_refuses_to_overwrite_a_checkpoint_unless_asked() {
    let dir = train_tiny(&[]);
    let out = dir.path().join("run");
    let again = |overwrite: bool| train_tiny_into(&out, overwrite);
    again(false)
        .code(1)
        .stderr(contains("already holds a checkpoint").and(contains("--overwrite")));
    again(true).success();
}

#[test]
fn train_never_removes_what_no_run_wrote_and_never_trains_into_a_checkpoint() {
    let dir = train_tiny(&[]);
    // Someone's folders under the names a run keeps its checkpoints by: refused, kept whole,
    // with --overwrite too.
    let project = dir.path().join("project");
    std::fs::create_dir_all(project.join("checkpoints/mydata")).unwrap();
    std::fs::create_dir_all(project.join("best")).unwrap();
    std::fs::write(project.join("checkpoints/mydata/thesis.tex"), "precious").unwrap();
    std::fs::write(project.join("best/photo.jpg"), "precious").unwrap();
    for overwrite in [false, true] {
        train_tiny_into(&project, overwrite)
            .code(1)
            .stderr(contains("would remove it").and(contains("--out DIR")));
    }
    assert!(project.join("checkpoints/mydata/thesis.tex").is_file());
    assert!(project.join("best/photo.jpg").is_file());
    // A checkpoint directory is not a run directory: a run in it would leave the old model
    // answering for it.
    let quantized = dir.path().join("q");
    succeeded(
        transformer()
            .arg("quantize")
            .arg(dir.path().join("run"))
            .arg("--out")
            .arg(&quantized),
    );
    train_tiny_into(&quantized, true)
        .code(1)
        .stderr(contains("is a checkpoint, not a run directory"));
    // A run's kept checkpoints take no other writer's output.
    transformer()
        .arg("quantize")
        .arg(dir.path().join("run"))
        .arg("--out")
        .arg(dir.path().join("run/checkpoints/step-99"))
        .assert()
        .code(1)
        .stderr(contains("--out").and(contains("kept checkpoints")));
    // A checkpoint holding files of its own (a fixture's expected.json) is not replaced.
    let fixture = dir.path().join("fixture");
    std::fs::create_dir(&fixture).unwrap();
    for file in [
        "config.toml",
        "model.safetensors",
        "vocab.src.txt",
        "vocab.tgt.txt",
    ] {
        std::fs::copy(
            Path::new("tests/fixtures/parity").join(file),
            fixture.join(file),
        )
        .unwrap();
    }
    std::fs::write(fixture.join("expected.json"), "{}").unwrap();
    transformer()
        .args(["quantize", "tests/fixtures/parity", "--overwrite", "--out"])
        .arg(&fixture)
        .assert()
        .code(1)
        .stderr(contains("holds expected.json, which no checkpoint has"));
    assert!(fixture.join("expected.json").is_file());
}

#[test]
fn bench_refuses_a_dtype_its_decoding_workloads_would_ignore() {
    transformer()
        .args(["bench", "greedy1", "--steps", "1", "--dtype", "bf16"])
        .assert()
        .code(2)
        .stderr(contains(
            "--dtype bf16 applies to the training workloads and matmul only",
        ));
}

/// `TRANSFORMER_BF16_ENGINE` picks another engine the CPU has (emulation, always), and the
/// JSON says which ran; a name that is no engine is a warning naming the variable and the
/// engines, and the best engine runs.
#[test]
fn the_bf16_engine_can_be_chosen_and_a_wrong_name_is_a_warning() {
    let bench = |engine: &str| {
        let out = transformer()
            .args(["bench", "matmul", "--steps", "1", "--dtype", "bf16"])
            .env("TRANSFORMER_BF16_ENGINE", engine)
            .output()
            .unwrap();
        let text = |bytes: Vec<u8>| String::from_utf8(bytes).unwrap();
        let (stdout, stderr) = (text(out.stdout), text(out.stderr));
        assert!(out.status.success(), "{stderr}");
        (stdout, stderr)
    };
    let (json, _) = bench("emulated");
    assert!(
        json.contains("\"precision\":\"bf16 products (emulated)\""),
        "{json}"
    );
    let (json, warning) = bench("fastest");
    assert!(
        warning.contains(
            "warning: TRANSFORMER_BF16_ENGINE=\"fastest\" is not a bf16 engine (one of \
             amx-bf16, avx512-bf16, emulated); using "
        ),
        "{warning}"
    );
    assert!(json.contains("\"precision\":\"bf16 products ("), "{json}");
}

/// A batch file is input like any other: an id outside its vocabulary, a vocabulary no
/// config has, ids that are not i64, shapes that do not fit: each is one line naming the file,
/// never a panic (in the loss, the attention) or a model too large for memory.
#[test]
fn a_batch_file_that_is_wrong_is_named_not_a_panic() {
    use candle_core::{DType, Device, Tensor};
    let dir = tempfile::tempdir().unwrap();
    let ids = |v: &[i64], rows: usize| {
        let t = Tensor::new(v, &Device::Cpu).unwrap();
        t.reshape((rows, v.len() / rows)).unwrap()
    };
    let good = || [ids(&[1, 2], 1), ids(&[1, 5], 1), ids(&[5, 6], 1)];
    let [src, tgt_in, _] = good();
    let cases = [
        (
            "8000",
            [src.clone(), tgt_in.clone(), ids(&[5, 8000], 1)],
            "b0.tgt_out holds id 8000, outside the vocabulary of 8000",
        ),
        (
            "18446744073709551615",
            good(),
            "vocab metadata \"18446744073709551615\" is not a vocabulary size",
        ),
        (
            "8000",
            [
                src.clone(),
                tgt_in.clone(),
                tgt_in.to_dtype(DType::F32).unwrap(),
            ],
            "b0.tgt_out is F32 [1, 2], where a batch holds i64 ids",
        ),
        (
            "8000",
            [ids(&[], 1), tgt_in.clone(), tgt_in.clone()],
            "b0.src is I64 [1, 0]",
        ),
        (
            "8000",
            [src, tgt_in.clone(), ids(&[5, 6], 2)],
            "batch 0's shapes do not fit",
        ),
    ];
    for (i, (vocab, tensors, says)) in cases.into_iter().enumerate() {
        let path = dir.path().join(format!("batches{i}.safetensors"));
        let names = ["b0.src", "b0.tgt_in", "b0.tgt_out"];
        let metadata = std::collections::HashMap::from([("vocab".to_string(), vocab.to_string())]);
        safetensors::serialize_to_file(names.into_iter().zip(&tensors), Some(metadata), &path)
            .unwrap();
        transformer()
            .args(["bench", "multi30k", "--steps", "1", "--batches"])
            .arg(&path)
            .assert()
            .code(1)
            .stderr(contains(format!("batches{i}.safetensors: {says}")));
    }
}

#[test]
fn a_missing_config_file_is_named() {
    transformer()
        .args(["train", "--config", "configs/nope.toml"])
        .assert()
        .code(1)
        .stderr(contains("configs/nope.toml"));
}

#[test]
fn an_unknown_config_key_is_named_with_its_line() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bad.toml");
    std::fs::write(&path, "[model]\nlayers = 2\nheadz = 4\n").unwrap();
    transformer()
        .args(["train", "--config"])
        .arg(&path)
        .assert()
        .code(1)
        .stderr(contains("bad.toml line 3, key `model.headz`").and(contains("unknown field")));
}

#[test]
fn d_model_not_divisible_by_heads_is_a_config_error() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bad.toml");
    std::fs::write(&path, "[model]\nd_model = 30\nheads = 4\n").unwrap();
    transformer()
        .args(["train", "--config"])
        .arg(&path)
        .assert()
        .code(1)
        .stderr(contains("key `model.heads`").and(contains("divisible")));
}

#[test]
fn a_missing_training_file_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("c.toml");
    std::fs::write(&path, "[data]\ntrain = \"data/absent.tsv\"\n").unwrap();
    transformer()
        .args(["train", "--device", "cpu", "--config"])
        .arg(&path)
        .arg("--out")
        .arg(dir.path().join("run"))
        .assert()
        .code(1)
        .stderr(contains("data/absent.tsv"));
}

#[test]
fn translate_without_any_checkpoint_says_how_to_get_one() {
    let dir = tempfile::tempdir().unwrap();
    transformer()
        .current_dir(dir.path())
        .args(["translate", "ich"])
        .assert()
        .code(1)
        .stderr(contains("no translation checkpoint found").and(contains("transformer train")));
}

#[test]
fn a_missing_checkpoint_directory_is_named() {
    transformer()
        .args(["translate", "--checkpoint", "runs/does-not-exist", "ich"])
        .assert()
        .code(1)
        .stderr(contains("runs/does-not-exist"));
}

#[test]
fn a_truncated_weights_file_is_a_clear_error() {
    let dir = train_tiny(&[]);
    let weights = dir.path().join("run/last/model.safetensors");
    let bytes = std::fs::read(&weights).unwrap();
    std::fs::write(&weights, &bytes[..bytes.len() / 2]).unwrap();
    transformer()
        .args(["translate", "--device", "cpu", "--checkpoint"])
        .arg(dir.path().join("run"))
        .arg("ich")
        .assert()
        .code(1)
        .stderr(contains("model.safetensors").and(contains("damaged")));
}

#[test]
fn invalid_utf8_on_stdin_is_an_error_naming_the_line() {
    let dir = train_tiny(&[]);
    transformer()
        .args(["translate", "--device", "cpu", "--checkpoint"])
        .arg(dir.path().join("run"))
        .write_stdin(b"ich\n\xff\xfe\n".to_vec())
        .assert()
        .code(1)
        .stderr(contains("stdin line 2 is not valid UTF-8"));
}

#[test]
fn asking_for_cuda_in_a_cpu_build_is_a_clear_error() {
    if cfg!(feature = "cuda") {
        return;
    }
    transformer()
        .args(["infer-test", "--runs", "1", "--device", "cuda"])
        .assert()
        .code(1)
        .stderr(contains("--device cuda:0").and(contains("--features cuda")));
}

#[test]
fn a_cpu_only_build_says_nothing_about_the_device_it_has_no_choice_of() {
    if cfg!(feature = "cuda") {
        return;
    }
    for device in ["auto", "cpu"] {
        transformer()
            .args([
                "infer-test",
                "--runs",
                "1",
                "--seed",
                "1",
                "--device",
                device,
            ])
            .assert()
            .success()
            .stderr("");
    }
}

#[test]
fn a_misspelled_device_is_named() {
    transformer()
        .args(["infer-test", "--device", "gpu"])
        .assert()
        .code(2)
        .stderr(contains("\"gpu\""));
}

/// A copy of the PyTorch parity checkpoint that a test may damage.
fn parity_copy() -> TempDir {
    let dir = tempfile::tempdir().unwrap();
    for file in [
        "model.safetensors",
        "config.toml",
        "vocab.src.txt",
        "vocab.tgt.txt",
    ] {
        std::fs::copy(
            Path::new("tests/fixtures/parity").join(file),
            dir.path().join(file),
        )
        .unwrap();
    }
    dir
}

#[test]
fn a_tensor_the_config_does_not_have_is_named() {
    let dir = parity_copy();
    let weights = dir.path().join("model.safetensors");
    let mut tensors = candle_core::safetensors::load(&weights, &candle_core::Device::Cpu).unwrap();
    let extra = candle_core::Tensor::zeros(3, candle_core::DType::F32, &candle_core::Device::Cpu);
    tensors.insert("encoder.layers.2.norm.a_2".into(), extra.unwrap());
    candle_core::safetensors::save(&tensors, &weights).unwrap();
    transformer()
        .args(["translate", "--device", "cpu", "--checkpoint"])
        .arg(dir.path())
        .arg("ich")
        .assert()
        .code(1)
        .stderr(contains("encoder.layers.2.norm.a_2").and(contains("does not have")));
}

#[test]
fn a_tensor_of_the_wrong_shape_is_named_with_both_shapes() {
    let dir = parity_copy();
    let vocab = dir.path().join("vocab.tgt.txt");
    let mut text = std::fs::read_to_string(&vocab).unwrap();
    text.push_str("extra\n");
    std::fs::write(&vocab, text).unwrap();
    let output = transformer()
        .env("RUST_BACKTRACE", "1")
        .args(["translate", "--device", "cpu", "--checkpoint"])
        .arg(dir.path())
        .arg("ich")
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8(output.stderr).unwrap();
    let errors: Vec<&str> = stderr.lines().collect();
    assert_eq!(
        errors.len(),
        1,
        "one line even with RUST_BACKTRACE=1: {stderr}"
    );
    assert!(
        errors[0]
            .contains("tgt_embed.0.lut.weight has shape [14, 32] but the config needs [15, 32]"),
        "{stderr}"
    );
}

#[test]
fn plot_redraws_loss_png_and_names_a_damaged_metrics_file() {
    let dir = train_tiny(&[]);
    let run = dir.path().join("run");
    std::fs::remove_file(run.join("loss.png")).unwrap();
    transformer().arg("plot").arg(&run).assert().success();
    assert!(std::fs::read(run.join("loss.png"))
        .unwrap()
        .starts_with(b"\x89PNG"));
    std::fs::write(run.join("metrics.jsonl"), "{\"kind\": \"step\"}\n").unwrap();
    transformer()
        .arg("plot")
        .arg(&run)
        .assert()
        .code(1)
        .stderr(contains("metrics.jsonl line 1 is not a metrics record"));
}

#[test]
fn accumulating_two_one_pair_batches_gives_the_loss_of_one_two_pair_batch() {
    let dir = tempfile::tempdir().unwrap();
    let first_step_loss = |max_tokens: usize, accumulate: usize| {
        let name = format!("acc{accumulate}");
        let config = dir.path().join(format!("{name}.toml"));
        std::fs::write(
            &config,
            format!(
                "[model]\nlayers = 1\nd_model = 16\nd_ff = 32\nheads = 2\ndropout = 0.0\n\
                 attention_dropout = 0.0\n[training]\nepochs = 1\nmax_tokens = {max_tokens}\n\
                 accumulate = {accumulate}\nlog_every = 1\nwarmup = 10\n"
            ),
        )
        .unwrap();
        let run = dir.path().join(&name);
        transformer()
            .args(["train", "--quiet", "--device", "cpu", "--config"])
            .arg(&config)
            .arg("--out")
            .arg(&run)
            .assert()
            .success();
        let metrics = std::fs::read_to_string(run.join("metrics.jsonl")).unwrap();
        let steps: Vec<serde_json::Value> = metrics
            .lines()
            .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
            .filter(|r| r["kind"] == "step")
            .collect();
        assert_eq!(steps.len(), 1, "one optimizer step either way: {metrics}");
        steps[0]["loss"].as_f64().unwrap()
    };
    // 8 tokens hold one toy pair (6-7 tokens) per batch; 64 hold both.
    let together = first_step_loss(64, 1);
    let accumulated = first_step_loss(8, 2);
    assert!(
        (together - accumulated).abs() < 1e-5,
        "{together} vs {accumulated}"
    );
}

#[test]
fn help_shows_an_example_for_every_subcommand() {
    for subcommand in [
        "train",
        "translate",
        "generate",
        "eval",
        "plot",
        "attention",
        "bench",
        "infer-test",
        "completions",
        "man",
    ] {
        transformer()
            .args([subcommand, "--help"])
            .assert()
            .success()
            .stdout(contains("Example").and(contains(format!("transformer {subcommand} "))));
    }
}

#[test]
fn usage_errors_exit_with_status_2_on_every_subcommand() {
    let dir = train_tiny(&["--stop-at-step", "3"]);
    let run = dir.path().join("run").display().to_string();
    let cases: Vec<Vec<&str>> = vec![
        vec!["translate", "--beam", "0", "x"],
        vec!["translate", "--batch-size", "0", "x"],
        vec!["translate", "--max-len", "0", "x"],
        vec!["translate", "--length-penalty", "fast", "x"],
        vec!["translate", "--device", "gpu", "x"],
        vec!["train", "--stop-at-step", "0"],
        vec!["train", "--resume", &run, "--stop-at-step", "2"],
        vec!["eval", "--hyp", "x.txt"],
        vec!["eval", "--ref", "x.txt"],
        vec!["eval", "--ref", "-", "--hyp", "-"],
        vec!["generate", "--temperature", "-1", "x"],
        vec!["generate", "--top-k", "0", "x"],
        vec!["attention", "x", "--layers", "0"],
        vec!["attention", "ich", "--layers", "9", "--checkpoint", &run],
        vec!["bench", "copy", "--steps", "0"],
        vec!["infer-test", "--device", "gpu"],
        vec!["plot"],
    ];
    for args in cases {
        let output = transformer().args(&args).output().unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{args:?}: {stderr}");
        let error = stderr.lines().find(|l| l.starts_with("error: "));
        assert!(error.is_some(), "{args:?}: {stderr}");
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
    }
}

#[test]
fn a_negative_length_penalty_is_accepted_and_favours_short_translations() {
    let dir = train_tiny(&[]);
    let tokens = |alpha: &str| {
        let output = succeeded(
            transformer()
                .args(["translate", "--device", "cpu", "--json", "--beam", "10"])
                .args(["--length-penalty", alpha, "--checkpoint"])
                .arg(dir.path().join("run"))
                .arg("ich mochte ein bier"),
        );
        let json: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
        json["ids"].as_array().unwrap().len()
    };
    assert!(tokens("-5") < tokens("2"));
}

/// `translate` of `input` on stdin with the run in `dir` and `args`, its stdout.
fn translate_lines(dir: &TempDir, input: &str, args: &[&str]) -> String {
    let output = succeeded(
        transformer()
            .args(["translate", "--device", "cpu", "--checkpoint"])
            .arg(dir.path().join("run"))
            .args(args)
            .write_stdin(input),
    );
    String::from_utf8(output.stdout).unwrap()
}

#[test]
fn batch_size_changes_how_lines_are_grouped_not_what_they_become() {
    let dir = train_tiny(&[]);
    let input = "ich mochte ein bier\n\nich mochte ein cola\nich mochte ein bier\nein\n";
    let with_batch = |size: &str| translate_lines(&dir, input, &["--batch-size", size]);
    let one = with_batch("1");
    assert_eq!(one.lines().count(), 5);
    assert!(one.starts_with("i want a beer .\n\ni want a coke .\ni want a beer .\n"));
    assert_eq!(with_batch("2"), one);
    assert_eq!(with_batch("32"), one);
    // A token bound small enough to decode each sentence alone changes nothing either.
    assert_eq!(translate_lines(&dir, input, &["--batch-tokens", "1"]), one);
}

/// Beam search over a batch (all sentences' beams in one decoder call per step) gives what
/// it gives one sentence at a time.
#[test]
fn beam_search_gives_the_same_translations_whatever_the_batch_size() {
    let dir = train_tiny(&[]);
    let input = "ich mochte ein bier\nich mochte ein cola\n\nein\nich mochte ein bier ein cola\n";
    let with_batch =
        |size: &str| translate_lines(&dir, input, &["--beam", "4", "--batch-size", size]);
    let one = with_batch("1");
    assert_eq!(one.lines().count(), 5);
    assert!(
        one.starts_with("i want a beer .\ni want a coke .\n\n"),
        "{one}"
    );
    assert_eq!(with_batch("3"), one);
    assert_eq!(with_batch("32"), one);
    let bounded =
        |tokens: &str| translate_lines(&dir, input, &["--beam", "4", "--batch-tokens", tokens]);
    assert_eq!(bounded("1"), one);
    assert_eq!(bounded("60"), one);
}

#[test]
fn without_checkpoint_the_newest_run_answers_and_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let tiny = std::fs::read_to_string("configs/tiny.toml").unwrap();
    let toy = std::fs::canonicalize("data/toy.tsv").unwrap();
    let reversed = dir.path().join("en-de.tsv");
    std::fs::write(
        &reversed,
        "i want a beer .\tich mochte ein bier\ni want a coke .\tich mochte ein cola\n",
    )
    .unwrap();
    // Named so that the alphabetical order is the opposite of the age order.
    for (name, data) in [
        ("zz-de-en", toy.as_path()),
        ("aa-en-de", reversed.as_path()),
    ] {
        let config = dir.path().join(format!("{name}.toml"));
        std::fs::write(
            &config,
            tiny.replace("data/toy.tsv", &data.display().to_string()),
        )
        .unwrap();
        succeeded(
            transformer()
                .current_dir(dir.path())
                .args(["train", "--device", "cpu", "-q", "--config"])
                .arg(&config),
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let output = succeeded(transformer().current_dir(dir.path()).args([
        "translate",
        "--device",
        "cpu",
        "i want a beer .",
    ]));
    assert_eq!(
        String::from_utf8_lossy(&output.stdout),
        "ich mochte ein bier\n"
    );
    assert_eq!(
        String::from_utf8_lossy(&output.stderr),
        "checkpoint: runs/aa-en-de/last (the newest run under runs/; --checkpoint DIR picks \
         another)\n"
    );
}

#[test]
fn a_weights_file_given_as_checkpoint_is_named_with_the_directory_to_pass() {
    let dir = train_tiny(&[]);
    let last = dir.path().join("run/last");
    transformer()
        .args(["translate", "--device", "cpu", "--checkpoint"])
        .arg(last.join("model.safetensors"))
        .arg("ich")
        .assert()
        .code(1)
        .stderr(format!(
            "error: {} is a file, not a checkpoint directory; pass the directory that holds it \
             ({})\n",
            last.join("model.safetensors").display(),
            last.display()
        ));
}

#[test]
fn checkpoint_files_all_have_the_same_mode() {
    use std::os::unix::fs::PermissionsExt;
    let dir = train_tiny(&[]);
    let last = dir.path().join("run/last");
    let mode = |file: &str| {
        std::fs::metadata(last.join(file))
            .unwrap()
            .permissions()
            .mode()
    };
    assert_eq!(mode("model.safetensors"), mode("config.toml"));
    assert_eq!(mode("optimizer.safetensors"), mode("config.toml"));
}

#[test]
fn training_messages_read_as_english_and_as_the_config_spells_things() {
    let dir = train_tiny(&["--stop-at-step", "1"]);
    let output = succeeded(
        transformer()
            .args(["train", "--device", "cpu", "-q", "--resume"])
            .arg(dir.path().join("run"))
            .args(["--stop-at-step", "2"]),
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("tokenizer: word, "), "{stderr}");
    let fresh = tempfile::tempdir().unwrap();
    let config = fresh.path().join("one.toml");
    let tiny = std::fs::read_to_string("configs/tiny.toml").unwrap();
    let toy = std::fs::canonicalize("data/toy.tsv").unwrap();
    std::fs::write(
        &config,
        format!(
            "{}\n",
            tiny.replace("data/toy.tsv", &toy.display().to_string())
                .replace("epochs = 80", "epochs = 1")
        ),
    )
    .unwrap();
    let output = succeeded(
        transformer()
            .args(["train", "--device", "cpu", "-q", "--config"])
            .arg(&config)
            .arg("--out")
            .arg(fresh.path().join("run")),
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("trained 1 step in "), "{stderr}");
}

/// The main job from a directory outside the source tree (as after `cargo install`): the
/// built-in config trains on the built-in toy pairs, and `translate` finds the run.
#[test]
fn train_then_translate_work_from_any_directory() {
    let dir = TempDir::new().unwrap();
    let output = succeeded(
        transformer()
            .current_dir(dir.path())
            .args(["train", "--device", "cpu", "--quiet"]),
    );
    assert!(String::from_utf8_lossy(&output.stderr).contains("the built-in toy pairs"));
    let translated = succeeded(transformer().current_dir(dir.path()).args([
        "translate",
        "--device",
        "cpu",
        "ich mochte ein bier",
    ]));
    assert_eq!(
        String::from_utf8_lossy(&translated.stdout),
        "i want a beer .\n"
    );
    let saved = std::fs::read_to_string(dir.path().join("runs/base/last/config.toml")).unwrap();
    assert!(saved.contains("builtin = \"toy\""), "{saved}");
}

/// A search that `--max-len` cuts returns its best hypothesis by length-normalised score,
/// open or ended (the open ones compete when the limit cuts them, as in Hugging Face's beam
/// search): a wider beam never does worse than greedy decoding there.
#[test]
fn a_search_cut_by_max_len_keeps_its_best_hypothesis_open_or_ended() {
    let dir = train_tiny(&[]);
    let score = |beam: &str| {
        let output = succeeded(
            transformer()
                .args(["translate", "--device", "cpu", "--json", "--max-len", "3"])
                .args(["--length-penalty", "1", "--beam", beam, "--checkpoint"])
                .arg(dir.path().join("run"))
                .arg("ich mochte ein bier"),
        );
        let json: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
        let log_probs: Vec<f64> = serde_json::from_value(json["log_probs"].clone()).unwrap();
        let length = log_probs.len() as f64;
        (
            json["translation"].as_str().unwrap().to_string(),
            log_probs.iter().sum::<f64>() / ((5.0 + length) / 6.0),
        )
    };
    let (greedy, greedy_score) = score("1");
    assert_eq!(greedy, "i want a");
    for beam in ["2", "5", "10"] {
        let (wide, wide_score) = score(beam);
        assert!(
            wide_score >= greedy_score - 1e-5,
            "beam {beam}: {wide:?} {wide_score}"
        );
    }
}

#[test]
fn completions_bash_prints_a_script_that_completes_the_subcommands_and_their_flags() {
    let output = succeeded(transformer().args(["completions", "bash"]));
    let script = String::from_utf8(output.stdout).unwrap();
    assert!(script.contains("translate"), "{script}");
    assert!(script.contains("--checkpoint"), "{script}");
    assert!(script.contains("complete "), "{script}");
    assert!(output.stderr.is_empty());
}

#[test]
fn every_shell_gets_a_completion_script() {
    for shell in ["bash", "zsh", "fish", "elvish", "powershell"] {
        let output = succeeded(transformer().args(["completions", shell]));
        let script = String::from_utf8(output.stdout).unwrap();
        assert!(script.contains("infer-test"), "{shell}: {script}");
    }
}

#[test]
fn a_shell_completions_does_not_know_is_a_usage_error() {
    let output = transformer()
        .args(["completions", "tcsh"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(stderr.starts_with("error: "), "{stderr}");
    assert!(
        stderr.contains("tcsh") && stderr.contains("bash"),
        "{stderr}"
    );
    assert!(output.stdout.is_empty());
}

#[test]
fn man_prints_a_roff_page_for_the_command_and_each_subcommand() {
    let output = succeeded(transformer().arg("man"));
    let roff = String::from_utf8(output.stdout).unwrap();
    let subcommands = subcommand_names();
    assert!(roff.contains("\n.TH transformer 1 "), "{roff}");
    assert_eq!(
        roff.lines().filter(|l| l.starts_with(".TH ")).count(),
        1 + subcommands.len()
    );
    for name in &subcommands {
        assert!(
            roff.contains(&format!("\n.TH transformer-{name} 1 ")),
            "no page for {name}"
        );
    }
    assert!(roff.contains("checkpoint"), "{roff}");
    // Rendered by man itself where it is installed; the checks above stand without it.
    let man_works = std::process::Command::new("man")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if man_works {
        let mut child = std::process::Command::new("man")
            .args(["-l", "-"])
            .env("MANWIDTH", "80")
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut stdin = child.stdin.take().unwrap();
        std::io::Write::write_all(&mut stdin, roff.as_bytes()).unwrap();
        drop(stdin);
        let rendered = child.wait_with_output().unwrap();
        let text = String::from_utf8_lossy(&rendered.stdout);
        assert!(
            rendered.status.success(),
            "{}",
            String::from_utf8_lossy(&rendered.stderr)
        );
        assert!(text.contains("transformer-translate"), "{text}");
    }
}

#[test]
fn man_out_dir_writes_one_page_file_per_subcommand() {
    let dir = TempDir::new().unwrap();
    let out = dir.path().join("man1");
    let output = succeeded(transformer().arg("man").arg("--out-dir").arg(&out));
    assert!(output.stdout.is_empty());
    for name in ["transformer".to_string()].into_iter().chain(
        subcommand_names()
            .iter()
            .map(|n| format!("transformer-{n}")),
    ) {
        let page = std::fs::read_to_string(out.join(format!("{name}.1")))
            .unwrap_or_else(|e| panic!("{name}.1: {e}"));
        assert!(page.contains(&format!("\n.TH {name} 1 ")), "{page}");
        assert_eq!(page.matches("\n.TH ").count(), 1, "{page}");
    }
    assert_eq!(
        std::fs::read_dir(&out).unwrap().count(),
        1 + subcommand_names().len(),
        "only the pages, no temporary files"
    );
}

#[test]
fn man_out_dir_that_cannot_be_created_is_one_error_naming_it() {
    let dir = TempDir::new().unwrap();
    let file = dir.path().join("file");
    std::fs::write(&file, b"").unwrap();
    let output = transformer()
        .arg("man")
        .arg("--out-dir")
        .arg(file.join("man1"))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.starts_with("error: cannot create "), "{stderr}");
    assert!(stderr.contains("--out-dir"), "{stderr}");
}

/// The binary as `cargo install` leaves it: copied out of the source tree into a folder of
/// its own, and run from another directory.
fn installed_binary(dir: &Path) -> PathBuf {
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let installed = bin.join("transformer");
    std::fs::copy(env!("CARGO_BIN_EXE_transformer"), &installed).unwrap();
    installed
}

/// `transformer train --config base.toml`, as the tool's specification types it: a config the
/// tool ships runs by its name from any directory (said on stderr), and a name that is
/// neither a file nor shipped lists the shipped ones.
#[test]
fn a_shipped_config_runs_by_its_name_from_outside_the_repository() {
    let dir = TempDir::new().unwrap();
    let installed = installed_binary(dir.path());
    let work = dir.path().join("elsewhere");
    std::fs::create_dir_all(&work).unwrap();
    for given in ["tiny.toml", "configs/tiny.toml", "tiny"] {
        let output = std::process::Command::new(&installed)
            .current_dir(&work)
            .args([
                "train",
                "--device",
                "cpu",
                "--quiet",
                "--overwrite",
                "--config",
                given,
            ])
            .args(["--out", "run"])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(output.status.success(), "{given}: {stderr}");
        assert!(
            stderr.contains(&format!("--config {given}: no such file here"))
                && stderr.contains("configs/tiny.toml")
                && stderr.contains("toy pairs built in"),
            "{given}: {stderr}"
        );
    }
    let translated = std::process::Command::new(&installed)
        .current_dir(&work)
        .args(["translate", "--device", "cpu", "--checkpoint", "run"])
        .arg("ich mochte ein bier")
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&translated.stdout),
        "i want a beer .\n"
    );
    // A file of that name is the user's, and wins over the shipped config.
    std::fs::write(work.join("tiny.toml"), "[model]\nlayers = 0\n").unwrap();
    let own = std::process::Command::new(&installed)
        .current_dir(&work)
        .args(["train", "--device", "cpu", "--config", "tiny.toml"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&own.stderr);
    assert_eq!(own.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("tiny.toml line 2") && !stderr.contains("ships"),
        "{stderr}"
    );
    // Neither a file nor shipped: the shipped ones are listed.
    let missing = std::process::Command::new(&installed)
        .current_dir(&work)
        .args(["train", "--config", "bsae.toml"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&missing.stderr);
    assert_eq!(missing.status.code(), Some(1), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.contains("bsae.toml") && stderr.contains("base.toml, lm-tiny.toml"),
        "{stderr}"
    );
    // A shipped config whose data is not here says where it must be, before anything runs.
    let multi30k = std::process::Command::new(&installed)
        .current_dir(&work)
        .args(["train", "--config", "multi30k-cpu.toml"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&multi30k.stderr);
    assert_eq!(multi30k.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("scripts/get-multi30k.sh"), "{stderr}");
    assert!(!work.join("runs").exists());
}

/// `--out` takes every translation, not only --file's: TEXT, stdin, --json and HTML are
/// written to it (atomically) and nothing to stdout.
#[test]
fn translate_out_is_written_whatever_the_input() {
    let dir = train_tiny(&[]);
    let run = dir.path().join("run");
    let out = dir.path().join("out.txt");
    let cases: [(&[&str], &str, &str); 4] = [
        (&["ich mochte ein bier"], "", "i want a beer .\n"),
        (
            &["-"],
            "ich mochte ein bier\nich mochte ein cola\n",
            "i want a beer .\ni want a coke .\n",
        ),
        (
            &["--json", "ich mochte ein bier"],
            "",
            "\"translation\":\"i want a beer .\"",
        ),
        (
            &["--format", "html", "<p>ich mochte ein bier</p>"],
            "",
            "<p>i want a beer .</p>\n",
        ),
    ];
    for (args, stdin, expected) in cases {
        let _ = std::fs::remove_file(&out);
        let output = succeeded(
            transformer()
                .args(["translate", "--device", "cpu", "--checkpoint"])
                .arg(&run)
                .arg("--out")
                .arg(&out)
                .args(args)
                .write_stdin(stdin),
        );
        assert!(output.stdout.is_empty(), "{args:?}: {:?}", output.stdout);
        let written = std::fs::read_to_string(&out).unwrap();
        assert!(written.contains(expected), "{args:?}: {written:?}");
    }
    // Reading stdin, --out may not be the file stdin comes from.
    std::fs::write(&out, "ich mochte ein bier\n").unwrap();
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_transformer"))
        .args(["translate", "--device", "cpu", "--checkpoint"])
        .arg(&run)
        .arg("--out")
        .arg(&out)
        .stdin(std::fs::File::open(&out).unwrap())
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("stdin"));
    assert_eq!(
        std::fs::read_to_string(&out).unwrap(),
        "ich mochte ein bier\n"
    );
    // A failure before anything was translated leaves an existing --out as it was; one after
    // some lines keeps them, and says so.
    let translate_into = |stdin: &[u8]| {
        transformer()
            .args(["translate", "--device", "cpu", "--checkpoint"])
            .arg(&run)
            .arg("--out")
            .arg(&out)
            .write_stdin(stdin.to_vec())
            .output()
            .unwrap()
    };
    std::fs::write(&out, "PRECIOUS\n").unwrap();
    let failed = translate_into(b"\xff\xfe bad\n");
    assert_eq!(failed.status.code(), Some(1));
    assert_eq!(std::fs::read_to_string(&out).unwrap(), "PRECIOUS\n");
    let part = translate_into(b"ich mochte ein bier\n\xff bad\n");
    assert_eq!(part.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&part.stderr).contains("holds what was done before it"));
    assert_eq!(std::fs::read_to_string(&out).unwrap(), "i want a beer .\n");
}

/// SIGINT while stdin is translated into --out puts the lines translated so far in place, and
/// exits as the signal would.
#[test]
fn an_interrupted_translate_out_keeps_what_was_translated() {
    use std::io::Write;
    let dir = train_tiny(&[]);
    let out = dir.path().join("out.txt");
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_transformer"))
        .args(["translate", "--device", "cpu", "--checkpoint"])
        .arg(dir.path().join("run"))
        .arg("--out")
        .arg(&out)
        .stdin(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(b"ich mochte ein bier\n").unwrap();
    stdin.flush().unwrap();
    // The first line is translated while stdin stays open.
    let started = std::time::Instant::now();
    while !dir.path().read_dir().unwrap().flatten().any(|e| {
        e.file_name().to_string_lossy().starts_with(".tmp-")
            && e.metadata().is_ok_and(|m| m.len() > 0)
    }) {
        assert!(started.elapsed().as_secs() < 60, "nothing was translated");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let output = child.wait_with_output().unwrap();
    drop(stdin);
    assert_eq!(output.status.code(), Some(130));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("stopped by SIGINT") && stderr.contains("out.txt holds"),
        "{stderr}"
    );
    assert_eq!(std::fs::read_to_string(&out).unwrap(), "i want a beer .\n");
}

/// A translation that runs into --max-len is said to be cut there, not blamed on a sentence
/// left out, and --json says where it stopped.
#[test]
fn a_translation_cut_by_max_len_is_named_as_such() {
    let dir = train_tiny(&[]);
    let output = succeeded(
        transformer()
            .args([
                "translate",
                "--device",
                "cpu",
                "--json",
                "--max-len",
                "2",
                "--checkpoint",
            ])
            .arg(dir.path().join("run"))
            .arg("ich mochte ein bier ein bier ein bier"),
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("limit of 2 tokens") && stderr.contains("--max-len"),
        "{stderr}"
    );
    assert!(!stderr.contains("sentence may be missing"), "{stderr}");
    let json: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(json["stopped_at_limit"], 2, "{json}");
    assert!(json.get("short").is_none(), "{json}");
}

/// eval reads each source line as one sentence unless told to cut it: lines that hold several
/// are counted in a warning that names --split-sentences, and with it none is.
#[test]
fn eval_warns_of_lines_of_several_sentences_read_as_one() {
    let dir = train_tiny(&[]);
    let src = dir.path().join("src.txt");
    let reference = dir.path().join("ref.txt");
    std::fs::write(
        &src,
        "ich mochte ein bier . ich mochte ein cola .\nein bier\n",
    )
    .unwrap();
    std::fs::write(&reference, "i want a beer . i want a coke .\na beer\n").unwrap();
    let eval = |extra: &[&str]| {
        let output = succeeded(
            transformer()
                .args(["eval", "--device", "cpu", "--checkpoint"])
                .arg(dir.path().join("run"))
                .arg("--src")
                .arg(&src)
                .arg("--ref")
                .arg(&reference)
                .args(extra),
        );
        String::from_utf8_lossy(&output.stderr).into_owned()
    };
    let whole = eval(&[]);
    assert!(
        whole.contains("1 of 2 source lines hold more than one sentence")
            && whole.contains("--split-sentences"),
        "{whole}"
    );
    let split = eval(&["--split-sentences"]);
    assert!(!split.contains("more than one sentence"), "{split}");
}

/// A disk that fills while stdin is translated into --out: the file keeps whole lines only
/// (never half of one), and the error names the file and the disk.
#[test]
fn a_full_disk_under_translate_out_keeps_whole_lines_only() {
    let dir = train_tiny(&[]);
    let Some(disk) = common::SmallDisk::mount(&dir.path().join("disk"), "64k") else {
        eprintln!("skipped: this process may not mount a tmpfs (run as root to check it)");
        return;
    };
    let out = disk.0.join("out.txt");
    std::fs::write(&out, "ORIGINAL\n").unwrap();
    // Fill the disk but for a few kilobytes.
    disk.fill_leaving(6 * 1024);
    let lines = "ich mochte ein bier\n".repeat(2000);
    let output = transformer()
        .args(["translate", "--device", "cpu", "--checkpoint"])
        .arg(dir.path().join("run"))
        .arg("--out")
        .arg(&out)
        .write_stdin(lines)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("out.txt") && stderr.contains("disk is full"),
        "{stderr}"
    );
    let written = std::fs::read_to_string(&out).unwrap();
    assert!(
        written == "ORIGINAL\n" || written.ends_with(".\n"),
        "{written:?}"
    );
    assert!(written
        .lines()
        .all(|l| l == "i want a beer ." || l == "ORIGINAL"));
}
