//! A model decoded over a few candidate target ids instead of its whole vocabulary (a
//! vocabulary map's, [`super::vocab_map`]): its Generator keeps only the candidates' rows, so
//! each step's product and log-sum-exp cover a few thousand outputs instead of 58,101 on
//! OPUS-MT's shape.
//!
//! The searches run unchanged on [`Restricted`]: to them it is a model whose vocabulary is
//! the candidates, numbered by position. Its steps read positions and feed the model their
//! ids; [`Restricted::position`] and [`Restricted::id`] turn a call's ids (start, end, never
//! generated) into positions and the searches' positions back into ids. Log-probabilities are
//! over each row's candidates (CTranslate2's with `use_vmap` are over its batch's).

use candle_core::{Device, Result, Tensor};

use super::Hypothesis;
use crate::model::generator::Generator;
use crate::model::step::own_state;
use crate::model::{DecodingModel, DecodingState, Source};

/// `model` decoded over a batch's candidates only, each row over its own.
pub struct Restricted<'a> {
    model: &'a dyn DecodingModel,
    generator: Generator,
    /// The batch's candidate ids (the union of its rows'), sorted, each once.
    candidates: Vec<u32>,
    /// The same, `(candidates,)` on the model's device: position -> id for each step's input.
    ids: Tensor,
    /// `(rows, candidates)`: 0 where a row may say a candidate, minus infinity where only
    /// another row of the batch may, added to each step's logits.
    rows: Tensor,
}

impl<'a> Restricted<'a> {
    /// `model` on `device`, row `r` of a batch over the target ids `own[r]` only: the
    /// Generator scores the rows' union once a step, and each row's logits of the others'
    /// candidates are masked, so that a sentence's translation never depends on the
    /// sentences decoded beside it (a server's other clients).
    pub fn new(model: &'a dyn DecodingModel, own: &[Vec<u32>], device: &Device) -> Result<Self> {
        let mut candidates = own.concat();
        candidates.sort_unstable();
        candidates.dedup();
        let width = candidates.len();
        let mut mask = vec![f32::NEG_INFINITY; own.len() * width];
        for (row, ids) in own.iter().enumerate() {
            for id in ids {
                // Every id is in the union it was sorted into.
                let position = candidates.binary_search(id).unwrap_or_default();
                mask[row * width + position] = 0.0;
            }
        }
        Ok(Self {
            model,
            generator: model.generator().restricted(&candidates)?,
            ids: Tensor::new(candidates.as_slice(), device)?,
            rows: Tensor::from_vec(mask, (own.len(), width), device)?,
            candidates,
        })
    }

    /// The position of target id `id` among the candidates, if it is one.
    pub fn position(&self, id: u32) -> Option<u32> {
        self.candidates.binary_search(&id).ok().map(|at| at as u32)
    }

    /// The target id at `position`.
    pub fn id(&self, position: u32) -> Result<u32> {
        match self.candidates.get(position as usize) {
            Some(&id) => Ok(id),
            None => candle_core::bail!(
                "restricted decoding: position {position} of {} candidates",
                self.candidates.len()
            ),
        }
    }

    /// A search's hypothesis (positions) with its ids as the model numbers them.
    pub fn to_ids(&self, mut hypothesis: Hypothesis) -> Result<Hypothesis> {
        for id in &mut hypothesis.ids {
            *id = self.id(*id)?;
        }
        Ok(hypothesis)
    }

    /// `ids` `(rows, len)` as positions; an error names an id that is no candidate.
    pub fn positions(&self, ids: &Tensor) -> Result<Tensor> {
        let (rows, len) = ids.dims2()?;
        let mut positions = Vec::with_capacity(rows * len);
        for id in ids.flatten_all()?.to_vec1::<u32>()? {
            match self.position(id) {
                Some(position) => positions.push(position),
                None => candle_core::bail!("restricted decoding: id {id} is not a candidate"),
            }
        }
        Tensor::from_vec(positions, (rows, len), ids.device())
    }
}

impl DecodingModel for Restricted<'_> {
    fn reads_source(&self) -> bool {
        self.model.reads_source()
    }

    fn max_positions(&self) -> usize {
        self.model.max_positions()
    }

    fn start(&self, source: Option<&Source>) -> Result<Box<dyn DecodingState>> {
        Ok(Box::new(RestrictedState {
            inner: self.model.start(source)?,
            rows: self.rows.clone(),
        }))
    }

    /// `ids` are positions among the candidates: the model is fed their ids.
    fn step_hidden(&self, ids: &Tensor, state: &mut dyn DecodingState) -> Result<Tensor> {
        let state = own_state::<RestrictedState>(state)?;
        let model_ids = self
            .ids
            .index_select(&ids.flatten_all()?, 0)?
            .reshape(ids.shape())?;
        self.model.step_hidden(&model_ids, &mut *state.inner)
    }

    fn generator(&self) -> &Generator {
        &self.generator
    }

    /// The candidates' logits, each row's own only.
    fn step(&self, ids: &Tensor, state: &mut dyn DecodingState) -> Result<Tensor> {
        let logits = self.generator.logits(&self.step_hidden(ids, state)?)?;
        logits.add(&own_state::<RestrictedState>(state)?.rows)
    }
}

/// The model's own state, and each row's mask, kept in the rows' order.
struct RestrictedState {
    inner: Box<dyn DecodingState>,
    rows: Tensor,
}

impl DecodingState for RestrictedState {
    fn reorder(&mut self, rows: &[u32]) -> Result<()> {
        self.inner.reorder(rows)?;
        let index = Tensor::new(rows, self.rows.device())?;
        self.rows = self.rows.index_select(&index, 0)?;
        Ok(())
    }

    fn len(&self) -> usize {
        self.inner.len()
    }

    fn as_any_mut(&mut self) -> &mut dyn std::any::Any {
        self
    }
}
