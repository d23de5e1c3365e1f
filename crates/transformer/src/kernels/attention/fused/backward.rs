//! The fused attention's backward node: dQ, dK and dV of every (batch, head) pair from Q, K,
//! V and dO, the probabilities recomputed (see the parent module's equations).

use candle_core::{CpuStorage, CustomOp3, Layout, Result, Shape};
use rayon::prelude::*;

use super::{product, Extras, Inputs};

/// The backward node: `dQ | dK | dV` packed into one flat tensor.
pub(super) struct AttentionGradOp {
    pub(super) extras: Extras,
    /// dO `(batch, heads, q_len, d_k)`, row-major.
    pub(super) grad_out: Vec<f32>,
}

impl CustomOp3 for AttentionGradOp {
    fn name(&self) -> &'static str {
        "fused-attention-grad"
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
        let grad_out = &self.grad_out;
        let (nq, nk) = (inputs.pairs * q_len * d_k, inputs.pairs * k_len * d_k);
        let mut packed = vec![0f32; nq + 2 * nk];
        let (dq, rest) = packed.split_at_mut(nq);
        let (dk, dv) = rest.split_at_mut(nk);
        if q_len * k_len * d_k > 0 {
            dq.par_chunks_mut(q_len * d_k)
                .zip(dk.par_chunks_mut(k_len * d_k))
                .zip(dv.par_chunks_mut(k_len * d_k))
                .enumerate()
                .for_each(|(pair, ((dq, dk), dv))| {
                    let grad_out = &grad_out[pair * q_len * d_k..(pair + 1) * q_len * d_k];
                    self.pair_grads(&inputs, pair, grad_out, dq, dk, dv);
                });
        }
        Ok((CpuStorage::F32(packed), Shape::from(nq + 2 * nk)))
    }
}

impl AttentionGradOp {
    /// dQ, dK and dV of one (batch, head) pair (see the module docs).
    fn pair_grads(
        &self,
        inputs: &Inputs,
        pair: usize,
        grad_out: &[f32],
        dq: &mut [f32],
        dk: &mut [f32],
        dv: &mut [f32],
    ) {
        let (q_len, k_len, d_k) = (inputs.q_len, inputs.k_len, inputs.d_k);
        let extras = &self.extras;
        let (q, k, v) = inputs.pair(pair);
        let mut probs = vec![0f32; q_len * k_len];
        extras.probabilities(inputs, pair, &mut probs);
        let factors = extras.dropout_of(pair, q_len * k_len);
        // dV = Pd^T dO, with Pd = P * D.
        let dropped: std::borrow::Cow<[f32]> = match factors {
            Some(f) => probs.iter().zip(f).map(|(p, f)| p * f).collect(),
            None => std::borrow::Cow::Borrowed(&probs),
        };
        product(
            dv,
            (k_len, d_k, q_len),
            &dropped,
            (k_len, 1),
            grad_out,
            (1, d_k),
            1.0,
            extras.bf16,
        );
        // dP = (dO V^T) * D.
        let mut grad_probs = vec![0f32; q_len * k_len];
        product(
            &mut grad_probs,
            (q_len, k_len, d_k),
            grad_out,
            (1, d_k),
            v,
            (d_k, 1),
            1.0,
            extras.bf16,
        );
        if let Some(f) = factors {
            grad_probs.iter_mut().zip(f).for_each(|(g, f)| *g *= f);
        }
        // dS = P * (dP - rowsum(dP * P)), zero where the score was replaced by the mask fill.
        let batch = pair / inputs.heads;
        for (i, (g, p)) in grad_probs
            .chunks_exact_mut(k_len)
            .zip(probs.chunks_exact(k_len))
            .enumerate()
        {
            let dot: f32 = g.iter().zip(p).map(|(g, p)| g * p).sum();
            g.iter_mut().zip(p).for_each(|(g, p)| *g = p * (*g - dot));
            if let Some(mask) = &extras.mask {
                let allowed = &mask[(batch * q_len + i) * k_len..][..k_len];
                g.iter_mut()
                    .zip(allowed)
                    .filter(|(_, &ok)| ok == 0)
                    .for_each(|(g, _)| *g = 0.0);
            }
        }
        // dQ = scale * dS K, dK = scale * dS^T Q.
        product(
            dq,
            (q_len, d_k, k_len),
            &grad_probs,
            (1, k_len),
            k,
            (1, d_k),
            extras.scale,
            extras.bf16,
        );
        product(
            dk,
            (k_len, d_k, q_len),
            &grad_probs,
            (k_len, 1),
            q,
            (1, d_k),
            extras.scale,
            extras.bf16,
        );
    }
}
