//! Dropout (paper section 5.4) with a seeded random source.
//!
//! Candle cannot seed its CPU random generator, so masks are drawn from our own ChaCha stream:
//! the same seed gives the same masks, and so the same training run, on the CPU.
//!
//! On a GPU, drawing masks on the host and copying them over would cost more than the step
//! (an activation-sized upload per dropout site), so masks are drawn on the device by its own
//! generator, reseeded at every optimiser step from (seed, step): a resumed run draws the same
//! masks as an uninterrupted one there too.

use std::cell::RefCell;

use candle_core::{Device, Result, Tensor};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// Whether a forward pass trains (dropout on, drawing from the given source) or evaluates.
#[derive(Clone, Copy)]
pub enum Mode<'a> {
    Eval,
    Train(&'a DropoutRng),
}

/// The random source for dropout masks; one per training run (one per rank of a distributed
/// run).
pub struct DropoutRng {
    seed: u64,
    rng: RefCell<ChaCha8Rng>,
    /// A distributed run's rank: its stream restarts every step from (seed, step, rank), so
    /// that ranks draw different masks and a resumed rank needs no saved position.
    rank: Option<usize>,
}

impl DropoutRng {
    pub fn new(seed: u64) -> Self {
        Self::at_position(seed, 0)
    }

    /// Where the stream stands, to save with a checkpoint: (seed, 32-bit words drawn).
    pub fn position(&self) -> (u64, u128) {
        (self.seed, self.rng.borrow().get_word_pos())
    }

    /// The stream seeded with `seed`, advanced by `words` draws (see `position`).
    pub fn at_position(seed: u64, words: u128) -> Self {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        rng.set_word_pos(words);
        Self {
            seed,
            rng: RefCell::new(rng),
            rank: None,
        }
    }

    /// The stream of rank `rank` of a distributed run (see the `rank` field).
    pub fn for_rank(seed: u64, rank: usize) -> Self {
        Self {
            rank: Some(rank),
            ..Self::new(seed)
        }
    }

    /// Called before each optimiser step: reseeds a GPU's generator from (seed, step, and a
    /// distributed run's rank), and a rank's CPU stream likewise. A single process's CPU
    /// stream just goes on.
    pub fn begin_step(&self, device: &Device, step: usize) -> Result<()> {
        let mut seed = split_mix64(self.seed ^ split_mix64(step as u64));
        if let Some(rank) = self.rank {
            seed = split_mix64(seed ^ split_mix64(rank as u64 + 1));
        }
        if !device.is_cpu() {
            return device.set_seed(seed);
        }
        if self.rank.is_some() {
            *self.rng.borrow_mut() = ChaCha8Rng::seed_from_u64(seed);
        }
        Ok(())
    }

    /// A mask shaped like `like`: 0 with probability `p`, else 1 / (1 - p) (inverted dropout,
    /// as torch.nn.Dropout, so evaluation needs no rescaling).
    fn mask(&self, like: &Tensor, p: f64) -> Result<Tensor> {
        if !like.device().is_cpu() {
            return device_mask(like, p);
        }
        let values = self.factors(like.elem_count(), p);
        Tensor::from_vec(values, like.shape(), like.device())?.to_dtype(like.dtype())
    }

    /// The next `count` factors of the CPU stream, as `mask` draws them: 0 with probability
    /// `p`, else 1 / (1 - p).
    pub(crate) fn factors(&self, count: usize, p: f64) -> Vec<f32> {
        let (threshold, keep_scale) = (keep_threshold(p), keep_scale(p));
        let mut rng = self.rng.borrow_mut();
        (0..count)
            .map(|_| {
                if rng.random::<u32>() >= threshold {
                    keep_scale
                } else {
                    0.0
                }
            })
            .collect()
    }

    /// The next `count` draws of the CPU stream as keep (true) or drop, the same draws as
    /// `factors` makes: a quarter of the memory where an op keeps its mask for the backward
    /// pass.
    pub(crate) fn keeps(&self, count: usize, p: f64) -> Vec<bool> {
        let threshold = keep_threshold(p);
        let mut rng = self.rng.borrow_mut();
        (0..count)
            .map(|_| rng.random::<u32>() >= threshold)
            .collect()
    }
}

/// An element is kept when a uniform u32 lands at or above p * 2^32.
fn keep_threshold(p: f64) -> u32 {
    (p * 4_294_967_296.0).min(u32::MAX as f64) as u32
}

