//! Checkpoints damaged or edited by hand are refused with one error that names the file at
//! fault (and the line, tensor or field), never read as something else: a vocabulary with a
//! repeated or empty line, weights of a dtype the format does not hold or that are not finite,
//! an empty or broken config, a BPE checkpoint without its tokenizer, a training state from
//! another format or with an unreachable position.

mod common;

use std::path::Path;

use candle_core::{DType, Device, Tensor};
use common::{
    fails_naming, replaced_by_fifo, replaced_by_link_to_dev_zero, small_checkpoint, succeeded,
    trained_in, transformer,
};

const TRANSLATE: [&str; 6] = ["translate", "--device", "cpu", "--checkpoint", "run", "ich"];

fn edit(path: &Path, edit: impl FnOnce(String) -> String) {
    let text = std::fs::read_to_string(path).unwrap();
    std::fs::write(path, edit(text)).unwrap();
}

#[test]
fn a_repeated_vocabulary_word_is_refused_naming_both_lines() {
    let dir = small_checkpoint();
    let vocab = dir.path().join("run/last/vocab.src.txt");
    // Same number of lines (the weights still fit): `cola`'s line now says `bier`.
    edit(&vocab, |text| text.replace("\ncola\n", "\nbier\n"));
    let lines: Vec<String> = std::fs::read_to_string(&vocab)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect();
    let first = lines.iter().position(|l| l == "bier").unwrap() + 1;
    let second = lines.iter().rposition(|l| l == "bier").unwrap() + 1;
    fails_naming(
        dir.path(),
        &TRANSLATE,
        &[
            &format!("vocab.src.txt line {second} repeats \"bier\" from line {first}"),
            "restore it",
        ],
    );
}

#[test]
fn an_empty_vocabulary_line_is_refused_naming_it() {
    let dir = small_checkpoint();
    edit(&dir.path().join("run/last/vocab.tgt.txt"), |text| {
        text.replace("\nbeer\n", "\n\n")
    });
    fails_naming(dir.path(), &TRANSLATE, &["vocab.tgt.txt line", "is empty"]);
}

/// Rewrites the checkpoint's weights with `change` applied to `generator.proj.bias`.
fn rewrite_weights(dir: &Path, change: impl FnOnce(&Tensor) -> Tensor) {
    let path = dir.join("run/last/model.safetensors");
    let mut tensors = candle_core::safetensors::load(&path, &Device::Cpu).unwrap();
    let bias = tensors.remove("generator.proj.bias").unwrap();
    tensors.insert("generator.proj.bias".into(), change(&bias));
    candle_core::safetensors::save(&tensors, &path).unwrap();
}

#[test]
fn weights_of_a_type_the_format_does_not_hold_are_refused_naming_the_tensor() {
    for dtype in [DType::I64, DType::U8, DType::F64] {
        let dir = small_checkpoint();
        rewrite_weights(dir.path(), |t| t.to_dtype(dtype).unwrap());
        fails_naming(
            dir.path(),
            &TRANSLATE,
            &[
                "model.safetensors tensor generator.proj.bias",
                &format!("dtype {dtype:?}"),
                "F32, F16, BF16 (and I8 for an int8 checkpoint's matrices)",
            ],
        );
    }
}

#[test]
fn half_precision_weights_are_read() {
    let dir = small_checkpoint();
    rewrite_weights(dir.path(), |t| t.to_dtype(DType::F16).unwrap());
    succeeded(transformer().current_dir(dir.path()).args(TRANSLATE));
}

#[test]
fn weights_that_are_not_finite_are_refused_naming_the_tensor() {
    for bad in [f32::NAN, f32::INFINITY] {
        let dir = small_checkpoint();
        let mut size = 0;
        rewrite_weights(dir.path(), |t| {
            let mut values = t.to_vec1::<f32>().unwrap();
            values[1] = bad;
            values[3] = -bad;
            size = values.len();
            Tensor::new(values, &Device::Cpu).unwrap()
        });
        // The count of bad values says how much of the file is damaged.
        fails_naming(
            dir.path(),
            &TRANSLATE,
            &[&format!(
                "tensor generator.proj.bias holds 2 NaN or infinite values of {size}"
            )],
        );
    }
}

