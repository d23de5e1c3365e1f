//! Training-path properties: gradients reach every parameter, and a checkpoint reloads to the
//! same function.

mod common;

use std::path::Path;

use candle_core::{DType, Device, Tensor};
use transformer::checkpoint::{self, CheckpointContents};
use transformer::config::CorpusSource;
use transformer::config::{
    Activation, ComputeDtype, Config, ModelConfig, NormPlacement, PositionEncoding,
};
use transformer::corpus::read_corpus;
use transformer::decoding::teacher_forced_log_probs;
use transformer::model::{DropoutRng, Mode};
use transformer::tokenize::specials::PAD_ID;
use transformer::tokenize::Tokenizers;
use transformer::train::loss::LabelSmoothing;
use transformer::train::{Trainer, TrainingData};
use transformer::training_data::{encode_pairs, EncodedCorpus, IdWidth};

fn toy_trainer(model: ModelConfig) -> Trainer {
    try_toy_trainer(Config {
        model,
        ..Config::default()
    })
    .unwrap()
}

/// A trainer of `config` on the toy pairs, on the CPU.
fn try_toy_trainer(config: Config) -> anyhow::Result<Trainer> {
    let source = CorpusSource::Tsv(Path::new("data/toy.tsv").into());
    let (pairs, _) = read_corpus(&source).unwrap();
    let tokenizers = Tokenizers::learn(&config.data, &pairs).unwrap();
    let data = TrainingData {
        pairs: EncodedCorpus::from_pairs(
            &encode_pairs(&pairs, &tokenizers, 64).unwrap().0,
            IdWidth::U32,
        )
        .into(),
        tokenizers,
        valid: None,
    };
    Trainer::new(config, data, &Device::Cpu)
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

/// Every training pair of `trainer` in one batch.
fn whole_batch(trainer: &Trainer) -> transformer::training_data::PaddedBatch {
    let pairs = &trainer.data().pairs;
    let all: Vec<u32> = (0..pairs.len() as u32).collect();
    transformer::training_data::PaddedBatch::from_corpus(pairs, &all, PAD_ID)
}

/// The toy pairs as one batch: (src, tgt_in, tgt_out).
fn toy_batch(trainer: &Trainer) -> (Tensor, Tensor, Tensor) {
    let batch = whole_batch(trainer);
    let dev = Device::Cpu;
    (
        Tensor::from_slice(&batch.src, (batch.size, batch.src_len), &dev).unwrap(),
        Tensor::from_slice(&batch.tgt_in, (batch.size, batch.tgt_len), &dev).unwrap(),
        Tensor::from_slice(&batch.tgt_out, batch.size * batch.tgt_len, &dev).unwrap(),
    )
}

#[test]
fn one_backward_pass_gives_every_parameter_a_nonzero_gradient() {
    // 2 embeddings + generator (2) + 2 final norms (4) + per encoder layer 8 linear tensors,
    // 4 FFN tensors, 4 norm tensors + per decoder layer 16 + 4 + 6.
    let reference = 2 + 2 + 4 + 2 * 16 + 2 * 26;
    assert_eq!(parameters_with_gradients(small_model()), reference);
}

/// The other tutorials' variants: every parameter they have trains, and they have exactly
/// the parameters their PyTorch counterparts have (the parity fixtures check the names).
#[test]
fn every_variant_gives_every_parameter_a_nonzero_gradient() {
    let reference = 2 + 2 + 4 + 2 * 16 + 2 * 26;
    let variant = |edit: fn(&mut ModelConfig)| {
        let mut model = small_model();
        edit(&mut model);
        parameters_with_gradients(model)
    };
    // No final norms; the sublayer norms keep two tensors each (weight, bias).
    assert_eq!(variant(|m| m.norm = NormPlacement::Post), reference - 4);
    // Two position tables become parameters.
    assert_eq!(
        variant(|m| m.positions = PositionEncoding::Learned),
        reference + 2
    );
    // 4 attention biases per encoder layer, 8 per decoder layer, 2 FFN biases per layer.
    assert_eq!(
        variant(|m| (m.attention_bias, m.ffn_bias) = (false, false)),
        reference - 2 * (4 + 2) - 2 * (8 + 2)
    );
    // The generator's matrix is the target embedding's: one parameter, which a checkpoint
    // lists under both names, as PyTorch's state_dict does.
    assert_eq!(variant(|m| m.share_embeddings = true), reference - 1);
    // Another nonlinearity has the same parameters, and every one learns through it.
    assert_eq!(variant(|m| m.activation = Activation::Swish), reference);
    assert_eq!(variant(|m| m.activation = Activation::Gelu), reference);
    let mut shared = small_model();
    shared.share_embeddings = true;
    let names: Vec<String> = toy_trainer(shared)
        .named_tensors()
        .into_iter()
        .map(|(name, _)| name)
        .collect();
    assert!(names.contains(&"generator.proj.weight".to_string()));
    assert!(names.contains(&"tgt_embed.0.lut.weight".to_string()));
}

/// Every variant learns the toy pairs: the loss falls by half in 30 steps.
#[test]
fn every_variant_trains() {
    let edits: [fn(&mut ModelConfig); 6] = [
        |m| m.norm = NormPlacement::Post,
        |m| m.positions = PositionEncoding::Learned,
        |m| (m.attention_bias, m.ffn_bias) = (false, false),
        |m| m.share_embeddings = true,
        |m| m.activation = Activation::Swish,
        |m| m.activation = Activation::Gelu,
    ];
    for edit in edits {
        let mut config = Config {
            model: small_model(),
            ..Config::default()
        };
        edit(&mut config.model);
        config.training.warmup = 10;
        let mut trainer = try_toy_trainer(config.clone()).unwrap();
        let batch = whole_batch(&trainer);
        let losses: Vec<f64> = (0..30)
            .map(|_| trainer.step_on(std::slice::from_ref(&batch)).unwrap())
            .collect();
        let last_five = losses[25..].iter().sum::<f64>() / 5.0;
        assert!(
            last_five < 0.5 * losses[0],
            "{:?}: {losses:?}",
            config.model
        );
    }
}

/// Counts the parameters of a toy model built from `model` after checking that one backward
/// pass gives each a non-zero gradient (and the fixed position tables none).
fn parameters_with_gradients(model: ModelConfig) -> usize {
    let trainer = toy_trainer(model);
    let (_, grads) = one_training_pass(&trainer);

    let tensors = trainer.named_tensors();
    let mut checked = 0;
    let mut seen = std::collections::HashSet::new();
    for (name, tensor) in &tensors {
        // A tied matrix is listed under both its names, as PyTorch's state_dict lists it.
        if !seen.insert(tensor.id()) {
            continue;
        }
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
    checked
}

#[test]
fn parameter_names_are_the_reference_state_dict_keys() {
    let trainer = toy_trainer(small_model());
    let names: Vec<String> = trainer
        .named_tensors()
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
    let tensors = trainer.named_tensors();
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

    let (src, tgt_in, _) = toy_batch(&trainer);
    let batch = common::teacher_forced(&src, &tgt_in);
    let before = teacher_forced_log_probs(&**trainer.model(), &batch)
        .unwrap()
        .flatten_all()
        .unwrap()
        .to_vec1::<f32>()
        .unwrap();
    let after = teacher_forced_log_probs(&*loaded.model, &batch)
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

fn toy_trainer_in(dtype: ComputeDtype) -> Trainer {
    let mut config = Config {
        model: small_model(),
        ..Config::default()
    };
    config.training.dtype = dtype;
    config.training.warmup = 10;
    try_toy_trainer(config).unwrap()
}

/// Mixed precision on the CPU (bf16 products, as PyTorch's autocast): the products of the
/// forward and backward passes take bf16 inputs, the weights and their updates stay f32, and
/// the losses follow the f32 run's closely.
#[test]
fn bf16_training_keeps_f32_master_weights_and_follows_the_f32_losses() {
    let mut full = toy_trainer_in(ComputeDtype::F32);
    let mut half = toy_trainer_in(ComputeDtype::Bf16);
    let batch = whole_batch(&full);
    let mut losses = (Vec::new(), Vec::new());
    for _ in 0..30 {
        losses
            .0
            .push(full.step_on(std::slice::from_ref(&batch)).unwrap());
        losses
            .1
            .push(half.step_on(std::slice::from_ref(&batch)).unwrap());
    }
    // The same weights, dropout masks and batches: the first steps differ only by rounding.
    // Later the two runs drift apart as training does on any change (this toy run is noisy
    // from step 12 on), so from there on only learning is asserted.
    for (step, (f32_loss, bf16_loss)) in losses.0.iter().zip(&losses.1).take(5).enumerate() {
        assert!(
            (f32_loss - bf16_loss).abs() < 0.02 * f32_loss,
            "step {step}: f32 {f32_loss} vs bf16 {bf16_loss}"
        );
    }
    assert_ne!(losses.0[1], losses.1[1], "bf16 products round");
    let last_five: f64 = losses.1[25..].iter().sum::<f64>() / 5.0;
    assert!(last_five < 0.25 * losses.1[0], "{:?}", losses.1);
    for (name, tensor) in half.named_tensors() {
        assert_eq!(tensor.dtype(), DType::F32, "{name}");
    }
}

#[test]
fn f16_on_the_cpu_is_refused_with_the_reason_and_the_fix() {
    let mut config = Config::default();
    config.training.dtype = ComputeDtype::F16;
    let error = try_toy_trainer(config).err().unwrap().to_string();
    assert!(
        error.contains("training.dtype = \"f16\" is not for the CPU"),
        "{error}"
    );
    assert!(error.contains("use dtype = \"bf16\""), "{error}");
}

/// The summed loss of one training pass over the toy pairs (dropout on, seed 0) and the
/// gradients of its backward pass.
fn one_training_pass(trainer: &Trainer) -> (Tensor, candle_core::backprop::GradStore) {
    let (src, tgt_in, tgt_out) = toy_batch(trainer);
    let rng = DropoutRng::new(0);
    let logits = trainer
        .model()
        .logits(&common::teacher_forced(&src, &tgt_in), Mode::Train(&rng))
        .unwrap();
    let logits = logits.reshape((tgt_out.dim(0).unwrap(), ())).unwrap();
    let vocab = trainer.data().tokenizers.tgt.vocab_size();
    let loss = LabelSmoothing::new(vocab, PAD_ID, 0.1)
        .loss_sum_from_logits(&logits, &tgt_out)
        .unwrap();
    let grads = loss.backward().unwrap();
    (loss, grads)
}

/// The loss and every parameter's gradient of [`one_training_pass`], by parameter name.
fn loss_and_gradients(model: ModelConfig) -> (f32, Vec<(String, Tensor)>) {
    let trainer = toy_trainer(model);
    let (loss, grads) = one_training_pass(&trainer);
    let gradients = trainer
        .named_tensors()
        .into_iter()
        .filter_map(|(name, tensor)| Some((name, grads.get(&tensor)?.clone())))
        .collect();
    (loss.to_scalar::<f32>().unwrap(), gradients)
}

/// The composed path is what a GPU runs: through the whole model (pre- and post-norm, every
/// fused op: linear, attention, both LayerNorms, the residual and ReLU dropouts, the loss) it
/// gives the fused path's loss and gradients, with the same dropout draws.
#[test]
fn the_fused_and_composed_kernels_give_one_loss_and_one_gradient_per_parameter() {
    for norm in [NormPlacement::Pre, NormPlacement::Post] {
        let model = ModelConfig {
            norm,
            ..small_model()
        };
        let (fused_loss, fused) = loss_and_gradients(model.clone());
        let (composed_loss, composed) = {
            let _composed = transformer::kernels::composed_only();
            loss_and_gradients(model)
        };
        assert!(
            (fused_loss - composed_loss).abs() < 1e-4 * composed_loss.abs(),
            "{norm:?}: loss {fused_loss} against {composed_loss}"
        );
        assert_eq!(fused.len(), composed.len());
        for ((name, a), (_, b)) in fused.iter().zip(&composed) {
            let largest = b
                .abs()
                .unwrap()
                .max_all()
                .unwrap()
                .to_scalar::<f32>()
                .unwrap();
            let difference = (a - b)
                .unwrap()
                .abs()
                .unwrap()
                .max_all()
                .unwrap()
                .to_scalar::<f32>()
                .unwrap();
            // Key biases' gradients are zero but for rounding (softmax ignores a constant added
            // to a row's scores): the floor keeps that noise from counting.
            assert!(
                difference <= 1e-4 * largest.max(0.1),
                "{norm:?}: {name}'s gradient differs by {difference} (largest {largest})"
            );
        }
    }
}

/// Training through the composed path (a whole run, Adam included) learns the toy pairs as
/// the fused path does, step for step.
#[test]
fn training_through_the_composed_kernels_follows_the_fused_run() {
    let config = Config {
        model: small_model(),
        ..Config::default()
    };
    let mut config = config;
    config.training.warmup = 10;
    let losses = |composed: bool| {
        let _path = composed.then(transformer::kernels::composed_only);
        let mut trainer = try_toy_trainer(config.clone()).unwrap();
        let batch = whole_batch(&trainer);
        (0..30)
            .map(|_| trainer.step_on(std::slice::from_ref(&batch)).unwrap())
            .collect::<Vec<f64>>()
    };
    let (fused, composed) = (losses(false), losses(true));
    assert!(
        composed[25..].iter().sum::<f64>() / 5.0 < 0.5 * composed[0],
        "{composed:?}"
    );
    for (step, (a, b)) in fused.iter().zip(&composed).enumerate() {
        assert!(
            (a - b).abs() < 1e-2 * b.abs(),
            "step {step}: fused {a}, composed {b}"
        );
    }
}
