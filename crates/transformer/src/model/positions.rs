//! The sinusoidal PositionalEncoding (paper 3.5) and its learned variant, and the three
//! layouts of the sine/cosine table the model families use (the reference's interleaved one,
//! MarianMT's halves, fairseq's).

use candle_core::{DType, Device, Result, Tensor};
use candle_nn::VarBuilder;

use crate::config::{ModelConfig, PositionEncoding};
use crate::kernels::dropout::{dropout, Mode};

/// The position table's module name under an embedding stack's positions (the reference's
/// buffer `pe`; learned, the nn.Embedding `pe` and its `pe.weight`). It is added, never
/// multiplied, so no int8 form applies to it.
pub const POSITION_TABLE: &str = "pe";

/// Adds the fixed sine/cosine position table, then dropout.
///
/// The table `pe` `(1, max_len, d_model)` is a buffer, not a parameter: it is written into
/// checkpoints (as the reference's `register_buffer` does) but never trained.
///
/// With `positions = "learned"` the table is a trained parameter instead, `pe.weight`
/// `(max_len, d_model)` (an nn.Embedding named `pe`), Xavier-initialised like every matrix.
pub struct PositionalEncoding {
    pe: Tensor,
    /// The fixed table's name in the model (`<prefix>.pe`); none when it is learned.
    buffer_name: Option<String>,
    dropout: f64,
}

impl PositionalEncoding {
    /// Reads `pe` from a checkpoint when it has one, else computes it (or, learned, makes it).
    pub fn new(cfg: &ModelConfig, vb: VarBuilder) -> Result<Self> {
        let learned = cfg.positions == PositionEncoding::Learned;
        let pe = if learned {
            vb.pp(POSITION_TABLE)
                .get_with_hints(
                    (cfg.max_len, cfg.d_model),
                    "weight",
                    candle_nn::Init::Const(0.),
                )?
                .unsqueeze(0)?
        } else if vb.contains_tensor(POSITION_TABLE) {
            vb.get((1, cfg.max_len, cfg.d_model), POSITION_TABLE)?
        } else {
            let table = match cfg.positions {
                PositionEncoding::SinusoidalHalves => {
                    sinusoid_halves_table(cfg.max_len, cfg.d_model, vb.device())?
                }
                PositionEncoding::SinusoidalFairseq => {
                    sinusoid_fairseq_table(cfg.max_len, cfg.d_model, vb.device())?
                }
                _ => sinusoid_table(cfg.max_len, cfg.d_model, vb.device())?,
            };
            table.to_dtype(vb.dtype())?.unsqueeze(0)?
        };
        Ok(Self {
            pe,
            buffer_name: (!learned).then(|| vb.pp(POSITION_TABLE).prefix()),
            dropout: cfg.dropout,
        })
    }

    /// The fixed `(1, max_len, d_model)` table under its name, for checkpoints; none when it
    /// is learned (it is then a parameter, saved with the others).
    pub fn buffer(&self) -> Option<(String, Tensor)> {
        Some((self.buffer_name.clone()?, self.pe.clone()))
    }

    /// Rows of the table: the most positions a sequence can have.
    pub fn max_len(&self) -> usize {
        self.pe.dims().get(1).copied().unwrap_or(0)
    }

    /// `(batch, len, d_model)` at positions `offset..offset + len` (0 for a whole sequence, the
    /// decoded length for an incremental step) -> same shape; fails past the table's end.
    pub fn forward(&self, xs: &Tensor, offset: usize, mode: Mode) -> Result<Tensor> {
        let (_, len, _) = xs.dims3()?;
        let max_len = self.pe.dim(1)?;
        if offset + len > max_len {
            candle_core::bail!(
                "a sequence of {} positions is longer than the position table ({max_len}); \
                 raise model.max_len or shorten the input",
                offset + len
            )
        }
        let with_positions = xs.broadcast_add(&self.pe.narrow(1, offset, len)?)?;
        dropout(&with_positions, self.dropout, mode)
    }
}

