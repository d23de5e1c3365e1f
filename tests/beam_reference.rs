//! Beam search against exhaustive search. On the parity fixture (a 14-word target
//! vocabulary), every hypothesis of up to three tokens is enumerated and scored with
//! teacher-forced full decoding, which shares no code with the search's cached, reordered
//! decoder rows, its candidate selection or its pool of ended hypotheses. A beam wide enough
//! to keep every prefix must return exactly the exhaustive ranking; a narrow one must return
//! hypotheses the enumeration scores the same, none of them holding `<s>` or `<pad>`. The
//! step limit (three) cuts the search: the hypotheses still open then compete with the ended
//! ones on length-normalised score, as Hugging Face's beam search finalizes them.

mod common;

use std::path::Path;

use candle_core::{Device, Tensor};
use common::{teacher_forced, Sources};
use transformer::checkpoint::{self, Checkpoint};
use transformer::decoding::{beam_search, teacher_forced_log_probs, BeamSettings, Hypothesis};
use transformer::model::{masks, DecodingModel};
use transformer::tokenize::specials::{BOS_ID, EOS_ID, PAD_ID};
use transformer::training_data::batch::with_boundaries;

const SOURCES: [&str; 2] = ["ich mochte ein bier", "er mochte wasser"];
/// Longest hypothesis enumerated: 1 + 11 + 121 ended ones, and 1331 of three tokens cut open
/// by the limit.
const MAX_STEPS: usize = 3;
const N_BEST: usize = 10;

fn fixture() -> Checkpoint {
    checkpoint::load(Path::new("tests/fixtures/parity"), &Device::Cpu).unwrap()
}

/// `(1, len)` ids and their `(1, 1, len)` mask.
fn source(loaded: &Checkpoint, sentence: &str) -> (Tensor, Tensor) {
    let ids = with_boundaries(&loaded.tokenizers.src.encode(sentence).unwrap().ids);
    let src = Tensor::from_slice(&ids, (1, ids.len()), &Device::Cpu).unwrap();
    let mask = masks::padding_mask(&src, PAD_ID).unwrap();
    (src, mask)
}

/// A scored hypothesis of the enumeration: ids (with `</s>` when it ended) and the sum of
/// their log-probabilities.
#[derive(Debug, Clone)]
struct Scored {
    ids: Vec<u32>,
    log_prob: f64,
}

/// ((5 + length) / 6)^alpha, as the GNMT paper defines it.
fn normalised(log_prob: f64, length: usize, alpha: f64) -> f64 {
    log_prob / ((5.0 + length as f64) / 6.0).powf(alpha)
}

/// Every hypothesis a search limited to `MAX_STEPS` steps can return (the ended ones of at
/// most `MAX_STEPS` tokens, and the open ones the limit cuts), by full (uncached) decoding of each
/// prefix: `<pad>` and `<s>` are never generated.
fn enumerate(loaded: &Checkpoint, src: &Tensor, src_mask: &Tensor) -> Vec<Scored> {
    let model = &*loaded.model;
    let vocab = loaded.tokenizers.tgt.vocab_size();
    let mut ended = Vec::new();
    let mut open = vec![Scored {
        ids: Vec::new(),
        log_prob: 0.0,
    }];
    for _ in 0..MAX_STEPS {
        let rows = open.len();
        let tgt: Vec<u32> = open
            .iter()
            .flat_map(|p| std::iter::once(BOS_ID).chain(p.ids.iter().copied()))
            .collect();
        let len = tgt.len() / rows;
        let tgt_in = Tensor::from_vec(tgt, (rows, len), &Device::Cpu).unwrap();
        let src_rows = src.repeat((rows, 1)).unwrap();
        let _ = src_mask;
        let log_probs =
            teacher_forced_log_probs(model, &teacher_forced(&src_rows, &tgt_in)).unwrap();
        let last = log_probs
            .narrow(1, len - 1, 1)
            .unwrap()
            .squeeze(1)
            .unwrap()
            .to_vec2::<f32>()
            .unwrap();
        let mut next = Vec::new();
        for (prefix, row) in open.iter().zip(&last) {
            for id in 0..vocab as u32 {
                if id == PAD_ID || id == BOS_ID {
                    continue;
                }
                let mut ids = prefix.ids.clone();
                ids.push(id);
                let scored = Scored {
                    ids,
                    log_prob: prefix.log_prob + f64::from(row[id as usize]),
                };
                if id == EOS_ID {
                    ended.push(scored);
                } else {
                    next.push(scored);
                }
            }
        }
        open = next;
    }
    ended.extend(open);
    ended
}

