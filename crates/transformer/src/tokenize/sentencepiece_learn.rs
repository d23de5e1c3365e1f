//! A SentencePiece unigram model learned from a corpus and written as the `.spm` file that
//! SentencePiece itself reads (and so transformers' MarianTokenizer and CTranslate2): the
//! tokenizers crate's `UnigramTrainer` (a port of SentencePiece's EM trainer) learns the
//! pieces over text read as the model will read it (SentencePiece's nmt_nfkc character map,
//! OPUS-MT's, then its whitespace rules), and a small protobuf writer lays out the
//! `ModelProto` as `spm_train` would for `--model_type=unigram --bos_id=-1 --eos_id=-1`:
//! `<unk>` first, then the pieces with their scores.

use anyhow::anyhow;
use tokenizers::models::unigram::{Unigram, UnigramTrainerBuilder};
use tokenizers::models::{ModelWrapper, TrainerWrapper};
use tokenizers::{AddedToken, Tokenizer};

use crate::tokenize::sentencepiece::{prepare_text_as, NormalizerSpec};

/// SentencePiece's `nmt_nfkc` normalisation rule as its precompiled character map (NFKC plus
/// the NMT fixes: control characters dropped, odd spaces folded), the one every OPUS-MT
/// `.spm` carries. scripts/make_nmt_nfkc_charsmap.py takes it from SentencePiece itself.
const NMT_NFKC_CHARSMAP: &[u8] = include_bytes!("../../assets/sentencepiece/nmt_nfkc.charsmap");

/// The unknown piece, id 0 of every model this writes (as `spm_train`'s `--unk_id=0`).
const UNK_PIECE: &str = "<unk>";

/// Sentences longer than this (in bytes) are left out of learning, as SentencePiece's trainer
/// leaves them out (`--max_sentence_length`): the seed pieces come from a suffix array of each
/// sentence, whose cost grows faster than its length (a 300,000-character line overflowed the
/// stack).
pub const MAX_SENTENCE_BYTES: usize = 4192;

/// Pieces SentencePiece reserves and a Marian vocabulary gives its own ids: one learned from a
/// corpus that holds the text `<pad>` would take a second id, or end a sentence (`</s>`).
const RESERVED: [&str; 4] = [UNK_PIECE, "<s>", "</s>", "<pad>"];

/// `SentencePiece.Type` values.
const NORMAL: u64 = 1;
const UNKNOWN: u64 = 2;
/// `TrainerSpec.ModelType.UNIGRAM`.
const UNIGRAM: u64 = 1;

/// Learns a unigram model of `vocab_size` pieces (`<unk>` included) from `texts` and returns
/// its `.spm` file.
pub fn learn_unigram<'a>(
    texts: impl Iterator<Item = &'a str> + Send,
    vocab_size: usize,
) -> anyhow::Result<Vec<u8>> {
    let spec = nmt_nfkc();
    let mut tokenizer = Tokenizer::new(Unigram::default());
    prepare_text_as(&spec, &mut tokenizer)?;
    let vocab_size = u32::try_from(vocab_size).map_err(|_| anyhow!("{vocab_size} is too many"))?;
    let mut trainer: TrainerWrapper = UnigramTrainerBuilder::default()
        .vocab_size(vocab_size)
        .unk_token(Some(UNK_PIECE.into()))
        .special_tokens(vec![AddedToken::from(UNK_PIECE, true)])
        .show_progress(false)
        .build()
        .map_err(|e| anyhow!("{e}"))?
        .into();
    let texts = texts.filter(|text| text.len() <= MAX_SENTENCE_BYTES);
    tokenizer.train(&mut trainer, texts).map_err(|e| {
        let e = e.to_string();
        if e.contains("not large enough") {
            anyhow!("there are more distinct characters than that, and each needs a piece")
        } else {
            anyhow!("{e}")
        }
    })?;
    let ModelWrapper::Unigram(model) = tokenizer.get_model() else {
        unreachable!("the tokenizer was built on a unigram model")
    };
    let pieces = canonical(model.iter().cloned().collect());
    Ok(model_proto(&pieces, &spec, vocab_size))
}

