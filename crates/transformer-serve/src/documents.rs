//! LibreTranslate's file endpoints: `POST /translate_file` (multipart: `file`, `source`,
//! `target`, `api_key`) answers `{"translatedFileUrl": ".../download_file/ID.NAME"}`, and
//! `GET /download_file/ID.NAME` sends the translated file until its link expires. Files are
//! .txt, .html/.htm and .docx; their sentences join the same queue as every request's, a
//! batch at a time, so that one large file does not hold the model against everyone else.

use axum::extract::multipart::{Multipart, MultipartError, MultipartRejection};
use axum::extract::{Path, State};
use axum::http::{header, HeaderMap, HeaderValue};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::{json, Value};

use super::app::Shared;
use super::error::ApiError;
use super::file_names::safe_file_name;
use super::files::{FileStore, SMALL_FILE_BYTES};
use super::setting_names::ServeSettingNames;
use transformer::infer::settings::{self, DecodeRequest};
use transformer_documents::{DocumentFormat, DocxLimits, Prepared};

/// The parts of a `/translate_file` form this reads.
#[derive(Default)]
struct FileForm {
    file: Option<(String, Vec<u8>)>,
    source: Option<String>,
    target: Option<String>,
    api_key: Option<String>,
}

/// `POST /translate_file`.
pub async fn translate_file(
    State(state): State<Shared>,
    headers: HeaderMap,
    multipart: Result<Multipart, MultipartRejection>,
) -> Result<Json<Value>, ApiError> {
    let files = file_store(&state)?;
    let multipart = multipart.map_err(|e| {
        ApiError::bad_request(format!(
            "invalid request: {}; send multipart/form-data with file, source and target",
            e.body_text()
        ))
    })?;
    // The upload is a body like any other: bounded by the request timeout, however slowly it
    // comes.
    let reading = read_form(multipart, files, &state.names);
    let form = tokio::time::timeout(state.limits.timeout, reading)
        .await
        .map_err(|_| {
            ApiError::with_status(
                axum::http::StatusCode::REQUEST_TIMEOUT,
                format!(
                    "the upload took longer than this server's limit of {} ms ({}); send it \
                     faster or send a smaller file",
                    state.limits.timeout.as_millis(),
                    state.names.timeout
                ),
            )
        })??;
    state.key.check(form.api_key.as_deref())?;
    let checked = state
        .languages
        .check(form.source.as_deref(), form.target.as_deref())?;
    let (name, bytes) = form.file.ok_or_else(|| {
        ApiError::bad_request("invalid request: missing file parameter (a multipart file field)")
    })?;
    let format = DocumentFormat::from_path(std::path::Path::new(&name)).ok_or_else(|| {
        ApiError::bad_request(format!(
            "invalid request: file format not supported: {:?}; this server translates {} files",
            safe_file_name(&name),
            DocumentFormat::all_extensions()
        ))
    })?;
    let options = state.decode_settings(DecodeRequest::by(settings::LIBRETRANSLATE_FIELDS))?;
    let (options, splitter) = state.in_languages(&checked, options)?;
    let shown = safe_file_name(&name);
    let translator = state.translator.clone();
    let size = bytes.len();
    let prepared = blocking(files, size, move || {
        let job = format.parse(bytes, &shown, DocxLimits::default())?;
        let prepared = Prepared::new(job, &splitter);
        check_sentence_lengths(&translator, prepared.sentences())?;
        Ok(prepared)
    })
    .await
    .map_err(|e| ApiError::bad_request(format!("invalid request: {e:#}")))?;
    let chars: usize = prepared.sentences().iter().map(|s| s.chars().count()).sum();
    let max_chars = files.settings.max_file_chars;
    if chars > max_chars {
        return Err(ApiError::bad_request(format!(
            "invalid request: the file holds {chars} characters of text, more than this \
             server's limit of {max_chars} ({}); split it",
            state.names.max_file_chars
        )));
    }
    // A batch's worth at a time: other requests' sentences queue between them.
    let chunk = (state.max_batch * 4).max(1);
    let mut translations = Vec::with_capacity(prepared.sentences().len());
    for sentences in prepared.sentences().chunks(chunk) {
        let done = state.translate(sentences.to_vec(), options.clone()).await?;
        translations.extend(done.into_iter().map(|t| t.translation));
    }
    let translated = blocking(files, size, move || prepared.finish(&translations))
        .await
        .map_err(|e| ApiError::internal(format!("translation failed: {e:#}")))?;
    let link = files
        .store(&translated, &name, format.media_type())
        .map_err(|e| {
            // The server's own paths and advice are for its operator, not the client.
            log::warn!("/translate_file: {e:#}");
            ApiError::internal("the translated file could not be stored on the server; retry later")
        })?;
    Ok(Json(json!({
        "translatedFileUrl": format!("{}/download_file/{link}", origin(&headers, &state)),
    })))
}

