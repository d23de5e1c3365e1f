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

use super::sentencepiece::{prepare_text_as, NormalizerSpec};

/// SentencePiece's `nmt_nfkc` normalisation rule as its precompiled character map (NFKC plus
/// the NMT fixes: control characters dropped, odd spaces folded), the one every OPUS-MT
/// `.spm` carries. scripts/make_nmt_nfkc_charsmap.py takes it from SentencePiece itself.
const NMT_NFKC_CHARSMAP: &[u8] = include_bytes!("../../assets/sentencepiece/nmt_nfkc.charsmap");

/// The unknown piece, id 0 of every model this writes (as `spm_train`'s `--unk_id=0`).
const UNK_PIECE: &str = "<unk>";

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
    tokenizer
        .train(&mut trainer, texts)
        .map_err(|e| anyhow!("{e}"))?;
    let ModelWrapper::Unigram(model) = tokenizer.get_model() else {
        unreachable!("the tokenizer was built on a unigram model")
    };
    let pieces: Vec<(String, f64)> = model.iter().cloned().collect();
    Ok(model_proto(&pieces, &spec, vocab_size))
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
        assert!(error.to_string().contains("vocab"), "{error}");
    }
}
