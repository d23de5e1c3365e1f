//! The bounds every resolved setting meets (see the parent module's rule), each refused with
//! the name its request gives it.

use super::decode_settings::Bounds;
use super::{DecodeRequest, DecodeSettings, Refused};
use crate::config::LengthNormalization;

/// The length penalty divides scores by ((5 + len) / 6)^alpha: alpha must keep that factor a
/// finite, non-zero f32 (beam scores are f32) at every length up to the position table, or
/// every hypothesis scores the same (0 or minus infinity) and the search picks at random.
pub(super) fn check_length_penalty(
    alpha: f64,
    request: Option<&DecodeRequest>,
    normalization: LengthNormalization,
    bounds: &Bounds,
) -> Result<f32, Refused> {
    // ln of f32::MAX, less a margin for the scores the factor divides.
    const LARGEST_EXPONENT: f64 = 80.0;
    let longest = normalization.divisor(bounds.max_positions, 1.0).max(1.0);
    let longest = f64::from(longest).ln();
    let limit = if longest > 0.0 {
        LARGEST_EXPONENT / longest
    } else {
        f64::from(f32::MAX)
    };
    if alpha.is_finite() && alpha.abs() <= limit {
        return Ok(alpha as f32);
    }
    // Rounded toward zero, so that the value shown is itself allowed.
    let shown_limit = (limit * 100.0).floor() / 100.0;
    let Some(request) = request else {
        return Ok(alpha as f32);
    };
    Err(Refused::by(
        Some(request),
        format!(
            "{} would take the length penalty {} out of f32's range at the model's {} \
             positions; use a value between -{shown_limit} and {shown_limit} (0 to 2 is the \
             useful range)",
            request.wrote(request.names.length_penalty, shown(alpha)),
            normalization.formula(),
            bounds.max_positions
        ),
    ))
}

pub(super) fn check_n_best(
    settings: &DecodeSettings,
    n_best_from: Option<&DecodeRequest>,
    beam_from: Option<&DecodeRequest>,
    bounds: &Bounds,
) -> Result<(), Refused> {
    let Some(request) = n_best_from else {
        return Ok(());
    };
    let n_best = request.wrote(request.names.n_best, settings.n_best);
    if settings.n_best == 0 {
        return Err(Refused::by(
            Some(request),
            format!("{n_best} must be at least 1"),
        ));
    }
    if settings.n_best > settings.beam {
        // Only a beam the same request set can be narrower: any other is widened.
        let beam = beam_from.map_or(format!("the beam {}", settings.beam), |r| {
            r.wrote(r.names.beam, settings.beam)
        });
        let widest = bounds
            .door_beam
            .map_or(bounds.target_vocab, |door| door.min(bounds.target_vocab));
        let fix = if settings.beam < widest {
            "ask for fewer or widen the beam"
        } else {
            "ask for fewer (the beam is as wide as it can be)"
        };
        return Err(Refused::by(
            Some(request),
            format!(
                "{n_best} is more than {beam}: a beam search keeps at most as many hypotheses \
                 as its beam; {fix}"
            ),
        ));
    }
    Ok(())
}

pub(super) fn check_beam(
    settings: &DecodeSettings,
    beam_from: Option<&DecodeRequest>,
    n_best_from: Option<&DecodeRequest>,
    bounds: &Bounds,
) -> Result<(), Refused> {
    let beam = settings.beam;
    // Who asked for this beam: its own setting, or more hypotheses than the beam below.
    let (asker, fix, request) = match (beam_from, n_best_from) {
        (Some(request), _) => (request.wrote(request.names.beam, beam), None, Some(request)),
        (None, Some(request)) => (
            format!(
                "{} needs a beam of {beam} (one hypothesis per beam), and that",
                request.name(request.names.n_best)
            ),
            Some(format!(
                "ask for fewer ({})",
                request.name(request.names.n_best)
            )),
            Some(request),
        ),
        (None, None) => (format!("the beam {beam}"), None, None),
    };
    let refuse = |bound: String, most: usize| {
        let fix = fix.clone().unwrap_or_else(|| format!("use at most {most}"));
        Err(Refused::by(request, format!("{asker} {bound}; {fix}")))
    };
    if beam == 0 {
        return Err(Refused::by(request, format!("{asker} must be at least 1")));
    }
    if beam > bounds.target_vocab {
        let vocab = bounds.target_vocab;
        return refuse(
            format!("is more than the {vocab} target tokens the model chooses from"),
            vocab,
        );
    }
    if let Some(widest) = bounds.door_beam.filter(|&widest| beam > widest) {
        return refuse(
            format!("is wider than this server's limit of {widest}"),
            widest,
        );
    }
    Ok(())
}

pub(super) fn check_max_len(
    settings: &DecodeSettings,
    max_len_from: Option<&DecodeRequest>,
    bounds: &Bounds,
) -> Result<(), Refused> {
    let (Some(max_len), Some(request)) = (settings.max_len, max_len_from) else {
        return Ok(());
    };
    let name = request.wrote(request.names.max_len, max_len);
    if max_len == 0 {
        return Err(Refused::by(
            Some(request),
            format!("{name} must be at least 1"),
        ));
    }
    if max_len > bounds.max_positions {
        return Err(Refused::by(
            Some(request),
            format!(
                "{name} is more than the model's {} positions (model.max_len); use at most {}",
                bounds.max_positions, bounds.max_positions
            ),
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
