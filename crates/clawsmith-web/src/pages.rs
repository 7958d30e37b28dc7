//! The HTML shell every page is, and the embedded assets it loads.

use std::sync::Arc;

use axum::Router;
use axum::extract::State;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::get;

use crate::AppState;

const SHELL: &str = include_str!("../assets/index.html");
const SCRIPT: &str = include_str!("../assets/app.js");
const STYLE: &str = include_str!("../assets/app.css");

pub(crate) fn router() -> Router<Arc<AppState>> {
    Router::new()
        .route("/", get(shell))
        .route("/sessions/{id}", get(shell))
        .route("/sessions/{id}/turns/{turn}", get(shell))
        .route(
            "/assets/app.js",
            get(|| asset(SCRIPT, "text/javascript; charset=utf-8")),
        )
        .route(
            "/assets/app.css",
            get(|| asset(STYLE, "text/css; charset=utf-8")),
        )
        .route("/favicon.ico", get(|| async { StatusCode::NO_CONTENT }))
}

/// The page: the CSRF token travels in a `<meta>` only pages served with the cookie see; the
/// script reads the path and renders from `/api/`.
async fn shell(State(state): State<Arc<AppState>>) -> Html<String> {
    Html(SHELL.replace("{{CSRF}}", &state.csrf))
}

async fn asset(body: &'static str, content_type: &'static str) -> Response {
    let mut response = body.into_response();
    response
        .headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    response
}
