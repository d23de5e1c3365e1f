//! The weights being trained, and the one place that says how each kind of pass sees them:
//! a training step reads the variables themselves (or, in mixed precision, this step's casts
//! of them), and inference reads a frozen view of their current values.
//!
//! Why it matters: a model over fixed tensors keeps derived copies of its weights from first
//! use on (the transposed matrices in `Linear`, the joined q/k/v projections in attention). A
//! frozen view is only right until the next optimiser step, so it is never kept: every
//! inference pass asks for a new one, which shares the variables' storage (no copy).

use std::collections::HashMap;
use std::ops::Deref;

use candle_core::{DType, Device, Result, Tensor, Var};
use candle_nn::{VarBuilder, VarMap};

use crate::config::{ModelConfig, VocabSizes};
use crate::model::families::Model;
use crate::model::init::named_vars;

/// A model's parameters as variables, with the model that trains them.
pub struct TrainedWeights {
    config: ModelConfig,
    vocab: VocabSizes,
    device: Device,
    /// Parameter names in name order (the optimiser's order), with their variables.
    names: Vec<String>,
    vars: Vec<Var>,
    /// Over `vars`: gradients flow from its outputs to them.
    model: Model,
}

impl TrainedWeights {
    /// Fresh parameters for `config`, initialised from `seed` as the reference does.
    pub fn fresh(
        config: &ModelConfig,
        vocab: VocabSizes,
        seed: u64,
        device: &Device,
    ) -> Result<Self> {
        let varmap = VarMap::new();
        let model = Model::fresh(config, vocab, &varmap, seed, device)?;
        let (names, vars) = named_vars(&varmap)?.into_iter().unzip();
        Ok(Self {
            config: config.clone(),
            vocab,
            device: device.clone(),
            names,
            vars,
            model,
        })
    }

    /// Parameter names, in the order of [`Self::vars`].
    pub fn names(&self) -> &[String] {
        &self.names
    }

    /// The dims of the parameter called `name`, if there is one.
    pub fn shape_of(&self, name: &str) -> Option<Vec<usize>> {
        let index = self.names.iter().position(|n| n == name)?;
        Some(self.vars[index].dims().to_vec())
    }

    /// The variables, in name order: what the optimiser updates.
    pub fn vars(&self) -> &[Var] {
        &self.vars
    }

    /// The model over the variables themselves.
    pub fn model(&self) -> &Model {
        &self.model
    }

    /// The model a training step runs in `dtype`: the variables' own model in f32; otherwise
    /// a model over this step's casts of them, which are graph nodes, so the backward pass
    /// brings each gradient back to the f32 variables (mixed precision with f32 master
    /// weights). Build it once per step: the casts hold the weights of that step.
    pub fn for_step(&self, dtype: DType) -> Result<StepModel<'_>> {
        if dtype == DType::F32 {
            return Ok(StepModel::Variables(&self.model));
        }
        let tensors = self.tensors(|t| t.to_dtype(dtype))?;
        let vb = VarBuilder::from_tensors(tensors, dtype, &self.device);
        Ok(StepModel::Casts(Box::new(Model::new(
            &self.config,
            self.vocab,
            vb,
        )?)))
    }

    /// A model over the current values, detached (the same storage, no copy): nothing in it
    /// tracks gradients, so decoding takes the inference fast paths. Valid until the next
    /// optimiser step (see the module comment), so build one per pass.
    pub fn frozen(&self) -> Result<Model> {
        let tensors = self.tensors(|t| Ok(t.detach()))?;
        let vb = VarBuilder::from_tensors(tensors, DType::F32, &self.device);
        Model::new(&self.config, self.vocab, vb)
    }

    /// Every tensor of the model under its state_dict name, parameters and position tables,
    /// in name order: what a checkpoint holds.
    pub fn named_tensors(&self) -> Vec<(String, Tensor)> {
        let mut tensors: Vec<(String, Tensor)> = self
            .names
            .iter()
            .zip(&self.vars)
            .map(|(name, var)| (name.clone(), var.as_tensor().clone()))
            .collect();
        tensors.extend(self.model.buffers());
        tensors.sort_by(|a, b| a.0.cmp(&b.0));
        tensors
    }

    /// Sets every parameter from `saved` (a checkpoint's tensors, by name); names the first
    /// one that is missing or shaped differently.
    pub fn load(&self, saved: &HashMap<String, Tensor>) -> Result<()> {
        for (name, var) in self.names.iter().zip(&self.vars) {
            let Some(weight) = saved.get(name) else {
                candle_core::bail!("the checkpoint has no weight {name}")
            };
            if weight.shape() != var.shape() {
                candle_core::bail!(
                    "tensor {name} has shape {:?} but the config needs {:?}",
                    weight.dims(),
                    var.dims()
                );
            }
            var.set(&weight.to_device(&self.device)?)?;
        }
        Ok(())
    }

    /// The parameters and position tables, each through `map`, by name.
    fn tensors(&self, map: impl Fn(&Tensor) -> Result<Tensor>) -> Result<HashMap<String, Tensor>> {
        let mut tensors = HashMap::with_capacity(self.vars.len());
        for (name, var) in self.names.iter().zip(&self.vars) {
            tensors.insert(name.clone(), map(var.as_tensor())?);
        }
        for (name, table) in self.model.buffers() {
            tensors.insert(name, map(&table)?);
        }
        Ok(tensors)
    }
}

