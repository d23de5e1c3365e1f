//! The bounds every resolved setting meets (see the parent module's rule), each refused with
//! the name its layer gives it.

use super::{DecodeBounds, Layer};
use crate::infer::translator::DecodeOptions;

pub(super) fn check_length_penalty(alpha: f64, layer: &Layer) -> Result<f32, String> {
    let narrowed = alpha as f32;
    if !narrowed.is_finite() {
        return Err(format!(
            "{} is not a finite number in f32 (beam scores are f32): use a value between \
             -3.4e38 and 3.4e38; 0 to 2 is the useful range",
            layer.wrote(layer.names.length_penalty, shown(alpha))
        ));
    }
    Ok(narrowed)
}

pub(super) fn check_n_best(
    options: &DecodeOptions,
    n_best_from: Option<&Layer>,
    beam_from: Option<&Layer>,
) -> Result<(), String> {
    let Some(layer) = n_best_from else {
        return Ok(());
    };
    let n_best = layer.wrote(layer.names.n_best, options.n_best);
    if options.n_best == 0 {
        return Err(format!("{n_best} must be at least 1"));
    }
    if options.n_best > options.beam {
        // Only a beam the same layer set can be narrower: any other is widened.
        let beam = beam_from.map_or(format!("the beam {}", options.beam), |l| {
            l.wrote(l.names.beam, options.beam)
        });
        return Err(format!(
            "{n_best} is more than {beam}: a beam search keeps at most as many hypotheses as \
             its beam; ask for fewer or widen the beam"
        ));
    }
    Ok(())
}

pub(super) fn check_beam(
    options: &DecodeOptions,
    beam_from: Option<&Layer>,
    n_best_from: Option<&Layer>,
    bounds: &DecodeBounds,
) -> Result<(), String> {
    let beam = options.beam;
    let asker = match (beam_from, n_best_from) {
        (Some(layer), _) => layer.wrote(layer.names.beam, beam),
        (None, Some(layer)) => format!(
            "{} needs a beam of {beam} (one hypothesis per beam), and that",
            layer.name(layer.names.n_best)
        ),
        (None, None) => format!("the beam {beam}"),
    };
    if beam == 0 {
        return Err(format!("{asker} must be at least 1"));
    }
    if beam > bounds.target_vocab {
        return Err(format!(
            "{asker} is more than the {} target tokens the model chooses from; use at most {}",
            bounds.target_vocab, bounds.target_vocab
        ));
    }
    if let Some(widest) = bounds.door_beam.filter(|&widest| beam > widest) {
        return Err(format!(
            "{asker} is wider than this server's limit of {widest}; use at most {widest}"
        ));
    }
    Ok(())
}

pub(super) fn check_max_len(
    options: &DecodeOptions,
    max_len_from: Option<&Layer>,
    bounds: &DecodeBounds,
) -> Result<(), String> {
    let (Some(max_len), Some(layer)) = (options.max_len, max_len_from) else {
        return Ok(());
    };
    let name = layer.wrote(layer.names.max_len, max_len);
    if max_len == 0 {
        return Err(format!("{name} must be at least 1"));
    }
    if max_len > bounds.max_positions {
        return Err(format!(
            "{name} is more than the model's {} positions (model.max_len); use at \
             most {}",
            bounds.max_positions, bounds.max_positions
        ));
    }
    Ok(())
}

/// `value` as a person would write it: `1e39`, not forty digits.
fn shown(value: f64) -> String {
    if value.abs() >= 1e15 {
        format!("{value:e}")
    } else {
        value.to_string()
    }
}
