//! `GET /spec`: the server's OpenAPI 3 description, as LibreTranslate publishes its own at
//! `/spec`. Written by hand (assets/serve/openapi.json) and compiled in; a property-based fuzzer
//! reads it in CI (scripts/test-serve-fuzz.sh) and checks every answer against it.

use axum::http::header;
use axum::response::IntoResponse;

const SPEC: &str = include_str!("../assets/serve/openapi.json");

pub async fn spec() -> impl IntoResponse {
    ([(header::CONTENT_TYPE, "application/json")], SPEC)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_spec_is_json_naming_every_endpoint_of_the_router() {
        let spec: serde_json::Value = serde_json::from_str(SPEC).unwrap();
        assert!(spec["openapi"].as_str().unwrap().starts_with("3."));
        let paths = spec["paths"].as_object().unwrap();
        for path in super::super::routes::ENDPOINTS {
            assert!(paths.contains_key(*path), "{path} is not in the spec");
        }
        assert_eq!(paths.len(), super::super::routes::ENDPOINTS.len());
    }
}
