//! The form a layer keeps its matrix in: float, int8 or bf16, chosen by the dtype of what the
//! loader serves, as CTranslate2 chooses it by the stored dtype. An int8 checkpoint's matrices
//! come as `U8` tensors (the bytes of `i8`s) with row scales beside them (CTranslate2's
//! naming), and a loader decoding a float checkpoint in int8 quantizes each matrix as it
//! serves it: a layer that is served a `U8` weight asks for its scales and keeps the int8
//! form. A loader decoding in bfloat16 serves matrices as `BF16`: on the CPU the layer packs
//! them for the bf16 kernels ([`PackedWeight`]); on a GPU it keeps the tensor, which candle
//! multiplies.

use std::sync::Arc;

use candle_core::{DType, Result, Tensor};
use candle_nn::{Init, VarBuilder};

use crate::kernels::bf16::PackedWeight;
use crate::kernels::int8::{self, QuantizedMatrix};

/// The name of the row scales beside an int8 matrix `name` (CTranslate2's naming).
pub fn scale_name(name: &str) -> String {
    format!("{name}_scale")
}

/// A matrix in the form the loader served it: float, int8 ([`QuantizedMatrix`], with its row
/// scales [`scale_name`]) when it is served as `U8` values, or bf16 packed. The one type of
/// that form: a linear layer's weight and an embedding table each hold one, and a generator
/// that shares its table shares it.
#[derive(Clone)]
pub enum ServedMatrix {
    /// f32, or bf16 on a GPU.
    Float(Tensor),
    Int8(Arc<QuantizedMatrix>),
    /// bf16 on the CPU, packed.
    Bf16(Arc<PackedWeight>),
}

/// The matrix `name` `(out, inp)` in the form `vb` serves it (see the module docs); `init`
/// makes a fresh one.
pub fn fetch_matrix(
    vb: &VarBuilder,
    name: &str,
    (out, inp): (usize, usize),
    init: Init,
) -> Result<ServedMatrix> {
    let matrix = vb.get_with_hints((out, inp), name, init)?;
    if matrix.dtype() == DType::BF16 && matrix.device().is_cpu() {
        // Packed from the served values in place: no f32 copy of a large table.
        let matrix = matrix.contiguous()?;
        let (storage, layout) = matrix.storage_and_layout();
        let candle_core::Storage::Cpu(storage) = &*storage else {
            candle_core::bail!("linear: bf16 weights to pack live on the CPU")
        };
        let start = layout.start_offset();
        let values = &storage.as_slice::<half::bf16>()?[start..start + out * inp];
        let bits: &[u16] = half::slice::HalfFloatSliceExt::reinterpret_cast(values);
        return Ok(ServedMatrix::Bf16(Arc::new(PackedWeight::from_bf16_rows(
            bits, out, inp,
        ))));
    }
    if matrix.dtype() != DType::U8 {
        return Ok(ServedMatrix::Float(matrix));
    }
    let scales = vb
        .get_with_hints_dtype(out, &scale_name(name), Init::Const(1.), DType::F32)?
        .to_vec1::<f32>()?;
    let values = matrix.contiguous()?;
    let (storage, layout) = values.storage_and_layout();
    let candle_core::Storage::Cpu(storage) = &*storage else {
        candle_core::bail!("linear: int8 weights live on the CPU")
    };
    let start = layout.start_offset();
    let bytes = &storage.as_slice::<u8>()?[start..start + out * inp];
    Ok(ServedMatrix::Int8(Arc::new(QuantizedMatrix::from_rows(
        int8::as_signed(bytes),
        scales,
        out,
        inp,
    ))))
}
