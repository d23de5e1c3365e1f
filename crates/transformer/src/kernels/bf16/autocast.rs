//! Where products run in bf16: a scope on the thread that runs a training step, as
//! `torch.autocast("cpu", dtype=torch.bfloat16)` is a scope. Inside it, the linear layers
//! whose weights are being trained multiply through [`super::gemm`] (forward and backward);
//! everything else, and every thread outside a scope, computes in f32.

use std::cell::Cell;

use super::Engine;

thread_local! {
    static ACTIVE: Cell<Option<Engine>> = const { Cell::new(None) };
}

/// Products in bf16 on `engine` on this thread until the guard drops.
pub fn autocast(engine: Engine) -> Autocast {
    Autocast {
        before: ACTIVE.with(|active| active.replace(Some(engine))),
    }
}

/// The engine products run on in bf16 here, inside an [`autocast`] scope.
pub fn active() -> Option<Engine> {
    ACTIVE.with(Cell::get)
}

/// Ends an [`autocast`] scope, restoring the one around it.
pub struct Autocast {
    before: Option<Engine>,
}

impl Drop for Autocast {
    fn drop(&mut self) {
        ACTIVE.with(|active| active.set(self.before));
    }
}

/// What the composed path (candle's ops) multiplies inside a scope: `t` rounded to bf16 and
/// back, so that the product sums in f32 as the engines' do, the rounding passing gradients
/// straight on. Outside a scope, or for what is not f32, `t` itself.
pub fn rounded_in_scope(t: &candle_core::Tensor) -> candle_core::Result<candle_core::Tensor> {
    use candle_core::DType;
    match active() {
        Some(_) if t.dtype() == DType::F32 => t.to_dtype(DType::BF16)?.to_dtype(DType::F32),
        _ => Ok(t.clone()),
    }
}
