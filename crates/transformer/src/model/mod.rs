//! The Transformer of "Attention Is All You Need" as The Annotated Transformer writes it,
//! and the decoder-only language model built from the same modules.
//!
//! Every module is built from a `VarBuilder` whose prefixes are the PyTorch reference's
//! state_dict keys, so checkpoints move between the two unchanged; a foreign file's names
//! are mapped onto them by `checkpoint::format`, never here.

// Figure 1, bottom to top.
pub mod attention;
pub mod decoder;
pub mod embeddings;
pub mod encoder;
pub mod feed_forward;
pub mod generator;
pub mod masks;
pub mod positions;
pub mod sublayer;
// Whole models, one file per family, and what every family does.
pub mod families;
pub mod init;
// What decoding asks of a model and the state it keeps; what attention looked like.
pub mod attention_maps;
pub mod cache;
pub mod step;
// The forms weights take, and the RAM a model would need.
pub mod footprint;
pub mod weights;

pub use crate::config::VocabSizes;
pub use crate::kernels::dropout::{DropoutRng, Mode};
pub use attention_maps::AttentionMaps;
pub use families::family::{ModelFamily, TeacherForced};
pub use families::Model;
pub use init::named_vars;
pub use step::{DecodingModel, DecodingState, Prompt, Source};
pub use weights::TrainedWeights;
