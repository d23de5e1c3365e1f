//! The run configuration: TOML sections `[model]`, `[data]`, `[training]` and `[run]`.
//!
//! The paper's (and The Annotated Transformer's) defaults live here and nowhere else: every
//! `Default` impl in this module (model.rs, data.rs, training.rs). A config file only states what differs. Loading rejects unknown keys and
//! invalid values with an error that names the file, the line, the key and the rule.

use std::fmt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use toml_location::{key_at, line_of_key, line_of_offset, one_line};

mod data;
mod decode;
mod marian_preset;
mod model;
mod shipped;
mod toml_location;
mod training;
mod validate;

pub use data::{BuiltinCorpus, CorpusCacheMode, CorpusSource, DataConfig, TokenizerKind};
pub use decode::{ComputeType, DecodeConfig, LengthNormalization};
pub use model::{
    Activation, Architecture, ModelConfig, NormPlacement, PositionEncoding, VocabSizes,
};
pub use shipped::{shipped_config, shipped_names, ShippedConfig, SHIPPED};
pub use training::{ComputeDtype, LrSchedule, TrainingConfig};

/// The built-in base config, used by `transformer train` without `--config`.
pub const BUILTIN_BASE: &str = SHIPPED[0].text;
/// The `[model]` keys a checkpoint's config must state: the sizes.
const MODEL_SIZE_KEYS: [&str; 5] = ["layers", "d_model", "d_ff", "heads", "max_len"];

/// What `transformer train` without `--config` calls its config in messages.
const BUILTIN_BASE_NAME: &str = "built-in base config";

/// A complete, validated run configuration.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    pub model: ModelConfig,
    pub data: DataConfig,
    pub training: TrainingConfig,
    pub decode: DecodeConfig,
    pub run: RunConfig,
    /// Where it was read (a file's path, or the built-in config's name), for errors found
    /// after loading; not part of the config itself.
    #[serde(skip)]
    pub source_name: String,
    /// What reading a foreign config found worth a warning, not an error (a generation
    /// setting this tool does not apply); not part of the config itself.
    #[serde(skip)]
    pub notes: Vec<String>,
    /// The tables and keys the config file states, as read once when it was parsed (a preset
    /// and `training.init_from` fill only what it leaves out); `None` for a config that
    /// states everything (the built-in one) or was built otherwise.
    #[serde(skip)]
    pub stated: Option<toml::Table>,
}

/// Two configs are equal when their settings are: what a file stated is how they were
/// written, not what they say.
impl PartialEq for Config {
    fn eq(&self, other: &Self) -> bool {
        self.model == other.model
            && self.data == other.data
            && self.training == other.training
            && self.decode == other.decode
            && self.run == other.run
            && self.source_name == other.source_name
            && self.notes == other.notes
    }
}

/// Where the run directory goes.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RunConfig {
    /// Run directory; `runs/<config name>` when absent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dir: Option<PathBuf>,
}

/// A config error that names where it is: file, line (when known) and key.
#[derive(Debug, Clone, PartialEq)]
pub struct ConfigError {
    pub source_name: String,
    pub line: Option<usize>,
    pub key: Option<String>,
    pub message: String,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.source_name)?;
        if let Some(line) = self.line {
            write!(f, " line {line}")?;
        }
        if let Some(key) = &self.key {
            write!(f, ", key `{key}`")?;
        }
        write!(f, ": {}", self.message)
    }
}

impl std::error::Error for ConfigError {}

/// A config file that cannot be read at all (its contents' errors are [`ConfigError`]s). The
/// reading error is part of the message, not a separate source: a chain printed whole
/// (`{:#}`) would say it twice.
#[derive(Debug, thiserror::Error)]
#[error("cannot read config {}: {error}", path.display())]
pub struct ConfigReadError {
    pub path: PathBuf,
    pub error: String,
}

/// The text of the config at `path`: a regular file of at most
/// [`crate::small_file::MOST_CONFIG_BYTES`]; the error says why not, without the path.
fn read_config_text(path: &Path) -> Result<String, String> {
    let bytes = crate::small_file::read_unnamed(path, crate::small_file::MOST_CONFIG_BYTES)?;
    String::from_utf8(bytes).map_err(|e| format!("it is not UTF-8 text: {e}"))
}

impl Config {
    /// Reads and validates a config file.
    pub fn load(path: &Path) -> anyhow::Result<Self> {
        let text = read_config_text(path).map_err(|error| ConfigReadError {
            path: path.to_path_buf(),
            error,
        })?;
        Ok(Self::parse(&text, &path.display().to_string())?)
    }

