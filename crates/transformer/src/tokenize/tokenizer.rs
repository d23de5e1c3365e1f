//! Text <-> ids for each side: word vocabularies (the toy config) or BPE subwords learned with
//! Hugging Face `tokenizers` and saved as `tokenizer.json`, which Python reads too.

use std::path::Path;
use std::sync::Arc;

use anyhow::{anyhow, Context};
use tokenizers::Tokenizer;

use super::bpe::{encode_in_pieces, word_in_pieces, WordIdsCache, WORD_CACHE_WORDS};
use crate::corpus::normalize_sentence;
use crate::tokenize::long_words;
use crate::tokenize::marian::MarianTokenizer;
use crate::tokenize::multilingual::MultilingualTokenizer;
use crate::tokenize::specials::{UNK, UNK_ID};
use crate::tokenize::vocab::{tokenize, Encoded, Vocab};

pub const JOINT_TOKENIZER_FILE: &str = "tokenizer.json";
pub const SRC_TOKENIZER_FILE: &str = "tokenizer.src.json";
pub const TGT_TOKENIZER_FILE: &str = "tokenizer.tgt.json";
pub const SRC_VOCAB_FILE: &str = "vocab.src.txt";
pub const TGT_VOCAB_FILE: &str = "vocab.tgt.txt";

/// One side's tokenizer.
#[derive(Clone)]
pub enum TextTokenizer {
    Word(Vocab),
    Bpe(Box<Tokenizer>),
    /// One side of a MarianMT directory's SentencePiece tokenizer.
    Marian(MarianSide),
    /// An M2M100 / NLLB-200 directory's tokenizer, both sides' (languages are the framing's).
    Multilingual(Arc<MultilingualTokenizer>),
}

/// Which side of a Marian tokenizer a [`TextTokenizer::Marian`] is.
#[derive(Clone)]
pub struct MarianSide {
    pub tokenizer: Arc<MarianTokenizer>,
    pub target: bool,
}

impl TextTokenizer {
    /// A learned BPE tokenizer as one side's tokenizer.
    pub fn bpe(tokenizer: Tokenizer) -> Self {
        Self::Bpe(Box::new(tokenizer))
    }

    /// Text -> ids (no `<s>`/`</s>`), and the pieces that became `<unk>`. Our tokenizers
    /// read the text as training read it ([`normalize_sentence`]: NFC, one space for every
    /// run of whitespace); a MarianMT tokenizer reads it as transformers' MarianTokenizer
    /// does, its SentencePiece model normalising it its own way.
    pub fn encode(&self, text: &str) -> anyhow::Result<Encoded> {
        match self {
            Self::Word(vocab) => Ok(vocab.encode(&tokenize(&normalize_sentence(text)))),
            Self::Bpe(tokenizer) => {
                let text = &normalize_sentence(text);
                if text.split(' ').any(long_words::is_long) {
                    return encode_in_pieces(tokenizer, text);
                }
                let encoding = tokenizer
                    .encode(text.as_str(), false)
                    .map_err(|e| anyhow!("cannot tokenize {text:?}: {e}"))?;
                let ids = encoding.get_ids().to_vec();
                let unknown = ids
                    .iter()
                    .zip(encoding.get_offsets())
                    .filter(|(&id, _)| id == UNK_ID)
                    .map(|(_, &(start, end))| text.get(start..end).unwrap_or("?").to_string())
                    .collect();
                Ok(Encoded { ids, unknown })
            }
            Self::Marian(side) => {
                let tokenizer = &side.tokenizer;
                let mut encoded = if side.target {
                    tokenizer.encode_target(text)?
                } else {
                    tokenizer.encode_source(text)?
                };
                // The sentence's own ids: `</s>` is the model's framing (SpecialIds).
                encoded.ids.pop();
                Ok(Encoded {
                    ids: encoded.ids,
                    unknown: encoded.unknown,
                })
            }
            Self::Multilingual(tokenizer) => tokenizer.encode(text),
        }
    }

    /// Ids -> text, special tokens left out; subwords are joined back into words.
    pub fn decode(&self, ids: &[u32]) -> anyhow::Result<String> {
        match self {
            Self::Word(vocab) => Ok(ids
                .iter()
                // <pad>, <s> and </s> are not words; <unk> stays visible.
                .filter(|&&id| id >= UNK_ID)
                .map(|&id| vocab.token(id))
                .collect::<Vec<_>>()
                .join(" ")),
            Self::Bpe(tokenizer) => tokenizer
                .decode(ids, true)
                .map_err(|e| anyhow!("cannot decode ids {ids:?}: {e}")),
            Self::Marian(side) => Ok(side.tokenizer.decode(ids)),
            Self::Multilingual(tokenizer) => tokenizer.decode(ids),
        }
    }

