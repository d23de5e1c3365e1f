//! The one place that resolves decoding settings, for every door (`translate`, `eval`,
//! validation, `serve`'s flags, `/v1/translate`, LibreTranslate's `alternatives`).
//!
//! Two types: a [`DecodeRequest`] is what one asker sets (and how it names each setting), and
//! [`DecodeSettings`] the settled value, which keeps the requests it came from and its bounds,
//! so that each further request is settled over it. Requests, lowest first: the built-in
//! defaults, the checkpoint's `[decode]`, then what a door asks for (a flag, an HTTP field); a
//! setting a request leaves out falls to the one below. The result is checked against the
//! model and the door, with one rule for every bound: a value out of bounds is refused with an
//! error that names where it came from (the flag, the field, the config key) and the bound;
//! nothing is narrowed behind the asker's back. The bounds:
//! - `beam`: from 1 to the target vocabulary (a wider beam only repeats work) and to the
//!   door's widest (a server bounds the rows one sentence may cost);
//! - `n_best`: from 1 to the beam; a request that asks for more hypotheses than the beam it
//!   does not set itself widens that beam (the only way to find them), and the widened beam
//!   meets the beam's bounds;
//! - `max_len`: from 1 to the position table's rows (`model.max_len`);
//! - `length_penalty`: finite in f32, the precision the search scores in.

mod bounds;
mod decode_settings;
mod of_checkpoint;

use crate::config::DecodeConfig;
use bounds::{check_beam, check_length_penalty, check_max_len, check_n_best};
pub use decode_settings::DecodeSettings;
pub use of_checkpoint::settings_of;

/// What one asker sets (a door's flags or fields, a config's `[decode]`), how it names each
/// setting, and where it was read; `None` leaves a setting to the requests below.
#[derive(Debug, Clone, PartialEq)]
pub struct DecodeRequest {
    pub beam: Option<usize>,
    pub length_penalty: Option<f64>,
    pub max_len: Option<usize>,
    pub n_best: Option<usize>,
    /// What each setting is called where the request comes from, for its errors.
    pub names: SettingNames,
    /// The file the request was read from (a config's path), for its errors; `None` for a
    /// door (flags, fields).
    pub origin: Option<String>,
}

impl DecodeRequest {
    /// A door's request that sets nothing yet, its settings named as `names` says.
    pub fn by(names: SettingNames) -> Self {
        Self {
            beam: None,
            length_penalty: None,
            max_len: None,
            n_best: None,
            names,
            origin: None,
        }
    }

    /// A config's `[decode]` section, read from `origin` (a config file's path).
    pub fn of_config(config: &DecodeConfig, origin: impl Into<String>) -> Self {
        Self {
            beam: Some(config.beam),
            length_penalty: Some(config.length_penalty),
            max_len: config.max_len,
            origin: Some(origin.into()),
            ..Self::by(CONFIG_KEYS)
        }
    }

    /// Whether the request sets nothing (every setting falls to the requests below).
    fn sets_nothing(&self) -> bool {
        self.beam.is_none()
            && self.length_penalty.is_none()
            && self.max_len.is_none()
            && self.n_best.is_none()
    }

    /// `setting` as this request wrote it: `--beam 13`, `beam 13`, `decode.beam = 13 in
    /// FILE`.
    fn wrote(&self, setting: &'static str, value: impl std::fmt::Display) -> String {
        match &self.origin {
            None => format!("{setting} {value}"),
            Some(origin) => format!("{setting} = {value} in {origin}"),
        }
    }

    /// `setting` as this request calls it, without a value.
    fn name(&self, setting: &'static str) -> String {
        match &self.origin {
            None => setting.to_string(),
            Some(origin) => format!("{setting} in {origin}"),
        }
    }
}

/// What each setting is called where a request comes from, for its errors.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
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

/// A setting refused: the message names it as its request does, and the bound.
#[derive(Debug, Clone, PartialEq)]
pub struct Refused {
    pub message: String,
    /// The value came from a config file (a checkpoint's or a training config's `[decode]`),
    /// not from what a door asked: the file is at fault, not the command line.
    pub in_config: bool,
}

impl Refused {
    fn by(request: Option<&DecodeRequest>, message: String) -> Self {
        Self {
            message,
            in_config: request.is_some_and(|r| r.origin.is_some()),
        }
    }
}

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Refused {}

#[cfg(test)]
mod tests;
