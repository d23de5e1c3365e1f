//! Dynamic batching: sentences from concurrent requests wait in one bounded queue; a single
//! thread that owns the model takes what has arrived (up to `max_batch` sentences, waiting
//! at most `max_wait` for more), sorts it by length, decodes it in batches and hands each
//! request its own translations back, in order.
//!
//! The queue counts sentences, not requests: a request that would take it past its capacity
//! is refused at once (the caller answers 429), so memory stays bounded whatever the load.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, SyncSender, TrySendError};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::oneshot;

use super::prometheus::ServerCounters;
use transformer::infer::attention::{attention_grids, TeacherForcedPair};
use transformer::infer::settings::DecodeSettings;
use transformer::infer::translator::{ConfiguredTranslator, Translation};
use transformer::infer::Translator;
use transformer_plot::AttentionGrid;

/// What the model thread answers with: the result, or a message for a 500.
pub type Reply<T> = oneshot::Receiver<Result<T, String>>;

/// Work for the model thread.
enum Work {
    Translate(TranslateJob),
    Attention(AttentionJob),
}

struct TranslateJob {
    sentences: Vec<String>,
    options: DecodeSettings,
    reply: oneshot::Sender<Result<Vec<Translation>, String>>,
}

struct AttentionJob {
    sentence: String,
    layers: Vec<usize>,
    options: DecodeSettings,
    reply: oneshot::Sender<Result<(Translation, Vec<AttentionGrid>), String>>,
}

impl Work {
    /// Places it takes in the queue.
    fn size(&self) -> usize {
        match self {
            Self::Translate(job) => job.sentences.len().max(1),
            Self::Attention(_) => 1,
        }
    }
}

/// Why work was not queued.
#[derive(Debug)]
pub enum Refused {
    /// The queue holds `queued` sentences of its `capacity`.
    Full { queued: usize, capacity: usize },
    /// The model thread has stopped.
    Stopped,
}

/// The sending side, shared by every request handler.
#[derive(Clone)]
pub struct Queue {
    sender: SyncSender<Work>,
    queued: Arc<AtomicUsize>,
    capacity: usize,
}

impl Queue {
    /// Sentences waiting or being decoded.
    pub fn len(&self) -> usize {
        self.queued.load(Ordering::Relaxed)
    }

    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Queues `sentences` for decoding with `options`.
    pub fn translate(
        &self,
        sentences: Vec<String>,
        options: DecodeSettings,
    ) -> Result<Reply<Vec<Translation>>, Refused> {
        let (reply, answer) = oneshot::channel();
        self.submit(Work::Translate(TranslateJob {
            sentences,
            options,
            reply,
        }))?;
        Ok(answer)
    }

    /// Queues `sentence` to be translated with `options` and its attention taken at
    /// `layers` (1-based; all when empty).
    pub fn attention(
        &self,
        sentence: String,
        layers: Vec<usize>,
        options: DecodeSettings,
    ) -> Result<Reply<(Translation, Vec<AttentionGrid>)>, Refused> {
        let (reply, answer) = oneshot::channel();
        self.submit(Work::Attention(AttentionJob {
            sentence,
            layers,
            options,
            reply,
        }))?;
        Ok(answer)
    }

    fn submit(&self, work: Work) -> Result<(), Refused> {
        let size = work.size();
        let before = self.queued.fetch_add(size, Ordering::AcqRel);
        let full = Refused::Full {
            queued: before,
            capacity: self.capacity,
        };
        let refused = if before + size > self.capacity {
            full
        } else {
            match self.sender.try_send(work) {
                Ok(()) => return Ok(()),
                Err(TrySendError::Full(_)) => full,
                Err(TrySendError::Disconnected(_)) => Refused::Stopped,
            }
        };
        self.queued.fetch_sub(size, Ordering::AcqRel);
        Err(refused)
    }
}

/// How the model thread batches.
#[derive(Debug, Clone, Copy)]
pub struct BatchPolicy {
    /// Most sentences decoded together.
    pub max_batch: usize,
    /// Longest a first sentence waits for others to join it.
    pub max_wait: Duration,
    /// Most sentences queued (waiting or being decoded).
    pub capacity: usize,
}

