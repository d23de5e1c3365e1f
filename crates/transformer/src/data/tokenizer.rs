//! Text <-> ids for each side: word vocabularies (the toy config) or BPE subwords learned with
//! Hugging Face `tokenizers` and saved as `tokenizer.json`, which Python reads too.

use std::path::Path;
use std::sync::Arc;

use anyhow::{anyhow, Context};
use tokenizers::models::bpe::{BpeTrainerBuilder, BPE};
use tokenizers::pre_tokenizers::metaspace::{Metaspace, PrependScheme};
use tokenizers::{AddedToken, Tokenizer};

use super::corpus::{normalize_sentence, SentencePair};
use super::long_words;
use super::marian::MarianTokenizer;
use super::marian_learn::learn_marian;
use super::specials::SpecialIds;
use super::vocab::{tokenize, Encoded, Vocab, BOS, EOS, PAD, UNK, UNK_ID};
use crate::config::{DataConfig, TokenizerKind};

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
}

/// Which side of a Marian tokenizer a [`TextTokenizer::Marian`] is.
#[derive(Clone)]
pub struct MarianSide {
    pub tokenizer: Arc<MarianTokenizer>,
    pub target: bool,
}

impl TextTokenizer {
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
        }
    }

    /// The token string of one id.
    pub fn token(&self, id: u32) -> String {
        match self {
            Self::Word(vocab) => vocab.token(id).to_string(),
            Self::Bpe(tokenizer) => tokenizer.id_to_token(id).unwrap_or_else(|| UNK.into()),
            Self::Marian(side) => side.tokenizer.piece(id, side.target),
        }
    }

    pub fn vocab_size(&self) -> usize {
        match self {
            Self::Word(vocab) => vocab.len(),
            Self::Bpe(tokenizer) => tokenizer.get_vocab_size(true),
            Self::Marian(side) if side.target => side.tokenizer.target_vocab_size(),
            Self::Marian(side) => side.tokenizer.source_vocab_size(),
        }
    }
}

/// The source and target tokenizers of a model.
#[derive(Clone)]
pub struct Tokenizers {
    pub src: TextTokenizer,
    pub tgt: TextTokenizer,
    /// One BPE vocabulary shared by both sides.
    pub joint: bool,
}

impl Tokenizers {
    /// A MarianMT directory's tokenizer, both sides.
    pub fn marian(tokenizer: MarianTokenizer) -> Self {
        let tokenizer = Arc::new(tokenizer);
        let side = |target| {
            TextTokenizer::Marian(MarianSide {
                tokenizer: tokenizer.clone(),
                target,
            })
        };
        Self {
            src: side(false),
            tgt: side(true),
            joint: tokenizer.shared_vocabulary(),
        }
    }

    /// The warning for a source that a multilingual MarianMT model needs a target-language
    /// token (`>>fra<<`) at the start of, when `text` lacks it.
    pub fn missing_language_token(&self, text: &str) -> Option<String> {
        match &self.src {
            TextTokenizer::Marian(side) => side.tokenizer.missing_language_token(text),
            TextTokenizer::Word(_) | TextTokenizer::Bpe(_) => None,
        }
    }

    /// The special ids of these vocabularies and how they frame a sentence.
    pub fn specials(&self) -> SpecialIds {
        match &self.tgt {
            TextTokenizer::Marian(side) => {
                let t = &side.tokenizer;
                SpecialIds::marian(t.pad, t.eos, t.unk)
            }
            TextTokenizer::Word(_) | TextTokenizer::Bpe(_) => SpecialIds::ours(),
        }
    }

    /// The model dimensions these tokenizers fix: the two vocabulary sizes.
    pub fn vocab_sizes(&self) -> crate::config::VocabSizes {
        crate::config::VocabSizes {
            src: self.src.vocab_size(),
            tgt: self.tgt.vocab_size(),
        }
    }

