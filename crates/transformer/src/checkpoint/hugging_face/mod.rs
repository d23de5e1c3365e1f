//! A Hugging Face directory of a family this tool runs, read as a checkpoint with no
//! conversion step, and written back: MarianMT (OPUS-MT) and M2M100 / NLLB-200.
//! `config.json` becomes the `[model]` section by its `model_type` (`families.rs`, each
//! family's reader in `marian.rs` and `m2m100.rs` over the BART family's sizes, `bart.rs`),
//! the weights (`model.safetensors`, or `pytorch_model.bin`) load through [`MarianFormat`]
//! (`key_table.rs`: the BART family's names) onto the same modules as our own checkpoints,
//! `generation_config.json` gives the `[decode]` defaults (transformers' `generate()`
//! settings), and the tokenizer files are the family's ([`crate::tokenize::marian`],
//! [`crate::tokenize::multilingual`]), checked against the config and the weights
//! (`agreement.rs`). `transformer export --to hf` writes a checkpoint back as its family's
//! directory (`export.rs`).

mod agreement;
mod bart;
pub mod export;
mod export_files;
mod export_m2m100;
mod export_marian;
mod families;
mod json;
mod key_table;
pub mod m2m100;
mod marian;

use std::path::{Path, PathBuf};

pub use agreement::{check_agreement, check_sizes};
pub use families::{model_type, read_config, MODEL_TYPES};
pub use key_table::MarianFormat;

/// transformers' names for a model directory's files.
pub const CONFIG_JSON: &str = "config.json";
pub const GENERATION_CONFIG_JSON: &str = "generation_config.json";
pub const TOKENIZER_CONFIG_JSON: &str = "tokenizer_config.json";
pub const SAFETENSORS_FILE: &str = "model.safetensors";
pub const PYTORCH_FILE: &str = "pytorch_model.bin";

/// A Hugging Face directory this tool cannot run: its `model_type` is none it runs, or a
/// file its family needs (its tokenizer's) is missing. The message names the file.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct Unrunnable(pub String);

/// Refuses the directory `dir` of family `model_type` (one of [`MODEL_TYPES`]) when a file
/// the family needs is missing, naming the file, before anything is read.
pub fn check_files(dir: &Path, model_type: &str) -> anyhow::Result<()> {
    let Some((_, families, needs)) = MODEL_TYPES.iter().find(|(t, _, _)| *t == model_type) else {
        return Ok(());
    };
    // A file there but not a regular one (a link to a device) is named as such: a damaged
    // directory, not a missing file.
    for file in needs.iter().flat_map(|need| need.split('|')) {
        let path = dir.join(file);
        if let Some(what) = crate::small_file::not_regular(&path) {
            return Err(crate::small_file::not_regular_error(&path, what));
        }
    }
    // A need `a|b` is met by either file.
    let missing = needs
        .iter()
        .find(|need| !need.split('|').any(|file| dir.join(file).is_file()));
    match missing {
        Some(need) => Err(Unrunnable(format!(
            "{} has no {}, which {families} models need (their tokenizer); copy it from \
             where the model came from",
            dir.display(),
            need.replace('|', " or ")
        ))
        .into()),
        None => Ok(()),
    }
}

/// Whether `dir` is a Hugging Face directory (a `config.json` and no config of ours).
pub fn is_hugging_face_dir(dir: &Path) -> bool {
    // A config.json in any form (a link to a device, a FIFO) makes it one, to be refused by
    // name when read.
    std::fs::symlink_metadata(dir.join(CONFIG_JSON)).is_ok()
        && !dir.join(crate::checkpoint::CONFIG_FILE).is_file()
}

/// The weights file of a model directory: `model.safetensors`, else `pytorch_model.bin`.
pub fn weights_file(dir: &Path) -> anyhow::Result<PathBuf> {
    for name in [SAFETENSORS_FILE, PYTORCH_FILE] {
        let path = dir.join(name);
        if let Some(what) = crate::small_file::not_regular(&path) {
            return Err(crate::small_file::not_regular_error(&path, what));
        }
    }
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
