//! Validation: the loss per target token over the validation pairs and the BLEU of their
//! sources translated as `[decode]` says, in large batches of sources of similar length,
//! summed over the ranks of a distributed run.

use candle_core::Device;

use super::Trainer;
use crate::infer::translator::Batching;
use crate::infer::Inference;
use crate::metrics::BleuStatistics;
use crate::model::Mode;
use crate::train::data::ValidationData;
use crate::training_data::{ordered_batches, EncodedPair};

/// How the validation sources are batched for BLEU: large batches of sources of similar
/// length (sorted, so little padding and few rows finished early), each within a token
/// budget (sentences x beam x the longest source) that bounds the key/value caches: about
/// 0.2 GB of them for the base model on the CPU, 1.5 GB on a GPU, whose launches a batch of
/// 256 rows fills where 64 leave it idle.
fn validation_batching(device: &Device) -> Batching {
    match device {
        Device::Cpu => Batching {
            sentences: 64,
            tokens: 8192,
        },
        _ => Batching {
            sentences: 256,
            tokens: 32_768,
        },
    }
}

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
        let Inference::Translation(translator) = self.inference_over(&frozen, self.decode.clone())
        else {
            return Ok(None);
        };
        let (rank, world) = (self.collective.rank(), self.collective.world());
        let mut statistics = BleuStatistics::default().to_counts();
        // Sources by length (in tokens, as encoded for the loss), ties in corpus order.
        let mut order: Vec<usize> = (0..valid.sources.len()).collect();
        order.sort_by_key(|&i| valid.pairs.get(i).map_or(0, |pair| pair.src.len()));
        let batching = validation_batching(&self.device);
        for block in order.chunks(batching.sentences).skip(rank).step_by(world) {
            let sources: Vec<String> = block.iter().map(|&i| valid.sources[i].clone()).collect();
            let references: Vec<String> =
                block.iter().map(|&i| valid.references[i].clone()).collect();
            let hypotheses: Vec<String> = translator
                .translate_all(&sources, batching)?
                .into_iter()
                .map(|t| t.translation)
                .collect();
            let block = BleuStatistics::of(&hypotheses, &references).to_counts();
            for (total, count) in statistics.iter_mut().zip(block) {
                *total += count;
            }
        }
        let summed = self.collective.sum_f64(&statistics)?;
        Ok(Some(BleuStatistics::from_counts(&summed)?.score().score))
    }
}