/// The trainer's pieces as a file that depends on nothing but the corpus: `<unk>` first,
/// reserved strings learned as pieces dropped, then by score (best first) and text. The
/// trainer gives characters the model did not keep scores just above its lowest, in the order
/// of a hash set that changes from run to run: those scores are given again in character order.
fn canonical(pieces: Vec<(String, f64)>) -> Vec<(String, f64)> {
    let mut learned: Vec<(String, f64)> = pieces
        .into_iter()
        .filter(|(piece, _)| !RESERVED.contains(&piece.as_str()))
        .collect();
    // The trainer scores the k-th character it adds (the first one the lowest) at exactly
    // k steps above the lowest score.
    const STEP: f64 = 0.0001;
    let lowest = learned
        .iter()
        .map(|(_, s)| *s)
        .fold(f64::INFINITY, f64::min);
    let characters = learned
        .iter()
        .filter(|(p, _)| p.chars().count() == 1)
        .count();
    let is_added = |score: f64| {
        let k = (score - lowest) / STEP;
        (k.round() - k).abs() < 1e-6 && k.round() < characters as f64
    };
    let mut added: Vec<&mut (String, f64)> = learned
        .iter_mut()
        .filter(|(piece, score)| piece.chars().count() == 1 && is_added(*score))
        .collect();
    added.sort_by(|a, b| a.0.cmp(&b.0));
    for (i, entry) in added.into_iter().enumerate() {
        entry.1 = lowest + STEP * i as f64;
    }
    // EM's sums run in an order that changes from run to run, moving scores in their last
    // bits: rounded to a millionth (far finer than the trainer's 1e-4 steps), ties are ties.
    for (_, score) in &mut learned {
        *score = (*score * 1e6).round() / 1e6;
    }
    learned.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    std::iter::once((UNK_PIECE.to_string(), 0.0))
        .chain(learned)
        .collect()
}

/// nmt_nfkc's normaliser spec, with SentencePiece's defaults for the rest.
fn nmt_nfkc() -> NormalizerSpec {
    NormalizerSpec {
        charsmap: NMT_NFKC_CHARSMAP.to_vec(),
        add_dummy_prefix: true,
        remove_extra_whitespaces: true,
    }
}

/// `ModelProto`: the pieces (field 1), the trainer spec (2) and the normaliser spec (3).
fn model_proto(pieces: &[(String, f64)], spec: &NormalizerSpec, vocab_size: u32) -> Vec<u8> {
    let mut out = Vec::new();
    for (piece, score) in pieces {
        let mut message = Vec::new();
        put_bytes(&mut message, 1, piece.as_bytes());
        // The scores are f32 on file: both SentencePiece and this tool segment with those.
        put_key(&mut message, 2, 5);
        message.extend_from_slice(&(*score as f32).to_le_bytes());
        let kind = if piece == UNK_PIECE { UNKNOWN } else { NORMAL };
        put_varint_field(&mut message, 3, kind);
        put_bytes(&mut out, 1, &message);
    }
    let mut trainer = Vec::new();
    put_varint_field(&mut trainer, 3, UNIGRAM);
    put_varint_field(&mut trainer, 4, u64::from(vocab_size));
    put_varint_field(&mut trainer, 40, 0);
    // bos_id, eos_id and pad_id -1: a Marian vocabulary brings its own `</s>` and `<pad>`.
    for field in [41, 42, 43] {
        put_varint_field(&mut trainer, field, -1i64 as u64);
    }
    put_bytes(&mut out, 2, &trainer);
    let mut normalizer = Vec::new();
    put_bytes(&mut normalizer, 1, b"nmt_nfkc");
    put_bytes(&mut normalizer, 2, &spec.charsmap);
    put_varint_field(&mut normalizer, 3, u64::from(spec.add_dummy_prefix));
    put_varint_field(&mut normalizer, 4, u64::from(spec.remove_extra_whitespaces));
    put_varint_field(&mut normalizer, 5, 1);
    put_bytes(&mut out, 3, &normalizer);
    out
}

