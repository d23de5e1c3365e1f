//! A linear layer, `y = x W^T + b`, named as torch.nn.Linear (`weight` `(out, in)`, `bias`),
//! and the one owner of every form its weight takes. The product itself is
//! [`crate::kernels::linear`]'s.
//!
//! A weight being trained is read as it is: it changes after every optimiser step. A fixed
//! weight (a loaded checkpoint, a frozen view for validation) keeps the forms decoding reads
//! faster, made on first use: its transpose, and (in a [`LinearGroup`]) the concatenation
//! of layers that read the same input. A weight the loader serves as int8 (an int8
//! checkpoint's, or a float one quantized for int8 decoding: see [`super::served`]) is kept as
//! int8 values and row scales and nothing else; one served as bf16 on the CPU (bfloat16
//! decoding) as bf16 packed for the bf16 kernels and nothing else. Model code calls `forward`
//! and never knows which form answered.

use std::borrow::Cow;
use std::ops::Range;
use std::sync::{Arc, OnceLock};

use candle_core::{Result, Tensor, D};
use candle_nn::{Init, VarBuilder};

use super::served::{fetch_matrix, ServedMatrix};
use crate::kernels;
use crate::kernels::bf16::PackedWeight;
use crate::kernels::int8::QuantizedMatrix;
use crate::kernels::linear::FixedForms;
use crate::model::weights::table::Table;

/// The forms a linear layer's weight `(out, in)` takes.
#[derive(Clone)]
enum Weight {
    /// A variable, or this step's cast of one: gradients flow through it.
    Trained(Tensor),
    /// No gradient: `W`, and the forms products of several rows on the CPU read, once one
    /// has asked for them.
    Fixed {
        matrix: Tensor,
        forms: Arc<FixedForms>,
    },
    /// int8, one scale per output row, with the bias's values: the f32 weight is not kept.
    Int8 {
        matrix: Arc<QuantizedMatrix>,
        bias: Option<Arc<[f32]>>,
    },
    /// bf16, packed once, with the bias's values: the f32 weight is not kept.
    Bf16 {
        matrix: Arc<PackedWeight>,
        bias: Option<Arc<[f32]>>,
    },
}

impl Weight {
    fn new(matrix: Tensor) -> Self {
        if matrix.track_op() {
            Self::Trained(matrix)
        } else {
            Self::Fixed {
                matrix,
                forms: Arc::default(),
            }
        }
    }

    /// The f32 matrix, for forms that keep one.
    fn matrix(&self) -> Option<&Tensor> {
        match self {
            Self::Trained(matrix) | Self::Fixed { matrix, .. } => Some(matrix),
            Self::Int8 { .. } | Self::Bf16 { .. } => None,
        }
    }

    fn out_features(&self) -> Result<usize> {
        match self {
            Self::Trained(matrix) | Self::Fixed { matrix, .. } => matrix.dim(0),
            Self::Int8 { matrix, .. } => Ok(matrix.out_features()),
            Self::Bf16 { matrix, .. } => Ok(matrix.out_features()),
        }
    }

    /// The int8 form of `matrix`, with the bias's values read once.
    fn int8_of(matrix: Arc<QuantizedMatrix>, bias: Option<&Tensor>) -> Result<Self> {
        Ok(Self::Int8 {
            matrix,
            bias: bias_values(bias)?,
        })
    }

    /// The bf16 form of `matrix`, with the bias's values read once.
    fn bf16_of(matrix: Arc<PackedWeight>, bias: Option<&Tensor>) -> Result<Self> {
        Ok(Self::Bf16 {
            matrix,
            bias: bias_values(bias)?,
        })
    }
}

/// Every layer's weight in the form `form` picks, or `None` when one is in another.
fn all_in_form<'a, M: ?Sized>(
    layers: &'a [Linear],
    form: impl Fn(&'a Weight) -> Option<&'a M>,
) -> Option<Vec<&'a M>> {
    layers.iter().map(|l| form(&l.weight)).collect()
}

/// The layer's own bias of `out` values under `vb`, when it has one.
fn own_bias(bias: bool, out: usize, vb: &VarBuilder) -> Result<Option<Tensor>> {
    bias.then(|| vb.get_with_hints(out, "bias", Init::Const(0.)))
        .transpose()
}

