//! `transformer train`: config -> corpora -> tokenizers -> training loop -> run directory;
//! `--resume` continues a run from its `last/` checkpoint; SIGINT/SIGTERM stop it cleanly.
//! The run's start (new or resumed) is in `train/start.rs`, what the loop reports and asks to
//! save reaches the run directory through `train/observer.rs`, and how the run ended is told
//! in `train/finish.rs`.
//!
//! Its arguments: the config, resuming, the run directory, the step limit. [`run_for`] is
//! the same run for a program (the Python package): stopped through a flag it sets, told of
//! each step, and answered with what the run did.

use std::path::PathBuf;
use std::sync::atomic::AtomicI32;
use std::sync::Arc;
use std::time::Instant;

use clap::Args;

use crate::checkpoint;
use crate::distributed;
use crate::flags::{at_least_one, DeviceArgs};
use crate::metrics::{MetricRecord, RunPart};
use crate::progress::{TrainProgress, Verbosity};
use crate::stop_signals::StopSignals;
use crate::train::precision::Precision;
use crate::train::StepReport;
use finish::{average_at_the_end, averaging_missed, report, show_what_it_learned, still_to_train};
use observer::{CheckpointingObserver, StopSource};
use start::{new_trainer, resumed_trainer};

mod finish;
mod observer;
mod start;

#[derive(Debug, Args)]
pub struct TrainArgs {
    /// TOML config; without it, the built-in base config (configs/base.toml)
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Continue the run in RUN_DIR from its last/ checkpoint, exactly where it stopped
    #[arg(long, value_name = "RUN_DIR", conflicts_with_all = ["config", "out", "seed", "overwrite"])]
    pub resume: Option<PathBuf>,
    /// Stop after step N with a checkpoint that --resume continues (for time-limited jobs)
    #[arg(long, value_name = "N", value_parser = at_least_one)]
    pub stop_at_step: Option<usize>,
    /// Run directory (overrides the config's run.dir; default runs/<config name>)
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Seed for initialisation, dropout and data order (overrides training.seed)
    #[arg(long, value_name = "S")]
    pub seed: Option<u64>,
    /// Replace a checkpoint already in the run directory
    #[arg(long)]
    pub overwrite: bool,
    /// What the passes compute in, over the config's training.dtype (a resumed run's too):
    /// f32; bf16 (on the CPU, products in bf16 on its bf16 engine, everything else f32; on a
    /// GPU, the passes in bf16); f16 (GPUs only). Weights and checkpoints stay f32
    #[arg(long, value_name = "DTYPE", value_parser = crate::config::ComputeDtype::parse)]
    pub dtype: Option<crate::config::ComputeDtype>,
    /// No progress output (errors and warnings still go to stderr)
    #[arg(long, short)]
    pub quiet: bool,
    #[command(flatten)]
    pub device: DeviceArgs,
    /// A config given as TOML text instead of a file (a program's), and the name its
    /// messages call it by; never a flag.
    #[arg(skip)]
    pub config_text: Option<ConfigText>,
}

/// A config given as text, and what messages call it.
#[derive(Debug, Clone)]
pub struct ConfigText {
    pub toml: String,
    pub name: String,
}

/// Who runs the training and how it hears of it: the command line (SIGINT and SIGTERM stop
/// it, the sample translations are shown on stdout at the end) or a program, which stops it
/// through a flag and is told of each step.
#[derive(Default)]
pub struct Caller {
    /// Set to a signal's number to stop after the step under way, saving a checkpoint;
    /// `None` listens for SIGINT and SIGTERM, as the command does.
    pub stop: Option<Arc<AtomicI32>>,
    /// Told of each step and of each record written to metrics.jsonl.
    pub progress: Option<ProgressEar>,
    /// Translate the sample sentences on stdout at the end, as the command does.
    pub show_samples: bool,
}