#[test]
fn an_empty_checkpoint_config_is_blamed_not_the_weights() {
    let dir = small_checkpoint();
    std::fs::write(dir.path().join("run/last/config.toml"), "").unwrap();
    fails_naming(
        dir.path(),
        &TRANSLATE,
        &["config.toml has no [model] table (it is empty)"],
    );
    let output = transformer()
        .current_dir(dir.path())
        .args(TRANSLATE)
        .output()
        .unwrap();
    assert!(!String::from_utf8_lossy(&output.stderr).contains("model.safetensors"));
}

#[test]
fn a_checkpoint_config_cut_before_a_size_is_refused_naming_it() {
    let dir = small_checkpoint();
    edit(&dir.path().join("run/last/config.toml"), |text| {
        text.lines()
            .filter(|line| !line.starts_with("heads"))
            .collect::<Vec<_>>()
            .join("\n")
    });
    fails_naming(
        dir.path(),
        &TRANSLATE,
        &["config.toml has no model.heads", "cut or edited"],
    );
}

#[test]
fn an_unreadable_checkpoint_config_does_not_speak_of_a_config_flag() {
    let dir = small_checkpoint();
    let config = dir.path().join("run/last/config.toml");
    std::fs::remove_file(&config).unwrap();
    std::fs::create_dir(&config).unwrap();
    fails_naming(
        dir.path(),
        &TRANSLATE,
        &[
            "cannot read run/last/config.toml",
            "checkpoint is incomplete",
        ],
    );
    let output = transformer()
        .current_dir(dir.path())
        .args(TRANSLATE)
        .output()
        .unwrap();
    assert!(!String::from_utf8_lossy(&output.stderr).contains("--config"));
}

#[test]
fn a_bpe_checkpoint_without_its_tokenizer_names_tokenizer_json() {
    let dir = trained_in(
        "[model]\nlayers = 1\nd_model = 16\nd_ff = 32\nheads = 2\nmax_len = 16\n\
         [data]\ntrain = \"toy.tsv\"\ntokenizer = \"bpe\"\nvocab_size = 40\n\
         [training]\nepochs = 1\nmax_tokens = 64\n",
        &[],
    );
    let config = dir.path().join("run/last/config.toml");
    let saved = std::fs::read_to_string(&config).unwrap();
    // A config without its [data] table reads as the word tokenizer's.
    let cut = saved.split("[data]").next().unwrap().to_string();
    std::fs::write(&config, cut).unwrap();
    fails_naming(
        dir.path(),
        &TRANSLATE,
        &["vocab.src.txt is missing but the directory holds tokenizer.json"],
    );
    std::fs::write(&config, saved).unwrap();
    std::fs::remove_file(dir.path().join("run/last/tokenizer.json")).unwrap();
    fails_naming(
        dir.path(),
        &TRANSLATE,
        &["tokenizer.json is missing", "data.tokenizer = \"bpe\""],
    );
}

/// A run of the tiny config stopped at step 1, and its `training_state.json`.
fn stopped_run() -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = trained_in(
        "[model]\nlayers = 1\nd_model = 16\nd_ff = 32\nheads = 2\nmax_len = 16\n\
         [data]\ntrain = \"toy.tsv\"\n[training]\nepochs = 4\nmax_tokens = 8\n",
        &["--stop-at-step", "1"],
    );
    let state = dir.path().join("run/last/training_state.json");
    (dir, state)
}

const RESUME: [&str; 5] = ["train", "--device", "cpu", "--resume", "run"];

#[test]
fn a_training_state_of_another_format_is_refused_naming_both_formats() {
    let (dir, state) = stopped_run();
    edit(&state, |text| {
        text.replacen("\"format\": 1", "\"format\": 99", 1)
    });
    fails_naming(
        dir.path(),
        &RESUME,
        &["training_state.json has format 99", "reads format 1"],
    );
}

#[test]
fn an_unreachable_training_position_is_refused() {
    let (dir, state) = stopped_run();
    let original = std::fs::read_to_string(&state).unwrap();
    edit(&state, |text| {
        text.replacen("\"step\": 1,", "\"step\": 1000000000,", 1)
    });
    fails_naming(
        dir.path(),
        &RESUME,
        &[
            "inconsistent with the run's data",
            "step 1000000000 cannot be reached",
        ],
    );
    std::fs::write(&state, &original).unwrap();
    edit(&state, |text| {
        text.replacen("\"steps_in_epoch\": 1,", "\"steps_in_epoch\": 7,", 1)
    });
    fails_naming(dir.path(), &RESUME, &["steps_in_epoch is 7"]);
    for (field, bad, named) in [
        ("\"elapsed_s\": ", "-1.0", "elapsed_s is -1"),
        ("\"elapsed_s\": ", "1e300", "elapsed_s is 1"),
        ("\"epoch\": ", "1000000000000", "epoch is 1000000000000"),
        ("\"adam_steps\": ", "0", "adam_steps is 0"),
    ] {
        let at = original.find(field).unwrap() + field.len();
        let end = at + original[at..].find([',', '\n']).unwrap();
        let edited = format!("{}{bad}{}", &original[..at], &original[end..]);
        std::fs::write(&state, edited).unwrap();
        fails_naming(dir.path(), &RESUME, &["inconsistent", named]);
    }
    std::fs::write(&state, &original).unwrap();
    succeeded(transformer().current_dir(dir.path()).args(RESUME));
}