fn put_varint(out: &mut Vec<u8>, mut value: u64) {
    while value >= 0x80 {
        out.push((value as u8) | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

fn put_key(out: &mut Vec<u8>, field: u64, wire_type: u64) {
    put_varint(out, (field << 3) | wire_type);
}

fn put_varint_field(out: &mut Vec<u8>, field: u64, value: u64) {
    put_key(out, field, 0);
    put_varint(out, value);
}

fn put_bytes(out: &mut Vec<u8>, field: u64, bytes: &[u8]) {
    put_key(out, field, 2);
    put_varint(out, bytes.len() as u64);
    out.extend_from_slice(bytes);
}

#[cfg(test)]
mod tests {
    use super::super::sentencepiece::{PieceKind, SentencePiece};
    use super::*;

    const LINES: [&str; 4] = [
        "Zwei Männer stehen am Herd.",
        "Ein Mann steht auf einer Leiter.",
        "Zwei Hunde spielen im Schnee.",
        "Ein Hund spielt mit einem Ball im Schnee.",
    ];

    #[test]
    fn a_learned_model_reads_back_with_unk_first_and_segments_what_it_learned() {
        let bytes = learn_unigram(LINES.iter().copied(), 60).unwrap();
        let model = SentencePiece::from_bytes(&bytes).unwrap();
        let vocabulary = model.vocabulary();
        // A corpus this small has fewer pieces worth keeping than asked for.
        assert!(
            (30..=60).contains(&vocabulary.len()),
            "{}",
            vocabulary.len()
        );
        assert_eq!(vocabulary[0].0, UNK_PIECE);
        assert_eq!(vocabulary[0].2, PieceKind::Unknown);
        assert!(vocabulary[1..]
            .iter()
            .all(|(_, _, k)| *k == PieceKind::Normal));
        let pieces = model.pieces("Zwei  Hunde ").unwrap();
        assert_eq!(pieces.concat(), "▁Zwei▁Hunde");
        // nmt_nfkc folds compatibility forms as SentencePiece does: the ligature is "fi".
        assert_eq!(
            model.pieces("ﬁ").unwrap().concat(),
            model.pieces("fi").unwrap().concat()
        );
    }

    #[test]
    fn too_few_pieces_for_the_corpus_characters_is_an_error() {
        let error = learn_unigram(LINES.iter().copied(), 5).unwrap_err();
        assert!(error.to_string().contains("distinct characters"), "{error}");
    }

    #[test]
    fn learning_twice_writes_the_same_file_and_reserved_strings_are_never_pieces() {
        let mut lines: Vec<String> = LINES.iter().map(|l| l.to_string()).collect();
        lines.push("Zwei Hunde.<pad><pad></s><unk> Ein Mann<s>".into());
        lines.push("Ω ß ø æ å ð þ ł".into());
        let learn = || learn_unigram(lines.iter().map(String::as_str), 80).unwrap();
        let first = learn();
        for _ in 0..3 {
            let again = learn();
            assert!(again == first, "learning is not reproducible");
        }
        let model = SentencePiece::from_bytes(&first).unwrap();
        let pieces: Vec<&str> = model
            .vocabulary()
            .iter()
            .map(|(p, _, _)| p.as_str())
            .collect();
        assert_eq!(pieces.iter().filter(|p| **p == UNK_PIECE).count(), 1);
        for reserved in &RESERVED[1..] {
            assert!(!pieces.contains(reserved), "{reserved} learned as a piece");
        }
    }

    #[test]
    fn a_line_too_long_for_the_trainer_is_left_out() {
        let long = "x".repeat(MAX_SENTENCE_BYTES * 50);
        let lines = LINES.iter().copied().chain(std::iter::once(long.as_str()));
        let model = SentencePiece::from_bytes(&learn_unigram(lines, 60).unwrap()).unwrap();
        // Learned from the other lines alone, which have no "x".
        assert!(model.vocabulary().iter().all(|(p, _, _)| !p.contains('x')));
    }
}
