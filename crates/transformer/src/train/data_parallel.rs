//! Data parallelism with the semantics of one big batch: each optimiser step's group of
//! `accumulate x world` batches is dealt to the ranks in the same order on every rank (rank r
//! takes batches r, r + world, ...); each rank sums the gradients of its share, every rank's
//! sums are added in one flat all-reduce, and the loss is normalised by the whole group's
//! tokens, which every rank knows because every rank batches the same data. Every rank then
//! applies the same Adam update, so the weights stay equal without being sent again; a
//! checksum over the ranks checks that they do.

use candle_core::{DType, Tensor, Var};

use super::events::StopReason;
use super::state::Fnv1a;
use crate::distributed::Collective;
use crate::training_data::PaddedBatch;

/// The batches of `group` that `rank` of `world` trains on.
pub fn share(
    group: &[PaddedBatch],
    rank: usize,
    world: usize,
) -> impl Iterator<Item = &PaddedBatch> {
    group.iter().skip(rank).step_by(world.max(1))
}

/// Every rank's gradients and loss summed: `grads[i]` belongs to `vars[i]` (none where this
/// rank's share did not reach it, or where the share was empty at an epoch's end), `loss` is
/// this rank's scalar loss sum. One flat buffer holds every gradient, a flag per variable
/// (whether any rank has its gradient) and the loss, so the sum is one collective call
/// (bucketed by the collective, never one call per tensor).
pub fn sum_over_ranks(
    collective: &dyn Collective,
    grads: Vec<Option<Tensor>>,
    vars: &[Var],
    loss: &Tensor,
) -> anyhow::Result<(Vec<Option<Tensor>>, Tensor)> {
    let device = loss.device();
    let mut parts = Vec::with_capacity(vars.len() + 2);
    let mut flags = Vec::with_capacity(vars.len());
    for (grad, var) in grads.iter().zip(vars) {
        parts.push(match grad {
            Some(grad) => grad.to_dtype(DType::F32)?.flatten_all()?,
            None => Tensor::zeros(var.elem_count(), DType::F32, device)?,
        });
        flags.push(if grad.is_some() { 1f32 } else { 0.0 });
    }
    parts.push(Tensor::from_vec(flags, vars.len(), device)?);
    parts.push(loss.to_dtype(DType::F32)?.reshape(1)?);
    let summed = collective.sum(&Tensor::cat(&parts, 0)?)?;
    let total: usize = vars.iter().map(|v| v.elem_count()).sum();
    let flags = summed.narrow(0, total, vars.len())?.to_vec1::<f32>()?;
    let mut offset = 0;
    let mut out = Vec::with_capacity(vars.len());
    for (var, flag) in vars.iter().zip(flags) {
        let count = var.elem_count();
        out.push(if flag > 0.0 {
            Some(summed.narrow(0, offset, count)?.reshape(var.shape())?)
        } else {
            None
        });
        offset += count;
    }
    let loss = summed.narrow(0, total + vars.len(), 1)?.squeeze(0)?;
    Ok((out, loss))
}

/// Fails, naming the step, unless every rank holds the same weights (FNV-1a over the bits of
/// every parameter, compared as the smallest and largest over the ranks).
pub fn check_weights_agree(
    collective: &dyn Collective,
    vars: &[Var],
    step: usize,
) -> anyhow::Result<()> {
    let mut hasher = Fnv1a::new();
    for var in vars {
        for value in var.as_tensor().flatten_all()?.to_vec1::<f32>()? {
            hasher.feed(value.to_bits());
        }
    }
    let hash = hasher.finish();
    let (min, max) = collective.min_max(hash)?;
    if min != max {
        anyhow::bail!(
            "the ranks' weights differ after step {step} (checksums {min:016x} to {max:016x}; \
             rank {} has {hash:016x}): they must start equal and take the same updates; check \
             that every rank runs the same binary and config",
            collective.rank()
        )
    }
    Ok(())
}

/// The stop every rank agrees on: this rank's own reason, or, when only another rank was
/// asked (a signal that reached it first), [`StopReason::OtherRank`]. All ranks then stop
/// after the same step.
pub fn agreed_stop(
    collective: &dyn Collective,
    local: Option<StopReason>,
) -> anyhow::Result<Option<StopReason>> {
    if collective.world() == 1 {
        return Ok(local);
    }
    let anyone = collective.any(local.is_some())?;
    Ok(local.or(anyone.then_some(StopReason::OtherRank)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::distributed::SingleProcess;
    use candle_core::Device;

    #[test]
    fn a_group_is_dealt_round_robin_and_a_short_one_leaves_late_ranks_empty() {
        let batch = |n| {
            PaddedBatch::new(&[&crate::training_data::EncodedPair {
                src: vec![1; n],
                tgt: vec![1, 2],
            }])
        };
        let group: Vec<PaddedBatch> = (1..=5).map(batch).collect();
        let lens =
            |rank, world| -> Vec<usize> { share(&group, rank, world).map(|b| b.src_len).collect() };
        assert_eq!(lens(0, 2), vec![1, 3, 5]);
        assert_eq!(lens(1, 2), vec![2, 4]);
        assert_eq!(lens(3, 4), vec![4]);
        assert!(lens(5, 6).is_empty());
    }

    #[test]
    fn one_process_gets_its_own_gradients_back_and_missing_ones_stay_missing() {
        let dev = Device::Cpu;
        let vars = [
            Var::new(&[[1f32, 2.], [3., 4.]], &dev).unwrap(),
            Var::new(&[5f32], &dev).unwrap(),
        ];
        let grad = Tensor::new(&[[0.5f32, -1.], [2., 0.]], &dev).unwrap();
        let loss = Tensor::new(3.25f32, &dev).unwrap();
        let (grads, total) =
            sum_over_ranks(&SingleProcess, vec![Some(grad.clone()), None], &vars, &loss).unwrap();
        assert_eq!(
            grads[0].as_ref().unwrap().to_vec2::<f32>().unwrap(),
            grad.to_vec2::<f32>().unwrap()
        );
        assert!(grads[1].is_none());
        assert_eq!(total.to_scalar::<f32>().unwrap(), 3.25);
        check_weights_agree(&SingleProcess, &vars, 1).unwrap();
        assert_eq!(
            agreed_stop(&SingleProcess, Some(StopReason::StepLimit)).unwrap(),
            Some(StopReason::StepLimit)
        );
    }
}
