//! A Hugging Face `config.json` (or `generation_config.json`, `tokenizer_config.json`) read
//! as JSON, each value read by key and each wrong one named with its file and key.

use std::path::{Path, PathBuf};

use anyhow::bail;
use serde_json::Value;

/// A `config.json` read as JSON, its values named by key in errors.
pub(super) struct JsonConfig {
    pub(super) path: PathBuf,
    pub(super) values: serde_json::Map<String, Value>,
}

impl JsonConfig {
    pub(super) fn read(path: &Path) -> anyhow::Result<Self> {
        let text = crate::small_file::read_text(path, crate::small_file::MOST_CONFIG_BYTES)?;
        let value: Value = serde_json::from_str(&text)
            .map_err(|e| anyhow::anyhow!("{} is not valid JSON: {e}", path.display()))?;
        let Value::Object(values) = value else {
            bail!("{} is not a JSON object", path.display())
        };
        Ok(Self {
            path: path.to_path_buf(),
            values,
        })
    }

    pub(super) fn get(&self, key: &str) -> Option<&Value> {
        self.values.get(key).filter(|v| !v.is_null())
    }

    pub(super) fn count(&self, key: &str) -> anyhow::Result<Option<usize>> {
        match self.get(key) {
            None => Ok(None),
            Some(value) => match value.as_u64() {
                Some(n) => Ok(Some(n as usize)),
                None => bail!(
                    "{}: {key} is {value}, not a whole number",
                    self.path.display()
                ),
            },
        }
    }

    pub(super) fn required_count(&self, key: &str) -> anyhow::Result<usize> {
        self.count(key)?.ok_or_else(|| {
            anyhow::anyhow!(
                "{} has no {key}, which a Hugging Face model's config must have",
                self.path.display()
            )
        })
    }

    pub(super) fn number(&self, key: &str, default: f64) -> anyhow::Result<f64> {
        match self.get(key) {
            None => Ok(default),
            Some(value) => value.as_f64().ok_or_else(|| {
                anyhow::anyhow!("{}: {key} is {value}, not a number", self.path.display())
            }),
        }
    }

    pub(super) fn flag(&self, key: &str, default: bool) -> anyhow::Result<bool> {
        match self.get(key) {
            None => Ok(default),
            Some(value) => value.as_bool().ok_or_else(|| {
                anyhow::anyhow!(
                    "{}: {key} is {value}, not true or false",
                    self.path.display()
                )
            }),
        }
    }

    pub(super) fn text(&self, key: &str) -> Option<&str> {
        self.get(key).and_then(Value::as_str)
    }
}
