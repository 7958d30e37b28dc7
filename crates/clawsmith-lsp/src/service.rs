//! The running servers of one workspace, and the six operations the tools expose.

use std::collections::HashMap;
use std::future::Future;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use clawsmith_fs::{FsError, HiddenPaths, Workspace, WorkspacePath};
use clawsmith_sandbox::SandboxConfig;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::config::{LspConfig, LspServerConfig};
use crate::error::LspError;
use crate::position;
use crate::render::{self, Located};
use crate::server::{Exit, Launch, OpenDocument, Server, path_to_uri, uri_to_path};

/// Tunables of the service.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServiceOptions {
    /// A server unused this long is shut down (default 10 minutes); the next call starts it
    /// again (not counted as a restart).
    pub idle_timeout: Duration,
    /// Largest document sent to a server (default 4 MiB).
    pub max_document_bytes: u64,
}

impl Default for ServiceOptions {
    fn default() -> ServiceOptions {
        ServiceOptions {
            idle_timeout: Duration::from_secs(600),
            max_document_bytes: 4 * 1024 * 1024,
        }
    }
}

/// One server instance as seen from outside (for status displays and tests).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerStatus {
    /// The configured name.
    pub name: String,
    /// Its project root, relative to the workspace (`.` for the root).
    pub root: String,
    /// Whether a process is running now.
    pub running: bool,
    /// Crashes so far (restarts happen while this is at most `max_restarts`).
    pub crashes: u32,
}

/// Owns the language servers of one workspace; shared by the six tools through an `Arc`.
/// Dropping it stops every server (`exit`, then the process tree is killed after a grace).
pub struct LspService {
    config: LspConfig,
    /// `Some(PATH)` when [`LspService::with_defaults_on_path`] asked for the usual servers: they
    /// are looked up on first use (a search of every `PATH` entry for each: ~80 `stat` calls a
    /// process that most often never calls an `lsp_*` tool).
    defaults_path: Option<Option<std::ffi::OsString>>,
    resolved: std::sync::OnceLock<LspConfig>,
    workspace: Workspace,
    root: PathBuf,
    sandbox: SandboxConfig,
    cache_dir: PathBuf,
    options: ServiceOptions,
    slots: Mutex<HashMap<(String, PathBuf), SharedSlot>>,
    shut_down: AtomicBool,
}

impl std::fmt::Debug for LspService {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("LspService")
            .field("root", &self.root)
            .field("configured", &self.config.lsp_servers.len())
            .finish_non_exhaustive()
    }
}

/// One server instance's slot, locked while it is (re)started.
type SharedSlot = Arc<tokio::sync::Mutex<Slot>>;

/// A workspace symbol as answered: kind, name, container, location.
type FoundSymbol = (
    String,
    String,
    String,
    Option<(String, lsp_types::Position)>,
);

#[derive(Default)]
struct Slot {
    server: Option<Arc<Server>>,
    crashes: u32,
    last_stderr: String,
}

/// The LSP `languageId` of a file extension.
fn language_id(extension: &str) -> &str {
    match extension {
        "py" | "pyi" => "python",
        "c" | "h" => "c",
        "cc" | "cpp" | "cxx" | "hpp" | "hh" | "hxx" => "cpp",
        "ts" | "mts" | "cts" => "typescript",
        "tsx" => "typescriptreact",
        "js" | "mjs" | "cjs" => "javascript",
        "jsx" => "javascriptreact",
        "rs" => "rust",
        "go" => "go",
        "sh" | "bash" => "shellscript",
        other => other,
    }
}

fn extension_of(path: &WorkspacePath) -> Option<&str> {
    path.file_name()?
        .rsplit_once('.')
        .map(|(_, extension)| extension)
        .filter(|extension| !extension.is_empty())
}

