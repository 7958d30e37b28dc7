//! # clawsmith-web
//!
//! `clawsmith web`: a local web view of the session store — sessions, their timelines (turns,
//! model requests with their evidence, every tool call rendered by its display kind), each turn's
//! checkpoint with diffs on demand, and undo with a preview of its precheck — for a person
//! reviewing what an agent did on their own machine.
//!
//! ## Main types
//! - [`WebServer`]: bound by [`WebServer::bind`] from a [`WebConfig`] (the store, the port, the
//!   [`UndoWorkspace`]); [`WebServer::url`] is the one URL that lets a browser in;
//!   [`WebServer::serve`] runs until the future is dropped.
//! - `security.rs`: the guard every request passes (Host, Origin, the prefix, token or cookie,
//!   CSRF on POST, the response headers); `api.rs`: the JSON API under `/s/<hex>/api/`;
//!   `pages.rs`: the HTML shell and the embedded assets (`assets/`); `summary.rs`: what the
//!   session list names a session by (its first request or first tool call, turns, changes,
//!   last activity), from a few indexed reads of the store per session.
//!
//! ## Decisions
//! - **A credential no other local server can borrow.** The server binds `127.0.0.1` only.
//!   Browsers keep cookies per host, not per port, and treat every port of `127.0.0.1` as the
//!   same site (so `SameSite` does not separate them): a cookie scoped to `/` would be sent to a
//!   dev server or any other process listening on another port, which could then read `/api/`
//!   and post an undo. So each instance draws three independent 128-bit secrets from the
//!   operating system's random source:
//!   - the **prefix** (`/s/<hex>/`): every page, asset and `/api/` route lives under it, and a
//!     request outside it is `404 not_found` and never sets a cookie. It is what the address bar
//!     shows; no page links outside it and `Referrer-Policy: no-referrer` keeps it from leaking
//!     to another site through a link.
//!   - the **login token**, printed once in the URL (`/s/<hex>/?token=…`). Presenting it sets
//!     the cookie [`COOKIE_NAME`] with `Path=/s/<hex>/; HttpOnly; SameSite=Strict` and redirects
//!     to the same page without it (the token leaves the address bar and history). The browser
//!     sends that cookie only to URLs under the prefix, which another server neither knows nor
//!     can learn from the browser, and no script can read it. Every request under the prefix
//!     without the cookie is `401 unauthorized`.
//!   - the **CSRF secret**: drawn on its own (nothing derives it from the token or the
//!     cookie), handed only to pages served with the cookie (a `<meta>` a page of another
//!     origin cannot read: no CORS headers are ever sent), and required as `X-CSRF-Token` on
//!     every state-changing request (a `POST`: undo and its preview). Other methods are `405`.
//!
//!   Secrets are compared in constant time. A `Host` other than `127.0.0.1:PORT` or
//!   `localhost:PORT` is refused (`403 foreign_host`) so a DNS-rebinding page cannot reach the
//!   API, and so is a request whose `Origin` is not this server (`403 foreign_origin`). The
//!   redirect after login never leaves the prefix: its target is the prefix plus the requested
//!   page when that is one of ours, else the prefix alone (no open redirect). Responses carry a
//!   Content-Security-Policy without inline scripts or styles, `nosniff`, `no-referrer`,
//!   `frame-ancestors 'none'`.
//!
//!   The alternative, a token kept by the page in `sessionStorage` and sent as a header, holds
//!   no ambient credential at all, but `EventSource` (the live timeline) cannot send a header
//!   and every new tab would need the token again; the prefix keeps plain links and the
//!   browser's own navigation working. What it assumes: the prefix is as private as the
//!   address bar. A local server that learned it (from a screenshot, say) could have the
//!   browser open the same path on its own port, and the browser would send it the cookie.
//! - **Any directory, one workspace for undo.** The server reads the whole store; the workspace
//!   it is given ([`UndoWorkspace`]) matters only to undo. Every page says where an undo would
//!   write, or why undo is off.
//! - **Everything from the store's traits.** The server is given an `Arc<dyn SessionStore>`
//!   (`clawsmith-store`): this machine's SQLite file or a fleet's PostgreSQL database, read the
//!   same way. Sessions, event pages, checkpoints, change lists, diffs, artifacts, and undo with
//!   its preview through [`clawsmith_store::SessionStore::undo_store`]; a store that cannot undo
//!   says why, and every page shows that as the reason undo is off (`undo_unsupported`). The
//!   store is synchronous, so each read runs on tokio's blocking pool. Undo takes the session's
//!   lease like `clawsmith undo` (a running `clawsmith turn` makes it `409 session_in_use`) and
//!   writes only in the workspace the server was started with, never where a row says.
//! - **Pages are a shell, data is JSON.** Every page is the same small HTML document; `app.js`
//!   renders from the same `/api/` the tests and scripts read (no second rendering to drift).
//!   Events come in pages of at most [`MAX_PAGE`] (a long session opens at its first page) and
//!   live updates are server-sent events from the last sequence the page holds.
//! - **Told of commits when the store can tell.** A store that follows commits
//!   ([`clawsmith_store::SessionStore::follow_events`]: PostgreSQL's `LISTEN`, so a session
//!   another host is writing counts) is followed by one thread for the whole server, which wakes
//!   the timelines whose session grew; they still read the last sequence every
//!   [`FOLLOWED_RECHECK`], and every [`LIVE_POLL`] while the follower reconnects (then all read
//!   again, since commits made meanwhile were not heard). A SQLite file tells no one, so its
//!   timelines read the last sequence (one index lookup) every [`LIVE_POLL`]. `/api/server` says
//!   which store is read and whether timelines are told (`follows`).
//! - **Offline.** HTML, CSS and JS are embedded with `include_str!`; no CDN, no build step.
//!
//! ## What it does not do
//! It runs no tools and starts no turns; it never serves a file of the workspace (only what the
//! store recorded); it does not listen on any other interface, and there is no setting for one.