/// The queue over `translator`, and the worker that drains it: run
/// [`Worker::run`] on the thread that should own the model (the command's, one of rayon's,
/// so that decoding's many calls into rayon's pool are no hand-over between threads). The
/// worker returns once every [`Queue`] clone is dropped and the work already queued is done.
pub fn queue(
    translator: Arc<Translator>,
    policy: BatchPolicy,
    metrics: Arc<ServerCounters>,
) -> (Queue, Worker) {
    let (sender, receiver) = std::sync::mpsc::sync_channel(policy.capacity.max(1));
    let queued = Arc::new(AtomicUsize::new(0));
    let worker = Worker {
        translator,
        policy,
        metrics,
        queued: queued.clone(),
        held: VecDeque::new(),
        receiver,
    };
    let queue = Queue {
        sender,
        queued,
        capacity: policy.capacity,
    };
    (queue, worker)
}

/// The side of the queue that owns the model and decodes.
pub struct Worker {
    translator: Arc<Translator>,
    policy: BatchPolicy,
    metrics: Arc<ServerCounters>,
    queued: Arc<AtomicUsize>,
    /// Work taken from the channel that could not join the batch being formed (other decode
    /// settings): it goes first next time. Bounded by the queue's capacity, like the channel.
    held: VecDeque<Work>,
    receiver: Receiver<Work>,
}

impl Worker {
    /// Decodes until the queue is closed and empty.
    pub fn run(mut self) {
        while let Some(first) = self.held.pop_front().or_else(|| self.receiver.recv().ok()) {
            match first {
                Work::Attention(job) => self.attention(job),
                Work::Translate(job) => {
                    let batch = self.gather(job);
                    self.translate(batch);
                }
            }
        }
    }

    /// `first` and the translation jobs with its decode settings that are held or arrive
    /// within `max_wait`, up to `max_batch` sentences.
    fn gather(&mut self, first: TranslateJob) -> Vec<TranslateJob> {
        let options = first.options.clone();
        let mut sentences = first.sentences.len();
        let mut batch = vec![first];
        let mut kept = VecDeque::new();
        while let Some(work) = self.held.pop_front() {
            match work {
                Work::Translate(job)
                    if job.options == options && sentences < self.policy.max_batch =>
                {
                    sentences += job.sentences.len();
                    batch.push(job);
                }
                other => kept.push_back(other),
            }
        }
        self.held = kept;
        let deadline = Instant::now() + self.policy.max_wait;
        while sentences < self.policy.max_batch {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.receiver.recv_timeout(left) {
                Ok(Work::Translate(job)) if job.options == options => {
                    sentences += job.sentences.len();
                    batch.push(job);
                }
                Ok(other) => self.held.push_back(other),
                Err(RecvTimeoutError::Timeout | RecvTimeoutError::Disconnected) => break,
            }
        }
        batch
    }

    /// Decodes the batch's sentences sorted by length, `max_batch` at a time, and answers
    /// each job with its own translations in its own order.
    fn translate(&self, jobs: Vec<TranslateJob>) {
        let (live, abandoned): (Vec<_>, Vec<_>) =
            jobs.into_iter().partition(|job| !job.reply.is_closed());
        for job in abandoned {
            self.release(job.sentences.len().max(1));
        }
        let Some(options) = live.first().map(|job| job.options.clone()) else {
            return;
        };
        let answers: Vec<Result<Vec<Translation>, String>> =
            match self.decode_sorted(&live, options) {
                Ok(results) => results
                    .into_iter()
                    .map(|own| Ok(own.into_iter().flatten().collect()))
                    .collect(),
                Err(message) => vec![Err(message); live.len()],
            };
        for (job, answer) in live.into_iter().zip(answers) {
            self.release(job.sentences.len().max(1));
            // A requester that gave up meanwhile no longer listens; nothing is lost.
            let _ = job.reply.send(answer);
        }
    }

