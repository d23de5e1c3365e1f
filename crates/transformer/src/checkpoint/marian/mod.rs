//! A Hugging Face MarianMT directory (an OPUS-MT model from the Hub) read as a checkpoint,
//! with no conversion step: `config.json` becomes the `[model]` section (`config.rs`), the
//! weights (`model.safetensors`, or `pytorch_model.bin`) load through [`MarianFormat`]
//! (`key_table.rs`) onto the same modules as our own checkpoints, `generation_config.json`
//! gives the `[decode]` defaults (transformers' `generate()` settings), and `source.spm` /
//! `target.spm` / `vocab.json` are the tokenizer ([`crate::tokenize::marian`]), checked against
//! the config and the weights (`agreement.rs`).

mod agreement;
mod config;
mod json;
mod key_table;
pub mod m2m100;

use std::path::{Path, PathBuf};

pub use agreement::{check_agreement, check_sizes};
pub use config::{read_config, MODEL_TYPES};
pub use key_table::MarianFormat;

/// transformers' names for a Marian directory's files.
pub const CONFIG_JSON: &str = "config.json";
pub const GENERATION_CONFIG_JSON: &str = "generation_config.json";
pub const TOKENIZER_CONFIG_JSON: &str = "tokenizer_config.json";
pub const SAFETENSORS_FILE: &str = "model.safetensors";
pub const PYTORCH_FILE: &str = "pytorch_model.bin";

/// Whether `dir` is a Hugging Face directory (a `config.json` and no config of ours).
pub fn is_hugging_face_dir(dir: &Path) -> bool {
    dir.join(CONFIG_JSON).is_file() && !dir.join(crate::checkpoint::CONFIG_FILE).is_file()
}

/// The weights file of a Marian directory: `model.safetensors`, else `pytorch_model.bin`.
pub fn weights_file(dir: &Path) -> anyhow::Result<PathBuf> {
    [SAFETENSORS_FILE, PYTORCH_FILE]
        .into_iter()
        .map(|name| dir.join(name))
        .find(|path| path.is_file())
        .ok_or_else(|| {
            anyhow::anyhow!(
                "{} has a {CONFIG_JSON} but neither {SAFETENSORS_FILE} nor {PYTORCH_FILE}; \
                 download the model's weights too (git lfs pull in a cloned Hub repository)",
                dir.display()
            )
        })
}
