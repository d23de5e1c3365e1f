//! A linear layer's product, `y = x W^T + b`: on the CPU in f32 one fused node with its own
//! backward pass ([`super::linear_fused`]), elsewhere composed from candle ops.
//!
//! Why not candle_nn::Linear on the composed path: its bias is added with `broadcast_add`,
//! whose backward pass sums the gradient over every leading dimension with candle's CPU
//! reduction, about 20x slower than a matrix-vector product. Broadcasting the bias with a
//! product by a column of ones makes that sum a matrix product in the backward pass.

use std::sync::OnceLock;

use candle_core::{CpuStorage, CustomOp1, DType, Layout, Result, Shape, Tensor};

use super::bf16::PackedWeight;
use super::int8::QuantizedMatrix;
use super::packed_f32::PackedF32;
use super::{fused_runs, linear_fused};

/// `xs` `(rows, in)`, `weight` `(out, in)`, `bias` `(out,)` -> `(rows, out)`, for a weight
/// in training (its gradient flows back).
pub fn linear(xs: &Tensor, weight: &Tensor, bias: Option<&Tensor>) -> Result<Tensor> {
    if fused_runs(&operands(xs, weight, bias)) {
        return linear_fused::linear(xs, weight, bias);
    }
    // A bf16 autocast scope holds on the composed path too, for a weight being trained.
    if weight.track_op() && xs.dtype() == DType::F32 {
        let round = super::bf16::rounded_in_scope;
        return composed(&round(xs)?, &round(weight)?, bias);
    }
    composed(xs, weight, bias)
}

/// As [`linear`], for a fixed `weight` (no gradient: a loaded checkpoint, or validation's
/// detached view). `transposed` is the weight's room for a contiguous `W^T`, which the fused
/// path makes the first time a product of more than one row asks: gemm multiplies a few rows
/// much faster with it than with `W` read transposed. A weight only ever multiplied one row
/// at a time (a decoder's, translating one sentence) never gets the copy.
pub fn linear_fixed(
    xs: &Tensor,
    weight: &Tensor,
    forms: &FixedForms,
    bias: Option<&Tensor>,
) -> Result<Tensor> {
    if !fused_runs(&operands(xs, weight, bias)) {
        return composed(xs, weight, bias);
    }
    // One row (a decoding step of one sentence) reads W in place, each output a dot product
    // over a contiguous row: the weight streams through once, in order, at the memory's
    // speed. Through W^T the same product reads a short segment of every row per output
    // block, and ran at half the speed on AMD (2.1 s against 4.4 s for OPUS-MT's shape,
    // `bench marian-greedy1`). More rows are gemm's, which wants W^T.
    if weight.track_op() || xs.dim(0)? == 1 {
        return linear_fused::linear(xs, weight, bias);
    }
    // With AVX2 + FMA or AVX-512, W packed once into panels for our kernel; elsewhere gemm
    // over W^T.
    // (A bias being trained is read afresh each time: gemm's path.)
    if PackedF32::runs_here() && !bias.is_some_and(Tensor::track_op) {
        let (matrix, bias) = forms.packed(weight, bias)?;
        let op = RowsProduct {
            name: "linear-packed",
            sizes: (matrix.in_features(), matrix.out_features()),
            product: |x: &[f32], rows| {
                (matrix.product(x, rows, bias)).map_err(candle_core::Error::Msg)
            },
        };
        return xs.contiguous()?.apply_op1_no_bwd(&op);
    }
    linear_fused::linear_transposed(xs, forms.transposed(weight)?, bias)
}

/// The forms a fixed weight's products of several rows read, made the first time one asks:
/// `W` packed into panels for our kernel where the CPU has AVX2 + FMA (with the bias's values),
/// else a contiguous `W^T` for gemm.
#[derive(Default)]
pub struct FixedForms {
    transposed: OnceLock<Tensor>,
    packed: OnceLock<(PackedF32, Option<Vec<f32>>)>,
}

