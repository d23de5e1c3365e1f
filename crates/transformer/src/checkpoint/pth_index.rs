//! A PyTorch `torch.save` file (`pytorch_model.bin`, a zip of a pickle and one entry per
//! storage) read one tensor at a time, as [`super::tensor_index::TensorIndex`] reads a
//! safetensors file: a matrix decoding reads in int8 is quantized a block of rows at a time
//! as its entry streams out of the zip, and a storage several names share (a tied table a
//! state_dict lists under four names) can be read once, by its [`PthIndex::storage`].

use std::fs::File;
use std::io::{BufReader, Read};
use std::path::Path;
use std::sync::Mutex;

use anyhow::{bail, Context};
use candle_core::pickle::{PthTensors, TensorInfo};
use candle_core::{Device, Tensor};

use super::tensor_index::quantized_blocks;

/// The zip a PyTorch file is, its central directory read once.
type Archive = zip::ZipArchive<BufReader<File>>;

/// A PyTorch file, its pickle read, its tensors read on request.
pub struct PthIndex {
    tensors: PthTensors,
    archive: Mutex<Archive>,
}

impl PthIndex {
    /// Opens the PyTorch file at `path`; the error says what is wrong with it.
    pub fn open(path: &Path) -> anyhow::Result<Self> {
        let mut archive = zip::ZipArchive::new(BufReader::new(File::open(path)?))?;
        check_small_entries(&mut archive)?;
        Ok(Self {
            tensors: PthTensors::new(path, None)?,
            archive: Mutex::new(archive),
        })
    }

    /// The tensors' names, sorted.
    pub fn names(&self) -> Vec<String> {
        let mut names: Vec<String> = self.tensors.tensor_infos().keys().cloned().collect();
        names.sort();
        names
    }

    fn info(&self, name: &str) -> anyhow::Result<&TensorInfo> {
        self.tensors
            .tensor_infos()
            .get(name)
            .with_context(|| format!("it has no tensor {name}"))
    }

    /// The dtype of `name` as safetensors spells it, and its shape.
    pub fn stored(&self, name: &str) -> anyhow::Result<(String, Vec<usize>)> {
        let info = self.info(name)?;
        let dtype = super::tensor_file::dtype_name(info.dtype).to_string();
        Ok((dtype, info.layout.dims().to_vec()))
    }

    /// Which values `name` holds: names with one storage, offset and shape hold the same.
    pub fn storage(&self, name: &str) -> anyhow::Result<String> {
        let info = self.info(name)?;
        Ok(format!(
            "{} {} {:?} {:?}",
            info.path,
            info.layout.start_offset(),
            info.layout.dims(),
            info.layout.stride()
        ))
    }

    /// The tensor `name` as stored, on `device`; its storage's zip entry is read to its end,
    /// so that the entry's CRC-32 is checked.
    pub fn read(&self, name: &str, device: &Device) -> anyhow::Result<Tensor> {
        let info = self.info(name)?;
        if !info.layout.is_contiguous() {
            let tensor = self
                .tensors
                .get(name)?
                .with_context(|| format!("it has no tensor {name}"))?;
            return Ok(tensor.to_device(device)?);
        }
        let mut bytes = vec![0u8; info.layout.shape().elem_count() * info.dtype.size_in_bytes()];
        self.with_values(info, |values| values.read_exact(&mut bytes))?;
        Ok(Tensor::from_raw_buffer(
            &bytes,
            info.dtype,
            info.layout.dims(),
            device,
        )?)
    }

    /// Runs `read` on the zip entry of `info`'s storage from the tensor's first value, then
    /// drains the entry to its end so that the zip reader checks its CRC-32: a damaged byte is
    /// an error naming the tensor, not a wrong weight.
    fn with_values<T>(
        &self,
        info: &TensorInfo,
        read: impl FnOnce(&mut dyn Read) -> std::io::Result<T>,
    ) -> anyhow::Result<T> {
        let mut archive = self.archive.lock().unwrap_or_else(|e| e.into_inner());
        let mut entry = archive.by_name(&info.path)?;
        // candle's start_offset for a pickled tensor already counts bytes.
        let skip = info.layout.start_offset() as u64;
        let skipped = std::io::copy(&mut entry.by_ref().take(skip), &mut std::io::sink())?;
        if skipped != skip {
            bail!("its storage {} ends before its values start", info.path);
        }
        let value = read(&mut entry)?;
        std::io::copy(&mut entry, &mut std::io::sink())?;
        Ok(value)
    }

    /// The float matrix `name` quantized per row as its storage streams out of the zip (see
    /// [`quantized_blocks`]); a matrix stored other than row-major is read whole first.
    pub fn read_int8_rows(&self, name: &str) -> anyhow::Result<(Tensor, Tensor)> {
        let info = self.info(name)?;
        let &[rows, cols] = info.layout.dims() else {
            bail!(
                "tensor {name} is not a matrix: shape {:?}",
                info.layout.dims()
            );
        };
        if !info.layout.is_contiguous() {
            let matrix = self.read(name, &Device::Cpu)?;
            return Ok(super::int8_file::quantized(&matrix)?);
        }
        self.with_values(info, |values| {
            quantized_blocks(rows, cols, info.dtype, |block| values.read_exact(block))
                .map_err(|e| std::io::Error::other(format!("{e:#}")))
        })
    }
}

/// Checks the CRC-32 of every entry of `archive` but the storages' (the pickle, its byte
/// order and version): candle's pickle reader stops at the pickle's last opcode, before the
/// zip reader would check it, and one flipped bit there can point a weight at another
/// storage. The storages are checked as they are read.
fn check_small_entries(archive: &mut Archive) -> anyhow::Result<()> {
    for index in 0..archive.len() {
        let mut entry = archive.by_index(index)?;
        let name = entry.name()?.to_string();
        if name.contains("/data/") {
            continue;
        }
        std::io::copy(&mut entry, &mut std::io::sink()).with_context(|| format!("entry {name}"))?;
    }
    Ok(())
}
