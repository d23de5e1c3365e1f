//! The checkpoint's language pair (`data.source_lang`, `data.target_lang`) and the English
//! names LibreTranslate's `/languages` lists beside the codes.

use serde::Serialize;

use super::error::ApiError;

/// The one direction this server translates.
#[derive(Debug, Clone)]
pub struct LanguagePair {
    pub source: String,
    pub target: String,
}

/// One entry of `/languages`, as LibreTranslate writes it.
#[derive(Debug, Serialize)]
pub struct LanguageEntry {
    pub code: String,
    pub name: String,
    pub targets: Vec<String>,
}

impl LanguagePair {
    /// Checks a request's `source` and `target`; `source = "auto"` is this pair's source, the
    /// only language the model reads. Returns whether the source was detected.
    pub fn check(&self, source: Option<&str>, target: Option<&str>) -> Result<bool, ApiError> {
        let source = source.filter(|s| !s.is_empty()).ok_or_else(|| {
            ApiError::bad_request(format!(
                "invalid request: missing source parameter; this server translates {} to {}",
                self.source, self.target
            ))
        })?;
        let target = target.filter(|t| !t.is_empty()).ok_or_else(|| {
            ApiError::bad_request(format!(
                "invalid request: missing target parameter; this server translates {} to {}",
                self.source, self.target
            ))
        })?;
        let detected = source.eq_ignore_ascii_case("auto");
        if !detected && !source.eq_ignore_ascii_case(&self.source) {
            return Err(ApiError::bad_request(format!(
                "{source} is not supported as a source language; this model translates {} to {}",
                self.source, self.target
            )));
        }
        if !target.eq_ignore_ascii_case(&self.target) {
            return Err(ApiError::bad_request(format!(
                "{target} is not supported as a target language; this model translates {} to {}",
                self.source, self.target
            )));
        }
        Ok(detected)
    }

    /// What `/languages` lists: the source with its one target, and the target with none.
    pub fn entries(&self) -> Vec<LanguageEntry> {
        vec![
            LanguageEntry {
                code: self.source.clone(),
                name: name_of(&self.source),
                targets: vec![self.target.clone()],
            },
            LanguageEntry {
                code: self.target.clone(),
                name: name_of(&self.target),
                targets: Vec::new(),
            },
        ]
    }
}

/// The English name of a language code, as LibreTranslate names it; the code itself for one
/// not in the table.
pub fn name_of(code: &str) -> String {
    const NAMES: &[(&str, &str)] = &[
        ("ar", "Arabic"),
        ("cs", "Czech"),
        ("da", "Danish"),
        ("de", "German"),
        ("el", "Greek"),
        ("en", "English"),
        ("es", "Spanish"),
        ("fi", "Finnish"),
        ("fr", "French"),
        ("hi", "Hindi"),
        ("hu", "Hungarian"),
        ("it", "Italian"),
        ("ja", "Japanese"),
        ("ko", "Korean"),
        ("nl", "Dutch"),
        ("pl", "Polish"),
        ("pt", "Portuguese"),
        ("ro", "Romanian"),
        ("ru", "Russian"),
        ("sv", "Swedish"),
        ("tr", "Turkish"),
        ("uk", "Ukrainian"),
        ("zh", "Chinese"),
    ];
    NAMES
        .iter()
        .find(|(c, _)| c.eq_ignore_ascii_case(code))
        .map_or_else(|| code.to_string(), |(_, name)| name.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn de_en() -> LanguagePair {
        LanguagePair {
            source: "de".into(),
            target: "en".into(),
        }
    }

    #[test]
    fn the_pair_accepts_its_own_direction_and_auto() {
        assert!(!de_en().check(Some("de"), Some("en")).unwrap());
        assert!(de_en().check(Some("auto"), Some("en")).unwrap());
    }

    #[test]
    fn another_direction_is_refused_by_name() {
        let wrong = de_en().check(Some("en"), Some("de")).unwrap_err();
        assert_eq!(wrong.status, 400);
        assert!(
            wrong.message.contains("en is not supported"),
            "{}",
            wrong.message
        );
        let missing = de_en().check(None, Some("en")).unwrap_err();
        assert!(
            missing.message.contains("missing source"),
            "{}",
            missing.message
        );
    }

    #[test]
    fn languages_are_named_in_english() {
        assert_eq!(name_of("de"), "German");
        assert_eq!(name_of("xx"), "xx");
    }
}
