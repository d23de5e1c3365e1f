//! EncoderDecoder, the Generator and `make_model`: the whole of Figure 1.

use candle_core::{Device, Result, Tensor};
use candle_nn::{VarBuilder, VarMap};

use super::linear::Linear;

use super::decoder::{Decoder, DecoderState};
use super::embeddings::{Embeddings, PositionalEncoding};
use super::encoder::Encoder;
use super::init::fresh_model;
use crate::config::{ModelConfig, VocabSizes};
use crate::kernels::dropout::Mode;
use crate::kernels::log_softmax::log_softmax_last_dim;

/// The reference's `nn.Sequential(Embeddings, PositionalEncoding)`: parameters `0.lut.weight`
/// and the buffer `1.pe`.
pub struct EmbeddingStack {
    embeddings: Embeddings,
    positions: PositionalEncoding,
}

impl EmbeddingStack {
    pub fn new(cfg: &ModelConfig, vocab: usize, vb: VarBuilder) -> Result<Self> {
        Ok(Self {
            embeddings: Embeddings::new(cfg, vocab, vb.pp(0))?,
            positions: PositionalEncoding::new(cfg, vb.pp(1))?,
        })
    }

    /// The fixed position table, for checkpoints; none when positions are learned.
    pub fn position_table(&self) -> Option<&Tensor> {
        self.positions.table()
    }

    /// The token embedding matrix `(vocab, d_model)`, for a generator that shares it.
    pub fn table(&self) -> &Tensor {
        self.embeddings.table()
    }

    /// `(batch, len)` ids at positions `offset..` (0 for a whole sequence, the decoded
    /// length for an incremental step) -> `(batch, len, d_model)`.
    pub fn forward(&self, ids: &Tensor, offset: usize, mode: Mode) -> Result<Tensor> {
        self.positions
            .forward(&self.embeddings.forward(ids)?, offset, mode)
    }
}

/// The final linear projection and log-softmax over the target vocabulary.
pub struct Generator {
    proj: Linear,
    /// The target embedding's matrix, when the projection shares it (`share_embeddings`).
    shared: Option<Tensor>,
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
            Self::sharing(embed.table(), vb)
        } else {
            Self::new(cfg.d_model, embed.table().dim(0)?, vb)
        }
    }

    /// A generator whose matrix is `table` `(vocab, d_model)`, the target embedding's
    /// (`share_embeddings`); only its bias `proj.bias` is its own.
    fn sharing(table: &Tensor, vb: VarBuilder) -> Result<Self> {
        // PyTorch's state_dict lists a tied matrix under both names: accept (and so mark as
        // read, for strict loading) the generator's copy when a checkpoint has it.
        if vb.contains_tensor("proj.weight") {
            vb.get(table.shape(), "proj.weight")?;
        }
        Ok(Self {
            proj: Linear::from_weight(table.clone(), true, vb.pp("proj"))?,
            shared: Some(table.clone()),
        })
    }

    /// The shared matrix under the generator's own name, as PyTorch's state_dict lists a
    /// tied matrix twice (`generator.proj.weight` beside the embedding's): a checkpoint
    /// carries it so that `load_state_dict(strict=True)` reads it unchanged.
    pub fn tied_copy(&self) -> Option<(String, Tensor)> {
        let table = self.shared.as_ref()?;
        Some(("generator.proj.weight".to_string(), table.clone()))
    }

    /// `(..., d_model)` -> log-probabilities `(..., tgt_vocab)`.
    pub fn forward(&self, xs: &Tensor) -> Result<Tensor> {
        log_softmax_last_dim(&self.logits(xs)?)
    }

    /// `(..., d_model)` -> unnormalised scores `(..., tgt_vocab)`, for a loss that applies
    /// the log-softmax itself.
    pub fn logits(&self, xs: &Tensor) -> Result<Tensor> {
        self.proj.forward(xs)
    }
}

/// The standard encoder-decoder: embed and encode the source, embed and decode the target
/// against the encoder's memory.
pub struct EncoderDecoder {
    encoder: Encoder,
    decoder: Decoder,
    src_embed: EmbeddingStack,
    tgt_embed: EmbeddingStack,
    generator: Generator,
}

