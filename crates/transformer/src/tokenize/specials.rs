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

/// A multilingual model's language pair, as the ids of its language tokens.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct LanguageIds {
    pub source: u32,
    pub target: u32,
}

/// Where a model's special ids are and what they do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpecialIds {
    /// Fills a batch's short rows.
    pub pad: u32,
    /// Starts a source, when the model's sources have a start symbol (a multilingual
    /// model's: the source language's token).
    pub source_start: Option<u32>,
    /// Follows a source's `</s>`: the source language's token in NLLB's legacy framing.
    pub source_last: Option<u32>,
    /// Ends a source and a target.
    pub eos: u32,
    /// Stands for a piece the vocabulary lacks.
    pub unk: u32,
    /// The decoder's first input.
    pub decoder_start: u32,
    /// The first target token, forced after the decoder's start (a multilingual model's
    /// target language: transformers' `forced_bos_token_id`); it counts as generated in a
    /// hypothesis's length, as transformers counts it, but is not part of a translation.
    pub forced: Option<u32>,
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
            source_last: None,
            eos: EOS_ID,
            unk: UNK_ID,
            decoder_start: BOS_ID,
            forced: None,
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
            source_last: None,
            eos,
            unk,
            decoder_start: pad,
            forced: None,
            never: vec![pad],
        }
    }

    /// A multilingual model's (the fairseq dictionary's `<s>` 0, `<pad>` 1, `</s>` 2, `<unk>`
    /// 3), as transformers' tokenizers and `generate()` frame a sentence: the source
    /// language's token first (`legacy`: after `</s>`), the decoder started from `</s>`
    /// (`decoder_start_token_id`) and the target language forced next. Without a pair, a
    /// sentence has no language token: what a caller that names none gets (the translator
    /// refuses it). Nothing is kept from being generated, as in `generate()`.
    pub fn multilingual(pair: Option<LanguageIds>, legacy: bool) -> Self {
        let source = pair.map(|p| p.source);
        Self {
            pad: 1,
            source_start: source.filter(|_| !legacy),
            source_last: source.filter(|_| legacy),
            eos: 2,
            unk: 3,
            decoder_start: 2,
            forced: pair.map(|p| p.target),
            never: Vec::new(),
        }
    }

    /// Source `ids` (no specials) as the encoder reads them.
    pub fn source(&self, ids: &[u32]) -> Vec<u32> {
        let mut out = Vec::with_capacity(ids.len() + 3);
        out.extend(self.source_start);
        out.extend_from_slice(ids);
        out.push(self.eos);
        out.extend(self.source_last);
        out
    }

    /// Target `ids` (no specials) framed for teacher forcing: the decoder start, the forced
    /// token, the ids, `</s>`; the decoder reads all but the last and predicts all but the
    /// first (the forced token too, as transformers' labels hold it).
    pub fn target(&self, ids: &[u32]) -> Vec<u32> {
        let mut out = self.decoder_prefix();
        out.extend_from_slice(ids);
        out.push(self.eos);
        out
    }

    /// What the decoder reads before its first generated token: its start and the forced
    /// token.
    pub fn decoder_prefix(&self) -> Vec<u32> {
        std::iter::once(self.decoder_start)
            .chain(self.forced)
            .collect()
    }

    /// Positions a source's specials take.
    pub fn source_overhead(&self) -> usize {
        1 + usize::from(self.source_start.is_some()) + usize::from(self.source_last.is_some())
    }

    /// Positions a target's specials take (the decoder start, the forced token, `</s>`).
    pub fn target_overhead(&self) -> usize {
        2 + usize::from(self.forced.is_some())
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
        let pair = Some(LanguageIds {
            source: 128,
            target: 129,
        });
        let m2m100 = SpecialIds::multilingual(pair, false);
        assert_eq!(m2m100.source(&[7, 8]), vec![128, 7, 8, 2]);
        assert_eq!(m2m100.target(&[7]), vec![2, 129, 7, 2]);
        assert_eq!(m2m100.decoder_prefix(), vec![2, 129]);
        assert_eq!(
            SpecialIds::multilingual(pair, true).source(&[7]),
            vec![7, 2, 128]
        );
        assert_eq!((m2m100.source_overhead(), m2m100.target_overhead()), (2, 3));
    }
}
