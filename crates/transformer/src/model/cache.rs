//! The decoding state each attention layer keeps between steps: the keys and values of the
//! positions decoded so far ([`KeyValueCache`]) and which row of each step every current row
//! continues ([`Lineage`]), so that beam search reorders rows without copying caches.

use candle_core::{Result, Tensor};

use crate::kernels::attention::cached::CachedKeys;

/// Keys and values, `(batch, heads, len, d_k)` each where they are split into heads, or
/// `(.., d_model)` with the heads side by side where a decoding step reads them.
#[derive(Debug, Clone)]
pub struct KeyValues {
    pub keys: Tensor,
    pub values: Tensor,
}

/// Which row of each decoded step every current row continues: `rows_of_steps[p][r]` is the
/// row of step `p` that row `r` continues. Beam search reorders rows and drops finished
/// sentences by composing this table; the caches are read through it, never gathered
/// (gathering every layer's cache at every step had been a third of beam search's time). One
/// per decoding state: every layer's cache has the same rows.
#[derive(Debug, Default)]
pub struct Lineage {
    pub(crate) rows_of_steps: Vec<Vec<u32>>,
}

impl Lineage {
    /// A new step of `rows` rows, each its own.
    pub fn push_step(&mut self, rows: usize) {
        self.rows_of_steps.push((0..rows as u32).collect());
    }

    /// Keeps the rows `indices`, in that order.
    pub fn reorder(&mut self, indices: &[u32]) -> Result<()> {
        for rows_of_step in &mut self.rows_of_steps {
            *rows_of_step = reordered(rows_of_step, indices)?;
        }
        Ok(())
    }
}

/// `per_row` (one value per current row) for the rows `indices`, in that order: what a
/// decoding state keeps of each row when beam search reorders or drops rows.
pub fn reordered(per_row: &[u32], indices: &[u32]) -> Result<Vec<u32>> {
    let kept = indices
        .iter()
        .map(|&i| per_row.get(i as usize).copied())
        .collect::<Option<Vec<u32>>>();
    match kept {
        Some(kept) => Ok(kept),
        None => candle_core::bail!(
            "decoding state: reorder to {indices:?} of {} rows",
            per_row.len()
        ),
    }
}

/// One layer's self-attention keys and values of the positions decoded so far, as each step
/// produced them, `(rows, d_model)`: nothing is copied once written; the rows are read
/// through the state's [`Lineage`].
#[derive(Debug, Default)]
pub struct KeyValueCache {
    /// Step `p`'s keys and values, `(rows_p, d_model)` each.
    keys: Vec<Tensor>,
    values: Vec<Tensor>,
}

impl KeyValueCache {
    pub(crate) fn push(&mut self, new: KeyValues) {
        self.keys.push(new.keys);
        self.values.push(new.values);
    }

    pub(crate) fn cached<'a>(&'a self, lineage: &'a Lineage) -> CachedKeys<'a> {
        CachedKeys::Steps {
            keys: &self.keys,
            values: &self.values,
            lineage: &lineage.rows_of_steps,
        }
    }
}
