//! `transformer bench`'s flags: the workload and its sizes.

use std::path::PathBuf;

use clap::Args;

use super::{at_least_one, DeviceArgs};
use crate::config::ComputeType;

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum BenchWorkload {
    /// One 800x512 by 512x2048 matrix product, --steps times: the machine's attainable FLOP/s
    Matmul,
    /// Training steps of the base model on the two toy pairs
    ToyTrain,
    /// The Annotated Transformer's copy task (N=2, batches of 80)
    Copy,
    /// Training steps of configs/multi30k-cpu.toml's model on Multi30k batches (--batches)
    Multi30k,
    /// Write the Multi30k batches both implementations train on (--batches FILE)
    ExportMulti30k,
    /// Greedy decoding with the base model, one sentence at a time
    Greedy1,
    /// Greedy decoding of 32 sentences in one batch
    Greedy32,
    /// Beam search (beam 5) over 32 sentences
    Beam5,
    /// A MarianMT directory (--checkpoint) translating test2016 sentences greedily, one at a
    /// time (--steps sentences)
    MarianGreedy1,
    /// The MarianMT directory translating 32 test2016 sentences greedily in one batch
    MarianGreedy32,
    /// The MarianMT directory translating 32 test2016 sentences with beam 4
    MarianBeam4,
    /// Under mpirun: --steps sums over the ranks of a gradient buffer the size of
    /// configs/multi30k-cpu.toml's model, alone (the communication of data-parallel training)
    Allreduce,
}

#[derive(Debug, Args)]
pub struct BenchArgs {
    pub workload: BenchWorkload,
    /// Timed training steps, or sentences for greedy-1
    #[arg(long, default_value_t = 10, value_name = "N", value_parser = at_least_one)]
    pub steps: usize,
    /// The Multi30k batch file (written by export-multi30k, read by multi30k)
    #[arg(
        long,
        value_name = "FILE",
        default_value = "target/bench-multi30k.safetensors"
    )]
    pub batches: PathBuf,
    /// The MarianMT directory the marian-* workloads translate with
    #[arg(long, value_name = "DIR")]
    pub checkpoint: Option<PathBuf>,
    /// What the marian-* workloads' linear layers compute in: float32, int8 or bfloat16
    #[arg(long, value_name = "TYPE", value_parser = ComputeType::parse)]
    pub compute_type: Option<ComputeType>,
    /// A vocabulary map the marian-* workloads decode over (CTranslate2's vmap.txt)
    #[arg(long, value_name = "FILE")]
    pub vocab_map: Option<PathBuf>,
    /// Batches each rank sums per optimiser step (multi30k): one process with
    /// --accumulate R trains on the same batches per step as R ranks under mpirun
    #[arg(long, default_value_t = 1, value_name = "N", value_parser = at_least_one)]
    pub accumulate: usize,
    /// What the training workloads and matmul compute in: f32, or bf16 (on the CPU, products
    /// in bf16 on its bf16 engine, as training.dtype = "bf16" trains)
    #[arg(long, value_name = "DTYPE", default_value = "f32", value_parser = crate::config::ComputeDtype::parse)]
    pub dtype: crate::config::ComputeDtype,
    #[command(flatten)]
    pub device: DeviceArgs,
}
