//! Request bodies as LibreTranslate clients send them: JSON, or an HTML form
//! (`application/x-www-form-urlencoded`, what `libretranslatepy` and `curl -d` send), read
//! into one JSON object so that each endpoint deserialises a single typed struct.

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::http::{header, HeaderMap, StatusCode};
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use super::error::ApiError;

/// Which encodings an endpoint reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Accepts {
    /// JSON or a form (LibreTranslate's endpoints).
    JsonOrForm,
    /// JSON only (this server's `/v1` API, whose fields are typed).
    Json,
}

/// The body as `T`: JSON by its content type (or by its first byte when none is given), a
/// form otherwise; each failure is a 4xx that says what was wrong.
pub fn parse<T: DeserializeOwned>(
    headers: &HeaderMap,
    body: Result<Bytes, BytesRejection>,
    (max_bytes, limit_name): (usize, &str),
    accepts: Accepts,
) -> Result<T, ApiError> {
    let bytes = body.map_err(|rejection| body_error(rejection, max_bytes, limit_name))?;
    let object = match content_type(headers).as_deref() {
        Some("application/json") => json_object(&bytes)?,
        Some("application/x-www-form-urlencoded") if accepts == Accepts::JsonOrForm => {
            form_object(&bytes)?
        }
        None if accepts == Accepts::Json => json_object(&bytes)?,
        None if bytes.trim_ascii_start().starts_with(b"{") => json_object(&bytes)?,
        None => form_object(&bytes)?,
        Some(other) => {
            return Err(ApiError::with_status(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                match accepts {
                    Accepts::JsonOrForm => format!(
                        "Content-Type {other} is not supported; send application/json or \
                         application/x-www-form-urlencoded"
                    ),
                    Accepts::Json => {
                        format!("Content-Type {other} is not supported here; send application/json")
                    }
                },
            ))
        }
    };
    serde_json::from_value(Value::Object(object))
        .map_err(|e| ApiError::bad_request(format!("invalid request: {e}")))
}

/// The media type without parameters (`; charset=utf-8`), lowercased.
fn content_type(headers: &HeaderMap) -> Option<String> {
    let value = headers.get(header::CONTENT_TYPE)?.to_str().ok()?;
    let media = value.split(';').next().unwrap_or("").trim();
    (!media.is_empty()).then(|| media.to_ascii_lowercase())
}

/// The answer to a body over `max_bytes` (the setting `limit_name`).
pub fn too_large(max_bytes: usize, limit_name: &str) -> ApiError {
    ApiError::with_status(
        StatusCode::PAYLOAD_TOO_LARGE,
        format!(
            "the request body is larger than this server's limit of {max_bytes} bytes \
             ({limit_name}); send fewer or shorter texts per request"
        ),
    )
}

/// The answer to a file larger than `max_bytes` (the setting `limit_name`).
pub fn file_too_large(max_bytes: usize, limit_name: &str) -> ApiError {
    ApiError::with_status(
        StatusCode::PAYLOAD_TOO_LARGE,
        format!(
            "the file is larger than this server's limit of {max_bytes} bytes ({limit_name}); \
             split it"
        ),
    )
}

fn body_error(rejection: BytesRejection, max_bytes: usize, limit_name: &str) -> ApiError {
    if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
        too_large(max_bytes, limit_name)
    } else {
        ApiError::with_status(
            rejection.status(),
            format!("cannot read the request body: {}", rejection.body_text()),
        )
    }
}

fn json_object(bytes: &[u8]) -> Result<Map<String, Value>, ApiError> {
    match serde_json::from_slice::<Value>(bytes) {
        Ok(Value::Object(object)) => Ok(object),
        Ok(_) => Err(ApiError::bad_request(
            "invalid request: the JSON body must be an object such as {\"q\": \"...\"}",
        )),
        Err(e) => Err(ApiError::bad_request(format!(
            "invalid request: the body is not valid JSON ({e})"
        ))),
    }
}

/// A form's fields as strings; a name given twice keeps its last value, as Flask's
/// `request.form` does for LibreTranslate.
fn form_object(bytes: &[u8]) -> Result<Map<String, Value>, ApiError> {
    check_urlencoded_is_utf8(bytes, "form")?;
    let pairs: Vec<(String, String)> = serde_urlencoded::from_bytes(bytes).map_err(|e| {
        ApiError::bad_request(format!(
            "invalid request: the form body cannot be read ({e})"
        ))
    })?;
    Ok(pairs
        .into_iter()
        .map(|(name, value)| (name, Value::String(value)))
        .collect())
}

