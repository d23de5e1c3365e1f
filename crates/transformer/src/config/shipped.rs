//! The configs the tool ships (`configs/*.toml`), built into the binary: a `--config` that
//! names no file but one of these (`base.toml`, `base`, `configs/base.toml`) runs it from
//! any directory, as the README's commands are typed.

use std::path::{Path, PathBuf};

use super::{BuiltinCorpus, Config, ConfigError, ConfigReadError, CorpusSource};

/// Where the shipped configs read the tutorial's toy pairs, which are built in with them.
const TOY_PAIRS_PATH: &str = "data/toy.tsv";

/// One shipped config: its file name under `configs/` and its text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ShippedConfig {
    /// `base.toml`.
    pub file_name: &'static str,
    pub text: &'static str,
    /// The script, run from the repository's root, that writes the files this config reads
    /// from the working directory; `None` for one whose data is built in.
    pub data_script: Option<&'static str>,
}

macro_rules! shipped {
    ($($name:literal => $script:expr),* $(,)?) => {
        [$(ShippedConfig {
            file_name: $name,
            text: include_str!(concat!("../../../../configs/", $name)),
            data_script: $script,
        }),*]
    };
}

/// Every config in `configs/`, by file name (a test keeps this list equal to the folder).
pub const SHIPPED: [ShippedConfig; 7] = shipped!(
    "base.toml" => None,
    "lm-tiny.toml" => Some("scripts/make-lm-text.sh"),
    "multi30k-cpu-bf16.toml" => Some("scripts/get-multi30k.sh"),
    "multi30k-cpu.toml" => Some("scripts/get-multi30k.sh"),
    "multi30k.toml" => Some("scripts/get-multi30k.sh"),
    "tatoeba.toml" => Some("scripts/get-tatoeba.py"),
    "tiny.toml" => None,
);

/// The shipped config `given` names: its file name with or without `.toml`, alone or under
/// a `configs/` folder. A path into any other folder names a file, never a shipped config.
pub fn shipped_config(given: &Path) -> Option<&'static ShippedConfig> {
    let folder = given.parent().and_then(Path::to_str).unwrap_or("");
    if !matches!(folder, "" | "configs" | "./configs" | ".") {
        return None;
    }
    let name = given.file_name()?.to_str()?;
    SHIPPED.iter().find(|shipped| {
        shipped.file_name == name || shipped.file_name.strip_suffix(".toml") == Some(name)
    })
}

/// The shipped configs' file names, for a message: `base.toml, lm-tiny.toml, ...`.
pub fn shipped_names() -> String {
    SHIPPED
        .iter()
        .map(|shipped| shipped.file_name)
        .collect::<Vec<_>>()
        .join(", ")
}

impl Config {
    /// The config `given` names: the file at that path when there is one, else the shipped
    /// config it names (`base.toml`, `configs/tiny.toml`: see [`shipped_config`]), returned
    /// with it so that the caller can say which it took. A path that is neither is a
    /// [`ConfigReadError`] that lists the shipped configs.
    pub fn load_or_shipped(given: &Path) -> anyhow::Result<(Self, Option<&'static ShippedConfig>)> {
        // Anything at the path but a directory (a file, a FIFO, a dangling link) is the
        // user's config: read it, or say why it cannot be read. A directory is no config
        // (`train --config tiny` where a run went to `tiny/`).
        if given.symlink_metadata().is_ok() && !(given.is_dir() && shipped_config(given).is_some())
        {
            return Ok((Self::load(given)?, None));
        }
        match shipped_config(given) {
            Some(shipped) => Ok((Self::shipped(shipped)?, Some(shipped))),
            None => Err(ConfigReadError {
                path: given.to_path_buf(),
                error: format!(
                    "no such file, and no config transformer ships has that name ({})",
                    shipped_names()
                ),
            }
            .into()),
        }
    }

    /// A shipped config as built into the binary. The toy pairs it may read
    /// (`data/toy.tsv`, which exists only in the source tree) are the ones built in with it,
    /// so that it trains from any directory; other data is read from the working directory.
    pub fn shipped(shipped: &ShippedConfig) -> Result<Self, ConfigError> {
        let name = format!("configs/{} (built into transformer)", shipped.file_name);
        let mut config = Self::parse(shipped.text, &name)?;
        if config.data.train == CorpusSource::Tsv(PathBuf::from(TOY_PAIRS_PATH)) {
            config.data.train = CorpusSource::Builtin {
                builtin: BuiltinCorpus::Toy,
            };
        }
        Ok(config)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_list_holds_every_file_in_the_configs_folder() {
        let folder = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../configs");
        let mut on_disk: Vec<String> = std::fs::read_dir(folder)
            .unwrap()
            .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|name| name.ends_with(".toml"))
            .collect();
        on_disk.sort();
        let listed: Vec<&str> = SHIPPED.iter().map(|s| s.file_name).collect();
        assert_eq!(on_disk, listed);
    }

    #[test]
    fn a_config_names_a_script_that_exists_exactly_when_it_reads_files() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        for shipped in &SHIPPED {
            let config = Config::shipped(shipped).unwrap();
            let builtin = matches!(config.data.train, CorpusSource::Builtin { .. });
            assert_eq!(
                shipped.data_script.is_none(),
                builtin,
                "{}",
                shipped.file_name
            );
            if let Some(script) = shipped.data_script {
                assert!(root.join(script).is_file(), "{script}");
            }
        }
    }

    #[test]
    fn a_name_alone_or_under_configs_is_shipped_and_any_other_folder_is_not() {
        for given in [
            "base.toml",
            "base",
            "configs/base.toml",
            "./configs/base.toml",
            "./base.toml",
        ] {
            assert_eq!(
                shipped_config(Path::new(given)).map(|s| s.file_name),
                Some("base.toml"),
                "{given}"
            );
        }
        for given in [
            "elsewhere/base.toml",
            "/base.toml",
            "base.yaml",
            "nope.toml",
            "",
        ] {
            assert!(shipped_config(Path::new(given)).is_none(), "{given}");
        }
    }
}
