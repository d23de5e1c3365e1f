//! The training corpus from its files to the ids the loop batches from, at any size: the
//! tokenizer is learned from word counts gathered over one streamed pass, the pairs are
//! encoded over another and written as they come, and both are cached on disk under a digest
//! of the files' bytes, so that a resume or a second run over the same corpus maps the ids
//! instead of reading and encoding again, and a changed file is never read from a stale
//! entry. A cache entry is published by renaming a finished directory: a run killed or a disk
//! filled mid-write leaves only a hidden staging directory, which no run reads.
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::cache_entry::{publish, write_synced, IDS_FILE, META_FILE, OFFSETS_FILE};
use super::cache_key::{digest_files, hex, key_of};
use crate::config::{CorpusCacheMode, CorpusSource, DataConfig, VocabSizes};
use crate::corpus::CleaningReport;
use crate::corpus::{files_of, total_bytes};
use crate::progress::Progress;
use crate::tokenize::Tokenizers;
use crate::training_data::checksum::{
    checksum, open_entry_file, read_entry_file, sealed, unsealed, MOST_META_BYTES,
};
use crate::training_data::encoded::{Bytes, EncodedCorpus, IdWidth};

/// Bumped when the layout or meaning of a cache entry changes: older entries are then
/// ignored (their key differs). 2: every file carries a checksum.
pub(super) const CACHE_FORMAT: u32 = 2;

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
pub(super) struct EncodedMeta {
    pub(super) format: u32,
    pub(super) key: String,
    pub(super) source: String,
    pub(super) pairs: usize,
    pub(super) width: IdWidth,
    /// FNV-1a over every id (hex): the data fingerprint a checkpoint records.
    pub(super) id_hash: String,
    pub(super) ids_bytes: u64,
    pub(super) offsets_bytes: u64,
    /// XXH3 of `ids.bin` and `offsets.bin` (see [`cache_checksum`]).
    pub(super) ids_checksum: String,
    pub(super) offsets_checksum: String,
    pub(super) report: CleaningReport,
    pub(super) too_long: usize,
    pub(super) samples: Vec<String>,
}

/// What a learned-tokenizer entry says about itself (`meta.json`, written last): each
/// file's checksum.
#[derive(Serialize, Deserialize)]
pub(super) struct TokenizerMeta {
    format: u32,
    /// The entry's key, so that a whole entry of other files or settings copied here is
    /// told apart.
    key: String,
    checksums: std::collections::BTreeMap<String, String>,
}

/// What looking up a cache entry found.
pub(super) enum Lookup<T> {
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

    pub(super) fn entry(&self, kind: &str, key: &str) -> PathBuf {
        self.root.join(kind).join(&key[..32])
    }

    pub(super) fn tokenizer_key(&self, cfg: &DataConfig) -> String {
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

    pub(super) fn encoded_key(
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
        // A multilingual model's ids are framed with its language pair's tokens.
        if let Some(pair) = tokenizers.languages {
            parts.push(format!("languages {} {}", pair.source, pair.target));
        }
        Ok(key_of(&parts))
    }

    /// The encoded corpus from an entry, when one is there and whole, its ids within
    /// `vocab`; a damaged one is named in a warning (the caller encodes again).
    pub(super) fn load_encoded(&self, key: &str, vocab: VocabSizes) -> Option<PreparedCorpus> {
        let dir = self.entry("encoded", key);
        match lookup_encoded(&dir, key, vocab) {
            Lookup::Hit(corpus) => Some(corpus),
            Lookup::Absent => None,
            Lookup::Damaged(why) => {
                warn_damaged("encoded corpus", &dir, &why, "encoding the corpus again");
                None
            }
        }
    }
}

/// The encoded corpus in `dir`, checked against its metadata (sizes, checksums, offsets) and
/// its ids against `vocab`.
pub(super) fn lookup_encoded(dir: &Path, key: &str, vocab: VocabSizes) -> Lookup<PreparedCorpus> {
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
        corpus
            .check_ids(vocab.src, vocab.tgt)
            .map_err(|e| format!("{e:#}"))?;
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
pub(super) fn lookup_tokenizers(dir: &Path, key: &str, cfg: &DataConfig) -> Lookup<Tokenizers> {
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
pub(super) fn entry_names(dir: &Path) -> Vec<String> {
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
pub(super) const MOST_TOKENIZER_BYTES: u64 = 256 << 20;

/// One line: which cache entry is damaged, how, and that the run replaces it.
pub(super) fn warn_damaged(what: &str, dir: &Path, why: &str, instead: &str) {
    log::warn!(
        "the cached {what} in {} is damaged: {why}; {instead} and replacing the entry",
        dir.display()
    );
}

/// `$TRANSFORMER_CACHE`, else `$XDG_CACHE_HOME/transformer`, else `~/.cache/transformer`.
pub(super) fn default_cache_root() -> Option<PathBuf> {
    let from = |name: &str| {
        std::env::var_os(name)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };
    from("TRANSFORMER_CACHE")
        .or_else(|| from("XDG_CACHE_HOME").map(|p| p.join("transformer")))
        .or_else(|| from("HOME").map(|p| p.join(".cache").join("transformer")))
}

/// One line: what could not be cached where, why, what to do; the run goes on.
pub(super) fn warn_not_cached(what: &str, dir: &Path, e: &anyhow::Error) {
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
    log::warn!(
        "cannot cache {what} in {}: {e:#}; {advice}, or set data.cache = \"off\" \
         (this run goes on without the cache)",
        dir.display()
    );
}
