//! The key table: MarianMT's state_dict names (transformers' `modeling_marian.py`) for our
//! modules, both ways, as a [`WeightFormat`]; M2M100's and NLLB's are the same BART-family
//! names, with a final norm per stack.

use std::borrow::Cow;

use candle_core::Tensor;

use crate::checkpoint::format::WeightFormat;

/// MarianMT's state_dict names (`modeling_marian.py`) for our modules.
pub struct MarianFormat {
    /// One table for both sides (`model.shared.weight`).
    pub shared: bool,
}

/// (Marian's name within a layer, ours), for the encoder's and the decoder's layers.
const ENCODER_LAYER: &[(&str, &str)] = &[
    ("self_attn.q_proj", "self_attn.linears.0"),
    ("self_attn.k_proj", "self_attn.linears.1"),
    ("self_attn.v_proj", "self_attn.linears.2"),
    ("self_attn.out_proj", "self_attn.linears.3"),
    ("self_attn_layer_norm", "sublayer.0.norm"),
    ("fc1", "feed_forward.w_1"),
    ("fc2", "feed_forward.w_2"),
    ("final_layer_norm", "sublayer.1.norm"),
];
const DECODER_LAYER: &[(&str, &str)] = &[
    ("self_attn.q_proj", "self_attn.linears.0"),
    ("self_attn.k_proj", "self_attn.linears.1"),
    ("self_attn.v_proj", "self_attn.linears.2"),
    ("self_attn.out_proj", "self_attn.linears.3"),
    ("self_attn_layer_norm", "sublayer.0.norm"),
    ("encoder_attn.q_proj", "src_attn.linears.0"),
    ("encoder_attn.k_proj", "src_attn.linears.1"),
    ("encoder_attn.v_proj", "src_attn.linears.2"),
    ("encoder_attn.out_proj", "src_attn.linears.3"),
    ("encoder_attn_layer_norm", "sublayer.1.norm"),
    ("fc1", "feed_forward.w_1"),
    ("fc2", "feed_forward.w_2"),
    ("final_layer_norm", "sublayer.2.norm"),
];

/// Tensors outside the layers: (Marian's name, ours).
const OUTSIDE_LAYERS: &[(&str, &str)] = &[
    (
        "model.encoder.embed_tokens.weight",
        "src_embed.0.lut.weight",
    ),
    (
        "model.decoder.embed_tokens.weight",
        "tgt_embed.0.lut.weight",
    ),
    ("model.encoder.embed_positions.weight", "src_embed.1.pe"),
    ("model.decoder.embed_positions.weight", "tgt_embed.1.pe"),
    ("lm_head.weight", "generator.proj.weight"),
    ("final_logits_bias", "generator.proj.bias"),
    // The final norm of each pre-norm stack (M2M100's and NLLB's; MarianMT has none).
    ("model.encoder.layer_norm.weight", "encoder.norm.weight"),
    ("model.encoder.layer_norm.bias", "encoder.norm.bias"),
    ("model.decoder.layer_norm.weight", "decoder.norm.weight"),
    ("model.decoder.layer_norm.bias", "decoder.norm.bias"),
];

/// `name` (`<prefix>.<i>.<rest>`) with its layer part mapped through `table`, in the
/// direction `from_marian` says.
fn map_layer(name: &str, from_marian: bool) -> Option<String> {
    let (stacks, to_prefix) = if from_marian {
        (
            [
                ("model.encoder.layers.", "encoder.layers."),
                ("model.decoder.layers.", "decoder.layers."),
            ],
            true,
        )
    } else {
        (
            [
                ("encoder.layers.", "model.encoder.layers."),
                ("decoder.layers.", "model.decoder.layers."),
            ],
            false,
        )
    };
    for (index, (from, to)) in stacks.into_iter().enumerate() {
        let Some(rest) = name.strip_prefix(from) else {
            continue;
        };
        let (layer, inside) = rest.split_once('.')?;
        layer.parse::<usize>().ok()?;
        let (module, leaf) = inside.rsplit_once('.')?;
        let table = if index == 0 {
            ENCODER_LAYER
        } else {
            DECODER_LAYER
        };
        let mapped = table.iter().find_map(|(marian, ours)| {
            let (have, give) = if to_prefix {
                (marian, ours)
            } else {
                (ours, marian)
            };
            (module == *have).then_some(*give)
        })?;
        return Some(format!("{to}{layer}.{mapped}.{leaf}"));
    }
    None
}

impl WeightFormat for MarianFormat {
    fn name(&self) -> &'static str {
        "MarianMT's state_dict"
    }

    fn module_names(&self, file_name: &str) -> Vec<String> {
        if file_name == "model.shared.weight" {
            return vec![
                "src_embed.0.lut.weight".into(),
                "tgt_embed.0.lut.weight".into(),
            ];
        }
        if let Some((_, ours)) = OUTSIDE_LAYERS
            .iter()
            .find(|(marian, _)| *marian == file_name)
        {
            return vec![ours.to_string()];
        }
        map_layer(file_name, true).into_iter().collect()
    }

    fn as_module(&self, module: &str, tensor: Tensor) -> candle_core::Result<Tensor> {
        match module {
            // (1, vocab) in the file, a bias vector here.
            "generator.proj.bias" => tensor.flatten_all(),
            // (positions, d_model) in the file, (1, positions, d_model) here.
            "src_embed.1.pe" | "tgt_embed.1.pe" => tensor.unsqueeze(0),
            _ => Ok(tensor),
        }
    }

    fn file_name<'a>(&self, module_name: &'a str) -> Cow<'a, str> {
        if self.shared && module_name.ends_with("_embed.0.lut.weight") {
            return Cow::Borrowed("model.shared.weight");
        }
        if let Some((marian, _)) = OUTSIDE_LAYERS.iter().find(|(_, ours)| *ours == module_name) {
            return Cow::Borrowed(marian);
        }
        map_layer(module_name, false).map_or(Cow::Borrowed(module_name), Cow::Owned)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layer_names_map_both_ways() {
        let ours = map_layer("model.decoder.layers.3.encoder_attn.k_proj.bias", true).unwrap();
        assert_eq!(ours, "decoder.layers.3.src_attn.linears.1.bias");
        assert_eq!(
            map_layer(&ours, false).unwrap(),
            "model.decoder.layers.3.encoder_attn.k_proj.bias"
        );
        let ours = map_layer("model.encoder.layers.0.final_layer_norm.weight", true).unwrap();
        assert_eq!(ours, "encoder.layers.0.sublayer.1.norm.weight");
        assert_eq!(
            map_layer("model.decoder.layers.0.final_layer_norm.weight", true).unwrap(),
            "decoder.layers.0.sublayer.2.norm.weight"
        );
        assert_eq!(map_layer("model.encoder.layers.x.fc1.weight", true), None);
        assert_eq!(map_layer("model.encoder.layers.0.lost.weight", true), None);
        let format = MarianFormat { shared: true };
        assert_eq!(
            format.file_name("tgt_embed.0.lut.weight"),
            "model.shared.weight"
        );
        assert_eq!(format.file_name("generator.proj.bias"), "final_logits_bias");
    }
}
