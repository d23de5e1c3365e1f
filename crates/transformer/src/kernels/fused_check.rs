//! The fused kernels checked against candle's composed ops on a device, from the command line
//! (`transformer bench check-kernels`): what the unit tests do on the CPU, for a GPU, which
//! runs no test binary. A fused CUDA kernel becomes the default only after this passes on a
//! GPU.

use candle_core::{DType, Device, Result, Tensor, Var};

use super::adam::{adam_update, AdamStep};
use super::attention::scaled_dot_product;
use super::composed_only;
use super::dropout::{DropoutRng, Mode};
use super::layer_norm::{layer_norm, NormKind};
use super::residual::{relu_dropout, residual_dropout};

/// One fused op against the composed path: the largest difference of its outputs and
/// gradients, relative to (1 + their largest magnitude), and whether it is within tolerance.
#[derive(Debug, Clone)]
pub struct KernelCheck {
    pub name: String,
    pub relative_difference: f32,
    pub tolerance: f32,
}

impl KernelCheck {
    pub fn passed(&self) -> bool {
        self.relative_difference <= self.tolerance
    }
}

/// Checks LayerNorm (both kinds), attention (padding and causal masks, with and without
/// dropout), the residual and ReLU dropouts (forward and backward, each) and Adam (three
/// steps) on `device` against the composed path. The fused path runs where [`super::fused_runs`] or, on a GPU,
/// [`super::use_cuda_fused`] lets it; otherwise both sides are the composed one.
pub fn check_fused_kernels(device: &Device) -> Result<Vec<KernelCheck>> {
    let mut checks = Vec::new();
    for (name, kind) in [
        ("layer norm (Annotated)", NormKind::Annotated { eps: 1e-6 }),
        ("layer norm (torch)", NormKind::Torch { eps: 1e-5 }),
    ] {
        for (rows, size) in [(37, 512), (3, 1000), (1, 64)] {
            checks.push(layer_norm_check(
                &format!("{name}, {rows}x{size}"),
                kind,
                (rows, size),
                device,
            )?);
        }
    }
    checks.extend(attention_checks(device)?);
    checks.extend(dropout_checks(device)?);
    checks.push(adam_check(device)?);
    Ok(checks)
}

/// The largest `|a - b|` over pairs of tensors, relative to 1 + the largest `|b|`.
fn relative_difference(pairs: &[(Tensor, Tensor)]) -> Result<f32> {
    let mut worst = 0f32;
    for (a, b) in pairs {
        let difference = (a - b)?.abs()?.flatten_all()?.max(0)?.to_scalar::<f32>()?;
        let scale = b.abs()?.flatten_all()?.max(0)?.to_scalar::<f32>()?;
        worst = worst.max(difference / (1.0 + scale));
    }
    Ok(worst)
}

/// `op`'s output and the gradients of `inputs` for a random weighting of the output.
fn outputs_and_gradients(
    inputs: &[Var],
    weighting: &Tensor,
    op: &dyn Fn() -> Result<Tensor>,
) -> Result<Vec<Tensor>> {
    let out = op()?;
    let grads = (&out * weighting)?.sum_all()?.backward()?;
    let mut outputs = vec![out.detach()];
    for var in inputs {
        let grad = grads
            .get(var.as_tensor())
            .ok_or_else(|| candle_core::Error::Msg("an input got no gradient".into()))?;
        outputs.push(grad.clone());
    }
    Ok(outputs)
}

/// `op` on the fused path and on the composed one: its output and the gradients of `inputs`,
/// compared. `op` draws its dropout from a fresh stream each time (the same draws on both).
fn compare(
    name: String,
    inputs: &[Var],
    tolerance: f32,
    op: &dyn Fn() -> Result<Tensor>,
) -> Result<KernelCheck> {
    let probe = op()?;
    let weighting = seeded(probe.dims(), 0.0, 1.0, 0, probe.device())?;
    let fused = outputs_and_gradients(inputs, &weighting, op)?;
    let composed = {
        let _composed = composed_only();
        outputs_and_gradients(inputs, &weighting, op)?
    };
    Ok(KernelCheck {
        name,
        relative_difference: relative_difference(
            &fused.into_iter().zip(composed).collect::<Vec<_>>(),
        )?,
        tolerance,
    })
}

/// Values drawn uniformly from `mean ± spread`, from the stream seeded by `seed`: the same
/// inputs on every run and device, so that a failure can be run again exactly.
fn seeded(shape: &[usize], mean: f32, spread: f32, seed: u64, device: &Device) -> Result<Tensor> {
    use rand::{Rng, SeedableRng};
    let count: usize = shape.iter().product();
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    let values: Vec<f32> = (0..count)
        .map(|_| mean + spread * rng.random_range(-1f32..1f32))
        .collect();
    Tensor::from_vec(values, shape, device)
}

fn random_var(shape: &[usize], mean: f32, seed: u64, device: &Device) -> Result<Var> {
    Var::from_tensor(&seeded(shape, mean, 1.5, seed, device)?)
}

