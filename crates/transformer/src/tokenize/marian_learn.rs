//! A MarianMT tokenizer learned from the training pairs (`data.tokenizer = "marian"` without
//! `training.init_from`), laid out as OPUS-MT's are so that every Marian tool reads it: a
//! SentencePiece unigram model per side (`source.spm` from the sources, `target.spm` from the
//! targets, `data.vocab_size` pieces each), and `vocab.json` in OPUS-MT's order (`</s>` 0,
//! `<unk>` 1, the pieces, `<pad>` last): one vocabulary of both models' pieces with
//! `data.joint_vocab`, otherwise one per side (`target_vocab.json`), the shorter filled with
//! unused entries so that `<pad>`, where the decoder starts, has one id on both sides.

use crate::tokenize::marian::{
    MarianTokenizer, SOURCE_SPM, TARGET_SPM, TARGET_VOCAB_FILE, VOCAB_FILE,
};
use crate::tokenize::sentencepiece::SentencePiece;
use crate::tokenize::sentencepiece_learn::learn_unigram;

/// Learns the tokenizer from `sources` and `targets`.
pub fn learn_marian<'a>(
    sources: impl Iterator<Item = &'a str> + Send,
    targets: impl Iterator<Item = &'a str> + Send,
    vocab_size: usize,
    joint: bool,
) -> anyhow::Result<MarianTokenizer> {
    let source_spm = learn_side(sources, vocab_size, "source")?;
    let target_spm = learn_side(targets, vocab_size, "target")?;
    let source_pieces = pieces_of(&source_spm)?;
    let target_pieces = pieces_of(&target_spm)?;
    let mut files = vec![(SOURCE_SPM, source_spm), (TARGET_SPM, target_spm)];
    if joint {
        let vocab = marian_vocabulary(&[&source_pieces, &target_pieces]);
        files.push((VOCAB_FILE, vocab_json(&with_pad(vocab, 0))));
    } else {
        let source = marian_vocabulary(&[&source_pieces]);
        let target = marian_vocabulary(&[&target_pieces]);
        let size = source.len().max(target.len()) + 1;
        files.push((VOCAB_FILE, vocab_json(&with_pad(source, size))));
        files.push((TARGET_VOCAB_FILE, vocab_json(&with_pad(target, size))));
    }
    MarianTokenizer::from_files(files, &|name| format!("the learned {name}"))
}

/// One side's `.spm` file; an error names the key that decides its size.
fn learn_side<'a>(
    texts: impl Iterator<Item = &'a str> + Send,
    vocab_size: usize,
    which: &str,
) -> anyhow::Result<Vec<u8>> {
    learn_unigram(texts, vocab_size).map_err(|e| {
        anyhow::anyhow!(
            "cannot learn the {which} side's SentencePiece model of data.vocab_size = \
             {vocab_size} pieces: {e}; raise data.vocab_size"
        )
    })
}

/// A `.spm` file's pieces, in id order.
fn pieces_of(spm: &[u8]) -> anyhow::Result<Vec<String>> {
    let model = SentencePiece::from_bytes(spm)?;
    Ok(model
        .vocabulary()
        .iter()
        .map(|(piece, _, _)| piece.clone())
        .collect())
}

/// `</s>`, `<unk>`, then each model's pieces once, in order (`<pad>` not yet).
fn marian_vocabulary(models: &[&[String]]) -> Vec<String> {
    let mut vocab: Vec<String> = vec!["</s>".into(), "<unk>".into()];
    let mut seen: std::collections::HashSet<String> = vocab.iter().cloned().collect();
    for piece in models.iter().flat_map(|pieces| pieces.iter()) {
        if seen.insert(piece.clone()) {
            vocab.push(piece.clone());
        }
    }
    vocab
}

/// `vocab` filled with unused entries to `size - 1` pieces (none when it has that many), then
/// `<pad>` last: `size` entries, or one more than `vocab` had.
fn with_pad(mut vocab: Vec<String>, size: usize) -> Vec<String> {
    while vocab.len() + 1 < size {
        vocab.push(format!("<unused{}>", vocab.len()));
    }
    vocab.push("<pad>".into());
    vocab
}

/// `{"piece": id, ...}` in id order, one entry a line, as OPUS-MT's files are.
fn vocab_json(pieces: &[String]) -> Vec<u8> {
    let entries: Vec<String> = pieces
        .iter()
        .enumerate()
        .map(|(id, piece)| format!("  {}: {id}", serde_json::Value::from(piece.as_str())))
        .collect();
    format!("{{\n{}\n}}\n", entries.join(",\n")).into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    const SOURCES: [&str; 3] = [
        "Zwei Männer stehen am Herd.",
        "Ein Mann steht auf einer Leiter.",
        "Zwei Hunde spielen im Schnee.",
    ];
    const TARGETS: [&str; 3] = [
        "Two men are standing at the stove.",
        "A man is standing on a ladder.",
        "Two dogs play in the snow.",
    ];

    #[test]
    fn joint_and_separate_vocabularies_put_pad_last_on_one_id() {
        for joint in [true, false] {
            let tokenizer =
                learn_marian(SOURCES.iter().copied(), TARGETS.iter().copied(), 50, joint).unwrap();
            assert_eq!((tokenizer.eos, tokenizer.unk), (0, 1));
            assert_eq!(tokenizer.pad as usize, tokenizer.source_vocab_size() - 1);
            assert_eq!(tokenizer.pad as usize, tokenizer.target_vocab_size() - 1);
            assert_eq!(tokenizer.shared_vocabulary(), joint);
            let encoded = tokenizer.encode_target(TARGETS[2]).unwrap();
            assert!(encoded.unknown.is_empty());
            assert_eq!(tokenizer.decode(&encoded.ids), TARGETS[2]);
            let encoded = tokenizer.encode_source(SOURCES[0]).unwrap();
            assert!(encoded.unknown.is_empty());
            assert_eq!(*encoded.ids.last().unwrap(), tokenizer.eos);
        }
    }

    #[test]
    fn a_vocabulary_too_small_for_the_characters_names_the_key() {
        let error = learn_marian(SOURCES.iter().copied(), TARGETS.iter().copied(), 8, true)
            .err()
            .unwrap();
        assert!(error.to_string().contains("data.vocab_size = 8"), "{error}");
    }
}
