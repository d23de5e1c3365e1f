//! SentencePiece in pure Rust against MarianTokenizer (transformers, with the sentencepiece
//! library): the pieces of `source.spm` / `target.spm` mapped through the checkpoint's
//! vocabularies must give the ids scripts/make_marian_fixture.py recorded, on Multi30k val and
//! test2016 lines and their references, for every fixture (the nmt_nfkc character map and the
//! identity normalizer, shared and separate vocabularies).

use std::collections::HashMap;
use std::path::Path;

use serde_json::Value;
use transformer::data::sentencepiece::SentencePiece;

const FIXTURES: [&str; 3] = [
    "tests/fixtures/marian-shared",
    "tests/fixtures/marian-separate",
    "tests/fixtures/marian-gelu",
];

fn json(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// MarianTokenizer's ids: each piece through the vocabulary (`<unk>` for a piece it lacks),
/// then `</s>`.
fn ids(spm: &SentencePiece, vocab: &HashMap<String, u32>, text: &str) -> Vec<u32> {
    let unk = vocab["<unk>"];
    let mut ids: Vec<u32> = spm
        .pieces(text)
        .unwrap()
        .iter()
        .map(|piece| vocab.get(piece).copied().unwrap_or(unk))
        .collect();
    ids.push(vocab["</s>"]);
    ids
}

#[test]
fn pieces_through_the_vocabulary_give_marian_tokenizers_ids() {
    for fixture in FIXTURES {
        let dir = Path::new(fixture);
        let expected = json(&dir.join("expected.json"));
        let source_vocab: HashMap<String, u32> =
            serde_json::from_value(json(&dir.join("vocab.json"))).unwrap();
        let target_vocab: HashMap<String, u32> = match dir.join("target_vocab.json") {
            path if path.is_file() => serde_json::from_value(json(&path)).unwrap(),
            _ => source_vocab.clone(),
        };
        let source = SentencePiece::load(&dir.join("source.spm")).unwrap();
        let target = SentencePiece::load(&dir.join("target.spm")).unwrap();
        let tokenized = &expected["tokenized"];
        for (side, spm, vocab) in [
            ("source", &source, &source_vocab),
            ("target", &target, &target_vocab),
        ] {
            let texts = tokenized[format!("{side}s")].as_array().unwrap();
            let want = tokenized[format!("{side}_ids")].as_array().unwrap();
            assert_eq!(texts.len(), 85);
            for (text, want) in texts.iter().zip(want) {
                let text = text.as_str().unwrap();
                let want: Vec<u32> = serde_json::from_value(want.clone()).unwrap();
                assert_eq!(ids(spm, vocab, text), want, "{fixture} {side}: {text:?}");
            }
        }
    }
}
