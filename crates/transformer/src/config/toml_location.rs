//! Where in a config file's text a key is: the line of an offset, the dotted key written on a
//! line, the line that sets a key. toml's own errors carry byte spans and its messages can span
//! lines; errors of this tool name a line and a key, in one line.

/// toml's messages can span lines; errors here are one line each.
pub(super) fn one_line(message: &str) -> String {
    // serde speaks of Rust types; a config author thinks in numbers, strings and tables.
    let words: Vec<&str> = message.split_whitespace().collect();
    let mut plain = Vec::with_capacity(words.len());
    let mut after_struct = false;
    for word in words {
        if after_struct {
            // `expected struct ModelConfig`: the type's name says nothing to its author.
            after_struct = false;
            plain.push("a table");
            continue;
        }
        after_struct = word == "struct";
        if !after_struct {
            plain.push(word);
        }
    }
    plain
        .join(" ")
        .replace("expected usize", "expected a whole number, 0 or more")
        .replace("expected u64", "expected a whole number, 0 or more")
        .replace("expected f64", "expected a number")
        // toml's words for a value where a name in quotes belongs.
        .replace(
            "wanted string or table",
            "expected one of its names, in quotes",
        )
        .replace("expected path string", "expected a path in quotes")
}

pub(super) fn line_of_offset(text: &str, offset: usize) -> usize {
    text[..offset.min(text.len())].matches('\n').count() + 1
}

/// The dotted key (`model.d_model`) written on the line that holds `offset`, if any.
pub(super) fn key_at(text: &str, offset: usize) -> Option<String> {
    let target = line_of_offset(text, offset);
    let mut section = String::new();
    for (index, line) in text.lines().enumerate() {
        let trimmed = line.trim();
        if let Some(name) = table_header(trimmed) {
            section = name;
        }
        if index + 1 == target {
            let (key, _) = trimmed.split_once('=')?;
            let key = key.trim();
            return Some(if section.is_empty() {
                key.to_string()
            } else {
                format!("{section}.{key}")
            });
        }
    }
    None
}

/// The line that sets `section.key`, if the text sets it at all.
pub(super) fn line_of_key(text: &str, dotted: &str) -> Option<usize> {
    let (section, key) = dotted.rsplit_once('.').unwrap_or(("", dotted));
    let mut current = String::new();
    for (index, line) in text.lines().enumerate() {
        let trimmed = line.trim();
        if let Some(name) = table_header(trimmed) {
            current = name;
            continue;
        }
        let sets_key = trimmed
            .split_once('=')
            .is_some_and(|(k, _)| k.trim() == key);
        if current == section && sets_key {
            return Some(index + 1);
        }
    }
    None
}

fn table_header(trimmed: &str) -> Option<String> {
    let inner = trimmed.strip_prefix('[')?.split(']').next()?;
    Some(inner.trim().to_string())
}

#[cfg(test)]
mod tests {
    use crate::config::{Config, ConfigError};

    fn parse(text: &str) -> Result<Config, ConfigError> {
        Config::parse(text, "test.toml")
    }

    #[test]
    fn an_unknown_key_is_named_with_its_line_and_section() {
        let err = parse("[model]\nlayers = 2\nd_modle = 64\n").unwrap_err();
        assert_eq!(err.line, Some(3));
        assert_eq!(err.key.as_deref(), Some("model.d_modle"));
        assert!(err.message.contains("unknown field `d_modle`"), "{err}");
    }

    #[test]
    fn a_wrong_type_names_the_key_and_line() {
        let err = parse("[training]\nseed = 1\nepochs = \"many\"\n").unwrap_err();
        assert_eq!(err.line, Some(3));
        assert_eq!(err.key.as_deref(), Some("training.epochs"));
    }

    #[test]
    fn every_kind_of_toml_error_names_its_key_path_and_line() {
        let cases = [
            ("[modle]\nlayers = 2\n", 1, "modle", "unknown field `modle`"),
            (
                "[model]\n  [model.extra]\n  x = 1\n",
                2,
                "model.extra",
                "unknown field",
            ),
            (
                "[data]\ntrain = { src = \"a\", tgt = 3 }\n",
                2,
                "data.train",
                "{ src =",
            ),
            (
                "[data.train]\nsrc = \"a\"\ntgt = 3\n",
                1,
                "data.train",
                "TSV file's path",
            ),
            (
                "[data]\nvalid = [\n \"a\",\n 3\n]\n",
                2,
                "data.valid",
                "TSV file's path",
            ),
            (
                "[training]\ndtype = 3\n",
                2,
                "training.dtype",
                "names, in quotes",
            ),
            ("model = 3\n", 1, "model", "expected a table"),
            ("[run]\ndir = 5\n", 2, "run.dir", "a path in quotes"),
            (
                "model.layers = \"x\"\n",
                1,
                "model.layers",
                "a whole number",
            ),
        ];
        for (text, line, key, words) in cases {
            let err = parse(text).unwrap_err();
            assert_eq!(err.key.as_deref(), Some(key), "{text:?}: {err}");
            assert_eq!(err.line, Some(line), "{text:?}: {err}");
            assert!(err.message.contains(words), "{text:?}: {err}");
            assert!(!err.to_string().contains('\n'), "{text:?}: {err}");
        }
    }

    #[test]
    fn errors_read_as_one_line_naming_file_line_and_key() {
        let err = parse("[model]\nheads = 7\n").unwrap_err();
        let shown = err.to_string();
        assert!(!shown.contains('\n'));
        assert!(
            shown.starts_with("test.toml line 2, key `model.heads`: "),
            "{shown}"
        );
    }
}
