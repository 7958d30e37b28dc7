//! The guard in front of every route: Host, token or cookie, CSRF on POST, response headers.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use sha2::{Digest, Sha256};

use crate::api::error;
use crate::{AppState, COOKIE_PREFIX};

/// The Content-Security-Policy of every response: scripts, styles and connections from this
/// origin only; no inline script or style, no frames, no plugins, no forms elsewhere.
pub(crate) const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'self'; \
     style-src 'self'; img-src 'self'; connect-src 'self'; base-uri 'none'; form-action 'self'; \
     frame-ancestors 'none'";

/// 128 bits from the operating system's random source, as 32 hex digits.
pub(crate) fn new_token() -> std::io::Result<String> {
    let mut bytes = [0u8; 16];
    let mut filled = 0;
    while filled < bytes.len() {
        filled +=
            rustix::rand::getrandom(&mut bytes[filled..], rustix::rand::GetRandomFlags::empty())
                .map_err(std::io::Error::from)?;
    }
    Ok(hex::encode(bytes))
}

/// The CSRF token bound to a cookie's token: a page can only learn it by being served with the
/// cookie, and another site can neither read it nor derive it.
pub(crate) fn csrf_for(token: &str) -> String {
    let mut hasher = Sha256::new();
    hasher.update(b"clawsmith-web csrf\0");
    hasher.update(token.as_bytes());
    hex::encode(hasher.finalize())
}

/// Equality whose time does not depend on where the inputs first differ.
pub(crate) fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let difference = a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y));
    std::hint::black_box(difference) == 0
}

/// Every request passes here first.
pub(crate) async fn guard(
    State(state): State<Arc<AppState>>,
    request: Request,
    next: Next,
) -> Response {
    let mut response = check(&state, request, next).await;
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CONTENT_SECURITY_POLICY),
    );
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

async fn check(state: &AppState, request: Request, next: Next) -> Response {
    // DNS rebinding: a page of another site whose name now resolves to 127.0.0.1 still sends its
    // own name as Host.
    if !host_allowed(request.headers(), state.port) {
        return error(
            StatusCode::FORBIDDEN,
            "foreign_host",
            format!(
                "Host must be 127.0.0.1:{port} or localhost:{port}",
                port = state.port
            ),
        );
    }
    if let Some(token) = query_token(request.uri().query()) {
        if !constant_time_eq(token.as_bytes(), state.token.as_bytes()) {
            return unauthorized();
        }
        // The token becomes a cookie and leaves the address bar.
        let cookie = format!(
            "{COOKIE_PREFIX}{}={}; HttpOnly; SameSite=Strict; Path=/",
            state.port, state.token
        );
        let location = request.uri().path().to_owned();
        let mut response = (StatusCode::SEE_OTHER, [(header::LOCATION, location)]).into_response();
        if let Ok(value) = HeaderValue::from_str(&cookie) {
            response.headers_mut().insert(header::SET_COOKIE, value);
        }
        return response;
    }
    let cookie_ok = cookie_token(request.headers(), state.port)
        .is_some_and(|token| constant_time_eq(token.as_bytes(), state.token.as_bytes()));
    if !cookie_ok {
        return unauthorized();
    }
    match *request.method() {
        Method::GET | Method::HEAD => {}
        Method::POST => {
            let csrf_ok = request
                .headers()
                .get("x-csrf-token")
                .and_then(|value| value.to_str().ok())
                .is_some_and(|token| constant_time_eq(token.as_bytes(), state.csrf.as_bytes()));
            if !csrf_ok {
                return error(
                    StatusCode::FORBIDDEN,
                    "csrf_refused",
                    "a POST needs the page's X-CSRF-Token header",
                );
            }
        }
        _ => {
            return error(
                StatusCode::METHOD_NOT_ALLOWED,
                "method_not_allowed",
                "only GET and POST are served",
            );
        }
    }
    next.run(request).await
}

fn unauthorized() -> Response {
    error(
        StatusCode::UNAUTHORIZED,
        "unauthorized",
        "open the URL `clawsmith web` printed (it carries the token)",
    )
}

fn host_allowed(headers: &HeaderMap, port: u16) -> bool {
    let Some(host) = headers.get(header::HOST).and_then(|h| h.to_str().ok()) else {
        return false;
    };
    host == format!("127.0.0.1:{port}") || host == format!("localhost:{port}")
}

fn query_token(query: Option<&str>) -> Option<&str> {
    query?
        .split('&')
        .find_map(|pair| pair.strip_prefix("token="))
}

fn cookie_token(headers: &HeaderMap, port: u16) -> Option<&str> {
    let name = format!("{COOKIE_PREFIX}{port}");
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(';'))
        .find_map(|pair| pair.trim().strip_prefix(name.as_str())?.strip_prefix('='))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_fresh_and_compared_whole() {
        let (a, b) = (new_token().unwrap(), new_token().unwrap());
        assert_eq!(a.len(), 32);
        assert_ne!(a, b);
        assert!(constant_time_eq(a.as_bytes(), a.as_bytes()));
        assert!(!constant_time_eq(a.as_bytes(), b.as_bytes()));
        assert!(!constant_time_eq(a.as_bytes(), &a.as_bytes()[..31]));
        assert_ne!(csrf_for(&a), csrf_for(&b));
    }

    #[test]
    fn hosts_and_cookies() {
        let check_host = |host: &str| {
            let mut headers = HeaderMap::new();
            headers.insert(header::HOST, HeaderValue::from_str(host).unwrap());
            host_allowed(&headers, 8080)
        };
        for (host, allowed) in [
            ("127.0.0.1:8080", true),
            ("localhost:8080", true),
            ("127.0.0.1:8081", false),
            ("evil.example:8080", false),
            ("127.0.0.1", false),
            ("localhost.evil.example:8080", false),
        ] {
            assert_eq!(check_host(host), allowed, "{host}");
        }
        let mut headers = HeaderMap::new();
        headers.insert(
            header::COOKIE,
            HeaderValue::from_static("a=1; clawsmith_web_8081=other; clawsmith_web_8080=abc; b=2"),
        );
        assert_eq!(cookie_token(&headers, 8080), Some("abc"));
        assert_eq!(cookie_token(&headers, 8081), Some("other"));
        assert_eq!(cookie_token(&headers, 8082), None);
        assert_eq!(query_token(Some("x=1&token=t")), Some("t"));
        assert_eq!(query_token(Some("x=1")), None);
    }
}