impl LspService {
    /// A service for the workspace at `workspace_root`. `sandbox` is the host's command
    /// sandbox; servers get a copy with the workspace read-only, no network, and `cache_dir`
    /// (created, private) as their only writable root besides the private `/tmp`. `cache_dir`
    /// belongs outside the workspace (under the state directory).
    pub fn new(
        config: LspConfig,
        workspace_root: &Path,
        sandbox: SandboxConfig,
        cache_dir: PathBuf,
        options: ServiceOptions,
    ) -> Result<LspService, LspError> {
        let workspace = Workspace::open(workspace_root)?;
        let root = workspace.root().to_path_buf();
        std::fs::create_dir_all(&cache_dir).map_err(|source| LspError::Start {
            server: "(all)".to_owned(),
            message: format!(
                "cannot create the cache directory {}: {source}",
                cache_dir.display()
            ),
            code: clawsmith_protocol::ErrorCode::TOOL_FAILED,
        })?;
        {
            use std::os::unix::fs::PermissionsExt;
            let _ = std::fs::set_permissions(&cache_dir, std::fs::Permissions::from_mode(0o700));
        }
        let mut sandbox = sandbox;
        sandbox.workspace_root = root.clone();
        sandbox.workspace_writable = false;
        sandbox.network_allowed = false;
        sandbox.extra_writable_roots = vec![cache_dir.clone()];
        Ok(LspService {
            config,
            defaults_path: None,
            resolved: std::sync::OnceLock::new(),
            workspace,
            root,
            sandbox,
            cache_dir,
            options,
            slots: Mutex::new(HashMap::new()),
            shut_down: AtomicBool::new(false),
        })
    }

    /// Documents are read through a handle enforcing `hidden` (the workspace's `hidden_paths`):
    /// a hidden file is never sent to a server, whatever name reaches it. (The servers
    /// themselves run sandboxed; their view hides what the sandbox configuration hides.)
    pub fn with_hidden(mut self, hidden: Arc<HiddenPaths>) -> LspService {
        self.workspace = self.workspace.with_hidden(hidden);
        self
    }

    /// Adds, on first use, the usual servers found on `path_env` (a `PATH` value) for the
    /// extensions the configuration leaves open ([`LspConfig::with_defaults_on_path`]).
    pub fn with_defaults_on_path(mut self, path_env: Option<std::ffi::OsString>) -> LspService {
        self.defaults_path = Some(path_env);
        self
    }

    /// The configuration in use (with the usual servers on `PATH`, when asked for, looked up at
    /// the first call).
    pub fn config(&self) -> &LspConfig {
        self.resolved.get_or_init(|| match &self.defaults_path {
            Some(path_env) => self
                .config
                .clone()
                .with_defaults_on_path(path_env.as_deref()),
            None => self.config.clone(),
        })
    }

    /// Every server instance started so far.
    pub async fn servers(&self) -> Vec<ServerStatus> {
        let slots: Vec<_> = self
            .slots
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .map(|(key, slot)| (key.clone(), Arc::clone(slot)))
            .collect();
        let mut statuses = Vec::new();
        for ((name, root), slot) in slots {
            let slot = slot.lock().await;
            statuses.push(ServerStatus {
                name,
                root: self
                    .relative(&root)
                    .unwrap_or_else(|| root.display().to_string()),
                running: slot.server.as_ref().is_some_and(|s| s.exit().is_none()),
                crashes: slot.crashes,
            });
        }
        statuses.sort_by(|a, b| (&a.name, &a.root).cmp(&(&b.name, &b.root)));
        statuses
    }

    /// `shutdown` and `exit` to every server; later calls fail.
    pub async fn shutdown(&self) {
        self.shut_down.store(true, Ordering::SeqCst);
        let slots: Vec<_> = self
            .slots
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .values()
            .cloned()
            .collect();
        for slot in slots {
            let mut slot = slot.lock().await;
            if let Some(server) = slot.server.take() {
                server.shutdown().await;
            }
        }
    }