fn layer_norm_check(
    name: &str,
    kind: NormKind,
    (rows, size): (usize, usize),
    device: &Device,
) -> Result<KernelCheck> {
    let inputs = [
        random_var(&[rows, size], 0.5, 1, device)?,
        random_var(&[size], 1.0, 2, device)?,
        random_var(&[size], 0.0, 3, device)?,
    ];
    let op = || {
        layer_norm(
            inputs[0].as_tensor(),
            inputs[1].as_tensor(),
            inputs[2].as_tensor(),
            kind,
        )
    };
    compare(name.to_string(), &inputs, 1e-4, &op)
}

/// A fresh dropout stream of one seed, begun at step 1: on a GPU it seeds the device's
/// generator, so that both paths draw the same masks.
fn fresh_stream(device: &Device) -> Result<DropoutRng> {
    let rng = DropoutRng::new(57);
    rng.begin_step(device, 1)?;
    Ok(rng)
}

/// Attention with a padding mask (one query row sees no key at all) and a causal one, with
/// and without dropout: the values and the gradients of Q, K and V.
fn attention_checks(device: &Device) -> Result<Vec<KernelCheck>> {
    let (batch, heads, len, d_k) = (2, 4, 9, 16);
    let inputs = [
        random_var(&[batch, heads, len, d_k], 0.0, 4, device)?,
        random_var(&[batch, heads, len, d_k], 0.0, 5, device)?,
        random_var(&[batch, heads, len, d_k], 0.0, 6, device)?,
    ];
    let mut padding = vec![1u8; batch * len];
    padding[len - 3..len].fill(0);
    padding[len..].fill(0);
    let padding = Tensor::from_vec(padding, (batch, 1, 1, len), device)?;
    let causal: Vec<u8> = (0..len * len)
        .map(|at| u8::from(at % len <= at / len))
        .collect();
    let causal = Tensor::from_vec(causal, (1, 1, len, len), device)?;
    let mut checks = Vec::new();
    for (what, mask) in [("padding mask", &padding), ("causal mask", &causal)] {
        for p in [0.0, 0.1] {
            let op = || {
                let rng = fresh_stream(device)?;
                let [q, k, v] = &inputs;
                let (out, _) = scaled_dot_product(
                    q.as_tensor(),
                    k.as_tensor(),
                    v.as_tensor(),
                    Some(mask),
                    p,
                    Mode::Train(&rng),
                )?;
                Ok(out)
            };
            let name = format!("attention, {what}, dropout {p}");
            checks.push(compare(name, &inputs, 1e-4, &op)?);
        }
    }
    Ok(checks)
}

/// The residual sum with dropout and the ReLU with dropout.
fn dropout_checks(device: &Device) -> Result<Vec<KernelCheck>> {
    let shape = [3, 7, 64];
    let inputs = [
        random_var(&shape, 0.0, 7, device)?,
        random_var(&shape, 0.0, 8, device)?,
    ];
    let residual = || {
        let rng = fresh_stream(device)?;
        residual_dropout(
            inputs[0].as_tensor(),
            inputs[1].as_tensor(),
            0.1,
            Mode::Train(&rng),
        )
    };
    let relu = || {
        let rng = fresh_stream(device)?;
        relu_dropout(inputs[1].as_tensor(), 0.1, Mode::Train(&rng))
    };
    Ok(vec![
        compare(
            "residual + dropout, 3x7x64".into(),
            &inputs,
            1e-5,
            &residual,
        )?,
        compare("dropout(relu), 3x7x64".into(), &inputs[1..], 1e-5, &relu)?,
    ])
}

/// Three Adam steps from one start, fused and composed: the weights and both moments.
fn adam_check(device: &Device) -> Result<KernelCheck> {
    let n = 100_003;
    let start = seeded(&[n], 0.0, 1.0, 11, device)?;
    let grads: Vec<Tensor> = (0..3)
        .map(|t| seeded(&[n], 0.0, 1e-2, 12 + t as u64, device))
        .collect::<Result<_>>()?;
    let run = || -> Result<Vec<Tensor>> {
        let param = Var::from_tensor(&start.copy()?)?;
        let mut first = Tensor::zeros(n, DType::F32, device)?;
        let mut second = Tensor::zeros(n, DType::F32, device)?;
        for (t, grad) in grads.iter().enumerate() {
            let t = t as i32 + 1;
            let (beta1, beta2, lr) = (0.9f32, 0.98f32, 1e-3f32);
            let step = AdamStep {
                beta1,
                beta2,
                step_size: lr / (1.0 - beta1.powi(t)),
                inv_sqrt_bias_correction2: 1.0 / (1.0 - beta2.powi(t)).sqrt(),
                eps: 1e-9,
            };
            adam_update(&param, &mut first, &mut second, grad, step)?;
        }
        Ok(vec![param.as_tensor().copy()?, first, second])
    };
    let fused = run()?;
    let composed = {
        let _composed = composed_only();
        run()?
    };
    Ok(KernelCheck {
        name: format!("adam, 3 steps of {n} weights"),
        relative_difference: relative_difference(
            &fused.into_iter().zip(composed).collect::<Vec<_>>(),
        )?,
        tolerance: 1e-5,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_fused_kernel_matches_the_composed_path_on_the_cpu() {
        let checks = check_fused_kernels(&Device::Cpu).unwrap();
        assert_eq!(checks.len(), 13);
        for check in &checks {
            assert!(check.passed(), "{check:?}");
        }
    }
}
