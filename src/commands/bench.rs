//! `transformer bench WORKLOAD`: runs one workload of the speed benchmark and prints its
//! measurement as one JSON line (scripts/bench.sh collects them next to PyTorch's).

use super::stdout::print_line;
use crate::bench::{self, DecodeWorkload};
use crate::cli::{BenchArgs, BenchWorkload};
use crate::progress::Verbosity;

/// Sentences of the batched decoding workloads.
const BATCH_SENTENCES: usize = 32;

pub fn run(args: BenchArgs) -> anyhow::Result<()> {
    let device = super::device_from(&args.device, Verbosity::Normal)?;
    let measurement = match args.workload {
        BenchWorkload::ExportMulti30k => {
            bench::export_multi30k_batches(&args.batches, args.steps + 2)?;
            eprintln!("wrote {}", args.batches.display());
            return Ok(());
        }
        BenchWorkload::Matmul => bench::matmul_ceiling(args.steps, &device)?,
        BenchWorkload::ToyTrain => bench::toy_training(args.steps, &device)?,
        BenchWorkload::Copy => bench::copy_task(args.steps, &device)?,
        BenchWorkload::Multi30k => bench::multi30k_training(&args.batches, args.steps, &device)?,
        BenchWorkload::Greedy1 => bench::decoding(DecodeWorkload::GreedyOne, args.steps, &device)?,
        BenchWorkload::Greedy32 => {
            bench::decoding(DecodeWorkload::GreedyBatch, BATCH_SENTENCES, &device)?
        }
        BenchWorkload::Beam5 => bench::decoding(DecodeWorkload::Beam, BATCH_SENTENCES, &device)?,
    };
    print_line(&serde_json::to_string(&measurement)?)
}
