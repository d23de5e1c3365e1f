//! `transformer train`: config -> corpora -> tokenizers -> training loop -> run directory;
//! `--resume` continues a run from its `last/` checkpoint; SIGINT/SIGTERM stop it cleanly.
//! What the loop reports and asks to save reaches the run directory through `train/observer.rs`.

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{bail, Context};

use super::init_from;
use super::stdout::print_line;
use super::stop_signals::{signal_name, StopSignals};
use super::{Interrupted, UsageError};
use crate::checkpoint::{
    self, history, DirLock, LockHeld, WhenHeld, BEST_DIR, LAST_DIR, RUNS_ROOT,
};
use crate::cli::{DeviceArgs, TrainArgs};
use crate::config::Config;
use crate::distributed::{self, Collective};
use crate::infer::sampling::Sampling;
use crate::infer::text_generator::Continuation;
use crate::infer::Inference;
use crate::progress::{DataBars, TrainProgress, Verbosity};
use crate::train::{Diverged, RunOutcome, StopReason, Trainer, TrainingData};
use observer::CheckpointingObserver;

mod observer;

/// How many training sources to translate when training ends.
const SAMPLE_TRANSLATIONS: usize = 5;

pub fn run(args: TrainArgs) -> anyhow::Result<()> {
    // Under mpirun, rank 0 alone shows progress and writes the run directory.
    let collective = distributed::join()?;
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
        Some(run_dir) => resumed_trainer(run_dir, &device, collective, verbosity)?,
        None => new_trainer(&args, &device, collective, verbosity)?,
    };
    let position = trainer.position().clone();
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
        signals: StopSignals::install()?,
        stop_at_step: args.stop_at_step,
        step: position.step,
        saved_step: None,
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

/// `training.average_last`: the mean of the newest `wanted` kept checkpoints as `averaged/`,
/// or of as many as a short run kept, with a warning (the run's work is never refused here).
fn average_at_the_end(run_dir: &Path, wanted: usize) -> anyhow::Result<()> {
    let kept = history::kept(run_dir)?.len();
    if kept < wanted {
        eprintln!(
            "warning: training.average_last = {wanted} but the run kept {kept} checkpoint(s); \
             averaging {kept}"
        );
    }
    if kept == 0 {
        return Ok(());
    }
    let out = run_dir.join(history::AVERAGED_DIR);
    let steps = history::average(run_dir, wanted.min(kept), &out)?;
    eprintln!(
        "averaged the last {} kept checkpoints (steps {}..={}) into {}",
        steps.len(),
        steps[0],
        steps[steps.len() - 1],
        out.display()
    );
    Ok(())
}

/// Whether the run has steps left to take, or a clear refusal: a finished run says so and
/// returns false; a `--stop-at-step` at or before where the run stands is a usage error.
fn still_to_train(
    trainer: &Trainer,
    run_dir: &Path,
    stop_at_step: Option<usize>,
) -> anyhow::Result<bool> {
    let position = trainer.position();
    let epochs = trainer.config().training.epochs;
    if position.stopped_early {
        eprintln!(
            "{} stopped early after epoch {} (training.patience); nothing to resume",
            run_dir.display(),
            position.epoch - 1
        );
        return Ok(false);
    }
    if position.epoch > epochs {
        eprintln!(
            "{} already finished its {epochs} epochs (step {}); nothing to resume",
            run_dir.display(),
            position.step
        );
        return Ok(false);
    }
    if let Some(limit) = stop_at_step.filter(|&limit| limit <= position.step) {
        return Err(UsageError(format!(
            "--stop-at-step {limit} is not after step {}, where the run stands; give a \
             later step or leave it out",
            position.step
        ))
        .into());
    }
    Ok(true)
}