/// The model one training step runs: see [`TrainedWeights::for_step`].
pub enum StepModel<'a> {
    Variables(&'a Model),
    /// Over this step's casts of the variables.
    Casts(Box<Model>),
}

impl Deref for StepModel<'_> {
    type Target = Model;

    fn deref(&self) -> &Model {
        match self {
            Self::Variables(model) => model,
            Self::Casts(model) => model,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::dropout::Mode;
    use crate::model::TeacherForced;

    fn tiny() -> TrainedWeights {
        let config = ModelConfig {
            layers: 1,
            d_model: 16,
            d_ff: 32,
            heads: 2,
            ..ModelConfig::default()
        };
        let vocab = VocabSizes { src: 9, tgt: 11 };
        TrainedWeights::fresh(&config, vocab, 3, &Device::Cpu).unwrap()
    }

    fn logits(model: &Model) -> Tensor {
        let dev = Device::Cpu;
        let src = Tensor::new(&[[1u32, 4, 5, 2]], &dev).unwrap();
        let tgt = Tensor::new(&[[1u32, 6, 7]], &dev).unwrap();
        let batch = TeacherForced::with_masks(src, tgt, 0).unwrap();
        model.logits(&batch, Mode::Eval).unwrap()
    }

    #[test]
    fn a_frozen_view_computes_what_the_trained_model_does_without_tracking_gradients() {
        let weights = tiny();
        let (trained, frozen) = (logits(weights.model()), logits(&weights.frozen().unwrap()));
        assert!(trained.track_op() && !frozen.track_op());
        let diff = (trained - frozen)
            .unwrap()
            .abs()
            .unwrap()
            .flatten_all()
            .unwrap();
        assert_eq!(diff.max(0).unwrap().to_scalar::<f32>().unwrap(), 0.0);
        // A batch of the other family is refused, by name.
        let ids = Tensor::new(&[[1u32, 6]], &Device::Cpu).unwrap();
        let error = weights
            .model()
            .logits(&TeacherForced::TargetOnly { ids }, Mode::Eval)
            .unwrap_err()
            .to_string();
        assert!(error.contains("an encoder-decoder model cannot read a batch without a source"));
        // The f32 step reads the variables' own model, not a copy.
        assert!(matches!(
            weights.for_step(DType::F32).unwrap(),
            StepModel::Variables(_)
        ));
    }

    #[test]
    fn loading_names_a_missing_or_misshapen_tensor() {
        let weights = tiny();
        let mut saved: HashMap<String, Tensor> = weights
            .named_tensors()
            .into_iter()
            .map(|(name, tensor)| (name, tensor.copy().unwrap()))
            .collect();
        weights.load(&saved).unwrap();
        let name = weights.names()[0].clone();
        saved.insert(
            name.clone(),
            Tensor::zeros(3, DType::F32, &Device::Cpu).unwrap(),
        );
        let error = weights.load(&saved).unwrap_err().to_string();
        assert!(error.contains(&name) && error.contains("shape"), "{error}");
        saved.remove(&name);
        let error = weights.load(&saved).unwrap_err().to_string();
        assert!(error.contains(&format!("no weight {name}")), "{error}");
    }
}
