//! Cached decoding against the uncached reference loop, and the decoders against each other,
//! on the PyTorch parity checkpoint (a small model fitted to three sentences).

mod common;

use std::path::Path;

use common::{padded, teacher_forced, Sources};

use candle_core::{Device, Tensor};
use transformer::checkpoint::{self, Checkpoint};
use transformer::decoding::{
    beam_search, greedy_batch, greedy_decode, incremental_log_probs, teacher_forced_log_probs,
    BeamSettings, Hypothesis,
};
use transformer::infer::settings::DecodeSettings;
use transformer::infer::translator::ConfiguredTranslator;
use transformer::model::Prompt;
use transformer::tokenize::specials::EOS_ID;
use transformer::training_data::batch::with_boundaries;

const SOURCES: [&str; 4] = [
    "ich mochte ein bier",
    "du habe eine cola bier",
    "er mochte wasser",
    "sie habe ein haus ein bier ein cola",
];

fn fixture() -> Checkpoint {
    checkpoint::load(Path::new("tests/fixtures/parity"), &Device::Cpu).unwrap()
}

fn source_ids(loaded: &Checkpoint, sentence: &str) -> Vec<u32> {
    with_boundaries(&loaded.tokenizers.src.encode(sentence).unwrap().ids)
}

const STEPS: usize = 12;

/// The best hypothesis of each row.
fn best(ranked: Vec<Vec<Hypothesis>>) -> Vec<Hypothesis> {
    ranked.into_iter().map(|mut r| r.remove(0)).collect()
}

#[test]
fn cached_decoding_gives_the_same_log_probs_as_full_decoding() {
    let loaded = fixture();
    let src = padded(&SOURCES.map(|s| source_ids(&loaded, s)));
    let tgt_in = Tensor::new(
        &[
            [1u32, 4, 8, 10, 11, 2],
            [1, 5, 9, 12, 2, 0],
            [1, 6, 8, 10, 13, 2],
            [1, 4, 4, 4, 4, 4],
        ],
        &Device::Cpu,
    )
    .unwrap();
    let batch = teacher_forced(&src, &tgt_in);
    let full = teacher_forced_log_probs(&*loaded.model, &batch).unwrap();
    let source = batch.with_source(loaded.model.decoding()).unwrap().0;
    let prompt = Prompt {
        source: Some(source),
        prefix: &tgt_in,
    };
    let cached = incremental_log_probs(loaded.model.decoding(), &prompt).unwrap();
    assert_eq!(full.dims(), cached.dims());
    // Positions after a padded target token differ only where the full decoder hides the pad;
    // compare the rows whose prefixes hold no padding.
    let diff = (full - cached).unwrap().abs().unwrap();
    let rows = [0usize, 2, 3];
    for row in rows {
        let worst = diff
            .get(row)
            .unwrap()
            .max_all()
            .unwrap()
            .to_scalar::<f32>()
            .unwrap();
        assert!(worst <= 1e-5, "row {row}: max difference {worst}");
    }
}

#[test]
fn batched_cached_greedy_equals_the_reference_loop_sentence_by_sentence() {
    let loaded = fixture();
    let rows: Vec<Vec<u32>> = SOURCES.iter().map(|s| source_ids(&loaded, s)).collect();
    let sources = Sources::of(&rows, &[STEPS; 4]);
    let batched = greedy_batch(loaded.model.decoding(), &sources.input(Some(EOS_ID))).unwrap();
    for (ids, got) in rows.iter().zip(&batched) {
        let one = Sources::one(ids, STEPS);
        let want = greedy_decode(&*loaded.model, &one.input(Some(EOS_ID))).unwrap();
        assert_eq!(got.ids, want.ids);
        for (a, b) in got.log_probs.iter().zip(&want.log_probs) {
            assert!((a - b).abs() <= 1e-5, "{a} vs {b}");
        }
    }
}

#[test]
fn beam_one_is_greedy() {
    let loaded = fixture();
    for sentence in SOURCES {
        let one = Sources::one(&source_ids(&loaded, sentence), STEPS);
        let greedy = greedy_decode(&*loaded.model, &one.input(Some(EOS_ID))).unwrap();
        let settings = BeamSettings {
            beam: 1,
            length_penalty: 0.6,
            n_best: 1,
            normalization: transformer::config::LengthNormalization::Gnmt,
            renormalize: false,
            prefix_in_length: 0,
        };
        let beam =
            best(beam_search(loaded.model.decoding(), &one.input(Some(EOS_ID)), settings).unwrap())
                .remove(0);
        assert_eq!(beam.ids, greedy.ids, "{sentence}");
        for (a, b) in beam.log_probs.iter().zip(&greedy.log_probs) {
            assert!((a - b).abs() <= 1e-5);
        }
    }
}

