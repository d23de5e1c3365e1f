//! The learning-rate schedule of paper section 5.3 ("Noam"): linear warm-up, then decay with
//! the inverse square root of the step.

use crate::config::LrSchedule;

/// The rate of optimiser step `step` (from 1) under `schedule`.
pub fn rate_of_step(
    schedule: LrSchedule,
    step: usize,
    d_model: usize,
    factor: f64,
    warmup: usize,
) -> f64 {
    let scheduled = match schedule {
        LrSchedule::Noam => step,
        LrSchedule::NoamLambdalr => step.saturating_sub(1),
    };
    noam_rate(scheduled, d_model, factor, warmup)
}

/// lr(step) = factor * d_model^-0.5 * min(step^-0.5, step * warmup^-1.5), for 1-based steps.
pub fn noam_rate(step: usize, d_model: usize, factor: f64, warmup: usize) -> f64 {
    let step = step.max(1) as f64;
    factor * (d_model as f64).powf(-0.5) * step.powf(-0.5).min(step * (warmup as f64).powf(-1.5))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rate_rises_linearly_then_decays_as_inverse_sqrt() {
        let peak = noam_rate(4000, 512, 1.0, 4000);
        assert!((peak - 512f64.powf(-0.5) * 4000f64.powf(-0.5)).abs() < 1e-12);
        assert!((noam_rate(2000, 512, 1.0, 4000) - peak / 2.0).abs() < 1e-12);
        assert!((noam_rate(16000, 512, 1.0, 4000) - peak / 2.0).abs() < 1e-12);
        assert_eq!(noam_rate(0, 512, 1.0, 4000), noam_rate(1, 512, 1.0, 4000));
        assert!((noam_rate(10, 512, 2.0, 400) - 2.0 * noam_rate(10, 512, 1.0, 400)).abs() < 1e-15);
    }

    #[test]
    fn the_lambdalr_wiring_lags_one_step_and_repeats_the_first_rate() {
        let rate = |schedule, step| rate_of_step(schedule, step, 512, 1.0, 4000);
        assert_eq!(
            rate(LrSchedule::NoamLambdalr, 1),
            noam_rate(1, 512, 1.0, 4000)
        );
        assert_eq!(
            rate(LrSchedule::NoamLambdalr, 2),
            noam_rate(1, 512, 1.0, 4000)
        );
        assert_eq!(
            rate(LrSchedule::NoamLambdalr, 3),
            noam_rate(2, 512, 1.0, 4000)
        );
        assert_eq!(rate(LrSchedule::Noam, 3), noam_rate(3, 512, 1.0, 4000));
    }
}