fn bias_values(bias: Option<&Tensor>) -> Result<Option<Arc<[f32]>>> {
    bias.map(|b| Ok(Arc::from(b.to_vec1::<f32>()?))).transpose()
}

/// A fully connected layer, with or without a bias.
#[derive(Clone)]
pub struct Linear {
    weight: Weight,
    bias: Option<Tensor>,
}

impl Linear {
    /// Zero-initialised: `Model::fresh` draws every parameter afterwards, as the reference
    /// does.
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
        let shape = (out_features, in_features);
        match fetch_matrix(&vb, "weight", shape, Init::Const(0.))? {
            ServedMatrix::Int8(matrix) => Self::over_int8(matrix, bias, vb),
            ServedMatrix::Bf16(matrix) => Self::over_bf16(matrix, bias, vb),
            ServedMatrix::Float(weight) => Self::from_weight(weight, bias, vb),
        }
    }

    /// A layer over the int8 `matrix` (its own, or a table it shares) and, with `bias`, its
    /// own bias.
    pub fn over_int8(matrix: Arc<QuantizedMatrix>, bias: bool, vb: VarBuilder) -> Result<Self> {
        let bias = own_bias(bias, matrix.out_features(), &vb)?;
        let weight = Weight::int8_of(matrix, bias.as_ref())?;
        Ok(Self { weight, bias })
    }

    /// A layer over the packed bf16 `matrix` (its own, or a table it shares) and, with
    /// `bias`, its own bias.
    pub fn over_bf16(matrix: Arc<PackedWeight>, bias: bool, vb: VarBuilder) -> Result<Self> {
        let bias = own_bias(bias, matrix.out_features(), &vb)?;
        let weight = Weight::bf16_of(matrix, bias.as_ref())?;
        Ok(Self { weight, bias })
    }

    /// A layer over an existing `weight` `(out, in)` (shared with another module) and, with
    /// `bias`, its own bias.
    pub fn from_weight(weight: Tensor, bias: bool, vb: VarBuilder) -> Result<Self> {
        let bias = own_bias(bias, weight.dim(0)?, &vb)?;
        Ok(Self {
            weight: Weight::new(weight),
            bias,
        })
    }

    /// A layer over an embedding table it shares (`share_embeddings`), in the table's form,
    /// and, with `bias`, its own bias.
    pub fn over_table(table: &Table, bias: bool, vb: VarBuilder) -> Result<Self> {
        match table.matrix() {
            ServedMatrix::Float(matrix) => Self::from_weight(matrix.clone(), bias, vb),
            ServedMatrix::Int8(matrix) => Self::over_int8(matrix.clone(), bias, vb),
            ServedMatrix::Bf16(matrix) => Self::over_bf16(matrix.clone(), bias, vb),
        }
    }

    /// `layers` of one input size as one layer whose outputs lie side by side in that order
    /// (their weights and biases concatenated): one product instead of several.
    fn concatenated(layers: &[Linear]) -> Result<Self> {
        let biases: Option<Vec<&Tensor>> = layers.iter().map(|l| l.bias.as_ref()).collect();
        let bias = biases.map(|b| Tensor::cat(&b, 0)).transpose()?;
        if let Some(parts) = all_in_form(layers, |w| match w {
            Weight::Int8 { matrix, .. } => Some(&**matrix),
            _ => None,
        }) {
            let joined = Arc::new(QuantizedMatrix::concatenated(&parts));
            let weight = Weight::int8_of(joined, bias.as_ref())?;
            return Ok(Self { weight, bias });
        }
        if let Some(parts) = all_in_form(layers, |w| match w {
            Weight::Bf16 { matrix, .. } => Some(&**matrix),
            _ => None,
        }) {
            let joined = Arc::new(PackedWeight::concatenated(&parts));
            let weight = Weight::bf16_of(joined, bias.as_ref())?;
            return Ok(Self { weight, bias });
        }
        let weights = all_in_form(layers, Weight::matrix);
        let Some(weights) = weights else {
            candle_core::bail!("linear: cannot join layers of different forms")
        };
        Ok(Self {
            weight: Weight::new(Tensor::cat(&weights, 0)?),
            bias,
        })
    }

    /// A layer computing only the outputs `ids`, in that order, in this layer's form: a
    /// Generator restricted to a vocabulary map's candidates.
    pub fn outputs(&self, ids: &[u32]) -> Result<Self> {
        let out = self.weight.out_features()?;
        let not_an_output = || {
            let bad = ids.iter().find(|&&id| id as usize >= out).copied();
            candle_core::Error::Msg(format!(
                "linear: output {bad:?} asked of a layer of {out} outputs"
            ))
        };
        let device = match (self.weight.matrix(), &self.bias) {
            (Some(matrix), _) => matrix.device().clone(),
            (None, Some(bias)) => bias.device().clone(),
            (None, None) => candle_core::Device::Cpu,
        };
        let index = Tensor::new(ids, &device)?;
        let bias = self
            .bias
            .as_ref()
            .map(|b| b.index_select(&index, 0))
            .transpose()?;
        let weight = match &self.weight {
            Weight::Trained(matrix) | Weight::Fixed { matrix, .. } => {
                Weight::new(matrix.index_select(&index, 0)?)
            }
            Weight::Int8 { matrix, .. } => {
                let rows = matrix.selected_rows(ids).ok_or_else(not_an_output)?;
                Weight::int8_of(Arc::new(rows), bias.as_ref())?
            }
            Weight::Bf16 { matrix, .. } => {
                let rows = matrix.selected_rows(ids).ok_or_else(not_an_output)?;
                Weight::bf16_of(Arc::new(rows), bias.as_ref())?
            }
        };
        Ok(Self { weight, bias })
    }

    /// Whether the weights are being trained, so may change after any step.
    fn is_trained(&self) -> bool {
        matches!(self.weight, Weight::Trained(_))
            || self.bias.as_ref().is_some_and(Tensor::track_op)
    }

    /// `(..., in)` -> `(..., out)`.
    pub fn forward(&self, xs: &Tensor) -> Result<Tensor> {
        let mut dims = xs.dims().to_vec();
        let in_features = xs.dim(D::Minus1)?;
        let rows = xs.elem_count() / in_features.max(1);
        if let Some(last) = dims.last_mut() {
            *last = self.weight.out_features()?;
        }
        let xs = xs.reshape((rows, in_features))?;
        let bias = self.bias.as_ref();
        let ys = match &self.weight {
            Weight::Trained(matrix) => kernels::linear::linear(&xs, matrix, bias)?,
            Weight::Fixed { matrix, forms } => {
                kernels::linear::linear_fixed(&xs, matrix, forms, bias)?
            }
            Weight::Int8 { matrix, bias } => {
                kernels::linear::linear_int8(&xs, matrix, bias.as_deref())?
            }
            Weight::Bf16 { matrix, bias } => {
                kernels::linear::linear_bf16(&xs, matrix, bias.as_deref())?
            }
        };
        ys.reshape(dims)
    }
}

