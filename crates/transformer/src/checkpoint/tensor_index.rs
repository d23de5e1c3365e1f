//! A safetensors file opened for reading one tensor at a time: its header checked to describe
//! the file (the tensors tile its data exactly) before anything is read, then each tensor read
//! when asked, as stored or, for a matrix decoding reads in int8, quantized a block of rows at
//! a time, so that no float copy of a large table is ever whole in memory (NLLB-200's shared
//! table is 1 GB in float32). Every byte read goes into the checksum the file may carry,
//! checked once all are read. candle's `safetensors::load` reads the whole file into memory
//! first, so a load peaked at twice the weights (0.6 GB for OPUS-MT's 74M parameters).

use std::collections::{HashMap, HashSet};
use std::fs::File;
use std::io::Read;
use std::os::unix::fs::FileExt;
use std::path::Path;

use anyhow::{bail, Context};
use candle_core::{DType, Device, Tensor};
use serde::Deserialize;

use super::tensor_file::{TensorDigest, CHECKPOINT_DTYPES, CHECKSUM_KEY, MOST_HEADER_BYTES};
use crate::kernels::int8::quantize_rows;

/// The most bytes of a matrix held as floats at once while it is quantized.
const QUANTIZED_BLOCK_BYTES: usize = 16 << 20;

/// One tensor's entry in the header.
#[derive(Deserialize)]
pub(super) struct Entry {
    pub(super) dtype: String,
    pub(super) shape: Vec<usize>,
    data_offsets: (u64, u64),
}

/// A safetensors file, its header read and checked, its tensors read on request.
pub struct TensorIndex {
    file: File,
    /// In the order of their bytes in the file.
    entries: Vec<(String, Entry)>,
    data_start: u64,
    pub metadata: HashMap<String, String>,
    digest: TensorDigest,
}

impl TensorIndex {
    /// Opens the safetensors file at `path`; the error says what is wrong with its header.
    pub fn open(path: &Path) -> anyhow::Result<Self> {
        let mut file = File::open(path)?;
        let length = file.metadata()?.len();
        let mut size = [0u8; 8];
        file.read_exact(&mut size)
            .context("it is shorter than a safetensors header")?;
        let header_bytes = u64::from_le_bytes(size);
        if header_bytes > MOST_HEADER_BYTES || 8 + header_bytes > length {
            bail!(
                "its header length ({header_bytes} bytes) does not fit the file ({length} bytes)"
            );
        }
        let mut header = vec![0u8; header_bytes as usize];
        file.read_exact(&mut header)?;
        let mut entries: HashMap<String, serde_json::Value> =
            serde_json::from_slice(&header).context("its header is not safetensors' JSON")?;
        let metadata: HashMap<String, String> = match entries.remove("__metadata__") {
            Some(metadata) => serde_json::from_value(metadata)
                .context("its header's __metadata__ is not an object of strings")?,
            None => HashMap::new(),
        };
        let mut entries = entries
            .into_iter()
            .map(|(name, entry)| {
                let entry: Entry = serde_json::from_value(entry)
                    .with_context(|| format!("its header's entry for {name} is malformed"))?;
                Ok((name, entry))
            })
            .collect::<anyhow::Result<Vec<(String, Entry)>>>()?;
        // The tensors' bytes must tile the data exactly, as safetensors writes them: an
        // overlap, a gap (where a duplicate name hid an entry) or bytes after the last tensor
        // mean the header does not describe the file; a cut file is told here, before
        // anything is read.
        entries.sort_by_key(|(_, entry)| entry.data_offsets);
        let data_start = 8 + header_bytes;
        let mut covered = 0;
        for (name, entry) in &entries {
            if entry.data_offsets.0 != covered {
                bail!(
                    "its header puts tensor {name} at byte {} of the data, where {covered} was \
                     expected (tensors overlap, or leave a gap)",
                    entry.data_offsets.0
                );
            }
            covered = entry.data_offsets.1.max(covered);
        }
        if data_start + covered != length {
            bail!(
                "its header describes {covered} bytes of tensors, and the file holds {} after \
                 the header (it was cut, or something was appended)",
                length - data_start
            );
        }
        Ok(Self {
            file,
            entries,
            data_start,
            metadata,
            digest: TensorDigest::default(),
        })
    }

    /// The tensors' names, in the order of their bytes in the file.
    pub fn names(&self) -> Vec<String> {
        self.entries.iter().map(|(name, _)| name.clone()).collect()
    }

