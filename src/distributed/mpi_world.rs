//! MPI's world as the trainer's [`Collective`]: OpenMPI (or any MPI) through the `mpi` crate.
//! Buffers are summed with `MPI_Allreduce` in fixed-size buckets, from host memory (a GPU's
//! are copied there and back); with `--features nccl` a CUDA buffer goes to NCCL (see
//! `nccl.rs`), whose communicator is made on first use from an id rank 0 broadcasts.

use candle_core::Tensor;
use mpi::collective::SystemOperation;
use mpi::environment::Universe;
use mpi::topology::{Communicator, SimpleCommunicator};
use mpi::traits::*;

use super::Collective;

/// Floats per `MPI_Allreduce` call: 16 MiB buffers keep each call large enough to run at the
/// interconnect's bandwidth without doubling the peak memory of a large model's gradients.
const BUCKET_FLOATS: usize = 4 << 20;

/// This process's membership of MPI's world, for the whole run (dropping it finalises MPI).
pub struct MpiWorld {
    world: SimpleCommunicator,
    local_rank: usize,
    #[cfg(feature = "nccl")]
    nccl: std::cell::OnceCell<super::nccl::NcclSum>,
    // Declared last so that it is dropped (MPI_Finalize) after everything that uses MPI.
    _universe: Universe,
}

impl MpiWorld {
    /// Initialises MPI (the calling thread is the one that makes every MPI call).
    pub fn join() -> anyhow::Result<Self> {
        let (universe, _) = mpi::initialize_with_threading(mpi::Threading::Funneled)
            .ok_or_else(|| anyhow::anyhow!("MPI could not be initialised (or already was)"))?;
        let world = universe.world();
        // Ranks that share a node's memory are that node's ranks: one GPU each, in rank order.
        let node = world.split_shared(world.rank());
        let local_rank = usize::try_from(node.rank())?;
        Ok(Self {
            world,
            local_rank,
            #[cfg(feature = "nccl")]
            nccl: std::cell::OnceCell::new(),
            _universe: universe,
        })
    }

    fn sum_on_host(&self, flat: &Tensor) -> anyhow::Result<Tensor> {
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

    fn reduce_u64(&self, value: u64, op: SystemOperation) -> u64 {
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
        Ok(self.reduce_u64(u64::from(flag), SystemOperation::max()) > 0)
    }

    fn min_max(&self, value: u64) -> anyhow::Result<(u64, u64)> {
        let min = self.reduce_u64(value, SystemOperation::min());
        let max = self.reduce_u64(value, SystemOperation::max());
        Ok((min, max))
    }
}
