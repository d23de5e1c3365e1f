//! The training corpus from its files to the ids the loop batches from, at any size: the
//! tokenizer is learned from word counts gathered over one streamed pass, the pairs are
//! encoded over another and written as they come, and both are cached on disk under a digest
//! of the files' bytes, so that a resume or a second run over the same corpus maps the ids
//! instead of reading and encoding again, and a changed file is never read from a stale
//! entry. A cache entry is published by renaming a finished directory: a run killed or a disk
//! filled mid-write leaves only a hidden staging directory, which no run reads.

use std::collections::HashMap;
use std::fs::File;
use std::io::{BufWriter, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::cache_checksum::{
    checksum, open_entry_file, read_entry_file, sealed, unsealed, Checksummed, MOST_META_BYTES,
};
use super::corpus_stream::{files_of, stream_corpus, total_bytes, ReadCounter};
use super::encoded_corpus::{Bytes, CorpusBuilder, EncodedCorpus, IdWidth};
use super::tokenizer::{learn_bpe_from_counts, BpeWordCounts, TextTokenizer, WordIdsCache};
use super::vocab::{count_words, tokenize, Vocab};
use super::{CleaningReport, SentencePair, Tokenizers};
use crate::config::{CorpusCacheMode, CorpusSource, DataConfig, TokenizerKind};
use crate::progress::Progress;

/// Bumped when the layout or meaning of a cache entry changes: older entries are then
/// ignored (their key differs). 2: every file carries a checksum.
const CACHE_FORMAT: u32 = 2;

/// The encoded training corpus and what reading it found.
pub struct PreparedCorpus {
    pub corpus: EncodedCorpus,
    pub report: CleaningReport,
    /// Pairs left out for being longer than the model reads.
    pub too_long: usize,
    /// The first training sources, to show translations of when training ends.
    pub samples: Vec<String>,
    /// Whether the ids came from the cache, went into it, or neither.
    pub cache: CacheUse,
}

/// What a run did with the corpus cache.
#[derive(Debug, Clone, PartialEq)]
pub enum CacheUse {
    /// Off, a built-in or small corpus under `auto`, or the entry could not be written.
    Unused,
    /// Mapped from the entry an earlier run wrote.
    Reused(PathBuf),
    /// Encoded by this run into a new entry, then mapped from it.
    Written(PathBuf),
}

/// One corpus's place in the cache: the cache's root and a digest of the corpus's files.
pub struct CorpusCache {
    root: PathBuf,
    digest: String,
}

/// What a published encoded-corpus entry says about itself (`meta.json`, written last).
#[derive(Serialize, Deserialize)]
struct EncodedMeta {
    format: u32,
    key: String,
    source: String,
    pairs: usize,
    width: IdWidth,
    /// FNV-1a over every id (hex): the data fingerprint a checkpoint records.
    id_hash: String,
    ids_bytes: u64,
    offsets_bytes: u64,
    /// XXH3 of `ids.bin` and `offsets.bin` (see [`cache_checksum`]).
    ids_checksum: String,
    offsets_checksum: String,
    report: CleaningReport,
    too_long: usize,
    samples: Vec<String>,
}

const IDS_FILE: &str = "ids.bin";
const OFFSETS_FILE: &str = "offsets.bin";
const META_FILE: &str = "meta.json";

/// What a learned-tokenizer entry says about itself (`meta.json`, written last): each
/// file's checksum.
#[derive(Serialize, Deserialize)]
struct TokenizerMeta {
    format: u32,
    /// The entry's key, so that a whole entry of other files or settings copied here is
    /// told apart.
    key: String,
    checksums: std::collections::BTreeMap<String, String>,
}

/// What looking up a cache entry found.
enum Lookup<T> {
    Hit(T),
    /// No entry (or one from another version of the cache's format).
    Absent,
    /// An entry that is not as it was written: why, in a few words.
    Damaged(String),
}

impl CorpusCache {
    /// The cache for the training corpus `cfg` names, or none: caching off, a built-in corpus,
    /// a small one under `auto`, or no cache directory to be found. Reads the corpus's files
    /// once to digest them.
    pub fn for_training(cfg: &DataConfig, progress: &dyn Progress) -> anyhow::Result<Option<Self>> {
        let size = total_bytes(&cfg.train);
        let wanted = match cfg.cache {
            CorpusCacheMode::Off => false,
            CorpusCacheMode::On => true,
            CorpusCacheMode::Auto => size >= CorpusCacheMode::AUTO_BYTES,
        };
        if !wanted || files_of(&cfg.train).is_empty() {
            return Ok(None);
        }
        let Some(root) = cfg.cache_dir.clone().or_else(default_cache_root) else {
            return Ok(None);
        };
        let digest = digest_files(&cfg.train, size, progress)?;
        Ok(Some(Self {
            root: root.join("corpora"),
            digest,
        }))
    }

    fn entry(&self, kind: &str, key: &str) -> PathBuf {
        self.root.join(kind).join(&key[..32])
    }

    fn tokenizer_key(&self, cfg: &DataConfig) -> String {
        key_of(&[
            format!("tokenizer {CACHE_FORMAT}"),
            self.digest.clone(),
            format!(
                "{} {} {} {} {}",
                cfg.tokenizer,
                cfg.vocab_size,
                cfg.joint_vocab,
                cfg.min_freq,
                cfg.train.is_target_only()
            ),
        ])
    }

    /// Tokenizers learned earlier from these files with these settings; a damaged entry is
    /// named in a warning and left to be replaced.
    pub fn load_tokenizers(&self, cfg: &DataConfig) -> Option<(Tokenizers, PathBuf)> {
        let dir = self.entry("tokenizers", &self.tokenizer_key(cfg));
        match lookup_tokenizers(&dir, &self.tokenizer_key(cfg), cfg) {
            Lookup::Hit(tokenizers) => Some((tokenizers, dir)),
            Lookup::Absent => None,
            Lookup::Damaged(why) => {
                warn_damaged("learned tokenizer", &dir, &why, "learning it again");
                None
            }
        }
    }

    /// Keeps learned tokenizers for the next run; a failure is a warning (the run has them).
    pub fn store_tokenizers(&self, cfg: &DataConfig, tokenizers: &Tokenizers) {
        let key = self.tokenizer_key(cfg);
        let dir = self.entry("tokenizers", &key);
        // Stored only when none loaded: an entry there is damaged, and is replaced.
        let _ = std::fs::remove_dir_all(&dir);
        let stored = tokenizers.files().and_then(|files| {
            publish(&dir, |staging| {
                let mut checksums = std::collections::BTreeMap::new();
                for (name, bytes) in &files {
                    write_synced(&staging.join(name), bytes)?;
                    checksums.insert(name.to_string(), checksum(bytes));
                }
                let meta = TokenizerMeta {
                    format: CACHE_FORMAT,
                    key: key.clone(),
                    checksums,
                };
                write_synced(&staging.join(META_FILE), &sealed(&meta)?)
            })
        });
        if let Err(e) = stored {
            warn_not_cached("the learned tokenizer", &dir, &e);
        }
    }

    fn encoded_key(
        &self,
        source: &CorpusSource,
        tokenizers: &Tokenizers,
        max_positions: usize,
    ) -> anyhow::Result<String> {
        let mut parts = vec![
            format!("encoded {CACHE_FORMAT}"),
            self.digest.clone(),
            format!("{max_positions} {}", source.is_target_only()),
        ];
        for (name, bytes) in tokenizers.files()? {
            parts.push(name.to_string());
            parts.push(hex(&Sha256::digest(&bytes)));
        }
        Ok(key_of(&parts))
    }

    /// The encoded corpus from an entry, when one is there and whole; a damaged one is named
    /// in a warning (the caller encodes again).
    fn load_encoded(&self, key: &str) -> Option<PreparedCorpus> {
        let dir = self.entry("encoded", key);
        match lookup_encoded(&dir, key) {
            Lookup::Hit(corpus) => Some(corpus),
            Lookup::Absent => None,
            Lookup::Damaged(why) => {
                warn_damaged("encoded corpus", &dir, &why, "encoding the corpus again");
                None
            }
        }
    }
}

/// The encoded corpus in `dir`, checked against its metadata: sizes, checksums, offsets.
fn lookup_encoded(dir: &Path, key: &str) -> Lookup<PreparedCorpus> {
    if std::fs::symlink_metadata(dir.join(META_FILE)).is_err() {
        return Lookup::Absent;
    }
    // The key holds the cache's format: an entry here was written in this one.
    let meta: EncodedMeta =
        match read_entry_file(dir, META_FILE, MOST_META_BYTES).and_then(|b| unsealed(&b)) {
            Ok(meta) => meta,
            Err(why) => return Lookup::Damaged(why),
        };
    if meta.format != CACHE_FORMAT || meta.key != key {
        return Lookup::Damaged(format!("{META_FILE} names another corpus"));
    }
    let map = |name: &str, bytes: u64, expected: &str| -> Result<Bytes, String> {
        let file = open_entry_file(dir, name)?;
        let size = file.metadata().map_err(|e| format!("{name}: {e}"))?.len();
        if size != bytes {
            return Err(format!("{name} is {size} bytes, not the {bytes} written"));
        }
        let data = if bytes == 0 {
            Bytes::Owned(Vec::new())
        } else {
            // SAFETY: the entry is published once and never written again; a file changed
            // under the map by hand is the one risk, as with any memory-mapped data, and the
            // checksum below is taken over what the map reads.
            Bytes::Mapped(unsafe { memmap2::Mmap::map(&file) }.map_err(|e| format!("{name}: {e}"))?)
        };
        if checksum(&data) != expected {
            return Err(format!(
                "{name} does not match its checksum (it changed on disk)"
            ));
        }
        Ok(data)
    };
    let corpus = map(IDS_FILE, meta.ids_bytes, &meta.ids_checksum).and_then(|ids| {
        let offsets = map(OFFSETS_FILE, meta.offsets_bytes, &meta.offsets_checksum)?;
        let id_hash = u64::from_str_radix(&meta.id_hash, 16)
            .map_err(|_| format!("{META_FILE} has id_hash {:?}", meta.id_hash))?;
        let corpus =
            EncodedCorpus::new(ids, meta.width, offsets, id_hash).map_err(|e| format!("{e:#}"))?;
        if corpus.len() != meta.pairs {
            return Err(format!(
                "it holds {} pairs, where {META_FILE} says {}",
                corpus.len(),
                meta.pairs
            ));
        }
        Ok(corpus)
    });
    match corpus {
        Ok(corpus) => Lookup::Hit(PreparedCorpus {
            corpus,
            report: meta.report,
            too_long: meta.too_long,
            samples: meta.samples,
            cache: CacheUse::Reused(dir.to_path_buf()),
        }),
        Err(why) => Lookup::Damaged(why),
    }
}

/// The tokenizers in `dir`, each file checked against its checksum.
fn lookup_tokenizers(dir: &Path, key: &str, cfg: &DataConfig) -> Lookup<Tokenizers> {
    if std::fs::symlink_metadata(dir.join(META_FILE)).is_err() {
        return Lookup::Absent;
    }
    // The key holds the cache's format: an entry here was written in this one.
    let meta = match read_entry_file(dir, META_FILE, MOST_META_BYTES)
        .and_then(|b| unsealed::<TokenizerMeta>(&b))
    {
        Ok(meta) if meta.format == CACHE_FORMAT && meta.key == key => meta,
        Ok(_) => return Lookup::Damaged(format!("{META_FILE} names another entry")),
        Err(why) => return Lookup::Damaged(why),
    };
    // Every file of the entry is one it lists: the tokenizer reads nothing unchecked.
    let listed = |name: &str| name == META_FILE || meta.checksums.contains_key(name);
    if let Some(stray) = entry_names(dir).into_iter().find(|name| !listed(name)) {
        return Lookup::Damaged(format!(
            "{stray} is not one of the files it was written with"
        ));
    }
    for (name, expected) in &meta.checksums {
        match read_entry_file(dir, name, MOST_TOKENIZER_BYTES) {
            Ok(bytes) if checksum(&bytes) == *expected => {}
            Ok(_) => {
                return Lookup::Damaged(format!(
                    "{name} does not match its checksum (it changed on disk)"
                ))
            }
            Err(why) => return Lookup::Damaged(why),
        }
    }
    match Tokenizers::load(dir, cfg) {
        Ok(tokenizers) => Lookup::Hit(tokenizers),
        Err(e) => Lookup::Damaged(format!("{e:#}")),
    }
}

/// The names in the entry directory `dir`.
fn entry_names(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default()
}

/// The most bytes a learned tokenizer's file may have (a 64,000-piece BPE's is a few MB).
const MOST_TOKENIZER_BYTES: u64 = 256 << 20;

/// One line: which cache entry is damaged, how, and that the run replaces it.
fn warn_damaged(what: &str, dir: &Path, why: &str, instead: &str) {
    eprintln!(
        "warning: the cached {what} in {} is damaged: {why}; {instead} and replacing the entry",
        dir.display()
    );
}

/// `$TRANSFORMER_CACHE`, else `$XDG_CACHE_HOME/transformer`, else `~/.cache/transformer`.
fn default_cache_root() -> Option<PathBuf> {
    let from = |name: &str| {
        std::env::var_os(name)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };
    from("TRANSFORMER_CACHE")
        .or_else(|| from("XDG_CACHE_HOME").map(|p| p.join("transformer")))
        .or_else(|| from("HOME").map(|p| p.join(".cache").join("transformer")))
}

/// SHA-256 over each file's size and bytes, in order (hex).
fn digest_files(
    source: &CorpusSource,
    size: u64,
    progress: &dyn Progress,
) -> anyhow::Result<String> {
    let counter = Arc::new(ReadCounter::default());
    let reading = counter.clone();
    let _pass = progress.data_pass(
        "checking the corpus",
        size,
        Box::new(move || reading.read()),
    );
    let mut hasher = Sha256::new();
    let mut buffer = vec![0u8; 1 << 20];
    for path in files_of(source) {
        super::corpus_stream::refuse_unless_regular(path)?;
        let mut file = File::open(path).map_err(|e| {
            anyhow::anyhow!(
                "cannot read {}: {e}; check the path in the config (relative paths start from \
                 the directory you run in)",
                path.display()
            )
        })?;
        hasher.update(file.metadata()?.len().to_le_bytes());
        loop {
            let n = file
                .read(&mut buffer)
                .map_err(|e| anyhow::anyhow!("cannot read {}: {e}", path.display()))?;
            if n == 0 {
                break;
            }
            hasher.update(&buffer[..n]);
            counter.add(n as u64);
        }
    }
    Ok(hex(&hasher.finalize()))
}

fn key_of(parts: &[String]) -> String {
    let mut hasher = Sha256::new();
    for part in parts {
        hasher.update((part.len() as u64).to_le_bytes());
        hasher.update(part.as_bytes());
    }
    hex(&hasher.finalize())
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Fills a hidden staging directory beside `dir` and renames it to `dir`: readers see a whole
/// entry or none. Another process that published the same entry first wins (its entry is the
/// same). Staging directories of processes no longer running are removed first.
fn publish(dir: &Path, fill: impl FnOnce(&Path) -> anyhow::Result<()>) -> anyhow::Result<()> {
    let parent = dir.parent().expect("cache entries have a parent");
    std::fs::create_dir_all(parent)?;
    remove_abandoned_staging(parent);
    let name = dir
        .file_name()
        .expect("named")
        .to_string_lossy()
        .into_owned();
    let staging = parent.join(format!(".{name}.staging-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&staging);
    std::fs::create_dir(&staging)?;
    let outcome = fill(&staging).and_then(|()| {
        File::open(&staging)?.sync_all()?;
        match std::fs::rename(&staging, dir) {
            Ok(()) => Ok(()),
            Err(_) if dir.join(META_FILE).is_file() => {
                std::fs::remove_dir_all(&staging)?;
                Ok(())
            }
            Err(e) => Err(e.into()),
        }
    });
    if outcome.is_err() {
        let _ = std::fs::remove_dir_all(&staging);
    }
    outcome
}

/// Removes `.NAME.staging-PID` directories whose process has ended (killed mid-write).
fn remove_abandoned_staging(parent: &Path) {
    let Ok(entries) = std::fs::read_dir(parent) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some((_, pid)) = name.rsplit_once(".staging-") else {
            continue;
        };
        let alive = Path::new("/proc").join(pid).exists();
        if name.starts_with('.') && pid.parse::<u32>().is_ok() && !alive {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

fn write_synced(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    let mut file = File::create(path)?;
    file.write_all(bytes)?;
    file.sync_all()?;
    Ok(())
}

/// One line: what could not be cached where, why, what to do; the run goes on.
fn warn_not_cached(what: &str, dir: &Path, e: &anyhow::Error) {
    use std::io::ErrorKind;
    let kind = e
        .chain()
        .find_map(|e| e.downcast_ref::<std::io::Error>())
        .map(std::io::Error::kind);
    // An entry the run could not replace (one it may not read or remove) is the cache's
    // own; a fix elsewhere is no fix.
    let stuck = format!("remove {} by hand", dir.display());
    let advice = match kind {
        Some(ErrorKind::DirectoryNotEmpty | ErrorKind::PermissionDenied) => stuck.as_str(),
        _ => crate::atomic_file::advice_for(e.as_ref()),
    };
    eprintln!(
        "warning: cannot cache {what} in {}: {e:#}; {advice}, or set data.cache = \"off\" \
         (this run goes on without the cache)",
        dir.display()
    );
}

/// Learns the tokenizers `cfg` asks for over one streamed pass of the training corpus (or
/// takes those cached from an earlier run over the same files), saying what it did through
/// `note`. MarianMT's SentencePiece learner needs the sentences in memory; it gets them.
pub fn learn_tokenizers(
    cfg: &DataConfig,
    cache: Option<&CorpusCache>,
    progress: &dyn Progress,
    note: &mut dyn FnMut(String),
) -> anyhow::Result<Tokenizers> {
    let cacheable = cfg.tokenizer != TokenizerKind::Marian;
    if let Some((tokenizers, dir)) = cache
        .filter(|_| cacheable)
        .and_then(|c| c.load_tokenizers(cfg))
    {
        note(format!(
            "tokenizer: learned from these files by an earlier run, read from {}",
            dir.display()
        ));
        return Ok(tokenizers);
    }
    let started = std::time::Instant::now();
    let tokenizers = match cfg.tokenizer {
        TokenizerKind::Marian => {
            let (pairs, _) = super::read_corpus(&cfg.train)?;
            note_lines_left_out_of_sentencepiece(&pairs, note);
            Tokenizers::learn(cfg, &pairs)?
        }
        TokenizerKind::Word | TokenizerKind::Bpe => learn_streamed(cfg, progress)?,
    };
    note(format!(
        "tokenizer: learned in {:.1}s",
        started.elapsed().as_secs_f64()
    ));
    if let (Some(cache), true) = (cache, cacheable) {
        cache.store_tokenizers(cfg, &tokenizers);
    }
    Ok(tokenizers)
}

/// Says how many sentences learning the SentencePiece models leaves out for their length
/// (they still train, segmented by the models learned from the rest).
fn note_lines_left_out_of_sentencepiece(pairs: &[SentencePair], note: &mut dyn FnMut(String)) {
    let limit = super::SENTENCEPIECE_MAX_SENTENCE_BYTES;
    let long = pairs
        .iter()
        .flat_map(|p| [&p.src, &p.tgt])
        .filter(|text| text.len() > limit)
        .count();
    if long > 0 {
        note(format!(
            "tokenizer: {long} sentences longer than {limit} bytes left out of learning the \
             SentencePiece models, as SentencePiece's trainer leaves them out"
        ));
    }
}

/// Word counts of one block, per side, as the tokenizer kind counts them.
enum BlockCounts {
    Words(HashMap<String, usize>, HashMap<String, usize>),
    Bpe(BpeWordCounts, BpeWordCounts),
}

/// Word or BPE tokenizers learned from counts gathered block by block on every core. The
/// same counts as [`Tokenizers::learn`] over the pairs in memory, so the same tokenizers.
fn learn_streamed(cfg: &DataConfig, progress: &dyn Progress) -> anyhow::Result<Tokenizers> {
    let target_only = cfg.train.is_target_only();
    // A joint BPE vocabulary counts both sides together (on the source's side here).
    let joint_bpe = cfg.tokenizer == TokenizerKind::Bpe && cfg.joint_vocab && !target_only;
    let counter = Arc::new(ReadCounter::default());
    let reading = counter.clone();
    let pass = progress.data_pass(
        "learning the tokenizer",
        total_bytes(&cfg.train),
        Box::new(move || reading.read()),
    );
    let count_block = |pairs: Vec<SentencePair>| -> anyhow::Result<BlockCounts> {
        Ok(match cfg.tokenizer {
            TokenizerKind::Bpe => {
                let (mut src, mut tgt) = (BpeWordCounts::default(), BpeWordCounts::default());
                for pair in &pairs {
                    if joint_bpe {
                        src.add(&pair.src);
                        src.add(&pair.tgt);
                    } else {
                        src.add(&pair.src);
                        tgt.add(&pair.tgt);
                    }
                }
                BlockCounts::Bpe(src, tgt)
            }
            _ => {
                let (mut src, mut tgt) = (HashMap::new(), HashMap::new());
                for pair in &pairs {
                    count_words(&tokenize(&pair.src), &mut src);
                    count_words(&tokenize(&pair.tgt), &mut tgt);
                }
                BlockCounts::Words(src, tgt)
            }
        })
    };
    let mut totals: Option<BlockCounts> = None;
    stream_corpus(&cfg.train, &counter, count_block, |block| {
        totals = Some(match (totals.take(), block) {
            (None, block) => block,
            (Some(BlockCounts::Bpe(mut a, mut b)), BlockCounts::Bpe(c, d)) => {
                a.merge(c);
                b.merge(d);
                BlockCounts::Bpe(a, b)
            }
            (Some(BlockCounts::Words(mut a, mut b)), BlockCounts::Words(c, d)) => {
                for (totals, block) in [(&mut a, c), (&mut b, d)] {
                    for (word, count) in block {
                        *totals.entry(word).or_default() += count;
                    }
                }
                BlockCounts::Words(a, b)
            }
            _ => unreachable!("every block is counted the same way"),
        });
        Ok(())
    })?;
    pass.set_message("learning the tokenizer: the vocabulary from the counts");
    let (src, tgt) = match totals.expect("a corpus with pairs has a block") {
        BlockCounts::Words(src, tgt) => (
            TextTokenizer::Word(Vocab::from_counts(src, cfg.min_freq)),
            TextTokenizer::Word(Vocab::from_counts(tgt, cfg.min_freq)),
        ),
        BlockCounts::Bpe(src, _) if joint_bpe => {
            let joint = learn_bpe_from_counts(&src, cfg)?;
            (joint.clone(), joint)
        }
        BlockCounts::Bpe(src, tgt) => (
            learn_bpe_from_counts(&src, cfg)?,
            learn_bpe_from_counts(&tgt, cfg)?,
        ),
    };
    Ok(if target_only {
        // A language model's one vocabulary stands on both sides.
        Tokenizers {
            src: tgt.clone(),
            tgt,
            joint: cfg.tokenizer == TokenizerKind::Bpe && cfg.joint_vocab,
        }
    } else {
        Tokenizers {
            src,
            tgt,
            joint: joint_bpe,
        }
    })
}

/// One block's pairs as ids in the corpus's width.
struct EncodedBlock {
    ids: Vec<u8>,
    lens: Vec<(u32, u32)>,
    too_long: usize,
    sources: Vec<String>,
}

/// The training corpus encoded with `tokenizers` (pairs longer than `max_positions` on either
/// side left out): mapped from the cache when an entry for these files and tokenizers is
/// there, else encoded over one streamed pass on every core and, with a cache, written to a
/// new entry as it goes.
pub fn encode_training_corpus(
    cfg: &DataConfig,
    tokenizers: &Tokenizers,
    max_positions: usize,
    samples: usize,
    cache: Option<&CorpusCache>,
    progress: &dyn Progress,
) -> anyhow::Result<PreparedCorpus> {
    let Some(cache) = cache else {
        return encode_in_memory(cfg, tokenizers, max_positions, samples, progress);
    };
    let key = cache.encoded_key(&cfg.train, tokenizers, max_positions)?;
    if let Some(hit) = cache.load_encoded(&key) {
        return Ok(hit);
    }
    let dir = cache.entry("encoded", &key);
    // An entry there that did not load is damaged (cut short, edited): replace it.
    let _ = std::fs::remove_dir_all(&dir);
    let mut prepared = None;
    let written = publish(&dir, |staging| {
        let file = Checksummed::new(BufWriter::with_capacity(
            1 << 20,
            File::create(staging.join(IDS_FILE))?,
        ));
        let (encoded, file) = encode(cfg, tokenizers, max_positions, samples, file, progress)?;
        let (file, ids_checksum) = file.finish();
        let ids_bytes = {
            let file = file.into_inner().map_err(|e| e.into_error())?;
            file.sync_all()?;
            file.metadata()?.len()
        };
        write_synced(&staging.join(OFFSETS_FILE), &encoded.offsets)?;
        let meta = EncodedMeta {
            format: CACHE_FORMAT,
            key: key.clone(),
            source: cfg.train.to_string(),
            pairs: encoded.offsets.len() / 16,
            width: encoded.width,
            id_hash: format!("{:016x}", encoded.id_hash),
            ids_bytes,
            offsets_bytes: encoded.offsets.len() as u64,
            ids_checksum,
            offsets_checksum: checksum(&encoded.offsets),
            report: encoded.report.clone(),
            too_long: encoded.too_long,
            samples: encoded.samples.clone(),
        };
        write_synced(&staging.join(META_FILE), &sealed(&meta)?)?;
        prepared = Some(encoded);
        Ok(())
    });
    match written {
        Ok(()) => {
            if let Some(hit) = cache.load_encoded(&key) {
                return Ok(PreparedCorpus {
                    cache: CacheUse::Written(dir),
                    ..hit
                });
            }
            anyhow::bail!(
                "the encoded corpus just written to {} cannot be read back; remove it and \
                 train again",
                dir.display()
            )
        }
        // A bad line is the corpus's fault, not the cache's: say so, whatever was staged.
        Err(e) if e.downcast_ref::<std::io::Error>().is_none() && prepared.is_none() => Err(e),
        Err(e) => {
            warn_not_cached("the encoded corpus", &dir, &e);
            encode_in_memory(cfg, tokenizers, max_positions, samples, progress)
        }
    }
}

/// What one pass of encoding produced, before it is a corpus.
struct Encoded {
    width: IdWidth,
    offsets: Vec<u8>,
    id_hash: u64,
    report: CleaningReport,
    too_long: usize,
    samples: Vec<String>,
}

fn encode_in_memory(
    cfg: &DataConfig,
    tokenizers: &Tokenizers,
    max_positions: usize,
    samples: usize,
    progress: &dyn Progress,
) -> anyhow::Result<PreparedCorpus> {
    let (encoded, ids) = encode(
        cfg,
        tokenizers,
        max_positions,
        samples,
        Vec::new(),
        progress,
    )?;
    let corpus = EncodedCorpus::new(
        Bytes::Owned(ids),
        encoded.width,
        Bytes::Owned(encoded.offsets),
        encoded.id_hash,
    )?;
    Ok(PreparedCorpus {
        corpus,
        report: encoded.report,
        too_long: encoded.too_long,
        samples: encoded.samples,
        cache: CacheUse::Unused,
    })
}

/// One streamed pass: every block encoded on a worker thread (each thread with its own word
/// caches), the blocks' ids written to `ids` in corpus order.
fn encode<W: Write>(
    cfg: &DataConfig,
    tokenizers: &Tokenizers,
    max_positions: usize,
    samples: usize,
    ids: W,
    progress: &dyn Progress,
) -> anyhow::Result<(Encoded, W)> {
    let sizes = tokenizers.vocab_sizes();
    let width = IdWidth::for_vocab(sizes.src.max(sizes.tgt));
    let specials = tokenizers.specials();
    let counter = Arc::new(ReadCounter::default());
    let reading = counter.clone();
    let _pass = progress.data_pass(
        "encoding",
        total_bytes(&cfg.train),
        Box::new(move || reading.read()),
    );
    // One pair of word caches per worker thread, each only ever locked by its own thread.
    let caches: Vec<Mutex<(WordIdsCache, WordIdsCache)>> = (0..rayon::current_num_threads() + 1)
        .map(|_| Mutex::default())
        .collect();
    let encode_block = |pairs: Vec<SentencePair>| -> anyhow::Result<EncodedBlock> {
        let slot =
            rayon::current_thread_index().map_or(caches.len() - 1, |i| i.min(caches.len() - 1));
        let mut guard = caches[slot].lock().unwrap_or_else(|e| e.into_inner());
        let (src_cache, tgt_cache) = &mut *guard;
        let mut block = EncodedBlock {
            ids: Vec::with_capacity(pairs.len() * 64),
            lens: Vec::with_capacity(pairs.len()),
            too_long: 0,
            sources: pairs.iter().take(samples).map(|p| p.src.clone()).collect(),
        };
        for pair in &pairs {
            let src = match pair.src.as_str() {
                "" => Vec::new(),
                text => specials.source(&tokenizers.src.encode_normalized(text, src_cache)?),
            };
            let tgt = specials.target(&tokenizers.tgt.encode_normalized(&pair.tgt, tgt_cache)?);
            if src.len() > max_positions || tgt.len() > max_positions {
                block.too_long += 1;
                continue;
            }
            width.put(&src, &mut block.ids);
            width.put(&tgt, &mut block.ids);
            block.lens.push((src.len() as u32, tgt.len() as u32));
        }
        Ok(block)
    };
    let mut builder = CorpusBuilder::new(ids, width);
    let (mut too_long, mut first_sources) = (0, Vec::new());
    let report = stream_corpus(&cfg.train, &counter, encode_block, |block| {
        too_long += block.too_long;
        if first_sources.len() < samples {
            first_sources.extend(block.sources);
            first_sources.truncate(samples);
        }
        builder.push_encoded(&block.ids, &block.lens)?;
        Ok(())
    })?;
    let id_hash = builder.id_hash();
    let (ids, offsets) = builder.finish();
    Ok((
        Encoded {
            width,
            offsets,
            id_hash,
            report,
            too_long,
            samples: first_sources,
        },
        ids,
    ))
}
