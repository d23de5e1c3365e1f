//! `transformer.train`: the `train` command's run (the same run directory, checkpoints,
//! resume and messages) on a thread of its own, while the calling thread hands its progress
//! to `on_progress` and listens for Ctrl-C: a KeyboardInterrupt stops the run after the step
//! under way, with a checkpoint that `train(resume=...)` continues, and is raised once the
//! checkpoint is written.

use std::path::PathBuf;
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::{mpsc, Arc};

use pyo3::exceptions::PyKeyboardInterrupt;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use transformer::config::ComputeDtype;
use transformer::device::DeviceRequest;
use transformer::metrics::MetricRecord;
use transformer_cli::commands::train::{
    run_for, Caller, ConfigText, Progress, TrainArgs, TrainReport,
};
use transformer_cli::flags::{at_least_one, DeviceArgs};

use crate::arguments::number;
use crate::errors::{guarded, usage, wrong_type};
use crate::pool::{arrived, pool};
use crate::values::{python_of, toml_of};

/// The signal a KeyboardInterrupt stands for, as the run reports it.
const SIGINT: i32 = 2;

/// What a training run did.
#[pyclass(frozen, get_all, name = "TrainResult", module = "transformer")]
pub struct PyTrainResult {
    /// The run directory.
    pub run_dir: PathBuf,
    /// The checkpoint to translate with: best/ (the best validation BLEU), else last/.
    pub checkpoint: PathBuf,
    /// The step the run stands at, of `total_steps`.
    pub step: usize,
    pub total_steps: usize,
    /// It trained all its epochs, or stopped early (training.patience); False when it
    /// stopped at `stop_at_step`.
    pub finished: bool,
    /// The last validation's loss and BLEU, where the run validates.
    pub valid_loss: Option<f64>,
    pub valid_bleu: Option<f64>,
    /// The best validation BLEU of the run.
    pub best_bleu: Option<f64>,
    /// Its metrics.jsonl records, as dicts.
    pub records: Py<PyAny>,
}

#[pymethods]
impl PyTrainResult {
    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        let bleu = self
            .valid_bleu
            .map_or(String::new(), |b| format!(", valid_bleu={b:.2}"));
        let run_dir = crate::values::python_repr(py, &self.run_dir.display().to_string())?;
        Ok(format!(
            "TrainResult(run_dir={run_dir}, step={}/{}, finished={}{bleu})",
            self.step,
            self.total_steps,
            if self.finished { "True" } else { "False" }
        ))
    }
}

/// What the run tells the calling thread.
enum Event {
    Step {
        step: usize,
        total_steps: usize,
        epoch: usize,
        loss: f64,
        lr: f64,
        tokens_per_s: f64,
        elapsed_s: f64,
    },
    Record(serde_json::Value),
}

impl Event {
    fn of(progress: Progress<'_>) -> Self {
        match progress {
            Progress::Step(r) => Self::Step {
                step: r.step,
                total_steps: r.total_steps,
                epoch: r.epoch,
                loss: r.loss,
                lr: r.lr,
                tokens_per_s: r.tokens_per_s,
                elapsed_s: r.elapsed.as_secs_f64(),
            },
            Progress::Record(record) => {
                Self::Record(serde_json::to_value(record).unwrap_or_default())
            }
        }
    }

    fn to_python<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        match self {
            Self::Record(record) => python_of(py, record),
            Self::Step {
                step,
                total_steps,
                epoch,
                loss,
                lr,
                tokens_per_s,
                elapsed_s,
            } => {
                let dict = PyDict::new(py);
                dict.set_item("kind", "step")?;
                dict.set_item("step", step)?;
                dict.set_item("total_steps", total_steps)?;
                dict.set_item("epoch", epoch)?;
                dict.set_item("loss", loss)?;
                dict.set_item("lr", lr)?;
                dict.set_item("tokens_per_s", tokens_per_s)?;
                dict.set_item("elapsed_s", elapsed_s)?;
                Ok(dict.into_any())
            }
        }
    }
}

