//! The languages a server translates: a model's one pair (`data.source_lang`,
//! `data.target_lang`), or a multilingual model's codes with the pair its flags name as the
//! default; each request's `source` and `target` checked against them, and the English names
//! LibreTranslate's `/languages` lists beside the codes.

use serde::Serialize;

use super::error::ApiError;

/// One direction of translation, as codes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LanguagePair {
    pub source: String,
    pub target: String,
}

/// What a server translates.
#[derive(Debug, Clone)]
pub struct Languages {
    /// A model of one pair: that pair; a multilingual model: the pair named at start, if any,
    /// which requests that name none (or `auto`) get.
    pub default: Option<LanguagePair>,
    /// A multilingual model's codes, in its tokenizer's order; empty for a model of one pair.
    pub codes: Vec<String>,
}

/// A request's languages, checked.
#[derive(Debug, Clone)]
pub struct Checked {
    pub pair: LanguagePair,
    /// The source was `auto`, and this is the language taken for it.
    pub detected: bool,
}

/// One entry of `/languages`, as LibreTranslate writes it.
#[derive(Debug, Serialize)]
pub struct LanguageEntry {
    pub code: String,
    pub name: String,
    pub targets: Vec<String>,
}

impl Languages {
    /// Whether the model translates between many languages.
    pub fn multilingual(&self) -> bool {
        !self.codes.is_empty()
    }

    /// What the server translates, in words, for errors.
    fn described(&self) -> String {
        match (&self.default, self.multilingual()) {
            (Some(pair), false) => {
                format!("this model translates {} to {}", pair.source, pair.target)
            }
            _ => format!(
                "this model translates between {} languages (GET /languages lists them)",
                self.codes.len()
            ),
        }
    }

    /// Checks a request's `source` and `target`. `source = "auto"` is the default pair's
    /// source, the only language a model of one pair reads (this server detects nothing).
    pub fn check(&self, source: Option<&str>, target: Option<&str>) -> Result<Checked, ApiError> {
        let missing = |name: &str| {
            ApiError::bad_request(format!(
                "invalid request: missing {name} parameter; {}",
                self.described()
            ))
        };
        let source = source
            .filter(|s| !s.is_empty())
            .ok_or_else(|| missing("source"))?;
        let target = target
            .filter(|t| !t.is_empty())
            .ok_or_else(|| missing("target"))?;
        let detected = source.eq_ignore_ascii_case("auto");
        let source = match (&self.default, detected) {
            // A model of one pair reads one language: `auto` can only be that one.
            (Some(pair), true) if !self.multilingual() => pair.source.clone(),
            (_, true) => {
                return Err(ApiError::bad_request(format!(
                    "invalid request: source auto needs language detection, which this \
                     server does not do; name the source language: {}",
                    self.described()
                )))
            }
            (_, false) => self.known(source, "source", |pair| &pair.source)?,
        };
        let target = self.known(target, "target", |pair| &pair.target)?;
        Ok(Checked {
            pair: LanguagePair { source, target },
            detected,
        })
    }

    /// A request's `source` and `target` where it may leave either out: the default pair's
    /// then (a multilingual model with none named at start refuses).
    pub fn check_optional(
        &self,
        source: Option<&str>,
        target: Option<&str>,
    ) -> Result<Checked, ApiError> {
        let default = self.default.as_ref();
        self.check(
            source.or(default.map(|p| p.source.as_str())),
            target.or(default.map(|p| p.target.as_str())),
        )
    }

    /// `code` as the model spells it (codes match in any case), or a 400 naming it.
    fn known(
        &self,
        code: &str,
        side: &str,
        of_pair: fn(&LanguagePair) -> &String,
    ) -> Result<String, ApiError> {
        let found = if self.multilingual() {
            self.codes.iter().find(|c| c.eq_ignore_ascii_case(code))
        } else {
            self.default
                .as_ref()
                .map(of_pair)
                .filter(|c| c.eq_ignore_ascii_case(code))
        };
        found.cloned().ok_or_else(|| {
            ApiError::bad_request(format!(
                "{} is not supported as a {side} language; {}",
                super::error::truncate_chars(code, 40),
                self.described()
            ))
        })
    }

    /// What `/languages` lists: a model of one pair, its source with its one target and the
    /// target with none; a multilingual model, every language with every other as a target.
    pub fn entries(&self) -> Vec<LanguageEntry> {
        if self.multilingual() {
            return self
                .codes
                .iter()
                .map(|code| LanguageEntry {
                    code: code.clone(),
                    name: name_of(code),
                    targets: self.codes.iter().filter(|c| *c != code).cloned().collect(),
                })
                .collect();
        }
        let Some(pair) = &self.default else {
            return Vec::new();
        };
        vec![
            LanguageEntry {
                code: pair.source.clone(),
                name: name_of(&pair.source),
                targets: vec![pair.target.clone()],
            },
            LanguageEntry {
                code: pair.target.clone(),
                name: name_of(&pair.target),
                targets: Vec::new(),
            },
        ]
    }

    /// The pair a page starts from: the default, else the model's first two languages.
    pub fn first_pair(&self) -> LanguagePair {
        self.default.clone().unwrap_or_else(|| LanguagePair {
            source: self.codes.first().cloned().unwrap_or_default(),
            target: self.codes.get(1).cloned().unwrap_or_default(),
        })
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

    fn de_en() -> Languages {
        Languages {
            default: Some(LanguagePair {
                source: "de".into(),
                target: "en".into(),
            }),
            codes: Vec::new(),
        }
    }

    #[test]
    fn the_pair_accepts_its_own_direction_and_auto() {
        assert!(!de_en().check(Some("de"), Some("en")).unwrap().detected);
        assert!(de_en().check(Some("auto"), Some("EN")).unwrap().detected);
    }

    #[test]
    fn a_multilingual_model_takes_any_of_its_codes_and_auto_only_with_a_default() {
        let many = Languages {
            default: None,
            codes: vec!["deu_Latn".into(), "eng_Latn".into(), "fra_Latn".into()],
        };
        let checked = many.check(Some("DEU_LATN"), Some("fra_Latn")).unwrap();
        assert_eq!(checked.pair.source, "deu_Latn");
        assert_eq!(checked.pair.target, "fra_Latn");
        assert!(many.check(Some("auto"), Some("eng_Latn")).is_err());
        assert!(many.check_optional(None, None).is_err());
        let unknown = many.check(Some("de"), Some("eng_Latn")).unwrap_err();
        assert!(
            unknown.message.contains("de is not supported"),
            "{}",
            unknown.message
        );
        assert_eq!(many.entries()[0].targets, ["eng_Latn", "fra_Latn"]);
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
