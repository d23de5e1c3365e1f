//! The M2M100 / NLLB-200 model family (`model_type = "m2m_100"`) against what transformers
//! computed with the fixtures (`tests/fixtures/{m2m100,nllb}-tiny`,
//! scripts/make_m2m100_fixture.py), through the library: the directory's config and weights
//! become our modules (pre-norm with torch's LayerNorm, fairseq's positions, no output bias),
//! and greedy decoding from `</s>` and the target language (what `forced_bos_token_id`
//! forces) gives `generate()`'s ids for every language pair, a padded batch at once, and so
//! does beam search with generate()'s 4 beams, the forced token counted in each hypothesis's
//! length as transformers counts it (`BeamSettings::prefix_in_length`).

mod common;

use std::collections::HashMap;
use std::path::Path;

use candle_core::{Device, Tensor};
use serde_json::Value;
use transformer::checkpoint::format::WeightFormat;
use transformer::checkpoint::hugging_face::{m2m100, MarianFormat};
use transformer::config::{ComputeType, LengthNormalization};
use transformer::decoding::{always_wanted, beam_search, greedy_batch, BeamSettings, DecodeInput};
use transformer::model::{masks, Model, Prompt, Source, VocabSizes};

/// transformers' generation limit (`max_length` 64, the decoder's start counted) less the
/// start and the forced language token.
const MAX_STEPS: usize = 62;

fn load(dir: &Path) -> Model {
    let config = m2m100::model_config(dir).unwrap();
    let file = candle_core::safetensors::load(dir.join("model.safetensors"), &Device::Cpu).unwrap();
    let format = MarianFormat { shared: true };
    let mut tensors = HashMap::new();
    for (name, tensor) in file {
        for (module, tensor) in format.module_tensors(&name, tensor).unwrap() {
            tensors.entry(module).or_insert(tensor);
        }
    }
    let vocab = tensors["src_embed.0.lut.weight"].dim(0).unwrap();
    let vocab = VocabSizes {
        src: vocab,
        tgt: vocab,
    };
    transformer::checkpoint::model_from_tensors(
        &config,
        vocab,
        tensors,
        &Device::Cpu,
        ComputeType::Float32,
    )
    .unwrap()
}

fn rows(value: &Value) -> Vec<Vec<u32>> {
    serde_json::from_value(value.clone()).unwrap()
}

#[test]
fn greedy_and_beam_search_give_generates_ids_for_every_language_pair() {
    for family in ["m2m100", "nllb"] {
        let dir = format!("tests/fixtures/{family}-tiny");
        let model = load(Path::new(&dir));
        let expected: Value =
            serde_json::from_str(&std::fs::read_to_string(format!("{dir}/expected.json")).unwrap())
                .unwrap();
        for pair in expected["generate"].as_array().unwrap() {
            let input = rows(&pair["input_ids"]);
            let (batch, width) = (input.len(), input[0].len());
            let ids = Tensor::from_vec(input.concat(), (batch, width), &Device::Cpu).unwrap();
            let source = Source {
                mask: masks::padding_mask(&ids, 1).unwrap(),
                ids,
            };
            let forced = pair["forced_bos_token_id"].as_u64().unwrap() as u32;
            let prefix =
                Tensor::from_vec([2, forced].repeat(batch), (batch, 2), &Device::Cpu).unwrap();
            let max_steps = vec![MAX_STEPS; batch];
            let input = DecodeInput {
                prompt: Prompt {
                    source: Some(&source),
                    prefix: &prefix,
                },
                max_steps: &max_steps,
                end: Some(2),
                never: &[],
                end_at_limit: false,
                still_wanted: &always_wanted,
            };
            let greedy = greedy_batch(model.decoding(), &input).unwrap();
            // generate()'s beam settings: 4 beams, scores over len^1, the forced language
            // counted in the length as transformers counts it.
            let settings = BeamSettings {
                beam: 4,
                length_penalty: 1.0,
                normalization: LengthNormalization::Length,
                renormalize: false,
                n_best: 1,
                prefix_in_length: 1,
            };
            let beam = beam_search(model.decoding(), &input, settings)
                .unwrap()
                .into_iter()
                .map(|mut ranked| ranked.remove(0))
                .collect();
            for (search, hypotheses) in [("greedy", greedy), ("beam", beam)] {
                let wanted = rows(&pair[search]["ids"]);
                assert_eq!(hypotheses.len(), wanted.len());
                for (hypothesis, want) in hypotheses.iter().zip(wanted) {
                    // transformers' rows: </s>, the forced language, the tokens, padding.
                    let want: Vec<u32> = want[2..].iter().copied().filter(|&id| id != 1).collect();
                    assert!(!want.is_empty());
                    assert_eq!(
                        hypothesis.ids, want,
                        "{family} {search} {} -> {}",
                        pair["source_lang"], pair["target_lang"]
                    );
                }
            }
        }
    }
}
