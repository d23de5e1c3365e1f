//! One sentence pair as ids, as the batches and the encoded corpus hold it.

/// A pair as ids: the source `<s> w1 .. wn </s>` and the target `<s> v1 .. vm </s>`.
#[derive(Debug, Clone, PartialEq)]
pub struct EncodedPair {
    /// Empty for a language model's example, which has no source.
    pub src: Vec<u32>,
    pub tgt: Vec<u32>,
}
