//! MPI's world as the trainer's [`Collective`]: OpenMPI (or any MPI) through the `mpi` crate.
//! Buffers are summed with `MPI_Allreduce` in fixed-size buckets, from host memory (a GPU's
//! are copied there and back); with `--features nccl` a CUDA buffer goes to NCCL (see
//! `nccl.rs`), whose communicator is made on first use from an id rank 0 broadcasts. Every
//! call runs under a deadline (see `watchdog.rs`): a rank left waiting longer than the
//! collective timeout says so on stderr and ends with status 1.

use std::io::Write;
use std::time::Duration;

use candle_core::Tensor;
use mpi::collective::SystemOperation;
use mpi::environment::Universe;
use mpi::topology::{Communicator, SimpleCommunicator};
use mpi::traits::*;

use super::watchdog::{self, Overdue, Watchdog};
use super::Collective;

/// Floats per `MPI_Allreduce` call: 16 MiB buffers keep each call large enough to run at the
/// interconnect's bandwidth without doubling the peak memory of a large model's gradients.
const BUCKET_FLOATS: usize = 4 << 20;

/// This process's membership of MPI's world, for the whole run (dropping it finalises MPI).
pub struct MpiWorld {
    world: SimpleCommunicator,
    local_rank: usize,
    watchdog: Watchdog,
    /// Whether `TRANSFORMER_COLLECTIVE_TIMEOUT_S` set the timeout (the trainer's setting then
    /// does not replace it).
    timeout_from_env: bool,
    #[cfg(feature = "nccl")]
    nccl: std::cell::OnceCell<super::nccl::NcclSum>,
    // Declared last so that it is dropped (MPI_Finalize) after everything that uses MPI.
    _universe: Universe,
}

impl MpiWorld {
    /// Initialises MPI (the calling thread is the one that makes every MPI call) and starts
    /// the watchdog of its calls, whose last word is `resume_advice`.
    pub fn join(resume_advice: &'static str) -> anyhow::Result<Self> {
        let env_timeout = watchdog::timeout_from_env()?;
        let (universe, _) = mpi::initialize_with_threading(mpi::Threading::Funneled)
            .ok_or_else(|| anyhow::anyhow!("MPI could not be initialised (or already was)"))?;
        let world = universe.world();
        let (rank, size) = (world.rank(), world.size());
        let timeout = env_timeout.unwrap_or(super::DEFAULT_COLLECTIVE_TIMEOUT);
        let watchdog = Watchdog::start(timeout, move |overdue| {
            give_up(rank, size, overdue, resume_advice)
        })?;
        // Ranks that share a node's memory are that node's ranks: one GPU each, in rank order.
        let node = {
            let _watched = watchdog.watch("MPI's start (grouping the ranks by host)");
            world.split_shared(rank)
        };
        let local_rank = usize::try_from(node.rank())?;
        Ok(Self {
            world,
            local_rank,
            watchdog,
            timeout_from_env: env_timeout.is_some(),
            #[cfg(feature = "nccl")]
            nccl: std::cell::OnceCell::new(),
            _universe: universe,
        })
    }

    fn sum_on_host(&self, flat: &Tensor) -> anyhow::Result<Tensor> {
        let _watched = self.watchdog.watch("a gradient sum");
        let send = flat.to_vec1::<f32>()?;
        let mut sums = vec![0f32; send.len()];
        for (part, into) in send
            .chunks(BUCKET_FLOATS)
            .zip(sums.chunks_mut(BUCKET_FLOATS))
        {
            self.world
                .all_reduce_into(part, into, SystemOperation::sum());
        }
        Ok(Tensor::from_vec(sums, send.len(), flat.device())?)
    }

    fn reduce_u64(&self, value: u64, op: SystemOperation, what: &'static str) -> u64 {
        let _watched = self.watchdog.watch(what);
        let mut out = 0u64;
        self.world.all_reduce_into(&value, &mut out, op);
        out
    }
}

impl Collective for MpiWorld {
    fn rank(&self) -> usize {
        // MPI ranks are non-negative.
        self.world.rank() as usize
    }

    fn world(&self) -> usize {
        self.world.size() as usize
    }

    fn local_rank(&self) -> usize {
        self.local_rank
    }

    fn sum(&self, flat: &Tensor) -> anyhow::Result<Tensor> {
        #[cfg(feature = "nccl")]
        if let candle_core::Device::Cuda(_) = flat.device() {
            let _watched = self.watchdog.watch("a gradient sum (NCCL)");
            let nccl = match self.nccl.get() {
                Some(nccl) => nccl,
                None => {
                    let made = super::nccl::NcclSum::new(&self.world, flat.device())?;
                    self.nccl.get_or_init(|| made)
                }
            };
            return nccl.sum(flat);
        }
        self.sum_on_host(flat)
    }

    fn any(&self, flag: bool) -> anyhow::Result<bool> {
        let vote = self.reduce_u64(u64::from(flag), SystemOperation::max(), "a vote");
        Ok(vote > 0)
    }

    fn min_max(&self, value: u64) -> anyhow::Result<(u64, u64)> {
        let what = "a comparison of the weights";
        let min = self.reduce_u64(value, SystemOperation::min(), what);
        let max = self.reduce_u64(value, SystemOperation::max(), what);
        Ok((min, max))
    }

    fn sum_f64(&self, values: &[f64]) -> anyhow::Result<Vec<f64>> {
        let _watched = self.watchdog.watch("a sum of statistics");
        let mut sums = vec![0f64; values.len()];
        self.world
            .all_reduce_into(values, &mut sums[..], SystemOperation::sum());
        Ok(sums)
    }

    fn set_timeout(&self, timeout: Duration) {
        if !self.timeout_from_env {
            self.watchdog.set_timeout(timeout);
        }
    }
}

/// The watchdog's end of a rank left waiting: one line that says what happened and what to do,
/// then exit status 1, which makes mpirun end the job. `_exit`, not `exit`: the thread blocked
/// in MPI may hold locks that exit handlers would wait on.
fn give_up(rank: i32, size: i32, overdue: Overdue, resume_advice: &str) -> ! {
    let _ = writeln!(
        std::io::stderr(),
        "error: rank {rank} of {size} waited {:.0} s for the other ranks in {}: a rank has \
         stopped or the network between the hosts is down, so this rank stops too; the last \
         checkpoint is in last/ of the run directory: {resume_advice} once every host is back \
         ({} sets how long a rank waits, {} s by default)",
        overdue.waited.as_secs_f64(),
        overdue.what,
        super::COLLECTIVE_TIMEOUT_VARIABLE,
        super::DEFAULT_COLLECTIVE_TIMEOUT.as_secs(),
    );
    // SAFETY: _exit ends the process at once; nothing in this process runs after it.
    unsafe { libc::_exit(1) }
}
