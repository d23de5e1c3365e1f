//! `transformer export --to hf`: a checkpoint written as a Hugging Face directory of its
//! family, which transformers' `from_pretrained` and CTranslate2's `ct2-transformers-converter`
//! read: a MarianMT one (`export_marian.rs`), or an M2M100 / NLLB-200 one for a multilingual
//! model's (`export_m2m100.rs`). Written whole or not at all, as our checkpoints are.

use std::collections::HashMap;
use std::path::Path;

use candle_core::Tensor;

use super::{export_m2m100, export_marian};
use super::{CONFIG_JSON, GENERATION_CONFIG_JSON, SAFETENSORS_FILE, TOKENIZER_CONFIG_JSON};
use crate::checkpoint::Destination;
use crate::config::Config;
use crate::tokenize::marian::{TARGET_VOCAB_FILE, VOCAB_FILE};
use crate::tokenize::Tokenizers;

/// The files an export writes (the tokenizers' as each family's tokenizer has them).
pub const WRITTEN: &[&str] = &[
    CONFIG_JSON,
    GENERATION_CONFIG_JSON,
    TOKENIZER_CONFIG_JSON,
    SAFETENSORS_FILE,
    crate::tokenize::marian::SOURCE_SPM,
    crate::tokenize::marian::TARGET_SPM,
    VOCAB_FILE,
    TARGET_VOCAB_FILE,
    crate::tokenize::multilingual::M2M100_MODEL_FILE,
    crate::tokenize::multilingual::NLLB_TOKENIZER_FILE,
];

/// Writes the checkpoint read from `source_dir` (its config, tokenizers and module-named
/// `tensors`) into `out` (locked, and checked by the caller) as a Hugging Face directory of
/// its family: an M2M100 / NLLB-200 one for a multilingual model's, else a MarianMT one.
pub fn export_hugging_face(
    source_dir: &Path,
    config: &Config,
    tokenizers: &Tokenizers,
    tensors: &HashMap<String, Tensor>,
    out: Destination,
) -> anyhow::Result<()> {
    if tokenizers.multilingual_tokenizer().is_some() {
        return export_m2m100::export_m2m100(source_dir, config, tokenizers, tensors, out);
    }
    export_marian::export_marian(source_dir, config, tokenizers, tensors, out)
}
