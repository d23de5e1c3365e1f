//! GPU gradients summed with NCCL (cudarc's bindings, which load libnccl at run time): rank 0
//! makes the communicator's unique id and MPI broadcasts it, as nccl-tests bootstraps.

use std::ffi::c_char;

use candle_core::backend::BackendStorage;
use candle_core::cuda_backend::cudarc::nccl::safe::{Comm, Id, ReduceOp};
use candle_core::{CpuStorage, CudaStorage, CustomOp1, Device, Layout, Shape, Tensor};
use mpi::topology::{Communicator, SimpleCommunicator};
use mpi::traits::*;

/// An NCCL communicator over every rank's GPU, on the stream candle's device computes on.
pub struct NcclSum {
    comm: Comm,
}

impl NcclSum {
    /// Joins every rank's GPU `device` into one communicator (a collective call: every rank
    /// makes it at the same point).
    pub fn new(world: &SimpleCommunicator, device: &Device) -> anyhow::Result<Self> {
        let Device::Cuda(cuda) = device else {
            anyhow::bail!("NCCL sums CUDA tensors only, not {device:?}")
        };
        let rank = world.rank() as usize;
        let mut id_bytes = [0 as c_char; 128];
        if rank == 0 {
            let id = Id::new().map_err(|e| {
                anyhow::anyhow!(
                    "cannot create an NCCL id ({e:?}); is libnccl installed (NVIDIA's nccl \
                     wheel on PyPI, or the system's libnccl2)?"
                )
            })?;
            id_bytes = *id.internal();
        }
        world.process_at_rank(0).broadcast_into(&mut id_bytes[..]);
        let comm = Comm::from_rank(
            cuda.cuda_stream(),
            rank,
            world.size() as usize,
            Id::uninit(id_bytes),
        )
        .map_err(|e| anyhow::anyhow!("cannot join the NCCL communicator: {e:?}"))?;
        Ok(Self { comm })
    }

    /// `flat` (1-D f32 on this rank's GPU) summed over every rank.
    pub fn sum(&self, flat: &Tensor) -> anyhow::Result<Tensor> {
        Ok(flat
            .contiguous()?
            .apply_op1_no_bwd(&AllReduce { comm: &self.comm })?)
    }
}

/// One `ncclAllReduce` (sum) as a candle op, so that it runs on candle's stream in order with
/// the backward pass that produced its input.
struct AllReduce<'a> {
    comm: &'a Comm,
}

// SAFETY: the op is applied, and dropped, on the thread that owns the communicator; candle
// asks for Send + Sync only because ops may be stored in the graph, which `apply_op1_no_bwd`
// does not do.
unsafe impl Send for AllReduce<'_> {}
unsafe impl Sync for AllReduce<'_> {}

impl CustomOp1 for AllReduce<'_> {
    fn name(&self) -> &'static str {
        "nccl-all-reduce"
    }

    fn cpu_fwd(&self, _: &CpuStorage, _: &Layout) -> candle_core::Result<(CpuStorage, Shape)> {
        candle_core::bail!("nccl-all-reduce runs on CUDA tensors only")
    }

    fn cuda_fwd(
        &self,
        storage: &CudaStorage,
        layout: &Layout,
    ) -> candle_core::Result<(CudaStorage, Shape)> {
        let Some((start, end)) = layout.contiguous_offsets() else {
            candle_core::bail!("nccl-all-reduce needs a contiguous tensor")
        };
        let input = storage.as_cuda_slice::<f32>()?.slice(start..end);
        let device = storage.device().clone();
        let mut sums = device.alloc_zeros::<f32>(end - start)?;
        self.comm
            .all_reduce(&input, &mut sums, &ReduceOp::Sum)
            .map_err(|e| candle_core::Error::Msg(format!("ncclAllReduce failed: {e:?}")))?;
        Ok((
            CudaStorage::wrap_cuda_slice(sums, device),
            layout.shape().clone(),
        ))
    }
}
