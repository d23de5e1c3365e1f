//! How a layer keeps its weight as int8: the loader, decoding in int8, answers for a marker
//! name under the layer's prefix, and the layer then asks for int8 values and row scales
//! (CTranslate2's naming), quantized by the loader from a float weight or read as stored.

use candle_core::{DType, Result};
use candle_nn::{Init, VarBuilder};

use crate::kernels::int8::{self, QuantizedMatrix};

/// The name (under a layer's prefix) whose presence in a `VarBuilder` asks the layer to keep
/// its weight as int8: the checkpoint loader answers for it when decoding in int8, and no
/// file holds it.
pub const INT8_MARKER: &str = "weight.int8";

/// The name of the row scales beside an int8 matrix `name` (CTranslate2's naming).
pub fn scale_name(name: &str) -> String {
    format!("{name}_scale")
}

/// The matrix `name` `(out, inp)` as int8: its values (asked for as `U8`, the bytes of
/// `i8`s) and its row scales ([`scale_name`]), which the checkpoint loader serves for a
/// layer under [`INT8_MARKER`].
pub fn fetch_int8(vb: &VarBuilder, name: &str, out: usize, inp: usize) -> Result<QuantizedMatrix> {
    let values = vb.get_with_hints_dtype((out, inp), name, Init::Const(0.), DType::U8)?;
    let scales = vb
        .get_with_hints_dtype(out, &scale_name(name), Init::Const(1.), DType::F32)?
        .to_vec1::<f32>()?;
    let values = values.contiguous()?;
    let (storage, layout) = values.storage_and_layout();
    let candle_core::Storage::Cpu(storage) = &*storage else {
        candle_core::bail!("linear: int8 weights live on the CPU")
    };
    let start = layout.start_offset();
    let bytes = &storage.as_slice::<u8>()?[start..start + out * inp];
    Ok(QuantizedMatrix::from_rows(
        int8::as_signed(bytes),
        scales,
        out,
        inp,
    ))
}
