//! The run's tokenizers learned from its training corpus: word counts gathered over one
//! streamed pass (BPE, words), the sentences in memory for MarianMT's SentencePiece learner;
//! or taken from the cache.

use std::collections::HashMap;
use std::sync::Arc;

use super::cache::CorpusCache;
use crate::config::{DataConfig, TokenizerKind};
use crate::corpus::SentencePair;
use crate::corpus::{stream_corpus, total_bytes, ReadCounter};
use crate::progress::Progress;
use crate::tokenize::tokenizer_pair::multilingual_is_pretrained;
use crate::tokenize::vocab::{count_words, tokenize, Vocab};
use crate::tokenize::Tokenizers;
use crate::tokenize::{
    bpe::{learn_bpe_from_counts, BpeWordCounts},
    TextTokenizer,
};

/// Learns the tokenizers `cfg` asks for over one streamed pass of the training corpus (or
/// takes those cached from an earlier run over the same files), saying what it did through
/// `note`. MarianMT's SentencePiece learner needs the sentences in memory; it gets them.
pub fn learn_tokenizers(
    cfg: &DataConfig,
    cache: Option<&CorpusCache>,
    progress: &dyn Progress,
    note: &mut dyn FnMut(String),
) -> anyhow::Result<Tokenizers> {
    let cacheable = cfg.tokenizer != TokenizerKind::Marian;
    if let Some((tokenizers, dir)) = cache
        .filter(|_| cacheable)
        .and_then(|c| c.load_tokenizers(cfg))
    {
        note(format!(
            "tokenizer: learned from these files by an earlier run, read from {}",
            dir.display()
        ));
        return Ok(tokenizers);
    }
    let started = std::time::Instant::now();
    let tokenizers = match cfg.tokenizer {
        TokenizerKind::Marian => {
            let (pairs, _) = crate::corpus::read_corpus(&cfg.train)?;
            note_lines_left_out_of_sentencepiece(&pairs, note);
            Tokenizers::learn(cfg, &pairs)?
        }
        TokenizerKind::Word | TokenizerKind::Bpe => learn_streamed(cfg, progress)?,
        TokenizerKind::Multilingual => return Err(multilingual_is_pretrained()),
    };
    tokenizers.refuse_only_specials(cfg)?;
    note(format!(
        "tokenizer: learned in {:.1}s",
        started.elapsed().as_secs_f64()
    ));
    if let (Some(cache), true) = (cache, cacheable) {
        cache.store_tokenizers(cfg, &tokenizers);
    }
    Ok(tokenizers)
}

/// Says how many sentences learning the SentencePiece models leaves out for their length
/// (they still train, segmented by the models learned from the rest).
fn note_lines_left_out_of_sentencepiece(pairs: &[SentencePair], note: &mut dyn FnMut(String)) {
    let limit = crate::tokenize::SENTENCEPIECE_MAX_SENTENCE_BYTES;
    let long = pairs
        .iter()
        .flat_map(|p| [&p.src, &p.tgt])
        .filter(|text| text.len() > limit)
        .count();
    if long > 0 {
        note(format!(
            "tokenizer: {long} sentences longer than {limit} bytes left out of learning the \
             SentencePiece models, as SentencePiece's trainer leaves them out"
        ));
    }
}

/// Word counts of one block, per side, as the tokenizer kind counts them.
enum BlockCounts {
    Words(HashMap<String, usize>, HashMap<String, usize>),
    Bpe(BpeWordCounts, BpeWordCounts),
}

/// Word or BPE tokenizers learned from counts gathered block by block on every core. The
/// same counts as [`Tokenizers::learn`] over the pairs in memory, so the same tokenizers.
fn learn_streamed(cfg: &DataConfig, progress: &dyn Progress) -> anyhow::Result<Tokenizers> {
    let target_only = cfg.train.is_target_only();
    // A joint BPE vocabulary counts both sides together (on the source's side here).
    let joint_bpe = cfg.tokenizer == TokenizerKind::Bpe && cfg.joint_vocab && !target_only;
    let counter = Arc::new(ReadCounter::default());
    let reading = counter.clone();
    let pass = progress.data_pass(
        "learning the tokenizer",
        total_bytes(&cfg.train),
        Box::new(move || reading.read()),
    );
    let count_block = |pairs: Vec<SentencePair>| -> anyhow::Result<BlockCounts> {
        Ok(match cfg.tokenizer {
            TokenizerKind::Bpe => {
                let (mut src, mut tgt) = (BpeWordCounts::default(), BpeWordCounts::default());
                for pair in &pairs {
                    if joint_bpe {
                        src.add(&pair.src);
                        src.add(&pair.tgt);
                    } else {
                        src.add(&pair.src);
                        tgt.add(&pair.tgt);
                    }
                }
                BlockCounts::Bpe(src, tgt)
            }
            _ => {
                let (mut src, mut tgt) = (HashMap::new(), HashMap::new());
                for pair in &pairs {
                    count_words(&tokenize(&pair.src), &mut src);
                    count_words(&tokenize(&pair.tgt), &mut tgt);
                }
                BlockCounts::Words(src, tgt)
            }
        })
    };
    let mut totals: Option<BlockCounts> = None;
    stream_corpus(&cfg.train, &counter, count_block, |block| {
        totals = Some(match (totals.take(), block) {
            (None, block) => block,
            (Some(BlockCounts::Bpe(mut a, mut b)), BlockCounts::Bpe(c, d)) => {
                a.merge(c);
                b.merge(d);
                BlockCounts::Bpe(a, b)
            }
            (Some(BlockCounts::Words(mut a, mut b)), BlockCounts::Words(c, d)) => {
                for (totals, block) in [(&mut a, c), (&mut b, d)] {
                    for (word, count) in block {
                        *totals.entry(word).or_default() += count;
                    }
                }
                BlockCounts::Words(a, b)
            }
            _ => unreachable!("every block is counted the same way"),
        });
        Ok(())
    })?;
    pass.set_message("learning the tokenizer: the vocabulary from the counts");
    let (src, tgt) = match totals.expect("a corpus with pairs has a block") {
        BlockCounts::Words(src, tgt) => (
            TextTokenizer::Word(Vocab::from_counts(src, cfg.min_freq)),
            TextTokenizer::Word(Vocab::from_counts(tgt, cfg.min_freq)),
        ),
        BlockCounts::Bpe(src, _) if joint_bpe => {
            let joint = TextTokenizer::bpe(learn_bpe_from_counts(&src, cfg)?);
            (joint.clone(), joint)
        }
        BlockCounts::Bpe(src, tgt) => (
            TextTokenizer::bpe(learn_bpe_from_counts(&src, cfg)?),
            TextTokenizer::bpe(learn_bpe_from_counts(&tgt, cfg)?),
        ),
    };
    Ok(if target_only {
        // A language model's one vocabulary stands on both sides.
        Tokenizers {
            src: tgt.clone(),
            tgt,
            joint: cfg.tokenizer == TokenizerKind::Bpe && cfg.joint_vocab,
            languages: None,
        }
    } else {
        Tokenizers {
            src,
            tgt,
            joint: joint_bpe,
            languages: None,
        }
    })
}
