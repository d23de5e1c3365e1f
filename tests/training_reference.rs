//! Training against the PyTorch reference's own loop (tests/fixtures/training, written by
//! scripts/make_training_fixture.py): from the same weights, on the same batches, with dropout
//! 0, `transformer train` must give the reference's loss at each of 20 steps (1e-5 relative),
//! its gradients at step 1 (1e-5) and its parameters after step 20 (1e-4), through the fused
//! kernels and through candle's composed ops; plainly, with `accumulate = 2` and with
//! clipping.
//!
//! The step-1 gradient is read from Adam's first moment in `last/optimizer.safetensors`
//! after `--stop-at-step 1`: it is (1 - beta1) times the gradient Adam was given.
//!
//! The key projections' biases (`linears.1.bias` of every attention) are compared as
//! gradients but not as trained values: adding the same q . b to every score of a row leaves
//! its softmax unchanged, so they change no output and their gradient is zero up to rounding
//! (about 1e-9 here). Adam divides by sqrt(v) + 1e-9 and turns that rounding noise into steps
//! of the full learning rate, in whatever direction each side's rounding points: after 20
//! steps their values are noise on both sides, and the same in neither.

mod common;

use std::collections::HashMap;
use std::path::Path;

use candle_core::{Device, Tensor};
use common::{largest_difference, succeeded, transformer};
use serde_json::Value;

const FIXTURE: &str = "tests/fixtures/training";
const BETA1: f64 = 0.9;

#[derive(Clone, Copy)]
enum Kernels {
    Fused,
    Composed,
}

/// Trains scenario `name` into `out`, through `kernels`, with `extra` arguments.
fn train(name: &str, kernels: Kernels, out: &Path, extra: &[&str]) {
    let mut command = transformer();
    command
        .args(["train", "--device", "cpu", "--quiet", "--config"])
        .arg(format!("{FIXTURE}/{name}.toml"))
        .arg("--out")
        .arg(out)
        .args(extra);
    match kernels {
        Kernels::Fused => command.env_remove("TRANSFORMER_KERNELS"),
        Kernels::Composed => command.env("TRANSFORMER_KERNELS", "composed"),
    };
    succeeded(&mut command);
}

fn expected(name: &str) -> (Vec<f64>, HashMap<String, Tensor>) {
    let text = std::fs::read_to_string(format!("{FIXTURE}/expected.json")).unwrap();
    let json: Value = serde_json::from_str(&text).unwrap();
    let losses = json["scenarios"][name]["losses"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_f64().unwrap())
        .collect();
    let tensors = candle_core::safetensors::load(
        format!("{FIXTURE}/expected-{name}.safetensors"),
        &Device::Cpu,
    )
    .unwrap();
    (losses, tensors)
}

/// Each step's loss from metrics.jsonl (one record a step: `log_every = 1`).
fn step_losses(run: &Path) -> Vec<f64> {
    std::fs::read_to_string(run.join("metrics.jsonl"))
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str::<Value>(line).unwrap())
        .filter(|record| record["kind"] == "step")
        .map(|record| record["loss"].as_f64().unwrap())
        .collect()
}

/// Whether `name` is an attention's key bias (see the module docs).
fn is_key_bias(name: &str) -> bool {
    name.ends_with("attn.linears.1.bias")
}

/// Every `prefix.<name>` tensor of `expected` (but those `skip` names) against
/// `<name><suffix>` of `got`, scaled by `scale`, within `tolerance`; returns how many were
/// compared.
#[allow(clippy::too_many_arguments)]
fn compare_all(
    expected: &HashMap<String, Tensor>,
    prefix: &str,
    got: &HashMap<String, Tensor>,
    suffix: &str,
    scale: f64,
    tolerance: f32,
    what: &str,
    skip: fn(&str) -> bool,
) -> usize {
    let mut compared = 0;
    for (key, want) in expected {
        let Some(name) = key.strip_prefix(prefix).filter(|name| !skip(name)) else {
            continue;
        };
        let have = got
            .get(&format!("{name}{suffix}"))
            .unwrap_or_else(|| panic!("{what}: no {name}{suffix}"));
        let have = (have * scale).unwrap();
        let difference = largest_difference(&have, want);
        assert!(
            difference <= tolerance,
            "{what}: {name} differs from the reference by {difference:e} (tolerance {tolerance:e})"
        );
        compared += 1;
    }
    compared
}

