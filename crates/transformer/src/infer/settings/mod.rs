//! The one place that resolves decoding settings, for every door (`translate`, `eval`,
//! validation, `serve`'s flags, `/v1/translate`, LibreTranslate's `alternatives`).
//!
//! Layers, lowest first: the built-in defaults, the checkpoint's `[decode]`, then what a door
//! asks for (a flag, an HTTP field); a setting a layer leaves out falls to the one below. The
//! result is checked against the model and the door, with one rule for every bound: a value
//! out of bounds is refused with an error that names where it came from (the flag, the field,
//! the config key) and the bound; nothing is narrowed behind the asker's back. The bounds:
//! - `beam`: from 1 to the target vocabulary (a wider beam only repeats work) and to the
//!   door's widest (a server bounds the rows one sentence may cost);
//! - `n_best`: from 1 to the beam; a layer that asks for more hypotheses than the beam it
//!   does not set itself widens that beam (the only way to find them), and the widened beam
//!   meets the beam's bounds;
//! - `max_len`: from 1 to the position table's rows (`model.max_len`);
//! - `length_penalty`: finite in f32, the precision the search scores in.

mod bounds;
mod of_checkpoint;
mod options;

use crate::config::{DecodeConfig, LengthNormalization};
use crate::decoding::BeamSettings;
use bounds::{check_beam, check_length_penalty, check_max_len, check_n_best};
pub use of_checkpoint::resolver_of;
pub use options::DecodeOptions;

/// The settings one layer sets; `None` leaves a setting to the layers below.
#[derive(Debug, Default, Clone, Copy, PartialEq)]
pub struct DecodeRequest {
    pub beam: Option<usize>,
    pub length_penalty: Option<f64>,
    pub max_len: Option<usize>,
    pub n_best: Option<usize>,
}

impl From<&DecodeConfig> for DecodeRequest {
    fn from(config: &DecodeConfig) -> Self {
        Self {
            beam: Some(config.beam),
            length_penalty: Some(config.length_penalty),
            max_len: config.max_len,
            n_best: None,
        }
    }
}

/// What each setting is called where a layer comes from, for its errors.
#[derive(Debug, Clone, Copy)]
pub struct SettingNames {
    pub beam: &'static str,
    pub length_penalty: &'static str,
    pub max_len: &'static str,
    pub n_best: &'static str,
}

/// A config file's `[decode]` keys.
pub const CONFIG_KEYS: SettingNames = SettingNames {
    beam: "decode.beam",
    length_penalty: "decode.length_penalty",
    max_len: "decode.max_len",
    n_best: "decode.n_best",
};

/// transformers' `generation_config.json` keys (a MarianMT directory's defaults).
pub const GENERATION_CONFIG_KEYS: SettingNames = SettingNames {
    beam: "num_beams",
    length_penalty: "length_penalty",
    max_len: "max_length - 1",
    n_best: "num_return_sequences",
};

/// `/v1/translate`'s JSON fields.
pub const FIELDS: SettingNames = SettingNames {
    beam: "beam",
    length_penalty: "length_penalty",
    max_len: "max_len",
    n_best: "n_best",
};

/// LibreTranslate's `/translate`: `alternatives` asks for that many hypotheses beyond the
/// translation.
pub const LIBRETRANSLATE_FIELDS: SettingNames = SettingNames {
    n_best: "alternatives",
    ..FIELDS
};

/// One layer: what it sets, and how to name it.
#[derive(Debug, Clone)]
pub struct Layer {
    pub request: DecodeRequest,
    pub names: SettingNames,
    /// Where the layer was read, for its errors (a config file's path); empty for a door.
    pub origin: String,
}

impl Layer {
    /// A door's request (flags, fields).
    pub fn asked(request: DecodeRequest, names: SettingNames) -> Self {
        Self {
            request,
            names,
            origin: String::new(),
        }
    }

    /// A config's `[decode]` section, read from `origin` (a config file's path).
    pub fn config(config: &DecodeConfig, origin: impl Into<String>) -> Self {
        Self {
            request: DecodeRequest::from(config),
            names: CONFIG_KEYS,
            origin: origin.into(),
        }
    }

    /// `setting` as this layer wrote it: `--beam 13`, `beam 13`, `decode.beam = 13 in
    /// FILE`.
    pub(super) fn wrote(&self, setting: &'static str, value: impl std::fmt::Display) -> String {
        if self.origin.is_empty() {
            format!("{setting} {value}")
        } else {
            format!("{setting} = {value} in {}", self.origin)
        }
    }

    /// `setting` as this layer calls it, without a value.
    pub(super) fn name(&self, setting: &'static str) -> String {
        if self.origin.is_empty() {
            setting.to_string()
        } else {
            format!("{setting} in {}", self.origin)
        }
    }
}

