//! What a run trains and validates on: the encoded training pairs with their tokenizers, and
//! the validation split (encoded for the loss, as text for BLEU), prepared from the config's
//! corpora.

use crate::config::Config;
use crate::corpus::{read_corpus, SentencePair};
use crate::progress::Progress;
use crate::tokenize::Tokenizers;
use crate::training_data::{encode_pairs, EncodedCorpus, EncodedPair};
use crate::training_data::{encode_training_corpus, learn_tokenizers, CacheUse, CorpusCache};

/// Everything the loop trains on.
pub struct TrainingData {
    /// The training pairs as ids: in memory, or mapped from the corpus cache.
    /// Shared with the thread that builds batches ahead (see `batch_feed`).
    pub pairs: std::sync::Arc<EncodedCorpus>,
    pub tokenizers: Tokenizers,
    pub valid: Option<ValidationData>,
}

/// The validation split: encoded pairs for the loss, raw text for BLEU.
pub struct ValidationData {
    pub pairs: Vec<EncodedPair>,
    pub sources: Vec<String>,
    pub references: Vec<String>,
}

impl TrainingData {
    /// The most tokens a batch could hold, at least: the whole corpus in one batch, each
    /// pair counted by its longer side (padding comes on top).
    pub fn largest_batch_tokens(&self) -> usize {
        (0..self.pairs.len())
            .map(|i| {
                let (source, target) = self.pairs.lens(i);
                source.max(target)
            })
            .sum()
    }

    /// The pairs whose longer side alone passes `max_tokens`: each is a batch of its own, past
    /// the bound. How many, and the longest (its longer side's tokens); `None` when every
    /// pair fits.
    pub fn pairs_past(&self, max_tokens: usize) -> Option<(usize, usize)> {
        let (count, longest) = (0..self.pairs.len())
            .map(|i| {
                let (source, target) = self.pairs.lens(i);
                source.max(target)
            })
            .filter(|&tokens| tokens > max_tokens)
            .fold((0, 0), |(count, longest), tokens| {
                (count + 1, longest.max(tokens))
            });
        (count > 0).then_some((count, longest))
    }

    /// Target tokens per source token, the median over the training pairs with a source
    /// (every `step`-th of a large corpus, to bound the work); `None` for a language model's
    /// text or an empty corpus. Rounded to 3 decimals, as the config keeps it.
    pub fn length_ratio(&self) -> Option<f64> {
        const MOST_SAMPLED: usize = 1 << 20;
        let step = self.pairs.len().div_ceil(MOST_SAMPLED).max(1);
        let specials = self.tokenizers.specials();
        let (src_framing, tgt_framing) = (specials.source_overhead(), specials.target_overhead());
        let mut ratios: Vec<f32> = (0..self.pairs.len())
            .step_by(step)
            .map(|i| self.pairs.lens(i))
            .map(|(src, tgt)| {
                (
                    src.saturating_sub(src_framing),
                    tgt.saturating_sub(tgt_framing),
                )
            })
            .filter(|&(src, _)| src > 0)
            .map(|(src, tgt)| tgt as f32 / src as f32)
            .collect();
        if ratios.is_empty() {
            return None;
        }
        let middle = ratios.len() / 2;
        let (_, median, _) = ratios.select_nth_unstable_by(middle, f32::total_cmp);
        Some((f64::from(*median) * 1000.0).round() / 1000.0).filter(|r| *r > 0.0)
    }

    /// Reads and cleans the config's corpora, learns the tokenizers (a resumed run passes
    /// those it was trained with), encodes everything; says what it did through `note`, one
    /// line at a time, and reports its long passes over the corpus to `progress`.
    /// A large training corpus streams through in blocks and is cached encoded (see
    /// `training_data::cache`). Also returns the first `samples` training sources, to show
    /// translations of at the end.
    pub fn prepare(
        config: &Config,
        tokenizers: Option<Tokenizers>,
        samples: usize,
        progress: &dyn Progress,
        mut note: impl FnMut(String),
    ) -> anyhow::Result<(Self, Vec<String>)> {
        let started = std::time::Instant::now();
        let cache = CorpusCache::for_training(&config.data, progress)?;
        let tokenizers = match tokenizers {
            Some(saved) => saved,
            None => learn_tokenizers(&config.data, cache.as_ref(), progress, &mut note)?,
        };
        let max_positions = config.model.max_len;
        let prepared = encode_training_corpus(
            &config.data,
            &tokenizers,
            max_positions,
            samples,
            cache.as_ref(),
            progress,
        )?;
        let how = match &prepared.cache {
            CacheUse::Reused(dir) => {
                format!("; encoded by an earlier run, mapped from {}", dir.display())
            }
            CacheUse::Written(dir) => format!("; encoded and cached in {}", dir.display()),
            CacheUse::Unused => String::new(),
        };
        note(format!(
            "train data {}: {}{how} ({:.1}s)",
            config.data.train,
            prepared.report,
            started.elapsed().as_secs_f64()
        ));
        let too_long = prepared.too_long;
        if prepared.corpus.is_empty() {
            anyhow::bail!(
                "every one of the {} training pairs is longer than model.max_len = {} lets the \
                 model read (the framing tokens count too), so nothing would train; raise \
                 model.max_len",
                prepared.report.kept,
                max_positions
            );
        }
        note(format!(
            "tokenizer: {}, {} source / {} target tokens in the vocabulary{}",
            config.data.tokenizer,
            tokenizers.src.vocab_size(),
            tokenizers.tgt.vocab_size(),
            if too_long > 0 {
                format!("; {too_long} pairs longer than model.max_len left out")
            } else {
                String::new()
            }
        ));
        let valid = match &config.data.valid {
            Some(source) => {
                let (valid_pairs, report) = read_corpus(source)?;
                note(format!("valid data {source}: {report}"));
                let valid = ValidationData::encode(&valid_pairs, &tokenizers, max_positions)?;
                if valid.pairs.len() < valid_pairs.len() {
                    note(format!(
                        "valid data: {} pairs longer than model.max_len left out",
                        valid_pairs.len() - valid.pairs.len()
                    ));
                }
                Some(valid)
            }
            None => None,
        };
        let data = Self {
            pairs: prepared.corpus.into(),
            tokenizers,
            valid,
        };
        Ok((data, prepared.samples))
    }
}

impl ValidationData {
    /// Pairs the model cannot read (longer than its position table) are left out of both the
    /// loss and BLEU, so that validation never stops a run.
    fn encode(
        pairs: &[SentencePair],
        tokenizers: &Tokenizers,
        max_positions: usize,
    ) -> anyhow::Result<Self> {
        let (encoded, kept) = encode_pairs(pairs, tokenizers, max_positions)?;
        Ok(Self {
            pairs: encoded,
            sources: kept.iter().map(|&i| pairs[i].src.clone()).collect(),
            references: kept.iter().map(|&i| pairs[i].tgt.clone()).collect(),
        })
    }
}
