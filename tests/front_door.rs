//! The one front door for inference (`transformer::infer::Translator`): what a Rust user of
//! the library gets is what every command gets.

mod common;

use std::path::{Path, PathBuf};

use candle_core::Device;
use common::{succeeded, transformer, translated_ids, FLAGS};
use transformer::infer::settings::{self, DecodeRequest};
use transformer::infer::{LoadOptions, Translator};

const FIXTURE: &str = "tests/fixtures/parity";
const SOURCES: [&str; 3] = ["ich mochte ein bier", "ich mochte ein cola", "ein bier"];

fn opened() -> Translator {
    Translator::open(Path::new(FIXTURE), &Device::Cpu, LoadOptions::default()).unwrap()
}

#[test]
fn the_library_translates_a_batch_as_the_command_line_translates_each_sentence() {
    let translator = opened();
    let options = translator.default_settings().unwrap();
    let translations = translator.translate(&SOURCES, &options).unwrap();
    assert_eq!(translations.len(), SOURCES.len());
    let sources: Vec<String> = SOURCES.iter().map(|s| s.to_string()).collect();
    let command_line = translated_ids(Path::new(FIXTURE), &sources, &["--device", "cpu"]);
    for ((source, translation), ids) in SOURCES.iter().zip(&translations).zip(&command_line) {
        assert_eq!(translation.source, *source);
        assert_eq!(&translation.ids, ids, "{source:?}");
        assert!(!translation.translation.is_empty(), "{source:?}");
    }
}

/// The README's example (examples/translate.rs), built by `cargo test` beside the binary.
fn example_binary() -> PathBuf {
    let binary = Path::new(env!("CARGO_BIN_EXE_transformer"));
    binary.parent().unwrap().join("examples").join("translate")
}

#[test]
fn the_readmes_rust_example_prints_what_the_command_line_prints() {
    let example = example_binary();
    assert!(
        example.is_file(),
        "{} was not built: a whole `cargo test --release` builds the examples (a single \
         --test does not; then run `cargo build --release --example translate` first)",
        example.display()
    );
    for source in SOURCES {
        let ours = std::process::Command::new(&example)
            .args([FIXTURE, source])
            .output()
            .unwrap();
        assert!(
            ours.status.success(),
            "{}",
            String::from_utf8_lossy(&ours.stderr)
        );
        let theirs = succeeded(
            transformer()
                .args(["translate", "--device", "cpu", "--checkpoint", FIXTURE])
                .arg(source),
        );
        assert_eq!(
            String::from_utf8(ours.stdout).unwrap(),
            String::from_utf8(theirs.stdout).unwrap(),
            "{source:?}"
        );
    }
}

#[test]
fn a_language_model_is_refused_at_the_front_door_by_name() {
    let error = Translator::open(
        Path::new("tests/fixtures/parity-lm"),
        &Device::Cpu,
        LoadOptions::default(),
    )
    .err()
    .expect("a decoder-only model cannot translate");
    let message = format!("{error:#}");
    assert!(message.contains("decoder-only"), "{message}");
    assert!(message.contains("parity-lm"), "{message}");
}

#[test]
fn a_setting_out_of_bounds_is_refused_naming_where_it_was_asked() {
    let translator = opened();
    let vocab = translator.checkpoint().tokenizers.tgt.vocab_size();
    let asked = DecodeRequest {
        beam: Some(vocab + 1),
        ..DecodeRequest::by(FLAGS)
    };
    let refused = translator
        .decode_settings(Some(asked), None)
        .expect_err("a beam wider than the vocabulary is refused");
    assert!(!refused.in_config, "the flag asked for it, not the file");
    assert!(refused.message.contains("--beam"), "{}", refused.message);
    // A door's own widest beam bounds it too.
    let asked = DecodeRequest {
        beam: Some(3),
        ..DecodeRequest::by(settings::FIELDS)
    };
    let refused = translator
        .decode_settings(Some(asked), Some(2))
        .expect_err("a beam wider than the door's is refused");
    assert!(refused.message.contains("beam"), "{}", refused.message);
}

#[test]
fn int8_is_asked_for_at_the_door_and_the_model_computes_in_it() {
    let translator = Translator::open(
        Path::new(FIXTURE),
        &Device::Cpu,
        LoadOptions {
            compute_type: Some(transformer::config::ComputeType::Int8),
            ..LoadOptions::default()
        },
    )
    .unwrap();
    let compute = translator.checkpoint().config.decode.compute_type;
    if transformer::device::multiplies_int8(&Device::Cpu) {
        assert_eq!(compute, transformer::config::ComputeType::Int8);
    } else {
        assert!(translator.notes().iter().any(|n| n.contains("float32")));
    }
    let options = translator.default_settings().unwrap();
    let translations = translator.translate(&SOURCES, &options).unwrap();
    assert!(translations.iter().all(|t| !t.ids.is_empty()));
}

/// A text of several sentences is cut as the command line cuts it: nothing is left out, and
/// the translation is its sentences' translations put back together, tokens one after
/// another.
#[test]
fn the_library_cuts_a_text_into_sentences_as_the_command_line_does() {
    let translator = opened();
    let options = translator.default_settings().unwrap();
    let paragraph = "ich mochte ein bier . ich mochte ein cola .\nein bier";
    let whole = translator.translate(&[paragraph], &options).unwrap();
    assert_eq!(whole.len(), 1);
    let pieces = ["ich mochte ein bier .", "ich mochte ein cola .", "ein bier"];
    let alone = translator.translate_sentences(&pieces, &options).unwrap();
    assert_eq!(
        whole[0].translation,
        format!(
            "{} {}\n{}",
            alone[0].translation, alone[1].translation, alone[2].translation
        )
    );
    let ids: Vec<u32> = alone.iter().flat_map(|t| t.ids.clone()).collect();
    assert_eq!(whole[0].ids, ids);
    assert_eq!(whole[0].source, paragraph);
    let command_line = succeeded(
        transformer()
            .args(["translate", "--device", "cpu", "--checkpoint", FIXTURE])
            .arg(paragraph.replace('\n', " ")),
    );
    assert_eq!(
        String::from_utf8_lossy(&command_line.stdout).trim_end(),
        whole[0].translation.replace('\n', " ")
    );
    // An empty text and one with nothing to translate come back as they are.
    let odd = translator.translate(&["", "42"], &options).unwrap();
    assert_eq!(odd[0].translation, "");
    assert_eq!(odd[1].translation, "42");
}