/// How a run that did not finish ended, as an error (divergence, a signal) or a line on
/// stderr (the step limit, then false), each saying where the last checkpoint is and how to
/// go on; true, and nothing printed, for a finished run.
fn report(
    outcome: anyhow::Result<RunOutcome>,
    trainer: &Trainer,
    observer: &CheckpointingObserver,
    run_dir: &Path,
) -> anyhow::Result<bool> {
    let resume_hint = format!("`transformer train --resume {}`", run_dir.display());
    match outcome {
        Err(e) => match e.downcast_ref::<Diverged>() {
            Some(diverged) => Err(anyhow::anyhow!(
                "{diverged}; {}; lower training.lr_factor, raise training.warmup or set \
                 training.clip_grad_norm (e.g. 1.0), then train again",
                match observer.saved_step {
                    Some(step) => format!(
                        "the checkpoint of step {step} is kept in {}",
                        run_dir.join(LAST_DIR).display()
                    ),
                    None => "no checkpoint was written".to_string(),
                }
            )),
            None => Err(e),
        },
        Ok(RunOutcome::Stopped(StopReason::Signal(signal))) => Err(Interrupted {
            exit_code: u8::try_from(128 + signal).unwrap_or(1),
            message: format!(
                "interrupted by {} at step {} of {}; checkpoint saved in {}; continue with \
                 {resume_hint}",
                signal_name(signal),
                trainer.step(),
                trainer.total_steps(),
                run_dir.join(LAST_DIR).display()
            ),
        }
        .into()),
        Ok(RunOutcome::Stopped(StopReason::OtherRank)) => Err(Interrupted {
            exit_code: 1,
            message: format!(
                "stopped at step {} of {} because another rank was interrupted; checkpoint \
                 saved in {}; continue with mpirun and {resume_hint}",
                trainer.step(),
                trainer.total_steps(),
                run_dir.join(LAST_DIR).display()
            ),
        }
        .into()),
        Ok(RunOutcome::Stopped(StopReason::StepLimit)) => {
            eprintln!(
                "stopped at step {} of {} as asked; checkpoint saved in {}; continue with \
                 {resume_hint}",
                trainer.step(),
                trainer.total_steps(),
                run_dir.join(LAST_DIR).display()
            );
            Ok(false)
        }
        Ok(RunOutcome::StoppedEarly { epoch, patience }) => {
            // A language model has no BLEU, so no best/: its last/ is the one to take.
            let best = run_dir.join(BEST_DIR);
            let kept = if best.is_dir() {
                best
            } else {
                run_dir.join(LAST_DIR)
            };
            eprintln!(
                "stopped early after epoch {epoch}: no better validation score for {patience} \
                 epochs (training.patience); the checkpoint to use is {}",
                kept.display()
            );
            Ok(true)
        }
        Ok(RunOutcome::Finished) => Ok(true),
    }
}

/// After a finished run: the sample sentences translated, or one greedy line of a language
/// model, on stdout.
fn show_what_it_learned(trainer: &Trainer, samples: &[String]) -> anyhow::Result<()> {
    match trainer.inference(trainer.decode_options()) {
        Inference::Translation(translator) => {
            let translations = translator.translate_batch(samples)?;
            for (source, translation) in samples.iter().zip(translations) {
                print_line(&format!("{source} => {}", translation.translation))?;
            }
        }
        Inference::Continuation(generator) => {
            let greedy = Continuation::Sample(Sampling {
                temperature: 0.0,
                top_k: None,
                seed: 0,
            });
            let line = generator.continue_text("", 60, greedy)?;
            print_line(&format!("sample: {}", line.text))?;
        }
    }
    Ok(())
}

/// A new run from `--config` (or the built-in base config).
fn new_trainer(
    args: &TrainArgs,
    device: &candle_core::Device,
    collective: Box<dyn Collective>,
    verbosity: Verbosity,
) -> anyhow::Result<(Trainer, PathBuf, Vec<String>, Option<DirLock>)> {
    let (mut config, name) = match &args.config {
        Some(path) => (Config::load(path)?, config_name(path)),
        None => (Config::builtin_base()?, "base".into()),
    };
    if let Some(seed) = args.seed {
        config.training.seed = seed;
    }
    let run_dir = args
        .out
        .clone()
        .or_else(|| config.run.dir.clone())
        .unwrap_or_else(|| Path::new(RUNS_ROOT).join(&name));
    config.run.dir = Some(run_dir.clone());
    let lead = collective.rank() == 0;
    let run_lock = lead.then(|| lock_run(&run_dir)).transpose()?;
    if checkpoint::resolve(&run_dir).is_ok() && !args.overwrite {
        bail!(
            "{} already holds a checkpoint; continue it with `transformer train --resume {0}`, \
             pass --overwrite to replace it, or --out DIR to train into another directory",
            run_dir.display()
        );
    }
    let initial = match config.training.init_from.clone() {
        Some(path) => Some(init_from::initial_weights(&mut config, &path, device)?),
        None => None,
    };
    let (tokenizers, weights) = initial.unzip();
    let inherited = tokenizers.is_some();
    let (data, samples) = TrainingData::prepare(
        &config,
        tokenizers,
        SAMPLE_TRANSLATIONS,
        &DataBars { verbosity },
        |line| {
            if lead {
                eprintln!("{line}")
            }
        },
    )?;
    if config.decode.length_ratio.is_none() {
        // What marks a translation short, measured on what the model learns from.
        config.decode.length_ratio = data.length_ratio();
    }
    if inherited && lead {
        init_from::warn_of_unknown_tokens(&data, &config);
    }
    let mut trainer = Trainer::joined(config, data, device, collective)?;
    if let Some(weights) = weights {
        trainer.start_from(&weights)?;
        // What fine-tuning starts from, so that its epochs' numbers have a baseline.
        if let (true, Some((loss, bleu))) = (lead, trainer.validate()?) {
            let bleu = bleu.map_or(String::new(), |b| format!(", valid BLEU {b:.2}"));
            eprintln!("before training: valid loss {loss:.4}{bleu} (training.init_from's weights)");
        }
    }
    if lead {
        // First what can still fail: a leftover that cannot be removed refuses the run while
        // the replaced one is whole.
        checkpoint::clear_leftovers(&run_dir)?;
        remove_replaced_run(&run_dir)?;
    }
    Ok((trainer, run_dir, samples, run_lock))
}

