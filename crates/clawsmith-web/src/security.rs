//! The guard in front of every route: Host, Origin, the prefix, token or cookie, CSRF on POST,
//! the response headers.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::api::error;
use crate::{AppState, COOKIE_NAME};

/// The Content-Security-Policy of every response: scripts, styles and connections from this
/// origin only; no inline script or style, no frames, no plugins, no forms elsewhere.
pub(crate) const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'self'; \
     style-src 'self'; img-src 'self'; connect-src 'self'; base-uri 'none'; form-action 'self'; \
     frame-ancestors 'none'";

pub(crate) use clawsmith_fs::secret::{constant_time_eq, new_secret};

/// Every request passes here first.
pub(crate) async fn guard(
    State(state): State<Arc<AppState>>,
    request: Request,
    next: Next,
) -> Response {
    let mut response = match check(&state, &request) {
        Verdict::Pass => next.run(request).await,
        Verdict::Answer(response) => response,
    };
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

/// What the guard decides about one request.
enum Verdict {
    /// On to the routes.
    Pass,
    /// Answered here: a refusal, or the login's redirect.
    Answer(Response),
}

fn check(state: &AppState, request: &Request) -> Verdict {
    let refuse = |status, code, message: String| Verdict::Answer(error(status, code, message));
    let port = state.port;
    // DNS rebinding: a page of another site whose name now resolves to 127.0.0.1 still sends its
    // own name as Host.
    if !host_allowed(request.headers(), port) {
        return refuse(
            StatusCode::FORBIDDEN,
            "foreign_host",
            format!("Host must be 127.0.0.1:{port} or localhost:{port}"),
        );
    }
    // A browser names the page that made a request (always on a POST); only our own pages may.
    if !origin_allowed(request.headers(), port) {
        return refuse(
            StatusCode::FORBIDDEN,
            "foreign_origin",
            format!(
                "requests from another origin are refused; Origin must be \
                 http://127.0.0.1:{port} or http://localhost:{port}"
            ),
        );
    }
    let Some(rest) = within_prefix(request.uri().path(), &state.prefix) else {
        return refuse(
            StatusCode::NOT_FOUND,
            "not_found",
            "nothing is served here; open the URL `clawsmith web` printed".to_owned(),
        );
    };
    let is_read = matches!(*request.method(), Method::GET | Method::HEAD);
    if let Some(token) = query_token(request.uri().query()).filter(|_| is_read) {
        if !constant_time_eq(token.as_bytes(), state.token.as_bytes()) {
            return Verdict::Answer(unauthorized());
        }
        return Verdict::Answer(login(state, rest));
    }
    let cookie_ok = cookie_values(request.headers())
        .any(|value| constant_time_eq(value.as_bytes(), state.token.as_bytes()));
    if !cookie_ok {
        return Verdict::Answer(unauthorized());
    }
    if is_read {
        return Verdict::Pass;
    }
    if *request.method() != Method::POST {
        return refuse(
            StatusCode::METHOD_NOT_ALLOWED,
            "method_not_allowed",
            "only GET and POST are served".to_owned(),
        );
    }
    let csrf_ok = request
        .headers()
        .get("x-csrf-token")
        .and_then(|value| value.to_str().ok())
        .is_some_and(|token| constant_time_eq(token.as_bytes(), state.csrf.as_bytes()));
    if !csrf_ok {
        return refuse(
            StatusCode::FORBIDDEN,
            "csrf_refused",
            "a POST needs the page's X-CSRF-Token header".to_owned(),
        );
    }
    Verdict::Pass
}

/// The login: the token becomes a cookie only URLs under the prefix receive, and leaves the
/// address bar by a redirect that stays under the prefix.
fn login(state: &AppState, rest: &str) -> Response {
    let cookie = format!(
        "{COOKIE_NAME}={}; Path={}; HttpOnly; SameSite=Strict",
        state.token, state.prefix
    );
    let location = landing(&state.prefix, rest);
    let mut response = (StatusCode::SEE_OTHER, [(header::LOCATION, location)]).into_response();
    // The prefix and the token are hex digits: the header value is always valid.
    if let Ok(value) = HeaderValue::from_str(&cookie) {
        response.headers_mut().insert(header::SET_COOKIE, value);
    }
    response
}

/// Where the login's redirect goes: the prefix plus the requested page when it is one of ours
/// (`sessions/ID`, `sessions/ID/turns/TURN`, with ids as the pages encode them), else the prefix
/// alone. The target always starts with the prefix, so no input can send it to another site.
pub(crate) fn landing(prefix: &str, rest: &str) -> String {
    let segments: Vec<&str> = rest.split('/').collect();
    let page = match segments.as_slice() {
        ["sessions", id] => id_segment(id),
        ["sessions", id, "turns", turn] => id_segment(id) && id_segment(turn),
        _ => false,
    };
    if page {
        format!("{prefix}{rest}")
    } else {
        prefix.to_owned()
    }
}

/// A path segment as `encodeURIComponent` writes an id: not empty, not a dot segment, and only
/// the characters it leaves as they are, plus `%`.
fn id_segment(segment: &str) -> bool {
    !segment.is_empty()
        && segment != "."
        && segment != ".."
        && segment
            .bytes()
            .all(|byte| byte.is_ascii_alphanumeric() || b"-_.!~*'()%".contains(&byte))
}

/// The path after the prefix, when `path` is under it (the prefix's secret segment is compared
/// in constant time).
fn within_prefix<'a>(path: &'a str, prefix: &str) -> Option<&'a str> {
    let head = path.get(..prefix.len())?;
    constant_time_eq(head.as_bytes(), prefix.as_bytes()).then(|| &path[prefix.len()..])
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