/// A caller's ear for the run's progress.
pub type ProgressEar = Box<dyn FnMut(Progress<'_>) + Send>;

/// What a [`Caller`] is told while the run goes on.
pub enum Progress<'a> {
    Step(&'a StepReport),
    /// An epoch's or a validation's record, as metrics.jsonl has it.
    Record(&'a MetricRecord),
}

/// What a run did, for a program: where it is, whether it finished, and its records.
#[derive(Debug, Clone)]
pub struct TrainReport {
    pub run_dir: PathBuf,
    /// The step the run stands at (of `total_steps`).
    pub step: usize,
    pub total_steps: usize,
    /// It trained all its epochs or stopped early (training.patience); false when stopped
    /// at `--stop-at-step`.
    pub finished: bool,
    /// Its metrics.jsonl records, the whole run's.
    pub records: Vec<MetricRecord>,
}

pub fn run(args: TrainArgs) -> anyhow::Result<()> {
    let caller = Caller {
        show_samples: true,
        ..Caller::default()
    };
    run_for(args, caller).map(|_| ())
}

/// `transformer train` for `caller`: the same run, its errors the command's (an interrupted
/// run's is [`crate::errors::Interrupted`], after its checkpoint is saved).
pub fn run_for(args: TrainArgs, caller: Caller) -> anyhow::Result<TrainReport> {
    // Under mpirun, rank 0 alone shows progress and writes the run directory.
    let collective = distributed::join(crate::errors::MPI_RESUME_ADVICE)?;
    let lead = collective.rank() == 0;
    let verbosity = if args.quiet || !lead {
        Verbosity::Quiet
    } else {
        Verbosity::Normal
    };
    let device_args = DeviceArgs {
        device: args.device.device.for_local_rank(collective.local_rank()),
    };
    let device = crate::device_choice::device_from(&device_args, verbosity)?;
    let started = Instant::now();
    // Held to the end: a second `train` into the same run directory is refused.
    let (mut trainer, run_dir, samples, _run_lock) = match &args.resume {
        Some(run_dir) => resumed_trainer(run_dir, args.dtype, &device, collective, verbosity)?,
        None => new_trainer(&args, &device, collective, verbosity)?,
    };
    // Where the time went, from the run's figures before this session to its last.
    let before = trainer.time_spent();
    trainer.count_time(RunPart::Start, started.elapsed().as_secs_f64());
    let position = trainer.position().clone();
    let precision = trainer.precision();
    if verbosity == Verbosity::Normal && precision != Precision::F32 {
        eprintln!("computing in {}", precision.describe());
    }
    if let Some(wanted) = averaging_missed(&trainer, &run_dir) {
        // The run's last act, which a kill stopped: done now, so that it is not lost.
        eprintln!(
            "{} finished training but was stopped before averaging its checkpoints \
             (training.average_last); averaging them now",
            run_dir.display()
        );
        average_at_the_end(&run_dir, wanted)?;
        return Ok(report_of(&trainer, run_dir, true));
    }
    if !still_to_train(&trainer, &run_dir, args.stop_at_step)? {
        return Ok(report_of(&trainer, run_dir, true));
    }
    let stop = match caller.stop {
        Some(flag) => StopSource::Flag(flag),
        None => StopSource::Signals(StopSignals::install(
            |_| {},
            "the step under way was not saved (a checkpoint written before it stands)",
        )?),
    };
    let mut observer = CheckpointingObserver {
        progress: TrainProgress::new(
            trainer.total_steps(),
            position.step,
            trainer.config().training.log_every,
            verbosity,
        ),
        run_dir: run_dir.clone(),
        stop,
        told: caller.progress,
        stop_at_step: args.stop_at_step,
        step: position.step,
        // A resumed run's checkpoint stands until this run writes one.
        saved_step: (position.step > 0).then_some(position.step),
        lead,
        plotted: None,
    };
    let outcome = trainer.run(&mut observer);
    observer.progress.finish();
    if !lead {
        // Rank 0 says how the run ended (its exit status is the job's); the others report
        // only errors of their own.
        return outcome.map(|_| report_of(&trainer, run_dir, false));
    }
    let ended = report(outcome, &trainer, &observer, &run_dir);
    let mut averaged = Ok(());
    if let (Ok(true), Some(wanted)) = (&ended, trainer.config().training.average_last) {
        let averaging = Instant::now();
        averaged = average_at_the_end(&run_dir, wanted);
        trainer.count_time(RunPart::Averaging, averaging.elapsed().as_secs_f64());
    }
    // The time's record, however the run ended: a run that failed says where its time went
    // too, and its own error is the one told.
    let recorded = checkpoint::save_metrics(
        &run_dir,
        trainer.record_time(before.wall_s + started.elapsed().as_secs_f64()),
    );
    let finished = ended?;
    averaged?;
    recorded?;
    let session = trainer.time_spent().since(&before);
    if finished {
        eprintln!(
            "trained {} in {:.1}s; checkpoints in {}",
            count(trainer.step() - position.step, "step"),
            session.wall_s,
            run_dir.display()
        );
    }
    if verbosity == Verbosity::Normal {
        eprintln!("where the time went: {}", session.summary());
    }
    if finished && caller.show_samples {
        show_what_it_learned(&trainer, &samples)?;
    }
    Ok(report_of(&trainer, run_dir, finished))
}

/// What `trainer`'s run in `run_dir` did.
fn report_of(trainer: &crate::train::Trainer, run_dir: PathBuf, finished: bool) -> TrainReport {
    TrainReport {
        run_dir,
        step: trainer.step(),
        total_steps: trainer.total_steps(),
        finished,
        records: trainer.metrics().to_vec(),
    }
}

/// `1 step`, `2 steps`.
fn count(n: usize, noun: &str) -> String {
    match n {
        1 => format!("1 {noun}"),
        _ => format!("{n} {noun}s"),
    }
}