    pub(super) fn entry(&self, name: &str) -> anyhow::Result<&Entry> {
        self.entries
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, entry)| entry)
            .with_context(|| format!("it has no tensor {name}"))
    }

    /// The tensor `name` as stored, on `device`.
    pub fn read(&mut self, name: &str, device: &Device) -> anyhow::Result<Tensor> {
        let entry = self.entry(name)?;
        let (dtype, width) = dtype_of(entry)?;
        let (start, elements) = self.extent(entry, width)?;
        let mut hasher = TensorDigest::hasher(name);
        let tensor = if dtype == DType::F32 && cfg!(target_endian = "little") {
            // Straight into the tensor's own buffer: no second copy of a large weight.
            let mut values = vec![0f32; elements];
            // SAFETY: the bytes of `values` (elements * 4 of them), which any bit pattern
            // fills with a valid f32; on a little-endian CPU they are the file's layout.
            let bytes = unsafe {
                std::slice::from_raw_parts_mut(values.as_mut_ptr().cast::<u8>(), elements * 4)
            };
            self.file.read_exact_at(bytes, start)?;
            hasher.update(bytes);
            Tensor::from_vec(values, entry.shape.as_slice(), device)?
        } else {
            let mut bytes = vec![0u8; elements * width];
            self.file.read_exact_at(&mut bytes, start)?;
            hasher.update(&bytes);
            Tensor::from_raw_buffer(&bytes, dtype, &entry.shape, device)?
        };
        self.digest.push(name, hasher);
        Ok(tensor)
    }

    /// The float matrix `name` quantized per row as it is read, a block of rows at a time:
    /// its int8 values (in a `U8` tensor) and row scales, on the CPU. A NaN or an infinity
    /// is an error that counts them, as a float weight's is.
    pub fn read_int8_rows(&mut self, name: &str) -> anyhow::Result<(Tensor, Tensor)> {
        let entry = self.entry(name)?;
        let (dtype, width) = dtype_of(entry)?;
        let &[rows, cols] = entry.shape.as_slice() else {
            bail!("tensor {name} is not a matrix: shape {:?}", entry.shape);
        };
        let (start, _) = self.extent(entry, width)?;
        let mut hasher = TensorDigest::hasher(name);
        let mut at = start;
        let file = &self.file;
        let quantized = quantized_blocks(rows, cols, dtype, |block| {
            file.read_exact_at(block, at)?;
            at += block.len() as u64;
            hasher.update(block);
            Ok(())
        })
        .with_context(|| format!("tensor {name}"))?;
        self.digest.push(name, hasher);
        Ok(quantized)
    }

    /// Checks the checksum the file was written with, if any, once every tensor is read.
    pub fn check_checksum(self) -> anyhow::Result<()> {
        let Some(written) = self.metadata.get(CHECKSUM_KEY) else {
            return Ok(());
        };
        let read = self.digest.finish();
        if *written != read {
            // Only what this tool writes is shown: the value is the file's, and may be anything.
            let shown = if written.len() == read.len()
                && written.starts_with("xxh3:")
                && written[5..].bytes().all(|b| b.is_ascii_hexdigit())
            {
                written.as_str()
            } else {
                "a malformed value"
            };
            bail!(
                "its tensors do not match the checksum they were written with ({CHECKSUM_KEY} \
                 {shown}, read {read}): they changed after it was written (if you changed \
                 them on purpose, remove {CHECKSUM_KEY} from its __metadata__)"
            );
        }
        Ok(())
    }

    /// Where `entry`'s bytes start in the file, and how many values they hold.
    fn extent(&self, entry: &Entry, width: usize) -> anyhow::Result<(u64, usize)> {
        let (start, end) = entry.data_offsets;
        let elements: usize = entry.shape.iter().product();
        let expected = (elements as u64).checked_mul(width as u64);
        // Inside the file: the header's offsets were checked to tile it.
        if end < start || expected != Some(end - start) {
            bail!(
                "its bytes {start}..{end} do not hold {:?} {} values",
                entry.shape,
                entry.dtype
            );
        }
        Ok((self.data_start + start, elements))
    }
}

/// A safetensors file's tensors, which of them the file stores as `I8` (held here in `U8`
/// tensors: candle has no `i8`), each one's dtype as the file names it, and its
/// `__metadata__`.
pub struct TensorFile {
    pub tensors: HashMap<String, Tensor>,
    pub int8: HashSet<String>,
    pub stored_dtypes: HashMap<String, String>,
    pub metadata: HashMap<String, String>,
}

/// Every tensor of the safetensors file at `path`, on `device`; the error says what is wrong
/// with the file.
pub fn read(path: &Path, device: &Device) -> anyhow::Result<TensorFile> {
    let mut index = TensorIndex::open(path)?;
    let names = index.names();
    let mut tensors = HashMap::with_capacity(names.len());
    let mut int8 = HashSet::new();
    let mut stored_dtypes = HashMap::with_capacity(names.len());
    for name in names {
        let tensor = index
            .read(&name, device)
            .with_context(|| format!("tensor {name}"))?;
        let stored = index.entry(&name)?.dtype.clone();
        if stored == "I8" {
            int8.insert(name.clone());
        }
        stored_dtypes.insert(name.clone(), stored);
        tensors.insert(name, tensor);
    }
    let metadata = index.metadata.clone();
    index.check_checksum()?;
    Ok(TensorFile {
        tensors,
        int8,
        stored_dtypes,
        metadata,
    })
}

