//! `transformer train`: config -> corpora -> tokenizers -> training loop -> run directory;
//! `--resume` continues a run from its `last/` checkpoint; SIGINT/SIGTERM stop it cleanly.
//! The run's start (new or resumed) is in `train/start.rs`, what the loop reports and asks to
//! save reaches the run directory through `train/observer.rs`, and how the run ended is told
//! in `train/finish.rs`.

use std::time::Instant;

use super::stop_signals::StopSignals;
use crate::cli::{DeviceArgs, TrainArgs};
use crate::distributed;
use crate::progress::{TrainProgress, Verbosity};
use crate::train::precision::Precision;
use finish::{average_at_the_end, averaging_missed, report, show_what_it_learned, still_to_train};
use observer::CheckpointingObserver;
use start::{new_trainer, resumed_trainer};

mod finish;
mod observer;
mod start;

pub fn run(args: TrainArgs) -> anyhow::Result<()> {
    // Under mpirun, rank 0 alone shows progress and writes the run directory.
    let collective = distributed::join(super::MPI_RESUME_ADVICE)?;
    let lead = collective.rank() == 0;
    let verbosity = if args.quiet || !lead {
        Verbosity::Quiet
    } else {
        Verbosity::Normal
    };
    let device_args = DeviceArgs {
        device: args.device.device.for_local_rank(collective.local_rank()),
    };
    let device = super::device_from(&device_args, verbosity)?;
    let started = Instant::now();
    // Held to the end: a second `train` into the same run directory is refused.
    let (mut trainer, run_dir, samples, _run_lock) = match &args.resume {
        Some(run_dir) => resumed_trainer(run_dir, args.dtype, &device, collective, verbosity)?,
        None => new_trainer(&args, &device, collective, verbosity)?,
    };
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
        return average_at_the_end(&run_dir, wanted);
    }
    if !still_to_train(&trainer, &run_dir, args.stop_at_step)? {
        return Ok(());
    }
    let mut observer = CheckpointingObserver {
        progress: TrainProgress::new(
            trainer.total_steps(),
            position.step,
            trainer.config().training.log_every,
            verbosity,
        ),
        run_dir: run_dir.clone(),
        signals: StopSignals::install(
            |_| {},
            "the step under way was not saved (a checkpoint written before it stands)",
        )?,
        stop_at_step: args.stop_at_step,
        step: position.step,
        // A resumed run's checkpoint stands until this run writes one.
        saved_step: (position.step > 0).then_some(position.step),
        lead,
    };
    let outcome = trainer.run(&mut observer);
    observer.progress.finish();
    if !lead {
        // Rank 0 says how the run ended (its exit status is the job's); the others report
        // only errors of their own.
        return outcome.map(|_| ());
    }
    if !report(outcome, &trainer, &observer, &run_dir)? {
        return Ok(());
    }
    if let Some(wanted) = trainer.config().training.average_last {
        average_at_the_end(&run_dir, wanted)?;
    }
    eprintln!(
        "trained {} in {:.1}s; checkpoints in {}",
        count(trainer.step() - position.step, "step"),
        started.elapsed().as_secs_f64(),
        run_dir.display()
    );
    show_what_it_learned(&trainer, &samples)
}

/// `1 step`, `2 steps`.
fn count(n: usize, noun: &str) -> String {
    match n {
        1 => format!("1 {noun}"),
        _ => format!("{n} {noun}s"),
    }
}