/// The server's stored files, or 403 when file translation is off.
fn file_store(state: &Shared) -> Result<&FileStore, ApiError> {
    state.files.as_ref().ok_or_else(|| {
        ApiError::forbidden(format!(
            "files translation is disabled on this server ({})",
            state.names.files_off
        ))
    })
}

/// Reads the form's fields; the file's bytes up to the server's limit.
async fn read_form(
    mut multipart: Multipart,
    files: &FileStore,
    names: &ServeSettingNames,
) -> Result<FileForm, ApiError> {
    let mut form = FileForm::default();
    let max = files.settings.max_file_bytes;
    while let Some(mut field) = multipart.next_field().await.map_err(multipart_error)? {
        let name = field.name().unwrap_or_default().to_string();
        match name.as_str() {
            "file" => {
                if form.file.is_some() {
                    return Err(ApiError::bad_request(
                        "invalid request: more than one file field; send one file a request",
                    ));
                }
                let file_name = field.file_name().unwrap_or_default().to_string();
                let mut bytes = Vec::new();
                while let Some(chunk) = field.chunk().await.map_err(multipart_error)? {
                    if bytes.len() + chunk.len() > max {
                        return Err(super::body::file_too_large(max, names.max_file_bytes));
                    }
                    bytes.extend_from_slice(&chunk);
                }
                form.file = Some((file_name, bytes));
            }
            "source" | "target" | "api_key" => {
                let value = field.text().await.map_err(multipart_error)?;
                match name.as_str() {
                    "source" => form.source = Some(value),
                    "target" => form.target = Some(value),
                    _ => form.api_key = Some(value),
                }
            }
            // LibreTranslate ignores fields it does not know; so does this.
            _ => {}
        }
    }
    Ok(form)
}

fn multipart_error(e: MultipartError) -> ApiError {
    // A body that ends or fails mid-upload is the client's (axum calls it a 500).
    let status = if e.status().is_server_error() {
        axum::http::StatusCode::BAD_REQUEST
    } else {
        e.status()
    };
    ApiError::with_status(status, format!("invalid request: {}", e.body_text()))
}

/// `GET /download_file/ID.NAME`.
pub async fn download_file(
    State(state): State<Shared>,
    Path(link): Path<String>,
) -> Result<Response, ApiError> {
    let files = file_store(&state)?;
    let download = files.find(&link).ok_or_else(|| {
        ApiError::not_found(format!(
            "no translated file {:?}, or its link expired (links last {} s); translate the \
             file again",
            safe_file_name(&link),
            files.settings.ttl.as_secs()
        ))
    })?;
    let disposition = format!("attachment; filename=\"{}\"", download.name);
    let mut response = download.bytes.into_response();
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(download.media_type),
    );
    if let Ok(value) = HeaderValue::from_str(&disposition) {
        headers.insert(header::CONTENT_DISPOSITION, value);
    }
    Ok(response)
}

/// `http://HOST` as the client reached this server (its Host header), for the download
/// link; the listening address when the header is missing or odd.
fn origin(headers: &HeaderMap, state: &Shared) -> String {
    let host = headers
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .filter(|h| {
            !h.is_empty()
                && h.len() <= 255
                && h.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-.:[]".contains(c))
        });
    match (host, state.listening.get()) {
        (Some(host), _) => format!("http://{host}"),
        (None, Some(addr)) => format!("http://{addr}"),
        (None, None) => format!("http://{}", state.addr),
    }
}

/// Refuses a file with a sentence longer than the model reads (it would come back cut), as
/// `/translate` refuses such a text.
fn check_sentence_lengths(
    translator: &transformer::infer::Translator,
    sentences: &[String],
) -> anyhow::Result<()> {
    let limit = translator.source_limit();
    for sentence in sentences {
        let tokens = translator
            .checkpoint()
            .tokenizers
            .src
            .encode(sentence)?
            .ids
            .len();
        if tokens > limit.tokens {
            let shown: String = sentence.chars().take(40).collect();
            anyhow::bail!(
                "the sentence {shown:?}... has {tokens} tokens, more than the {} this model \
                 reads ({}); split it into shorter sentences",
                limit.tokens,
                limit.reason()
            );
        }
    }
    Ok(())
}

/// Runs parsing or writing a document of `size` bytes off the async threads, at most two
/// at once (each can take a core for seconds), and a small one in a lane of its own.
async fn blocking<T: Send + 'static>(
    files: &FileStore,
    size: usize,
    work: impl FnOnce() -> anyhow::Result<T> + Send + 'static,
) -> anyhow::Result<T> {
    let lane = if size <= SMALL_FILE_BYTES {
        &files.small_workers
    } else {
        &files.workers
    };
    let _worker = lane
        .acquire()
        .await
        .map_err(|_| anyhow::anyhow!("the server is stopping"))?;
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|e| anyhow::anyhow!("the document worker stopped: {e}"))?
}
