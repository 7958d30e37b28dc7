//! The HTML shell every page is, and the embedded assets it loads.

use std::sync::Arc;

use axum::Router;
use axum::extract::State;
use axum::http::{HeaderValue, header};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::get;

use crate::AppState;

const SHELL: &str = include_str!("../assets/index.html");
const SCRIPT: &str = include_str!("../assets/app.js");
const STYLE: &str = include_str!("../assets/app.css");

/// The pages and assets, under the instance's prefix (`/s/<hex>/`).
pub(crate) fn router(prefix: &str) -> Router<Arc<AppState>> {
    Router::new()
        .route(prefix, get(shell))
        .route(&format!("{prefix}sessions/{{id}}"), get(shell))
        .route(
            &format!("{prefix}sessions/{{id}}/turns/{{turn}}"),
            get(shell),
        )
        .route(
            &format!("{prefix}assets/app.js"),
            get(|| asset(SCRIPT, "text/javascript; charset=utf-8")),
        )
        .route(
            &format!("{prefix}assets/app.css"),
            get(|| asset(STYLE, "text/css; charset=utf-8")),
        )
}

/// The page: the CSRF secret travels in a `<meta>` only pages served with the cookie see, the
/// prefix in another; the script reads the path and renders from `/api/` under the prefix.
async fn shell(State(state): State<Arc<AppState>>) -> Html<String> {
    Html(
        SHELL
            .replace("{{CSRF}}", &state.csrf)
            .replace("{{BASE}}", &state.prefix),
    )
}

async fn asset(body: &'static str, content_type: &'static str) -> Response {
    let mut response = body.into_response();
    response
        .headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    response
}