    /// Learns the tokenizers the config asks for from the training pairs.
    pub fn learn(cfg: &DataConfig, pairs: &[SentencePair]) -> anyhow::Result<Self> {
        let sources = || pairs.iter().map(|p| p.src.as_str());
        let targets = || pairs.iter().map(|p| p.tgt.as_str());
        if cfg.train.is_target_only() {
            return Self::learn_target_only(cfg, targets());
        }
        match cfg.tokenizer {
            TokenizerKind::Word => {
                let src: Vec<Vec<String>> = sources().map(tokenize).collect();
                let tgt: Vec<Vec<String>> = targets().map(tokenize).collect();
                Ok(Self {
                    src: TextTokenizer::Word(Vocab::build(
                        src.iter().map(Vec::as_slice),
                        cfg.min_freq,
                    )),
                    tgt: TextTokenizer::Word(Vocab::build(
                        tgt.iter().map(Vec::as_slice),
                        cfg.min_freq,
                    )),
                    joint: false,
                })
            }
            TokenizerKind::Bpe if cfg.joint_vocab => {
                let joint = learn_bpe(sources().chain(targets()), cfg)?;
                Ok(Self {
                    src: joint.clone(),
                    tgt: joint,
                    joint: true,
                })
            }
            TokenizerKind::Bpe => Ok(Self {
                src: learn_bpe(sources(), cfg)?,
                tgt: learn_bpe(targets(), cfg)?,
                joint: false,
            }),
            TokenizerKind::Marian => Ok(Self::marian(learn_marian(
                sources(),
                targets(),
                cfg.vocab_size,
                cfg.joint_vocab,
            )?)),
        }
    }

    /// A language model's text: the target side's tokenizer stands on both sides, so that a
    /// checkpoint's files are those of a translation model with a joint vocabulary.
    fn learn_target_only<'a>(
        cfg: &DataConfig,
        texts: impl Iterator<Item = &'a str> + Send,
    ) -> anyhow::Result<Self> {
        let tgt = match cfg.tokenizer {
            TokenizerKind::Word => {
                let words: Vec<Vec<String>> = texts.map(tokenize).collect();
                TextTokenizer::Word(Vocab::build(words.iter().map(Vec::as_slice), cfg.min_freq))
            }
            TokenizerKind::Bpe => learn_bpe(texts, cfg)?,
            TokenizerKind::Marian => return Err(marian_is_for_translation()),
        };
        Ok(Self {
            src: tgt.clone(),
            tgt,
            joint: cfg.tokenizer == TokenizerKind::Bpe && cfg.joint_vocab,
        })
    }

    /// The files that store these tokenizers: (file name, contents).
    pub fn files(&self) -> anyhow::Result<Vec<(&'static str, Vec<u8>)>> {
        Ok(match (&self.src, &self.tgt) {
            (TextTokenizer::Word(src), TextTokenizer::Word(tgt)) => vec![
                (SRC_VOCAB_FILE, src.to_text().into_bytes()),
                (TGT_VOCAB_FILE, tgt.to_text().into_bytes()),
            ],
            (TextTokenizer::Bpe(joint), _) if self.joint => {
                vec![(JOINT_TOKENIZER_FILE, bpe_json(joint)?.into_bytes())]
            }
            (TextTokenizer::Bpe(src), TextTokenizer::Bpe(tgt)) => vec![
                (SRC_TOKENIZER_FILE, bpe_json(src)?.into_bytes()),
                (TGT_TOKENIZER_FILE, bpe_json(tgt)?.into_bytes()),
            ],
            (TextTokenizer::Marian(side), _) => side.tokenizer.files().to_vec(),
            _ => anyhow::bail!("mixed word and BPE tokenizers are not supported"),
        })
    }

    /// Reads the tokenizer files that `cfg` (the checkpoint's own `[data]`) says `dir` holds,
    /// so that a missing file is named as the one the config needs.
    pub fn load(dir: &Path, cfg: &DataConfig) -> anyhow::Result<Self> {
        Ok(match cfg.tokenizer {
            TokenizerKind::Word => {
                let bpe_files = [JOINT_TOKENIZER_FILE, SRC_TOKENIZER_FILE];
                let src_vocab = dir.join(SRC_VOCAB_FILE);
                if let Some(bpe) = bpe_files.iter().find(|f| dir.join(f).is_file()) {
                    if !src_vocab.is_file() {
                        anyhow::bail!(
                            "{} is missing but the directory holds {bpe}: the checkpoint's \
                             config.toml says (or, without the key, defaults to) data.tokenizer \
                             = \"word\"; if this is a BPE checkpoint, its config was cut or \
                             edited: restore it from the run that wrote it",
                            src_vocab.display()
                        );
                    }
                }
                Self {
                    src: TextTokenizer::Word(Vocab::load(&src_vocab)?),
                    tgt: TextTokenizer::Word(Vocab::load(&dir.join(TGT_VOCAB_FILE))?),
                    joint: false,
                }
            }
            TokenizerKind::Bpe if cfg.joint_vocab => {
                let tokenizer = load_bpe(&dir.join(JOINT_TOKENIZER_FILE))?;
                Self {
                    src: tokenizer.clone(),
                    tgt: tokenizer,
                    joint: true,
                }
            }
            TokenizerKind::Bpe => Self {
                src: load_bpe(&dir.join(SRC_TOKENIZER_FILE))?,
                tgt: load_bpe(&dir.join(TGT_TOKENIZER_FILE))?,
                joint: false,
            },
            TokenizerKind::Marian => Self::marian(MarianTokenizer::load(dir)?),
        })
    }
}

