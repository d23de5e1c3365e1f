//! Parity of the decoder-only language model with the PyTorch reference: tests/fixtures/
//! parity-lm was written by scripts/make_lm_parity_fixture.py (reference.make_lm, the gist's
//! post-norm, learned positions and bias-free attention, briefly fitted to a cyclic sequence).

use std::collections::BTreeSet;
use std::path::Path;

use candle_core::{DType, Device, Tensor};
use candle_nn::{VarBuilder, VarMap};
use serde_json::Value;
use transformer::checkpoint;
use transformer::config::{Architecture, Config};
use transformer::decoding::sampling::{sample, Sampling};
use transformer::decoding::{always_wanted, beam_search, greedy_batch, BeamSettings, DecodeInput};
use transformer::model::families::decoder_only::DecoderOnly;
use transformer::model::{Mode, Model, Prompt, TeacherForced};
use transformer::tokenize::specials::NEVER_GENERATED;

const FIXTURE: &str = "tests/fixtures/parity-lm";
const TOLERANCE: f32 = 1e-4;

struct Fixture {
    config: Config,
    expected: Value,
    vocab: usize,
    model: Model,
}

fn fixture() -> Fixture {
    let dir = Path::new(FIXTURE);
    let config = Config::load(&dir.join("config.toml")).unwrap();
    assert_eq!(config.model.arch, Architecture::DecoderOnly);
    let expected: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("expected.json")).unwrap()).unwrap();
    let vocab = expected["vocab"].as_u64().unwrap() as usize;
    // Through the loader `transformer generate` uses: strict, so every tensor of the
    // PyTorch file must be used and every tensor the model needs must be there.
    let loaded = checkpoint::load(dir, &Device::Cpu).unwrap();
    assert_eq!(loaded.tokenizers.tgt.vocab_size(), vocab);
    assert!(
        !loaded.model.reads_source(),
        "the fixture is a language model"
    );
    Fixture {
        config,
        expected,
        vocab,
        model: loaded.model,
    }
}

fn ids(value: &Value) -> Vec<Vec<u32>> {
    serde_json::from_value(value.clone()).unwrap()
}

fn floats(value: &Value) -> Vec<f32> {
    match value {
        Value::Array(items) => items.iter().flat_map(floats).collect(),
        other => vec![other.as_f64().unwrap() as f32],
    }
}

fn worst_difference(got: &[f32], want: &[f32]) -> f32 {
    assert_eq!(got.len(), want.len());
    got.iter()
        .zip(want)
        .map(|(g, w)| (g - w).abs())
        .fold(0.0, f32::max)
}

#[test]
fn parameter_names_are_the_pytorch_references() {
    let f = fixture();
    let varmap = VarMap::new();
    DecoderOnly::new(
        &f.config.model,
        f.vocab,
        VarBuilder::from_varmap(&varmap, DType::F32, &Device::Cpu),
    )
    .unwrap();
    let ours: BTreeSet<String> = varmap.data().lock().unwrap().keys().cloned().collect();
    let file =
        candle_core::safetensors::load(Path::new(FIXTURE).join("model.safetensors"), &Device::Cpu)
            .unwrap();
    let theirs: BTreeSet<String> = file.keys().cloned().collect();
    assert_eq!(ours, theirs);
}

#[test]
fn next_token_logits_match_the_pytorch_reference() {
    let f = fixture();
    let rows = ids(&f.expected["ids"]);
    let (batch, len) = (rows.len(), rows[0].len());
    let input = Tensor::from_vec(rows.concat(), (batch, len), &Device::Cpu).unwrap();
    let logits = f
        .model
        .logits(&TeacherForced::TargetOnly { ids: input }, Mode::Eval)
        .unwrap();
    let got = logits.flatten_all().unwrap().to_vec1::<f32>().unwrap();
    let worst = worst_difference(&got, &floats(&f.expected["logits"]));
    assert!(worst <= TOLERANCE, "max abs difference {worst}");
}

#[test]
fn cached_steps_give_the_full_forward_logits() {
    let f = fixture();
    let row = ids(&f.expected["ids"])[0].clone();
    let want = floats(&f.expected["logits"]);
    let mut state = f.model.start(None).unwrap();
    for (position, &id) in row.iter().enumerate() {
        let step = f
            .model
            .step(&Tensor::new(&[[id]], &Device::Cpu).unwrap(), &mut *state)
            .unwrap();
        let got = step.flatten_all().unwrap().to_vec1::<f32>().unwrap();
        let expected = &want[position * f.vocab..(position + 1) * f.vocab];
        let worst = worst_difference(&got, expected);
        assert!(worst <= TOLERANCE, "position {position}: {worst}");
    }
}