/// The candle dtype an entry is read as, and its width in bytes.
fn dtype_of(entry: &Entry) -> anyhow::Result<(DType, usize)> {
    Ok(match entry.dtype.as_str() {
        "F32" => (DType::F32, 4),
        "F16" => (DType::F16, 2),
        "BF16" => (DType::BF16, 2),
        "F64" => (DType::F64, 8),
        "I64" => (DType::I64, 8),
        "U8" | "I8" => (DType::U8, 1),
        "U32" => (DType::U32, 4),
        other => bail!("has dtype {other}, where a checkpoint holds {CHECKPOINT_DTYPES}"),
    })
}

/// A float matrix of `rows` x `cols` values of `dtype` (F32, F16 or BF16, little-endian),
/// whose bytes `read_block` fills a block of rows at a time in order, quantized per row: its
/// int8 values (in a `U8` tensor) and row scales, on the CPU. A NaN or an infinity is an
/// error that counts them, as a float weight's is.
pub(super) fn quantized_blocks(
    rows: usize,
    cols: usize,
    dtype: DType,
    mut read_block: impl FnMut(&mut [u8]) -> std::io::Result<()>,
) -> anyhow::Result<(Tensor, Tensor)> {
    if !matches!(dtype, DType::F32 | DType::F16 | DType::BF16) {
        bail!("it is stored as {dtype:?}, not as floats");
    }
    let width = dtype.size_in_bytes();
    let block_rows = (QUANTIZED_BLOCK_BYTES / (cols.max(1) * 4)).max(1);
    let mut values = Vec::with_capacity(rows * cols);
    let mut scales = Vec::with_capacity(rows);
    let (mut bytes, mut floats) = (Vec::new(), Vec::new());
    let mut non_finite = 0usize;
    for first in (0..rows).step_by(block_rows) {
        let count = block_rows.min(rows - first);
        bytes.resize(count * cols * width, 0);
        read_block(&mut bytes)?;
        floats.clear();
        floats.extend(decoded(&bytes, dtype));
        non_finite += floats.iter().filter(|v| !v.is_finite()).count();
        let (block, block_scales) = quantize_rows(&floats, count, cols);
        values.extend(block.into_iter().map(|v| v as u8));
        scales.extend(block_scales);
    }
    if non_finite > 0 {
        bail!(
            "holds {non_finite} NaN or infinite value{} of {}",
            if non_finite == 1 { "" } else { "s" },
            rows * cols
        );
    }
    Ok((
        Tensor::from_vec(values, (rows, cols), &Device::Cpu)?,
        Tensor::from_vec(scales, rows, &Device::Cpu)?,
    ))
}

/// Little-endian float `bytes` of `dtype` (F32, F16 or BF16) as f32s.
fn decoded(bytes: &[u8], dtype: DType) -> impl Iterator<Item = f32> + '_ {
    let width = if dtype == DType::F32 { 4 } else { 2 };
    bytes.chunks_exact(width).map(move |b| match dtype {
        DType::F32 => f32::from_le_bytes([b[0], b[1], b[2], b[3]]),
        DType::F16 => half::f16::from_le_bytes([b[0], b[1]]).to_f32(),
        _ => half::bf16::from_le_bytes([b[0], b[1]]).to_f32(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_matrix_quantized_block_by_block_is_the_whole_matrix_quantized() {
        // Over QUANTIZED_BLOCK_BYTES as f32, so that it is read in several blocks.
        let (rows, cols) = (4200, 1024);
        let matrix = Tensor::randn(0f32, 1.0, (rows, cols), &Device::Cpu).unwrap();
        let half = Tensor::randn(0f32, 1.0, (3, 5), &Device::Cpu)
            .unwrap()
            .to_dtype(DType::BF16)
            .unwrap();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("m.safetensors");
        candle_core::safetensors::save(
            &HashMap::from([
                ("m".to_string(), matrix.clone()),
                ("h".into(), half.clone()),
            ]),
            &path,
        )
        .unwrap();
        let mut index = TensorIndex::open(&path).unwrap();
        let (values, scales) = index.read_int8_rows("m").unwrap();
        let (want_values, want_scales) = quantize_rows(
            &matrix.flatten_all().unwrap().to_vec1().unwrap(),
            rows,
            cols,
        );
        let want_values: Vec<u8> = want_values.into_iter().map(|v| v as u8).collect();
        assert_eq!(
            values.flatten_all().unwrap().to_vec1::<u8>().unwrap(),
            want_values
        );
        assert_eq!(scales.to_vec1::<f32>().unwrap(), want_scales);
        let (_, half_scales) = index.read_int8_rows("h").unwrap();
        assert_eq!(half_scales.dims(), [3]);
    }

    #[test]
    fn a_non_finite_value_in_a_matrix_read_as_int8_is_refused_with_its_count() {
        let matrix = Tensor::new(&[[1f32, f32::NAN], [f32::INFINITY, 2.0]], &Device::Cpu).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("m.safetensors");
        candle_core::safetensors::save(&HashMap::from([("m".to_string(), matrix)]), &path).unwrap();
        let error = TensorIndex::open(&path)
            .unwrap()
            .read_int8_rows("m")
            .unwrap_err();
        let said = format!("{error:#}");
        assert!(
            said.contains("holds 2 NaN or infinite values of 4"),
            "{said}"
        );
    }
}