    /// Diagnostics of `path` for its content on disk now.
    pub async fn diagnostics(&self, path: &str) -> Result<String, LspError> {
        let path = &self.workspace.resolve(path)?;
        self.with_server(path, |server| async move {
            let document = self.sync(&server, path).await?;
            let timeout = server.config.request_timeout();
            let items = if server.offers("diagnosticProvider") {
                let report = server
                    .call(
                        "textDocument/diagnostic",
                        json!({"textDocument": {"uri": document.uri}}),
                        timeout,
                        "textDocument/diagnostic",
                    )
                    .await?;
                let items = report.get("items").cloned().unwrap_or(json!([]));
                parse::<Vec<lsp_types::Diagnostic>>(&server, "textDocument/diagnostic", items)?
            } else {
                let version = document.version;
                let mark = document.sent_after_arrival;
                server
                    .wait_for_published(
                        &document.uri,
                        |published| match published.version {
                            Some(published) => published == version,
                            None => published.arrival > mark,
                        },
                        timeout,
                        &format!("diagnostics of {} (version {version})", path.display()),
                    )
                    .await?
                    .items
            };
            let mut answer = render::diagnostics(
                path.display(),
                &document,
                items,
                server.encoding,
                server.name(),
            );
            for limitation in server.limitations() {
                answer.push_str(&format!("\n[{limitation}]"));
            }
            Ok(answer)
        })
        .await
    }

    /// Where the symbol at `line:column` (1-based characters) of `path` is defined.
    pub async fn definition(&self, path: &str, line: u32, column: u32) -> Result<String, LspError> {
        self.at_position(
            path,
            line,
            column,
            "textDocument/definition",
            |service, server, answer| {
                let response: Option<lsp_types::GotoDefinitionResponse> =
                    parse(server, "textDocument/definition", answer)?;
                let locations: Vec<(String, lsp_types::Position)> = match response {
                    None => Vec::new(),
                    Some(lsp_types::GotoDefinitionResponse::Scalar(location)) => {
                        vec![(location.uri.to_string(), location.range.start)]
                    }
                    Some(lsp_types::GotoDefinitionResponse::Array(locations)) => locations
                        .into_iter()
                        .map(|l| (l.uri.to_string(), l.range.start))
                        .collect(),
                    Some(lsp_types::GotoDefinitionResponse::Link(links)) => links
                        .into_iter()
                        .map(|l| (l.target_uri.to_string(), l.target_selection_range.start))
                        .collect(),
                };
                Ok(render::locations(
                    "definition",
                    &service.locate_all(server, locations),
                ))
            },
        )
        .await
    }

    /// Every use of the symbol at `line:column` of `path` (declaration included).
    pub async fn references(&self, path: &str, line: u32, column: u32) -> Result<String, LspError> {
        self.at_position(
            path,
            line,
            column,
            "textDocument/references",
            |service, server, answer| {
                let locations: Option<Vec<lsp_types::Location>> =
                    parse(server, "textDocument/references", answer)?;
                let locations = locations
                    .unwrap_or_default()
                    .into_iter()
                    .map(|l| (l.uri.to_string(), l.range.start))
                    .collect();
                Ok(render::locations(
                    "reference",
                    &service.locate_all(server, locations),
                ))
            },
        )
        .await
    }

    /// Type and documentation of the symbol at `line:column` of `path`.
    pub async fn hover(&self, path: &str, line: u32, column: u32) -> Result<String, LspError> {
        self.at_position(
            path,
            line,
            column,
            "textDocument/hover",
            |_, server, answer| {
                let hover: Option<lsp_types::Hover> = parse(server, "textDocument/hover", answer)?;
                Ok(render::hover(hover))
            },
        )
        .await
    }

    /// The outline of `path`: its symbols, nested.
    pub async fn document_symbols(&self, path: &str) -> Result<String, LspError> {
        let path = &self.workspace.resolve(path)?;
        self.with_server(path, |server| async move {
            let document = self.sync(&server, path).await?;
            if !server.offers("documentSymbolProvider") {
                return Err(unsupported(&server, "document symbols"));
            }
            let answer = server
                .call(
                    "textDocument/documentSymbol",
                    json!({"textDocument": {"uri": document.uri}}),
                    server.config.request_timeout(),
                    "textDocument/documentSymbol",
                )
                .await?;
            let response: Option<lsp_types::DocumentSymbolResponse> =
                parse(&server, "textDocument/documentSymbol", answer)?;
            Ok(render::document_symbols(
                path.display(),
                &document.text,
                response,
                server.encoding,
            ))
        })
        .await
    }