/// No `Origin` (a navigation, a same-origin `GET`, a script outside a browser) or our own.
fn origin_allowed(headers: &HeaderMap, port: u16) -> bool {
    let mut origins = headers.get_all(header::ORIGIN).iter();
    origins.all(|origin| {
        origin == format!("http://127.0.0.1:{port}").as_str()
            || origin == format!("http://localhost:{port}").as_str()
    })
}

fn query_token(query: Option<&str>) -> Option<&str> {
    query?
        .split('&')
        .find_map(|pair| pair.strip_prefix("token="))
}

/// Every value of a [`COOKIE_NAME`] cookie: a server on another port can set one of the same
/// name for the whole host, so the one that matches counts, wherever it is.
fn cookie_values(headers: &HeaderMap) -> impl Iterator<Item = &str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(';'))
        .filter_map(|pair| pair.trim().strip_prefix(COOKIE_NAME)?.strip_prefix('='))
}

#[cfg(test)]
mod tests {
    use super::*;

    const PREFIX: &str = "/s/0123456789abcdef0123456789abcdef/";

    fn headers(pairs: &[(header::HeaderName, &str)]) -> HeaderMap {
        let mut headers = HeaderMap::new();
        for (name, value) in pairs {
            headers.append(name, HeaderValue::from_str(value).unwrap());
        }
        headers
    }

    #[test]
    fn secrets_are_fresh_and_compared_whole() {
        let (a, b) = (new_secret().unwrap(), new_secret().unwrap());
        assert_eq!(a.len(), 32);
        assert!(a.bytes().all(|byte| byte.is_ascii_hexdigit()));
        assert_ne!(a, b);
        assert!(constant_time_eq(a.as_bytes(), a.as_bytes()));
        assert!(!constant_time_eq(a.as_bytes(), b.as_bytes()));
        assert!(!constant_time_eq(a.as_bytes(), &a.as_bytes()[..31]));
    }

    #[test]
    fn hosts() {
        for (host, allowed) in [
            ("127.0.0.1:8080", true),
            ("localhost:8080", true),
            ("127.0.0.1:8081", false),
            ("evil.example:8080", false),
            ("127.0.0.1", false),
            ("localhost.evil.example:8080", false),
        ] {
            assert_eq!(
                host_allowed(&headers(&[(header::HOST, host)]), 8080),
                allowed,
                "{host}"
            );
        }
        assert!(!host_allowed(&HeaderMap::new(), 8080), "no Host");
    }

    #[test]
    fn origins() {
        for (origin, allowed) in [
            (None, true),
            (Some("http://127.0.0.1:8080"), true),
            (Some("http://localhost:8080"), true),
            (Some("http://127.0.0.1:8081"), false),
            (Some("http://localhost:3000"), false),
            (Some("https://127.0.0.1:8080"), false),
            (Some("http://evil.example"), false),
            (Some("null"), false),
        ] {
            let headers = headers(
                &origin
                    .map(|o| (header::ORIGIN, o))
                    .into_iter()
                    .collect::<Vec<_>>(),
            );
            assert_eq!(origin_allowed(&headers, 8080), allowed, "{origin:?}");
        }
        let two = headers(&[
            (header::ORIGIN, "http://127.0.0.1:8080"),
            (header::ORIGIN, "http://evil.example"),
        ]);
        assert!(!origin_allowed(&two, 8080), "every Origin must be ours");
    }

    #[test]
    fn cookies_and_query_tokens() {
        let headers = headers(&[
            (header::COOKIE, "a=1; clawsmith_web=tossed; b=2"),
            (header::COOKIE, "clawsmith_web=ours; clawsmith_web_8080=old"),
        ]);
        let values: Vec<&str> = cookie_values(&headers).collect();
        assert_eq!(values, ["tossed", "ours"]);
        assert_eq!(query_token(Some("x=1&token=t")), Some("t"));
        assert_eq!(query_token(Some("x=1")), None);
        assert_eq!(query_token(None), None);
    }

    #[test]
    fn the_prefix_is_matched_whole() {
        for (path, rest) in [
            (PREFIX, Some("")),
            (
                "/s/0123456789abcdef0123456789abcdef/api/sessions",
                Some("api/sessions"),
            ),
            ("/s/0123456789abcdef0123456789abcdef", None),
            ("/s/0123456789abcdef0123456789abcdee/", None),
            ("/", None),
            ("/api/sessions", None),
            ("//s/0123456789abcdef0123456789abcdef/", None),
        ] {
            assert_eq!(within_prefix(path, PREFIX), rest, "{path}");
        }
    }

    /// No path after the prefix sends the login's redirect anywhere but under the prefix.
    #[test]
    fn the_login_redirect_stays_under_the_prefix() {
        // (what follows the prefix, whether the redirect keeps it)
        for (rest, kept) in [
            ("", false),
            ("sessions/s", true),
            ("sessions/s%2Dfork/turns/t-1", true),
            ("/evil.example/", false),
            ("//evil.example/", false),
            ("\\evil.example", false),
            ("/\\evil.example", false),
            ("%2F%2Fevil.example", false),
            ("http://evil.example/", false),
            ("sessions//evil.example", false),
            ("sessions/\\evil.example", false),
            ("sessions/..", false),
            ("sessions/s/turns/..", false),
            ("sessions/s/turns/t/extra", false),
            ("sessions/a:b@evil.example", false),
            ("api/sessions", false),
        ] {
            let landing_at = if kept {
                format!("{PREFIX}{rest}")
            } else {
                PREFIX.to_owned()
            };
            assert_eq!(landing(PREFIX, rest), landing_at, "{rest:?}");
        }
    }
}
