//! Parity with the PyTorch reference: tests/fixtures/parity (The Annotated Transformer) and
//! tests/fixtures/parity-VARIANT (the other tutorials' architectures: post-norm, learned
//! positions, bias-free projections, shared embeddings) were written by
//! scripts/make_parity_fixture.py --all (the reference's state_dict as is, plus what it
//! computed). Each is loaded through the same code as `transformer translate --checkpoint`.

mod common;

use common::{largest_difference, succeeded, teacher_forced, transformer, FLAGS};
use std::path::Path;

use candle_core::{Device, Tensor};
use serde_json::Value;
use transformer::checkpoint;
use transformer::decoding::teacher_forced_log_probs;
use transformer::infer::settings::DecodeRequest;
use transformer::infer::{LoadOptions, Translator};
use transformer::model::families::encoder_decoder::EncoderDecoder;
use transformer::model::{masks, Mode};
use transformer::tokenize::specials::PAD_ID;

const FIXTURES: [&str; 5] = [
    "tests/fixtures/parity",
    "tests/fixtures/parity-post-norm",
    "tests/fixtures/parity-learned-positions",
    "tests/fixtures/parity-bias-free",
    "tests/fixtures/parity-shared-embeddings",
];
const TOLERANCE: f32 = 1e-4;

fn expected(fixture: &str) -> Value {
    let text = std::fs::read_to_string(Path::new(fixture).join("expected.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

fn ids_matrix(value: &Value) -> Tensor {
    let rows: Vec<Vec<u32>> = serde_json::from_value(value.clone()).unwrap();
    let (batch, len) = (rows.len(), rows[0].len());
    let flat: Vec<u32> = rows.into_iter().flatten().collect();
    Tensor::from_vec(flat, (batch, len), &Device::Cpu).unwrap()
}

fn flat_floats(value: &Value) -> Vec<f32> {
    match value {
        Value::Array(items) => items.iter().flat_map(flat_floats).collect(),
        other => vec![other.as_f64().unwrap() as f32],
    }
}

fn assert_close(got: &[f32], want: &[f32], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    let worst = got
        .iter()
        .zip(want)
        .map(|(g, w)| (g - w).abs())
        .fold(0f32, f32::max);
    assert!(worst <= TOLERANCE, "{what}: max abs difference {worst}");
}

#[test]
fn the_encoder_memory_matches_the_pytorch_reference() {
    for fixture in FIXTURES {
        encoder_memory_matches(fixture);
    }
}

fn encoder_memory_matches(fixture: &str) {
    let expected = expected(fixture);
    let loaded = checkpoint::load(Path::new(fixture), &Device::Cpu).unwrap();
    let src = ids_matrix(&expected["src"]);
    let src_mask = masks::padding_mask(&src, PAD_ID).unwrap();
    let memory = loaded
        .model
        .family::<EncoderDecoder>()
        .unwrap()
        .encode(&src, &src_mask, Mode::Eval)
        .unwrap();
    let got = memory.flatten_all().unwrap().to_vec1::<f32>().unwrap();
    assert_close(
        &got,
        &flat_floats(&expected["memory"]),
        &format!("{fixture}: memory"),
    );
}

#[test]
fn teacher_forced_log_probs_match_the_pytorch_reference() {
    for fixture in FIXTURES {
        teacher_forced_log_probs_match(fixture);
    }
}

fn teacher_forced_log_probs_match(fixture: &str) {
    let expected = expected(fixture);
    let loaded = checkpoint::load(Path::new(fixture), &Device::Cpu).unwrap();
    let src = ids_matrix(&expected["src"]);
    let tgt_in = ids_matrix(&expected["tgt_in"]);
    let log_probs =
        teacher_forced_log_probs(&*loaded.model, &teacher_forced(&src, &tgt_in)).unwrap();
    let got = log_probs.flatten_all().unwrap().to_vec1::<f32>().unwrap();
    assert_close(
        &got,
        &flat_floats(&expected["log_probs"]),
        &format!("{fixture}: log_probs"),
    );
}

#[test]
fn greedy_decoding_picks_the_same_words_with_the_same_log_probs() {
    for fixture in FIXTURES {
        greedy_decodes_match(fixture);
    }
}

fn greedy_decodes_match(fixture: &str) {
    let expected = expected(fixture);
    // Through the front door every command uses, with the fixture's step limit as a flag.
    let translator =
        Translator::open(Path::new(fixture), &Device::Cpu, LoadOptions::default()).unwrap();
    for case in expected["greedy"].as_array().unwrap() {
        let source = case["source"].as_str().unwrap();
        let max_steps = case["max_steps"].as_u64().unwrap() as usize;
        let asked = DecodeRequest {
            max_len: Some(max_steps),
            ..DecodeRequest::by(FLAGS)
        };
        let options = translator.decode_settings(Some(asked), None).unwrap();
        let got = translator
            .translate_sentences(&[source], &options)
            .unwrap()
            .remove(0);
        let want_ids: Vec<u32> = serde_json::from_value(case["ids"].clone()).unwrap();
        assert_eq!(got.ids, want_ids, "{fixture}: ids for {source:?}");
        assert_close(
            &got.log_probs,
            &flat_floats(&case["log_probs"]),
            &format!("{fixture}: {source}"),
        );
    }
}

#[test]
fn translate_json_reproduces_the_reference_greedy_decodes() {
    for fixture in FIXTURES {
        translate_json_matches(fixture);
    }
}

fn translate_json_matches(fixture: &str) {
    let expected = expected(fixture);
    for case in expected["greedy"].as_array().unwrap() {
        let source = case["source"].as_str().unwrap();
        let max_steps = case["max_steps"].as_u64().unwrap().to_string();
        let output = succeeded(
            transformer()
                .args([
                    "translate",
                    "--checkpoint",
                    fixture,
                    "--json",
                    "--device",
                    "cpu",
                ])
                .args(["--max-len", &max_steps, source]),
        );
        let got: Value = serde_json::from_slice(&output.stdout).unwrap();
        assert_eq!(got["source"], case["source"]);
        assert_eq!(got["ids"], case["ids"], "{fixture}: ids for {source:?}");
        assert_close(
            &flat_floats(&got["log_probs"]),
            &flat_floats(&case["log_probs"]),
            &format!("{fixture}: {source}"),
        );
    }
}

#[test]
fn the_sinusoid_table_equals_the_one_pytorch_computed() {
    // Every fixture ships the reference's `pe` buffer, which loading reads back, so the
    // table our code computes is compared here, against the buffer PyTorch wrote.
    let file = candle_core::safetensors::load(
        Path::new("tests/fixtures/parity").join("model.safetensors"),
        &Device::Cpu,
    )
    .unwrap();
    let theirs = file["src_embed.1.pe"].squeeze(0).unwrap();
    let (max_len, d_model) = theirs.dims2().unwrap();
    assert_eq!((max_len, d_model), (64, 32));
    let ours = transformer::model::positions::sinusoid_table(max_len, d_model, &Device::Cpu)
        .unwrap()
        .reshape((max_len, d_model))
        .unwrap();
    let worst = largest_difference(&ours, &theirs);
    // f32 sin/cos of the same f32 arguments: libm and PyTorch's vectorised kernels may
    // differ in the last bit.
    assert!(worst <= 1e-6, "largest difference {worst}");
}