    /// Symbols matching `query` across the workspace, from every running server that offers it.
    pub async fn workspace_symbols(&self, query: &str) -> Result<String, LspError> {
        self.check_open()?;
        let running: Vec<Arc<Server>> = {
            let slots: Vec<_> = self
                .slots
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .values()
                .cloned()
                .collect();
            let mut running = Vec::new();
            for slot in slots {
                if let Some(server) = &slot.lock().await.server
                    && server.exit().is_none()
                {
                    running.push(Arc::clone(server));
                }
            }
            running
        };
        if running.is_empty() {
            return Err(LspError::NoneRunning);
        }
        let offering: Vec<&Arc<Server>> = running
            .iter()
            .filter(|s| s.offers("workspaceSymbolProvider"))
            .collect();
        if offering.is_empty() {
            let names: Vec<&str> = running.iter().map(|s| s.name()).collect();
            return Err(LspError::Unsupported {
                server: names.join("`, `"),
                feature: "workspace symbols".to_owned(),
            });
        }
        let mut found = Vec::new();
        for server in offering {
            server.touch();
            let answer = server
                .call(
                    "workspace/symbol",
                    json!({"query": query}),
                    server.config.request_timeout(),
                    "workspace/symbol",
                )
                .await?;
            let response: Option<lsp_types::WorkspaceSymbolResponse> =
                parse(server, "workspace/symbol", answer)?;
            let symbols: Vec<FoundSymbol> = match response {
                None => Vec::new(),
                Some(lsp_types::WorkspaceSymbolResponse::Flat(symbols)) => symbols
                    .into_iter()
                    .map(|s| {
                        (
                            render::kind_name(s.kind),
                            s.name,
                            s.container_name.unwrap_or_default(),
                            Some((s.location.uri.to_string(), s.location.range.start)),
                        )
                    })
                    .collect(),
                Some(lsp_types::WorkspaceSymbolResponse::Nested(symbols)) => symbols
                    .into_iter()
                    .map(|s| {
                        let location = match s.location {
                            lsp_types::OneOf::Left(l) => Some((l.uri.to_string(), l.range.start)),
                            lsp_types::OneOf::Right(l) => {
                                Some((l.uri.to_string(), lsp_types::Position::new(0, 0)))
                            }
                        };
                        (
                            render::kind_name(s.kind),
                            s.name,
                            s.container_name.unwrap_or_default(),
                            location,
                        )
                    })
                    .collect(),
            };
            let locations: Vec<(String, lsp_types::Position)> =
                symbols.iter().filter_map(|s| s.3.clone()).collect();
            let mut located = self.locate_all(server, locations).into_iter();
            for (kind, name, container, location) in symbols {
                let place = location.and_then(|_| located.next());
                found.push(render::WorkspaceSymbol {
                    kind,
                    name,
                    container,
                    place,
                });
            }
        }
        Ok(render::workspace_symbols(query, &found))
    }

    fn check_open(&self) -> Result<(), LspError> {
        if self.shut_down.load(Ordering::SeqCst) {
            Err(LspError::ShutDown)
        } else {
            Ok(())
        }
    }

