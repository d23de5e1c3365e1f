//! Scaled dot-product attention for training on the CPU as one graph node with its own
//! backward pass (paper section 3.2.1).
//!
//! Composed from candle ops, attention is a dozen nodes (product, scale, mask fill, the
//! softmax's five, dropout, product), each a pass over `(batch, heads, q_len, k_len)` that
//! allocates its output, and candle runs each batched product as one small gemm call per
//! (batch, head) pair, each with its own thread dispatch. Here every (batch, head) pair is one
//! task of a single parallel loop: scores, scale, mask (-1e9, as the reference), softmax,
//! dropout and the product with V stay in that task's cache-sized scratch. The backward pass
//! recomputes the probabilities from Q and K (cheaper than keeping them) and produces dQ, dK
//! and dV in the same way:
//!
//! ```text
//! P = softmax(S),  S = scale * Q K^T (masked),  Pd = P * D (dropout),  O = Pd V
//! dV = Pd^T dO,  dP = (dO V^T) * D,  dS = P * (dP - rowsum(dP * P)) (0 where masked)
//! dQ = scale * dS K,  dK = scale * dS^T Q
//! ```
//!
//! Inside a bf16 [`autocast`](crate::kernels::bf16::autocast) scope the five products take
//! bf16 inputs and sum in f32 ([`crate::kernels::bf16::gemm`]), as PyTorch's autocast runs
//! `bmm`; the mask, softmax and dropout stay f32.

use candle_core::{CpuStorage, CustomOp3, Layout, Result, Shape, Tensor};
use std::sync::Arc;

use rayon::prelude::*;

use crate::kernels::bf16::{self, Engine};
use crate::kernels::contiguous_input;
use backward::AttentionGradOp;

mod backward;

/// What the fused op needs besides Q, K and V; shared by its forward and backward nodes.
#[derive(Clone)]
struct Extras {
    scale: f32,
    /// What a masked score becomes before the softmax.
    masked_score: f32,
    /// Whether attention is allowed, per (batch, query, key): `batch * q_len * k_len` bytes,
    /// the same for every head.
    mask: Option<Arc<Vec<u8>>>,
    /// Inverted-dropout factors (0 or 1 / (1 - p)) per (batch, head, query, key).
    dropout: Option<Arc<Vec<f32>>>,
    /// Products in bf16 on this engine (inside an autocast scope when the op was made).
    bf16: Option<Engine>,
}

/// The forward node.
struct AttentionOp(Extras);

/// `softmax(Q K^T / sqrt(d_k), masked) * dropout V` for `query` `(batch, heads, q_len, d_k)`,
/// `key`/`value` `(batch, heads, k_len, d_k)`, f32 on the CPU. `mask` is u8 broadcastable to
/// `(batch, 1, q_len, k_len)` (0: not allowed; those scores become `masked_score`), `dropout`
/// holds one factor per score in row-major order. Returns `(batch, heads, q_len, d_k)`.
pub fn attention(
    query: &Tensor,
    key: &Tensor,
    value: &Tensor,
    (mask, masked_score): (Option<&Tensor>, f32),
    dropout: Option<Vec<f32>>,
) -> Result<Tensor> {
    let (batch, _, q_len, d_k) = query.dims4()?;
    let k_len = key.dim(2)?;
    let mask = mask
        .map(|m| {
            m.broadcast_as((batch, 1, q_len, k_len))?
                .to_dtype(candle_core::DType::U8)?
                .flatten_all()?
                .to_vec1::<u8>()
                .map(Arc::new)
        })
        .transpose()?;
    let extras = Extras {
        scale: 1.0 / (d_k as f32).sqrt(),
        masked_score,
        mask,
        dropout: dropout.map(Arc::new),
        bf16: bf16::active(),
    };
    query.contiguous()?.apply_op3(
        &key.contiguous()?,
        &value.contiguous()?,
        AttentionOp(extras),
    )
}