mod api;
mod live;
mod pages;
mod security;
mod summary;

use std::net::{Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use axum::http::StatusCode;
use clawsmith_store::SessionStore;

pub use live::FOLLOWED_RECHECK;

/// The most events one page of the timeline (and of `/api/.../events`) holds.
pub const MAX_PAGE: u64 = 500;

/// How often a live view asks the store whether its session grew, when the store does not tell
/// of commits (or its follower is reconnecting).
pub const LIVE_POLL: Duration = Duration::from_millis(250);

/// The cookie the login token sets, scoped to the instance's prefix (`Path=/s/<hex>/`).
pub const COOKIE_NAME: &str = "clawsmith_web";

/// What [`WebServer::bind`] needs.
#[derive(Debug, Clone)]
pub struct WebConfig {
    /// The session store: this machine's SQLite file or a fleet's PostgreSQL database.
    pub store: Arc<dyn SessionStore>,
    /// The port on 127.0.0.1 (0 = any free port).
    pub port: u16,
    /// Where undo may write, or why it is off.
    pub undo: UndoWorkspace,
}

/// The one workspace undo may write in (sessions of other workspaces are shown, and their undo
/// is refused), or the reason undo is off, which every page shows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UndoWorkspace {
    /// Undo writes here only (canonical).
    In(PathBuf),
    /// Undo is refused everywhere, for this reason (a sentence a person reads).
    Off(String),
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
    pub(crate) store: Arc<dyn SessionStore>,
    /// The store's follower, when it tells of commits.
    pub(crate) feed: Option<live::Feed>,
    pub(crate) port: u16,
    /// `/s/<hex>/`: where every page and route lives.
    pub(crate) prefix: String,
    /// The login token, and the cookie's value.
    pub(crate) token: String,
    /// The CSRF secret, independent of the token.
    pub(crate) csrf: String,
    pub(crate) undo: UndoWorkspace,
}

impl WebServer {
    /// Binds `127.0.0.1:port` and draws fresh secrets (prefix, login token, CSRF secret).
    pub async fn bind(config: WebConfig) -> std::io::Result<WebServer> {
        let listener =
            tokio::net::TcpListener::bind(SocketAddr::from((Ipv4Addr::LOCALHOST, config.port)))
                .await?;
        let port = listener.local_addr()?.port();
        let feed = live::Feed::start(config.store.clone())?;
        Ok(WebServer {
            listener,
            state: Arc::new(AppState {
                store: config.store,
                feed,
                port,
                prefix: format!("/s/{}/", security::new_secret()?),
                token: security::new_secret()?,
                csrf: security::new_secret()?,
                undo: config.undo,
            }),
        })
    }

    /// The bound address (always 127.0.0.1).
    pub fn local_addr(&self) -> SocketAddr {
        SocketAddr::from((Ipv4Addr::LOCALHOST, self.state.port))
    }

    /// `http://127.0.0.1:PORT/s/<hex>/?token=…`: the URL that lets a browser in.
    pub fn url(&self) -> String {
        format!(
            "http://127.0.0.1:{}{}?token={}",
            self.state.port, self.state.prefix, self.state.token
        )
    }

    /// Serves until the returned future is dropped or the listener fails.
    pub async fn serve(self) -> std::io::Result<()> {
        let prefix = self.state.prefix.clone();
        let router = api::router(&prefix)
            .merge(pages::router(&prefix))
            // Inside the prefix and past the guard: a page or route that does not exist.
            .fallback(|| async {
                api::error(
                    StatusCode::NOT_FOUND,
                    "not_found",
                    "no such page or API route",
                )
            })
            .layer(axum::middleware::from_fn_with_state(
                self.state.clone(),
                security::guard,
            ))
            .with_state(self.state);
        axum::serve(self.listener, router).await
    }
}