    /// The token string of one id.
    pub fn token(&self, id: u32) -> String {
        match self {
            Self::Word(vocab) => vocab.token(id).to_string(),
            Self::Bpe(tokenizer) => tokenizer.id_to_token(id).unwrap_or_else(|| UNK.into()),
            Self::Marian(side) => side.tokenizer.piece(id, side.target),
            Self::Multilingual(tokenizer) => tokenizer.token(id),
        }
    }

    pub fn vocab_size(&self) -> usize {
        match self {
            Self::Word(vocab) => vocab.len(),
            Self::Bpe(tokenizer) => tokenizer.get_vocab_size(true),
            Self::Marian(side) if side.target => side.tokenizer.target_vocab_size(),
            Self::Marian(side) => side.tokenizer.source_vocab_size(),
            Self::Multilingual(tokenizer) => tokenizer.vocab_size(),
        }
    }
}

pub(super) fn marian_is_for_translation() -> anyhow::Error {
    anyhow!(
        "data.tokenizer = \"marian\" is a translation model's tokenizer (source.spm and \
         target.spm), and this corpus is a language model's text; use data.tokenizer = \"bpe\""
    )
}

impl TextTokenizer {
    /// The ids of a sentence already normalised ([`normalize_sentence`], as the corpus reader
    /// leaves it), as [`Self::encode`] gives them, faster for BPE: word by word through
    /// `cache`. A sentence the shortcut might read otherwise (holding `▁` or `<`, which could
    /// start a special token) takes the full path.
    pub fn encode_normalized(
        &self,
        text: &str,
        cache: &mut WordIdsCache,
    ) -> anyhow::Result<Vec<u32>> {
        let Self::Bpe(tokenizer) = self else {
            return Ok(self.encode(text)?.ids);
        };
        if text.is_empty() || text.contains(['▁', '<']) {
            return Ok(self.encode(text)?.ids);
        }
        let mut ids = Vec::with_capacity(text.len() / 3);
        let mut word = String::new();
        for piece in text.split(' ') {
            if long_words::is_long(piece) {
                long_words::note_cut(piece);
                ids.extend(word_in_pieces(tokenizer, piece)?.into_iter().map(|t| t.id));
                continue;
            }
            if let Some(known) = cache.0.get(piece) {
                ids.extend_from_slice(known);
                continue;
            }
            word.clear();
            word.push('▁');
            word.push_str(piece);
            let tokens = tokenizers::Model::tokenize(tokenizer.get_model(), &word)
                .map_err(|e| anyhow!("cannot tokenize {text:?}: {e}"))?;
            let word_ids: Vec<u32> = tokens.iter().map(|t| t.id).collect();
            ids.extend_from_slice(&word_ids);
            if cache.0.len() >= WORD_CACHE_WORDS {
                cache.0.clear();
            }
            cache.0.insert(piece.to_string(), word_ids);
        }
        Ok(ids)
    }
}

