//! `x W^T + b` as one graph node on the CPU, with its own backward pass.
//!
//! Composed from candle ops, a linear layer is four nodes (transpose, matmul, bias broadcast,
//! add), and the backward pass pays for each: the weight's gradient arrives transposed and is
//! copied back by one thread, and every node's gradient is accumulated into a fresh tensor.
//! Here the forward pass is one gemm call that reads `W` in place as `W^T` and starts from the
//! bias rows, and the backward pass is three products that produce each gradient in its final
//! layout: `dx = g W`, `dW = g^T x`, `db = 1^T g`. Layers without a bias use the two-operand
//! form of the same op.
//!
//! Inside a bf16 [`autocast`](super::bf16::autocast) scope, a layer whose weight is being
//! trained takes its three products from [`super::bf16::gemm`] instead: bf16 inputs, f32
//! sums, as PyTorch's autocast computes them. The scope is read when the node is made, so the
//! backward pass multiplies as the forward did wherever it runs.

use candle_core::{CpuStorage, CustomOp2, CustomOp3, Layout, Result, Shape, Storage, Tensor};

mod products;

use super::bf16::{self, Engine};
use super::few_rows::{self, Rows};
use super::{contiguous_f32, contiguous_input};
use products::{bf16_into, bf16_product, bias_rows, gemm_into, gemm_parallelism, Strided};

/// The op behind [`linear`] and [`linear_transposed`].
struct LinearOp {
    /// The second operand is `W^T` `(in, out)` rather than `W` `(out, in)`.
    transposed: bool,
    /// Products in bf16 on this engine (a trained weight inside an autocast scope).
    bf16: Option<Engine>,
}

/// `xs` `(rows, in)`, `weight` `(out, in)`, `bias` `(out,)` -> `(rows, out)`, as one node.
/// CPU and f32 only: [`super::linear::linear`] decides.
pub fn linear(xs: &Tensor, weight: &Tensor, bias: Option<&Tensor>) -> Result<Tensor> {
    let op = LinearOp {
        transposed: false,
        bf16: bf16::active().filter(|_| weight.track_op()),
    };
    match bias {
        Some(bias) => xs.apply_op3(weight, bias, op),
        None => xs.apply_op2(weight, op),
    }
}

/// As [`linear`], from `weight_t` = `W^T` `(in, out)`: for fixed weights, transposed once.
pub fn linear_transposed(xs: &Tensor, weight_t: &Tensor, bias: Option<&Tensor>) -> Result<Tensor> {
    let op = LinearOp {
        transposed: true,
        bf16: None,
    };
    match bias {
        Some(bias) => xs.apply_op3(weight_t, bias, op),
        None => xs.apply_op2(weight_t, op),
    }
}

impl LinearOp {
    /// `x W^T (+ b)`: one gemm call, into the bias rows when there is a bias.
    fn forward(
        &self,
        x: (&CpuStorage, &Layout),
        w: (&CpuStorage, &Layout),
        bias: Option<&[f32]>,
    ) -> Result<(CpuStorage, Shape)> {
        let (rows, in_features, out_features) = self.sizes(x.1, w.1, bias)?;
        let sizes = (rows, in_features, out_features);
        let dst = match self.bf16 {
            Some(engine) => bf16_product(x, w, bias, sizes, engine)?,
            None => match self.few_rows_product(x, w, bias, (rows, in_features))? {
                Some(dst) => dst,
                None => self.gemm_product(x, w, bias, sizes)?,
            },
        };
        Ok((CpuStorage::F32(dst), Shape::from((rows, out_features))))
    }

