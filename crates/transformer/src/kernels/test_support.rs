//! What the fused ops' tests share: each fused op is checked against the composed path that a
//! GPU runs, through the same entry point.

use candle_core::backprop::GradStore;
use candle_core::{Tensor, Var};

use super::composed_only;

/// The largest absolute difference between two tensors of one shape.
pub fn largest_difference(a: &Tensor, b: &Tensor) -> f32 {
    (a - b)
        .unwrap()
        .abs()
        .unwrap()
        .flatten_all()
        .unwrap()
        .max(0)
        .unwrap()
        .to_scalar::<f32>()
        .unwrap()
}

/// Runs `op` on the fused path and again with the composed path forced, and checks that the
/// outputs and the gradients of every input in `inputs` (of one random weighting of the
/// output, the same for both) agree within `tolerance` times (1 + the largest magnitude):
/// a gradient summed over many rows carries rounding that grows with it. `op` must draw the same dropout on
/// both runs (a fresh `DropoutRng` of one seed each time).
pub fn assert_fused_matches_composed(inputs: &[&Var], tolerance: f32, op: impl Fn() -> Tensor) {
    let fused = op();
    let composed = {
        let _composed = composed_only();
        op()
    };
    assert_eq!(fused.dims(), composed.dims());
    let difference = largest_difference(&fused, &composed);
    assert!(
        difference < tolerance * (1.0 + largest(&composed)),
        "outputs differ by {difference}"
    );
    let upstream = Tensor::randn(0f32, 1., fused.shape(), fused.device()).unwrap();
    let gradients = |out: &Tensor| weighted_gradients(out, &upstream);
    let (fused_grads, composed_grads) = (gradients(&fused), {
        let _composed = composed_only();
        gradients(&composed)
    });
    for (i, var) in inputs.iter().enumerate() {
        let got = fused_grads.get(var.as_tensor()).expect("a fused gradient");
        let want = composed_grads
            .get(var.as_tensor())
            .expect("a composed gradient");
        assert_eq!(got.dims(), want.dims(), "input {i}");
        let difference = largest_difference(got, want);
        assert!(
            difference < tolerance * (1.0 + largest(want)),
            "input {i}'s gradients differ by {difference} (largest {})",
            largest(want)
        );
    }
}

/// The largest magnitude in a tensor.
pub fn largest(t: &Tensor) -> f32 {
    t.abs()
        .unwrap()
        .max_all()
        .unwrap()
        .to_scalar::<f32>()
        .unwrap()
}

/// The gradients of `sum(out * upstream)`: one weighting of every output, so that no
/// gradient is symmetric by accident.
pub fn weighted_gradients(out: &Tensor, upstream: &Tensor) -> GradStore {
    (out * upstream)
        .unwrap()
        .sum_all()
        .unwrap()
        .backward()
        .unwrap()
}
