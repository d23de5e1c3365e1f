//! `transformer infer-test`: the reference's `inference_test`, `run_tests` times.

use candle_core::Tensor;
use candle_nn::VarMap;

use super::stdout::print_line;
use crate::cli::InferTestArgs;
use crate::config::ModelConfig;
use crate::infer::{greedy_decode, DecodeLimits};
use crate::model::{make_model, masks, VocabSizes};
use crate::progress::Verbosity;

/// make_model(11, 11, N=2), source 1..10, start symbol 0, nine greedy steps.
pub fn run(args: InferTestArgs) -> anyhow::Result<()> {
    let device = super::device_from(&args.device, Verbosity::Normal)?;
    let first_seed = args.seed.unwrap_or_else(rand::random);
    let cfg = ModelConfig {
        layers: 2,
        ..ModelConfig::default()
    };
    let vocab = VocabSizes { src: 11, tgt: 11 };
    let src_ids: Vec<u32> = (1..=10).collect();
    let src = Tensor::from_vec(src_ids, (1, 10), &device)?;
    let src_mask = masks::full_mask(1, 10, &device)?;
    for run in 0..args.runs {
        let varmap = VarMap::new();
        let model = make_model(
            &cfg,
            vocab,
            &varmap,
            first_seed.wrapping_add(run as u64),
            &device,
        )?;
        let limits = DecodeLimits {
            max_steps: 9,
            end: None,
        };
        let hypothesis = greedy_decode(&model, &src, &src_mask, 0, limits)?;
        let ys: Vec<String> = std::iter::once(0)
            .chain(hypothesis.ids)
            .map(|id| id.to_string())
            .collect();
        print_line(&format!(
            "Example Untrained Model Prediction: [{}]",
            ys.join(", ")
        ))?;
    }
    Ok(())
}
