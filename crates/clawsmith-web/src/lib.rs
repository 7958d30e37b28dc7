//! # clawsmith-web
//!
//! `clawsmith web`: a local web view of the state database — sessions, their timelines (turns,
//! model requests with their evidence, every tool call rendered by its display kind), each turn's
//! checkpoint with diffs on demand, and undo with a preview of its precheck — for a person
//! reviewing what an agent did on their own machine.
//!
//! ## Main types
//! - [`WebServer`]: bound by [`WebServer::bind`] from a [`WebConfig`] (the store, the port, the
//!   workspace undo may write in); [`WebServer::url`] is the one URL that lets a browser in;
//!   [`WebServer::serve`] runs until the future is dropped.
//! - `security.rs`: the guard every request passes (Host, token or cookie, CSRF on POST, the
//!   response headers); `api.rs`: the JSON API under `/api/`; `pages.rs`: the HTML shell and the
//!   embedded assets (`assets/`).
//!
//! ## Decisions
//! - **Safe on a developer's machine.** The server binds `127.0.0.1` only. A fresh 128-bit token
//!   from the operating system's random source is printed once in the URL; presenting it sets an
//!   `HttpOnly; SameSite=Strict` cookie (`clawsmith_web_PORT`: browsers keep cookies per host, so
//!   servers on other ports keep theirs) and redirects to the same page without it (the token
//!   leaves the address bar and history). Every request without the token or the cookie is `401`;
//!   a `Host` other than `127.0.0.1:PORT` or `localhost:PORT` is refused (`403 foreign_host`) so a
//!   DNS-rebinding page cannot reach the API; every state-changing request is a `POST` carrying
//!   the CSRF token (`X-CSRF-Token`), which is derived from the cookie's token (SHA-256) and
//!   handed only to pages that already hold the cookie. Secrets are compared in constant time.
//!   Responses carry a Content-Security-Policy without inline scripts or styles, `nosniff`,
//!   `no-referrer`, `frame-ancestors 'none'`; no CORS headers are ever sent.
//! - **Everything from the store's public API.** Sessions, event pages, checkpoints, change lists,
//!   diffs, artifacts, [`clawsmith_checkpoint::Store::undo_preview`] and
//!   [`clawsmith_checkpoint::Store::undo`]; the store is synchronous, so each read runs on
//!   tokio's blocking pool. Undo takes the session's lease like `clawsmith undo` (a running
//!   `clawsmith turn` makes it `409 session_in_use`) and writes only in the workspace the server
//!   was started with, never where a row says.
//! - **Pages are a shell, data is JSON.** Every page is the same small HTML document; `app.js`
//!   renders from the same `/api/` the tests and scripts read (no second rendering to drift).
//!   Events come in pages of at most [`MAX_PAGE`] (a long session opens at its first page) and
//!   live updates are server-sent events from the last sequence the page holds; the server polls
//!   the store's last sequence (one index lookup) every [`LIVE_POLL`].
//! - **Offline.** HTML, CSS and JS are embedded with `include_str!`; no CDN, no build step.
//!
//! ## What it does not do
//! It runs no tools and starts no turns; it never serves a file of the workspace (only what the
//! store recorded); it does not listen on any other interface, and there is no setting for one.

mod api;
mod pages;
mod security;

use std::net::{Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use clawsmith_checkpoint::Store;

/// The most events one page of the timeline (and of `/api/.../events`) holds.
pub const MAX_PAGE: u64 = 500;

/// How often a live view asks the store whether its session grew.
pub const LIVE_POLL: Duration = Duration::from_millis(250);

/// The cookie the token sets is `clawsmith_web_PORT`: browsers keep cookies per host, not per
/// port, so two servers on one machine must not overwrite each other's.
pub const COOKIE_PREFIX: &str = "clawsmith_web_";

/// What [`WebServer::bind`] needs.
#[derive(Debug, Clone)]
pub struct WebConfig {
    /// The state database.
    pub store: Arc<Store>,
    /// The port on 127.0.0.1 (0 = any free port).
    pub port: u16,
    /// The workspace undo may write in (canonical); `None` = undo refused everywhere.
    pub undo_workspace: Option<PathBuf>,
}

/// A bound, not yet serving, web view.
#[derive(Debug)]
pub struct WebServer {
    listener: tokio::net::TcpListener,
    state: Arc<AppState>,
}

/// What every handler sees.
#[derive(Debug)]
pub(crate) struct AppState {
    pub(crate) store: Arc<Store>,
    pub(crate) port: u16,
    pub(crate) token: String,
    pub(crate) csrf: String,
    pub(crate) undo_workspace: Option<PathBuf>,
}

impl WebServer {
    /// Binds `127.0.0.1:port` and draws a fresh token.
    pub async fn bind(config: WebConfig) -> std::io::Result<WebServer> {
        let listener =
            tokio::net::TcpListener::bind(SocketAddr::from((Ipv4Addr::LOCALHOST, config.port)))
                .await?;
        let port = listener.local_addr()?.port();
        let token = security::new_token()?;
        let csrf = security::csrf_for(&token);
        Ok(WebServer {
            listener,
            state: Arc::new(AppState {
                store: config.store,
                port,
                token,
                csrf,
                undo_workspace: config.undo_workspace,
            }),
        })
    }

    /// The bound address (always 127.0.0.1).
    pub fn local_addr(&self) -> SocketAddr {
        SocketAddr::from((Ipv4Addr::LOCALHOST, self.state.port))
    }

    /// `http://127.0.0.1:PORT/?token=…`: the URL that lets a browser in.
    pub fn url(&self) -> String {
        format!(
            "http://127.0.0.1:{}/?token={}",
            self.state.port, self.state.token
        )
    }

    /// Serves until the returned future is dropped or the listener fails.
    pub async fn serve(self) -> std::io::Result<()> {
        let router = api::router()
            .merge(pages::router())
            .layer(axum::middleware::from_fn_with_state(
                self.state.clone(),
                security::guard,
            ))
            .with_state(self.state);
        axum::serve(self.listener, router).await
    }
}
