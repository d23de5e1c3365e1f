//! One Adam step for one parameter, as torch.optim.Adam takes it (no weight decay): on the
//! CPU in f32 three in-place passes ([`super::adam_fused`]), elsewhere candle's tensor ops.
//!
//! ```text
//! m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g^2;  p -= step_size m / (sqrt(v) / sqrt(bc2) + eps)
//! ```

use candle_core::{Result, Tensor, Var};

pub use super::adam_fused::AdamStep;
use super::{adam_fused, fused_runs};

/// Updates `param` and its moments `first` and `second` from `grad`, all of one shape: in
/// place where the fused path runs, else by replacing the moments and setting the variable.
pub fn adam_update(
    param: &Var,
    first: &mut Tensor,
    second: &mut Tensor,
    grad: &Tensor,
    step: AdamStep,
) -> Result<()> {
    let all = [param.as_tensor(), &*first, &*second, grad];
    if all.iter().any(|t| t.shape() != param.shape()) {
        candle_core::bail!(
            "adam: a gradient or moment of another shape than its parameter {:?}",
            param.dims()
        )
    }
    if fused_runs(&all) && all.iter().all(|t| t.is_contiguous()) {
        return adam_fused::update_in_place(param.as_tensor(), first, second, grad, step);
    }
    #[cfg(feature = "cuda")]
    if super::cuda_fused_runs(&all) && all.iter().all(|t| t.is_contiguous()) {
        return super::cuda::adam::update_in_place(param.as_tensor(), first, second, grad, step);
    }
    let (beta1, beta2) = (f64::from(step.beta1), f64::from(step.beta2));
    *first = (first.affine(beta1, 0.)? + grad.affine(1. - beta1, 0.)?)?;
    *second = (second.affine(beta2, 0.)? + grad.sqr()?.affine(1. - beta2, 0.)?)?;
    let denominator = second.sqrt()?.affine(
        f64::from(step.inv_sqrt_bias_correction2),
        f64::from(step.eps),
    )?;
    let update = first
        .div(&denominator)?
        .affine(f64::from(step.step_size), 0.)?;
    param.set(&param.as_tensor().sub(&update)?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::composed_only;
    use crate::kernels::test_support::largest_difference;
    use candle_core::Device;

    /// Four steps on each path from the same start and gradients: the same weights and
    /// moments, more elements than one parallel chunk holds.
    #[test]
    fn the_in_place_update_matches_the_composed_one_over_several_steps() {
        let dev = Device::Cpu;
        let start = Tensor::randn(0f32, 1., (3, 70_000), &dev).unwrap();
        let run = |composed: bool, grads: &[Tensor]| {
            let _path = composed.then(composed_only);
            let param = Var::from_tensor(&start.copy().unwrap()).unwrap();
            let (mut first, mut second) =
                (start.zeros_like().unwrap(), start.zeros_like().unwrap());
            for (t, grad) in grads.iter().enumerate() {
                let t = t as i32 + 1;
                let step = AdamStep {
                    beta1: 0.9,
                    beta2: 0.98,
                    step_size: (0.01 * t as f64 / (1.0 - 0.9f64.powi(t))) as f32,
                    inv_sqrt_bias_correction2: (1.0 / (1.0 - 0.98f64.powi(t)).sqrt()) as f32,
                    eps: 1e-9,
                };
                adam_update(&param, &mut first, &mut second, grad, step).unwrap();
            }
            (param.as_tensor().copy().unwrap(), first, second)
        };
        let grads: Vec<Tensor> = (0..4)
            .map(|_| Tensor::randn(0f32, 1., (3, 70_000), &dev).unwrap())
            .collect();
        let (fused, composed) = (run(false, &grads), run(true, &grads));
        assert!(largest_difference(&fused.0, &composed.0) < 1e-6);
        assert!(largest_difference(&fused.1, &composed.1) < 1e-6);
        assert!(largest_difference(&fused.2, &composed.2) < 1e-6);
        assert!(largest_difference(&fused.0, &start) > 1e-3);
    }
}
