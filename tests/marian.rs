//! Hugging Face MarianMT directories run as checkpoints, against transformers itself: the
//! fixtures scripts/make_marian_fixture.py wrote (shared and separate vocabularies; swish,
//! ReLU and GELU; different widths and depths; `.safetensors` and `.bin`), each trained a few
//! hundred steps in PyTorch, with what `MarianMTModel` and `generate()` gave.

mod common;

use std::path::Path;

use candle_core::{Device, Tensor};
use common::{largest_difference, marian_expected, succeeded, transformer, MARIAN_FIXTURES};
use serde_json::Value;
use transformer::checkpoint::{self, Task};
use transformer::infer::teacher_forced_log_probs;

fn matrix(value: &Value) -> Vec<Vec<u32>> {
    serde_json::from_value(value.clone()).unwrap()
}

fn tensor(rows: &[Vec<u32>]) -> Tensor {
    let width = rows[0].len();
    let flat: Vec<u32> = rows.iter().flatten().copied().collect();
    Tensor::from_vec(flat, (rows.len(), width), &Device::Cpu).unwrap()
}

#[test]
fn teacher_forced_log_probs_equal_transformers_within_1e4() {
    for fixture in MARIAN_FIXTURES {
        let dir = Path::new(fixture);
        let loaded = checkpoint::load(dir, &Device::Cpu).unwrap();
        let model = loaded.model_for(Task::Translate).unwrap();
        let case = &marian_expected(dir)["teacher_forced"];
        let src = tensor(&matrix(&case["input_ids"]));
        let tgt_in = tensor(&matrix(&case["decoder_input_ids"]));
        // transformers' attention mask is the source's padding: ours must be the same.
        let mask = tensor(&matrix(&case["attention_mask"]));
        let specials = loaded.tokenizers.specials();
        let batch = transformer::model::TeacherForced::framed(src, tgt_in, &specials).unwrap();
        let transformer::model::TeacherForced::WithSource { source, .. } = &batch else {
            unreachable!()
        };
        assert_eq!(
            source.mask.squeeze(1).unwrap().to_vec2::<u8>().unwrap(),
            mask.to_vec2::<u32>()
                .unwrap()
                .iter()
                .map(|row| row.iter().map(|&m| m as u8).collect())
                .collect::<Vec<Vec<u8>>>()
        );
        let ours = teacher_forced_log_probs(&**model, &batch).unwrap();
        let theirs = candle_core::safetensors::load(dir.join("expected.safetensors"), &Device::Cpu)
            .unwrap()
            .remove("log_probs")
            .unwrap();
        let difference = largest_difference(&ours, &theirs);
        assert!(
            difference < 1e-4,
            "{fixture}: log-probs differ by {difference}"
        );
    }
}

/// `generate()`'s rows without the decoder's start symbol and the padding after `</s>`.
fn generated(rows: &Value, pad: u32) -> Vec<Vec<u32>> {
    matrix(rows)
        .into_iter()
        .map(|row| {
            let mut row = row[1..].to_vec();
            while row.last() == Some(&pad) {
                row.pop();
            }
            row
        })
        .collect()
}

/// `translate --json` on the fixture's batch: the ids of each line.
fn translated_ids(dir: &Path, sources: &[String], flags: &[&str]) -> Vec<Vec<u32>> {
    let out = succeeded(
        transformer()
            .args(["translate", "--json", "--checkpoint"])
            .arg(dir)
            .args(flags)
            .arg("-")
            .write_stdin(sources.join("\n") + "\n"),
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|line| {
            let value: Value = serde_json::from_str(line).unwrap();
            serde_json::from_value(value["ids"].clone()).unwrap()
        })
        .collect()
}

#[test]
fn greedy_and_beam_search_give_generates_ids_in_a_padded_batch() {
    for fixture in MARIAN_FIXTURES {
        let dir = Path::new(fixture);
        let case = &marian_expected(dir)["generate"];
        let pad = matrix(&case["greedy"]["ids"])[0][0];
        let sources: Vec<String> = serde_json::from_value(case["sources"].clone()).unwrap();
        // The checkpoint's own generation settings: num_beams 4 from generation_config.json.
        assert_eq!(case["beam"]["num_beams"], 4);
        let beam = translated_ids(dir, &sources, &[]);
        assert_eq!(
            beam,
            generated(&case["beam"]["ids"], pad),
            "{fixture}: beam 4"
        );
        let greedy = translated_ids(dir, &sources, &["--beam", "1"]);
        assert_eq!(
            greedy,
            generated(&case["greedy"]["ids"], pad),
            "{fixture}: greedy"
        );
        // The text too: MarianTokenizer's decoding of the same ids.
        let out = succeeded(
            transformer()
                .args(["translate", "--checkpoint"])
                .arg(dir)
                .arg(&sources[1]),
        );
        let text = String::from_utf8(out.stdout).unwrap();
        assert_eq!(text.trim_end(), case["beam"]["text"][1].as_str().unwrap());
    }
}