/// What inverted dropout multiplies a kept element by, so that evaluation needs no rescaling.
pub(crate) fn keep_scale(p: f64) -> f32 {
    (1.0 / (1.0 - p)) as f32
}

/// A dropout mask drawn by `like`'s device's own generator (see `DropoutRng::begin_step`).
fn device_mask(like: &Tensor, p: f64) -> Result<Tensor> {
    let uniform = Tensor::rand(0f32, 1f32, like.shape(), like.device())?;
    let keep = uniform.ge(p)?.to_dtype(like.dtype())?;
    keep.affine(1.0 / (1.0 - p), 0.0)
}

/// A 64-bit mix (SplitMix64's finaliser): nearby steps give unrelated seeds.
fn split_mix64(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Applies dropout with probability `p` in training mode; the identity otherwise.
pub fn dropout(xs: &Tensor, p: f64, mode: Mode) -> Result<Tensor> {
    match mode {
        Mode::Train(rng) if p > 0.0 => xs.mul(&rng.mask(xs, p)?),
        _ => Ok(xs.clone()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The GPU path's mask, exercised on the CPU (where candle's generator is unseeded, so only
    /// its statistics can be checked): about p zeros, the rest 1 / (1 - p).
    #[test]
    fn device_masks_drop_about_p_and_scale_the_rest() {
        let like = Tensor::ones(100_000, candle_core::DType::F32, &Device::Cpu).unwrap();
        let mask = device_mask(&like, 0.1).unwrap().to_vec1::<f32>().unwrap();
        let zeros = mask.iter().filter(|&&m| m == 0.0).count() as f64 / mask.len() as f64;
        assert!((zeros - 0.1).abs() < 0.01, "{zeros}");
        assert!(mask
            .iter()
            .all(|&m| m == 0.0 || (m - 1.0 / 0.9).abs() < 1e-6));
    }

    #[test]
    fn step_seeds_differ_from_step_to_step_and_run_to_run() {
        let seeds: std::collections::HashSet<u64> = (0..2u64)
            .flat_map(|seed| (0..1000u64).map(move |step| split_mix64(seed ^ split_mix64(step))))
            .collect();
        assert_eq!(seeds.len(), 2000);
    }

    #[test]
    fn evaluation_mode_leaves_the_input_unchanged() {
        let xs = Tensor::arange(0f32, 10., &Device::Cpu).unwrap();
        let out = dropout(&xs, 0.5, Mode::Eval).unwrap();
        assert_eq!(out.to_vec1::<f32>().unwrap(), xs.to_vec1::<f32>().unwrap());
    }

    #[test]
    fn training_mode_zeroes_about_p_and_rescales_the_rest() {
        let rng = DropoutRng::new(7);
        let xs = Tensor::ones(10_000, candle_core::DType::F32, &Device::Cpu).unwrap();
        let out = dropout(&xs, 0.25, Mode::Train(&rng))
            .unwrap()
            .to_vec1::<f32>()
            .unwrap();
        let zeros = out.iter().filter(|&&v| v == 0.0).count();
        assert!((2300..2700).contains(&zeros), "{zeros} zeros");
        assert!(out
            .iter()
            .all(|&v| v == 0.0 || (v - 1.0 / 0.75).abs() < 1e-6));
    }

    #[test]
    fn a_stream_restored_at_its_position_draws_what_the_original_draws_next() {
        let xs = Tensor::ones(37, candle_core::DType::F32, &Device::Cpu).unwrap();
        let original = DropoutRng::new(5);
        dropout(&xs, 0.5, Mode::Train(&original)).unwrap();
        let (seed, words) = original.position();
        let restored = DropoutRng::at_position(seed, words);
        let a = dropout(&xs, 0.5, Mode::Train(&original)).unwrap();
        let b = dropout(&xs, 0.5, Mode::Train(&restored)).unwrap();
        assert_eq!(a.to_vec1::<f32>().unwrap(), b.to_vec1::<f32>().unwrap());
    }

    #[test]
    fn the_same_seed_draws_the_same_masks() {
        let xs = Tensor::ones(64, candle_core::DType::F32, &Device::Cpu).unwrap();
        let a = dropout(&xs, 0.5, Mode::Train(&DropoutRng::new(3))).unwrap();
        let b = dropout(&xs, 0.5, Mode::Train(&DropoutRng::new(3))).unwrap();
        assert_eq!(a.to_vec1::<f32>().unwrap(), b.to_vec1::<f32>().unwrap());
    }
}
