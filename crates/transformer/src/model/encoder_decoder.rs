//! EncoderDecoder and the Generator: the whole of Figure 1, the "encoder-decoder" family.

use candle_core::{Result, Tensor};
use candle_nn::VarBuilder;

use super::attention_maps::{attention_maps, AttentionLayers, AttentionMaps};
use super::decoder::{Decoder, EncoderDecoderState};
use super::decoding::{own_state, DecodingModel, DecodingState, Source};
use super::embeddings::{Embeddings, PositionalEncoding};
use super::encoder::Encoder;
use super::family::{ModelFamily, TeacherForced};
use super::linear::Linear;
use super::table::Table;
use crate::config::{ModelConfig, VocabSizes};
use crate::kernels::dropout::Mode;
use crate::kernels::log_softmax::log_softmax_last_dim;

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
            Self::sharing(embed.table(), vb)
        } else {
            Self::new(cfg.d_model, embed.table().dims()?.0, vb)
        }
    }

    /// A generator whose matrix is `table` `(vocab, d_model)`, the target embedding's
    /// (`share_embeddings`); only its bias `proj.bias` is its own.
    fn sharing(table: &Table, vb: VarBuilder) -> Result<Self> {
        // PyTorch's state_dict lists a tied matrix under both names: accept (and so mark as
        // read, for strict loading) the generator's copy when a checkpoint has it.
        if vb.contains_tensor("proj.weight") {
            vb.get(table.dims()?, "proj.weight")?;
        }
        Ok(Self {
            shared: Some((vb.pp("proj").pp("weight").prefix(), table.clone())),
            proj: Linear::over_table(table, true, vb.pp("proj"))?,
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
        let src_embed = EmbeddingStack::new(cfg, vocab.src, vb.pp("src_embed"))?;
        let tgt_embed = if cfg.share_source_embeddings {
            if vocab.src != vocab.tgt {
                candle_core::bail!(
                    "model.share_source_embeddings needs one vocabulary for both sides, but the \
                     source has {} tokens and the target {}",
                    vocab.src,
                    vocab.tgt
                )
            }
            EmbeddingStack::sharing(cfg, &src_embed, vb.pp("tgt_embed"))?
        } else {
            EmbeddingStack::new(cfg, vocab.tgt, vb.pp("tgt_embed"))?
        };
        let generator = Generator::for_config(cfg, &tgt_embed, vb.pp("generator"))?;
        Ok(Self {
            encoder: Encoder::new(cfg, vb.pp("encoder"))?,
            decoder: Decoder::new(cfg, vb.pp("decoder"))?,
            src_embed,
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
    pub fn hidden_states(
        &self,
        source: &Source,
        tgt: &Tensor,
        tgt_mask: &Tensor,
        mode: Mode,
    ) -> Result<Tensor> {
        let memory = self.encode(&source.ids, &source.mask, mode)?;
        self.decode(&memory, &source.mask, tgt, tgt_mask, mode)
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
}

impl DecodingModel for EncoderDecoder {
    fn reads_source(&self) -> bool {
        true
    }

    fn max_positions(&self) -> usize {
        self.tgt_embed.max_positions()
    }

    /// Encodes the source and projects every layer's source keys and values once.
    fn start(&self, source: Option<&Source>) -> Result<Box<dyn DecodingState>> {
        let Some(source) = source else {
            candle_core::bail!("an encoder-decoder model decodes from a source; none was given")
        };
        let memory = self.encode(&source.ids, &source.mask, Mode::Eval)?;
        Ok(Box::new(self.decoder.start(&memory, &source.mask)?))
    }

    fn step(&self, ids: &Tensor, state: &mut dyn DecodingState) -> Result<Tensor> {
        let state = own_state::<EncoderDecoderState>(state)?;
        let xs = self.tgt_embed.forward(ids, state.len, Mode::Eval)?;
        let hidden = self.decoder.step(&xs, state)?;
        self.generator.logits(&hidden.squeeze(1)?)
    }
}

impl ModelFamily for EncoderDecoder {
    fn as_any(&self) -> &dyn std::any::Any {
        self
    }

    fn logits(&self, batch: &TeacherForced, mode: Mode) -> Result<Tensor> {
        let (source, tgt_in, tgt_mask) = batch.with_source(self)?;
        self.generator
            .logits(&self.hidden_states(source, tgt_in, tgt_mask, mode)?)
    }

    fn buffers(&self) -> Vec<(String, Tensor)> {
        [&self.src_embed, &self.tgt_embed]
            .into_iter()
            .filter_map(EmbeddingStack::position_buffer)
            .chain(self.tgt_embed.tied_copy())
            .chain(self.generator.tied_copy())
            .collect()
    }

    fn tied_names(&self) -> Vec<String> {
        self.tgt_embed
            .tied_name()
            .into_iter()
            .chain(self.generator.tied_name())
            .collect()
    }

    fn attention_maps(&self, batch: &TeacherForced) -> Result<AttentionMaps> {
        let (source, tgt_in, tgt_mask) = batch.with_source(self)?;
        let layers = AttentionLayers {
            encoder: self
                .encoder
                .layers()
                .iter()
                .map(|l| l.self_attention())
                .collect(),
            decoder_self: self
                .decoder
                .layers()
                .iter()
                .map(|l| l.self_attention())
                .collect(),
            cross: self
                .decoder
                .layers()
                .iter()
                .map(|l| l.source_attention())
                .collect(),
        };
        attention_maps(layers, || {
            self.hidden_states(source, tgt_in, tgt_mask, Mode::Eval)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::ModelConfig;
    use crate::model::ModelFamily;
    use crate::model::{Model, TeacherForced, VocabSizes};
    use candle_core::{DType, Device};
    use candle_nn::{VarBuilder, VarMap};

    #[test]
    fn every_layer_gives_row_stochastic_maps_and_the_decoder_never_looks_ahead() {
        let cfg = ModelConfig {
            layers: 2,
            d_model: 16,
            d_ff: 32,
            heads: 4,
            max_len: 32,
            ..ModelConfig::default()
        };
        let dev = Device::Cpu;
        let vocab = VocabSizes { src: 11, tgt: 11 };
        let model = EncoderDecoder::new(
            &cfg,
            vocab,
            VarBuilder::from_varmap(&VarMap::new(), DType::F32, &dev),
        )
        .unwrap();
        let src = Tensor::new(&[[1u32, 5, 6, 7, 2]], &dev).unwrap();
        let tgt = Tensor::new(&[[1u32, 8, 9]], &dev).unwrap();
        let batch = TeacherForced::with_masks(src, tgt, 0).unwrap();
        let maps = model.attention_maps(&batch).unwrap();
        let fresh = Model::fresh(&cfg, vocab, &VarMap::new(), 0, &dev).unwrap();
        assert_eq!(fresh.attention_maps(&batch).unwrap().cross.len(), 2);
        assert_eq!(maps.encoder.len(), 2);
        assert_eq!(maps.encoder[0].dims(), &[4, 5, 5]);
        assert_eq!(maps.decoder_self[1].dims(), &[4, 3, 3]);
        assert_eq!(maps.cross[1].dims(), &[4, 3, 5]);
        for map in maps
            .encoder
            .iter()
            .chain(&maps.decoder_self)
            .chain(&maps.cross)
        {
            for head in map.to_vec3::<f32>().unwrap() {
                for row in head {
                    assert!((row.iter().sum::<f32>() - 1.0).abs() < 1e-5);
                }
            }
        }
        let first_query = maps.decoder_self[0].to_vec3::<f32>().unwrap()[0][0].clone();
        assert_eq!(first_query, vec![1.0, 0.0, 0.0]);
        let attention = model.encoder().layers()[0].self_attention();
        assert!(
            attention.recorded().is_none(),
            "recording is switched off again"
        );
    }
}
