//! The Transformer of "Attention Is All You Need" as The Annotated Transformer writes it.
//!
//! Every module is built from a `VarBuilder` whose prefixes are the PyTorch reference's
//! state_dict keys, so checkpoints move between the two unchanged.

pub mod attention;
pub mod attention_maps;
pub mod decoder;
pub mod decoder_only;
pub mod embeddings;
pub mod encoder;
pub mod encoder_decoder;
pub mod family;
pub mod init;
pub mod layers;
pub mod linear;
pub mod masks;
pub mod weights;

pub use crate::config::VocabSizes;
pub use crate::kernels::dropout::{DropoutRng, Mode};
pub use attention_maps::{attention_maps, AttentionMaps};
pub use decoder::DecoderState;
pub use encoder_decoder::{make_model, EncoderDecoder, Generator};
pub use family::{Model, TeacherForced};
pub use init::named_vars;
pub use weights::TrainedWeights;
