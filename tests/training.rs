//! Training-path properties: gradients reach every parameter, and a checkpoint reloads to the
//! same function.

use std::path::Path;

use candle_core::{Device, Tensor};
use transformer::checkpoint::{self, CheckpointContents};
use transformer::config::CorpusSource;
use transformer::config::{Config, ModelConfig};
use transformer::data::vocab::PAD_ID;
use transformer::data::{encode_pairs, read_corpus, Tokenizers};
use transformer::decode::teacher_forced_log_probs;
use transformer::model::{masks, DropoutRng, Mode};
use transformer::train::loss::LabelSmoothing;
use transformer::train::{Trainer, TrainingData};

fn toy_trainer(model: ModelConfig) -> Trainer {
    let source = CorpusSource::Tsv(Path::new("data/toy.tsv").into());
    let (pairs, _) = read_corpus(&source).unwrap();
    let config = Config {
        model,
        ..Config::default()
    };
    let tokenizers = Tokenizers::learn(&config.data, &pairs).unwrap();
    let data = TrainingData {
        pairs: encode_pairs(&pairs, &tokenizers, 64).unwrap().0,
        tokenizers,
        valid: None,
    };
    Trainer::new(config, data, &Device::Cpu).unwrap()
}

fn small_model() -> ModelConfig {
    ModelConfig {
        layers: 2,
        d_model: 16,
        d_ff: 32,
        heads: 4,
        max_len: 32,
        ..ModelConfig::default()
    }
}

/// The toy pairs as one batch: (src, tgt_in, tgt_out, ntokens).
fn toy_batch(trainer: &Trainer) -> (Tensor, Tensor, Tensor, usize) {
    let pairs: Vec<_> = trainer.data().pairs.iter().collect();
    let batch = transformer::data::PaddedBatch::new(&pairs);
    let dev = Device::Cpu;
    (
        Tensor::from_slice(&batch.src, (batch.size, batch.src_len), &dev).unwrap(),
        Tensor::from_slice(&batch.tgt_in, (batch.size, batch.tgt_len), &dev).unwrap(),
        Tensor::from_slice(&batch.tgt_out, batch.size * batch.tgt_len, &dev).unwrap(),
        batch.ntokens,
    )
}

#[test]
fn one_backward_pass_gives_every_parameter_a_nonzero_gradient() {
    let trainer = toy_trainer(small_model());
    let (src, tgt_in, tgt_out, ntokens) = toy_batch(&trainer);
    let src_mask = masks::padding_mask(&src, PAD_ID).unwrap();
    let tgt_mask = masks::target_mask(&tgt_in, PAD_ID).unwrap();
    let rng = DropoutRng::new(0);
    let model = trainer.model();
    let hidden = model
        .forward(&src, &tgt_in, &src_mask, &tgt_mask, Mode::Train(&rng))
        .unwrap();
    let log_probs = model.generator().forward(&hidden).unwrap();
    let log_probs = log_probs.reshape((tgt_out.dim(0).unwrap(), ())).unwrap();
    let vocab = trainer.data().tokenizers.tgt.vocab_size();
    let loss = (LabelSmoothing::new(vocab, PAD_ID, 0.1)
        .loss_sum(&log_probs, &tgt_out)
        .unwrap()
        / ntokens as f64)
        .unwrap();
    let grads = loss.backward().unwrap();

    let tensors = trainer.named_tensors().unwrap();
    let mut checked = 0;
    for (name, tensor) in &tensors {
        if name.ends_with(".pe") {
            assert!(
                grads.get(tensor).is_none(),
                "{name} is a buffer and must not train"
            );
            continue;
        }
        let grad = grads
            .get(tensor)
            .unwrap_or_else(|| panic!("{name} got no gradient"));
        let magnitude = grad
            .abs()
            .unwrap()
            .sum_all()
            .unwrap()
            .to_scalar::<f32>()
            .unwrap();
        assert!(magnitude > 0.0, "{name} has an all-zero gradient");
        checked += 1;
    }
    // 2 embeddings + generator (2) + 2 final norms (4) + per encoder layer 8 linear tensors,
    // 4 FFN tensors, 4 norm tensors + per decoder layer 16 + 4 + 6.
    assert_eq!(checked, 2 + 2 + 4 + 2 * 16 + 2 * 26);
}

#[test]
fn parameter_names_are_the_reference_state_dict_keys() {
    let trainer = toy_trainer(small_model());
    let names: Vec<String> = trainer
        .named_tensors()
        .unwrap()
        .into_iter()
        .map(|(n, _)| n)
        .collect();
    for expected in [
        "src_embed.0.lut.weight",
        "src_embed.1.pe",
        "tgt_embed.0.lut.weight",
        "tgt_embed.1.pe",
        "encoder.layers.0.self_attn.linears.3.bias",
        "encoder.layers.1.feed_forward.w_1.weight",
        "encoder.layers.1.sublayer.1.norm.a_2",
        "encoder.norm.b_2",
        "decoder.layers.1.src_attn.linears.0.weight",
        "decoder.layers.0.sublayer.2.norm.b_2",
        "decoder.norm.a_2",
        "generator.proj.weight",
        "generator.proj.bias",
    ] {
        assert!(names.iter().any(|n| n == expected), "missing {expected}");
    }
    let pe = trainer
        .named_tensors()
        .unwrap()
        .into_iter()
        .find(|(n, _)| n == "src_embed.1.pe")
        .unwrap()
        .1;
    assert_eq!(pe.dims(), &[1, 32, 16]);
}

#[test]
fn a_saved_checkpoint_holds_the_exact_weights_and_loads_back_to_the_same_log_probs() {
    let trainer = toy_trainer(small_model());
    let dir = tempfile::tempdir().unwrap();
    let tensors = trainer.named_tensors().unwrap();
    let data = trainer.data();
    checkpoint::save(
        dir.path(),
        &CheckpointContents {
            config: trainer.config(),
            tokenizers: &data.tokenizers,
            tensors: &tensors,
            resume: None,
        },
    )
    .unwrap();
    let saved =
        candle_core::safetensors::load(dir.path().join("model.safetensors"), &Device::Cpu).unwrap();
    assert_eq!(saved.len(), tensors.len());
    for (name, tensor) in &tensors {
        let bits = |t: &candle_core::Tensor| t.flatten_all().unwrap().to_vec1::<f32>().unwrap();
        assert_eq!(bits(&saved[name]), bits(tensor), "{name}");
    }
    let loaded = checkpoint::load(dir.path(), &Device::Cpu).unwrap();

    let (src, tgt_in, _, _) = toy_batch(&trainer);
    let src_mask = masks::padding_mask(&src, PAD_ID).unwrap();
    let tgt_mask = masks::target_mask(&tgt_in, PAD_ID).unwrap();
    let before = teacher_forced_log_probs(trainer.model(), &src, &src_mask, &tgt_in, &tgt_mask)
        .unwrap()
        .flatten_all()
        .unwrap()
        .to_vec1::<f32>()
        .unwrap();
    let after = teacher_forced_log_probs(&loaded.model, &src, &src_mask, &tgt_in, &tgt_mask)
        .unwrap()
        .flatten_all()
        .unwrap()
        .to_vec1::<f32>()
        .unwrap();
    // Not bit for bit: a loaded model's linear layers multiply by a pre-transposed copy of
    // each weight, which sums in another order than the trained model's in-place read.
    assert_eq!(before.len(), after.len());
    for (b, a) in before.iter().zip(&after) {
        assert!((b - a).abs() < 1e-5, "{b} vs {a}");
    }
}
