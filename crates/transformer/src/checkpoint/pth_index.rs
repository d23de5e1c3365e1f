//! A PyTorch `torch.save` file (`pytorch_model.bin`, a zip of a pickle and one entry per
//! storage) read one tensor at a time, as [`super::tensor_index::TensorIndex`] reads a
//! safetensors file: a matrix decoding reads in int8 is quantized a block of rows at a time
//! as its entry streams out of the zip, and a storage several names share (a tied table a
//! state_dict lists under four names) can be read once, by its [`PthIndex::storage`].

use std::io::Read;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context};
use candle_core::pickle::{PthTensors, TensorInfo};
use candle_core::{Device, Tensor};

use super::tensor_index::quantized_blocks;

/// A PyTorch file, its pickle read, its tensors read on request.
pub struct PthIndex {
    tensors: PthTensors,
    path: PathBuf,
}

impl PthIndex {
    /// Opens the PyTorch file at `path`; the error says what is wrong with it.
    pub fn open(path: &Path) -> anyhow::Result<Self> {
        Ok(Self {
            tensors: PthTensors::new(path, None)?,
            path: path.to_path_buf(),
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

    /// The tensor `name` as stored, on `device`.
    pub fn read(&self, name: &str, device: &Device) -> anyhow::Result<Tensor> {
        let tensor = self
            .tensors
            .get(name)?
            .with_context(|| format!("it has no tensor {name}"))?;
        Ok(tensor.to_device(device)?)
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
        let file = std::io::BufReader::new(std::fs::File::open(&self.path)?);
        let mut zip = zip::ZipArchive::new(file)?;
        let mut entry = zip.by_name(&info.path)?;
        // The tensor's values start `start_offset` values into its storage.
        let skip = (info.layout.start_offset() * info.dtype.size_in_bytes()) as u64;
        std::io::copy(&mut entry.by_ref().take(skip), &mut std::io::sink())?;
        quantized_blocks(rows, cols, info.dtype, |block| entry.read_exact(block))
            .with_context(|| format!("tensor {name}"))
    }
}
