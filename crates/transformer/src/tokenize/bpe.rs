//! BPE subwords with Hugging Face `tokenizers`: learned from word counts gathered in our own
//! parallel pass, saved as `tokenizer.json`, and encoding with a per-word cache, long words in
//! pieces.

use anyhow::anyhow;
use tokenizers::models::bpe::{BpeTrainerBuilder, BPE};
use tokenizers::pre_tokenizers::metaspace::{Metaspace, PrependScheme};
use tokenizers::{AddedToken, Tokenizer};

use crate::config::DataConfig;
use crate::tokenize::long_words;
use crate::tokenize::specials::{BOS, EOS, PAD, UNK, UNK_ID};
use crate::tokenize::vocab::Encoded;

/// The pre-tokenizer of our BPE: SentencePiece-style words, `▁` marking a word start.
pub(super) fn metaspace() -> Metaspace {
    Metaspace::new('▁', PrependScheme::Always, true)
}

/// Byte-pair encoding over SentencePiece-style words (`▁` marks a word start), with our four
/// specials first so that they get ids 0-3.
pub(super) fn learn_bpe<'a>(
    texts: impl Iterator<Item = &'a str> + Send,
    cfg: &DataConfig,
) -> anyhow::Result<Tokenizer> {
    let mut counts = BpeWordCounts::default();
    texts.for_each(|text| counts.add(text));
    learn_bpe_from_counts(&counts, cfg)
}

/// How often each pre-tokenized word occurs in a text: what the BPE trainer learns merges
/// from. Counted per block of a corpus on every core, then added up.
#[derive(Default)]
pub struct BpeWordCounts(ahash::AHashMap<compact_str::CompactString, u64>);

impl BpeWordCounts {
    /// Counts the words of one (normalised) sentence, split as the pre-tokenizer splits it:
    /// `▁` + each space-separated word; a sentence holding `▁` itself goes through the
    /// pre-tokenizer.
    pub fn add(&mut self, text: &str) {
        if text.is_empty() {
            return;
        }
        if text.contains('▁') {
            let mut split = tokenizers::PreTokenizedString::from(text);
            if tokenizers::PreTokenizer::pre_tokenize(&metaspace(), &mut split).is_ok() {
                for (word, _, _) in split.get_splits(
                    tokenizers::OffsetReferential::Original,
                    tokenizers::OffsetType::Byte,
                ) {
                    for part in long_words::pieces(word) {
                        *self.0.entry(part.into()).or_default() += 1;
                    }
                }
            }
            return;
        }
        let mut word = compact_str::CompactString::default();
        for piece in text.split(' ') {
            if long_words::is_long(piece) {
                long_words::note_cut(piece);
                for (i, part) in long_words::pieces(piece).enumerate() {
                    word.clear();
                    if i == 0 {
                        word.push('▁');
                    }
                    word.push_str(part);
                    self.count(&word);
                }
                continue;
            }
            word.clear();
            word.push('▁');
            word.push_str(piece);
            self.count(&word);
        }
    }

    fn count(&mut self, word: &compact_str::CompactString) {
        match self.0.get_mut(word) {
            Some(count) => *count += 1,
            None => {
                self.0.insert(word.clone(), 1);
            }
        }
    }

    /// Adds another block's counts.
    pub fn merge(&mut self, other: Self) {
        if self.0.len() < other.0.len() {
            let mine = std::mem::replace(&mut self.0, other.0);
            return self.merge(Self(mine));
        }
        for (word, count) in other.0 {
            *self.0.entry(word).or_default() += count;
        }
    }
}

/// A BPE tokenizer learned from word counts, exactly as `Tokenizer::train` learns it from the
/// text those counts came from.
pub fn learn_bpe_from_counts(
    counts: &BpeWordCounts,
    cfg: &DataConfig,
) -> anyhow::Result<Tokenizer> {
    let specials = [PAD, BOS, EOS, UNK]
        .map(|s| AddedToken::from(s, true))
        .to_vec();
    let mut model = BPE::builder()
        .unk_token(UNK.into())
        .build()
        .map_err(|e| anyhow!("cannot build a BPE model: {e}"))?;
    let trainer = BpeTrainerBuilder::new()
        .vocab_size(cfg.vocab_size)
        .min_frequency(cfg.min_freq as u64)
        .special_tokens(specials)
        .show_progress(false)
        .build();
    let added = trainer
        .do_train(&counts.0, &mut model)
        .map_err(|e| anyhow!("cannot learn BPE merges: {e}"))?;
    let mut tokenizer = Tokenizer::new(model);
    tokenizer.with_pre_tokenizer(Some(metaspace()));
    tokenizer.with_decoder(Some(metaspace()));
    tokenizer
        .add_special_tokens(added)
        .map_err(|e| anyhow!("cannot add the special tokens: {e}"))?;
    Ok(tokenizer)
}

/// Words already split into BPE ids, kept per worker thread while a corpus is encoded: a
/// corpus repeats its words millions of times, tokenizers' own cache holds 10,000.
#[derive(Default)]
pub struct WordIdsCache(pub(super) ahash::AHashMap<String, Vec<u32>>);

/// Words the cache holds before it starts over (a few hundred megabytes at most).
pub(super) const WORD_CACHE_WORDS: usize = 1 << 20;

/// A sentence holding a word too long to segment whole (see [`long_words`]), word by word,
/// the long ones in pieces: the ids `TextTokenizer::encode` gives, and the pieces that
/// became `<unk>`.
pub(super) fn encode_in_pieces(tokenizer: &Tokenizer, text: &str) -> anyhow::Result<Encoded> {
    let mut encoded = Encoded {
        ids: Vec::new(),
        unknown: Vec::new(),
    };
    for word in text.split(' ') {
        if long_words::is_long(word) {
            long_words::note_cut(word);
        }
        let tokens = word_in_pieces(tokenizer, word)?;
        for token in tokens {
            if token.id == UNK_ID {
                encoded.unknown.push(token.value);
            }
            encoded.ids.push(token.id);
        }
    }
    Ok(encoded)
}

/// The BPE tokens of one word, segmented in pieces of at most [`long_words::MAX_WORD_CHARS`]
/// characters: `▁` starts the first, the others continue it. An unknown token's `value` is
/// the text it stands for.
pub(super) fn word_in_pieces(
    tokenizer: &Tokenizer,
    word: &str,
) -> anyhow::Result<Vec<tokenizers::Token>> {
    let mut tokens = Vec::new();
    for (i, piece) in long_words::pieces(word).enumerate() {
        let text = if i == 0 {
            format!("▁{piece}")
        } else {
            piece.to_string()
        };
        let mut piece_tokens = tokenizers::Model::tokenize(tokenizer.get_model(), &text)
            .map_err(|e| anyhow!("cannot tokenize {piece:?}: {e}"))?;
        for token in &mut piece_tokens {
            if token.id == UNK_ID {
                token.value = text
                    .get(token.offsets.0..token.offsets.1)
                    .unwrap_or("?")
                    .to_string();
            }
        }
        tokens.extend(piece_tokens);
    }
    Ok(tokens)
}

pub(super) fn bpe_json(tokenizer: &Tokenizer) -> anyhow::Result<String> {
    tokenizer
        .to_string(true)
        .map_err(|e| anyhow!("cannot serialise the tokenizer: {e}"))
}
