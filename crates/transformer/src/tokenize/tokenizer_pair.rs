//! The tokenizers of a model's two sides, learned from a corpus or loaded from a checkpoint
//! (one joint BPE or a vocabulary per side, MarianMT's SentencePiece models, a multilingual
//! model's one tokenizer and its languages), and the special ids they frame sentences with.

use std::path::Path;

use anyhow::Context;
use std::sync::Arc;

use super::bpe::{bpe_json, learn_bpe};
use super::tokenizer::load_bpe;
use crate::config::{DataConfig, TokenizerKind};
use crate::corpus::SentencePair;
use crate::tokenize::marian::MarianTokenizer;
use crate::tokenize::marian_learn::learn_marian;
use crate::tokenize::multilingual::MultilingualTokenizer;
use crate::tokenize::specials::{LanguageIds, SpecialIds};
use crate::tokenize::tokenizer::{
    marian_is_for_translation, MarianSide, TextTokenizer, JOINT_TOKENIZER_FILE, SRC_TOKENIZER_FILE,
    SRC_VOCAB_FILE, TGT_TOKENIZER_FILE, TGT_VOCAB_FILE,
};
use crate::tokenize::vocab::{tokenize, Vocab};

/// The source and target tokenizers of a model.
#[derive(Clone)]
pub struct Tokenizers {
    pub src: TextTokenizer,
    pub tgt: TextTokenizer,
    /// One BPE vocabulary shared by both sides.
    pub joint: bool,
    /// A multilingual model's language pair, once named ([`Self::name_languages`]): what its
    /// sentences are framed with unless a caller names another.
    pub languages: Option<LanguageIds>,
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
            languages: None,
        }
    }

    /// An M2M100 / NLLB-200 directory's tokenizer, both sides, no language pair named yet.
    pub fn multilingual(tokenizer: MultilingualTokenizer) -> Self {
        let tokenizer = TextTokenizer::Multilingual(Arc::new(tokenizer));
        Self {
            src: tokenizer.clone(),
            tgt: tokenizer,
            joint: true,
            languages: None,
        }
    }

    /// The multilingual tokenizer, for a multilingual model.
    pub fn multilingual_tokenizer(&self) -> Option<&MultilingualTokenizer> {
        match &self.src {
            TextTokenizer::Multilingual(tokenizer) => Some(tokenizer),
            _ => None,
        }
    }

    /// Names the language pair a multilingual model translates unless a caller names another
    /// (`source` and `target` codes as its tokenizer spells them: `de`, `deu_Latn`); an
    /// unknown code is an error listing some it knows. Other models have no language
    /// tokens, and this does nothing.
    pub fn name_languages(&mut self, source: &str, target: &str) -> anyhow::Result<()> {
        if let Some(tokenizer) = self.multilingual_tokenizer() {
            self.languages = Some(tokenizer.pair(source, target)?);
        }
        Ok(())
    }

    /// The warning for a source that a multilingual MarianMT model needs a target-language
    /// token (`>>fra<<`) at the start of, when `text` lacks it.
    pub fn missing_language_token(&self, text: &str) -> Option<String> {
        match &self.src {
            TextTokenizer::Marian(side) => side.tokenizer.missing_language_token(text),
            TextTokenizer::Word(_) | TextTokenizer::Bpe(_) | TextTokenizer::Multilingual(_) => None,
        }
    }

    /// The special ids of these vocabularies and how they frame a sentence (a multilingual
    /// model's: in the language pair named).
    pub fn specials(&self) -> SpecialIds {
        self.specials_in(self.languages)
    }

    /// [`Self::specials`], a multilingual model's sentences framed in `languages` instead.
    pub fn specials_in(&self, languages: Option<LanguageIds>) -> SpecialIds {
        match &self.tgt {
            TextTokenizer::Marian(side) => {
                let t = &side.tokenizer;
                SpecialIds::marian(t.pad, t.eos, t.unk)
            }
            TextTokenizer::Multilingual(t) => {
                SpecialIds::multilingual(languages, t.legacy_framing())
            }
            TextTokenizer::Word(_) | TextTokenizer::Bpe(_) => SpecialIds::ours(),
        }
    }

    /// Positions a source's specials take, whatever its language.
    pub fn source_overhead(&self) -> usize {
        // A multilingual source always carries its language's token.
        let any_pair = LanguageIds {
            source: 0,
            target: 0,
        };
        self.specials_in(self.languages.or(Some(any_pair)))
            .source_overhead()
    }

    /// The model dimensions these tokenizers fix: the two vocabulary sizes.
    pub fn vocab_sizes(&self) -> crate::config::VocabSizes {
        crate::config::VocabSizes {
            src: self.src.vocab_size(),
            tgt: self.tgt.vocab_size(),
        }
    }

    /// Refuses learned vocabularies of nothing but the special tokens (no word occurs
    /// `cfg.min_freq` times): a model trained on them reads and writes only `<unk>`.
    pub fn refuse_only_specials(&self, cfg: &DataConfig) -> anyhow::Result<()> {
        let specials = crate::tokenize::vocab::SPECIALS.len();
        let sides = [("source", &self.src), ("target", &self.tgt)];
        if let Some((side, _)) = sides.iter().find(|(_, t)| t.vocab_size() <= specials) {
            let side = if cfg.train.is_target_only() {
                "text's"
            } else {
                side
            };
            anyhow::bail!(
                "the {side} vocabulary learned from {} holds only the special tokens (<pad>, \
                 <s>, </s>, <unk>): no word or piece occurs data.min_freq = {} times in it; \
                 lower data.min_freq, or train on more text",
                cfg.train,
                cfg.min_freq
            );
        }
        Ok(())
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
                    languages: None,
                })
            }
            TokenizerKind::Bpe if cfg.joint_vocab => {
                let joint = TextTokenizer::bpe(learn_bpe(sources().chain(targets()), cfg)?);
                Ok(Self {
                    src: joint.clone(),
                    tgt: joint,
                    joint: true,
                    languages: None,
                })
            }
            TokenizerKind::Bpe => Ok(Self {
                src: TextTokenizer::bpe(learn_bpe(sources(), cfg)?),
                tgt: TextTokenizer::bpe(learn_bpe(targets(), cfg)?),
                joint: false,
                languages: None,
            }),
            TokenizerKind::Marian => Ok(Self::marian(learn_marian(
                sources(),
                targets(),
                cfg.vocab_size,
                cfg.joint_vocab,
            )?)),
            TokenizerKind::Multilingual => Err(multilingual_is_pretrained()),
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
            TokenizerKind::Bpe => TextTokenizer::bpe(learn_bpe(texts, cfg)?),
            TokenizerKind::Marian => return Err(marian_is_for_translation()),
            TokenizerKind::Multilingual => return Err(multilingual_is_pretrained()),
        };
        Ok(Self {
            src: tgt.clone(),
            tgt,
            joint: cfg.tokenizer == TokenizerKind::Bpe && cfg.joint_vocab,
            languages: None,
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
            (TextTokenizer::Multilingual(tokenizer), _) => tokenizer.files().to_vec(),
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
                    languages: None,
                }
            }
            TokenizerKind::Bpe if cfg.joint_vocab => {
                let tokenizer = load_bpe(&dir.join(JOINT_TOKENIZER_FILE))?;
                Self {
                    src: tokenizer.clone(),
                    tgt: tokenizer,
                    joint: true,
                    languages: None,
                }
            }
            TokenizerKind::Bpe => Self {
                src: load_bpe(&dir.join(SRC_TOKENIZER_FILE))?,
                tgt: load_bpe(&dir.join(TGT_TOKENIZER_FILE))?,
                joint: false,
                languages: None,
            },
            TokenizerKind::Marian => Self::marian(MarianTokenizer::load(dir)?),
            TokenizerKind::Multilingual => {
                // data.vocab_size is the model's table: the tokens and the rows past them.
                let tokenizer = MultilingualTokenizer::load(dir)?
                    .with_table_rows(cfg.vocab_size)
                    .with_context(|| {
                        format!(
                            "{}: its model's vocab_size is {} (data.vocab_size, or config.json's \
                             vocab_size)",
                            dir.display(),
                            cfg.vocab_size
                        )
                    })?;
                let mut tokenizers = Self::multilingual(tokenizer);
                if let (Some(source), Some(target)) = (&cfg.source_lang, &cfg.target_lang) {
                    tokenizers.name_languages(source, target)?;
                }
                tokenizers
            }
        })
    }
}

/// Why a multilingual tokenizer is not learned.
pub(crate) fn multilingual_is_pretrained() -> anyhow::Error {
    anyhow::anyhow!(
        "data.tokenizer = \"multilingual\" is an M2M100 / NLLB-200 model's own tokenizer and \
         is not learned; start from such a model (training.init_from) or use \"bpe\""
    )
}
