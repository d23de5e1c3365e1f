//! The attention of a sentence pair, for the pictures: the pair run through the model under
//! teacher forcing, every layer's and head's probabilities collected into the grids that
//! the `transformer-plot` crate draws (`transformer attention` and the server's page share this).

use anyhow::bail;
use candle_core::{Device, Tensor};

use crate::model::{ModelFamily, TeacherForced};
use crate::tokenize::{SpecialIds, TextTokenizer, Tokenizers};

/// A source sentence and the target the decoder is fed, as ids with their boundaries.
pub struct TeacherForcedPair {
    /// `<s> x1 .. xm </s>` (as the model's specials frame a source).
    pub src: Vec<u32>,
    /// `<s> y1 .. y(n-1)`: the decoder reads these (after its start symbol) and predicts
    /// `y1 .. yn` (`yn` is usually `</s>`).
    pub tgt_in: Vec<u32>,
}

impl TeacherForcedPair {
    /// The pair of source pieces `src` (no specials) and generated `target` ids, framed as
    /// `specials` says.
    pub fn new(src: &[u32], target: &[u32], specials: &SpecialIds) -> Self {
        let mut tgt_in = vec![specials.decoder_start];
        tgt_in.extend(&target[..target.len().saturating_sub(1)]);
        Self {
            src: specials.source(src),
            tgt_in,
        }
    }

    /// Fails, naming both lengths, when either side is longer than the position table.
    pub fn check_fits(&self, max_len: usize) -> anyhow::Result<()> {
        if self.src.len() > max_len || self.tgt_in.len() > max_len {
            bail!(
                "the sentence pair has {} source and {} target positions but model.max_len is \
                 {max_len}; draw a shorter sentence",
                self.src.len(),
                self.tgt_in.len()
            );
        }
        Ok(())
    }
}

/// One layer's probabilities, `[head][query][key]`.
pub type HeadMaps = Vec<Vec<Vec<f32>>>;

/// One kind of attention at every layer and head of one sentence pair.
pub struct AttentionGrid {
    pub title: String,
    /// Row labels: the tokens that attend.
    pub queries: Vec<String>,
    /// Column labels: the tokens attended to.
    pub keys: Vec<String>,
    /// `(layer number as shown, its maps)` for each layer drawn.
    pub layers: Vec<(usize, HeadMaps)>,
}

/// The three kinds of attention of `pair`, for `layers` (1-based; all when empty).
pub fn attention_grids(
    model: &dyn ModelFamily,
    tokenizers: &Tokenizers,
    pair: &TeacherForcedPair,
    layers: &[usize],
    device: &Device,
) -> anyhow::Result<Vec<AttentionGrid>> {
    let (src, tgt_in) = (pair.src.as_slice(), pair.tgt_in.as_slice());
    let src_ids = Tensor::new(src, device)?.unsqueeze(0)?;
    let tgt_ids = Tensor::new(tgt_in, device)?.unsqueeze(0)?;
    let specials = tokenizers.specials();
    let batch = TeacherForced::framed(
        src_ids,
        tgt_ids,
        specials.pad,
        specials.decoder_starts_from_pad(),
    )?;
    let maps = model.attention_maps(&batch)?;
    let src_tokens = tokens(&tokenizers.src, src);
    let tgt_tokens = tokens(&tokenizers.tgt, tgt_in);
    let pick = |per_layer: &[Tensor]| -> anyhow::Result<Vec<(usize, HeadMaps)>> {
        per_layer
            .iter()
            .enumerate()
            .map(|(i, map)| (i + 1, map))
            .filter(|(layer, _)| layers.is_empty() || layers.contains(layer))
            .map(|(layer, map)| Ok((layer, map.to_vec3::<f32>()?)))
            .collect()
    };
    Ok(vec![
        AttentionGrid {
            title: "Encoder self-attention".into(),
            queries: src_tokens.clone(),
            keys: src_tokens.clone(),
            layers: pick(&maps.encoder)?,
        },
        AttentionGrid {
            title: "Decoder self-attention (masked: no position sees later ones)".into(),
            queries: tgt_tokens.clone(),
            keys: tgt_tokens.clone(),
            layers: pick(&maps.decoder_self)?,
        },
        AttentionGrid {
            title: "Encoder-decoder attention (decoder positions over source tokens)".into(),
            queries: tgt_tokens,
            keys: src_tokens,
            layers: pick(&maps.cross)?,
        },
    ])
}

fn tokens(tokenizer: &TextTokenizer, ids: &[u32]) -> Vec<String> {
    ids.iter().map(|&id| tokenizer.token(id)).collect()
}
