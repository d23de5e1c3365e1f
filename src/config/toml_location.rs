//! Where in a config file's text a key is: the line of an offset, the dotted key written on a
//! line, the line that sets a key. toml's own errors carry byte spans and its messages can span
//! lines; errors of this tool name a line and a key, in one line.

/// toml's messages can span lines; errors here are one line each.
pub(super) fn one_line(message: &str) -> String {
    // serde speaks of Rust types; a config author thinks in numbers.
    message
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .replace("expected usize", "expected a whole number, 0 or more")
        .replace("expected u64", "expected a whole number, 0 or more")
        .replace("expected f64", "expected a number")
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