    /// A request at a 1-based position of `path`, its answer rendered by `render_answer`.
    async fn at_position(
        &self,
        path: &str,
        line: u32,
        column: u32,
        method: &'static str,
        render_answer: impl Fn(&LspService, &Server, Value) -> Result<String, LspError>,
    ) -> Result<String, LspError> {
        let path = &self.workspace.resolve(path)?;
        let render_answer = &render_answer;
        self.with_server(path, |server| async move {
            let document = self.sync(&server, path).await?;
            let provider = match method {
                "textDocument/definition" => "definitionProvider",
                "textDocument/references" => "referencesProvider",
                _ => "hoverProvider",
            };
            if !server.offers(provider) {
                return Err(unsupported(&server, method));
            }
            let position = position::to_lsp(&document.text, line, column, server.encoding)
                .ok_or_else(|| LspError::BadLine {
                    path: path.display().to_owned(),
                    lines: position::lines(&document.text).len(),
                    line,
                })?;
            let mut params = json!({
                "textDocument": {"uri": document.uri},
                "position": {"line": position.line, "character": position.character},
            });
            if method == "textDocument/references" {
                params["context"] = json!({"includeDeclaration": true});
            }
            let answer = server
                .call(method, params, server.config.request_timeout(), method)
                .await?;
            let text = render_answer(self, &server, answer)?;
            Ok(format!("{}:{line}:{column}: {text}", path.display()))
        })
        .await
    }

