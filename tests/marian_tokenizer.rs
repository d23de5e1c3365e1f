//! SentencePiece in pure Rust against MarianTokenizer (transformers, with the sentencepiece
//! library), on every fixture scripts/make_marian_fixture.py wrote (the nmt_nfkc character
//! map and the identity normalizer, shared and separate vocabularies): source and target ids
//! of Multi30k val and test2016 lines, their references and a few odd lines; and the text of
//! what `generate()` produced, decoded back from its ids.

mod common;

use std::path::Path;

use common::{marian_expected, MARIAN_FIXTURES};
use serde_json::Value;
use transformer::tokenize::marian::MarianTokenizer;

fn ids(value: &Value) -> Vec<u32> {
    serde_json::from_value(value.clone()).unwrap()
}

#[test]
fn sources_and_targets_get_marian_tokenizers_ids() {
    for fixture in MARIAN_FIXTURES {
        let dir = Path::new(fixture);
        let tokenizer = MarianTokenizer::load(dir).unwrap();
        let tokenized = &marian_expected(dir)["tokenized"];
        for side in ["source", "target"] {
            let texts = tokenized[format!("{side}s")].as_array().unwrap();
            let want = tokenized[format!("{side}_ids")].as_array().unwrap();
            assert_eq!(texts.len(), 85);
            for (text, want) in texts.iter().zip(want) {
                let text = text.as_str().unwrap();
                let got = match side {
                    "source" => tokenizer.encode_source(text),
                    _ => tokenizer.encode_target(text),
                }
                .unwrap();
                assert_eq!(got.ids, ids(want), "{fixture} {side}: {text:?}");
            }
        }
    }
}

#[test]
fn generated_ids_decode_to_marian_tokenizers_text() {
    for fixture in MARIAN_FIXTURES {
        let dir = Path::new(fixture);
        let tokenizer = MarianTokenizer::load(dir).unwrap();
        let generated = &marian_expected(dir)["generate"];
        for search in ["greedy", "beam"] {
            let outputs = generated[search]["ids"].as_array().unwrap();
            let texts = generated[search]["text"].as_array().unwrap();
            for (output, text) in outputs.iter().zip(texts) {
                assert_eq!(
                    tokenizer.decode(&ids(output)),
                    text.as_str().unwrap(),
                    "{fixture} {search}"
                );
            }
        }
        // The source ids of the batch generate() read, unpadded, are the tokenizer's.
        for (source, padded) in generated["sources"]
            .as_array()
            .unwrap()
            .iter()
            .zip(generated["input_ids"].as_array().unwrap())
        {
            let mut want = ids(padded);
            want.retain(|&id| id != tokenizer.pad);
            let got = tokenizer.encode_source(source.as_str().unwrap()).unwrap();
            assert_eq!(got.ids, want, "{fixture}");
        }
    }
}

#[test]
fn a_missing_file_or_a_vocabulary_without_its_specials_is_named() {
    let dir = tempfile::tempdir().unwrap();
    for name in ["source.spm", "target.spm", "vocab.json"] {
        std::fs::copy(
            Path::new(MARIAN_FIXTURES[0]).join(name),
            dir.path().join(name),
        )
        .unwrap();
    }
    std::fs::remove_file(dir.path().join("target.spm")).unwrap();
    let error = MarianTokenizer::load(dir.path()).err().unwrap();
    assert!(format!("{error:#}").contains("target.spm"), "{error:#}");
    std::fs::copy(
        Path::new(MARIAN_FIXTURES[0]).join("target.spm"),
        dir.path().join("target.spm"),
    )
    .unwrap();
    std::fs::write(dir.path().join("vocab.json"), r#"{"</s>": 0, "<unk>": 1}"#).unwrap();
    let error = MarianTokenizer::load(dir.path()).err().unwrap();
    assert!(
        format!("{error:#}").contains("vocab.json has no <pad> entry"),
        "{error:#}"
    );
    std::fs::write(dir.path().join("source.spm"), b"not a model").unwrap();
    let error = MarianTokenizer::load(dir.path()).err().unwrap();
    assert!(
        format!("{error:#}").contains("source.spm is not a SentencePiece model"),
        "{error:#}"
    );
}
