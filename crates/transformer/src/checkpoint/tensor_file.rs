//! What this tool's safetensors files carry besides their tensors: the checksum it writes
//! with them (checked when they are read, `tensor_index.rs`), a header kept in one order, the
//! dtypes a checkpoint may hold, and whether a file holds int8 matrices.

use std::collections::HashMap;
use std::fs::File;
use std::io::Read;
use std::os::unix::fs::FileExt;
use std::path::Path;

use candle_core::{DType, Tensor};
use xxhash_rust::xxh3::Xxh3;

/// The longest header read (safetensors' own limit).
pub(super) const MOST_HEADER_BYTES: u64 = 100_000_000;

/// The `__metadata__` key of the checksum this tool writes with its tensor files: what was
/// written is what is read, or the file is refused (an edited scale or bias translated
/// nonsense with status 0). Files written elsewhere have none and are read unchecked.
pub const CHECKSUM_KEY: &str = "transformer_checksum";

/// The checksum of a tensor file: XXH3 of each tensor's name and stored bytes, combined in
/// name order, so that it does not depend on where safetensors lays the tensors out.
#[derive(Default)]
pub struct TensorDigest(Vec<(String, u64)>);

impl TensorDigest {
    /// Adds the tensor `name` whose bytes in the file are `bytes`.
    pub fn add(&mut self, name: &str, bytes: &[u8]) {
        let mut hasher = Self::hasher(name);
        hasher.update(bytes);
        self.push(name, hasher);
    }

    /// The hasher of tensor `name`'s bytes, to be given them in order, then [`Self::push`]ed.
    pub fn hasher(name: &str) -> Xxh3 {
        let mut hasher = Xxh3::new();
        hasher.update(&(name.len() as u64).to_le_bytes());
        hasher.update(name.as_bytes());
        hasher
    }

    /// Adds tensor `name`, its bytes given to `hasher`.
    pub fn push(&mut self, name: &str, hasher: Xxh3) {
        self.0.push((name.to_string(), hasher.digest()));
    }

    /// The checksum, as the metadata holds it.
    pub fn finish(mut self) -> String {
        self.0.sort();
        let mut hasher = Xxh3::new();
        for (name, digest) in &self.0 {
            hasher.update(name.as_bytes());
            hasher.update(&digest.to_le_bytes());
        }
        format!("xxh3:{:016x}", hasher.digest())
    }
}

/// Shows `seen` the bytes a contiguous CPU tensor of F32 or U8 is stored as in a
/// safetensors file (little-endian), read in place; false, and nothing shown, for any
/// other tensor (this tool writes no other).
pub fn with_stored_bytes(tensor: &Tensor, seen: impl FnOnce(&[u8])) -> candle_core::Result<bool> {
    let (storage, layout) = tensor.storage_and_layout();
    let candle_core::Storage::Cpu(cpu) = &*storage else {
        return Ok(false);
    };
    if !layout.is_contiguous() || cfg!(target_endian = "big") {
        return Ok(false);
    }
    let (start, count) = (layout.start_offset(), tensor.elem_count());
    match tensor.dtype() {
        DType::U8 => seen(&cpu.as_slice::<u8>()?[start..start + count]),
        DType::F32 => {
            let values = &cpu.as_slice::<f32>()?[start..start + count];
            // SAFETY: the bytes of `values`, which on a little-endian CPU are the file's.
            let bytes = unsafe {
                std::slice::from_raw_parts(
                    values.as_ptr().cast::<u8>(),
                    std::mem::size_of_val(values),
                )
            };
            seen(bytes);
        }
        _ => return Ok(false),
    }
    Ok(true)
}

/// Rewrites the header of the safetensors file at `path` with its keys in sorted order:
/// safetensors writes `__metadata__` in a hash map's order, which changes from run to run,
/// and the same tensors must give the same file (an exact resume is checked byte for byte).
/// The header keeps its length (the same keys and values), so the data stays where it is.
pub fn sort_header(path: &Path) -> anyhow::Result<()> {
    use std::collections::BTreeMap;
    let mut file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)?;
    let mut size = [0u8; 8];
    file.read_exact(&mut size)?;
    let length = u64::from_le_bytes(size) as usize;
    let mut header = vec![0u8; length];
    file.read_exact(&mut header)?;
    let entries: BTreeMap<String, serde_json::Value> = serde_json::from_slice(&header)?;
    let sorted: BTreeMap<String, serde_json::Value> = entries
        .into_iter()
        .map(|(name, value)| match value {
            serde_json::Value::Object(map) if name == "__metadata__" => {
                let metadata: BTreeMap<String, serde_json::Value> = map.into_iter().collect();
                (name, serde_json::json!(metadata))
            }
            other => (name, other),
        })
        .collect();
    let mut text = serde_json::to_vec(&sorted)?;
    if text.len() > length {
        return Ok(());
    }
    text.resize(length, b' ');
    file.write_all_at(&text, 8)?;
    Ok(())
}

/// The dtypes a checkpoint's weights file may hold, as safetensors spells them.
pub const CHECKPOINT_DTYPES: &str = "F32, F16, BF16 (and I8 for an int8 checkpoint's matrices)";

/// A candle dtype as safetensors spells it (a file's `U8` and `I8` are both `U8` in candle:
/// where the file is at hand, say what it stores instead).
pub fn dtype_name(dtype: DType) -> &'static str {
    match dtype {
        DType::U8 => "U8",
        DType::U32 => "U32",
        DType::I64 => "I64",
        DType::BF16 => "BF16",
        DType::F16 => "F16",
        DType::F32 => "F32",
        DType::F64 => "F64",
        _ => "an unknown dtype",
    }
}

