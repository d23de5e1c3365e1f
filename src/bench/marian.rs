//! The MarianMT decoding workloads: a directory of OPUS-MT's shape (6 + 6 layers, d_model 512,
//! d_ff 2048, 8 heads, a 58,101-token vocabulary; `scripts/make_marian_fixture.py --bench`)
//! translating the first sentences of Multi30k's test2016 with the directory's own settings:
//! greedy one sentence at a time, greedy over 32 in one batch, beam 4 over the same 32, at
//! most 64 tokens each. scripts/bench_marian.py decodes the same in CTranslate2 (converted
//! by its own converter) and in transformers' `generate()`.

use std::io::Read;
use std::path::Path;
use std::time::Instant;

use anyhow::Context;
use candle_core::Device;

use super::Measurement;
use crate::infer::settings::DecodeRequest;
use crate::infer::{LoadOptions, Translator};

/// Most tokens each translation generates, `</s>` included.
pub const MARIAN_MAX_TOKENS: usize = 64;

/// How a Marian workload decodes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MarianWorkload {
    GreedyOne,
    GreedyBatch,
    Beam4,
}

/// Translates `sentences` sources of test2016 with the MarianMT directory `dir` opened with
/// `options` (its compute type, a vocabulary map); the measurement counts generated tokens.
pub fn marian_decoding(
    kind: MarianWorkload,
    sentences: usize,
    dir: &Path,
    device: &Device,
    options: LoadOptions,
) -> anyhow::Result<Measurement> {
    let compute = options.compute_type.unwrap_or_default();
    let opened = Translator::open(dir, device, options)?;
    let sources = test2016_sources(sentences)?;
    // The workload's own beam, length limit and a neutral length penalty over the
    // directory's settings, as the peers are run (scripts/bench_marian.py).
    let asked = DecodeRequest {
        beam: Some(if kind == MarianWorkload::Beam4 { 4 } else { 1 }),
        length_penalty: Some(1.0),
        max_len: Some(MARIAN_MAX_TOKENS),
        n_best: None,
        ..DecodeRequest::by(crate::flags::FLAGS)
    };
    let options = opened.decode_settings(Some(asked), None)?;
    let translator = opened.with(options);
    // One sentence first, untimed, to warm up.
    translator.translate(&sources[0])?;
    let started = Instant::now();
    let translations = match kind {
        MarianWorkload::GreedyOne => sources
            .iter()
            .map(|s| translator.translate(s))
            .collect::<anyhow::Result<Vec<_>>>()?,
        MarianWorkload::GreedyBatch | MarianWorkload::Beam4 => {
            translator.translate_batch(&sources)?
        }
    };
    let seconds = started.elapsed().as_secs_f64();
    let tokens: usize = translations.iter().map(|t| t.ids.len()).sum();
    Ok(Measurement {
        workload: match kind {
            MarianWorkload::GreedyOne => "marian-greedy-1",
            MarianWorkload::GreedyBatch => "marian-greedy-32",
            MarianWorkload::Beam4 => "marian-beam4-32",
        }
        .into(),
        seconds,
        work: tokens as f64,
        unit: "tokens".into(),
        flops: 0.0,
        ranks: None,
        collective_seconds: None,
        precision: super::decoding::compute_precision(compute),
    })
}

/// The first `count` German sentences of Multi30k's test2016 (scripts/get-multi30k.sh).
pub fn test2016_sources(count: usize) -> anyhow::Result<Vec<String>> {
    let path = Path::new("data/multi30k/test2016.de.gz");
    let file = std::fs::File::open(path).with_context(|| {
        format!(
            "cannot read {}; run scripts/get-multi30k.sh",
            path.display()
        )
    })?;
    let mut text = String::new();
    flate2::read::GzDecoder::new(file)
        .read_to_string(&mut text)
        .with_context(|| format!("{} is damaged", path.display()))?;
    Ok(text.lines().take(count).map(str::to_string).collect())
}