/// Linear layers that read the same input (attention's query, key, value and output
/// projections), and the joins of consecutive ones as one product: made once for fixed
/// weights, afresh for weights in training (which change after every step).
pub struct LinearGroup {
    layers: Vec<Linear>,
    /// The join of `layers[a..b]` at [`Self::slot`]`(a, b)`.
    joins: Vec<OnceLock<Linear>>,
}

impl LinearGroup {
    pub fn new(layers: Vec<Linear>) -> Self {
        let n = layers.len();
        Self {
            layers,
            joins: (0..n * n).map(|_| OnceLock::new()).collect(),
        }
    }

    /// Layer `i`.
    pub fn layer(&self, i: usize) -> &Linear {
        &self.layers[i]
    }

    /// The layers `parts` as one, their outputs side by side in order.
    pub fn joined(&self, parts: Range<usize>) -> Result<Cow<'_, Linear>> {
        let layers = &self.layers[parts.clone()];
        if layers.iter().any(Linear::is_trained) {
            return Ok(Cow::Owned(Linear::concatenated(layers)?));
        }
        let slot = &self.joins[parts.start * self.layers.len() + parts.end - 1];
        if let Some(joined) = slot.get() {
            return Ok(Cow::Borrowed(joined));
        }
        let joined = Linear::concatenated(layers)?;
        Ok(Cow::Borrowed(slot.get_or_init(|| joined)))
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
