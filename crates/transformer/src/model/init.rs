//! Parameter initialisation as the reference ends up with it, from a seed.
//!
//! `make_model` applies `xavier_uniform_` to every parameter with two or more dimensions; linear
//! biases keep PyTorch's default U(-1/sqrt(fan_in), 1/sqrt(fan_in)); LayerNorm gains and biases
//! keep their ones and zeros.

use std::collections::HashMap;

use candle_core::{DType, Device, Result, Tensor, Var};
use candle_nn::{VarBuilder, VarMap};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// Every variable of `varmap` with its name, in name order (the map's own order is a hash
/// map's): what initialisation, the optimizer and checkpoints walk.
pub fn named_vars(varmap: &VarMap) -> Result<Vec<(String, Var)>> {
    let vars = varmap
        .data()
        .lock()
        .map_err(|_| candle_core::Error::Msg("parameter map lock poisoned".into()))?;
    let mut named: Vec<(String, Var)> = vars
        .iter()
        .map(|(name, var)| (name.clone(), var.clone()))
        .collect();
    named.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(named)
}

/// A model built by `build` over fresh variables in `varmap`, then initialised from `seed`
/// as the reference's `make_model` does: both model families are made this way.
pub fn fresh_model<M>(
    varmap: &VarMap,
    seed: u64,
    device: &Device,
    build: impl FnOnce(VarBuilder) -> Result<M>,
) -> Result<M> {
    let model = build(VarBuilder::from_varmap(varmap, DType::F32, device))?;
    initialize_parameters(varmap, seed)?;
    Ok(model)
}

/// Re-draws every matrix and linear bias in `varmap` from `seed`, in name order so that the
/// result does not depend on the map's iteration order.
pub fn initialize_parameters(varmap: &VarMap, seed: u64) -> Result<()> {
    let vars = named_vars(varmap)?;
    let dims_of: HashMap<&str, Vec<usize>> = vars
        .iter()
        .map(|(name, var)| (name.as_str(), var.dims().to_vec()))
        .collect();
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    for (name, var) in &vars {
        let dims = var.dims().to_vec();
        let bound = match dims.as_slice() {
            [fan_out, fan_in, ..] => {
                let receptive: usize = dims[2..].iter().product();
                (6.0 / ((fan_in + fan_out) * receptive) as f64).sqrt()
            }
            [_] if name.ends_with(".bias") => {
                let weight_name = name.trim_end_matches("bias").to_string() + "weight";
                match dims_of.get(weight_name.as_str()) {
                    Some(weight_dims) if weight_dims.len() == 2 => {
                        1.0 / (weight_dims[1] as f64).sqrt()
                    }
                    _ => continue,
                }
            }
            _ => continue,
        };
        let values: Vec<f32> = (0..var.elem_count())
            .map(|_| rng.random_range(-bound..bound) as f32)
            .collect();
        var.set(&Tensor::from_vec(values, var.shape(), var.device())?)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::{DType, Device};
    use candle_nn::{Init, VarBuilder};

    #[test]
    fn matrices_get_xavier_bounds_and_biases_the_fan_in_bound() {
        let varmap = VarMap::new();
        let vb = VarBuilder::from_varmap(&varmap, DType::F32, &Device::Cpu);
        let _ = candle_nn::linear(30, 20, vb.pp("lin")).unwrap();
        let gain = vb.get_with_hints(30, "norm.a_2", Init::Const(1.)).unwrap();
        initialize_parameters(&varmap, 5).unwrap();
        let weight = vb.get((20, 30), "lin.weight").unwrap();
        let bias = vb.get(20, "lin.bias").unwrap();
        let max_abs = crate::kernels::test_support::largest;
        let xavier = (6f32 / 50.).sqrt();
        assert!(max_abs(&weight) <= xavier && max_abs(&weight) > 0.9 * xavier);
        assert!(max_abs(&bias) <= 1. / 30f32.sqrt());
        assert_eq!(gain.to_vec1::<f32>().unwrap(), vec![1.0; 30]);
    }

    #[test]
    fn the_same_seed_gives_the_same_parameters() {
        let draw = |seed| {
            let varmap = VarMap::new();
            let vb = VarBuilder::from_varmap(&varmap, DType::F32, &Device::Cpu);
            let lin = candle_nn::linear(4, 3, vb).unwrap();
            initialize_parameters(&varmap, seed).unwrap();
            lin.weight()
                .flatten_all()
                .unwrap()
                .to_vec1::<f32>()
                .unwrap()
        };
        assert_eq!(draw(1), draw(1));
        assert_ne!(draw(1), draw(2));
    }
}
