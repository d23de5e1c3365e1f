//! What each head attends to: the probabilities of every encoder self-attention, decoder
//! self-attention and encoder-decoder attention for one sentence pair under teacher forcing
//! (The Annotated Transformer's "Attention Visualization", for the whole model).

use candle_core::{Result, Tensor};

use super::attention::MultiHeadedAttention;
use super::encoder_decoder::EncoderDecoder;
use crate::kernels::dropout::Mode;

/// Attention probabilities per layer, each `(heads, queries, keys)`.
pub struct AttentionMaps {
    /// `(heads, src_len, src_len)` per encoder layer.
    pub encoder: Vec<Tensor>,
    /// `(heads, tgt_len, tgt_len)` per decoder layer.
    pub decoder_self: Vec<Tensor>,
    /// `(heads, tgt_len, src_len)` per decoder layer.
    pub cross: Vec<Tensor>,
}

/// Runs `src` `(1, src_len)` and the decoder input `tgt` `(1, tgt_len)` through the model
/// (dropout off) and returns every attention's probabilities.
pub fn attention_maps(
    model: &EncoderDecoder,
    src: &Tensor,
    tgt: &Tensor,
    src_mask: &Tensor,
    tgt_mask: &Tensor,
) -> Result<AttentionMaps> {
    let encoder: Vec<&MultiHeadedAttention> = model
        .encoder()
        .layers()
        .iter()
        .map(|l| l.self_attention())
        .collect();
    let decoder_self: Vec<&MultiHeadedAttention> = model
        .decoder()
        .layers()
        .iter()
        .map(|l| l.self_attention())
        .collect();
    let cross: Vec<&MultiHeadedAttention> = model
        .decoder()
        .layers()
        .iter()
        .map(|l| l.source_attention())
        .collect();
    let all = || encoder.iter().chain(&decoder_self).chain(&cross);
    all().for_each(|a| a.record(true));
    let outcome = model.forward(src, tgt, src_mask, tgt_mask, Mode::Eval);
    let take = |modules: &[&MultiHeadedAttention]| -> Result<Vec<Tensor>> {
        modules
            .iter()
            .map(|a| match a.recorded() {
                Some(p) => p.squeeze(0),
                None => candle_core::bail!("an attention layer recorded nothing"),
            })
            .collect()
    };
    let maps = outcome.and_then(|_| {
        Ok(AttentionMaps {
            encoder: take(&encoder)?,
            decoder_self: take(&decoder_self)?,
            cross: take(&cross)?,
        })
    });
    all().for_each(|a| a.record(false));
    maps
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::ModelConfig;
    use crate::model::{make_model, masks, VocabSizes};
    use candle_core::Device;
    use candle_nn::VarMap;

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
        let model = make_model(&cfg, vocab, &VarMap::new(), 0, &dev).unwrap();
        let src = Tensor::new(&[[1u32, 5, 6, 7, 2]], &dev).unwrap();
        let tgt = Tensor::new(&[[1u32, 8, 9]], &dev).unwrap();
        let src_mask = masks::padding_mask(&src, 0).unwrap();
        let tgt_mask = masks::target_mask(&tgt, 0).unwrap();
        let maps = attention_maps(&model, &src, &tgt, &src_mask, &tgt_mask).unwrap();
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