/// Trains as `transformer train` does: `config` is a config file's path (or the name of one
/// the tool ships, as `--config` takes it) or a dict of its sections; `resume` continues a
/// run from its last/ checkpoint. `on_progress(event)` is called on this thread with a dict
/// for each step and each epoch's or validation's record.
#[pyfunction]
#[pyo3(signature = (config = None, *, out = None, resume = None, seed = None, overwrite = false, stop_at_step = None, dtype = None, device = "auto", quiet = false, on_progress = None))]
#[allow(clippy::too_many_arguments)]
pub fn train(
    py: Python<'_>,
    config: Option<&Bound<'_, PyAny>>,
    out: Option<PathBuf>,
    resume: Option<PathBuf>,
    seed: Option<&Bound<'_, PyAny>>,
    overwrite: bool,
    stop_at_step: Option<&Bound<'_, PyAny>>,
    dtype: Option<&str>,
    device: &str,
    quiet: bool,
    on_progress: Option<Bound<'_, PyAny>>,
) -> PyResult<PyTrainResult> {
    if resume.is_some() {
        let given = [
            ("config", config.is_some()),
            ("out", out.is_some()),
            ("seed", seed.is_some()),
            ("overwrite", overwrite),
        ];
        if let Some((name, _)) = given.iter().find(|(_, given)| *given) {
            return Err(usage(format!(
                "resume cannot be used with {name}: a resumed run keeps its own config, \
                 directory and seed"
            )));
        }
    }
    if let Some(callback) = &on_progress {
        if !callback.is_callable() {
            return Err(wrong_type(
                "on_progress must be callable (it is given a dict)",
            ));
        }
    }
    let (config_path, config_text) = match config {
        None => (None, None),
        Some(dict) if dict.cast::<PyDict>().is_ok() => {
            let dict = dict.cast::<PyDict>()?;
            let text = ConfigText {
                toml: toml_of(dict)?,
                name: "the config dict".into(),
            };
            (None, Some(text))
        }
        Some(path) => match path.extract::<PathBuf>() {
            Ok(path) => (Some(path), None),
            Err(_) => {
                return Err(wrong_type(format!(
                    "config must be a path (str or os.PathLike) or a dict, not {}",
                    path.get_type().name()?
                )))
            }
        },
    };
    let device: DeviceRequest = device
        .parse()
        .map_err(|e: anyhow::Error| usage(format!("invalid value '{device}' for device: {e}")))?;
    let dtype = dtype
        .map(|text| {
            ComputeDtype::parse(text)
                .map_err(|why| usage(format!("invalid value '{text}' for dtype: {why}")))
        })
        .transpose()?;
    let stop_at_step = number("stop_at_step", stop_at_step, at_least_one)?;
    let seed = number("seed", seed, crate::arguments::seed)?;
    let args = TrainArgs {
        config: config_path,
        resume,
        stop_at_step,
        out,
        seed,
        overwrite,
        dtype,
        quiet,
        device: DeviceArgs { device },
        config_text,
    };
    // A run directory that is not there is a missing file, as a missing checkpoint is.
    let resume_missing = args.resume.as_ref().is_some_and(|dir| !dir.exists());
    let pool = pool()?;
    let stop = Arc::new(AtomicI32::new(0));
    let (events, received) = mpsc::channel();
    // Only this thread reads it; the lock lets the wait run with the GIL released.
    let received = std::sync::Mutex::new(received);
    let caller = Caller {
        stop: Some(stop.clone()),
        progress: Some(Box::new(move |progress| {
            // The receiver outlives the run; a send fails only if the caller is gone.
            let _ = events.send(Event::of(progress));
        })),
        show_samples: false,
    };
    let mut interrupt: Option<PyErr> = None;
    let mut callback_error: Option<PyErr> = None;
    let outcome = std::thread::scope(|scope| {
        let run = scope.spawn(|| {
            guarded(|| {
                crate::read_environment()?;
                // As the command: on one of the pool's threads, not beside them.
                pool.install(|| run_for(args, caller))
            })
        });
        loop {
            let ended = run.is_finished();
            // Nothing more once the run is over and its sender gone.
            for event in arrived(py, &received).unwrap_or_default() {
                let (Some(callback), None) = (&on_progress, &callback_error) else {
                    continue;
                };
                if let Err(error) = event.to_python(py).and_then(|e| callback.call1((e,))) {
                    // The run stops after its step, with a checkpoint, and the error is raised;
                    // Ctrl-C while the callback ran reaches it as its KeyboardInterrupt.
                    stop.store(SIGINT, Ordering::SeqCst);
                    if error.is_instance_of::<PyKeyboardInterrupt>(py) {
                        interrupt.get_or_insert(error);
                    } else {
                        callback_error = Some(error);
                    }
                }
            }
            if let Err(error) = py.check_signals() {
                if interrupt.is_none() {
                    interrupt = Some(error);
                    stop.store(SIGINT, Ordering::SeqCst);
                } else {
                    crate::say(
                        "still finishing the step under way and writing its checkpoint; \
                         the run stops when that is done",
                    );
                }
            }
            if ended {
                break run.join();
            }
        }
    });
    let outcome = match outcome {
        Ok(outcome) => outcome,
        Err(_) => Err(pyo3::exceptions::PyRuntimeError::new_err(
            "internal error (a bug in transformer, please report it): the training thread died",
        )),
    };
    if let Some(error) = callback_error {
        if let Err(stopped) = &outcome {
            // The run's message says where it stopped and where its checkpoint is, but blames
            // a signal: a stop by the exception is said as such.
            let stopped = stopped.value(py).to_string();
            let place = stopped
                .split_once(" at step ")
                .map_or(stopped.as_str(), |(_, p)| p);
            crate::say(&format!(
                "on_progress raised an exception; stopped at step {place}"
            ));
        }
        return Err(error);
    }
    match (outcome, interrupt) {
        // A Ctrl-C as the run was ending is not lost: the run is whole, and the interrupt is
        // raised as Python would have raised it a moment later.
        (Ok(_), Some(interrupt)) => Err(interrupt),
        (Ok(report), None) => result_of(py, report),
        // The run's own message (where its checkpoint is) as a KeyboardInterrupt.
        (Err(stopped), Some(_)) => Err(PyKeyboardInterrupt::new_err(stopped.value(py).to_string())),
        (Err(error), None) if resume_missing => Err(
            pyo3::exceptions::PyFileNotFoundError::new_err(error.value(py).to_string()),
        ),
        (Err(error), None) => Err(error),
    }
}