impl EncoderDecoder {
    /// Builds the model from `vb`: fresh variables from a VarMap, or a checkpoint's tensors.
    pub fn new(cfg: &ModelConfig, vocab: VocabSizes, vb: VarBuilder) -> Result<Self> {
        let tgt_embed = EmbeddingStack::new(cfg, vocab.tgt, vb.pp("tgt_embed"))?;
        let generator = Generator::for_config(cfg, &tgt_embed, vb.pp("generator"))?;
        Ok(Self {
            encoder: Encoder::new(cfg, vb.pp("encoder"))?,
            decoder: Decoder::new(cfg, vb.pp("decoder"))?,
            src_embed: EmbeddingStack::new(cfg, vocab.src, vb.pp("src_embed"))?,
            tgt_embed,
            generator,
        })
    }

    /// Source ids `(batch, src_len)`, mask `(batch, 1, src_len)` -> memory
    /// `(batch, src_len, d_model)`.
    pub fn encode(&self, src: &Tensor, src_mask: &Tensor, mode: Mode) -> Result<Tensor> {
        self.encoder
            .forward(&self.src_embed.forward(src, 0, mode)?, src_mask, mode)
    }

    /// Target ids `(batch, tgt_len)` against `memory` -> hidden states
    /// `(batch, tgt_len, d_model)`; `tgt_mask` is `(batch, tgt_len, tgt_len)`.
    pub fn decode(
        &self,
        memory: &Tensor,
        src_mask: &Tensor,
        tgt: &Tensor,
        tgt_mask: &Tensor,
        mode: Mode,
    ) -> Result<Tensor> {
        let tgt = self.tgt_embed.forward(tgt, 0, mode)?;
        self.decoder.forward(&tgt, memory, src_mask, tgt_mask, mode)
    }

    /// Encode then decode (teacher forcing): hidden states `(batch, tgt_len, d_model)`.
    pub fn forward(
        &self,
        src: &Tensor,
        tgt: &Tensor,
        src_mask: &Tensor,
        tgt_mask: &Tensor,
        mode: Mode,
    ) -> Result<Tensor> {
        let memory = self.encode(src, src_mask, mode)?;
        self.decode(&memory, src_mask, tgt, tgt_mask, mode)
    }

    /// Prepares incremental decoding against `memory`: computes the source keys/values once.
    pub fn start_decoding(&self, memory: &Tensor, src_mask: &Tensor) -> Result<DecoderState> {
        self.decoder.start(memory, src_mask)
    }

    /// Decodes one more position: `ids` `(batch, 1)` the latest tokens -> hidden states
    /// `(batch, 1, d_model)`; `state` remembers everything before.
    pub fn step(&self, ids: &Tensor, state: &mut DecoderState) -> Result<Tensor> {
        let xs = self.tgt_embed.forward(ids, state.len, Mode::Eval)?;
        self.decoder.step(&xs, state)
    }

    pub fn generator(&self) -> &Generator {
        &self.generator
    }

    pub fn encoder(&self) -> &Encoder {
        &self.encoder
    }

    pub fn decoder(&self) -> &Decoder {
        &self.decoder
    }

    /// The tensors a checkpoint carries beside the parameters: the two sinusoidal position
    /// tables (none when positions are learned: they are parameters then), and the shared
    /// generator matrix under its own name (see [`Generator::tied_copy`]).
    pub fn buffers(&self) -> Vec<(String, Tensor)> {
        [
            ("src_embed.1.pe", &self.src_embed),
            ("tgt_embed.1.pe", &self.tgt_embed),
        ]
        .into_iter()
        .filter_map(|(name, stack)| Some((name.to_string(), stack.positions.table()?.clone())))
        .chain(self.generator.tied_copy())
        .collect()
    }
}

/// A fresh model whose parameters live in `varmap`, initialised as the reference does
/// (Xavier-uniform for every matrix) from `seed`.
pub fn make_model(
    cfg: &ModelConfig,
    vocab: VocabSizes,
    varmap: &VarMap,
    seed: u64,
    device: &Device,
) -> Result<EncoderDecoder> {
    fresh_model(varmap, seed, device, |vb| {
        EncoderDecoder::new(cfg, vocab, vb)
    })
}
