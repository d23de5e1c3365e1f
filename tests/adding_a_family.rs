//! The walkthrough "Adding a model family" (docs/architecture.md), followed for a made-up
//! family: a bigram language model, an embedding table read by the generator. It is built from
//! a `VarBuilder` and implements `DecodingModel` (with a decoding state of its own) and
//! `ModelFamily`, as the recipe says; the decoders (greedy, beam search, sampling) decode it
//! without a change, and a teacher-forced pass trains every one of its parameters. Were the
//! contract the walkthrough describes to change, this file would stop compiling or passing.

use std::any::Any;

use candle_core::{DType, Device, Result, Tensor, D};
use candle_nn::{VarBuilder, VarMap};
use transformer::decoding::sampling::{sample, Sampling};
use transformer::decoding::{always_wanted, beam_search, greedy_batch, BeamSettings, DecodeInput};
use transformer::model::generator::Generator;
use transformer::model::step::own_state;
use transformer::model::weights::table::Table;
use transformer::model::{
    DecodingModel, DecodingState, DropoutRng, Mode, ModelFamily, Prompt, Source, TeacherForced,
};

const VOCAB: usize = 12;
const D_MODEL: usize = 8;
const POSITIONS: usize = 16;

/// The made-up family: each position's next token from its own token alone.
struct Bigram {
    embed: Table,
    generator: Generator,
}

impl Bigram {
    /// Its modules from `vb`, under the names a checkpoint would carry.
    fn new(vb: VarBuilder) -> Result<Self> {
        Ok(Self {
            embed: Table::new(VOCAB, D_MODEL, vb.pp("embed"))?,
            generator: Generator::new(D_MODEL, VOCAB, vb.pp("generator"))?,
        })
    }
}

/// Its decoding state: only how many positions were fed (a bigram remembers nothing else).
struct BigramState {
    len: usize,
}

impl DecodingState for BigramState {
    fn reorder(&mut self, _rows: &[u32]) -> Result<()> {
        Ok(())
    }

    fn len(&self) -> usize {
        self.len
    }

    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
}

impl DecodingModel for Bigram {
    fn reads_source(&self) -> bool {
        false
    }

    fn max_positions(&self) -> usize {
        POSITIONS
    }

    fn start(&self, source: Option<&Source>) -> Result<Box<dyn DecodingState>> {
        if source.is_some() {
            candle_core::bail!("a bigram model reads no source")
        }
        Ok(Box::new(BigramState { len: 0 }))
    }

    fn step_hidden(&self, ids: &Tensor, state: &mut dyn DecodingState) -> Result<Tensor> {
        let state = own_state::<BigramState>(state)?;
        state.len += 1;
        self.embed.lookup(ids, 1.0)?.squeeze(1)
    }

    fn generator(&self) -> &Generator {
        &self.generator
    }
}

impl ModelFamily for Bigram {
    fn logits(&self, batch: &TeacherForced, _mode: Mode) -> Result<Tensor> {
        let ids = batch.target_only(self)?;
        self.generator.logits(&self.embed.lookup(ids, 1.0)?)
    }

    fn buffers(&self) -> Vec<(String, Tensor)> {
        Vec::new()
    }