#[test]
fn greedy_generation_continues_as_the_reference_does() {
    let f = fixture();
    let prompt: Vec<u32> = serde_json::from_value(f.expected["prompt"].clone()).unwrap();
    let want: Vec<u32> = serde_json::from_value(f.expected["greedy"].clone()).unwrap();
    let greedy = Sampling {
        temperature: 0.0,
        top_k: None,
        seed: 0,
    };
    let prefix = Tensor::new(prompt.as_slice(), &Device::Cpu)
        .unwrap()
        .unsqueeze(0)
        .unwrap();
    let input = DecodeInput {
        prompt: Prompt {
            source: None,
            prefix: &prefix,
        },
        max_steps: &[want.len()],
        end: None,
        never: &NEVER_GENERATED,
        still_wanted: &always_wanted,
        end_at_limit: false,
    };
    // Every decoder runs a language model through the decoding contract: sampling at
    // temperature 0, cached greedy decoding and a beam of one continue as the reference does
    // up to the first id they never generate (the fixture's cyclic sequence runs through ids
    // 0 and 1, <pad> and <s> here), and then agree with each other.
    let allowed = want
        .iter()
        .position(|id| NEVER_GENERATED.contains(id))
        .unwrap_or(want.len());
    assert!(allowed >= 5, "{want:?}");
    let sampled = sample(f.model.decoding(), &input, greedy)
        .unwrap()
        .remove(0);
    assert_eq!(sampled[..allowed], want[..allowed]);
    let cached = greedy_batch(f.model.decoding(), &input).unwrap().remove(0);
    assert_eq!(cached.ids, sampled);
    assert!(cached.ids.iter().all(|id| !NEVER_GENERATED.contains(id)));
    let one_beam = BeamSettings {
        beam: 1,
        length_penalty: 0.0,
        n_best: 1,
        normalization: transformer::config::LengthNormalization::Gnmt,
        renormalize: false,
        prefix_in_length: 0,
    };
    let beam = beam_search(f.model.decoding(), &input, one_beam).unwrap();
    assert_eq!(beam[0][0].ids, cached.ids);
}

/// Prompts batched together continue as each does alone, by sampling and by beam search.
#[test]
fn batched_prompts_continue_as_each_does_alone() {
    let f = fixture();
    let rows = ids(&f.expected["ids"]);
    let len = 3;
    let prompts: Vec<Vec<u32>> = rows.iter().map(|r| r[..len].to_vec()).collect();
    let flat: Vec<u32> = prompts.concat();
    let prefix = Tensor::from_vec(flat, (prompts.len(), len), &Device::Cpu).unwrap();
    let steps = vec![6; prompts.len()];
    fn input<'a>(prefix: &'a Tensor, steps: &'a [usize]) -> DecodeInput<'a> {
        DecodeInput {
            prompt: Prompt {
                source: None,
                prefix,
            },
            max_steps: &steps[..prefix.dim(0).unwrap()],
            end: None,
            never: &NEVER_GENERATED,
            end_at_limit: false,
            still_wanted: &always_wanted,
        }
    }
    let drawn = Sampling {
        temperature: 1.0,
        top_k: Some(3),
        seed: 5,
    };
    let four = BeamSettings {
        beam: 4,
        length_penalty: 0.6,
        n_best: 2,
        normalization: transformer::config::LengthNormalization::Gnmt,
        renormalize: false,
        prefix_in_length: 0,
    };
    let model = f.model.decoding();
    let sampled = sample(model, &input(&prefix, &steps), drawn).unwrap();
    let searched = beam_search(model, &input(&prefix, &steps), four).unwrap();
    for (row, prompt) in prompts.iter().enumerate() {
        let alone = Tensor::new(prompt.as_slice(), &Device::Cpu)
            .unwrap()
            .unsqueeze(0)
            .unwrap();
        assert_eq!(
            sample(model, &input(&alone, &steps), drawn).unwrap()[0],
            sampled[row]
        );
        let own = beam_search(model, &input(&alone, &steps), four).unwrap();
        assert_eq!(own[0].len(), 2);
        for (a, b) in own[0].iter().zip(&searched[row]) {
            assert_eq!(a.ids, b.ids, "row {row}");
        }
    }
}
