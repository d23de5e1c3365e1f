//! Attention masks: 1 where attention is allowed, 0 where it is not (padding, the future).

use candle_core::{DType, Device, Result, Tensor};

/// `(batch, len)` ids -> `(batch, 1, len)`: hides padding keys from every query.
pub fn padding_mask(ids: &Tensor, pad: u32) -> Result<Tensor> {
    ids.ne(pad)?.unsqueeze(1)
}

/// `(1, size, size)`, lower-triangular: position i may attend to positions 0..=i only.
pub fn subsequent_mask(size: usize, device: &Device) -> Result<Tensor> {
    let allowed: Vec<u8> = (0..size)
        .flat_map(|i| (0..size).map(move |j| u8::from(j <= i)))
        .collect();
    Tensor::from_vec(allowed, (1, size, size), device)
}

/// The decoder's self-attention mask: `(batch, len)` ids -> `(batch, len, len)`, hiding both
/// padding and future positions.
pub fn target_mask(ids: &Tensor, pad: u32) -> Result<Tensor> {
    let (_, len) = ids.dims2()?;
    let padding = padding_mask(ids, pad)?;
    padding.broadcast_mul(&subsequent_mask(len, ids.device())?)
}

/// An all-ones source mask `(batch, 1, len)`, for sources without padding.
pub fn full_mask(batch: usize, len: usize, device: &Device) -> Result<Tensor> {
    Tensor::ones((batch, 1, len), DType::U8, device)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_subsequent_mask_hides_future_positions() {
        let mask = subsequent_mask(3, &Device::Cpu).unwrap();
        let rows = mask.squeeze(0).unwrap().to_vec2::<u8>().unwrap();
        assert_eq!(rows, vec![vec![1, 0, 0], vec![1, 1, 0], vec![1, 1, 1]]);
    }

    #[test]
    fn the_target_mask_hides_padding_and_the_future() {
        let ids = Tensor::new(&[[1u32, 5, 0]], &Device::Cpu).unwrap();
        let mask = target_mask(&ids, 0).unwrap();
        let rows = mask.squeeze(0).unwrap().to_vec2::<u8>().unwrap();
        assert_eq!(rows, vec![vec![1, 0, 0], vec![1, 1, 0], vec![1, 1, 0]]);
    }

    #[test]
    fn the_padding_mask_hides_pad_keys() {
        let ids = Tensor::new(&[[4u32, 2, 0, 0]], &Device::Cpu).unwrap();
        let mask = padding_mask(&ids, 0).unwrap();
        assert_eq!(mask.dims(), &[1, 1, 4]);
        assert_eq!(
            mask.flatten_all().unwrap().to_vec1::<u8>().unwrap(),
            vec![1, 1, 0, 0]
        );
    }
}
