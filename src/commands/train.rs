//! `transformer train`: config -> data -> vocabularies -> training loop -> run directory.

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::bail;
use candle_core::Device;

use crate::checkpoint::{self, CheckpointContents, MODEL_FILE, RUNS_ROOT};
use crate::cli::TrainArgs;
use crate::config::{Config, BUILTIN_BASE};
use crate::data::{encode_pairs, read_tsv, Vocab};
use crate::progress::{TrainProgress, Verbosity};
use crate::train::{StepReport, TrainObserver, Trainer, TrainingData};
use crate::translator::Translator;

/// How many training sources to translate when training ends.
const SAMPLE_TRANSLATIONS: usize = 5;

pub fn run(args: TrainArgs) -> anyhow::Result<()> {
    let (mut config, name) = match &args.config {
        Some(path) => (Config::load(path)?, config_name(path)),
        None => (
            Config::parse(BUILTIN_BASE, "built-in base config")?,
            "base".into(),
        ),
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
    if run_dir.join(MODEL_FILE).exists() && !args.overwrite {
        bail!(
            "{} already holds a checkpoint; pass --overwrite to replace it or --out DIR to \
             train into another directory",
            run_dir.display()
        );
    }
    let device = super::device_from(&args.device)?;

    let pairs = read_tsv(&config.data.train)?;
    let min_freq = config.data.min_freq;
    let src_vocab = Vocab::build(pairs.iter().map(|p| p.src.as_slice()), min_freq);
    let tgt_vocab = Vocab::build(pairs.iter().map(|p| p.tgt.as_slice()), min_freq);
    eprintln!(
        "data: {} pairs from {}; vocabularies: {} source, {} target words",
        pairs.len(),
        config.data.train.display(),
        src_vocab.len(),
        tgt_vocab.len()
    );
    let samples: Vec<String> = pairs
        .iter()
        .take(SAMPLE_TRANSLATIONS)
        .map(|p| p.src.join(" "))
        .collect();
    let data = TrainingData {
        pairs: encode_pairs(&pairs, &src_vocab, &tgt_vocab),
        src_vocab,
        tgt_vocab,
    };

    let started = Instant::now();
    let mut trainer = Trainer::new(config, data, &device)?;
    let verbosity = if args.quiet {
        Verbosity::Quiet
    } else {
        Verbosity::Normal
    };
    let mut observer = CheckpointingObserver {
        progress: TrainProgress::new(
            trainer.total_steps(),
            trainer.config().training.log_every,
            verbosity,
        ),
        run_dir: run_dir.clone(),
    };
    trainer.run(&mut observer)?;
    observer.progress.finish();
    eprintln!(
        "trained {} steps in {:.1}s; checkpoint in {}",
        trainer.step(),
        started.elapsed().as_secs_f64(),
        run_dir.display()
    );
    print_sample_translations(&trainer, &samples, &device)
}

/// `configs/base.toml` -> `base`.
fn config_name(path: &Path) -> String {
    path.file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "run".into())
}

/// Shows progress and writes the run directory whenever the loop asks for a checkpoint.
struct CheckpointingObserver {
    progress: TrainProgress,
    run_dir: PathBuf,
}

impl TrainObserver for CheckpointingObserver {
    fn on_step(&mut self, report: &StepReport) {
        self.progress.update(report);
    }

    fn on_checkpoint(&mut self, trainer: &Trainer) -> anyhow::Result<()> {
        let tensors = trainer.named_tensors()?;
        let data = trainer.data();
        checkpoint::save(
            &self.run_dir,
            &CheckpointContents {
                config: trainer.config(),
                src_vocab: &data.src_vocab,
                tgt_vocab: &data.tgt_vocab,
                tensors: &tensors,
                metrics: trainer.metrics(),
            },
        )?;
        self.progress.note(&format!(
            "step {}: checkpoint written to {}",
            trainer.step(),
            self.run_dir.display()
        ));
        Ok(())
    }
}

/// Greedy translations of the first few training sources, to stdout.
fn print_sample_translations(
    trainer: &Trainer,
    sources: &[String],
    device: &Device,
) -> anyhow::Result<()> {
    let data = trainer.data();
    let translator = Translator {
        model: trainer.model(),
        src_vocab: &data.src_vocab,
        tgt_vocab: &data.tgt_vocab,
        max_positions: trainer.config().model.max_len,
        device,
    };
    for source in sources {
        let translation = translator.translate(source, None)?;
        println!("{source} => {}", translation.translation);
    }
    Ok(())
}