    /// Runs `operation` on the server of `path`; a call whose server crashed under it is retried
    /// once on the restarted server.
    async fn with_server<'s, T, F, Fut>(
        &'s self,
        path: &WorkspacePath,
        operation: F,
    ) -> Result<T, LspError>
    where
        F: Fn(Arc<Server>) -> Fut,
        Fut: Future<Output = Result<T, LspError>> + 's,
    {
        let server = self.server_for(path).await?;
        server.touch();
        let result = operation(Arc::clone(&server)).await;
        server.touch();
        match result {
            Err(LspError::Exited { .. }) if matches!(server.exit(), Some(Exit::Crashed(_))) => {
                let server = self.server_for(path).await?;
                let result = operation(Arc::clone(&server)).await;
                server.touch();
                result
            }
            other => other,
        }
    }

    /// The running server for `path`, started (or restarted after a crash) if needed.
    async fn server_for(&self, path: &WorkspacePath) -> Result<Arc<Server>, LspError> {
        self.check_open()?;
        let extension = extension_of(path).ok_or_else(|| LspError::NoExtension {
            path: path.display().to_owned(),
        })?;
        let config = self
            .config()
            .server_for(extension)
            .ok_or_else(|| LspError::NoServer {
                language: language_id(extension).to_owned(),
                extension: extension.to_owned(),
            })?;
        let root = self.project_root(path, config);
        let slot = Arc::clone(
            self.slots
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .entry((config.name.clone(), root.clone()))
                .or_default(),
        );
        let mut slot = slot.lock().await;
        if let Some(server) = slot.server.clone() {
            match server.exit() {
                None => return Ok(server),
                Some(Exit::Stopped) => {}
                Some(Exit::Crashed(how)) => {
                    slot.crashes += 1;
                    slot.last_stderr = server.stderr_tail();
                    tracing::warn!(server = %config.name, %how, "language server crashed");
                }
            }
            slot.server = None;
        }
        if slot.crashes > config.max_restarts {
            return Err(LspError::GaveUp {
                server: config.name.clone(),
                crashes: slot.crashes,
                max_restarts: config.max_restarts,
                stderr: slot.last_stderr.clone(),
            });
        }
        if slot.crashes > 0 {
            let backoff = Duration::from_millis(200 << (slot.crashes - 1).min(5));
            tokio::time::sleep(backoff.min(Duration::from_secs(5))).await;
        }
        let cache = self.cache_dir.join(&config.name);
        std::fs::create_dir_all(&cache).map_err(|source| LspError::Start {
            server: config.name.clone(),
            message: format!(
                "cannot create its cache directory {}: {source}",
                cache.display()
            ),
            code: clawsmith_protocol::ErrorCode::TOOL_FAILED,
        })?;
        let started = Server::start(Launch {
            config,
            sandbox: &self.sandbox,
            root: &root,
            cache: &cache,
        })
        .await;
        let server = match started {
            Ok(server) => server,
            Err(error) => {
                // A server that dies or hangs while starting counts as a crash.
                if let LspError::Exited { stderr, .. } = &error {
                    slot.crashes += 1;
                    slot.last_stderr = stderr.clone();
                } else if matches!(error, LspError::Timeout { .. }) {
                    slot.crashes += 1;
                }
                return Err(error);
            }
        };
        tracing::info!(server = %config.name, root = %root.display(), sandbox = %server.sandbox_summary, "language server started");
        spawn_idle_watch(Arc::downgrade(&server), self.options.idle_timeout);
        slot.server = Some(Arc::clone(&server));
        Ok(server)
    }

    /// The nearest folder above `path` (inside the workspace) holding one of the server's root
    /// markers; the workspace root when none does.
    fn project_root(&self, path: &WorkspacePath, config: &LspServerConfig) -> PathBuf {
        if config.root_markers.is_empty() {
            return self.root.clone();
        }
        let mut folder = path.parent_str().unwrap_or("").to_owned();
        loop {
            for marker in &config.root_markers {
                let candidate = if folder.is_empty() {
                    marker.clone()
                } else {
                    format!("{folder}/{marker}")
                };
                if let Ok(candidate) = self.workspace.resolve(&candidate)
                    && (self.workspace.open_for_read(&candidate).is_ok()
                        || self.workspace.check_directory(&candidate).is_ok())
                {
                    return if folder.is_empty() {
                        self.root.clone()
                    } else {
                        self.root.join(&folder)
                    };
                }
            }
            match folder.rsplit_once('/') {
                Some((parent, _)) => folder = parent.to_owned(),
                None if !folder.is_empty() => folder.clear(),
                None => return self.root.clone(),
            }
        }
    }

    /// Brings the server's view of every open document up to date with the disk, then opens
    /// (or re-sends) `path`; returns what the server now has of `path`.
    async fn sync(&self, server: &Server, path: &WorkspacePath) -> Result<OpenDocument, LspError> {
        let mut documents = server.documents.lock().await;
        let open: Vec<String> = documents.keys().cloned().collect();
        for relative in open {
            if relative == path.as_str() {
                continue;
            }
            let current = self
                .workspace
                .resolve(&relative)
                .ok()
                .and_then(|p| self.read_text(&p).ok());
            match current {
                Some((text, sha256)) => {
                    if let Some(document) = documents.get_mut(&relative)
                        && document.sha256 != sha256
                    {
                        send_change(server, document, text, sha256);
                    }
                }
                None => {
                    if let Some(document) = documents.remove(&relative) {
                        server.notify(
                            "textDocument/didClose",
                            json!({"textDocument": {"uri": document.uri}}),
                        );
                    }
                }
            }
        }
        let (text, sha256) = self.read_text(path)?;
        match documents.get_mut(path.as_str()) {
            Some(document) => {
                if document.sha256 != sha256 {
                    send_change(server, document, text, sha256);
                }
                Ok(document.clone())
            }
            None => {
                let uri = path_to_uri(&self.root.join(path.as_str()));
                let language = extension_of(path).map(language_id).unwrap_or("plaintext");
                let document = OpenDocument {
                    uri: uri.clone(),
                    version: 1,
                    sha256,
                    text: Arc::from(text),
                    sent_after_arrival: server.arrivals(),
                };
                server.notify(
                    "textDocument/didOpen",
                    json!({"textDocument": {
                        "uri": uri, "languageId": language, "version": 1, "text": &*document.text
                    }}),
                );
                documents.insert(path.as_str().to_owned(), document.clone());
                Ok(document)
            }
        }
    }

    /// The text of `path` through the workspace boundary (symlinks inside the root followed),
    /// bounded, with its SHA-256.
    fn read_text(&self, path: &WorkspacePath) -> Result<(String, [u8; 32]), LspError> {
        let (file, size) = self.workspace.open_for_read(path)?;
        let limit = self.options.max_document_bytes;
        if size > limit {
            return Err(FsError::TooLarge {
                path: path.display().to_owned(),
                size,
                limit,
            }
            .into());
        }
        let mut bytes = Vec::with_capacity(usize::try_from(size).unwrap_or(0));
        file.take(limit + 1)
            .read_to_end(&mut bytes)
            .map_err(|cause| FsError::Io {
                operation: "read",
                path: path.display().to_owned(),
                cause,
            })?;
        if bytes.len() as u64 > limit {
            return Err(FsError::TooLarge {
                path: path.display().to_owned(),
                size: bytes.len() as u64,
                limit,
            }
            .into());
        }
        let sha256: [u8; 32] = Sha256::digest(&bytes).into();
        let text = String::from_utf8(bytes).map_err(|_| LspError::NotText {
            path: path.display().to_owned(),
        })?;
        Ok((text, sha256))
    }

    fn relative(&self, path: &Path) -> Option<String> {
        let relative = path.strip_prefix(&self.root).ok()?;
        let text = relative.to_str()?;
        Some(if text.is_empty() {
            ".".to_owned()
        } else {
            text.to_owned()
        })
    }

    /// Workspace-relative `path:line:column` and source line of each location; outside the
    /// workspace, the absolute path marked as such.
    fn locate_all(
        &self,
        server: &Server,
        locations: Vec<(String, lsp_types::Position)>,
    ) -> Vec<Located> {
        let mut texts: HashMap<String, Option<String>> = HashMap::new();
        locations
            .into_iter()
            .map(|(uri, start)| {
                let path = uri_to_path(&uri);
                let relative = path.as_deref().and_then(|p| self.relative(p));
                let Some(relative) = relative else {
                    return Located {
                        label: format!(
                            "{}:{}:{}",
                            path.map_or(uri.clone(), |p| p.display().to_string()),
                            start.line + 1,
                            start.character + 1
                        ),
                        source: None,
                        outside: true,
                    };
                };
                let text = texts
                    .entry(relative.clone())
                    .or_insert_with(|| {
                        self.workspace
                            .resolve(&relative)
                            .ok()
                            .and_then(|p| self.read_text(&p).ok())
                            .map(|(text, _)| text)
                    })
                    .as_deref();
                let (line, column) = match text {
                    Some(text) => position::from_lsp(text, start, server.encoding),
                    None => (start.line + 1, start.character + 1),
                };
                let source = text.and_then(|text| {
                    position::lines(text)
                        .get(start.line as usize)
                        .map(|l| l.trim().to_owned())
                });
                Located {
                    label: format!("{relative}:{line}:{column}"),
                    source,
                    outside: false,
                }
            })
            .collect()
    }
}