    /// `(rows, in_features, out_features)`: `x` is `(rows, in)`, `W` `(out, in)` (`W^T`
    /// `(in, out)` when transposed), the bias `(out,)`; an error naming the shapes when they
    /// do not fit.
    fn sizes(
        &self,
        x_layout: &Layout,
        w_layout: &Layout,
        bias: Option<&[f32]>,
    ) -> Result<(usize, usize, usize)> {
        let (rows, in_features) = x_layout.shape().dims2()?;
        let (out_features, w_in) = if self.transposed {
            let (w_in, out) = w_layout.shape().dims2()?;
            (out, w_in)
        } else {
            w_layout.shape().dims2()?
        };
        if w_in != in_features || bias.is_some_and(|b| b.len() != out_features) {
            candle_core::bail!(
                "linear: input {:?} and weight {:?} (and bias of {:?}) do not fit",
                x_layout.shape(),
                w_layout.shape(),
                bias.map(<[f32]>::len)
            )
        }
        Ok((rows, in_features, out_features))
    }

    /// The product by `few_rows`' kernels, for few rows of contiguous f32 operands; `None`
    /// leaves it to gemm.
    fn few_rows_product(
        &self,
        (x_storage, x_layout): (&CpuStorage, &Layout),
        (w_storage, w_layout): (&CpuStorage, &Layout),
        bias: Option<&[f32]>,
        (rows, in_features): (usize, usize),
    ) -> Result<Option<Vec<f32>>> {
        let few = if self.transposed {
            few_rows::MAX_ROWS_TRANSPOSED
        } else {
            few_rows::MAX_ROWS
        };
        if rows > few {
            return Ok(None);
        }
        let (Some(x), Some(w)) = (
            contiguous_f32(x_storage, x_layout)?,
            contiguous_f32(w_storage, w_layout)?,
        ) else {
            return Ok(None);
        };
        let x = Rows {
            data: x,
            rows,
            cols: in_features,
        };
        Ok(Some(if self.transposed {
            few_rows::x_times_wt(x, w, bias)
        } else {
            few_rows::x_times_w_t(x, w, bias)
        }))
    }

    /// The product by one gemm call that adds `x W^T` to the bias rows (or zeros), reading
    /// both operands in place through their strides.
    fn gemm_product(
        &self,
        (x_storage, x_layout): (&CpuStorage, &Layout),
        (w_storage, w_layout): (&CpuStorage, &Layout),
        bias: Option<&[f32]>,
        (rows, in_features, out_features): (usize, usize, usize),
    ) -> Result<Vec<f32>> {
        let dst_len = rows * out_features;
        let mut dst = bias_rows(rows, dst_len, bias);
        let x = Strided::of(x_storage, x_layout)?;
        let w = Strided::of(w_storage, w_layout)?;
        // The right operand W^T (in, out): W read in place, W^T's columns being W's rows.
        // Copying W into W^T layout first would make few-row products much faster (gemm's
        // AVX-512 kernels: 9 against 49 GFLOP/s on 5 x 512 x 512), but measured on whole
        // training steps the copy of every weight at every step cost more than it saved;
        // fixed weights come pre-transposed instead.
        let rhs = if self.transposed { w } else { w.transposed() };
        let parallelism = gemm_parallelism();
        if dst_len > 0 && in_features > 0 {
            // SAFETY: every pointer and stride comes from a layout of its own storage, and
            // `dst` is `rows x out_features` row-major. dst = 1 * dst + 1 * x W^T.
            unsafe {
                gemm::gemm(
                    rows,
                    out_features,
                    in_features,
                    dst.as_mut_ptr(),
                    1,
                    out_features as isize,
                    true,
                    x.data.as_ptr(),
                    x.col as isize,
                    x.row as isize,
                    rhs.data.as_ptr(),
                    rhs.col as isize,
                    rhs.row as isize,
                    1.0,
                    1.0,
                    false,
                    false,
                    false,
                    parallelism,
                )
            }
        }
        Ok(dst)
    }