/// The three inputs' f32 slices from their storages, with their shared dimensions.
struct Inputs<'a> {
    q: &'a [f32],
    k: &'a [f32],
    v: &'a [f32],
    pairs: usize,
    heads: usize,
    q_len: usize,
    k_len: usize,
    d_k: usize,
}

impl<'a> Inputs<'a> {
    fn new(
        (qs, ql): (&'a CpuStorage, &Layout),
        (ks, kl): (&'a CpuStorage, &Layout),
        (vs, vl): (&'a CpuStorage, &Layout),
    ) -> Result<Self> {
        let (batch, heads, q_len, d_k) = ql.shape().dims4()?;
        let (kb, kh, k_len, kd) = kl.shape().dims4()?;
        if (kb, kh, kd) != (batch, heads, d_k) || vl.shape() != kl.shape() {
            candle_core::bail!(
                "attention: query {:?}, key {:?} and value {:?} do not fit",
                ql.shape(),
                kl.shape(),
                vl.shape()
            )
        }
        let slice = |s: &'a CpuStorage, l: &Layout| contiguous_input(s, l, "attention");
        Ok(Self {
            q: slice(qs, ql)?,
            k: slice(ks, kl)?,
            v: slice(vs, vl)?,
            pairs: batch * heads,
            heads,
            q_len,
            k_len,
            d_k,
        })
    }

    /// The rows of (batch, head) pair `pair`: Q `(q_len, d_k)`, K and V `(k_len, d_k)`.
    fn pair(&self, pair: usize) -> (&[f32], &[f32], &[f32]) {
        let (q, kv) = (self.q_len * self.d_k, self.k_len * self.d_k);
        (
            &self.q[pair * q..(pair + 1) * q],
            &self.k[pair * kv..(pair + 1) * kv],
            &self.v[pair * kv..(pair + 1) * kv],
        )
    }
}

/// `dst (m, n) = alpha * lhs (m, k) rhs (k, n)` on one thread (f32), or from bf16 inputs on
/// `bf16`'s engine; operands given by their (column, row) strides, so that transposes are
/// free.
#[allow(clippy::too_many_arguments)]
fn product(
    dst: &mut [f32],
    (m, n, k): (usize, usize, usize),
    lhs: &[f32],
    (lhs_cs, lhs_rs): (usize, usize),
    rhs: &[f32],
    (rhs_cs, rhs_rs): (usize, usize),
    alpha: f32,
    bf16: Option<Engine>,
) {
    debug_assert!(dst.len() >= m * n);
    if m == 0 || n == 0 {
        return;
    }
    if let Some(engine) = bf16 {
        let operand = |data, rows, cols, (col_stride, row_stride)| bf16::Operand {
            data,
            rows,
            cols,
            row_stride,
            col_stride,
        };
        let lhs = operand(lhs, m, k, (lhs_cs, lhs_rs));
        let rhs = operand(rhs, k, n, (rhs_cs, rhs_rs));
        let dst = &mut dst[..m * n];
        bf16::gemm(lhs, rhs, dst, false, engine)
            .expect("attention's operands are the slices of their pair");
        if alpha != 1.0 {
            dst.iter_mut().for_each(|x| *x *= alpha);
        }
        return;
    }
    if k == 0 {
        dst[..m * n].fill(0.0);
        return;
    }
    // SAFETY: the callers pass slices that hold every element the strides address, and `dst`
    // holds `m x n` row-major. dst = 0 * dst + alpha * lhs rhs, read_dst false.
    unsafe {
        gemm::gemm(
            m,
            n,
            k,
            dst.as_mut_ptr(),
            1,
            n as isize,
            false,
            lhs.as_ptr(),
            lhs_cs as isize,
            lhs_rs as isize,
            rhs.as_ptr(),
            rhs_cs as isize,
            rhs_rs as isize,
            0.0,
            alpha,
            false,
            false,
            false,
            gemm::Parallelism::None,
        )
    }
}

impl Extras {
    /// The softmax probabilities `(q_len, k_len)` of pair `pair` into `probs`.
    fn probabilities(&self, inputs: &Inputs, pair: usize, probs: &mut [f32]) {
        let (q_len, k_len, d_k) = (inputs.q_len, inputs.k_len, inputs.d_k);
        let (q, k, _) = inputs.pair(pair);
        // S = scale * Q K^T: K read in place as K^T (column stride d_k, row stride 1).
        product(
            probs,
            (q_len, k_len, d_k),
            q,
            (1, d_k),
            k,
            (d_k, 1),
            self.scale,
            self.bf16,
        );
        let batch = pair / inputs.heads;
        for (i, row) in probs.chunks_exact_mut(k_len).enumerate() {
            if let Some(mask) = &self.mask {
                let allowed = &mask[(batch * q_len + i) * k_len..][..k_len];
                for (score, &ok) in row.iter_mut().zip(allowed) {
                    if ok == 0 {
                        *score = self.masked_score;
                    }
                }
            }
            let max = row.iter().copied().fold(f32::NEG_INFINITY, f32::max);
            let mut sum = 0.0;
            for score in row.iter_mut() {
                *score = (*score - max).exp();
                sum += *score;
            }
            let inverse = 1.0 / sum;
            row.iter_mut().for_each(|p| *p *= inverse);
        }
    }

    /// The dropout factors of pair `pair`, if dropout is on.
    fn dropout_of(&self, pair: usize, scores: usize) -> Option<&[f32]> {
        self.dropout
            .as_deref()
            .map(|d| &d[pair * scores..(pair + 1) * scores])
    }
}

impl CustomOp3 for AttentionOp {
    fn name(&self) -> &'static str {
        "fused-attention"
    }

    fn cpu_fwd(
        &self,
        qs: &CpuStorage,
        ql: &Layout,
        ks: &CpuStorage,
        kl: &Layout,
        vs: &CpuStorage,
        vl: &Layout,
    ) -> Result<(CpuStorage, Shape)> {
        let inputs = Inputs::new((qs, ql), (ks, kl), (vs, vl))?;
        let (q_len, k_len, d_k) = (inputs.q_len, inputs.k_len, inputs.d_k);
        let extras = &self.0;
        let mut out = vec![0f32; inputs.pairs * q_len * d_k];
        // No keys (an empty source): nothing to attend to, zeros.
        if q_len * d_k * k_len > 0 {
            out.par_chunks_mut(q_len * d_k)
                .enumerate()
                .for_each(|(pair, out)| {
                    let mut probs = vec![0f32; q_len * k_len];
                    extras.probabilities(&inputs, pair, &mut probs);
                    if let Some(factors) = extras.dropout_of(pair, q_len * k_len) {
                        probs.iter_mut().zip(factors).for_each(|(p, f)| *p *= f);
                    }
                    let (_, _, v) = inputs.pair(pair);
                    product(
                        out,
                        (q_len, d_k, k_len),
                        &probs,
                        (1, k_len),
                        v,
                        (1, d_k),
                        1.0,
                        extras.bf16,
                    );
                });
        }
        Ok((CpuStorage::F32(out), ql.shape().clone()))
    }

    fn bwd(
        &self,
        query: &Tensor,
        key: &Tensor,
        value: &Tensor,
        _res: &Tensor,
        grad: &Tensor,
    ) -> Result<(Option<Tensor>, Option<Tensor>, Option<Tensor>)> {
        let (batch, heads, q_len, d_k) = query.dims4()?;
        let k_len = key.dim(2)?;
        let op = AttentionGradOp {
            extras: self.0.clone(),
            grad_out: grad.flatten_all()?.to_vec1::<f32>()?,
        };
        let packed = query.apply_op3_no_bwd(key, value, &op)?;
        let (nq, nk) = (batch * heads * q_len * d_k, batch * heads * k_len * d_k);
        let part = |start: usize, len: usize, rows: usize| {
            packed
                .narrow(0, start, len)?
                .reshape((batch, heads, rows, d_k))
        };
        Ok((
            Some(part(0, nq, q_len)?),
            Some(part(nq, nk, k_len)?),
            Some(part(nq + nk, nk, k_len)?),
        ))
    }
}