pub(super) fn load_bpe(path: &Path) -> anyhow::Result<TextTokenizer> {
    if !path.is_file() {
        anyhow::bail!(
            "{} is missing; the checkpoint's config.toml says data.tokenizer = \"bpe\", so the \
             checkpoint is incomplete: copy the file from the run that wrote it, or train again",
            path.display()
        );
    }
    let tokenizer = Tokenizer::from_file(path)
        .map_err(|e| anyhow!("{e}"))
        .with_context(|| format!("cannot read tokenizer {}", path.display()))?;
    Ok(TextTokenizer::Bpe(Box::new(tokenizer)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{DataConfig, TokenizerKind};
    use crate::corpus::SentencePair;
    use crate::tokenize::bpe::{bpe_json, learn_bpe, metaspace, WordIdsCache};
    use crate::tokenize::specials::{BOS, EOS, PAD};
    use crate::tokenize::Tokenizers;
    use tokenizers::models::bpe::{BpeTrainerBuilder, BPE};
    use tokenizers::AddedToken;

    fn pairs() -> Vec<SentencePair> {
        let lines = [
            (
                "Zwei Männer stehen am Herd.",
                "Two men are standing at the stove.",
            ),
            (
                "Ein Mann steht auf einer Leiter.",
                "A man is standing on a ladder.",
            ),
            (
                "Zwei Hunde spielen im Schnee.",
                "Two dogs play in the snow.",
            ),
        ];
        lines
            .iter()
            .map(|(s, t)| SentencePair {
                src: s.to_string(),
                tgt: t.to_string(),
            })
            .collect()
    }

    fn bpe_config(joint: bool) -> DataConfig {
        DataConfig {
            tokenizer: TokenizerKind::Bpe,
            vocab_size: 120,
            joint_vocab: joint,
            ..DataConfig::default()
        }
    }

    #[test]
    fn bpe_puts_the_specials_first_and_decodes_back_to_the_text() {
        let tokenizers = Tokenizers::learn(&bpe_config(true), &pairs()).unwrap();
        for (id, special) in [PAD, BOS, EOS, UNK].iter().enumerate() {
            assert_eq!(tokenizers.src.token(id as u32), *special);
        }
        let text = "Two men play in the snow.";
        let encoded = tokenizers.tgt.encode(text).unwrap();
        assert!(encoded.unknown.is_empty());
        assert_eq!(tokenizers.tgt.decode(&encoded.ids).unwrap(), text);
    }

    #[test]
    fn unseen_characters_become_unk_and_are_reported() {
        let tokenizers = Tokenizers::learn(&bpe_config(true), &pairs()).unwrap();
        let encoded = tokenizers.src.encode("Zwei Q").unwrap();
        assert!(encoded.ids.contains(&UNK_ID));
        assert_eq!(encoded.unknown, vec!["Q".to_string()]);
    }

    #[test]
    fn tokenizers_survive_their_files_joint_separate_and_word() {
        let dir = tempfile::tempdir().unwrap();
        for cfg in [bpe_config(true), bpe_config(false), DataConfig::default()] {
            let learned = Tokenizers::learn(&cfg, &pairs()).unwrap();
            let sub = dir
                .path()
                .join(format!("{:?}{}", cfg.tokenizer, cfg.joint_vocab));
            std::fs::create_dir_all(&sub).unwrap();
            for (name, text) in learned.files().unwrap() {
                std::fs::write(sub.join(name), text).unwrap();
            }
            let loaded = Tokenizers::load(&sub, &cfg).unwrap();
            let text = "Zwei Männer spielen.";
            assert_eq!(
                loaded.src.encode(text).unwrap(),
                learned.src.encode(text).unwrap()
            );
            assert_eq!(loaded.tgt.vocab_size(), learned.tgt.vocab_size());
        }
    }

    #[test]
    fn bpe_learned_from_counted_words_is_the_trainer_s_own() {
        let mut pairs = pairs();
        pairs.push(SentencePair {
            src: "ein ▁komisches Wort <s> hier".into(),
            tgt: "a ▁strange word".into(),
        });
        let cfg = bpe_config(true);
        let texts = pairs.iter().flat_map(|p| [p.src.as_str(), p.tgt.as_str()]);
        // The trainer fed the text itself, as tokenizers' `Tokenizer::train` does.
        let specials = [PAD, BOS, EOS, UNK]
            .map(|s| AddedToken::from(s, true))
            .to_vec();
        let mut reference = Tokenizer::new(BPE::builder().unk_token(UNK.into()).build().unwrap());
        reference.with_pre_tokenizer(Some(metaspace()));
        reference.with_decoder(Some(metaspace()));
        let mut trainer: tokenizers::models::TrainerWrapper = BpeTrainerBuilder::new()
            .vocab_size(cfg.vocab_size)
            .special_tokens(specials)
            .show_progress(false)
            .build()
            .into();
        reference.train(&mut trainer, texts.clone()).unwrap();
        let TextTokenizer::Bpe(ours) = TextTokenizer::bpe(learn_bpe(texts, &cfg).unwrap()) else {
            panic!("a BPE tokenizer");
        };
        assert_eq!(bpe_json(&ours).unwrap(), bpe_json(&reference).unwrap());
    }

    #[test]
    fn the_word_by_word_bpe_shortcut_gives_the_tokenizer_s_ids() {
        let tokenizers = Tokenizers::learn(&bpe_config(true), &pairs()).unwrap();
        let mut cache = WordIdsCache::default();
        for text in [
            "Zwei Männer spielen im Schnee.",
            "Zwei Männer spielen im Schnee.",
            "Q x Zwei",
            "",
            "ein <s> hier",
            "ein ▁Wort",
            "a</s>",
            "Two dogs",
        ] {
            let text = normalize_sentence(text);
            assert_eq!(
                tokenizers.src.encode_normalized(&text, &mut cache).unwrap(),
                tokenizers.src.encode(&text).unwrap().ids,
                "{text:?}"
            );
        }
    }
}
