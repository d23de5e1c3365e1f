//! The one place that shows training progress: an indicatif bar on a terminal, a plain line
//! per logged step otherwise (logs, CI), nothing with `--quiet`. Always on stderr.

use std::io::{IsTerminal, Write};
use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use transformer::train::StepReport;

/// How progress should be shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verbosity {
    Normal,
    Quiet,
}

/// Training progress on stderr.
pub struct TrainProgress {
    bar: Option<ProgressBar>,
    plain_every: Option<usize>,
}

impl TrainProgress {
    /// Progress towards `total_steps`, starting at `done` (a resumed run's step), so that the
    /// bar's rate and ETA count only this session's steps.
    pub fn new(total_steps: usize, done: usize, log_every: usize, verbosity: Verbosity) -> Self {
        let terminal = std::io::stderr().is_terminal();
        match (verbosity, terminal) {
            (Verbosity::Quiet, _) => Self {
                bar: None,
                plain_every: None,
            },
            (Verbosity::Normal, true) => Self {
                bar: Some(training_bar(total_steps, done)),
                plain_every: None,
            },
            (Verbosity::Normal, false) => Self {
                bar: None,
                plain_every: Some(log_every),
            },
        }
    }

    pub fn update(&self, report: &StepReport) {
        if let Some(bar) = &self.bar {
            bar.set_position(report.step as u64);
            bar.set_message(format!(
                "epoch {} loss {:.4} lr {:.2e} {:.0} tok/s",
                report.epoch, report.loss, report.lr, report.tokens_per_s
            ));
        }
        if let Some(every) = self.plain_every {
            if report.step.is_multiple_of(every) || report.step == report.total_steps {
                print_line(&plain_line(report));
            }
        }
    }

    /// Prints a line without tearing the bar.
    pub fn note(&self, line: &str) {
        match &self.bar {
            Some(bar) => bar.println(line),
            None if self.plain_every.is_some() => print_line(line),
            None => {}
        }
    }

    pub fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish();
        }
    }
}

/// A line on stderr; a closed stderr (a log pipe gone) must not stop training.
fn print_line(line: &str) {
    let _ = writeln!(std::io::stderr().lock(), "{line}");
}

fn training_bar(total_steps: usize, done: usize) -> ProgressBar {
    let bar = ProgressBar::with_draw_target(Some(total_steps as u64), ProgressDrawTarget::stderr());
    let style = ProgressStyle::with_template(
        "{elapsed_precise} [{bar:30.cyan/blue}] step {pos}/{len} {msg} ETA {eta}",
    )
    .unwrap_or_else(|_| ProgressStyle::default_bar())
    .progress_chars("=> ");
    bar.set_style(style);
    bar.set_position(done as u64);
    bar.reset_eta();
    bar.enable_steady_tick(Duration::from_millis(250));
    bar
}

fn plain_line(report: &StepReport) -> String {
    let eta = if report.step == 0 {
        0.0
    } else {
        report.elapsed.as_secs_f64() / report.step as f64
            * (report.total_steps - report.step) as f64
    };
    format!(
        "step {}/{} epoch {} loss {:.4} lr {:.2e} {:.0} tok/s elapsed {:.0}s ETA {:.0}s",
        report.step,
        report.total_steps,
        report.epoch,
        report.loss,
        report.lr,
        report.tokens_per_s,
        report.elapsed.as_secs_f64(),
        eta
    )
}

/// The library's long passes over a corpus on disk (reading, learning a tokenizer, encoding),
/// each a bar of the file bytes read so far, with rate and ETA, on a terminal; nothing
/// otherwise (the pass's summary line says what it did).
#[derive(Debug, Clone, Copy)]
pub struct DataBars {
    pub verbosity: Verbosity,
}

impl transformer::progress::Progress for DataBars {
    fn data_pass(
        &self,
        what: &str,
        total: u64,
        read: transformer::progress::BytesRead,
    ) -> Box<dyn transformer::progress::DataPass> {
        Box::new(DataProgress::new(what, total, read, self.verbosity))
    }
}

/// One pass's bar, following `read()` from a thread of its own. Finishes when dropped.
struct DataProgress {
    bar: Option<ProgressBar>,
    ticker: Option<std::thread::JoinHandle<()>>,
    done: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

impl DataProgress {
    /// A bar labelled `what` that follows `read()` (bytes) towards `total` bytes.
    fn new(
        what: &str,
        total: u64,
        read: impl Fn() -> u64 + Send + 'static,
        verbosity: Verbosity,
    ) -> Self {
        let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        if verbosity == Verbosity::Quiet || !std::io::stderr().is_terminal() || total == 0 {
            return Self {
                bar: None,
                ticker: None,
                done,
            };
        }
        let bar = ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::stderr());
        let style = ProgressStyle::with_template(
            "{elapsed_precise} [{bar:30.cyan/blue}] {msg} {bytes}/{total_bytes} \
             {bytes_per_sec} ETA {eta}",
        )
        .unwrap_or_else(|_| ProgressStyle::default_bar())
        .progress_chars("=> ");
        bar.set_style(style);
        bar.set_message(what.to_string());
        let (ticking, stop) = (bar.clone(), done.clone());
        let ticker = std::thread::spawn(move || {
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                ticking.set_position(read());
                std::thread::sleep(Duration::from_millis(100));
            }
        });
        Self {
            bar: Some(bar),
            ticker: Some(ticker),
            done,
        }
    }
}

impl transformer::progress::DataPass for DataProgress {
    fn set_message(&self, what: &str) {
        if let Some(bar) = &self.bar {
            bar.set_message(what.to_string());
        }
    }
}

impl Drop for DataProgress {
    fn drop(&mut self) {
        self.done.store(true, std::sync::atomic::Ordering::Relaxed);
        if let Some(ticker) = self.ticker.take() {
            let _ = ticker.join();
        }
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}

/// Progress through sentences being translated (`translate --file`, `eval --src`): a bar with
/// sentences/s and ETA on a terminal, nothing otherwise. Finishes when dropped.
pub struct SentenceProgress {
    bar: Option<ProgressBar>,
}

impl SentenceProgress {
    pub fn new(total: usize, verbosity: Verbosity) -> Self {
        if verbosity == Verbosity::Quiet || !std::io::stderr().is_terminal() || total == 0 {
            return Self { bar: None };
        }
        let bar = ProgressBar::with_draw_target(Some(total as u64), ProgressDrawTarget::stderr());
        let style = ProgressStyle::with_template(
            "{elapsed_precise} [{bar:30.cyan/blue}] {pos}/{len} sentences {per_sec} ETA {eta}",
        )
        .unwrap_or_else(|_| ProgressStyle::default_bar())
        .progress_chars("=> ");
        bar.set_style(style);
        Self { bar: Some(bar) }
    }

    /// `n` more sentences are translated.
    pub fn advance(&self, n: usize) {
        if let Some(bar) = &self.bar {
            bar.inc(n as u64);
        }
    }
}

impl Drop for SentenceProgress {
    fn drop(&mut self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}