    /// `configs/base.toml` as built into the binary, reading the toy pairs built in with it
    /// (the file names `data/toy.tsv`, which exists only in the source tree), so that
    /// `transformer train` without `--config` runs from any directory.
    pub fn builtin_base() -> Result<Self, ConfigError> {
        let mut config = Self::parse(BUILTIN_BASE, BUILTIN_BASE_NAME)?;
        // Its every key counts as stated.
        config.stated = None;
        config.data.train = CorpusSource::Builtin {
            builtin: BuiltinCorpus::Toy,
        };
        Ok(config)
    }

    /// Reads the config a checkpoint carries. `train` writes it whole, every section explicit,
    /// so one without its `[model]` table (an empty file, say) is damaged: read as the
    /// defaults, it would blame the weights for not matching.
    pub fn load_saved(path: &Path) -> anyhow::Result<Self> {
        let text = read_config_text(path).map_err(|e| {
            anyhow::anyhow!(
                "cannot read {}: {e}; the checkpoint is incomplete, copy the file from the run \
                 that wrote it or train again",
                path.display()
            )
        })?;
        let table = toml::from_str::<toml::Table>(&text).ok();
        let model = table
            .as_ref()
            .map(|t| t.get("model").and_then(toml::Value::as_table));
        if let Some(Some(model)) = model {
            // The sizes are written by every version of `train`; one that is missing (a file
            // cut at a line's end, say) would be read as the paper's default, and a wrong
            // `heads` changes the model without changing the shape of any weight.
            let missing = MODEL_SIZE_KEYS
                .iter()
                .find(|key| !model.contains_key(**key));
            if let Some(key) = missing {
                anyhow::bail!(
                    "{} has no model.{key}; training writes every size, so the file was \
                     cut or edited: restore it from the run that wrote it or train again",
                    path.display()
                );
            }
        }
        if let Some(None) = model {
            anyhow::bail!(
                "{} has no [model] table ({}); training writes it whole, so the checkpoint is \
                 damaged: restore the file from the run that wrote it or train again",
                path.display(),
                if text.trim().is_empty() {
                    "it is empty"
                } else {
                    "it was cut or edited"
                }
            );
        }
        Ok(Self::parse(&text, &path.display().to_string())?)
    }

    /// Parses and validates config text; `source_name` is used in error messages.
    pub fn parse(text: &str, source_name: &str) -> Result<Self, ConfigError> {
        let mut config = read_toml(text).map_err(|located| ConfigError {
            source_name: source_name.to_string(),
            ..located
        })?;
        let stated: toml::Table = toml::from_str(text).unwrap_or_default();
        marian_preset::resolve(&mut config, &stated);
        config.validate().map_err(|(key, message)| ConfigError {
            source_name: source_name.to_string(),
            line: line_of_key(text, &key),
            key: Some(key),
            message,
        })?;
        config.source_name = source_name.to_string();
        config.stated = Some(stated);
        Ok(config)
    }

    /// The rules `parse` checks, for a config built otherwise (a Hugging Face directory's):
    /// the offending key (as ours is dotted) and the rule it breaks.
    pub fn broken_rule(&self) -> Option<(String, String)> {
        self.validate().err()
    }

    /// The resolved config as TOML, every value explicit; it travels with the weights.
    pub fn to_toml(&self) -> anyhow::Result<String> {
        Ok(toml::to_string(self)?)
    }
}

/// Config text as a `Config`, before validation; an error names the line and the key path
/// (`data.train.tgt`, from the deserializer's path through the tables) where toml's spans
/// and the text allow.
fn read_toml(text: &str) -> Result<Config, ConfigError> {
    let located = |e: &toml::de::Error, key: Option<String>| ConfigError {
        source_name: String::new(),
        line: e.span().map(|span| line_of_offset(text, span.start)),
        key,
        message: one_line(e.message()),
    };
    // A syntax error: the line says where, the text on it which key (if any).
    let deserializer = toml::Deserializer::parse(text).map_err(|e| {
        let mut error = located(&e, e.span().and_then(|span| key_at(text, span.start)));
        // A table header written twice: toml says "duplicate key" and names nothing.
        let header = e
            .span()
            .and_then(|span| text.lines().nth(line_of_offset(text, span.start) - 1))
            .and_then(|line| line.trim().strip_prefix('['))
            .and_then(|rest| rest.split_once(']'))
            .map(|(name, _)| name.trim().to_string());
        if let (Some(name), true) = (header, error.message.starts_with("duplicate key")) {
            error.message = format!("the table [{name}] is written twice; merge the two into one");
            error.key = Some(name);
        }
        error
    })?;
    serde_path_to_error::deserialize(deserializer).map_err(|e| {
        let path = e.path().to_string();
        let array_of_tables = path
            .split_once('[')
            .filter(|(section, _)| !section.contains('.'))
            .map(|(section, _)| section.to_string());
        let inner = e.into_inner();
        // `[[model]]` is an array of tables, which serde reads as the struct's fields in
        // order ("key model[0]: invalid type: map, expected a whole number").
        if let Some(section) = array_of_tables {
            let mut error = located(&inner, Some(section.clone()));
            error.line = line_of_text(text, &format!("[[{section}]]")).or(error.line);
            error.message = format!(
                "[[{section}]] makes a list of tables; write [{section}] (one pair of brackets)"
            );
            return error;
        }
        // "." is the top level: a syntax-level error, where the text on its line says more.
        let key = Some(path)
            .filter(|path| path != ".")
            .or_else(|| inner.span().and_then(|span| key_at(text, span.start)));
        let mut error = located(&inner, key.clone());
        if error.line.is_none() {
            error.line = key.as_deref().and_then(|key| line_of_key(text, key));
        }
        error
    })
}