fn send_change(server: &Server, document: &mut OpenDocument, text: String, sha256: [u8; 32]) {
    document.version += 1;
    document.sha256 = sha256;
    document.text = Arc::from(text);
    document.sent_after_arrival = server.arrivals();
    server.notify(
        "textDocument/didChange",
        json!({
            "textDocument": {"uri": document.uri, "version": document.version},
            "contentChanges": [{"text": &*document.text}],
        }),
    );
}

fn unsupported(server: &Server, feature: &str) -> LspError {
    LspError::Unsupported {
        server: server.name().to_owned(),
        feature: feature.to_owned(),
    }
}

fn parse<T: DeserializeOwned>(server: &Server, what: &str, value: Value) -> Result<T, LspError> {
    serde_json::from_value(value).map_err(|error| LspError::Malformed {
        server: server.name().to_owned(),
        what: what.to_owned(),
        message: error.to_string(),
    })
}

/// Shuts the server down once it has been idle for `idle_timeout`.
fn spawn_idle_watch(server: std::sync::Weak<Server>, idle_timeout: Duration) {
    tokio::spawn(async move {
        loop {
            let Some(strong) = server.upgrade() else {
                return;
            };
            if strong.exit().is_some() {
                return;
            }
            let idle_for = strong.idle_for();
            if idle_for >= idle_timeout {
                tracing::info!(server = %strong.name(), "idle language server shut down");
                strong.shutdown().await;
                return;
            }
            drop(strong);
            tokio::time::sleep(idle_timeout - idle_for).await;
        }
    });
}
