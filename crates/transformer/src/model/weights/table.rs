//! An embedding table `(vocab, d_model)` and the forms it takes: float (a variable being
//! trained, or a loaded checkpoint's tensor), or int8 with one scale per row when the loader
//! serves it so (see [`super::served`]), or bf16 (packed on the CPU, a `BF16` tensor on a GPU)
//! when it serves it so for bfloat16 decoding. A generator
//! that shares the table (`share_embeddings`) shares whichever form it is.

use candle_core::{DType, Result, Tensor};
use candle_nn::{Init, VarBuilder};

use super::served::{fetch_matrix, ServedMatrix};

/// An embedding table, in the form the loader served it.
#[derive(Clone)]
pub struct Table(ServedMatrix);

impl Table {
    /// The table `weight` under `vb` (an `nn.Embedding`'s prefix), initialised as
    /// torch.nn.Embedding is (N(0, 1)) when it is made afresh.
    pub fn new(vocab: usize, d_model: usize, vb: VarBuilder) -> Result<Self> {
        let init = Init::Randn {
            mean: 0.,
            stdev: 1.,
        };
        Ok(Self(fetch_matrix(&vb, "weight", (vocab, d_model), init)?))
    }

    /// The matrix, in its form.
    pub fn matrix(&self) -> &ServedMatrix {
        &self.0
    }

    /// `(vocab, d_model)`.
    pub fn dims(&self) -> Result<(usize, usize)> {
        match &self.0 {
            ServedMatrix::Float(table) => table.dims2(),
            ServedMatrix::Int8(matrix) => Ok((matrix.out_features(), matrix.in_features())),
            ServedMatrix::Bf16(matrix) => Ok((matrix.out_features(), matrix.in_features())),
        }
    }

    /// The float tensor, for a table that is one (what a checkpoint saves).
    pub fn float(&self) -> Option<&Tensor> {
        match &self.0 {
            ServedMatrix::Float(table) => Some(table),
            ServedMatrix::Int8(_) | ServedMatrix::Bf16(_) => None,
        }
    }

    /// Rows `ids` (any shape) times `factor`: `(..ids, d_model)`.
    pub fn lookup(&self, ids: &Tensor, factor: f64) -> Result<Tensor> {
        let mut dims = ids.dims().to_vec();
        let (_, d_model) = self.dims()?;
        dims.push(d_model);
        let rows = match &self.0 {
            ServedMatrix::Float(table) => {
                // A GPU's bf16 table gives f32 rows: only products are bf16.
                let rows = table
                    .index_select(&ids.flatten_all()?, 0)?
                    .to_dtype(DType::F32)?;
                if factor == 1.0 {
                    rows
                } else {
                    (rows * factor)?
                }
            }
            ServedMatrix::Int8(matrix) => {
                gathered(ids, (matrix.out_features(), d_model), |flat| {
                    matrix.rows_dequantized(flat, factor as f32)
                })?
            }
            ServedMatrix::Bf16(matrix) => {
                gathered(ids, (matrix.out_features(), d_model), |flat| {
                    matrix.rows(flat, factor as f32)
                })?
            }
        };
        rows.reshape(dims)
    }
}

/// The rows `ids` of a table of `(vocab, d_model)` kept in a form of its own, read by
/// `rows` (`None` when an id is past the table): `(ids.elem_count(), d_model)`.
fn gathered(
    ids: &Tensor,
    (vocab, d_model): (usize, usize),
    rows: impl FnOnce(&[u32]) -> Option<Vec<f32>>,
) -> Result<Tensor> {
    let flat = ids.flatten_all()?.to_dtype(DType::U32)?.to_vec1::<u32>()?;
    let Some(values) = rows(&flat) else {
        candle_core::bail!("embedding: an id is past the table's {vocab} rows")
    };
    Tensor::from_vec(values, (flat.len(), d_model), ids.device())
}
