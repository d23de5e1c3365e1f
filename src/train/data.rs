//! What a run trains and validates on: the encoded training pairs with their tokenizers, and
//! the validation split (encoded for the loss, as text for BLEU).

use crate::data::{EncodedPair, Tokenizers};

/// Everything the loop trains on.
pub struct TrainingData {
    pub pairs: Vec<EncodedPair>,
    pub tokenizers: Tokenizers,
    pub valid: Option<ValidationData>,
}

/// The validation split: encoded pairs for the loss, raw text for BLEU.
pub struct ValidationData {
    pub pairs: Vec<EncodedPair>,
    pub sources: Vec<String>,
    pub references: Vec<String>,
}
