//! EncoderDecoder: the whole of Figure 1, the "encoder-decoder" family.

use candle_core::{Result, Tensor};
use candle_nn::VarBuilder;

use crate::config::{ModelConfig, VocabSizes};
use crate::kernels::dropout::Mode;
use crate::model::attention_maps::{attention_maps, AttentionLayers, AttentionMaps};
use crate::model::decoder::{Decoder, EncoderDecoderState};
use crate::model::embeddings::EmbeddingStack;
use crate::model::encoder::Encoder;
use crate::model::families::family::{ModelFamily, TeacherForced};
use crate::model::generator::Generator;
use crate::model::step::{own_state, DecodingModel, DecodingState, Source};

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

    fn step_hidden(&self, ids: &Tensor, state: &mut dyn DecodingState) -> Result<Tensor> {
        let state = own_state::<EncoderDecoderState>(state)?;
        let xs = self.tgt_embed.forward(ids, state.len, Mode::Eval)?;
        self.decoder.step(&xs, state)?.squeeze(1)
    }

    fn generator(&self) -> &Generator {
        &self.generator
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