#[test]
fn finite_weights_that_overflow_are_an_error_not_an_empty_translation() {
    let dir = small_checkpoint();
    let path = dir.path().join("run/last/model.safetensors");
    let mut tensors = candle_core::safetensors::load(&path, &Device::Cpu).unwrap();
    let mut gain = tensors["decoder.norm.a_2"].to_vec1::<f32>().unwrap();
    gain[3] = 3e38;
    tensors.insert(
        "decoder.norm.a_2".into(),
        Tensor::new(gain, &Device::Cpu).unwrap(),
    );
    candle_core::safetensors::save(&tensors, &path).unwrap();
    for beam in ["1", "3"] {
        let mut args = TRANSLATE.to_vec();
        args.extend(["--beam", beam]);
        fails_naming(dir.path(), &args, &["not a number", "weights are damaged"]);
    }
}

#[test]
fn a_weight_changed_in_place_is_refused_by_the_checksum_it_was_written_with() {
    let dir = small_checkpoint();
    let path = dir.path().join("run/last/model.safetensors");
    let mut bytes = std::fs::read(&path).unwrap();
    let header = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
    let entries: serde_json::Value = serde_json::from_slice(&bytes[8..8 + header]).unwrap();
    assert!(entries["__metadata__"]["transformer_checksum"]
        .as_str()
        .unwrap()
        .starts_with("xxh3:"));
    // A finite bias of 3e38, in place: every check of values passes, and it translated
    // nonsense (or failed at decoding naming no tensor).
    let at = 8
        + header
        + entries["generator.proj.bias"]["data_offsets"][0]
            .as_u64()
            .unwrap() as usize;
    bytes[at..at + 4].copy_from_slice(&3e38f32.to_le_bytes());
    std::fs::write(&path, bytes).unwrap();
    fails_naming(
        dir.path(),
        &TRANSLATE,
        &[
            "run/last/model.safetensors",
            "its tensors do not match the checksum they were written with",
            "remove transformer_checksum from its __metadata__",
        ],
    );
}

/// A renamed tensor is both missing and left over: the error names the two, and every other
/// tensor the file lacks.
#[test]
fn renamed_and_removed_tensors_are_all_named_both_ways() {
    let dir = small_checkpoint();
    let path = dir.path().join("run/last/model.safetensors");
    let mut tensors = candle_core::safetensors::load(&path, &Device::Cpu).unwrap();
    let gain = tensors.remove("encoder.norm.a_2").unwrap();
    tensors.insert("encoder.norm.weight".into(), gain);
    tensors.remove("generator.proj.bias").unwrap();
    candle_core::safetensors::save(&tensors, &path).unwrap();
    fails_naming(
        dir.path(),
        &TRANSLATE,
        &[
            "does not match its config and tokenizers",
            "missing: encoder.norm.a_2, generator.proj.bias",
            "not in the model: encoder.norm.weight",
        ],
    );
}

#[test]
fn resume_files_that_are_not_files_are_named_and_never_waited_on() {
    let (dir, state) = stopped_run();
    // A FIFO used to block the read for ever; a link to /dev/zero, to read without end.
    replaced_by_fifo(&state);
    fails_naming(
        dir.path(),
        &RESUME,
        &["training_state.json is a pipe or device, not a regular file"],
    );
    replaced_by_link_to_dev_zero(&state);
    fails_naming(
        dir.path(),
        &RESUME,
        &["training_state.json is a pipe or device"],
    );
    let (dir, _) = stopped_run();
    let last_optimizer = dir.path().join("run/last/optimizer.safetensors");
    replaced_by_fifo(&last_optimizer);
    fails_naming(
        dir.path(),
        &RESUME,
        &["optimizer.safetensors is a pipe or device, not a regular file"],
    );
}
