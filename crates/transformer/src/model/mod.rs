//! The Transformer of "Attention Is All You Need" as The Annotated Transformer writes it,
//! and the decoder-only language model built from the same modules.
//!
//! Every module is built from a `VarBuilder` whose prefixes are the PyTorch reference's
//! state_dict keys, so checkpoints move between the two unchanged; a foreign file's names
//! are mapped onto them by `checkpoint::format`, never here.

pub mod attention;
pub mod attention_maps;
pub mod decoder;
pub mod decoder_only;
pub mod decoding;
pub mod embeddings;
pub mod encoder;
pub mod encoder_decoder;
pub mod families;
pub mod family;
pub mod init;
pub mod layers;
pub mod linear;
pub mod masks;
pub mod table;
pub mod weights;

pub use crate::config::VocabSizes;
pub use crate::kernels::dropout::{DropoutRng, Mode};
pub use attention_maps::AttentionMaps;
pub use decoding::{DecodingModel, DecodingState, Prompt, Source};
pub use families::Model;
pub use family::{ModelFamily, TeacherForced};
pub use init::named_vars;
pub use linear::INT8_MARKER;
pub use weights::TrainedWeights;