/// The run directory's lock, which a second `train` into it is refused by.
fn lock_run(run_dir: &Path) -> anyhow::Result<DirLock> {
    DirLock::acquire(run_dir, WhenHeld::REFUSE).map_err(|e| match e.downcast::<LockHeld>() {
        Ok(held) => anyhow::anyhow!(
            "{} is being trained by another process ({}); let it finish or stop it, or train \
             into another directory with --out DIR",
            run_dir.display(),
            held.holder
        ),
        Err(e) => e,
    })
}

/// Removes what a run being replaced (`--overwrite`) leaves that would be read as the new
/// run's: its best/ and averaged/ would answer for the run directory, and its kept
/// checkpoints be averaged with the new ones. Done once the new run is ready to train, so
/// that a config or corpus error leaves the old run whole.
fn remove_replaced_run(run_dir: &Path) -> anyhow::Result<()> {
    for stale in [BEST_DIR, history::AVERAGED_DIR, history::KEPT_DIR] {
        let stale = run_dir.join(stale);
        if stale.is_dir() {
            std::fs::remove_dir_all(&stale).with_context(|| {
                format!(
                    "cannot remove {} of the run being replaced; remove it by hand",
                    stale.display()
                )
            })?;
        }
    }
    Ok(())
}

/// The run in `run_dir`, at the step its `last/` checkpoint was written.
fn resumed_trainer(
    run_dir: &Path,
    device: &candle_core::Device,
    collective: Box<dyn Collective>,
    verbosity: Verbosity,
) -> anyhow::Result<(Trainer, PathBuf, Vec<String>, Option<DirLock>)> {
    let lead = collective.rank() == 0;
    let run_lock = lead.then(|| lock_run(run_dir)).transpose()?;
    let saved = checkpoint::load_for_resume(run_dir, device)?;
    let mut config = saved.config;
    config.run.dir = Some(run_dir.to_path_buf());
    let (data, samples) = TrainingData::prepare(
        &config,
        Some(saved.tokenizers),
        SAMPLE_TRANSLATIONS,
        &DataBars { verbosity },
        |line| {
            if lead {
                eprintln!("{line}")
            }
        },
    )?;
    let trainer = Trainer::resume_joined(config, data, device, saved.point, collective)
        .with_context(|| format!("cannot resume from {}", saved.dir.display()))?;
    if lead {
        checkpoint::clear_leftovers(run_dir)?;
    }
    if !lead {
        return Ok((trainer, run_dir.to_path_buf(), samples, run_lock));
    }
    // Records logged after the checkpoint by the stopped process would be logged again.
    checkpoint::save_metrics(run_dir, trainer.metrics())?;
    let p = trainer.position();
    eprintln!(
        "resuming {} at step {} (epoch {}, {} into it)",
        run_dir.display(),
        p.step,
        p.epoch,
        count(p.steps_in_epoch, "step")
    );
    Ok((trainer, run_dir.to_path_buf(), samples, run_lock))
}

/// `1 step`, `2 steps`.
fn count(n: usize, noun: &str) -> String {
    match n {
        1 => format!("1 {noun}"),
        _ => format!("{n} {noun}s"),
    }
}

/// `configs/base.toml` -> `base`.
fn config_name(path: &Path) -> String {
    path.file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "run".into())
}
