//! The page at `/`: a source box, a target box and the translation's attention heatmap, for
//! people learning how the model works. One HTML file with its script inline, compiled into
//! the binary, so that it works offline with the server alone.

use axum::response::Html;

const PAGE: &str = include_str!("../assets/serve/index.html");

pub async fn index() -> Html<&'static str> {
    Html(PAGE)
}
