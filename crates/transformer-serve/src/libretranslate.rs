//! LibreTranslate's API, so that its clients work unchanged: `POST /translate`,
//! `GET /languages`, `POST /detect` and the `GET /frontend/settings` its page reads. Texts
//! are cut into lines and sentences (the model translates sentences) and put back together;
//! `format=html` translates the text of a page and keeps its markup.

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::Json;
use serde::Deserialize;
use serde_json::{json, Value};

use super::app::Shared;
use super::body::{self, Accepts};
use super::error::ApiError;
use super::languages::name_of;
use transformer::infer::settings::DecodeSettings;
use transformer::infer::settings::{self, DecodeRequest};
use transformer::infer::translator::Translation;
use transformer::sentences::{SentenceBatch, SentenceSplitter};
use transformer_documents::html::HtmlJob;
use transformer_documents::{DocumentFormat, Prepared};

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
    let request: TranslateRequest = state.accept(
        &headers,
        body,
        Accepts::JsonOrForm,
        |r: &TranslateRequest| r.api_key.clone(),
    )?;
    let (texts, is_list) = body::texts(request.q)?;
    let checked = state
        .languages
        .check(request.source.as_deref(), request.target.as_deref())?;
    let html = match request.format.as_deref() {
        None | Some("") | Some("text") => false,
        Some("html") => true,
        Some(other) => {
            return Err(ApiError::bad_request(format!(
                "invalid request: format {other} is not supported; use text or html"
            )))
        }
    };
    let alternatives = body::count("alternatives", request.alternatives.as_ref())?.unwrap_or(0);
    // The translation and its alternatives are the n best hypotheses of one beam search.
    let asked = DecodeRequest {
        n_best: (alternatives > 0).then_some(alternatives.saturating_add(1)),
        ..DecodeRequest::by(settings::LIBRETRANSLATE_FIELDS)
    };
    let options = state.decode_settings(asked)?;
    let (options, splitter) = state.in_languages(&checked, options)?;
    let results = if html {
        translate_html(&state, &texts, options, &splitter, alternatives).await?
    } else {
        let batch = SentenceBatch::new(&splitter, &texts);
        state.check_texts(&texts, batch.sentences(), &options)?;
        let translations = state.translate(batch.sentences().to_vec(), options).await?;
        (0..texts.len())
            .map(|i| TextResult::join(&batch, i, &translations, alternatives))
            .collect()
    };
    Ok(Json(response(
        &results,
        is_list,
        checked.detected.then_some(checked.pair.source.as_str()),
        alternatives > 0,
    )))
}

/// `format=html`: each text a page or fragment whose blocks are translated, the markup kept.
/// Alternative `i` of a page is the page again with each sentence's alternative `i` (its best
/// translation where it has fewer), as for text.
async fn translate_html(
    state: &Shared,
    texts: &[String],
    options: DecodeSettings,
    splitter: &SentenceSplitter,
    alternatives: usize,
) -> Result<Vec<TextResult>, ApiError> {
    let parse = |text: &str| {
        let job = HtmlJob::parse(text)
            .map_err(|e| ApiError::bad_request(format!("invalid request: {e:#}")))?;
        Ok::<_, ApiError>(Prepared::new(Box::new(job), splitter))
    };
    let prepared: Vec<Prepared> = texts.iter().map(|t| parse(t)).collect::<Result<_, _>>()?;
    let sentences: Vec<String> = prepared
        .iter()
        .flat_map(|p| p.sentences().iter().cloned())
        .collect();
    state.check_texts(texts, &sentences, &options)?;
    let translations = state.translate(sentences, options).await?;
    let mut translations = translations.into_iter();
    let written = |p: Prepared, sentences: &[&str]| {
        p.finish(sentences)
            .map(|bytes| String::from_utf8_lossy(&bytes).into_owned())
            .map_err(|e| ApiError::internal(format!("translation failed: {e:#}")))
    };
    prepared
        .into_iter()
        .zip(texts)
        .map(|(p, source)| {
            let own: Vec<Translation> = translations.by_ref().take(p.sentences().len()).collect();
            let short = own.iter().any(|t| t.short);
            let best: Vec<&str> = own.iter().map(|t| t.translation.as_str()).collect();
            let text = written(p, &best)?;
            let mut distinct: Vec<String> = Vec::with_capacity(alternatives);
            for i in 0..alternatives {
                let sentences: Vec<&str> = own
                    .iter()
                    .map(|t| {
                        t.alternatives
                            .get(i)
                            .map_or(&t.translation, |a| &a.translation)
                    })
                    .map(String::as_str)
                    .collect();
                let candidate = written(parse(source)?, &sentences)?;
                if candidate != text && !distinct.contains(&candidate) {
                    distinct.push(candidate);
                }
            }
            Ok(TextResult {
                text,
                alternatives: distinct,
                short,
            })
        })
        .collect()
}