fn ranked(mut hypotheses: Vec<Scored>, alpha: f64) -> Vec<Scored> {
    hypotheses.sort_by(|a, b| {
        let score = |h: &Scored| normalised(h.log_prob, h.ids.len(), alpha);
        score(b).total_cmp(&score(a))
    });
    hypotheses
}

fn search(
    model: &dyn DecodingModel,
    sources: &Sources,
    beam: usize,
    alpha: f32,
) -> Vec<Vec<Hypothesis>> {
    let settings = BeamSettings {
        beam,
        length_penalty: alpha,
        n_best: N_BEST,
        normalization: transformer::config::LengthNormalization::Gnmt,
        renormalize: false,
        prefix_in_length: 0,
    };
    beam_search(model, &sources.input(Some(EOS_ID)), settings).unwrap()
}

/// The fixture's two sources as one padded batch.
fn batch(loaded: &Checkpoint) -> Sources {
    let rows: Vec<Vec<u32>> = SOURCES
        .iter()
        .map(|s| with_boundaries(&loaded.tokenizers.src.encode(s).unwrap().ids))
        .collect();
    Sources::of(&rows, &[MAX_STEPS; SOURCES.len()])
}

#[test]
fn a_beam_that_keeps_every_prefix_returns_the_exhaustive_ranking() {
    let loaded = fixture();
    let model = loaded.model.decoding();
    let sources = batch(&loaded);
    // Wide enough that no candidate is ever cut: 11^3 open extensions at the last step.
    let everything = 1500;
    for alpha in [0.0f32, 1.0, 2.5] {
        let found = search(model, &sources, everything, alpha);
        for (sentence, own) in SOURCES.iter().zip(found) {
            let (one, one_mask) = source(&loaded, sentence);
            let exhaustive = ranked(enumerate(&loaded, &one, &one_mask), f64::from(alpha));
            assert_eq!(exhaustive.len(), 1 + 11 + 121 + 1331);
            assert_eq!(own.len(), N_BEST);
            for (rank, (got, want)) in own.iter().zip(&exhaustive).enumerate() {
                assert_eq!(
                    got.ids, want.ids,
                    "{sentence:?}, alpha {alpha}: hypothesis {rank} differs"
                );
                let score = f64::from(got.score());
                assert!(
                    (score - want.log_prob).abs() <= 1e-4,
                    "{sentence:?}, alpha {alpha}: hypothesis {rank} scores {score}, \
                     exhaustively {}",
                    want.log_prob
                );
            }
        }
    }
}

#[test]
fn a_narrow_beam_returns_hypotheses_scored_as_the_enumeration_scores_them() {
    let loaded = fixture();
    let model = loaded.model.decoding();
    let sources = batch(&loaded);
    for alpha in [0.0f32, 1.0] {
        let found = search(model, &sources, N_BEST, alpha);
        for (sentence, own) in SOURCES.iter().zip(found) {
            let (one, one_mask) = source(&loaded, sentence);
            let exhaustive = enumerate(&loaded, &one, &one_mask);
            let best = ranked(exhaustive.clone(), f64::from(alpha));
            let mut seen = std::collections::HashSet::new();
            for (rank, got) in own.iter().enumerate() {
                assert!(
                    !got.ids.contains(&BOS_ID) && !got.ids.contains(&PAD_ID),
                    "{sentence:?}: hypothesis {rank} holds <s> or <pad>: {:?}",
                    got.ids
                );
                assert!(
                    seen.insert(got.ids.clone()),
                    "{sentence:?}: a repeated hypothesis"
                );
                if got.ids.last() == Some(&EOS_ID) {
                    let want = exhaustive.iter().find(|h| h.ids == got.ids).unwrap();
                    assert!((f64::from(got.score()) - want.log_prob).abs() <= 1e-4);
                }
            }
            // The search is approximate, never better than the optimum, and here it finds it.
            assert_eq!(own[0].ids, best[0].ids, "{sentence:?}, alpha {alpha}");
        }
    }
}
