//! Gradient clipping by global norm, as torch.nn.utils.clip_grad_norm_ does it.

use candle_core::Tensor;

/// Scales all gradients down so that their global L2 norm is at most `max_norm`, as
/// torch.nn.utils.clip_grad_norm_ does.
pub fn clip_grad_norm(grads: &mut [Option<Tensor>], max_norm: f64) -> candle_core::Result<()> {
    let squares = grads
        .iter()
        .flatten()
        .map(|g| g.sqr()?.sum_all())
        .collect::<candle_core::Result<Vec<_>>>()?;
    if squares.is_empty() {
        return Ok(());
    }
    let norm = f64::from(
        Tensor::stack(&squares, 0)?
            .sum_all()?
            .sqrt()?
            .to_scalar::<f32>()?,
    );
    let scale = max_norm / (norm + 1e-6);
    if scale < 1.0 {
        for grad in grads.iter_mut().flatten() {
            *grad = (&*grad * scale)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::Device;

    #[test]
    fn clipping_rescales_to_the_max_norm_and_leaves_small_gradients_alone() {
        let dev = Device::Cpu;
        let mut grads = vec![
            Some(Tensor::new(&[3f32, 0.], &dev).unwrap()),
            None,
            Some(Tensor::new(&[4f32], &dev).unwrap()),
        ];
        clip_grad_norm(&mut grads, 1.0).unwrap();
        let a = grads[0].as_ref().unwrap().to_vec1::<f32>().unwrap();
        let b = grads[2].as_ref().unwrap().to_vec1::<f32>().unwrap();
        assert!((a[0] - 0.6).abs() < 1e-5 && (b[0] - 0.8).abs() < 1e-5);
        clip_grad_norm(&mut grads, 10.0).unwrap();
        assert!((grads[0].as_ref().unwrap().to_vec1::<f32>().unwrap()[0] - 0.6).abs() < 1e-5);
    }
}