impl FixedForms {
    /// `weight` packed (from its storage in place: no copy of a large table) and `bias`'s
    /// values, made on the first call.
    fn packed(
        &self,
        weight: &Tensor,
        bias: Option<&Tensor>,
    ) -> Result<(&PackedF32, Option<&[f32]>)> {
        if let Some((matrix, bias)) = self.packed.get() {
            return Ok((matrix, bias.as_deref()));
        }
        let (out, inp) = weight.dims2()?;
        let weight = weight.contiguous()?;
        let (storage, layout) = weight.storage_and_layout();
        let candle_core::Storage::Cpu(cpu) = &*storage else {
            candle_core::bail!("linear: a weight to pack lives on the CPU")
        };
        let matrix = PackedF32::new(super::contiguous_input(cpu, layout, "linear")?, out, inp)
            .ok_or_else(|| candle_core::Error::Msg("linear: no packed kernel runs here".into()))?;
        let bias = bias.map(Tensor::to_vec1::<f32>).transpose()?;
        let (matrix, bias) = self.packed.get_or_init(|| (matrix, bias));
        Ok((matrix, bias.as_deref()))
    }

    /// `weight`'s contiguous transpose, made on the first call.
    fn transposed(&self, weight: &Tensor) -> Result<&Tensor> {
        if let Some(weight_t) = self.transposed.get() {
            return Ok(weight_t);
        }
        let weight_t = super::transpose::transposed(weight)?;
        Ok(self.transposed.get_or_init(|| weight_t))
    }
}

/// `xs W^T + b` for an int8 `W` (see [`super::int8`]): CPU only, no gradient.
pub fn linear_int8(xs: &Tensor, matrix: &QuantizedMatrix, bias: Option<&[f32]>) -> Result<Tensor> {
    let op = RowsProduct {
        name: "linear-int8",
        sizes: (matrix.in_features(), matrix.out_features()),
        product: |x: &[f32], rows| Ok(matrix.product(x, rows, bias)),
    };
    xs.contiguous()?.apply_op1_no_bwd(&op)
}

/// `x W^T + b` for `x` `(rows, in)` with the bf16 weight packed for the CPU's bf16 engine
/// (bfloat16 decoding); `x` is rounded to bf16 as it is packed, the sums and `b` are f32.
pub fn linear_bf16(xs: &Tensor, matrix: &PackedWeight, bias: Option<&[f32]>) -> Result<Tensor> {
    let op = RowsProduct {
        name: "linear-bf16",
        sizes: (matrix.in_features(), matrix.out_features()),
        product: |x: &[f32], rows| {
            let x = super::bf16::pack::Strided {
                data: x,
                rows,
                cols: matrix.in_features(),
                row_stride: matrix.in_features(),
                col_stride: 1,
            };
            let engine = super::bf16::engine();
            matrix
                .product(x, bias, engine)
                .map_err(candle_core::Error::Msg)
        },
    };
    xs.contiguous()?.apply_op1_no_bwd(&op)
}

/// A product of the rows of a contiguous f32 input `(rows, inp)` with a weight of `sizes`
/// `(inp, out)` in one of the forms decoding keeps (packed f32, int8, bf16), as a candle op
/// without gradient.
struct RowsProduct<F> {
    name: &'static str,
    sizes: (usize, usize),
    product: F,
}

impl<F: Fn(&[f32], usize) -> Result<Vec<f32>> + Send + Sync> CustomOp1 for RowsProduct<F> {
    fn name(&self) -> &'static str {
        self.name
    }

    fn cpu_fwd(&self, storage: &CpuStorage, layout: &Layout) -> Result<(CpuStorage, Shape)> {
        let (rows, in_features) = layout.shape().dims2()?;
        let (inp, out) = self.sizes;
        if in_features != inp {
            candle_core::bail!(
                "{}: input {:?} does not fit a weight of {inp} inputs",
                self.name,
                layout.shape()
            )
        }
        let x = super::contiguous_input(storage, layout, self.name)?;
        let y = (self.product)(x, rows)?;
        Ok((CpuStorage::F32(y), Shape::from((rows, out))))
    }
}

fn operands<'a>(xs: &'a Tensor, weight: &'a Tensor, bias: Option<&'a Tensor>) -> Vec<&'a Tensor> {
    [Some(xs), Some(weight), bias]
        .into_iter()
        .flatten()
        .collect()
}

