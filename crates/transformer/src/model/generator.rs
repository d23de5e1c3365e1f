//! The Generator of Figure 1: the final linear layer and softmax, as log-probabilities over
//! the target vocabulary (paper section 3.4; its weight can be the target embedding's).

use crate::config::ModelConfig;
use crate::kernels::log_softmax::log_softmax_last_dim;
use crate::model::embeddings::EmbeddingStack;
use crate::model::weights::linear::Linear;
use crate::model::weights::table::Table;
use candle_core::{Result, Tensor};
use candle_nn::VarBuilder;

/// The final linear projection and log-softmax over the target vocabulary.
pub struct Generator {
    proj: Linear,
    /// The target embedding's matrix under the projection's own weight name, when the
    /// projection shares it (`share_embeddings`).
    shared: Option<(String, Table)>,
}

impl Generator {
    pub fn new(d_model: usize, vocab: usize, vb: VarBuilder) -> Result<Self> {
        Ok(Self {
            proj: Linear::new(d_model, vocab, vb.pp("proj"))?,
            shared: None,
        })
    }

    /// The generator over `embed`'s vocabulary: with `share_embeddings`, sharing its matrix.
    pub fn for_config(cfg: &ModelConfig, embed: &EmbeddingStack, vb: VarBuilder) -> Result<Self> {
        if cfg.share_embeddings {
            Self::sharing(embed.table(), cfg.generator_bias, vb)
        } else {
            Ok(Self {
                proj: Linear::with_bias(
                    cfg.d_model,
                    embed.table().dims()?.0,
                    cfg.generator_bias,
                    vb.pp("proj"),
                )?,
                shared: None,
            })
        }
    }

    /// A generator whose matrix is `table` `(vocab, d_model)`, the target embedding's
    /// (`share_embeddings`); only its bias `proj.bias`, when it has one, is its own.
    fn sharing(table: &Table, bias: bool, vb: VarBuilder) -> Result<Self> {
        // PyTorch's state_dict lists a tied matrix under both names: accept (and so mark as
        // read, for strict loading) the generator's copy when a checkpoint has it.
        if vb.contains_tensor("proj.weight") {
            vb.get(table.dims()?, "proj.weight")?;
        }
        Ok(Self {
            shared: Some((vb.pp("proj").pp("weight").prefix(), table.clone())),
            proj: Linear::over_table(table, bias, vb.pp("proj"))?,
        })
    }

    /// The shared matrix under the generator's own name, as PyTorch's state_dict lists a
    /// tied matrix twice (`generator.proj.weight` beside the embedding's): a checkpoint
    /// carries it so that `load_state_dict(strict=True)` reads it unchanged.
    pub fn tied_copy(&self) -> Option<(String, Tensor)> {
        let (name, table) = self.shared.as_ref()?;
        Some((name.clone(), table.float()?.clone()))
    }

    /// The name the shared matrix is listed under again, if it is shared.
    pub fn tied_name(&self) -> Option<String> {
        self.shared.as_ref().map(|(name, _)| name.clone())
    }

    /// This Generator over the target ids `ids` only, in that order: their logits and
    /// nothing else (a vocabulary map's candidates, [`crate::decoding::restricted`]).
    pub fn restricted(&self, ids: &[u32]) -> Result<Self> {
        Ok(Self {
            proj: self.proj.outputs(ids)?,
            shared: None,
        })
    }

    /// `(..., d_model)` -> log-probabilities `(..., tgt_vocab)`.
    pub fn log_probs(&self, xs: &Tensor) -> Result<Tensor> {
        log_softmax_last_dim(&self.logits(xs)?)
    }

    /// `(..., d_model)` -> unnormalised scores `(..., tgt_vocab)`, for a loss that applies
    /// the log-softmax itself.
    pub fn logits(&self, xs: &Tensor) -> Result<Tensor> {
        self.proj.forward(xs)
    }
}
