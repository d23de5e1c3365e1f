//! How a run ended, told: a finished run's checkpoints averaged (`training.average_last`)
//! and what it learned shown; a stopped one's checkpoint and how to go on named; a run
//! with no steps left refused before it starts.

use std::path::Path;

use super::observer::CheckpointingObserver;
use crate::checkpoint::{history, BEST_DIR, LAST_DIR};
use crate::decoding::sampling::Sampling;
use crate::errors::{Interrupted, UsageError};
use crate::infer::text_generator::Continuation;
use crate::infer::Inference;
use crate::stdout::print_line;
use crate::stop_signals::signal_name;
use crate::train::{Diverged, NonFiniteWeights, RunOutcome, StopReason, Trainer};

/// `training.average_last`: the mean of the newest `wanted` kept checkpoints as `averaged/`,
/// or of as many as a short run kept, with a warning (the run's work is never refused here).
pub(super) fn average_at_the_end(run_dir: &Path, wanted: usize) -> anyhow::Result<()> {
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
    let steps = match history::average(run_dir, wanted.min(kept), &out, false) {
        Ok(steps) => steps,
        // The run's checkpoints stand: what is in the way is said, and the run ends as usual.
        Err(e) => match e.downcast_ref::<crate::checkpoint::OutRefused>() {
            Some(refused) => {
                eprintln!(
                    "warning: training.average_last: not averaged: {}; move it away, then run \
                     `transformer average {} --last {}`",
                    refused.worded("the output directory", "`transformer average --overwrite`"),
                    run_dir.display(),
                    wanted.min(kept)
                );
                return Ok(());
            }
            None => return Err(e),
        },
    };
    eprintln!(
        "averaged the last {} kept checkpoints (steps {}..={}) into {}",
        steps.len(),
        steps[0],
        steps[steps.len() - 1],
        out.display()
    );
    Ok(())
}

/// `training.average_last` of a run that finished training (its epochs, or stopped early)
/// whose `averaged/` checkpoint is missing or older than its newest kept checkpoint: the
/// process was stopped between its last checkpoint and its averaging. `None` when nothing was
/// missed (or nothing was kept to average).
pub(super) fn averaging_missed(trainer: &Trainer, run_dir: &Path) -> Option<usize> {
    let wanted = trainer.config().training.average_last?;
    let position = trainer.position();
    let finished = position.stopped_early || position.epoch > trainer.config().training.epochs;
    let newest_kept = history::kept(run_dir).ok()?.last()?.1.clone();
    let written = |dir: &Path| {
        std::fs::metadata(dir.join(crate::checkpoint::MODEL_FILE)).and_then(|m| m.modified())
    };
    // An average older than the newest kept checkpoint (one made by hand during the run) is
    // not the run's.
    let averaged = match (
        written(&run_dir.join(history::AVERAGED_DIR)),
        written(&newest_kept),
    ) {
        (Ok(averaged), Ok(kept)) => averaged >= kept,
        _ => false,
    };
    (finished && !averaged).then_some(wanted)
}

/// Whether the run has steps left to take, or a clear refusal: a finished run says so and
/// returns false; a `--stop-at-step` at or before where the run stands is a usage error.
pub(super) fn still_to_train(
    trainer: &Trainer,
    run_dir: &Path,
    stop_at_step: Option<usize>,
) -> anyhow::Result<bool> {
    let position = trainer.position();
    let epochs = trainer.config().training.epochs;
    if position.stopped_early {
        eprintln!(
            "{} stopped early {} (training.patience); nothing to resume",
            run_dir.display(),
            position.stop_point()
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
pub(super) fn report(
    outcome: anyhow::Result<RunOutcome>,
    trainer: &Trainer,
    observer: &CheckpointingObserver,
    run_dir: &Path,
) -> anyhow::Result<bool> {
    let resume_hint = format!("`transformer train --resume {}`", run_dir.display());
    match outcome {
        Err(e) => match diverged(&e) {
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
        Ok(RunOutcome::StoppedEarly { patience, .. }) => {
            // A language model has no BLEU, so no best/: its last/ is the one to take.
            let best = run_dir.join(BEST_DIR);
            let kept = if best.is_dir() {
                best
            } else {
                run_dir.join(LAST_DIR)
            };
            eprintln!(
                "stopped early {}: no better validation score in the last {} \
                 (training.patience); the checkpoint to use is {}",
                trainer.position().stop_point(),
                match patience {
                    1 => "validation".to_string(),
                    n => format!("{n} validations"),
                },
                kept.display()
            );
            Ok(true)
        }
        Ok(RunOutcome::Finished) => Ok(true),
    }
}

/// After a finished run: the sample sentences translated, or one greedy line of a language
/// model, on stdout.
pub(super) fn show_what_it_learned(trainer: &Trainer, samples: &[String]) -> anyhow::Result<()> {
    match trainer.inference(trainer.decode_settings()) {
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

/// What diverged, if `error` says the run diverged: the loss, or weights an update overflowed.
fn diverged(error: &anyhow::Error) -> Option<String> {
    error.chain().find_map(|cause| {
        let loss = cause.downcast_ref::<Diverged>().map(ToString::to_string);
        loss.or_else(|| {
            cause
                .downcast_ref::<NonFiniteWeights>()
                .map(ToString::to_string)
        })
    })
}