fn matches_the_reference(name: &str, kernels: Kernels) {
    let (losses, reference) = expected(name);
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run");
    train(name, kernels, &run, &[]);
    let got = step_losses(&run);
    assert_eq!(got.len(), losses.len(), "{name}: steps logged");
    for (step, (have, want)) in got.iter().zip(&losses).enumerate() {
        let relative = (have - want).abs() / want.abs();
        assert!(
            relative <= 1e-5,
            "{name}: the loss of step {} is {have}, the reference's {want} ({relative:e} relative)",
            step + 1
        );
    }
    assert!(
        losses[losses.len() - 1] < losses[0] / 2.0,
        "{name}: the run learns"
    );
    let weights =
        candle_core::safetensors::load(run.join("last/model.safetensors"), &Device::Cpu).unwrap();
    let parameters = compare_all(
        &reference,
        "after.",
        &weights,
        "",
        1.0,
        1e-4,
        name,
        is_key_bias,
    );
    assert!(parameters > 20, "{name}: {parameters} parameters compared");

    let first = dir.path().join("first");
    train(name, kernels, &first, &["--stop-at-step", "1"]);
    let moments =
        candle_core::safetensors::load(first.join("last/optimizer.safetensors"), &Device::Cpu)
            .unwrap();
    let gradients = compare_all(
        &reference,
        "grad1.",
        &moments,
        ".exp_avg",
        1.0 / (1.0 - BETA1),
        1e-5,
        &format!("{name} step-1 gradient"),
        |_| false,
    );
    let key_biases = 3 * 2; // two layers: encoder self-attention, decoder self and source
    assert_eq!(gradients, parameters + key_biases);
}

#[test]
fn plain_training_matches_the_reference_through_the_fused_kernels() {
    matches_the_reference("plain", Kernels::Fused);
}

#[test]
fn plain_training_matches_the_reference_through_the_composed_ops() {
    matches_the_reference("plain", Kernels::Composed);
}

#[test]
fn accumulating_two_batches_matches_the_reference_through_the_fused_kernels() {
    matches_the_reference("accumulate", Kernels::Fused);
}

#[test]
fn accumulating_two_batches_matches_the_reference_through_the_composed_ops() {
    matches_the_reference("accumulate", Kernels::Composed);
}

#[test]
fn clipped_training_matches_the_reference_through_the_fused_kernels() {
    matches_the_reference("clipped", Kernels::Fused);
}

#[test]
fn clipped_training_matches_the_reference_through_the_composed_ops() {
    matches_the_reference("clipped", Kernels::Composed);
}

/// `train` on the plain scenario's config with `from` replaced by `to`, in a fresh directory
/// `dir`: its exit code and stderr.
fn train_edited(dir: &Path, from: &str, to: &str) -> (Option<i32>, String) {
    let text = std::fs::read_to_string(format!("{FIXTURE}/plain.toml"))
        .unwrap()
        .replace(from, to);
    let config = dir.join("edited.toml");
    std::fs::write(&config, text).unwrap();
    let output = transformer()
        .args(["train", "--device", "cpu", "--quiet", "--config"])
        .arg(&config)
        .arg("--out")
        .arg(dir.join("run"))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    (output.status.code(), stderr)
}

#[test]
fn init_from_refuses_a_model_section_that_differs_naming_both_values() {
    let dir = tempfile::tempdir().unwrap();
    let (code, stderr) = train_edited(dir.path(), "d_ff = 32", "d_ff = 64");
    assert_eq!(code, Some(1), "{stderr}");
    assert!(
        stderr.contains("model.d_ff = 64") && stderr.contains("has 32"),
        "{stderr}"
    );
}

#[test]
fn init_from_a_directory_that_is_not_there_says_what_to_name() {
    let dir = tempfile::tempdir().unwrap();
    let from = format!("init_from = \"{FIXTURE}\"");
    let (code, stderr) = train_edited(dir.path(), &from, "init_from = \"nowhere\"");
    assert_eq!(code, Some(1), "{stderr}");
    assert!(
        stderr.contains("training.init_from = \"nowhere\" does not exist")
            && !stderr.contains("--checkpoint"),
        "{stderr}"
    );
}

#[test]
fn init_from_a_language_model_with_translation_pairs_is_refused_before_training() {
    // The language model's [model] comes with it (arch = "decoder-only"), which learns from
    // plain text: the run it would make could be neither resumed nor used.
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("lm-on-pairs.toml");
    std::fs::write(
        &config,
        format!(
            "[data]\ntrain = \"{FIXTURE}/pairs.tsv\"\n[training]\nepochs = 1\n\
             init_from = \"tests/fixtures/parity-lm\"\n"
        ),
    )
    .unwrap();
    let output = transformer()
        .args(["train", "--device", "cpu", "--quiet", "--config"])
        .arg(&config)
        .arg("--out")
        .arg(dir.path().join("run"))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("training.init_from") && stderr.contains("model.arch"),
        "{stderr}"
    );
    assert!(!dir.path().join("run/last").exists(), "no run was written");
}

#[test]
fn init_from_warns_of_training_words_its_vocabulary_lacks() {
    let dir = tempfile::tempdir().unwrap();
    let pairs = dir.path().join("new.tsv");
    std::fs::write(&pairs, "ich mochte kaffee\ti want coffee\n").unwrap();
    let from = format!("train = \"{FIXTURE}/pairs.tsv\"");
    let to = format!("train = {:?}", pairs.display().to_string());
    let (code, stderr) = train_edited(dir.path(), &from, &to);
    assert_eq!(code, Some(0), "{stderr}");
    // "kaffee" and "coffee": neither side of the fixture's vocabulary has them.
    assert!(
        stderr.contains("warning: 2 of the training data's 10 tokens are not in the vocabulary"),
        "{stderr}"
    );
}