/// The product from candle's ops, as a GPU runs it.
fn composed(xs: &Tensor, weight: &Tensor, bias: Option<&Tensor>) -> Result<Tensor> {
    if weight.dtype() != xs.dtype() && !weight.track_op() {
        // A bf16 weight on a GPU (bfloat16 decoding): the product in its dtype, the rest f32.
        let ys = xs.to_dtype(weight.dtype())?.matmul(&weight.t()?)?;
        return composed_bias(ys.to_dtype(xs.dtype())?, bias, xs.dim(0)?);
    }
    let ys = xs.matmul(&weight.t()?)?;
    composed_bias(ys, bias, xs.dim(0)?)
}

fn composed_bias(ys: Tensor, bias: Option<&Tensor>, rows: usize) -> Result<Tensor> {
    match bias {
        None => Ok(ys),
        // The ones-product only pays off in the backward pass; without gradients (decoding a
        // loaded checkpoint) the plain broadcast is one op instead of three.
        Some(bias) if ys.track_op() || bias.track_op() => ys + broadcast_rows(bias, rows)?,
        Some(bias) => ys.broadcast_add(bias),
    }
}

/// `vector` `(n,)` repeated as `rows` rows `(rows, n)`, as a product with a column of ones so
/// that its gradient is a matrix-vector product rather than a slow reduction.
pub fn broadcast_rows(vector: &Tensor, rows: usize) -> Result<Tensor> {
    let n = vector.dim(0)?;
    let ones = Tensor::ones((rows, 1), vector.dtype(), vector.device())?;
    ones.matmul(&vector.reshape((1, n))?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::test_support::{
        assert_fused_matches_composed, largest_difference, weighted_gradients,
    };
    use candle_core::{Device, Var};

    /// Values and all three gradients, for few rows (the few-row kernels) and many (gemm),
    /// with a transposed (strided) input as attention's reshapes produce.
    #[test]
    fn in_a_bf16_scope_a_trained_layer_matches_f32_within_bf16_rounding_forward_and_backward() {
        use crate::kernels::bf16::{autocast, engine, Engine};
        let dev = Device::Cpu;
        for scope in [engine(), Engine::Emulated] {
            let _bf16 = autocast(scope);
            for rows in [1, 7, 130] {
                let x =
                    Var::from_tensor(&Tensor::randn(0f32, 1., (rows, 67), &dev).unwrap()).unwrap();
                let w =
                    Var::from_tensor(&Tensor::randn(0f32, 1., (70, 67), &dev).unwrap()).unwrap();
                let b = Var::from_tensor(&Tensor::randn(0f32, 1., 70, &dev).unwrap()).unwrap();
                // bf16 keeps 8 bits: each product is off by about 2^-8 of itself. (The
                // composed side rounds its operands in the scope too; the fused one against
                // f32 is `bf16::tests`' rounded-product check.)
                assert_fused_matches_composed(&[&x, &w, &b], 2e-2, || {
                    linear(x.as_tensor(), w.as_tensor(), Some(b.as_tensor())).unwrap()
                });
            }
        }
    }

    #[test]
    fn the_composed_path_rounds_in_a_bf16_scope_too() {
        let dev = Device::Cpu;
        let x = Tensor::new(&[[1.0f32 + 1.0 / 1024.0]], &dev).unwrap();
        let w = Var::from_tensor(&Tensor::new(&[[1.0f32]], &dev).unwrap()).unwrap();
        let _composed = crate::kernels::composed_only();
        let _bf16 = crate::kernels::bf16::autocast(crate::kernels::bf16::engine());
        let rounded = linear(&x, w.as_tensor(), None).unwrap();
        assert_eq!(rounded.to_vec2::<f32>().unwrap()[0][0], 1.0);
    }

    #[test]
    fn outside_a_bf16_scope_nothing_is_rounded() {
        let dev = Device::Cpu;
        let x = Tensor::new(&[[1.0f32 + 1.0 / 1024.0]], &dev).unwrap();
        let w = Var::from_tensor(&Tensor::new(&[[1.0f32]], &dev).unwrap()).unwrap();
        let y = linear(&x, w.as_tensor(), None).unwrap();
        assert_eq!(y.to_vec2::<f32>().unwrap()[0][0], 1.0 + 1.0 / 1024.0);
        let _bf16 = crate::kernels::bf16::autocast(crate::kernels::bf16::engine());
        let rounded = linear(&x, w.as_tensor(), None).unwrap();
        assert_eq!(rounded.to_vec2::<f32>().unwrap()[0][0], 1.0);
    }

    #[test]
    fn the_fused_linear_matches_the_composed_one_forward_and_backward() {
        let dev = Device::Cpu;
        for rows in [1, 5, 40] {
            let x_t =
                Var::from_tensor(&Tensor::randn(0f32, 1., (37, rows), &dev).unwrap()).unwrap();
            let w = Var::from_tensor(&Tensor::randn(0f32, 1., (19, 37), &dev).unwrap()).unwrap();
            let b = Var::from_tensor(&Tensor::randn(0f32, 1., 19, &dev).unwrap()).unwrap();
            let xs = x_t.as_tensor().t().unwrap();
            assert!(rows == 1 || !xs.is_contiguous());
            assert_fused_matches_composed(&[&x_t, &w, &b], 1e-5, || {
                linear(&xs, w.as_tensor(), Some(b.as_tensor())).unwrap()
            });
            assert_fused_matches_composed(&[&x_t, &w], 1e-5, || {
                linear(&xs, w.as_tensor(), None).unwrap()
            });
            let contiguous =
                Var::from_tensor(&Tensor::randn(0f32, 1., (rows, 37), &dev).unwrap()).unwrap();
            assert_fused_matches_composed(&[&contiguous, &w, &b], 1e-5, || {
                linear(contiguous.as_tensor(), w.as_tensor(), Some(b.as_tensor())).unwrap()
            });
        }
    }

    /// The transposed form's gradients (a fixed weight's W^T tracked as a variable, as no
    /// model does, but the op supports it) against the same product composed.
    #[test]
    fn the_transposed_form_has_the_gradients_of_its_product() {
        let dev = Device::Cpu;
        for rows in [3, 40] {
            let xs = Var::from_tensor(&Tensor::randn(0f32, 1., (rows, 37), &dev).unwrap()).unwrap();
            let wt = Var::from_tensor(&Tensor::randn(0f32, 1., (37, 19), &dev).unwrap()).unwrap();
            let b = Var::from_tensor(&Tensor::randn(0f32, 1., 19, &dev).unwrap()).unwrap();
            let fused = linear_fused::linear_transposed(
                xs.as_tensor(),
                wt.as_tensor(),
                Some(b.as_tensor()),
            )
            .unwrap();
            let composed = xs
                .as_tensor()
                .matmul(wt.as_tensor())
                .unwrap()
                .broadcast_add(b.as_tensor())
                .unwrap();
            assert!(largest_difference(&fused, &composed) < 1e-4);
            let upstream = Tensor::randn(0f32, 1., fused.shape(), &dev).unwrap();
            let (a, c) = (
                weighted_gradients(&fused, &upstream),
                weighted_gradients(&composed, &upstream),
            );
            for var in [&xs, &wt, &b] {
                let (got, want) = (
                    a.get(var.as_tensor()).unwrap(),
                    c.get(var.as_tensor()).unwrap(),
                );
                assert!(largest_difference(got, want) < 1e-4, "{rows} rows");
            }
        }
    }

    #[test]
    fn a_fixed_weight_is_prepared_once_and_gives_the_same_product() {
        let dev = Device::Cpu;
        let xs = Tensor::randn(0f32, 1., (4, 6), &dev).unwrap();
        let w = Tensor::randn(0f32, 1., (5, 6), &dev).unwrap();
        let b = Tensor::randn(0f32, 1., 5, &dev).unwrap();
        let forms = FixedForms::default();
        let plain = xs
            .matmul(&w.t().unwrap())
            .unwrap()
            .broadcast_add(&b)
            .unwrap();
        for _ in 0..2 {
            let fused = linear_fixed(&xs, &w, &forms, Some(&b)).unwrap();
            assert!(largest_difference(&fused, &plain) < 1e-5);
        }
        // The one form this CPU's products of several rows read was made, and only it.
        if PackedF32::runs_here() {
            assert!(forms.packed.get().is_some() && forms.transposed.get().is_none());
        } else {
            assert_eq!(forms.transposed.get().unwrap().dims(), &[6, 5]);
            assert!(forms.packed.get().is_none());
        }
        // One row reads W in place: nothing more is made.
        let fresh = FixedForms::default();
        linear_fixed(&xs.narrow(0, 0, 1).unwrap(), &w, &fresh, Some(&b)).unwrap();
        assert!(fresh.packed.get().is_none() && fresh.transposed.get().is_none());
    }
}
