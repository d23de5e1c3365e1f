//! `transformer bench WORKLOAD`: runs one workload of the speed benchmark and prints its
//! measurement as one JSON line (scripts/bench.sh collects them next to PyTorch's).
//!
//! Its arguments: the workload and its sizes.

use std::path::PathBuf;

use clap::Args;

use crate::bench::{self, DecodeWorkload, MarianWorkload};
use crate::config::ComputeType;
use crate::distributed;
use crate::errors::UsageError;
use crate::flags::{at_least_one, DeviceArgs};
use crate::infer::LoadOptions;
use crate::progress::Verbosity;
use crate::stdout::print_line;

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
    /// Not a timing: the fused kernels (LayerNorm, Adam) against candle's composed ops on
    /// --device, a line each; fails if any differs (on a GPU, with TRANSFORMER_KERNELS=cuda-fused)
    CheckKernels,
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

/// Sentences of the batched decoding workloads.
const BATCH_SENTENCES: usize = 32;

pub fn run(args: BenchArgs) -> anyhow::Result<()> {
    // Under mpirun (the multi30k workload only), rank 0 prints the measurement.
    let collective = distributed::join(crate::errors::MPI_RESUME_ADVICE)?;
    let lead = collective.rank() == 0;
    let device_args = DeviceArgs {
        device: args.device.device.for_local_rank(collective.local_rank()),
    };
    let device = crate::device_choice::device_from(&device_args, Verbosity::Normal)?;
    let takes_dtype = [
        BenchWorkload::Matmul,
        BenchWorkload::ToyTrain,
        BenchWorkload::Copy,
        BenchWorkload::Multi30k,
    ];
    let marian = [
        BenchWorkload::MarianGreedy1,
        BenchWorkload::MarianGreedy32,
        BenchWorkload::MarianBeam4,
    ];
    if args.vocab_map.is_some() && !marian.contains(&args.workload) {
        return Err(UsageError(
            "--vocab-map applies to the marian-* workloads only (a map names a MarianMT \
             directory's tokens)"
                .into(),
        )
        .into());
    }
    if args.dtype != crate::config::ComputeDtype::F32 && !takes_dtype.contains(&args.workload) {
        // Decoding, the batch export and the gradient sum have no precision to choose.
        let why = match args.workload {
            BenchWorkload::ExportMulti30k => "the batch export writes ids",
            BenchWorkload::CheckKernels => "the kernel check is f32",
            BenchWorkload::Allreduce => "the gradient sum is f32",
            _ => "decoding runs in float32 (--compute-type int8 or bfloat16 for the others)",
        };
        return Err(crate::errors::UsageError(format!(
            "--dtype {} applies to the training workloads and matmul only; {why}",
            args.dtype.name()
        ))
        .into());
    }
    let distributed = [BenchWorkload::Multi30k, BenchWorkload::Allreduce];
    if collective.world() > 1 && !distributed.contains(&args.workload) {
        anyhow::bail!("under mpirun only the multi30k and allreduce workloads run");
    }
    let measurement = match args.workload {
        BenchWorkload::CheckKernels => return check_kernels(&device),
        BenchWorkload::ExportMulti30k => {
            bench::export_multi30k_batches(&args.batches, args.steps + 2)?;
            eprintln!("wrote {}", args.batches.display());
            return Ok(());
        }
        BenchWorkload::Matmul => bench::matmul_ceiling(args.steps, args.dtype, &device)?,
        BenchWorkload::ToyTrain => bench::toy_training(args.steps, args.dtype, &device)?,
        BenchWorkload::Copy => bench::copy_task(args.steps, args.dtype, &device)?,
        BenchWorkload::Multi30k => bench::multi30k_training(
            &args.batches,
            args.steps,
            args.accumulate,
            args.dtype,
            &device,
            collective,
        )?,
        BenchWorkload::Greedy1 | BenchWorkload::Greedy32 | BenchWorkload::Beam5 => {
            let (kind, sentences) = match args.workload {
                BenchWorkload::Greedy1 => (DecodeWorkload::GreedyOne, args.steps),
                BenchWorkload::Greedy32 => (DecodeWorkload::GreedyBatch, BATCH_SENTENCES),
                _ => (DecodeWorkload::Beam, BATCH_SENTENCES),
            };
            let compute = args.compute_type.unwrap_or_default();
            bench::decoding(kind, sentences, &device, compute)?
        }
        BenchWorkload::Allreduce => bench::all_reduce(args.steps, &device, &*collective)?,
        BenchWorkload::MarianGreedy1
        | BenchWorkload::MarianGreedy32
        | BenchWorkload::MarianBeam4 => {
            let Some(dir) = &args.checkpoint else {
                return Err(UsageError(
                    "the marian-* workloads translate with a MarianMT directory: pass \
                     --checkpoint DIR (scripts/make_marian_fixture.py --bench writes one)"
                        .into(),
                )
                .into());
            };
            let (kind, sentences) = match args.workload {
                BenchWorkload::MarianGreedy1 => (MarianWorkload::GreedyOne, args.steps),
                BenchWorkload::MarianGreedy32 => (MarianWorkload::GreedyBatch, BATCH_SENTENCES),
                _ => (MarianWorkload::Beam4, BATCH_SENTENCES),
            };
            let options = LoadOptions {
                compute_type: Some(args.compute_type.unwrap_or_default()),
                vocab_map: args.vocab_map.clone(),
                ..LoadOptions::default()
            };
            bench::marian_decoding(kind, sentences, dir, &device, options)?
        }
    };
    if !lead {
        return Ok(());
    }
    // Which instructions ran: our kernels' level under TRANSFORMER_MAX_ISA, and gemm's (which
    // the cap does not reach; scripts/bench.sh checks the two agree).
    let mut line = serde_json::to_value(&measurement)?;
    line["isa"] = crate::kernels::isa::best().name().into();
    line["gemm_isa"] = crate::kernels::isa::gemm_isa().name().into();
    print_line(&line.to_string())
}

/// `bench check-kernels`: each fused kernel against the composed path on `device`, a line
/// each on stdout; an error naming those that differ.
fn check_kernels(device: &candle_core::Device) -> anyhow::Result<()> {
    let kernels = std::env::var(crate::device_choice::KERNELS_VARIABLE);
    if kernels.as_deref() == Ok("composed") {
        eprintln!(
            "note: {}=composed: both sides run candle's composed ops, so nothing fused is checked",
            crate::device_choice::KERNELS_VARIABLE
        );
    } else if device.is_cuda() && kernels.as_deref() != Ok("cuda-fused") {
        eprintln!(
            "note: {}=cuda-fused is not set, so both sides run candle's composed ops on the GPU",
            crate::device_choice::KERNELS_VARIABLE
        );
    }
    let checks = crate::kernels::fused_check::check_fused_kernels(device)?;
    let mut failed = Vec::new();
    for check in &checks {
        let verdict = if check.passed() { "PASS" } else { "FAIL" };
        print_line(&format!(
            "{verdict} {}: relative difference {:.2e} (tolerance {:.0e})",
            check.name, check.relative_difference, check.tolerance
        ))?;
        if !check.passed() {
            failed.push(check.name.clone());
        }
    }
    if !failed.is_empty() {
        anyhow::bail!(
            "{} of {} fused kernels differ from the composed path on {device:?}: {}",
            failed.len(),
            checks.len(),
            failed.join(", ")
        );
    }
    Ok(())
}