#[test]
fn a_wider_beam_ends_its_hypothesis_and_scores_at_least_as_well_as_greedy() {
    let loaded = fixture();
    for beam in [2, 5] {
        let mut options = DecodeSettings::default();
        options.beam = beam;
        let translator = ConfiguredTranslator {
            model: loaded.model.decoding(),
            tokenizers: &loaded.tokenizers,
            device: &Device::Cpu,
            options,
            vocab_map: None,
        };
        let greedy = ConfiguredTranslator {
            options: DecodeSettings::default(),
            ..translator
        };
        for sentence in SOURCES {
            let wide = translator.translate(sentence).unwrap();
            let narrow = greedy.translate(sentence).unwrap();
            assert_eq!(wide.ids.last(), Some(&EOS_ID), "{sentence}");
            // Beam search ranks by log-prob / ((5 + len) / 6)^alpha; greedy's pick is one of
            // the hypotheses it could have kept.
            let alpha = DecodeSettings::default().length_penalty;
            let score = |t: &transformer::infer::translator::Translation| {
                t.log_probs.iter().sum::<f32>() / ((5.0 + t.ids.len() as f32) / 6.0).powf(alpha)
            };
            assert!(score(&wide) >= score(&narrow) - 1e-5, "{sentence}");
        }
    }
}

#[test]
fn n_best_keeps_the_best_translation_first_and_ranks_the_alternatives_after_it() {
    let loaded = fixture();
    let best_only = ConfiguredTranslator {
        model: loaded.model.decoding(),
        tokenizers: &loaded.tokenizers,
        device: &Device::Cpu,
        options: {
            let mut options = DecodeSettings::default();
            options.beam = 4;
            options
        },
        vocab_map: None,
    };
    let three = ConfiguredTranslator {
        options: {
            let mut options = best_only.options.clone();
            options.n_best = 3;
            options
        },
        ..best_only
    };
    let sources: Vec<String> = SOURCES.iter().map(|s| s.to_string()).collect();
    let alone = best_only.translate_batch(&sources).unwrap();
    let ranked = three.translate_batch(&sources).unwrap();
    let alpha = best_only.options.length_penalty;
    let score = |log_probs: &[f32]| {
        log_probs.iter().sum::<f32>() / ((5.0 + log_probs.len() as f32) / 6.0).powf(alpha)
    };
    for (one, many) in alone.iter().zip(&ranked) {
        assert!(one.alternatives.is_empty());
        assert_eq!((&many.ids, &many.log_probs), (&one.ids, &one.log_probs));
        assert_eq!(many.alternatives.len(), 2, "{}", one.source);
        let mut previous = score(&many.log_probs);
        for alternative in &many.alternatives {
            assert_ne!(alternative.ids, many.ids);
            let this = score(&alternative.log_probs);
            assert!(
                this <= previous + 1e-6,
                "{}: {this} after {previous}",
                one.source
            );
            previous = this;
        }
    }
}

/// All sentences' beams in one decoder call per step find, for each sentence, the hypothesis
/// the one-sentence search finds: sources of different lengths (padded), beams of 2 and 5,
/// each sentence with its own step limit (one too short to end, one allowed none).
#[test]
fn batched_beam_search_equals_the_search_sentence_by_sentence() {
    let loaded = fixture();
    let rows: Vec<Vec<u32>> = SOURCES.iter().map(|s| source_ids(&loaded, s)).collect();
    let steps = [12, 3, 12, 0];
    let sources = Sources::of(&rows, &steps);
    for (beam, length_penalty) in [(2, 0.6), (5, 0.6), (5, 0.0)] {
        let settings = BeamSettings {
            beam,
            length_penalty,
            n_best: 1,
            normalization: transformer::config::LengthNormalization::Gnmt,
            renormalize: false,
            prefix_in_length: 0,
        };
        let model = loaded.model.decoding();
        let batched = best(beam_search(model, &sources.input(Some(EOS_ID)), settings).unwrap());
        assert_eq!(batched.len(), rows.len());
        for ((ids, &max_steps), got) in rows.iter().zip(&steps).zip(&batched) {
            let one = Sources::one(ids, max_steps);
            let want =
                best(beam_search(model, &one.input(Some(EOS_ID)), settings).unwrap()).remove(0);
            assert_eq!(got.ids, want.ids, "beam {beam}, {max_steps} steps");
            assert!(got.ids.len() <= max_steps);
            for (a, b) in got.log_probs.iter().zip(&want.log_probs) {
                assert!((a - b).abs() <= 1e-4, "beam {beam}: {a} against {b}");
            }
        }
        assert!(
            batched[0].ids.last() == Some(&EOS_ID),
            "the first sentence ends"
        );
        assert!(batched[3].ids.is_empty(), "no step, no ids");
    }
}
