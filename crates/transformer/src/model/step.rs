//! The decoding contract: what greedy decoding, beam search and sampling ask of a model, so
//! that they (and the translator, the text generator, validation, `eval` and the server above
//! them) never name a model family. Every family implements [`DecodingModel`]; a new family
//! is decoded, batched and served without a change to any decoder.
//!
//! A decoding runs in three moves: [`DecodingModel::start`] reads the source, where the
//! family has one (the encoder-decoder encodes it and projects each layer's source keys and
//! values once), and returns an empty [`DecodingState`]; [`DecodingModel::step`] feeds each
//! row's newest token and returns the next token's logits; [`DecodingState::reorder`] keeps,
//! repeats or drops rows between steps (beam search, and sentences that have ended).

use std::any::Any;

use candle_core::{Result, Tensor};

use super::generator::Generator;

/// A batch of sources for a family that reads one: `ids` `(batch, src_len)`, padded, and
/// `mask` `(batch, 1, src_len)`, true (1) where a token is real.
#[derive(Debug, Clone)]
pub struct Source {
    pub ids: Tensor,
    pub mask: Tensor,
}

/// What a batch's decoding starts from.
#[derive(Debug, Clone, Copy)]
pub struct Prompt<'a> {
    /// The sources, for a family that reads one ([`DecodingModel::reads_source`]).
    pub source: Option<&'a Source>,
    /// Each row's first target ids, `(batch, len)` with `len >= 1`: `<s>` alone for a
    /// translation, `<s>` and the prompt's tokens for a language model.
    pub prefix: &'a Tensor,
}

impl Prompt<'_> {
    /// Rows of the batch.
    pub fn rows(&self) -> Result<usize> {
        self.prefix.dim(0)
    }
}

/// A model decoded one position at a time, on a cache of what it has seen.
pub trait DecodingModel: Send + Sync {
    /// Whether [`Self::start`] needs a [`Source`] (an encoder-decoder) or takes none (a
    /// decoder-only language model).
    fn reads_source(&self) -> bool;

    /// Rows of the position table: no sequence, source or target, is longer.
    fn max_positions(&self) -> usize;

    /// An empty state for decoding `source`'s sentences (a language model: for any number of
    /// rows, fixed by the first step).
    fn start(&self, source: Option<&Source>) -> Result<Box<dyn DecodingState>>;

    /// Feeds `ids` `(rows, 1)`, each row's newest token, at position `state.len()`; returns
    /// the decoder's output `(rows, d_model)` there, which the Generator reads.
    fn step_hidden(&self, ids: &Tensor, state: &mut dyn DecodingState) -> Result<Tensor>;

    /// The Generator that turns [`Self::step_hidden`]'s output into logits.
    fn generator(&self) -> &Generator;

    /// Feeds `ids` `(rows, 1)`, each row's newest token, at position `state.len()`; returns
    /// the logits `(rows, vocab)` of the token after it.
    fn step(&self, ids: &Tensor, state: &mut dyn DecodingState) -> Result<Tensor> {
        self.generator().logits(&self.step_hidden(ids, state)?)
    }
}

/// What decoding keeps between steps: every layer's keys and values of the positions fed so
/// far (and the source's, projected once). Each family has its own; a decoder only counts
/// and reorders rows.
pub trait DecodingState: Any + Send {
    /// Keeps the rows `rows` of the batch, in that order: a row may be repeated (a beam that
    /// branches) or left out (a sentence that ended).
    fn reorder(&mut self, rows: &[u32]) -> Result<()>;

    /// Positions fed so far.
    fn len(&self) -> usize;

    /// Whether nothing has been fed yet.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// For the family that made it, to read its own kind back.
    fn as_any_mut(&mut self) -> &mut dyn Any;
}

/// `state` as the family `S` that made it; an error (not a panic) for another family's.
pub fn own_state<S: DecodingState>(state: &mut dyn DecodingState) -> Result<&mut S> {
    match state.as_any_mut().downcast_mut::<S>() {
        Some(state) => Ok(state),
        None => candle_core::bail!(
            "a decoding state was stepped by a model of another family than the one that \
             started it"
        ),
    }
}

/// Feeds every prefix id but the last (one step each, logits dropped) and returns the last
/// ids `(rows, 1)`, to be fed by the decoder's first step.
pub fn feed_prefix(
    model: &dyn DecodingModel,
    prompt: &Prompt,
    state: &mut dyn DecodingState,
) -> Result<Tensor> {
    let len = prompt.prefix.dim(1)?;
    if len == 0 {
        candle_core::bail!("decoding needs at least one prefix id per row (the start symbol)")
    }
    for position in 0..len - 1 {
        model.step(&prompt.prefix.narrow(1, position, 1)?, state)?;
    }
    prompt.prefix.narrow(1, len - 1, 1)?.contiguous()
}
