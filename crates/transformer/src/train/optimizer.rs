//! Adam (Kingma & Ba) with the paper's betas, written out so that its state is ours to keep
//! (candle's AdamW hides its moments, which a resumable checkpoint needs).

use candle_core::{Result, Tensor, Var};

use crate::kernels::adam::{adam_update, AdamStep};

/// Adam's hyper-parameters.
#[derive(Debug, Clone, Copy)]
pub struct AdamSettings {
    pub beta1: f64,
    pub beta2: f64,
    pub eps: f64,
}

/// Adam over a fixed list of variables, updated as torch.optim.Adam does (no weight decay).
pub struct Adam {
    vars: Vec<Var>,
    first_moments: Vec<Tensor>,
    second_moments: Vec<Tensor>,
    settings: AdamSettings,
    steps_taken: usize,
}

impl Adam {
    pub fn new(vars: Vec<Var>, settings: AdamSettings) -> Result<Self> {
        let zeros = |v: &Var| v.as_tensor().zeros_like();
        Ok(Self {
            first_moments: vars.iter().map(zeros).collect::<Result<_>>()?,
            second_moments: vars.iter().map(zeros).collect::<Result<_>>()?,
            vars,
            settings,
            steps_taken: 0,
        })
    }

    /// The variables, in the order `step` expects their gradients.
    pub fn vars(&self) -> &[Var] {
        &self.vars
    }

    /// Updates taken so far (Adam's t, which its bias corrections depend on).
    pub fn steps_taken(&self) -> usize {
        self.steps_taken
    }

    /// The running averages of gradients and squared gradients (torch's `exp_avg` and
    /// `exp_avg_sq`), in the order of `vars()`.
    pub fn moments(&self) -> (&[Tensor], &[Tensor]) {
        (&self.first_moments, &self.second_moments)
    }

    /// Puts back the state of an earlier run: `steps_taken` updates and the moments in the
    /// order of `vars()`, each shaped like its variable.
    pub fn restore(
        &mut self,
        steps_taken: usize,
        first_moments: Vec<Tensor>,
        second_moments: Vec<Tensor>,
    ) -> Result<()> {
        let n = self.vars.len();
        if first_moments.len() != n || second_moments.len() != n {
            candle_core::bail!(
                "optimizer state has {} and {} moments for {n} parameters",
                first_moments.len(),
                second_moments.len()
            );
        }
        for ((var, m), v) in self.vars.iter().zip(&first_moments).zip(&second_moments) {
            if m.shape() != var.shape() || v.shape() != var.shape() {
                candle_core::bail!(
                    "optimizer moments of shape {:?} / {:?} for a parameter of shape {:?}",
                    m.dims(),
                    v.dims(),
                    var.dims()
                );
            }
        }
        self.steps_taken = steps_taken;
        self.first_moments = first_moments;
        self.second_moments = second_moments;
        Ok(())
    }

    /// One update with learning rate `lr`; `grads[i]` belongs to `vars()[i]`, and variables
    /// without a gradient are left alone.
    pub fn step(&mut self, grads: &[Option<Tensor>], lr: f64) -> Result<()> {
        self.steps_taken += 1;
        let AdamSettings { beta1, beta2, eps } = self.settings;
        let t = self.steps_taken as i32;
        let bias_correction1 = 1.0 - beta1.powi(t);
        let bias_correction2 = 1.0 - beta2.powi(t);
        let step = AdamStep {
            beta1: beta1 as f32,
            beta2: beta2 as f32,
            step_size: (lr / bias_correction1) as f32,
            inv_sqrt_bias_correction2: (1.0 / bias_correction2.sqrt()) as f32,
            eps: eps as f32,
        };
        for (((var, m), v), grad) in self
            .vars
            .iter()
            .zip(&mut self.first_moments)
            .zip(&mut self.second_moments)
            .zip(grads)
        {
            let Some(grad) = grad else {
                continue;
            };
            adam_update(var, m, v, grad, step)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::Device;

    #[test]
    fn the_first_step_moves_each_weight_by_lr_against_its_gradient_sign() {
        // With bias correction, Adam's first step is lr * g / (|g| + eps) ~= lr * sign(g).
        let var = Var::new(&[1f32, -2., 3.], &Device::Cpu).unwrap();
        let loss = (var.as_tensor() * &Tensor::new(&[2f32, -3., 0.5], &Device::Cpu).unwrap())
            .unwrap()
            .sum_all()
            .unwrap();
        let grads = loss.backward().unwrap();
        let settings = AdamSettings {
            beta1: 0.9,
            beta2: 0.98,
            eps: 1e-9,
        };
        let mut adam = Adam::new(vec![var.clone()], settings).unwrap();
        adam.step(&[grads.get(var.as_tensor()).cloned()], 0.1)
            .unwrap();
        let after = var.as_tensor().to_vec1::<f32>().unwrap();
        let want = [0.9f32, -1.9, 2.9];
        for (a, w) in after.iter().zip(want) {
            assert!((a - w).abs() < 1e-5, "{after:?}");
        }
    }
}
