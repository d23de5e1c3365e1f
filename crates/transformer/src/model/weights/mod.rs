//! The forms a layer's weights take: a linear layer's matrix (float, transposed, joined with
//! its neighbours', or int8 with row scales), an embedding table (float or int8), and the
//! trained weights as each pass sees them.

mod int8;
pub mod linear;
pub mod table;
mod trained;

pub use int8::{fetch_matrix, scale_name, Served};
pub use trained::TrainedWeights;
