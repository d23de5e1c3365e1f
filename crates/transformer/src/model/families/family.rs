//! What a model family is: [`ModelFamily`], beside the decoding contract
//! ([`DecodingModel`]) every family also implements, and the teacher-forced batch its
//! training pass reads. The families themselves, and the table that builds them, are in
//! [`crate::model::families`].

use std::any::Any;

use candle_core::{Result, Tensor};

use crate::kernels::dropout::Mode;
use crate::model::attention_maps::AttentionMaps;
use crate::model::masks;
use crate::model::step::{DecodingModel, Source};

/// A padded batch as a teacher-forced pass reads it.
pub enum TeacherForced {
    /// The reference's `Batch`: the source with its padding mask, `tgt_in` `(batch,
    /// tgt_len)` with its padding-and-subsequent mask `(batch, tgt_len, tgt_len)`.
    WithSource {
        source: Source,
        tgt_in: Tensor,
        tgt_mask: Tensor,
    },
    /// The target prefix `(batch, len)` alone; the model applies its own causal mask.
    TargetOnly { ids: Tensor },
}

impl TeacherForced {
    /// A batch of padded sources and decoder inputs framed as a vocabulary's special ids say
    /// (`pad`, and whether the decoder starts from it): padding hidden from every attention,
    /// except that a decoder started from the padding id (MarianMT's) keeps its first
    /// position visible, with a causal-only mask as transformers' (real positions never see
    /// the padding after them anyway).
    pub fn framed(
        src: Tensor,
        tgt_in: Tensor,
        pad: u32,
        decoder_starts_from_pad: bool,
    ) -> Result<Self> {
        if !decoder_starts_from_pad {
            return Self::with_masks(src, tgt_in, pad);
        }
        let (batch, len) = tgt_in.dims2()?;
        Ok(Self::WithSource {
            source: Source {
                mask: masks::padding_mask(&src, pad)?,
                ids: src,
            },
            tgt_mask: masks::subsequent_mask(len, tgt_in.device())?.repeat((batch, 1, 1))?,
            tgt_in,
        })
    }

    /// The batch of padded source ids `(batch, src_len)` and target prefix `tgt_in` `(batch,
    /// tgt_len)`, with their masks (`pad` hidden; the target also from later positions).
    pub fn with_masks(src: Tensor, tgt_in: Tensor, pad: u32) -> Result<Self> {
        Ok(Self::WithSource {
            source: Source {
                mask: masks::padding_mask(&src, pad)?,
                ids: src,
            },
            tgt_mask: masks::target_mask(&tgt_in, pad)?,
            tgt_in,
        })
    }

    /// Whether the batch carries a source: which families read it.
    pub fn has_source(&self) -> bool {
        matches!(self, Self::WithSource { .. })
    }

    /// The source, `tgt_in` and `tgt_mask`, for `model`, which reads a source; a batch
    /// without one is refused by name.
    pub fn with_source(&self, model: &dyn DecodingModel) -> Result<(&Source, &Tensor, &Tensor)> {
        match self {
            Self::WithSource {
                source,
                tgt_in,
                tgt_mask,
            } => Ok((source, tgt_in, tgt_mask)),
            Self::TargetOnly { .. } => Err(self.wrong_kind(model)),
        }
    }

    /// The ids, for `model`, which reads no source; a batch with one is refused by name.
    pub fn target_only(&self, model: &dyn DecodingModel) -> Result<&Tensor> {
        match self {
            Self::TargetOnly { ids } => Ok(ids),
            Self::WithSource { .. } => Err(self.wrong_kind(model)),
        }
    }

    fn wrong_kind(&self, model: &dyn DecodingModel) -> candle_core::Error {
        candle_core::Error::Msg(if model.reads_source() {
            "an encoder-decoder model cannot read a batch without a source".into()
        } else {
            "a decoder-only model cannot read a batch with a source".into()
        })
    }
}

/// What every model family does beyond decoding: the teacher-forced pass that trains it,
/// the tensors its checkpoint carries beside the parameters, and (where it has them) its
/// attention maps.
pub trait ModelFamily: DecodingModel {
    /// Teacher-forced next-token logits `(batch, tgt_len, vocab)` of a padded batch.
    fn logits(&self, batch: &TeacherForced, mode: Mode) -> Result<Tensor>;

    /// The non-trained tensors a checkpoint carries, under their module names (sinusoidal
    /// position tables, a shared matrix's second name).
    fn buffers(&self) -> Vec<(String, Tensor)>;

    /// The module names a shared matrix is listed under again (beside its own), which an
    /// int8 checkpoint leaves out.
    fn tied_names(&self) -> Vec<String>;

    /// Every attention's probabilities for one teacher-forced pair (batch 1).
    fn attention_maps(&self, _batch: &TeacherForced) -> Result<AttentionMaps> {
        candle_core::bail!("this model family draws no attention maps")
    }

    /// The family's own type, for what only it has (the encoder-decoder's encoder memory, in
    /// the parity tests); see `Model::family`.
    fn as_any(&self) -> &dyn Any;
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::Device;

    fn first_mask(batch: &TeacherForced) -> Vec<Vec<u8>> {
        let TeacherForced::WithSource { tgt_mask, .. } = batch else {
            unreachable!()
        };
        tgt_mask.get(0).unwrap().to_vec2::<u8>().unwrap()
    }

    #[test]
    fn a_decoder_started_from_the_padding_id_still_sees_its_first_position() {
        let src = Tensor::new(&[[4u32, 5]], &Device::Cpu).unwrap();
        let tgt_in = Tensor::new(&[[9u32, 5, 9]], &Device::Cpu).unwrap();
        let marian = TeacherForced::framed(src.clone(), tgt_in, 0, true);
        let rows = first_mask(&marian.unwrap());
        assert_eq!(rows, vec![vec![1, 0, 0], vec![1, 1, 0], vec![1, 1, 1]]);
        let tgt_in = Tensor::new(&[[1u32, 5, 0]], &Device::Cpu).unwrap();
        let ours = TeacherForced::framed(src, tgt_in, 0, false).unwrap();
        assert_eq!(
            first_mask(&ours),
            vec![vec![1, 0, 0], vec![1, 1, 0], vec![1, 1, 0]]
        );
    }
}
