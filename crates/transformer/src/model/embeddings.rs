//! Embeddings scaled by sqrt(d_model) (paper 3.4), and each side's stack of embeddings and
//! positions (the reference's `nn.Sequential(Embeddings, PositionalEncoding)`).

use candle_core::{Result, Tensor};
use candle_nn::VarBuilder;

use crate::config::ModelConfig;
use crate::kernels::dropout::Mode;
use crate::model::positions::PositionalEncoding;
use crate::model::weights::table::Table;

/// A learned lookup table whose output is multiplied by sqrt(d_model) (unless
/// `scale_embeddings` is off).
pub struct Embeddings {
    lut: Table,
    scale: f64,
}

impl Embeddings {
    pub fn new(cfg: &ModelConfig, vocab: usize, vb: VarBuilder) -> Result<Self> {
        Ok(Self::over(
            Table::new(vocab, cfg.d_model, vb.pp("lut"))?,
            cfg,
        ))
    }

    /// Embeddings reading `table` `(vocab, d_model)`, another side's (a joint vocabulary).
    pub fn sharing(table: &Table, cfg: &ModelConfig) -> Self {
        Self::over(table.clone(), cfg)
    }

    fn over(lut: Table, cfg: &ModelConfig) -> Self {
        Self {
            lut,
            // The paper scales embeddings up so they are not drowned by the position signal.
            scale: if cfg.scale_embeddings {
                (cfg.d_model as f64).sqrt()
            } else {
                1.0
            },
        }
    }

    /// Token ids `(batch, len)` -> `(batch, len, d_model)`.
    pub fn forward(&self, ids: &Tensor) -> Result<Tensor> {
        self.lut.lookup(ids, self.scale)
    }

    /// The table `(vocab, d_model)`, for a generator that shares it.
    pub fn table(&self) -> &Table {
        &self.lut
    }
}

/// The reference's `nn.Sequential(Embeddings, PositionalEncoding)`: parameters `0.lut.weight`
/// and the buffer `1.pe`.
pub struct EmbeddingStack {
    embeddings: Embeddings,
    positions: PositionalEncoding,
    /// Another stack's table under this stack's own name, when it reads that table
    /// (`share_source_embeddings`).
    shared: Option<(String, Table)>,
}

impl EmbeddingStack {
    pub fn new(cfg: &ModelConfig, vocab: usize, vb: VarBuilder) -> Result<Self> {
        Ok(Self {
            embeddings: Embeddings::new(cfg, vocab, vb.pp(0))?,
            positions: PositionalEncoding::new(cfg, vb.pp(1))?,
            shared: None,
        })
    }

    /// A stack reading `other`'s token table (one vocabulary for both sides), with its own
    /// positions.
    pub fn sharing(cfg: &ModelConfig, other: &EmbeddingStack, vb: VarBuilder) -> Result<Self> {
        let table = other.table();
        let name = vb.pp(0).pp("lut").pp("weight").prefix();
        // As the generator's tied copy: a checkpoint lists the shared table under this
        // stack's name too, which is accepted (and so marked as read) when present.
        let lut = vb.pp(0).pp("lut");
        if lut.contains_tensor("weight") {
            lut.get(table.dims()?, "weight")?;
        }
        Ok(Self {
            embeddings: Embeddings::sharing(table, cfg),
            positions: PositionalEncoding::new(cfg, vb.pp(1))?,
            shared: Some((name, table.clone())),
        })
    }

    /// The shared table under this stack's own name, for checkpoints; none when the table
    /// is the stack's own (or int8, which no checkpoint lists twice).
    pub fn tied_copy(&self) -> Option<(String, Tensor)> {
        let (name, table) = self.shared.as_ref()?;
        Some((name.clone(), table.float()?.clone()))
    }

    /// The name the shared table is listed under again, if it is shared.
    pub fn tied_name(&self) -> Option<String> {
        self.shared.as_ref().map(|(name, _)| name.clone())
    }

    /// The fixed position table under its name, for checkpoints; none when positions are
    /// learned.
    pub fn position_buffer(&self) -> Option<(String, Tensor)> {
        self.positions.buffer()
    }

    /// Rows of the position table.
    pub fn max_positions(&self) -> usize {
        self.positions.max_len()
    }

    /// The token embedding matrix `(vocab, d_model)`, for a generator that shares it.
    pub fn table(&self) -> &Table {
        self.embeddings.table()
    }

    /// `(batch, len)` ids at positions `offset..` (0 for a whole sequence, the decoded
    /// length for an incremental step) -> `(batch, len, d_model)`.
    pub fn forward(&self, ids: &Tensor, offset: usize, mode: Mode) -> Result<Tensor> {
        self.positions
            .forward(&self.embeddings.forward(ids)?, offset, mode)
    }
}