/// Refuses a form body or query string (`what`) whose names or values are not UTF-8 once
/// percent-decoded, as a JSON body that is not UTF-8 is refused: the decoder would replace
/// the bytes with U+FFFD and translate something the client never sent.
pub fn check_urlencoded_is_utf8(bytes: &[u8], what: &str) -> Result<(), ApiError> {
    for (index, field) in bytes.split(|&b| b == b'&').enumerate() {
        let spaced: Vec<u8> = field
            .iter()
            .map(|&b| if b == b'+' { b' ' } else { b })
            .collect();
        if percent_encoding::percent_decode(&spaced)
            .decode_utf8()
            .is_err()
        {
            return Err(ApiError::bad_request(format!(
                "invalid request: {what} field {} is not UTF-8 once percent-decoded; send the \
                 text encoded as UTF-8",
                index + 1
            )));
        }
    }
    Ok(())
}

/// The texts of `q` (a string or a list of strings) and whether it was a list.
pub fn texts(q: Option<Value>) -> Result<(Vec<String>, bool), ApiError> {
    match q {
        None | Some(Value::Null) => Err(ApiError::bad_request(
            "invalid request: missing q parameter; send the text to translate as q",
        )),
        Some(Value::String(text)) => Ok((vec![text], false)),
        Some(Value::Array(items)) if !items.is_empty() => {
            let texts = items
                .into_iter()
                .map(|item| match item {
                    Value::String(text) => Ok(text),
                    other => Err(ApiError::bad_request(format!(
                        "invalid request: q must be a string or a list of strings, and holds \
                         {other}"
                    ))),
                })
                .collect::<Result<_, _>>()?;
            Ok((texts, true))
        }
        Some(Value::Array(_)) => Err(ApiError::bad_request(
            "invalid request: q is an empty list; send at least one text",
        )),
        Some(other) => Err(ApiError::bad_request(format!(
            "invalid request: q must be a string or a list of strings, got {other}"
        ))),
    }
}

/// A count sent as a JSON number or, from a form, as a string of digits.
pub fn count(field: &str, value: Option<&Value>) -> Result<Option<usize>, ApiError> {
    let parsed = match value {
        None | Some(Value::Null) => return Ok(None),
        Some(Value::Number(n)) => n.as_u64(),
        Some(Value::String(s)) if s.is_empty() => return Ok(None),
        Some(Value::String(s)) => s.trim().parse::<u64>().ok(),
        Some(_) => None,
    };
    parsed.map(|n| Some(n as usize)).ok_or_else(|| {
        ApiError::bad_request(format!(
            "invalid request: {field} must be a whole number of 0 or more, got {}",
            value.map_or_else(String::new, Value::to_string)
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn q_is_a_string_or_a_list_of_strings() {
        assert_eq!(texts(Some(json!("x"))).unwrap(), (vec!["x".into()], false));
        assert_eq!(
            texts(Some(json!(["x", "y"]))).unwrap(),
            (vec!["x".into(), "y".into()], true)
        );
        for bad in [None, Some(json!([])), Some(json!(3)), Some(json!(["x", 1]))] {
            assert_eq!(texts(bad.clone()).unwrap_err().status, 400, "{bad:?}");
        }
    }

    #[test]
    fn a_form_that_is_not_utf8_once_decoded_is_refused_naming_the_field() {
        let object = form_object(b"q=Gr%C3%BC%C3%9Fe+dich&source=de").unwrap();
        assert_eq!(object["q"], json!("Grüße dich"));
        let err = form_object(b"source=de&q=%FF%FEbier").unwrap_err();
        assert_eq!(err.status, 400);
        assert!(err.message.contains("form field 2"), "{}", err.message);
    }

    #[test]
    fn counts_come_as_numbers_or_digits() {
        assert_eq!(count("n", Some(&json!(3))).unwrap(), Some(3));
        assert_eq!(count("n", Some(&json!("2"))).unwrap(), Some(2));
        assert_eq!(count("n", None).unwrap(), None);
        assert_eq!(count("n", Some(&json!(-1))).unwrap_err().status, 400);
    }
}
