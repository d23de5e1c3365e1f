//! A safetensors file read one tensor at a time: its header, then each tensor's bytes straight
//! into that tensor. candle's `safetensors::load` reads the whole file into memory first, so a
//! load peaked at twice the weights (0.6 GB for OPUS-MT's 74M parameters, which set the
//! process's peak: int8 decoding keeps a quarter of that).

use std::collections::HashMap;
use std::fs::File;
use std::io::Read;
use std::os::unix::fs::FileExt;
use std::path::Path;

use anyhow::{bail, Context};
use candle_core::{DType, Device, Tensor};
use serde::Deserialize;

/// The longest header read (safetensors' own limit).
const MOST_HEADER_BYTES: u64 = 100_000_000;

/// One tensor's entry in the header.
#[derive(Deserialize)]
struct Entry {
    dtype: String,
    shape: Vec<usize>,
    data_offsets: (u64, u64),
}

/// Every tensor of the safetensors file at `path`, on `device`; the error says what is wrong
/// with the file.
pub fn read(path: &Path, device: &Device) -> anyhow::Result<HashMap<String, Tensor>> {
    let mut file = File::open(path)?;
    let length = file.metadata()?.len();
    let mut size = [0u8; 8];
    file.read_exact(&mut size)
        .context("it is shorter than a safetensors header")?;
    let header_bytes = u64::from_le_bytes(size);
    if header_bytes > MOST_HEADER_BYTES || 8 + header_bytes > length {
        bail!("its header length ({header_bytes} bytes) does not fit the file ({length} bytes)");
    }
    let mut header = vec![0u8; header_bytes as usize];
    file.read_exact(&mut header)?;
    let mut entries: HashMap<String, serde_json::Value> =
        serde_json::from_slice(&header).context("its header is not safetensors' JSON")?;
    entries.remove("__metadata__");
    let data_start = 8 + header_bytes;
    let mut tensors = HashMap::with_capacity(entries.len());
    for (name, entry) in entries {
        let entry: Entry = serde_json::from_value(entry)
            .with_context(|| format!("its header's entry for {name} is malformed"))?;
        let tensor = read_one(&file, &entry, data_start, length, device)
            .with_context(|| format!("tensor {name}"))?;
        tensors.insert(name, tensor);
    }
    Ok(tensors)
}

fn read_one(
    file: &File,
    entry: &Entry,
    data_start: u64,
    length: u64,
    device: &Device,
) -> anyhow::Result<Tensor> {
    let (dtype, width) = match entry.dtype.as_str() {
        "F32" => (DType::F32, 4),
        "F16" => (DType::F16, 2),
        "BF16" => (DType::BF16, 2),
        "F64" => (DType::F64, 8),
        "I64" => (DType::I64, 8),
        "U8" => (DType::U8, 1),
        "U32" => (DType::U32, 4),
        other => bail!("has dtype {other}, which no checkpoint holds"),
    };
    let (start, end) = entry.data_offsets;
    let elements: usize = entry.shape.iter().product();
    let expected = (elements as u64).checked_mul(width);
    if end < start || expected != Some(end - start) || data_start + end > length {
        bail!(
            "its bytes {start}..{end} do not hold {:?} {} values inside the file",
            entry.shape,
            entry.dtype
        );
    }
    let mut bytes = vec![0u8; (end - start) as usize];
    file.read_exact_at(&mut bytes, data_start + start)?;
    Ok(Tensor::from_raw_buffer(
        &bytes,
        dtype,
        &entry.shape,
        device,
    )?)
}

#[cfg(test)]
mod tests {
    use super::*;

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
        let read = read(&path, &Device::Cpu).unwrap();
        assert_eq!(
            read["a"].to_vec2::<f32>().unwrap(),
            a.to_vec2::<f32>().unwrap()
        );
        assert_eq!(read["b"].dtype(), DType::BF16);
        let bytes = std::fs::read(&path).unwrap();
        std::fs::write(&path, &bytes[..bytes.len() - 3]).unwrap();
        let error = format!("{:#}", read_err(&path));
        assert!(error.contains("do not hold"), "{error}");
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
