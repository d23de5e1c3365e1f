//! LibreTranslate's API, so that its clients work unchanged: `POST /translate`,
//! `GET /languages`, `POST /detect` and the `GET /frontend/settings` its page reads. Texts
//! are translated line by line (the model translates sentences) and the lines joined again.

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::Json;
use serde::Deserialize;
use serde_json::{json, Value};

use super::app::{Sentences, Shared};
use super::body::{self, Accepts};
use super::error::ApiError;
use super::languages::name_of;
use crate::infer::settings::{self, DecodeRequest};
use crate::infer::translator::Translation;

/// `/translate`'s fields; others are ignored, as LibreTranslate ignores them.
#[derive(Debug, Deserialize)]
struct TranslateRequest {
    q: Option<Value>,
    source: Option<String>,
    target: Option<String>,
    format: Option<String>,
    api_key: Option<String>,
    alternatives: Option<Value>,
}

/// `POST /translate`: `{"translatedText": "..."}`, a list for a list of texts.
pub async fn translate(
    State(state): State<Shared>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<Value>, ApiError> {
    let request: TranslateRequest = body::parse(
        &headers,
        body,
        state.limits.max_body_bytes,
        Accepts::JsonOrForm,
    )?;
    state.key.check(request.api_key.as_deref())?;
    let (texts, is_list) = body::texts(request.q)?;
    let detected = state
        .pair
        .check(request.source.as_deref(), request.target.as_deref())?;
    match request.format.as_deref() {
        None | Some("") | Some("text") => {}
        Some(other) => {
            return Err(ApiError::bad_request(format!(
                "format {other} is not supported; this server translates plain text \
                 (format=text)"
            )))
        }
    }
    let alternatives = body::count("alternatives", request.alternatives.as_ref())?.unwrap_or(0);
    // The translation and its alternatives are the n best hypotheses of one beam search.
    let asked = DecodeRequest {
        n_best: (alternatives > 0).then_some(alternatives.saturating_add(1)),
        ..DecodeRequest::default()
    };
    let options = state.decode_options(asked, settings::LIBRETRANSLATE_FIELDS)?;
    state.check_texts(&texts, Sentences::Lines, &options)?;
    let lines: Vec<Vec<String>> = texts.iter().map(|t| split_lines(t)).collect();
    let sentences: Vec<String> = lines.iter().flatten().cloned().collect();
    let translations = state.translate(sentences, options).await?;
    let mut translations = translations.into_iter();
    let results: Vec<TextResult> = lines
        .iter()
        .map(|own| {
            TextResult::join(
                translations.by_ref().take(own.len()).collect(),
                alternatives,
            )
        })
        .collect();
    Ok(Json(response(
        &results,
        is_list,
        detected.then(|| state.pair.source.as_str()),
        alternatives > 0,
    )))
}

/// One text's translation: its lines' translations joined, and as many alternatives.
struct TextResult {
    text: String,
    alternatives: Vec<String>,
}

impl TextResult {
    /// Alternative `i` of a text is each line's alternative `i` (its best translation for a
    /// line that has fewer); an alternative that reads as the translation or as an earlier
    /// alternative (two hypotheses can detokenize alike) is left out, so a text may get fewer
    /// than asked for.
    fn join(lines: Vec<Translation>, alternatives: usize) -> Self {
        let text = lines
            .iter()
            .map(|l| l.translation.as_str())
            .collect::<Vec<_>>()
            .join("\n");
        let mut distinct: Vec<String> = Vec::with_capacity(alternatives);
        for i in 0..alternatives {
            let candidate = lines
                .iter()
                .map(|l| {
                    l.alternatives
                        .get(i)
                        .map_or(&l.translation, |a| &a.translation)
                })
                .map(String::as_str)
                .collect::<Vec<_>>()
                .join("\n");
            if candidate != text && !distinct.contains(&candidate) {
                distinct.push(candidate);
            }
        }
        Self {
            text,
            alternatives: distinct,
        }
    }
}

/// LibreTranslate's response: values for one text, lists of them for a list.
/// `alternatives` lists are there whenever the request asked for some, empty or not.
fn response(
    results: &[TextResult],
    is_list: bool,
    detected: Option<&str>,
    asked_alternatives: bool,
) -> Value {
    let detected_language = detected.map(|code| json!({ "confidence": 100.0, "language": code }));
    let with_alternatives = asked_alternatives;
    if is_list {
        let mut out = json!({
            "translatedText": results.iter().map(|r| r.text.clone()).collect::<Vec<_>>(),
        });
        if with_alternatives {
            out["alternatives"] = json!(results
                .iter()
                .map(|r| r.alternatives.clone())
                .collect::<Vec<_>>());
        }
        if let Some(language) = detected_language {
            out["detectedLanguage"] = json!(vec![language; results.len()]);
        }
        out
    } else {
        let result = &results[0];
        let mut out = json!({ "translatedText": result.text });
        if with_alternatives {
            out["alternatives"] = json!(result.alternatives);
        }
        if let Some(language) = detected_language {
            out["detectedLanguage"] = language;
        }
        out
    }
}

/// A text's lines, each translated as one sentence (`\r\n` read as `\n`).
fn split_lines(text: &str) -> Vec<String> {
    text.split('\n')
        .map(|line| line.trim_end_matches('\r').to_string())
        .collect()
}

/// `GET /languages` (LibreTranslate also takes POST): the source with its target.
pub async fn languages(State(state): State<Shared>) -> Json<Value> {
    Json(json!(state.pair.entries()))
}

#[derive(Debug, Deserialize)]
struct DetectRequest {
    q: Option<Value>,
    api_key: Option<String>,
}

/// `POST /detect`: the model reads one language, so that is the only candidate (as
/// LibreTranslate answers with a single language installed).
pub async fn detect(
    State(state): State<Shared>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<Value>, ApiError> {
    let request: DetectRequest = body::parse(
        &headers,
        body,
        state.limits.max_body_bytes,
        Accepts::JsonOrForm,
    )?;
    state.key.check(request.api_key.as_deref())?;
    let (texts, is_list) = body::texts(request.q)?;
    state.check_count(&texts)?;
    let candidates = json!([{ "confidence": 100.0, "language": state.pair.source }]);
    Ok(Json(if is_list {
        json!(vec![candidates; texts.len()])
    } else {
        candidates
    }))
}

/// `GET /frontend/settings`: what LibreTranslate's page (and this server's) needs to know.
pub async fn settings(State(state): State<Shared>) -> Json<Value> {
    let pair = &state.pair;
    Json(json!({
        "charLimit": state.limits.max_chars,
        "keyRequired": state.key.required(),
        "suggestions": false,
        "filesTranslation": false,
        "supportedFilesFormat": [],
        "language": {
            "source": { "code": pair.source, "name": name_of(&pair.source) },
            "target": { "code": pair.target, "name": name_of(&pair.target) },
        },
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_text_is_translated_line_by_line() {
        assert_eq!(split_lines("a b\r\nc\n"), vec!["a b", "c", ""]);
        assert_eq!(split_lines(""), vec![""]);
    }

    #[test]
    fn q_is_a_string_or_a_list_of_strings() {
        assert_eq!(
            body::texts(Some(json!("x"))).unwrap(),
            (vec!["x".into()], false)
        );
        assert_eq!(
            body::texts(Some(json!(["x", "y"]))).unwrap(),
            (vec!["x".into(), "y".into()], true)
        );
        for bad in [None, Some(json!([])), Some(json!(3)), Some(json!(["x", 1]))] {
            assert_eq!(body::texts(bad.clone()).unwrap_err().status, 400, "{bad:?}");
        }
    }
}