/// What the settings are checked against.
#[derive(Debug, Clone, Copy)]
pub struct DecodeBounds {
    /// Tokens of the target vocabulary: the widest useful beam.
    pub target_vocab: usize,
    /// Rows of the model's position table (`model.max_len`).
    pub max_positions: usize,
    /// The door's widest beam (a server's limit).
    pub door_beam: Option<usize>,
    /// What the model's checkpoint says the length penalty divides by, and whether a
    /// translation open at the length limit ends with `</s>`: how the model is decoded,
    /// not a choice of the asker.
    pub length_normalization: LengthNormalization,
    pub end_at_max_len: bool,
    pub renormalize: bool,
    /// The checkpoint's target tokens per source token (`decode.length_ratio`), which marks
    /// a translation `short`.
    pub length_ratio: f32,
}

/// A setting refused: the message names it as its layer does, and the bound.
#[derive(Debug, Clone, PartialEq)]
pub struct Refused {
    pub message: String,
    /// The value came from a config file (a checkpoint's or a training config's `[decode]`),
    /// not from what a door asked: the file is at fault, not the command line.
    pub in_config: bool,
}

impl Refused {
    fn by(layer: Option<&Layer>, message: String) -> Self {
        Self {
            message,
            in_config: layer.is_some_and(|l| !l.origin.is_empty()),
        }
    }
}

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Refused {}

/// The settings of `layers` (lowest first) over the built-in defaults, checked against
/// `bounds` once every layer has spoken (a value a higher layer replaces is never checked);
/// the error names the setting as its layer calls it.
pub fn resolve(layers: &[Layer], bounds: &DecodeBounds) -> Result<DecodeOptions, Refused> {
    let mut options = DecodeOptions {
        length_normalization: bounds.length_normalization,
        end_at_max_len: bounds.end_at_max_len,
        renormalize: bounds.renormalize,
        length_ratio: bounds.length_ratio,
        ..DecodeOptions::default()
    };
    let mut length_penalty = f64::from(options.length_penalty);
    // The layer that set each value, for its error.
    let mut beam_from: Option<&Layer> = None;
    let mut n_best_from: Option<&Layer> = None;
    let mut length_penalty_from: Option<&Layer> = None;
    let mut max_len_from: Option<&Layer> = None;
    for layer in layers {
        let asked = &layer.request;
        if let Some(beam) = asked.beam {
            options.beam = beam;
            beam_from = Some(layer);
        }
        if let Some(alpha) = asked.length_penalty {
            length_penalty = alpha;
            length_penalty_from = Some(layer);
        }
        if let Some(max_len) = asked.max_len {
            options.max_len = Some(max_len);
            max_len_from = Some(layer);
        }
        if let Some(n_best) = asked.n_best {
            options.n_best = n_best;
            n_best_from = Some(layer);
            // More hypotheses than a beam set below widen it; the same layer's beam stands.
            if asked.beam.is_none() && options.beam < n_best {
                options.beam = n_best;
                beam_from = None;
            }
        }
    }
    options.length_penalty = check_length_penalty(length_penalty, length_penalty_from, bounds)?;
    check_n_best(&options, n_best_from, beam_from, bounds)?;
    check_beam(&options, beam_from, n_best_from, bounds)?;
    check_max_len(&options, max_len_from, bounds)?;
    Ok(options)
}

/// A door's layers below its requests, resolved once (so that a bad flag or config value is
/// named before any request), and every request resolved over them.
#[derive(Debug, Clone)]
pub struct Resolver {
    layers: Vec<Layer>,
    bounds: DecodeBounds,
    defaults: DecodeOptions,
}

impl Resolver {
    pub fn new(layers: Vec<Layer>, bounds: DecodeBounds) -> Result<Self, Refused> {
        let defaults = resolve(&layers, &bounds)?;
        Ok(Self {
            layers,
            bounds,
            defaults,
        })
    }

    /// The settings of a request that sets none.
    pub fn defaults(&self) -> DecodeOptions {
        self.defaults
    }

    /// `request` (named as `names` says) over the layers below.
    pub fn resolve(
        &self,
        request: DecodeRequest,
        names: SettingNames,
    ) -> Result<DecodeOptions, Refused> {
        if request == DecodeRequest::default() {
            return Ok(self.defaults);
        }
        let mut layers = self.layers.clone();
        layers.push(Layer::asked(request, names));
        resolve(&layers, &self.bounds)
    }
}

impl DecodeOptions {
    /// Beam search's settings; `None` for greedy decoding (a beam of 1 and one hypothesis).
    pub fn beam_settings(&self) -> Option<BeamSettings> {
        (self.beam > 1).then_some(BeamSettings {
            beam: self.beam,
            length_penalty: self.length_penalty,
            normalization: self.length_normalization,
            renormalize: self.renormalize,
            n_best: self.n_best,
            prefix_in_length: 0,
        })
    }
}

#[cfg(test)]
mod tests;
