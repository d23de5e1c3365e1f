//! The fused kernels checked against candle's composed ops on a device, from the command line
//! (`transformer bench check-kernels`): what the unit tests do on the CPU, for a GPU, which
//! runs no test binary. A fused CUDA kernel becomes the default only after this passes on a
//! GPU.

use candle_core::{DType, Device, Result, Tensor, Var};

use super::adam::{adam_update, AdamStep};
use super::composed_only;
use super::layer_norm::{layer_norm, NormKind};

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

/// Checks LayerNorm (both kinds, forward and backward) and Adam (three steps) on `device`
/// against the composed path. The fused path runs where [`super::fused_runs`] or, on a GPU,
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

/// The output and the gradients of x, gain and bias for a random weighting of the output.
fn layer_norm_outputs(
    inputs: &[Var; 3],
    weighting: &Tensor,
    kind: NormKind,
) -> Result<Vec<Tensor>> {
    let out = layer_norm(
        inputs[0].as_tensor(),
        inputs[1].as_tensor(),
        inputs[2].as_tensor(),
        kind,
    )?;
    let grads = (&out * weighting)?.sum_all()?.backward()?;
    let mut outputs = vec![out.detach()];
    for var in inputs {
        let grad = grads.get(var.as_tensor()).ok_or_else(|| {
            candle_core::Error::Msg("layer norm: an input got no gradient".into())
        })?;
        outputs.push(grad.clone());
    }
    Ok(outputs)
}

fn layer_norm_check(
    name: &str,
    kind: NormKind,
    (rows, size): (usize, usize),
    device: &Device,
) -> Result<KernelCheck> {
    let random = |shape: &[usize], mean: f32| Tensor::randn(mean, 1f32, shape, device);
    let inputs = [
        Var::from_tensor(&random(&[rows, size], 0.5)?)?,
        Var::from_tensor(&random(&[size], 1.0)?)?,
        Var::from_tensor(&random(&[size], 0.0)?)?,
    ];
    let weighting = random(&[rows, size], 0.0)?;
    let fused = layer_norm_outputs(&inputs, &weighting, kind)?;
    let composed = {
        let _composed = composed_only();
        layer_norm_outputs(&inputs, &weighting, kind)?
    };
    Ok(KernelCheck {
        name: name.to_string(),
        relative_difference: relative_difference(
            &fused.into_iter().zip(composed).collect::<Vec<_>>(),
        )?,
        tolerance: 1e-4,
    })
}

/// Three Adam steps from one start, fused and composed: the weights and both moments.
fn adam_check(device: &Device) -> Result<KernelCheck> {
    let n = 100_003;
    let start = Tensor::randn(0f32, 1f32, n, device)?;
    let grads: Vec<Tensor> = (0..3)
        .map(|_| Tensor::randn(0f32, 1e-2, n, device))
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
        assert_eq!(checks.len(), 7);
        for check in &checks {
            assert!(check.passed(), "{check:?}");
        }
    }
}