/// One text's translation: its lines' translations joined, and as many alternatives.
struct TextResult {
    text: String,
    alternatives: Vec<String>,
    /// A sentence of it translated to under half the tokens the model's length ratio
    /// expects (see [`transformer::infer::translator::is_short`]).
    short: bool,
}

impl TextResult {
    /// Text `index` of `batch` from its sentences' translations. Alternative `i` of a text
    /// takes each sentence's alternative `i` (its best translation for a sentence that has
    /// fewer); an alternative that reads as the translation or as an earlier alternative
    /// (two hypotheses can detokenize alike) is left out, so a text may get fewer than asked
    /// for.
    fn join(
        batch: &SentenceBatch,
        index: usize,
        translations: &[Translation],
        alternatives: usize,
    ) -> Self {
        let text = batch.join_with(index, |n| translations[n].translation.as_str());
        let short = batch.sentence_range(index).any(|n| translations[n].short);
        let mut distinct: Vec<String> = Vec::with_capacity(alternatives);
        for i in 0..alternatives {
            let candidate = batch.join_with(index, |n| {
                let t = &translations[n];
                t.alternatives
                    .get(i)
                    .map_or(&t.translation, |a| &a.translation)
            });
            if candidate != text && !distinct.contains(&candidate) {
                distinct.push(candidate);
            }
        }
        Self {
            text,
            alternatives: distinct,
            short,
        }
    }
}

/// LibreTranslate's response: values for one text, lists of them for a list.
/// `alternatives` lists are there whenever the request asked for some, empty or not. This
/// server's one addition, `short`, is there when a text's translation is much shorter than
/// the model makes of such a source (a sentence may be missing): `true` for one text, one
/// flag per text for a list.
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
        if results.iter().any(|r| r.short) {
            out["short"] = json!(results.iter().map(|r| r.short).collect::<Vec<_>>());
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
        if result.short {
            out["short"] = json!(true);
        }
        out
    }
}

/// The extensions `/translate_file` takes, as LibreTranslate lists them.
pub fn supported_formats() -> Vec<&'static str> {
    DocumentFormat::ALL
        .iter()
        .flat_map(|f| f.extensions())
        .copied()
        .collect()
}

/// `GET /languages` (LibreTranslate also takes POST): the source with its target, or every
/// language of a multilingual model with every other as its targets.
pub async fn languages(State(state): State<Shared>) -> Json<Value> {
    Json(json!(state.languages.entries()))
}

#[derive(Debug, Deserialize)]
struct DetectRequest {
    q: Option<Value>,
    api_key: Option<String>,
}

/// `POST /detect`: a model of one pair reads one language, so that is the only candidate (as
/// LibreTranslate answers with a single language installed); a multilingual model's server
/// detects nothing and answers with its default source, or refuses without one.
pub async fn detect(
    State(state): State<Shared>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<Value>, ApiError> {
    let request: DetectRequest =
        state.accept(&headers, body, Accepts::JsonOrForm, |r: &DetectRequest| {
            r.api_key.clone()
        })?;
    let (texts, is_list) = body::texts(request.q)?;
    state.check_count(&texts)?;
    let default = match &state.languages.default {
        Some(pair) if !state.languages.multilingual() => pair,
        _ => {
            return Err(ApiError::bad_request(
                "invalid request: this server's model translates between many languages and \
                 this server does not detect which one a text is in; name the source language",
            ))
        }
    };
    let candidates = json!([{ "confidence": 100.0, "language": default.source }]);
    Ok(Json(if is_list {
        json!(vec![candidates; texts.len()])
    } else {
        candidates
    }))
}

/// `GET /frontend/settings`: what LibreTranslate's page (and this server's) needs to know.
pub async fn settings(State(state): State<Shared>) -> Json<Value> {
    let pair = state.languages.first_pair();
    Json(json!({
        "charLimit": state.limits.max_chars,
        "keyRequired": state.key.required(),
        "suggestions": false,
        "filesTranslation": state.files.is_some(),
        "supportedFilesFormat": if state.files.is_some() { supported_formats() } else { Vec::new() },
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
