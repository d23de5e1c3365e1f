//! `transformer infer-test`: the reference's `inference_test`, `run_tests` times.
//!
//! Its arguments: how many untrained models, from which seed.

use candle_core::Tensor;
use candle_nn::VarMap;
use clap::Args;

use crate::config::ModelConfig;
use crate::decoding::{always_wanted, greedy_decode, DecodeInput};
use crate::flags::DeviceArgs;
use crate::model::{masks, Model, Prompt, Source, VocabSizes};
use crate::progress::Verbosity;
use crate::stdout::print_line;

#[derive(Debug, Args)]
pub struct InferTestArgs {
    /// How many freshly initialised models to run
    #[arg(long, default_value_t = 10, value_name = "N")]
    pub runs: usize,
    /// Seed of the first model (run i uses seed + i); random when absent
    #[arg(long, value_name = "S")]
    pub seed: Option<u64>,
    #[command(flatten)]
    pub device: DeviceArgs,
}

/// make_model(11, 11, N=2), source 1..10, start symbol 0, nine greedy steps.
pub fn run(args: InferTestArgs) -> anyhow::Result<()> {
    let device = crate::device_choice::device_from(&args.device, Verbosity::Normal)?;
    let first_seed = args.seed.unwrap_or_else(rand::random);
    let cfg = ModelConfig {
        layers: 2,
        ..ModelConfig::default()
    };
    let vocab = VocabSizes { src: 11, tgt: 11 };
    let src_ids: Vec<u32> = (1..=10).collect();
    let source = Source {
        ids: Tensor::from_vec(src_ids, (1, 10), &device)?,
        mask: masks::full_mask(1, 10, &device)?,
    };
    let start = Tensor::zeros((1, 1), candle_core::DType::U32, &device)?;
    let input = DecodeInput {
        prompt: Prompt {
            source: Some(&source),
            prefix: &start,
        },
        max_steps: &[9],
        end: None,
        // The reference's demo keeps every id.
        never: &[],
        end_at_limit: false,
        still_wanted: &always_wanted,
    };
    for run in 0..args.runs {
        let varmap = VarMap::new();
        let model = Model::fresh(
            &cfg,
            vocab,
            &varmap,
            first_seed.wrapping_add(run as u64),
            &device,
        )?;
        let hypothesis = greedy_decode(&*model, &input)?;
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