fn result_of(py: Python<'_>, report: TrainReport) -> PyResult<PyTrainResult> {
    let best = report.run_dir.join(transformer::checkpoint::BEST_DIR);
    let checkpoint = if best.is_dir() {
        best
    } else {
        report.run_dir.join(transformer::checkpoint::LAST_DIR)
    };
    let validations = report.records.iter().filter_map(|record| match record {
        MetricRecord::Epoch {
            valid_loss: Some(loss),
            valid_bleu,
            ..
        } => Some((*loss, *valid_bleu)),
        MetricRecord::Validation {
            valid_loss,
            valid_bleu,
            ..
        } => Some((*valid_loss, *valid_bleu)),
        _ => None,
    });
    let last = validations.clone().next_back();
    let best_bleu = validations
        .filter_map(|(_, bleu)| bleu)
        .fold(None, |best: Option<f64>, b| {
            Some(best.map_or(b, |x| x.max(b)))
        });
    let records = report
        .records
        .iter()
        .map(|record| python_of(py, &serde_json::to_value(record).unwrap_or_default()))
        .collect::<PyResult<Vec<_>>>()?;
    Ok(PyTrainResult {
        run_dir: report.run_dir,
        checkpoint,
        step: report.step,
        total_steps: report.total_steps,
        finished: report.finished,
        valid_loss: last.map(|(loss, _)| loss),
        valid_bleu: last.and_then(|(_, bleu)| bleu),
        best_bleu,
        records: pyo3::types::PyList::new(py, records)?.into_any().unbind(),
    })
}