/// The line (from 1) whose text, trimmed, starts with `start`.
fn line_of_text(text: &str, start: &str) -> Option<usize> {
    text.lines()
        .position(|line| line.trim().starts_with(start))
        .map(|index| index + 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_table_written_twice_or_as_a_list_is_named() {
        let twice = parse("[model]\nlayers = 2\n[model]\nheads = 2\n").unwrap_err();
        assert_eq!(twice.line, Some(3));
        assert_eq!(twice.key.as_deref(), Some("model"));
        assert!(
            twice.message.contains("[model] is written twice"),
            "{}",
            twice.message
        );
        let list = parse("[training]\nseed = 1\n\n[[model]]\nlayers = 2\n").unwrap_err();
        assert_eq!(list.line, Some(4));
        assert_eq!(list.key.as_deref(), Some("model"));
        assert!(list.message.contains("write [model]"), "{}", list.message);
    }

    #[test]
    fn an_unreadable_config_says_why_once_however_its_error_is_printed() {
        let error = Config::load(Path::new("no/such/config.toml")).unwrap_err();
        let whole = format!("{error:#}");
        assert_eq!(whole.matches("os error").count(), 1, "{whole}");
        assert!(
            whole.starts_with("cannot read config no/such/config.toml: "),
            "{whole}"
        );
    }

    fn parse(text: &str) -> Result<Config, ConfigError> {
        Config::parse(text, "test.toml")
    }

    #[test]
    fn an_empty_file_gives_the_papers_base_model() {
        let config = parse("").unwrap();
        assert_eq!(config.model.layers, 6);
        assert_eq!(config.model.d_model, 512);
        assert_eq!(config.model.d_ff, 2048);
        assert_eq!(config.model.heads, 8);
        assert_eq!(config.model.head_dim(), 64);
        assert_eq!(config.model.dropout, 0.1);
        assert_eq!(config.training.adam_beta2, 0.98);
        assert_eq!(config.training.adam_eps, 1e-9);
    }

    #[test]
    fn the_builtin_base_config_is_the_papers_base_model_on_the_toy_pairs() {
        let config = parse(BUILTIN_BASE).unwrap();
        assert_eq!(config.model, ModelConfig::default());
        assert_eq!(
            config.data.train,
            CorpusSource::Tsv(PathBuf::from("data/toy.tsv"))
        );
    }

    #[test]
    fn every_shipped_config_is_valid() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../configs");
        let mut seen = 0;
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|e| e == "toml") {
                Config::load(&path).unwrap_or_else(|e| panic!("{}: {e:#}", path.display()));
                seen += 1;
            }
        }
        assert!(seen >= 5, "found {seen} configs");
    }

    #[test]
    fn a_corpus_is_a_tsv_path_or_two_aligned_files() {
        let config = parse("[data]\ntrain = { src = \"a.de.gz\", tgt = \"a.en.gz\" }\nvalid = \"v.tsv\"\ntokenizer = \"bpe\"\n").unwrap();
        assert_eq!(
            config.data.train,
            CorpusSource::Parallel {
                src: "a.de.gz".into(),
                tgt: "a.en.gz".into()
            }
        );
        assert_eq!(config.data.valid, Some(CorpusSource::Tsv("v.tsv".into())));
        assert_eq!(config.data.tokenizer, TokenizerKind::Bpe);
        let err = parse("[data]\ntokenizer = \"chars\"\n").unwrap_err();
        assert_eq!(err.key.as_deref(), Some("data.tokenizer"));
    }

    #[test]
    fn the_resolved_config_round_trips_through_toml() {
        let mut config = parse(BUILTIN_BASE).unwrap();
        config.run.dir = Some(PathBuf::from("runs/x"));
        config.training.clip_grad_norm = Some(1.0);
        config.data.valid = Some(CorpusSource::Parallel {
            src: "v.de".into(),
            tgt: "v.en".into(),
        });
        let text = config.to_toml().unwrap();
        assert_eq!(parse(&text).unwrap(), config);
    }
}
