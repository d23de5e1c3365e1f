//! Validation after each epoch: the loss over the validation pairs, and BLEU of greedy
//! translations of the validation sources, each summed over the ranks.

use super::Trainer;
use crate::infer::Inference;
use crate::metrics::BleuStatistics;
use crate::model::Mode;
use crate::train::data::ValidationData;
use crate::training_data::{ordered_batches, EncodedPair};

/// Sentences per batch when translating the validation set for BLEU.
const VALIDATION_DECODE_BATCH: usize = 64;

impl Trainer {
    /// Loss per target token over the validation pairs, dropout off. Under `mpirun` each rank
    /// takes every `world`-th batch and the sums are added over the ranks.
    pub(super) fn validation_loss(&self, pairs: &[EncodedPair]) -> anyhow::Result<f64> {
        let (mut sum, mut tokens) = (0.0, 0usize);
        let model = self.weights.for_step(self.precision.step_dtype())?;
        let _precision = self.precision.scope();
        let batches = ordered_batches(pairs, self.config.training.max_tokens, self.specials.pad);
        let (rank, world) = (self.collective.rank(), self.collective.world());
        for batch in batches.iter().skip(rank).step_by(world) {
            sum += f64::from(
                self.batch_loss_sum(&model, batch, Mode::Eval)?
                    .to_scalar::<f32>()?,
            );
            tokens += batch.ntokens;
        }
        let summed = self.collective.sum_f64(&[sum, tokens as f64])?;
        Ok(summed[0] / summed[1].max(1.0))
    }

    /// Corpus BLEU of the validation sources decoded as `[decode]` says (what `translate` and
    /// `eval` will use by default); none for a language model, which translates nothing.
    /// Under `mpirun` each rank decodes every `world`-th block of sentences (the blocks one
    /// process would decode, so each sentence is decoded in the same company) and the BLEU
    /// statistics are summed: the score is one process's, exactly.
    pub(super) fn validation_bleu(&self, valid: &ValidationData) -> anyhow::Result<Option<f64>> {
        let frozen = self.weights.frozen()?;
        let Inference::Translation(translator) = self.inference_over(&frozen, self.decode) else {
            return Ok(None);
        };
        let (rank, world) = (self.collective.rank(), self.collective.world());
        let mut statistics = BleuStatistics::default().to_counts();
        let blocks = valid
            .sources
            .chunks(VALIDATION_DECODE_BATCH)
            .zip(valid.references.chunks(VALIDATION_DECODE_BATCH));
        for (sources, references) in blocks.skip(rank).step_by(world) {
            let hypotheses: Vec<String> = translator
                .translate_batch(sources)?
                .into_iter()
                .map(|t| t.translation)
                .collect();
            let block = BleuStatistics::of(&hypotheses, references).to_counts();
            for (total, count) in statistics.iter_mut().zip(block) {
                *total += count;
            }
        }
        let summed = self.collective.sum_f64(&statistics)?;
        Ok(Some(BleuStatistics::from_counts(&summed)?.score().score))
    }
}