/// Whether the safetensors file at `path` holds an `I8` tensor, from its header alone; `None`
/// when the header cannot be read.
pub fn file_holds_int8(path: &Path) -> Option<bool> {
    let entries = header(path)?;
    Some(entries.values().any(|entry| entry["dtype"] == "I8"))
}

/// The safetensors file's header at `path`: each tensor's entry and `__metadata__`; `None`
/// when it cannot be read.
fn header(path: &Path) -> Option<HashMap<String, serde_json::Value>> {
    let mut file = File::open(path).ok()?;
    let mut size = [0u8; 8];
    file.read_exact(&mut size).ok()?;
    let header_bytes = u64::from_le_bytes(size);
    if header_bytes > MOST_HEADER_BYTES {
        return None;
    }
    let mut header = vec![0u8; header_bytes as usize];
    file.read_exact(&mut header).ok()?;
    serde_json::from_slice(&header).ok()
}

/// The value of `key` in the `__metadata__` of the safetensors file at `path`, if it has one.
pub fn metadata_value(path: &Path, key: &str) -> Option<String> {
    header(path)?
        .get("__metadata__")?
        .get(key)?
        .as_str()
        .map(str::to_string)
}

/// The `__metadata__` key of the model settings the weights were written for: the checksum
/// covers the tensors, this what they compute (a `heads` edited in config.toml changes no
/// tensor's shape, and the model read silently computes something else).
pub const MODEL_KEY: &str = "transformer_model";

/// The `[model]` settings that decide what a model's weights compute, as [`MODEL_KEY`] holds
/// them: every key but the dropouts, which only training reads (and a fine-tuning run may
/// change).
pub fn model_record(model: &crate::config::ModelConfig) -> anyhow::Result<String> {
    Ok(serde_json::Value::Object(model_settings(model)?).to_string())
}

/// [`model_record`]'s table, before it is written.
fn model_settings(
    model: &crate::config::ModelConfig,
) -> anyhow::Result<serde_json::Map<String, serde_json::Value>> {
    let serde_json::Value::Object(mut keys) = serde_json::to_value(model)? else {
        anyhow::bail!("the model's settings are not a table")
    };
    keys.remove("dropout");
    keys.remove("attention_dropout");
    Ok(keys)
}

/// Refuses `model` when the weights file at `path` was written for other model settings (its
/// [`MODEL_KEY`]), naming the first key that differs; a file without the key (written before
/// it, or elsewhere) is not checked.
pub fn check_model_record(path: &Path, model: &crate::config::ModelConfig) -> anyhow::Result<()> {
    let Some(written) = metadata_value(path, MODEL_KEY) else {
        return Ok(());
    };
    let written: serde_json::Value = serde_json::from_str(&written).map_err(|e| {
        anyhow::anyhow!(
            "{}: its {MODEL_KEY} metadata is not JSON: {e}",
            path.display()
        )
    })?;
    let now = model_settings(model)?;
    let Some(written) = written.as_object() else {
        anyhow::bail!(
            "{}: its {MODEL_KEY} metadata is not a table",
            path.display()
        )
    };
    let differs = now
        .iter()
        .find(|(key, value)| written.get(*key).is_some_and(|w| w != *value));
    if let Some((key, value)) = differs {
        anyhow::bail!(
            "model.{key} is {value} in the checkpoint's config.toml, but its weights ({}) \
             were written for model.{key} = {}: the config was edited after the weights were \
             written; restore model.{key} = {1} (if you changed it on purpose, remove \
             {MODEL_KEY} from the weights' __metadata__)",
            path.display(),
            written[key]
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::tensor_index::read;
    use super::*;
    use candle_core::Device;

    #[test]
    fn a_file_reads_back_as_candle_wrote_it_and_a_cut_one_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.safetensors");
        let a = Tensor::arange(0f32, 12.0, &Device::Cpu)
            .unwrap()
            .reshape((3, 4))
            .unwrap();
        let b = Tensor::new(&[1.5f32], &Device::Cpu)
            .unwrap()
            .to_dtype(DType::BF16)
            .unwrap();
        candle_core::safetensors::save(
            &HashMap::from([("a".to_string(), a.clone()), ("b".to_string(), b.clone())]),
            &path,
        )
        .unwrap();
        let read = read(&path, &Device::Cpu).unwrap().tensors;
        assert_eq!(
            read["a"].to_vec2::<f32>().unwrap(),
            a.to_vec2::<f32>().unwrap()
        );
        assert_eq!(read["b"].dtype(), DType::BF16);
        let bytes = std::fs::read(&path).unwrap();
        std::fs::write(&path, &bytes[..bytes.len() - 3]).unwrap();
        let error = format!("{:#}", read_err(&path));
        assert!(error.contains("it was cut"), "{error}");
        let mut appended = bytes.clone();
        appended.extend_from_slice(&[0; 8]);
        std::fs::write(&path, &appended).unwrap();
        let error = format!("{:#}", read_err(&path));
        assert!(error.contains("something was appended"), "{error}");
        // Two tensors over the same bytes (a's 48 bytes come first: b at 48..50).
        let text = String::from_utf8_lossy(&bytes).into_owned();
        let overlapped = text.replacen("[48,50]", "[ 0, 2]", 1);
        assert_ne!(overlapped, text, "the header's offsets are not as expected");
        std::fs::write(&path, overlapped.as_bytes()).unwrap();
        let error = format!("{:#}", read_err(&path));
        assert!(error.contains("overlap"), "{error}");
        std::fs::write(&path, &bytes[..5]).unwrap();
        let error = format!("{:#}", read_err(&path));
        assert!(
            error.contains("shorter than a safetensors header"),
            "{error}"
        );
    }

    fn read_err(path: &Path) -> anyhow::Error {
        read(path, &Device::Cpu).err().unwrap()
    }
}