/// PE(pos, 2i) = sin(pos / 10000^(2i/d)), PE(pos, 2i+1) = cos(pos / 10000^(2i/d)).
///
/// Computed in f32 the way the reference does (exp of a log-space term, then one product), so
/// the table matches PyTorch's to float rounding rather than differing by up to 4e-4.
pub fn sinusoid_table(max_len: usize, d_model: usize, device: &Device) -> Result<Tensor> {
    let log_step = -(10000f64.ln() / d_model as f64) as f32;
    let div_term: Vec<f32> = (0..d_model)
        .step_by(2)
        .map(|i| (i as f32 * log_step).exp())
        .collect();
    let mut table = vec![0f32; max_len * d_model];
    for (pos, row) in table.chunks_mut(d_model).enumerate() {
        for (pair, &div) in row.chunks_mut(2).zip(&div_term) {
            let angle = pos as f32 * div;
            pair[0] = angle.sin();
            if let Some(odd) = pair.get_mut(1) {
                *odd = angle.cos();
            }
        }
    }
    Tensor::from_vec(table, (max_len, d_model), device)?.to_dtype(DType::F32)
}

/// MarianMT's layout of the sine/cosine table: every sine column first (ceil(d/2) of them),
/// then every cosine column, computed in f64 and rounded once, as transformers computes it.
pub fn sinusoid_halves_table(max_len: usize, d_model: usize, device: &Device) -> Result<Tensor> {
    let sines = d_model.div_ceil(2);
    let mut table = vec![0f32; max_len * d_model];
    for (pos, row) in table.chunks_mut(d_model).enumerate() {
        for (i, value) in row.iter_mut().enumerate() {
            let (pair, sine) = if i < sines {
                (i, true)
            } else {
                (i - sines, false)
            };
            let angle = pos as f64 / 10000f64.powf(2.0 * pair as f64 / d_model as f64);
            *value = if sine { angle.sin() } else { angle.cos() } as f32;
        }
    }
    Tensor::from_vec(table, (max_len, d_model), device)
}

/// fairseq's table, as transformers' `M2M100SinusoidalPositionalEmbedding` computes it (in
/// f32): row i is position i + 2 (fairseq numbers positions from past the padding index), its
/// first half sin(p f_k) and its second cos(p f_k), f_k = exp(-k ln(10000) / (d/2 - 1)), a
/// zero column last when d is odd.
pub fn sinusoid_fairseq_table(max_len: usize, d_model: usize, device: &Device) -> Result<Tensor> {
    let half = d_model / 2;
    // In f64 and rounded once, as Python's math.log over an int before torch's f32 product.
    let step = (10000f64.ln() / (half.max(2) - 1) as f64) as f32;
    let frequencies: Vec<f32> = (0..half).map(|k| (k as f32 * -step).exp()).collect();
    let mut table = vec![0f32; max_len * d_model];
    for (row, values) in table.chunks_mut(d_model).enumerate() {
        let position = (row + 2) as f32;
        for (k, &frequency) in frequencies.iter().enumerate() {
            let angle = position * frequency;
            values[k] = angle.sin();
            values[half + k] = angle.cos();
        }
    }
    Tensor::from_vec(table, (max_len, d_model), device)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_position_table_follows_the_sine_cosine_formula() {
        let table = sinusoid_table(50, 8, &Device::Cpu).unwrap();
        let table = table.to_vec2::<f32>().unwrap();
        for pos in [0usize, 1, 7, 49] {
            for i in 0..4 {
                let angle = pos as f64 / 10000f64.powf(2. * i as f64 / 8.);
                assert!((table[pos][2 * i] as f64 - angle.sin()).abs() < 1e-5);
                assert!((table[pos][2 * i + 1] as f64 - angle.cos()).abs() < 1e-5);
            }
        }
        assert_eq!(table[0][0], 0.0);
        assert_eq!(table[0][1], 1.0);
    }

    #[test]
    fn the_halves_layout_puts_every_sine_before_every_cosine() {
        for d_model in [8, 7] {
            let table = sinusoid_table(50, d_model, &Device::Cpu).unwrap();
            let halves = sinusoid_halves_table(50, d_model, &Device::Cpu).unwrap();
            let (table, halves) = (
                table.to_vec2::<f32>().unwrap(),
                halves.to_vec2::<f32>().unwrap(),
            );
            let sines = d_model.div_ceil(2);
            for (pos, (halves, table)) in halves.iter().zip(&table).enumerate() {
                for (i, &a) in halves.iter().enumerate() {
                    let column = if i < sines {
                        2 * i
                    } else {
                        2 * (i - sines) + 1
                    };
                    let b = table[column];
                    assert!(
                        (a - b).abs() < 1e-4,
                        "d {d_model} pos {pos} i {i}: {a} vs {b}"
                    );
                }
            }
        }
    }
}
