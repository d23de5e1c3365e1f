//! The router: every endpoint behind the body limit, and one middleware that bounds each
//! request's time, counts it and times it.

use std::time::Instant;

use axum::extract::{DefaultBodyLimit, Request, State};
use axum::http::{header, Uri};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;

use super::app::Shared;
use super::error::ApiError;
use super::{body, documents, libretranslate, native, page, spec};

/// Every path the router answers, as `/spec` describes them.
pub const ENDPOINTS: &[&str] = &[
    "/",
    "/translate",
    "/languages",
    "/detect",
    "/frontend/settings",
    "/translate_file",
    "/download_file/{file}",
    "/v1/translate",
    "/v1/attention",
    "/health",
    "/metrics",
    "/spec",
];

/// Every endpoint, behind the body limit and the timing middleware.
pub fn router(state: Shared) -> Router {
    let limit = DefaultBodyLimit::max(state.limits.max_body_bytes);
    Router::new()
        .route("/", get(page::index))
        .route("/translate", post(libretranslate::translate))
        .route(
            "/languages",
            get(libretranslate::languages).post(libretranslate::languages),
        )
        .route("/detect", post(libretranslate::detect))
        .route("/frontend/settings", get(libretranslate::settings))
        .route(
            "/translate_file",
            post(documents::translate_file).layer(DefaultBodyLimit::max(file_body_limit(&state))),
        )
        .route("/download_file/{file}", get(documents::download_file))
        .route("/v1/translate", post(native::translate))
        .route("/v1/attention", get(native::attention))
        .route("/health", get(native::health))
        .route("/metrics", get(native::metrics))
        .route("/spec", get(spec::spec))
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(limit)
        .layer(middleware::from_fn_with_state(state.clone(), track))
        .with_state(state)
}

async fn not_found(uri: Uri) -> ApiError {
    ApiError::not_found(format!(
        "no endpoint {}; this server answers {} (described at /spec)",
        uri.path(),
        ENDPOINTS.join(", ")
    ))
}

async fn method_not_allowed(uri: Uri) -> ApiError {
    ApiError::with_status(
        axum::http::StatusCode::METHOD_NOT_ALLOWED,
        format!(
            "{} does not answer this method; /translate, /detect, /translate_file and \
             /v1/translate take POST, the others GET",
            uri.path()
        ),
    )
}

/// The largest `/translate_file` body: the file and the form around it.
fn file_body_limit(state: &Shared) -> usize {
    state
        .files
        .as_ref()
        .map_or(state.limits.max_body_bytes, |files| {
            files.settings.max_file_bytes.saturating_add(64 * 1024)
        })
}

/// Bounds each request by the server's timeout (reading its body included) and records its
/// status and latency.
async fn track(State(state): State<Shared>, request: Request, next: Next) -> Response {
    let endpoint = endpoint_label(request.uri().path());
    let started = Instant::now();
    let (timeout, max, setting) = match (endpoint, &state.files) {
        ("translate_file", Some(files)) => (
            files.settings.timeout,
            file_body_limit(&state),
            state.names.file_timeout,
        ),
        _ => (
            state.limits.timeout,
            state.limits.max_body_bytes,
            state.names.timeout,
        ),
    };
    let declared = request
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
    let response = if declared.is_some_and(|length| length > max as u64) {
        // Refused before the body is read, which a client may be slow to send.
        match (endpoint, &state.files) {
            ("translate_file", Some(files)) => {
                body::file_too_large(files.settings.max_file_bytes, state.names.max_file_bytes)
                    .into_response()
            }
            _ => body::too_large(max, state.names.max_body_bytes).into_response(),
        }
    } else {
        match tokio::time::timeout(timeout, next.run(request)).await {
            Ok(response) => response,
            Err(_) => ApiError::unavailable(format!(
                "the request took longer than this server's limit of {} ms ({setting}); \
             retry, or send fewer or shorter texts",
                timeout.as_millis()
            ))
            .into_response(),
        }
    };
    state
        .metrics
        .record_request(endpoint, response.status().as_u16(), started.elapsed());
    response
}

/// A fixed label per route, so that unknown paths cannot grow the metrics without bound.
fn endpoint_label(path: &str) -> &'static str {
    match path {
        "/" => "page",
        "/translate" => "translate",
        "/languages" => "languages",
        "/detect" => "detect",
        "/frontend/settings" => "settings",
        "/translate_file" => "translate_file",
        path if path.starts_with("/download_file/") => "download_file",
        "/v1/translate" => "v1_translate",
        "/v1/attention" => "v1_attention",
        "/health" => "health",
        "/metrics" => "metrics",
        "/spec" => "spec",
        _ => "other",
    }
}
