//! `transformer train`: config -> corpora -> tokenizers -> training loop -> run directory.

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::bail;

use crate::checkpoint::{self, CheckpointContents, BEST_DIR, LAST_DIR, LOSS_PLOT_FILE, RUNS_ROOT};
use crate::cli::TrainArgs;
use crate::config::{Config, BUILTIN_BASE};
use crate::data::{encode_pairs, read_corpus, SentencePair, Tokenizers};
use crate::plot;
use crate::progress::{TrainProgress, Verbosity};
use crate::train::{
    CheckpointKind, MetricRecord, StepReport, TrainObserver, Trainer, TrainingData, ValidationData,
};
use crate::translator::DecodeOptions;

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
    if checkpoint::resolve(&run_dir).is_ok() && !args.overwrite {
        bail!(
            "{} already holds a checkpoint; pass --overwrite to replace it or --out DIR to \
             train into another directory",
            run_dir.display()
        );
    }
    let device = super::device_from(&args.device)?;

    let data = prepare_data(&config)?;
    let samples: Vec<String> = data.1.iter().take(SAMPLE_TRANSLATIONS).cloned().collect();
    let started = Instant::now();
    let mut trainer = Trainer::new(config, data.0, &device)?;
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
        "trained {} steps in {:.1}s; checkpoints in {}",
        trainer.step(),
        started.elapsed().as_secs_f64(),
        run_dir.display()
    );
    let translator = trainer.translator(DecodeOptions::default());
    for (source, translation) in samples.iter().zip(translator.translate_batch(&samples)?) {
        println!("{source} => {}", translation.translation);
    }
    Ok(())
}

/// Reads and cleans the corpora, learns the tokenizers, encodes everything. Also returns the
/// first training sources, to show translations of at the end.
fn prepare_data(config: &Config) -> anyhow::Result<(TrainingData, Vec<String>)> {
    let (pairs, report) = read_corpus(&config.data.train)?;
    eprintln!("train data {}: {report}", config.data.train);
    let tokenizers = Tokenizers::learn(&config.data, &pairs)?;
    let max_positions = config.model.max_len;
    let (encoded, kept) = encode_pairs(&pairs, &tokenizers, max_positions)?;
    let too_long = pairs.len() - kept.len();
    eprintln!(
        "tokenizer: {:?}, {} source / {} target tokens in the vocabulary{}",
        config.data.tokenizer,
        tokenizers.src.vocab_size(),
        tokenizers.tgt.vocab_size(),
        if too_long > 0 {
            format!("; {too_long} pairs longer than model.max_len left out")
        } else {
            String::new()
        }
    );
    let valid = match &config.data.valid {
        Some(source) => {
            let (valid_pairs, report) = read_corpus(source)?;
            eprintln!("valid data {source}: {report}");
            Some(validation_data(&valid_pairs, &tokenizers, max_positions)?)
        }
        None => None,
    };
    let samples = pairs.iter().map(|p| p.src.clone()).collect();
    Ok((
        TrainingData {
            pairs: encoded,
            tokenizers,
            valid,
        },
        samples,
    ))
}

fn validation_data(
    pairs: &[SentencePair],
    tokenizers: &Tokenizers,
    max_positions: usize,
) -> anyhow::Result<ValidationData> {
    // Pairs the model cannot read (longer than its position table) are left out of both the
    // loss and BLEU, so that validation never stops a run.
    let (encoded, kept) = encode_pairs(pairs, tokenizers, max_positions)?;
    if kept.len() < pairs.len() {
        eprintln!(
            "valid data: {} pairs longer than model.max_len left out",
            pairs.len() - kept.len()
        );
    }
    Ok(ValidationData {
        pairs: encoded,
        sources: kept.iter().map(|&i| pairs[i].src.clone()).collect(),
        references: kept.iter().map(|&i| pairs[i].tgt.clone()).collect(),
    })
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

impl CheckpointingObserver {
    /// metrics.jsonl and loss.png, both redrawn from all records so far.
    fn write_metrics(&self, metrics: &[MetricRecord]) -> anyhow::Result<()> {
        checkpoint::save_metrics(&self.run_dir, metrics)?;
        // A picture that cannot be drawn is no reason to stop training.
        let plot_path = self.run_dir.join(LOSS_PLOT_FILE);
        if let Err(e) = plot::write_training_curves(metrics, &plot_path) {
            self.progress.note(&format!("warning: {e:#}"));
        }
        Ok(())
    }
}

impl TrainObserver for CheckpointingObserver {
    fn on_step(&mut self, report: &StepReport) {
        self.progress.update(report);
    }

    fn on_epoch(&mut self, record: &MetricRecord, metrics: &[MetricRecord]) -> anyhow::Result<()> {
        if let MetricRecord::Epoch {
            epoch,
            train_loss,
            valid_loss,
            valid_bleu,
            ..
        } = record
        {
            let mut line = format!("epoch {epoch}: train loss {train_loss:.4}");
            if let (Some(loss), Some(bleu)) = (valid_loss, valid_bleu) {
                line.push_str(&format!(", valid loss {loss:.4}, valid BLEU {bleu:.2}"));
            }
            self.progress.note(&line);
        }
        self.write_metrics(metrics)
    }

    fn on_checkpoint(&mut self, trainer: &Trainer, kind: CheckpointKind) -> anyhow::Result<()> {
        let tensors = trainer.named_tensors()?;
        let dir = self.run_dir.join(match kind {
            CheckpointKind::Last => LAST_DIR,
            CheckpointKind::Best => BEST_DIR,
        });
        checkpoint::save(
            &dir,
            &CheckpointContents {
                config: trainer.config(),
                tokenizers: &trainer.data().tokenizers,
                tensors: &tensors,
            },
        )?;
        self.write_metrics(trainer.metrics())?;
        if kind == CheckpointKind::Best {
            self.progress.note(&format!(
                "step {}: new best checkpoint in {}",
                trainer.step(),
                dir.display()
            ));
        }
        Ok(())
    }
}