    fn tied_names(&self) -> Vec<String> {
        Vec::new()
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// A fresh bigram model with its variables, drawn from a fixed seed.
fn fresh() -> (Bigram, VarMap) {
    let varmap = VarMap::new();
    let model = Bigram::new(VarBuilder::from_varmap(&varmap, DType::F32, &Device::Cpu)).unwrap();
    for var in varmap.all_vars() {
        let drawn = Tensor::randn(0f32, 1.0, var.shape(), &Device::Cpu).unwrap();
        var.set(&drawn).unwrap();
    }
    (model, varmap)
}

/// Decoding input for `prefix` `(rows, len)`, `steps` ids a row, no end symbol.
fn input<'a>(prefix: &'a Tensor, steps: &'a [usize]) -> DecodeInput<'a> {
    DecodeInput {
        prompt: Prompt {
            source: None,
            prefix,
        },
        max_steps: steps,
        end: None,
        never: &[],
        end_at_limit: false,
        still_wanted: &always_wanted,
    }
}

/// The bigram chain from `start`: each next id the argmax of the generator over the last.
fn chain(model: &Bigram, start: u32, steps: usize) -> Vec<u32> {
    let mut ids = vec![start];
    for _ in 0..steps {
        let last = Tensor::new(&[[*ids.last().unwrap()]], &Device::Cpu).unwrap();
        let logits = model
            .generator
            .logits(&model.embed.lookup(&last, 1.0).unwrap().squeeze(1).unwrap())
            .unwrap();
        let next = logits.argmax(D::Minus1).unwrap().to_vec1::<u32>().unwrap()[0];
        ids.push(next);
    }
    ids[1..].to_vec()
}

#[test]
fn a_made_up_family_is_decoded_by_every_decoder_unchanged() {
    let (model, _vars) = fresh();
    let prefix = Tensor::new(&[[1u32], [5]], &Device::Cpu).unwrap();
    let steps = [6, 6];
    let greedy = greedy_batch(&model, &input(&prefix, &steps)).unwrap();
    assert_eq!(greedy[0].ids, chain(&model, 1, 6));
    assert_eq!(greedy[1].ids, chain(&model, 5, 6));

    // A beam of one is greedy decoding; a wider beam finds a hypothesis scoring at least as
    // well (length penalty off, so scores are sums of log-probabilities).
    let beam = |width: usize| BeamSettings {
        beam: width,
        length_penalty: 0.0,
        normalization: Default::default(),
        renormalize: false,
        n_best: 1,
        prefix_in_length: 0,
    };
    let one = beam_search(&model, &input(&prefix, &steps), beam(1)).unwrap();
    assert_eq!(one[0][0].ids, greedy[0].ids);
    let wide = beam_search(&model, &input(&prefix, &steps), beam(4)).unwrap();
    for (wide, greedy) in wide.iter().zip(&greedy) {
        let sum = |log_probs: &[f32]| log_probs.iter().sum::<f32>();
        assert!(sum(&wide[0].log_probs) >= sum(&greedy.log_probs) - 1e-5);
    }

    // Sampling at temperature 0 takes the argmax too.
    let settings = Sampling {
        temperature: 0.0,
        top_k: None,
        seed: 7,
    };
    let sampled = sample(&model, &input(&prefix, &steps), settings).unwrap();
    assert_eq!(sampled[0], greedy[0].ids);
}

#[test]
fn a_made_up_family_trains_every_parameter_through_its_teacher_forced_logits() {
    let (model, varmap) = fresh();
    let batch = TeacherForced::TargetOnly {
        ids: Tensor::new(&[[1u32, 4, 2, 7], [3, 3, 9, 0]], &Device::Cpu).unwrap(),
    };
    let dropout = DropoutRng::new(3);
    let logits = model.logits(&batch, Mode::Train(&dropout)).unwrap();
    assert_eq!(logits.dims(), &[2, 4, VOCAB]);
    let targets = Tensor::new(&[4u32, 2, 7, 1, 3, 9, 0, 2], &Device::Cpu).unwrap();
    let loss =
        candle_nn::loss::cross_entropy(&logits.reshape((8, VOCAB)).unwrap(), &targets).unwrap();
    let grads = loss.backward().unwrap();
    let vars = varmap.data().lock().unwrap();
    assert_eq!(
        vars.len(),
        3,
        "embed.weight, generator.proj.weight and its bias"
    );
    for (name, var) in vars.iter() {
        let grad = grads
            .get(var)
            .unwrap_or_else(|| panic!("{name} got no gradient"));
        let size = grad
            .abs()
            .unwrap()
            .sum_all()
            .unwrap()
            .to_scalar::<f32>()
            .unwrap();
        assert!(size > 0.0, "{name} got a zero gradient");
    }
    // A batch with a source is refused by name, as every family refuses the other kind.
    let with_source = TeacherForced::with_masks(
        Tensor::new(&[[1u32, 2]], &Device::Cpu).unwrap(),
        Tensor::new(&[[1u32, 2]], &Device::Cpu).unwrap(),
        0,
    )
    .unwrap();
    let error = model
        .logits(&with_source, Mode::Eval)
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("cannot read a batch with a source"),
        "{error}"
    );
}