fn marian_is_for_translation() -> anyhow::Error {
    anyhow!(
        "data.tokenizer = \"marian\" is a translation model's tokenizer (source.spm and \
         target.spm), and this corpus is a language model's text; use data.tokenizer = \"bpe\""
    )
}

/// The pre-tokenizer of our BPE: SentencePiece-style words, `▁` marking a word start.
fn metaspace() -> Metaspace {
    Metaspace::new('▁', PrependScheme::Always, true)
}

/// Byte-pair encoding over SentencePiece-style words (`▁` marks a word start), with our four
/// specials first so that they get ids 0-3.
fn learn_bpe<'a>(
    texts: impl Iterator<Item = &'a str> + Send,
    cfg: &DataConfig,
) -> anyhow::Result<TextTokenizer> {
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
) -> anyhow::Result<TextTokenizer> {
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
    Ok(TextTokenizer::Bpe(Box::new(tokenizer)))
}

/// Words already split into BPE ids, kept per worker thread while a corpus is encoded: a
/// corpus repeats its words millions of times, tokenizers' own cache holds 10,000.
#[derive(Default)]
pub struct WordIdsCache(ahash::AHashMap<String, Vec<u32>>);

/// Words the cache holds before it starts over (a few hundred megabytes at most).
const WORD_CACHE_WORDS: usize = 1 << 20;

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

/// A sentence holding a word too long to segment whole (see [`long_words`]), word by word,
/// the long ones in pieces: the ids [`TextTokenizer::encode`] gives, and the pieces that
/// became `<unk>`.
fn encode_in_pieces(tokenizer: &Tokenizer, text: &str) -> anyhow::Result<Encoded> {
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
fn word_in_pieces(tokenizer: &Tokenizer, word: &str) -> anyhow::Result<Vec<tokenizers::Token>> {
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

fn bpe_json(tokenizer: &Tokenizer) -> anyhow::Result<String> {
    tokenizer
        .to_string(true)
        .map_err(|e| anyhow!("cannot serialise the tokenizer: {e}"))
}

fn load_bpe(path: &Path) -> anyhow::Result<TextTokenizer> {
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
        let TextTokenizer::Bpe(ours) = learn_bpe(texts, &cfg).unwrap() else {
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
