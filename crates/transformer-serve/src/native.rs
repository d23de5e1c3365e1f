//! This server's own API, for what LibreTranslate's lacks: `POST /v1/translate` with the
//! decoding settings and the same JSON per sentence as `translate --json`, `GET
//! /v1/attention` (the attention picture as PNG), `GET /health` and `GET /metrics`.

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Query, State};
use axum::http::{header, HeaderMap, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use super::app::{answer, Shared};
use super::body::{self, Accepts};
use super::error::ApiError;
use transformer::corpus::normalize_sentence;
use transformer::infer::settings::DecodeSettings;
use transformer::infer::settings::{self, DecodeRequest};
use transformer::infer::translator::Translation;
use transformer::sentences::SentenceBatch;
use transformer_plot::attention_heatmaps_png;

/// Longest sentence, in source tokens, whose attention is drawn, and most target tokens
/// decoded for it: the picture, and the memory it takes, grow with the square of the lengths.
const MAX_ATTENTION_TOKENS: usize = 40;
const MAX_ATTENTION_TARGET: usize = 2 * MAX_ATTENTION_TOKENS;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct TranslateRequest {
    q: Value,
    beam: Option<usize>,
    length_penalty: Option<f64>,
    max_len: Option<usize>,
    n_best: Option<usize>,
    /// A multilingual model's languages (both, or neither for the server's default pair).
    source: Option<String>,
    target: Option<String>,
    api_key: Option<String>,
}

/// `POST /v1/translate`: `{"translations": [...]}`, one object per text of `q` (a string or
/// a list), each as `translate --json` prints a line, with `alternatives` when `n_best` is
/// over one. A text of several sentences is translated sentence by sentence: its object
/// holds the joined translation and its sentences' tokens, ids and log-probabilities one
/// after another.
pub async fn translate(
    State(state): State<Shared>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<TranslateResponse>, ApiError> {
    let request = state.accept(&headers, body, Accepts::Json, |r: &TranslateRequest| {
        bearer(&headers).or(r.api_key.as_deref()).map(str::to_owned)
    })?;
    let options = options(&state, &request)?;
    let checked = state
        .languages
        .check_optional(request.source.as_deref(), request.target.as_deref())?;
    let (options, splitter) = state.in_languages(&checked, options)?;
    let (texts, _) = body::texts(Some(request.q))?;
    let batch = SentenceBatch::new(&splitter, &texts);
    state.check_texts(&texts, batch.sentences(), &options)?;
    let all = state.translate(batch.sentences().to_vec(), options).await?;
    let mut first = 0;
    let translations = texts
        .iter()
        .zip(batch.sentences_per_text())
        .enumerate()
        .map(|(i, (text, count))| {
            let joined = batch.join_with(i, |n| all[n].translation.as_str());
            let own = all[first..first + count].to_vec();
            first += count;
            Translation::concatenate(text, joined, own)
        })
        .collect();
    Ok(Json(TranslateResponse { translations }))
}

/// `/v1/translate`'s answer; a struct, so that each translation keeps the field order of
/// `translate --json`.
#[derive(Debug, Serialize)]
pub struct TranslateResponse {
    translations: Vec<Translation>,
}

/// The request's decoding settings, settled over the server's.
fn options(state: &Shared, request: &TranslateRequest) -> Result<DecodeSettings, ApiError> {
    let asked = DecodeRequest {
        beam: request.beam,
        length_penalty: request.length_penalty,
        max_len: request.max_len,
        n_best: request.n_best,
        ..DecodeRequest::by(settings::FIELDS)
    };
    state.decode_settings(asked)
}

/// The key of an `Authorization: Bearer KEY` header (the scheme in any case, RFC 9110
/// section 11.1).
fn bearer(headers: &HeaderMap) -> Option<&str> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?.trim();
    let (scheme, key) = value.split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then(|| key.trim_start())
}

#[derive(Debug, Deserialize)]
pub struct AttentionQuery {
    q: Option<String>,
    /// Layers to draw, `1,3` (1-based); all when absent.
    layers: Option<String>,
    api_key: Option<String>,
}

/// `GET /v1/attention?q=...`: the sentence translated with the server's decoding settings and
/// the attention of every head drawn as in `transformer attention`, as PNG.
pub async fn attention(
    State(state): State<Shared>,
    headers: HeaderMap,
    uri: Uri,
    query: Result<Query<AttentionQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Response, ApiError> {
    body::check_urlencoded_is_utf8(uri.query().unwrap_or("").as_bytes(), "query")?;
    let Query(query) =
        query.map_err(|e| ApiError::bad_request(format!("invalid request: {}", e.body_text())))?;
    state
        .key
        .check(bearer(&headers).or(query.api_key.as_deref()))?;
    if state.languages.multilingual() {
        return Err(ApiError::bad_request(
            "invalid request: attention is drawn for models of one language pair; this server's \
             is multilingual",
        ));
    }
    let text = normalize_sentence(query.q.as_deref().unwrap_or(""));
    let tokens = state
        .translator
        .checkpoint()
        .tokenizers
        .src
        .encode(&text)
        .map_err(|e| ApiError::bad_request(format!("invalid request: {e:#}")))?
        .ids
        .len();
    if tokens == 0 {
        return Err(ApiError::bad_request(
            "invalid request: q is empty; give the sentence whose attention to draw",
        ));
    }
    let readable = state.translator.source_limit().tokens;
    if tokens > MAX_ATTENTION_TOKENS.min(readable) {
        return Err(ApiError::bad_request(format!(
            "invalid request: the sentence has {tokens} tokens; attention is drawn for at most \
             {} (this model reads {readable})",
            MAX_ATTENTION_TOKENS.min(readable)
        )));
    }
    let layers = layers(
        query.layers.as_deref(),
        state.translator.checkpoint().config.model.layers,
    )?;
    // The server's decoding, with the target cut where the picture stays a picture, and the
    // request's work bounded as a translation's is.
    let mut options = state.decode.clone();
    options.max_len = Some(
        options
            .max_len
            .unwrap_or(usize::MAX)
            .min(MAX_ATTENTION_TARGET),
    );
    let one = std::slice::from_ref(&text);
    state.check_texts(one, one, &options)?;
    let reply = state
        .queue
        .attention(text, layers, options)
        .map_err(|why| state.refused(why))?;
    let (_, grids) = answer(reply).await?;
    let png = tokio::task::spawn_blocking(move || attention_heatmaps_png(&grids))
        .await
        .map_err(|e| ApiError::internal(format!("drawing the attention failed: {e}")))?
        .map_err(|e| {
            ApiError::internal(format!("{e:#}").lines().next().unwrap_or("").to_string())
        })?;
    Ok((
        [
            (header::CONTENT_TYPE, "image/png"),
            (header::CACHE_CONTROL, "no-store"),
        ],
        png,
    )
        .into_response())
}

/// `1,3` as layer numbers, each from 1 to `count`; empty or absent: all layers.
fn layers(spec: Option<&str>, count: usize) -> Result<Vec<usize>, ApiError> {
    let Some(spec) = spec.filter(|s| !s.trim().is_empty()) else {
        return Ok(Vec::new());
    };
    spec.split(',')
        .map(|part| match part.trim().parse::<usize>() {
            Ok(layer) if (1..=count).contains(&layer) => Ok(layer),
            _ => Err(ApiError::bad_request(format!(
                "invalid request: layers {part:?} is not a layer of this model; it has layers 1 \
                 to {count}"
            ))),
        })
        .collect()
}

/// `GET /health`: that the server answers, what it serves and how full its queue is.
pub async fn health(State(state): State<Shared>) -> Json<Value> {
    Json(json!({
        "status": "ok",
        "checkpoint": state.translator.checkpoint().dir.display().to_string(),
        "source": state.languages.default.as_ref().map(|p| &p.source),
        "target": state.languages.default.as_ref().map(|p| &p.target),
        "languages": state.languages.codes.len().max(2),
        "device": state.device,
        "max_batch": state.max_batch,
        "queued_sentences": state.queue.len(),
        "queue_capacity": state.queue.capacity(),
        "version": env!("CARGO_PKG_VERSION"),
    }))
}

/// `GET /metrics`, for Prometheus.
pub async fn metrics(State(state): State<Shared>) -> Response {
    match state.metrics.encode(state.queue.len()) {
        Ok(text) => (
            StatusCode::OK,
            [(
                header::CONTENT_TYPE,
                "application/openmetrics-text; version=1.0.0; charset=utf-8",
            )],
            text,
        )
            .into_response(),
        Err(_) => ApiError::internal("the metrics could not be written").into_response(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bearer_scheme_is_read_in_any_case() {
        for value in ["Bearer k1", "bearer k1", "BEARER  k1"] {
            let mut headers = HeaderMap::new();
            headers.insert(header::AUTHORIZATION, value.parse().unwrap());
            assert_eq!(bearer(&headers), Some("k1"), "{value}");
        }
        let mut basic = HeaderMap::new();
        basic.insert(header::AUTHORIZATION, "Basic k1".parse().unwrap());
        assert_eq!(bearer(&basic), None);
    }

    #[test]
    fn layers_are_numbered_from_one() {
        assert_eq!(layers(None, 3).unwrap(), Vec::<usize>::new());
        assert_eq!(layers(Some("1, 3"), 3).unwrap(), vec![1, 3]);
        for bad in ["0", "4", "x", "1,,2"] {
            assert_eq!(layers(Some(bad), 3).unwrap_err().status, 400, "{bad}");
        }
    }
}
