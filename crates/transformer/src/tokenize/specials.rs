//! The special ids of a model's vocabularies and how they frame a sentence: this tool's own
//! (`<pad>` 0, `<s>` 1, `</s>` 2, a source framed `<s> .. </s>`, the decoder started from
//! `<s>`), or a MarianMT model's (a source ends with `</s>` and has no start symbol, the
//! decoder starts from `<pad>`, which is never generated).

/// This tool's special tokens, first in every vocabulary it makes, in this order.
pub const PAD: &str = "<pad>";
pub const BOS: &str = "<s>";
pub const EOS: &str = "</s>";
pub const UNK: &str = "<unk>";
pub const PAD_ID: u32 = 0;
pub const BOS_ID: u32 = 1;
pub const EOS_ID: u32 = 2;
pub const UNK_ID: u32 = 3;

/// Ids that decoding never generates in this tool's vocabularies (a model family with other
/// special ids passes its own as `DecodeInput::never`): `<pad>` only fills a batch and `<s>`
/// only starts a target. A model still gives them a little probability (label smoothing spreads mass over
/// `<s>`), and a wide beam over a small vocabulary would otherwise extend hypotheses with
/// them: `<s>` in the middle of a translation, or alternatives that read the same. The
/// reference's own loop (`greedy_decode`) and the untrained demo keep every id.
pub const NEVER_GENERATED: [u32; 2] = [PAD_ID, BOS_ID];

/// Where a model's special ids are and what they do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpecialIds {
    /// Fills a batch's short rows.
    pub pad: u32,
    /// Starts a source, when the model's sources have a start symbol.
    pub source_start: Option<u32>,
    /// Ends a source and a target.
    pub eos: u32,
    /// Stands for a piece the vocabulary lacks.
    pub unk: u32,
    /// The decoder's first input.
    pub decoder_start: u32,
    /// Ids decoding never generates.
    pub never: Vec<u32>,
}

impl SpecialIds {
    /// This tool's vocabularies: `<pad>` only fills a batch and `<s>` only starts a target,
    /// so neither is generated (a model still gives them a little probability: label
    /// smoothing spreads mass over `<s>`, and a wide beam over a small vocabulary would
    /// otherwise extend hypotheses with them).
    pub fn ours() -> Self {
        Self {
            pad: PAD_ID,
            source_start: Some(BOS_ID),
            eos: EOS_ID,
            unk: UNK_ID,
            decoder_start: BOS_ID,
            never: vec![PAD_ID, BOS_ID],
        }
    }

    /// A MarianMT model's, as transformers' `generate()` reads them from its config: the
    /// decoder starts from `<pad>` (`decoder_start_token_id`), which `bad_words_ids` keeps
    /// from being generated.
    pub fn marian(pad: u32, eos: u32, unk: u32) -> Self {
        Self {
            pad,
            source_start: None,
            eos,
            unk,
            decoder_start: pad,
            never: vec![pad],
        }
    }

    /// Source `ids` (no specials) as the encoder reads them.
    pub fn source(&self, ids: &[u32]) -> Vec<u32> {
        let mut out = Vec::with_capacity(ids.len() + 2);
        out.extend(self.source_start);
        out.extend_from_slice(ids);
        out.push(self.eos);
        out
    }

    /// Target `ids` (no specials) framed for teacher forcing: the decoder start, the ids,
    /// `</s>`; the decoder reads all but the last and predicts all but the first.
    pub fn target(&self, ids: &[u32]) -> Vec<u32> {
        let mut out = Vec::with_capacity(ids.len() + 2);
        out.push(self.decoder_start);
        out.extend_from_slice(ids);
        out.push(self.eos);
        out
    }

    /// Positions a source's specials take.
    pub fn source_overhead(&self) -> usize {
        1 + usize::from(self.source_start.is_some())
    }

    /// Positions a target's specials take (the decoder start and `</s>`).
    pub fn target_overhead(&self) -> usize {
        2
    }

    /// Whether the decoder starts from the padding id (MarianMT's): its first position must
    /// then stay visible to the decoder's self-attention, whose mask is causal only there.
    pub fn decoder_starts_from_pad(&self) -> bool {
        self.decoder_start == self.pad
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_convention_frames_a_sentence_its_own_way() {
        let ours = SpecialIds::ours();
        assert_eq!(ours.source(&[7, 8]), vec![1, 7, 8, 2]);
        assert_eq!(ours.target(&[7]), vec![1, 7, 2]);
        let marian = SpecialIds::marian(9, 0, 1);
        assert_eq!(marian.source(&[7, 8]), vec![7, 8, 0]);
        assert_eq!(marian.target(&[7]), vec![9, 7, 0]);
        assert_eq!((ours.source_overhead(), marian.source_overhead()), (2, 1));
    }
}
