//! A linear layer, `y = x W^T + b`, named as torch.nn.Linear (`weight` `(out, in)`, `bias`).
//! The product itself is [`crate::kernels::linear`]'s.

use std::sync::OnceLock;

use candle_core::{Result, Tensor, D};
use candle_nn::{Init, VarBuilder};

use crate::kernels;

/// A fully connected layer, with or without a bias.
#[derive(Clone)]
pub struct Linear {
    weight: Tensor,
    bias: Option<Tensor>,
    /// `W^T` for a fixed weight, which the kernel may fill on first use (see
    /// `kernels::linear::linear`): a loaded checkpoint, or validation's detached view, which
    /// lives for one validation pass.
    fixed_weight_t: OnceLock<Tensor>,
}

impl Linear {
    /// Zero-initialised: `make_model` draws every parameter afterwards, as the reference does.
    pub fn new(in_features: usize, out_features: usize, vb: VarBuilder) -> Result<Self> {
        Self::with_bias(in_features, out_features, true, vb)
    }

    /// As `new`; without `bias` the layer has no `bias` tensor at all (torch's `bias=False`).
    pub fn with_bias(
        in_features: usize,
        out_features: usize,
        bias: bool,
        vb: VarBuilder,
    ) -> Result<Self> {
        let weight = vb.get_with_hints((out_features, in_features), "weight", Init::Const(0.))?;
        Self::from_weight(weight, bias, vb)
    }

    /// A layer over an existing `weight` `(out, in)` (shared with another module) and, with
    /// `bias`, its own bias.
    pub fn from_weight(weight: Tensor, bias: bool, vb: VarBuilder) -> Result<Self> {
        let bias = if bias {
            Some(vb.get_with_hints(weight.dim(0)?, "bias", Init::Const(0.))?)
        } else {
            None
        };
        Ok(Self {
            weight,
            bias,
            fixed_weight_t: OnceLock::new(),
        })
    }

    /// `layers` of one input size as one layer whose outputs lie side by side in that order
    /// (their weights and biases concatenated): one product instead of several.
    pub fn concatenated(layers: &[&Linear]) -> Result<Self> {
        let weights: Vec<&Tensor> = layers.iter().map(|l| &l.weight).collect();
        let biases: Option<Vec<&Tensor>> = layers.iter().map(|l| l.bias.as_ref()).collect();
        Ok(Self {
            weight: Tensor::cat(&weights, 0)?,
            bias: biases.map(|b| Tensor::cat(&b, 0)).transpose()?,
            fixed_weight_t: OnceLock::new(),
        })
    }

    /// Whether the weights are being trained (variables), so may change after any step.
    pub fn is_trained(&self) -> bool {
        self.weight.track_op() || self.bias.as_ref().is_some_and(Tensor::track_op)
    }

    /// `(..., in)` -> `(..., out)`.
    pub fn forward(&self, xs: &Tensor) -> Result<Tensor> {
        let mut dims = xs.dims().to_vec();
        let in_features = xs.dim(D::Minus1)?;
        let rows = xs.elem_count() / in_features.max(1);
        if let Some(last) = dims.last_mut() {
            *last = self.weight.dim(0)?;
        }
        let xs = xs.reshape((rows, in_features))?;
        let ys =
            kernels::linear::linear(&xs, &self.weight, self.bias.as_ref(), &self.fixed_weight_t)?;
        ys.reshape(dims)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::{DType, Device, Var};
    use candle_nn::VarMap;

    #[test]
    fn linear_matches_x_w_transpose_plus_b_and_its_bias_gradient_is_the_column_sum() {
        let dev = Device::Cpu;
        let varmap = VarMap::new();
        let vb = VarBuilder::from_varmap(&varmap, DType::F32, &dev);
        let layer = Linear::new(3, 2, vb).unwrap();
        varmap
            .data()
            .lock()
            .unwrap()
            .get("weight")
            .unwrap()
            .set(&Tensor::new(&[[1f32, 2., 3.], [0., -1., 1.]], &dev).unwrap())
            .unwrap();
        varmap
            .data()
            .lock()
            .unwrap()
            .get("bias")
            .unwrap()
            .set(&Tensor::new(&[10f32, 20.], &dev).unwrap())
            .unwrap();
        let x = Var::new(&[[[1f32, 1., 1.], [2., 0., 1.]]], &dev).unwrap();
        let y = layer.forward(x.as_tensor()).unwrap();
        assert_eq!(y.dims(), &[1, 2, 2]);
        assert_eq!(
            y.to_vec3::<f32>().unwrap(),
            vec![vec![vec![16., 20.], vec![15., 21.]]]
        );
        let grads = y.sum_all().unwrap().backward().unwrap();
        let bias = varmap.data().lock().unwrap().get("bias").unwrap().clone();
        let bias_grad = grads
            .get(bias.as_tensor())
            .unwrap()
            .to_vec1::<f32>()
            .unwrap();
        assert_eq!(bias_grad, vec![2., 2.]);
    }
}
