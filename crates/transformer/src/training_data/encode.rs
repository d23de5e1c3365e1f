//! The training corpus encoded into flat ids over one streamed pass on every core, written
//! to a new cache entry as it goes, or mapped from an entry already there.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::sync::{Arc, Mutex};

use super::cache::{
    warn_not_cached, CacheUse, CorpusCache, EncodedMeta, PreparedCorpus, CACHE_FORMAT,
};
use super::cache_entry::{publish, write_synced, IDS_FILE, META_FILE, OFFSETS_FILE};
use crate::config::DataConfig;
use crate::corpus::{stream_corpus, total_bytes, ReadCounter};
use crate::corpus::{CleaningReport, SentencePair};
use crate::progress::Progress;
use crate::tokenize::bpe::WordIdsCache;
use crate::tokenize::Tokenizers;
use crate::training_data::checksum::{checksum, sealed, Checksummed};
use crate::training_data::encoded::{Bytes, CorpusBuilder, EncodedCorpus, IdWidth};

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
    if let Some(hit) = cache.load_encoded(&key, tokenizers.vocab_sizes()) {
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
            if let Some(hit) = cache.load_encoded(&key, tokenizers.vocab_sizes()) {
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
