//! The Transformer of "Attention Is All You Need" as The Annotated Transformer writes it.
//!
//! Every module is built from a `VarBuilder` whose prefixes are the PyTorch reference's
//! state_dict keys, so checkpoints move between the two unchanged.

pub mod attention;
pub mod attention_maps;
mod attention_op;
pub mod decoder;
pub mod decoder_only;
pub mod dropout;
pub mod embeddings;
pub mod encoder;
pub mod encoder_decoder;
pub mod family;
pub mod init;
mod layer_norm_op;
pub mod layers;
pub mod linear;
mod linear_op;
pub mod masks;
#[cfg(test)]
mod test_support;

pub use attention_maps::{attention_maps, AttentionMaps};
pub use decoder::DecoderState;
pub use dropout::{DropoutRng, Mode};
pub use encoder_decoder::{inference_model, make_model, EncoderDecoder, Generator, VocabSizes};
pub use family::Model;
