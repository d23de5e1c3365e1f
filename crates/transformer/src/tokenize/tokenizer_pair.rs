//! The tokenizers of a model's two sides, learned from a corpus or loaded from a checkpoint
//! (one joint BPE or a vocabulary per side, MarianMT's SentencePiece models), and the special
//! ids they frame sentences with.

use std::path::Path;
use std::sync::Arc;

use super::bpe::{bpe_json, learn_bpe};
use super::tokenizer::load_bpe;
use crate::config::{DataConfig, TokenizerKind};
use crate::corpus::SentencePair;
use crate::tokenize::marian::MarianTokenizer;
use crate::tokenize::marian_learn::learn_marian;
use crate::tokenize::specials::SpecialIds;
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
                let joint = TextTokenizer::bpe(learn_bpe(sources().chain(targets()), cfg)?);
                Ok(Self {
                    src: joint.clone(),
                    tgt: joint,
                    joint: true,
                })
            }
            TokenizerKind::Bpe => Ok(Self {
                src: TextTokenizer::bpe(learn_bpe(sources(), cfg)?),
                tgt: TextTokenizer::bpe(learn_bpe(targets(), cfg)?),
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
            TokenizerKind::Bpe => TextTokenizer::bpe(learn_bpe(texts, cfg)?),
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
