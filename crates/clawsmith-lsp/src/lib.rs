//! # clawsmith-lsp
//!
//! Code intelligence from real language servers (A9, A10): six read-only, deferred tools —
//! `lsp_diagnostics`, `lsp_definition`, `lsp_references`, `lsp_hover`, `lsp_document_symbols`
//! and `lsp_workspace_symbols` — that answer from a language server for the exact content on
//! disk, within a deadline. They are hidden from the model until `search_tools` finds them by the
//! words a model uses ("type errors", "compile errors", "go to definition", "find usages",
//! "outline").
//!
//! ## Main types
//! - [`LspConfig`]: the `[[lsp_servers]]` part of `clawsmith.toml` ([`LspServerConfig`]: name,
//!   command, args, extensions, root markers, initialization options, settings, env, timeouts,
//!   `max_restarts`), plus [`LspConfig::with_defaults_on_path`]: the usual servers (`pylsp`,
//!   `pyright-langserver`, `basedpyright-langserver`, `typescript-language-server`, `clangd`,
//!   `rust-analyzer`, `gopls`, `bash-language-server`) for the languages the file does not
//!   configure, when found on `PATH` — looked up at the first `lsp_*` call when the service
//!   is given the `PATH` ([`LspService::with_defaults_on_path`]), not at every start.
//! - [`LspService`]: owns the running servers of one workspace — one per (server, project root)
//!   — started lazily, restarted after a crash, stopped when idle or when the service is shut
//!   down ([`LspService::shutdown`]) or dropped.
//! - [`lsp_tools`]: the six tools over a shared service.
//!
//! ## Decisions
//! - **The content on disk is the truth.** Documents are read through `clawsmith-fs`'s
//!   [`Workspace`](clawsmith_fs::Workspace) (the race-free boundary every file tool uses) and sent
//!   with a version; at each call every open document's SHA-256 is compared with what the server
//!   last got, and a changed file is re-sent whole (`didChange`, full text, next version), a
//!   vanished one closed. An `edit_file` or a command in between is therefore seen by the next
//!   call, whoever made it.
//! - **Diagnostics of the version sent, never after a fixed sleep.** A server that offers pull
//!   diagnostics is asked (`textDocument/diagnostic`); otherwise the call waits for the
//!   `publishDiagnostics` of the document version it sent (or, from a server that does not echo
//!   versions, such as pylsp, the first one that arrives after the content was sent), under the
//!   request deadline.
//! - **Positions a model can use.** Lines and columns are 1-based characters in and out; they are
//!   converted to the position encoding negotiated in `initialize` (UTF-8 when the server offers
//!   it, else UTF-16), using the line's text. Results name workspace-relative `path:line:column`
//!   with the source line; a location outside the workspace (a standard library) is marked as such
//!   and its column is the server's, plus one (its text is not read: only the workspace is).
//! - **Bounded everything.** Message frames (headers and a 64 MiB body cap), stderr (the last
//!   64 KiB, kept to explain a crash), results (200 diagnostics per file, 200 locations, 500
//!   symbols, 8 KiB of hover text, with the number left out), documents (4 MiB), requests (each
//!   with a deadline: code `timeout`).
//! - **Confined servers.** Servers run through `clawsmith-sandbox` ([`spawn_piped_argv`]: their
//!   program and arguments as words, never joined into shell text) in their project root, with
//!   the workspace bound read-only (`workspace_writable = false`), a private writable cache
//!   directory (also their `HOME` and `XDG_CACHE_HOME`), and no network; the disaster check
//!   sees the command line like any other.
//! - **Crash ⇒ restart, within limits.** A server that exits unasked is started again on the
//!   next call after a backoff (200 ms doubling, at most 5 s) — a call whose server died under it
//!   is retried once on the new one — up to `max_restarts`; then calls fail with `tool_failed`
//!   naming the server and the tail of its stderr. An idle server (10 minutes by default) is shut
//!   down and started again when needed, which does not count as a restart.
//!
//! ## What it does not do
//! No completion, rename, code actions or formatting (they edit; edits go through `edit_file`).
//! It never writes the workspace and never reads outside it. Workspace symbols are asked of the
//! servers already running (servers start when a file of their language is first used). Language
//! servers that need a build (clangd's `compile_commands.json`, a Cargo project for
//! rust-analyzer) get the workspace as it is.
//!
//! [`spawn_piped_argv`]: clawsmith_sandbox::spawn_piped_argv

mod config;
mod error;
mod framing;
mod position;
mod render;
mod server;
mod service;
mod tools;

pub use config::{
    DEFAULT_MAX_RESTARTS, DEFAULT_REQUEST_TIMEOUT_MS, DEFAULT_STARTUP_TIMEOUT_MS, LspConfig,
    LspServerConfig, default_servers,
};
pub use error::LspError;
pub use framing::{MAX_MESSAGE_BYTES, read_message, write_message};
pub use position::PositionEncoding;
pub use service::{LspService, ServiceOptions};
pub use tools::{LSP_TOOL_NAMES, LineColumnInput, PathInput, QueryInput, lsp_tools};
