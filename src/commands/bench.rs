//! `transformer bench WORKLOAD`: runs one workload of the speed benchmark and prints its
//! measurement as one JSON line (scripts/bench.sh collects them next to PyTorch's).

use super::stdout::print_line;
use super::UsageError;
use crate::bench::{self, DecodeWorkload, MarianWorkload};
use crate::cli::{BenchArgs, BenchWorkload, DeviceArgs};
use crate::distributed;
use crate::infer::LoadOptions;
use crate::progress::Verbosity;

/// Sentences of the batched decoding workloads.
const BATCH_SENTENCES: usize = 32;

pub fn run(args: BenchArgs) -> anyhow::Result<()> {
    // Under mpirun (the multi30k workload only), rank 0 prints the measurement.
    let collective = distributed::join(super::MPI_RESUME_ADVICE)?;
    let lead = collective.rank() == 0;
    let device_args = DeviceArgs {
        device: args.device.device.for_local_rank(collective.local_rank()),
    };
    let device = super::device_from(&device_args, Verbosity::Normal)?;
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
            BenchWorkload::Allreduce => "the gradient sum is f32",
            _ => "decoding runs in float32 (--compute-type int8 or bfloat16 for the others)",
        };
        return Err(super::UsageError(format!(
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
    print_line(&serde_json::to_string(&measurement)?)
}
