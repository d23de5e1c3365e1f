//! The settings a checkpoint puts under every request: its `[decode]` (named by the file that
//! holds it), bounded by its model.

use super::{DecodeRequest, DecodeSettings, Refused, GENERATION_CONFIG_KEYS};
use crate::checkpoint::{self, Checkpoint};

/// The settings of a door over `loaded`: its `[decode]`, then `asked` (a door's own
/// settings: flags, a server's defaults); `door_beam` is the door's widest beam.
pub fn settings_of(
    loaded: &Checkpoint,
    asked: Option<DecodeRequest>,
    door_beam: Option<usize>,
) -> Result<DecodeSettings, Refused> {
    let requests = std::iter::once(config_request(loaded))
        .chain(asked)
        .collect();
    DecodeSettings::settle(
        &loaded.config.decode,
        requests,
        loaded.tokenizers.tgt.vocab_size(),
        loaded.model.max_positions(),
        door_beam,
    )
}

/// The checkpoint's `[decode]` as a request, named by the file that holds it.
fn config_request(loaded: &Checkpoint) -> DecodeRequest {
    if checkpoint::hugging_face::is_hugging_face_dir(&loaded.dir) {
        // transformers' generation settings, named as generation_config.json names them.
        let request =
            DecodeRequest::of_config(&loaded.config.decode, loaded.config.source_name.clone());
        return DecodeRequest {
            names: GENERATION_CONFIG_KEYS,
            ..request
        };
    }
    let file = loaded.dir.join(checkpoint::CONFIG_FILE);
    DecodeRequest::of_config(&loaded.config.decode, file.display().to_string())
}
