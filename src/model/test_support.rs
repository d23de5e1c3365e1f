//! What the fused ops' tests share.

use candle_core::Tensor;

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
