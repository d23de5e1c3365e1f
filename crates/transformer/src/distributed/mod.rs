//! Data-parallel training: which rank this process is among how many, and the few collective
//! operations the trainer needs (a sum of flat gradient buffers, an "any rank?" vote, the
//! extrema of a checksum).
//!
//! Without `mpirun` a process is [`SingleProcess`] and nothing changes. Under `mpirun`, a build
//! with `--features mpi` joins MPI's world (OpenMPI through the `mpi` crate) and sums on MPI
//! (a GPU's gradients through host memory); with `--features nccl`, a GPU run sums on NCCL,
//! bootstrapped with an MPI broadcast of NCCL's unique id as nccl-tests does. Under MPI every
//! collective call has a deadline (`watchdog.rs`): a rank that waits longer for the others
//! (a host or the network between hosts gone) says so and ends, and so does the job.

use std::time::Duration;

use candle_core::Tensor;

#[cfg(feature = "mpi")]
mod mpi_world;
#[cfg(feature = "nccl")]
mod nccl;
// Plain std, built without MPI too, so that the default `cargo test` runs its tests.
#[cfg_attr(not(feature = "mpi"), allow(dead_code))]
mod watchdog;

/// How long a collective call waits for the other ranks when neither the environment nor the
/// trainer says. Longer than OpenMPI's own detection of a lost daemon on its defaults (300 s
/// of silence, then 9 keepalive probes 20 s apart): where the network between the hosts is
/// gone, mpirun notices first and ends the job on every host, whereas a rank that quits first
/// leaves mpirun waiting on a dead connection for as long as TCP retransmits.
pub const DEFAULT_COLLECTIVE_TIMEOUT: Duration = Duration::from_secs(600);

/// The environment variable that sets the collective timeout, in seconds, over any other
/// setting.
pub const COLLECTIVE_TIMEOUT_VARIABLE: &str = "TRANSFORMER_COLLECTIVE_TIMEOUT_S";

/// The collective operations of data-parallel training. Every rank must call the same ones
/// in the same order (they block until all ranks have).
pub trait Collective {
    /// This process's rank, 0-based; rank 0 alone writes checkpoints and prints progress.
    fn rank(&self) -> usize;
    /// How many ranks train together.
    fn world(&self) -> usize;
    /// The GPU this rank should take on its node (its rank among the ranks of the node).
    fn local_rank(&self) -> usize;
    /// `flat` (1-D f32, the same length on every rank) summed over the ranks, on `flat`'s
    /// device: every rank gets the same sums.
    fn sum(&self, flat: &Tensor) -> anyhow::Result<Tensor>;
    /// Whether `flag` holds on any rank; every rank gets the same answer.
    fn any(&self, flag: bool) -> anyhow::Result<bool>;
    /// The smallest and largest of `value` over the ranks.
    fn min_max(&self, value: u64) -> anyhow::Result<(u64, u64)>;
    /// `values` (the same length on every rank) summed over the ranks, in f64: counts up to
    /// 2^53 sum exactly (validation's BLEU statistics), and loss sums keep their precision.
    fn sum_f64(&self, values: &[f64]) -> anyhow::Result<Vec<f64>>;
    /// How long one collective call may wait for the other ranks before this rank gives up
    /// (one line on stderr, exit status 1). `TRANSFORMER_COLLECTIVE_TIMEOUT_S`, where set,
    /// wins over this. Nothing to wait for in one process.
    fn set_timeout(&self, _timeout: Duration) {}
}

/// One process training alone: every collective is the identity.
pub struct SingleProcess;

impl Collective for SingleProcess {
    fn rank(&self) -> usize {
        0
    }

    fn world(&self) -> usize {
        1
    }

    fn local_rank(&self) -> usize {
        0
    }

    fn sum(&self, flat: &Tensor) -> anyhow::Result<Tensor> {
        Ok(flat.clone())
    }

    fn any(&self, flag: bool) -> anyhow::Result<bool> {
        Ok(flag)
    }

    fn min_max(&self, value: u64) -> anyhow::Result<(u64, u64)> {
        Ok((value, value))
    }

    fn sum_f64(&self, values: &[f64]) -> anyhow::Result<Vec<f64>> {
        Ok(values.to_vec())
    }
}

/// The world size `mpirun` (OpenMPI, or a PMI launcher such as MPICH's or Slurm's) gave this
/// process, if it started one.
pub fn launched_world_size() -> Option<usize> {
    ["OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE"]
        .iter()
        .find_map(|name| std::env::var(name).ok()?.parse().ok())
}

/// This process's place in the job: MPI's world under `mpirun` (in a build with `--features
/// mpi`), otherwise a single process. A rank left waiting for the others ends the process
/// with one line that ends in `resume_advice` (how to resume the run, in the caller's words).
pub fn join(resume_advice: &'static str) -> anyhow::Result<Box<dyn Collective>> {
    match launched_world_size() {
        None => Ok(Box::new(SingleProcess)),
        Some(world) => join_mpi(world, resume_advice),
    }
}

#[cfg(feature = "mpi")]
fn join_mpi(_world: usize, resume_advice: &'static str) -> anyhow::Result<Box<dyn Collective>> {
    Ok(Box::new(mpi_world::MpiWorld::join(resume_advice)?))
}

#[cfg(not(feature = "mpi"))]
fn join_mpi(world: usize, _resume_advice: &'static str) -> anyhow::Result<Box<dyn Collective>> {
    if world == 1 {
        return Ok(Box::new(SingleProcess));
    }
    anyhow::bail!(
        "mpirun started {world} processes, but this binary was built without MPI; rebuild it \
         with `cargo build --release --features mpi` (needs libopenmpi-dev and libclang-dev)"
    )
}