    /// Every job's translations, `[job][sentence]`, decoded shortest first so that each
    /// decoder batch pads little. Sentences of requesters that have gone are skipped, and a
    /// decoder batch stops at the step where none of its requesters is left (a requester
    /// gives up when its time limit passes or its client disconnects), so that abandoned
    /// work never holds up the requests behind it.
    fn decode_sorted(
        &self,
        jobs: &[TranslateJob],
        options: DecodeSettings,
    ) -> Result<Vec<Vec<Option<Translation>>>, String> {
        let translator = self.translator(options);
        let mut order: Vec<(usize, usize, usize)> = jobs
            .iter()
            .enumerate()
            .flat_map(|(j, job)| {
                job.sentences
                    .iter()
                    .enumerate()
                    .map(move |(s, text)| (text.len(), j, s))
            })
            .collect();
        order.sort_unstable();
        let mut results: Vec<Vec<Option<Translation>>> = jobs
            .iter()
            .map(|job| vec![None; job.sentences.len()])
            .collect();
        let wanted = |j: usize| !jobs[j].reply.is_closed();
        while !order.is_empty() {
            order.retain(|&(_, j, _)| wanted(j));
            let take = order.len().min(self.policy.max_batch.max(1));
            let chunk: Vec<(usize, usize, usize)> = order.drain(..take).collect();
            if chunk.is_empty() {
                break;
            }
            let texts: Vec<String> = chunk
                .iter()
                .map(|&(_, j, s)| jobs[j].sentences[s].clone())
                .collect();
            let still_wanted = || chunk.iter().any(|&(_, j, _)| wanted(j));
            let started = Instant::now();
            let translations = match translator.translate_batch_while(&texts, &still_wanted) {
                Ok(translations) => translations,
                // Nobody is left to tell: the chunk's requesters have all gone.
                Err(_) if !still_wanted() => {
                    self.metrics.record_abandoned(texts.len());
                    continue;
                }
                Err(e) => return Err(one_line(&e)),
            };
            let tokens = translations.iter().map(|t| t.ids.len()).sum();
            self.metrics
                .record_batch(texts.len(), tokens, started.elapsed());
            for (&(_, j, s), translation) in chunk.iter().zip(translations) {
                results[j][s] = Some(translation);
            }
        }
        Ok(results)
    }

    fn translator(&self, options: DecodeSettings) -> ConfiguredTranslator<'_> {
        self.translator.with(options)
    }

    fn attention(&self, job: AttentionJob) {
        if !job.reply.is_closed() {
            let answer = self
                .attention_of(&job.sentence, &job.layers, job.options)
                .map_err(|e| one_line(&e));
            let _ = job.reply.send(answer);
        }
        self.release(1);
    }

    fn attention_of(
        &self,
        sentence: &str,
        layers: &[usize],
        options: DecodeSettings,
    ) -> anyhow::Result<(Translation, Vec<AttentionGrid>)> {
        let translator = self.translator(options);
        let translation = translator.translate(sentence)?;
        let src = self
            .translator
            .checkpoint()
            .tokenizers
            .src
            .encode(sentence)?
            .ids;
        // The teacher-forced target (`<s>`, then every id but the last) must fit the position
        // table too: a translation that ran to the model's length is drawn up to there.
        let drawn = translation
            .ids
            .len()
            .min(self.translator.checkpoint().config.model.max_len);
        let specials = self.translator.checkpoint().tokenizers.specials();
        let pair = TeacherForcedPair::new(&src, &translation.ids[..drawn], &specials);
        pair.check_fits(self.translator.checkpoint().config.model.max_len)?;
        let grids = attention_grids(
            &*self.translator.checkpoint().model,
            &self.translator.checkpoint().tokenizers,
            &pair,
            layers,
            self.translator.device(),
        )?;
        Ok((translation, grids))
    }

    fn release(&self, size: usize) {
        self.queued.fetch_sub(size, Ordering::AcqRel);
    }
}

/// An error as one line for a client: its chain, without the backtrace candle's errors carry
/// when RUST_BACKTRACE is set (server paths are nobody's business).
fn one_line(error: &anyhow::Error) -> String {
    format!("{error:#}")
        .lines()
        .next()
        .unwrap_or("")
        .to_string()
}