    /// `dx = g W`, `dW = g^T x` (or `d(W^T) = x^T g` for the transposed form) and, with a
    /// bias, `db = 1^T g`: each written once, in its final layout, with no zero fill first
    /// (candle's matmul zeroes its output before gemm overwrites it). gemm even for few rows:
    /// few-row kernels written like the forward ones lost to it here (the toy pairs, 12 rows).
    fn gradients(
        &self,
        xs: &Tensor,
        weight: &Tensor,
        grad: &Tensor,
        with_bias: bool,
    ) -> Result<(Tensor, Tensor, Option<Tensor>)> {
        let grad = grad.contiguous()?;
        let (rows, in_features) = xs.dims2()?;
        let out_features = grad.dim(1)?;
        let (x_storage, x_layout) = xs.storage_and_layout();
        let (w_storage, w_layout) = weight.storage_and_layout();
        let (g_storage, g_layout) = grad.storage_and_layout();
        let (Storage::Cpu(x_storage), Storage::Cpu(w_storage), Storage::Cpu(g_storage)) =
            (&*x_storage, &*w_storage, &*g_storage)
        else {
            candle_core::bail!("linear: the fused backward pass runs on the CPU only")
        };
        let g = contiguous_input(g_storage, g_layout, "linear gradient")?;
        let x = Strided::of(x_storage, x_layout)?;
        let w = Strided::of(w_storage, w_layout)?;
        let g = Strided {
            data: g,
            row: out_features,
            col: 1,
        };
        // W as the (out, in) matrix R of dx = g R, read in place in either layout.
        let r = if self.transposed { w.transposed() } else { w };
        let (dx, dw) = match self.bf16 {
            Some(engine) => (
                bf16_into((rows, in_features, out_features), g, r, engine)?,
                bf16_into((out_features, in_features, rows), g.transposed(), x, engine)?,
            ),
            None => (
                gemm_into((rows, in_features, out_features), g, r),
                if self.transposed {
                    gemm_into((in_features, out_features, rows), x.transposed(), g)
                } else {
                    gemm_into((out_features, in_features, rows), g.transposed(), x)
                },
            ),
        };
        let db = with_bias.then(|| {
            let ones = vec![1f32; rows];
            let ones = Rows {
                data: &ones,
                rows: 1,
                cols: rows,
            };
            few_rows::x_times_wt(ones, g.data, None)
        });
        let device = xs.device();
        Ok((
            Tensor::from_vec(dx, (rows, in_features), device)?,
            Tensor::from_vec(dw, weight.shape(), device)?,
            db.map(|db| Tensor::from_vec(db, out_features, device))
                .transpose()?,
        ))
    }
}

impl CustomOp3 for LinearOp {
    fn name(&self) -> &'static str {
        "linear"
    }

    fn cpu_fwd(
        &self,
        x_storage: &CpuStorage,
        x_layout: &Layout,
        w_storage: &CpuStorage,
        w_layout: &Layout,
        b_storage: &CpuStorage,
        b_layout: &Layout,
    ) -> Result<(CpuStorage, Shape)> {
        let bias = contiguous_input(b_storage, b_layout, "linear bias")?;
        self.forward((x_storage, x_layout), (w_storage, w_layout), Some(bias))
    }

    fn bwd(
        &self,
        xs: &Tensor,
        weight: &Tensor,
        _bias: &Tensor,
        _res: &Tensor,
        grad: &Tensor,
    ) -> Result<(Option<Tensor>, Option<Tensor>, Option<Tensor>)> {
        let (grad_xs, grad_weight, grad_bias) = self.gradients(xs, weight, grad, true)?;
        Ok((Some(grad_xs), Some(grad_weight), grad_bias))
    }
}

impl CustomOp2 for LinearOp {
    fn name(&self) -> &'static str {
        "linear-no-bias"
    }

    fn cpu_fwd(
        &self,
        x_storage: &CpuStorage,
        x_layout: &Layout,
        w_storage: &CpuStorage,
        w_layout: &Layout,
    ) -> Result<(CpuStorage, Shape)> {
        self.forward((x_storage, x_layout), (w_storage, w_layout), None)
    }

    fn bwd(
        &self,
        xs: &Tensor,
        weight: &Tensor,
        _res: &Tensor,
        grad: &Tensor,
    ) -> Result<(Option<Tensor>, Option<Tensor>)> {
        let (grad_xs, grad_weight, _) = self.gradients(xs, weight, grad, false)?;
        Ok((Some(grad_xs), Some(grad_weight)))
    }
}
