//! The forms a layer's weights take: a linear layer's matrix (float, transposed or packed,
//! joined with its neighbours', int8 with row scales, or bf16 packed), an embedding table
//! (float, int8 or bf16), the form the loader serves each in, and the trained weights as each
//! pass sees them.

pub mod linear;
mod served;
pub mod table;
mod trained;

pub use served::{fetch_matrix, scale_name, ServedMatrix};
pub use trained::TrainedWeights;
