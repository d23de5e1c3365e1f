//! The layers a checkpoint puts under every request's decoding settings: its `[decode]`
//! (named by the file that holds it) and what its model bounds.

use super::{DecodeBounds, Layer, Refused, Resolver, GENERATION_CONFIG_KEYS};
use crate::checkpoint::{self, Checkpoint};

/// The resolver of a door over `loaded`: its `[decode]`, then `asked` (a door's own
/// settings: flags, a server's defaults); `door_beam` is the door's widest beam.
pub fn resolver_of(
    loaded: &Checkpoint,
    asked: Option<Layer>,
    door_beam: Option<usize>,
) -> Result<Resolver, Refused> {
    let layers = std::iter::once(config_layer(loaded)).chain(asked).collect();
    Resolver::new(layers, bounds(loaded, door_beam))
}

/// The checkpoint's `[decode]` as a settings layer, named by the file that holds it.
fn config_layer(loaded: &Checkpoint) -> Layer {
    if checkpoint::hugging_face::is_hugging_face_dir(&loaded.dir) {
        // transformers' generation settings, named as generation_config.json names them.
        let mut layer = Layer::config(&loaded.config.decode, loaded.config.source_name.clone());
        layer.names = GENERATION_CONFIG_KEYS;
        return layer;
    }
    let file = loaded.dir.join(checkpoint::CONFIG_FILE);
    Layer::config(&loaded.config.decode, file.display().to_string())
}

/// What decoding settings are checked against; `door_beam` is a door's widest beam.
fn bounds(loaded: &Checkpoint, door_beam: Option<usize>) -> DecodeBounds {
    let decode = &loaded.config.decode;
    DecodeBounds {
        target_vocab: loaded.tokenizers.tgt.vocab_size(),
        max_positions: loaded.model.max_positions(),
        door_beam,
        length_normalization: decode.length_normalization,
        end_at_max_len: decode.end_at_max_len,
        renormalize: decode.renormalize,
        length_ratio: decode.length_ratio_or_default() as f32,
    }
}
