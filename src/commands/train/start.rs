//! The trainer a run starts with: a new run from `--config` (or the built-in base config,
//! `training.init_from`'s weights), or one resumed from its `last/` checkpoint; either way
//! its run directory locked against a second `train` and cleared of leftovers.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use anyhow::{bail, Context};

use super::count;
use super::TrainArgs;
use crate::checkpoint::{self, history, DirLock, LockHeld, WhenHeld, BEST_DIR, RUNS_ROOT};
use crate::config::{Config, ConfigReadError};
use crate::distributed::Collective;
use crate::errors::UsageError;
use crate::progress::{DataBars, Verbosity};
use crate::tokenize::Tokenizers;
use crate::train::init_from;
use crate::train::{Trainer, TrainingData};

/// How many training sources to translate when training ends.
const SAMPLE_TRANSLATIONS: usize = 5;
/// A new run from `--config` (or the built-in base config).
pub(super) fn new_trainer(
    args: &TrainArgs,
    device: &candle_core::Device,
    collective: Box<dyn Collective>,
    verbosity: Verbosity,
) -> anyhow::Result<(Trainer, PathBuf, Vec<String>, Option<RunLock>)> {
    let (mut config, name) = match (&args.config_text, &args.config) {
        (Some(given), _) => {
            let config = Config::parse(&given.toml, &given.name)?;
            // Text has no file name to call the run by.
            if args.out.is_none() && config.run.dir.is_none() {
                return Err(UsageError(format!(
                    "{} names no run directory: give the run's directory (out), or set run.dir",
                    given.name
                ))
                .into());
            }
            (config, "run".into())
        }
        (None, Some(path)) => (load_config(path)?, config_name(path)),
        (None, None) => (Config::builtin_base()?, "base".into()),
    };
    if let Some(dtype) = args.dtype {
        config.training.dtype = dtype;
    }
    if let Some(seed) = args.seed {
        config.training.seed = seed;
    }
    // Sizes no machine here could hold are refused before a run directory is made (the
    // vocabularies, still to be learned, are counted again when the model is built).
    let no_vocabulary = crate::config::VocabSizes { src: 0, tgt: 0 };
    // (The activations are counted once the corpus says how large a batch can be.)
    crate::model::footprint::refuse_if_too_large_to_train(&config.model, no_vocabulary, 0, device)
        .map_err(anyhow::Error::msg)?;
    let run_dir = args
        .out
        .clone()
        .or_else(|| config.run.dir.clone())
        .unwrap_or_else(|| Path::new(RUNS_ROOT).join(&name));
    config.run.dir = Some(run_dir.clone());
    let lead = collective.rank() == 0;
    let run_lock = lead.then(|| lock_run(&run_dir)).transpose()?;
    if run_dir.join(checkpoint::MODEL_FILE).exists() {
        bail!(
            "{} is a checkpoint, not a run directory (a run keeps its checkpoints in last/ and \
             best/); train into another directory with --out DIR",
            run_dir.display()
        );
    }
    if checkpoint::resolve(&run_dir).is_ok() && !args.overwrite {
        bail!(
            "{} already holds a checkpoint; continue it with `transformer train --resume {0}`, \
             pass --overwrite to replace it, or --out DIR to train into another directory",
            run_dir.display()
        );
    }
    checkpoint::refuse_inside_a_run(&run_dir)
        .map_err(|e| crate::errors::naming_out_flags(e.into()))?;
    if lead {
        // Checked now, before the data is read: what a replaced run leaves must be its own.
        check_replaced_run(&run_dir, args.overwrite)?;
    }
    let initial = match config.training.init_from.clone() {
        Some(given) => {
            // A Hub name is fetched into the cache first, and the run records the snapshot
            // (one commit) it started from.
            let path = crate::commands::download::local_or_hub(&given)?;
            config.training.init_from = Some(path.clone());
            Some(init_from::initial_weights(&mut config, &path, device)?)
        }
        None => None,
    };
    let (tokenizers, weights) = initial.unzip();
    let inherited = tokenizers.is_some();
    let (data, samples) = prepare_data(&config, tokenizers, verbosity, lead)?;
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

/// The run directories this process is training. The directory lock lets its own process in
/// again (a run's saves take it inside the run's), so a second run into one from the same
/// process (another thread of a program, the Python package's `train`) is refused here.
static TRAINING: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

/// A run directory held for one run: its lock against other processes, and its place among
/// the runs of this process.
pub(super) struct RunLock {
    _dir: DirLock,
    _claim: Claim,
}

/// A run directory's place among [`TRAINING`], given up when dropped.
struct Claim(PathBuf);

impl Drop for Claim {
    fn drop(&mut self) {
        let mut training = TRAINING.lock().unwrap_or_else(|e| e.into_inner());
        training.retain(|dir| *dir != self.0);
    }
}

/// The run directory's lock, which a second `train` into it is refused by.
fn lock_run(run_dir: &Path) -> anyhow::Result<RunLock> {
    let dir = DirLock::acquire(run_dir, WhenHeld::REFUSE).map_err(|e| {
        match e.downcast::<LockHeld>() {
            Ok(held) => anyhow::anyhow!(
                "{} is being trained by another process ({}); let it finish or stop it, or train \
                 into another directory with --out DIR",
                run_dir.display(),
                held.holder
            ),
            Err(e) => e,
        }
    })?;
    // Its parent exists now: the key is the directory however it is spelled (`..`, a link).
    let key = run_key(run_dir);
    let mut training = TRAINING.lock().unwrap_or_else(|e| e.into_inner());
    if training.contains(&key) {
        bail!(
            "{} is being trained by another run of this process; let it finish, or train into \
             another directory with --out DIR",
            run_dir.display()
        );
    }
    training.push(key.clone());
    Ok(RunLock {
        _dir: dir,
        _claim: Claim(key),
    })
}

/// `run_dir` with its links and `..` resolved: the directory itself where it exists, else its
/// parent (which the lock has made) and its name.
fn run_key(run_dir: &Path) -> PathBuf {
    if let Ok(resolved) = std::fs::canonicalize(run_dir) {
        return resolved;
    }
    let absolute = std::path::absolute(run_dir).unwrap_or_else(|_| run_dir.to_path_buf());
    match (absolute.parent(), absolute.file_name()) {
        (Some(parent), Some(name)) => std::fs::canonicalize(parent)
            .map(|parent| parent.join(name))
            .unwrap_or(absolute),
        _ => absolute,
    }
}

/// Refuses a run directory whose best/, averaged/ or checkpoints/ would be removed (see
/// [`remove_replaced_run`]) but hold something no run writes, or (without `overwrite`) an
/// earlier run's checkpoints: those are someone's work.
fn check_replaced_run(run_dir: &Path, overwrite: bool) -> anyhow::Result<()> {
    for stale in [BEST_DIR, history::AVERAGED_DIR, history::KEPT_DIR] {
        let stale = run_dir.join(stale);
        if std::fs::symlink_metadata(&stale).is_err() {
            continue;
        }
        let checkpoints = if stale.ends_with(history::KEPT_DIR) {
            let entries = std::fs::read_dir(&stale)
                .with_context(|| format!("cannot read {}", stale.display()))?;
            entries.flatten().map(|e| e.path()).collect()
        } else if std::fs::read_dir(&stale).is_ok_and(|mut e| e.next().is_none()) {
            // An empty folder is nobody's work.
            Vec::new()
        } else {
            vec![stale.clone()]
        };
        for dir in &checkpoints {
            let foreign = match std::fs::symlink_metadata(dir) {
                Ok(meta) if meta.is_dir() => checkpoint::foreign_content(dir),
                _ => Some("is not a checkpoint directory".to_string()),
            };
            if let Some(why) = foreign {
                bail!(
                    "{} {why}: a new run in {} would remove it; move it away, or train into \
                     another directory with --out DIR",
                    dir.display(),
                    run_dir.display()
                );
            }
        }
        if !overwrite && !checkpoints.is_empty() {
            bail!(
                "{} holds an earlier run's {}; pass --overwrite to replace that run, or --out \
                 DIR to train into another directory",
                run_dir.display(),
                stale.display()
            );
        }
    }
    Ok(())
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
pub(super) fn resumed_trainer(
    run_dir: &Path,
    dtype: Option<crate::config::ComputeDtype>,
    device: &candle_core::Device,
    collective: Box<dyn Collective>,
    verbosity: Verbosity,
) -> anyhow::Result<(Trainer, PathBuf, Vec<String>, Option<RunLock>)> {
    let lead = collective.rank() == 0;
    let run_lock = lead.then(|| lock_run(run_dir)).transpose()?;
    let saved = checkpoint::load_for_resume(run_dir, device)?;
    let mut config = saved.config;
    config.run.dir = Some(run_dir.to_path_buf());
    if let Some(dtype) = dtype {
        config.training.dtype = dtype;
    }
    let (data, samples) = prepare_data(&config, Some(saved.tokenizers), verbosity, lead)?;
    let mut trainer = Trainer::resume_joined(config, data, device, saved.point, collective)
        .with_context(|| format!("cannot resume from {}", saved.dir.display()))?;
    // The stopped session's time record, when it ended at this checkpoint: it counts what
    // the checkpoint itself could not (its own writing, averaging), and stays until this
    // session writes its own. A damaged metrics.jsonl is rewritten below all the same.
    if let Some(last) = checkpoint::load_metrics(run_dir)
        .ok()
        .and_then(|records| records.into_iter().last())
    {
        trainer.continue_time_from(last);
    }
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

/// `configs/base.toml` -> `base`.
/// The run's data from its config (with `tokenizers` when they are inherited or resumed),
/// its passes drawn as bars and its report said on stderr by the lead rank only.
fn prepare_data(
    config: &Config,
    tokenizers: Option<Tokenizers>,
    verbosity: Verbosity,
    lead: bool,
) -> anyhow::Result<(TrainingData, Vec<String>)> {
    let (data, samples) = TrainingData::prepare(
        config,
        tokenizers,
        SAMPLE_TRANSLATIONS,
        &DataBars { verbosity },
        |line| {
            if lead {
                eprintln!("{line}")
            }
        },
    )?;
    let max_tokens = config.training.max_tokens;
    if let (Some((count, longest)), true) = (data.pairs_past(max_tokens), lead) {
        eprintln!(
            "warning: training.max_tokens = {max_tokens} is less than {} of the {} training \
             pairs (the longest has {longest} tokens): each is a batch of its own, larger than \
             max_tokens; raise training.max_tokens to at least {longest}",
            count,
            data.pairs.len()
        );
    }
    Ok((data, samples))
}

fn config_name(path: &Path) -> String {
    path.file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "run".into())
}

/// The config `--config` names: a file, or where there is none a config the tool ships
/// (said on stderr); a file that cannot be read names the flag that gave it.
fn load_config(path: &Path) -> anyhow::Result<Config> {
    let (config, shipped) = Config::load_or_shipped(path).map_err(|error| match error
        .downcast::<ConfigReadError>(
    ) {
        Ok(unreadable) => anyhow::anyhow!("{unreadable}; check the path given to --config"),
        Err(error) => error,
    })?;
    // Said even with --quiet: the run is not what a file of that name would have made.
    if let Some(shipped) = shipped {
        let data = match &config.data.train {
            crate::config::CorpusSource::Builtin { builtin } => {
                format!("the {builtin} pairs built in with it")
            }
            other => format!("{other} from the working directory"),
        };
        eprintln!(
            "--config {}: no such file here, so training with the config transformer ships as \
             configs/{} (on {data})",
            path.display(),
            shipped.file_name
        );
        // Its data paths are relative and cannot be edited: say where they must be.
        let sources = [Some(&config.data.train), config.data.valid.as_ref()];
        let missing = sources
            .into_iter()
            .flatten()
            .flat_map(crate::corpus::files_of)
            .find(|file| !file.exists());
        if let Some(missing) = missing {
            let text = missing.display().to_string();
            let script = shipped.data_script.unwrap_or("the script that writes it");
            bail!(
                "the shipped config {} reads {text} from the working directory, and it is not \
                 here; run from the directory that holds it (the repository's root, after \
                 {script}), or copy configs/{0} and point its [data] paths at your files",
                shipped.file_name,
            );
        }
    }
    Ok(config)
}
