//! One running language server: the confined process, the JSON-RPC connection over its pipes,
//! the documents it was sent and the diagnostics it published.

use std::collections::{HashMap, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use clawsmith_protocol::ErrorCode;
use clawsmith_sandbox::{Argv, PipedIo, SandboxConfig, spawn_piped_argv};
use serde_json::{Value, json};
use tokio::io::AsyncReadExt;
use tokio::sync::{mpsc, oneshot, watch};

use crate::config::LspServerConfig;
use crate::error::LspError;
use crate::framing::{MAX_MESSAGE_BYTES, read_message, write_message};
use crate::position::PositionEncoding;

/// Bytes of a server's stderr kept (the end), to explain a crash.
const STDERR_TAIL_BYTES: usize = 64 * 1024;
/// How long `shutdown` + `exit` may take before the tree is killed.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(2);

/// What a request's waiter gets: the result, or the server's error object.
type Reply = Result<Value, (i64, String)>;

/// How the server ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Exit {
    /// clawsmith stopped it (idle, shutdown, service dropped).
    Stopped,
    /// It exited by itself (a crash), with how.
    Crashed(String),
}

/// A diagnostics notification as received.
#[derive(Debug, Clone)]
pub(crate) struct Published {
    pub(crate) version: Option<i32>,
    /// Its place in the order of all `publishDiagnostics` received (starting at 1).
    pub(crate) arrival: u64,
    pub(crate) items: Vec<lsp_types::Diagnostic>,
}

/// What the server was last sent of one document.
#[derive(Debug, Clone)]
pub(crate) struct OpenDocument {
    pub(crate) uri: String,
    pub(crate) version: i32,
    pub(crate) sha256: [u8; 32],
    pub(crate) text: Arc<str>,
    /// The number of diagnostics notifications received before this version was sent: an
    /// unversioned notification that arrives later is about this version (or a later one).
    pub(crate) sent_after_arrival: u64,
}

/// State the connection's tasks share with the server handle.
struct Shared {
    name: String,
    settings: Option<Value>,
    root_uri: String,
    outgoing: mpsc::UnboundedSender<Value>,
    pending: Mutex<HashMap<i64, oneshot::Sender<Reply>>>,
    diagnostics: Mutex<HashMap<String, Published>>,
    arrivals: AtomicU64,
    /// Bumped at every diagnostics notification.
    diagnostics_changed: watch::Sender<u64>,
    stderr: Mutex<VecDeque<u8>>,
    /// What the server said on stderr that limits its answers (a linter it could not load),
    /// said with every diagnostics answer.
    limitations: Mutex<Vec<&'static str>>,
    exit: watch::Sender<Option<Exit>>,
    stopping: AtomicBool,
}

impl Shared {
    fn stderr_tail(&self) -> String {
        let tail = self.stderr.lock().unwrap_or_else(PoisonError::into_inner);
        let (a, b) = tail.as_slices();
        let mut bytes = a.to_vec();
        bytes.extend_from_slice(b);
        // The last 40 lines are enough to explain a crash.
        let text = String::from_utf8_lossy(&bytes).into_owned();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(40)..].join("\n")
    }

    fn send(&self, message: Value) {
        // A closed channel means the writer is gone: the exit path reports that.
        let _ = self.outgoing.send(message);
    }
}

/// A running (or ended) language server.
pub(crate) struct Server {
    pub(crate) config: LspServerConfig,
    /// The project root it was initialized with (absolute).
    pub(crate) root: PathBuf,
    pub(crate) encoding: PositionEncoding,
    capabilities: Value,
    shared: Arc<Shared>,
    next_id: AtomicI64,
    /// Documents sent, by workspace-relative path. Held across a sync so two calls do not race.
    pub(crate) documents: tokio::sync::Mutex<HashMap<String, OpenDocument>>,
    last_used: Mutex<Instant>,
    /// Dropping it (with the server) tells the waiter to stop the process.
    _stop: oneshot::Sender<()>,
    pub(crate) sandbox_summary: String,
}

impl std::fmt::Debug for Server {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("Server")
            .field("name", &self.config.name)
            .field("root", &self.root)
            .finish_non_exhaustive()
    }
}

/// `file://` URI of an absolute path, percent-encoding all but unreserved bytes and `/`.
pub(crate) fn path_to_uri(path: &Path) -> String {
    use std::os::unix::ffi::OsStrExt;
    let mut uri = String::from("file://");
    for &byte in path.as_os_str().as_bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'/' | b'-' | b'_' | b'.' | b'~') {
            uri.push(byte as char);
        } else {
            uri.push_str(&format!("%{byte:02X}"));
        }
    }
    uri
}

/// The path of a `file://` URI (percent-decoded); `None` for other schemes.
pub(crate) fn uri_to_path(uri: &str) -> Option<PathBuf> {
    use std::os::unix::ffi::OsStringExt;
    let rest = uri.strip_prefix("file://")?;
    // `file://host/path`: only the local host is ours.
    let rest = rest.strip_prefix("localhost").unwrap_or(rest);
    if !rest.starts_with('/') {
        return None;
    }
    let bytes = rest.as_bytes();
    let mut decoded = Vec::with_capacity(bytes.len());
    let mut index = 0;
    while index < bytes.len() {
        if bytes[index] == b'%'
            && let Some(hex) = rest.get(index + 1..index + 3)
            && let Ok(byte) = u8::from_str_radix(hex, 16)
        {
            decoded.push(byte);
            index += 3;
            continue;
        }
        decoded.push(bytes[index]);
        index += 1;
    }
    Some(PathBuf::from(std::ffi::OsString::from_vec(decoded)))
}

/// Where a server is started: its configuration, the sandbox, the roots and its cache.
pub(crate) struct Launch<'a> {
    pub(crate) config: &'a LspServerConfig,
    pub(crate) sandbox: &'a SandboxConfig,
    pub(crate) root: &'a Path,
    pub(crate) cache: &'a Path,
}

impl Server {
    /// Spawns the server confined, then `initialize` / `initialized` under the startup timeout.
    pub(crate) async fn start(launch: Launch<'_>) -> Result<Arc<Server>, LspError> {
        let config = launch.config;
        let start_error = |message: String, code: ErrorCode| LspError::Start {
            server: config.name.clone(),
            message,
            code,
        };
        let cache = launch.cache.to_string_lossy();
        let argv = [("HOME", cache.as_ref()), ("XDG_CACHE_HOME", cache.as_ref())]
            .into_iter()
            .chain(config.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .fold(
                Argv::new(&config.command, &config.args),
                |argv, (name, value)| argv.with_env(name, value),
            );
        // The server's own program and scripts stay visible wherever they are (read-only).
        let words: Vec<String> = std::iter::once(config.command.clone())
            .chain(config.args.iter().cloned())
            .collect();
        let sandbox = launch.sandbox.clone().seeing_code_of(&words);
        let root = launch.root.to_string_lossy();
        let (mut process, io) = spawn_piped_argv(&sandbox, &argv, Some(&root))
            .map_err(|error| start_error(error.to_string(), error.code()))?;
        let sandbox_summary = process.report().summary();
        let PipedIo {
            stdin,
            stdout,
            stderr,
        } = io;

        let (outgoing, mut outgoing_rx) = mpsc::unbounded_channel::<Value>();
        let root_uri = path_to_uri(launch.root);
        let shared = Arc::new(Shared {
            name: config.name.clone(),
            settings: config.settings.clone(),
            root_uri: root_uri.clone(),
            outgoing,
            pending: Mutex::new(HashMap::new()),
            diagnostics: Mutex::new(HashMap::new()),
            arrivals: AtomicU64::new(0),
            diagnostics_changed: watch::Sender::new(0),
            stderr: Mutex::new(VecDeque::new()),
            limitations: Mutex::new(Vec::new()),
            exit: watch::Sender::new(None),
            stopping: AtomicBool::new(false),
        });

        // Writer: one task owns stdin, so frames never interleave.
        tokio::spawn(async move {
            let mut stdin = stdin;
            while let Some(message) = outgoing_rx.recv().await {
                if write_message(&mut stdin, &message).await.is_err() {
                    break;
                }
            }
        });
        // Stderr: kept, bounded to its end.
        let stderr_shared = Arc::clone(&shared);
        let stderr_task = tokio::spawn(async move {
            let mut stderr = stderr;
            let mut buffer = vec![0u8; 8192];
            let mut lines = StderrLines::default();
            while let Ok(n) = stderr.read(&mut buffer).await {
                if n == 0 {
                    break;
                }
                let kept = lines.push(&buffer[..n], |line| {
                    if let Some(note) = limitation(line) {
                        let mut found = stderr_shared
                            .limitations
                            .lock()
                            .unwrap_or_else(PoisonError::into_inner);
                        if !found.contains(&note) {
                            found.push(note);
                        }
                    }
                });
                let mut tail = stderr_shared
                    .stderr
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner);
                tail.extend(&kept);
                let excess = tail.len().saturating_sub(STDERR_TAIL_BYTES);
                tail.drain(..excess);
            }
        });
        // Reader: answers, notifications and the server's own requests.
        let reader_shared = Arc::clone(&shared);
        tokio::spawn(async move {
            let mut reader = tokio::io::BufReader::new(stdout);
            loop {
                match read_message(&mut reader, MAX_MESSAGE_BYTES).await {
                    Ok(Some(message)) => dispatch(&reader_shared, message),
                    Ok(None) => break,
                    Err(error) => {
                        tracing::warn!(server = %reader_shared.name, %error, "unreadable message");
                        break;
                    }
                }
            }
            // Waiters learn the server is gone: their senders drop.
            reader_shared
                .pending
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .clear();
        });
        // Waiter: owns the process; stops it when the handle drops, records how it ended.
        let (stop, stop_rx) = oneshot::channel::<()>();
        let waiter_shared = Arc::clone(&shared);
        tokio::spawn(async move {
            let stopped_by_us;
            let status = tokio::select! {
                status = process.wait() => { stopped_by_us = false; status }
                _ = stop_rx => {
                    stopped_by_us = true;
                    // The handle is gone (service dropped): `exit`, a moment to obey, then kill.
                    waiter_shared.send(json!({"jsonrpc": "2.0", "method": "exit"}));
                    match tokio::time::timeout(SHUTDOWN_GRACE, process.wait()).await {
                        Ok(status) => status,
                        Err(_) => { process.kill(); process.wait().await }
                    }
                }
            };
            // Its stderr is complete once the pipe closed (bounded: a grandchild may hold it).
            let _ = tokio::time::timeout(Duration::from_secs(1), stderr_task).await;
            let exit = if stopped_by_us || waiter_shared.stopping.load(Ordering::SeqCst) {
                Exit::Stopped
            } else {
                Exit::Crashed(match status {
                    Ok(kind) => kind.to_string(),
                    Err(error) => format!("waiting for it failed: {error}"),
                })
            };
            waiter_shared.exit.send_replace(Some(exit));
        });

        let mut server = Server {
            config: config.clone(),
            root: launch.root.to_path_buf(),
            encoding: PositionEncoding::Utf16,
            capabilities: Value::Null,
            shared,
            next_id: AtomicI64::new(1),
            documents: tokio::sync::Mutex::new(HashMap::new()),
            last_used: Mutex::new(Instant::now()),
            _stop: stop,
            sandbox_summary,
        };
        let name = launch
            .root
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "workspace".to_owned());
        let params = json!({
            "processId": null,
            "clientInfo": {"name": "clawsmith", "version": env!("CARGO_PKG_VERSION")},
            "rootUri": root_uri,
            "rootPath": launch.root.to_string_lossy(),
            "workspaceFolders": [{"uri": root_uri, "name": name}],
            "initializationOptions": config.initialization_options,
            "capabilities": client_capabilities(),
        });
        let result = server
            .call("initialize", params, config.startup_timeout(), "initialize")
            .await?;
        server.capabilities = result.get("capabilities").cloned().unwrap_or(Value::Null);
        server.encoding = match server
            .capabilities
            .get("positionEncoding")
            .and_then(Value::as_str)
        {
            Some("utf-8") => PositionEncoding::Utf8,
            _ => PositionEncoding::Utf16,
        };
        server.notify("initialized", json!({}));
        if let Some(settings) = &config.settings {
            server.notify(
                "workspace/didChangeConfiguration",
                json!({"settings": settings}),
            );
        }
        Ok(Arc::new(server))
    }

    /// The server's name.
    pub(crate) fn name(&self) -> &str {
        &self.config.name
    }

    /// `None` while it runs.
    pub(crate) fn exit(&self) -> Option<Exit> {
        self.shared.exit.borrow().clone()
    }

    /// The end of its stderr.
    pub(crate) fn stderr_tail(&self) -> String {
        self.shared.stderr_tail()
    }

    /// Sentences on what the server said it cannot check (see [`limitation`]).
    pub(crate) fn limitations(&self) -> Vec<&'static str> {
        self.shared
            .limitations
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Marks it used now (the idle clock restarts).
    pub(crate) fn touch(&self) {
        *self
            .last_used
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Instant::now();
    }

    /// How long since it was last used.
    pub(crate) fn idle_for(&self) -> Duration {
        self.last_used
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .elapsed()
    }

    /// Whether the server offers `provider` (present and not `false`).
    pub(crate) fn offers(&self, provider: &str) -> bool {
        match self.capabilities.get(provider) {
            None | Some(Value::Null) | Some(Value::Bool(false)) => false,
            Some(_) => true,
        }
    }

    /// Sends a notification.
    pub(crate) fn notify(&self, method: &str, params: Value) {
        self.shared
            .send(json!({"jsonrpc": "2.0", "method": method, "params": params}));
    }

    /// Sends a request and waits for its answer, at most `timeout` (then `$/cancelRequest`).
    pub(crate) async fn call(
        &self,
        method: &str,
        params: Value,
        timeout: Duration,
        what: &str,
    ) -> Result<Value, LspError> {
        if self.exit().is_some() {
            return Err(self.exited(what).await);
        }
        let id = self.next_id.fetch_add(1, Ordering::SeqCst);
        let (reply_tx, reply_rx) = oneshot::channel();
        self.shared
            .pending
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(id, reply_tx);
        self.shared
            .send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        match tokio::time::timeout(timeout, reply_rx).await {
            Ok(Ok(Ok(result))) => Ok(result),
            Ok(Ok(Err((code, message)))) => Err(LspError::Rpc {
                server: self.name().to_owned(),
                what: what.to_owned(),
                code,
                message,
            }),
            Ok(Err(_closed)) => Err(self.exited(what).await),
            Err(_elapsed) => {
                self.shared
                    .pending
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .remove(&id);
                self.notify("$/cancelRequest", json!({"id": id}));
                Err(LspError::Timeout {
                    server: self.name().to_owned(),
                    what: what.to_owned(),
                    ms: timeout.as_millis(),
                })
            }
        }
    }

    /// The error for a call whose server went away, once its exit (and stderr) is known.
    async fn exited(&self, what: &str) -> LspError {
        let mut exit = self.shared.exit.subscribe();
        let _ = tokio::time::timeout(Duration::from_secs(3), exit.wait_for(Option::is_some)).await;
        LspError::Exited {
            server: self.name().to_owned(),
            what: what.to_owned(),
            stderr: self.stderr_tail(),
        }
    }

    /// Waits until `accept` takes the diagnostics published for `uri`, at most `timeout`.
    pub(crate) async fn wait_for_published(
        &self,
        uri: &str,
        accept: impl Fn(&Published) -> bool,
        timeout: Duration,
        what: &str,
    ) -> Result<Published, LspError> {
        let mut changed = self.shared.diagnostics_changed.subscribe();
        let mut exit = self.shared.exit.subscribe();
        let wait = async {
            loop {
                let found = self
                    .shared
                    .diagnostics
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .get(uri)
                    .filter(|published| accept(published))
                    .cloned();
                if let Some(published) = found {
                    return Ok(published);
                }
                tokio::select! {
                    changed = changed.changed() => if changed.is_err() { return Err(()) },
                    _ = exit.wait_for(Option::is_some) => return Err(()),
                }
            }
        };
        match tokio::time::timeout(timeout, wait).await {
            Ok(Ok(published)) => Ok(published),
            Ok(Err(())) => Err(self.exited(what).await),
            Err(_) => Err(LspError::Timeout {
                server: self.name().to_owned(),
                what: what.to_owned(),
                ms: timeout.as_millis(),
            }),
        }
    }

    /// How many diagnostics notifications arrived so far.
    pub(crate) fn arrivals(&self) -> u64 {
        self.shared.arrivals.load(Ordering::SeqCst)
    }

    /// `shutdown`, `exit`, then (after a grace) the tree is killed when the handle drops.
    pub(crate) async fn shutdown(&self) {
        if self.exit().is_some() {
            return;
        }
        self.shared.stopping.store(true, Ordering::SeqCst);
        let _ = self
            .call("shutdown", Value::Null, SHUTDOWN_GRACE, "shutdown")
            .await;
        self.notify("exit", Value::Null);
        let mut exit = self.shared.exit.subscribe();
        let _ = tokio::time::timeout(SHUTDOWN_GRACE, exit.wait_for(Option::is_some)).await;
    }
}

/// What clawsmith can do as a client.
fn client_capabilities() -> Value {
    json!({
        "general": {"positionEncodings": ["utf-8", "utf-16"]},
        "workspace": {
            "configuration": true,
            "workspaceFolders": true,
            "symbol": {"dynamicRegistration": false},
            "didChangeConfiguration": {"dynamicRegistration": false},
        },
        "textDocument": {
            "synchronization": {"dynamicRegistration": false, "didSave": false},
            "publishDiagnostics": {"versionSupport": true, "relatedInformation": false},
            "diagnostic": {"dynamicRegistration": false, "relatedDocumentSupport": false},
            "definition": {"dynamicRegistration": false, "linkSupport": true},
            "references": {"dynamicRegistration": false},
            "hover": {"dynamicRegistration": false, "contentFormat": ["plaintext", "markdown"]},
            "documentSymbol": {
                "dynamicRegistration": false,
                "hierarchicalDocumentSymbolSupport": true,
            },
        },
        "window": {"workDoneProgress": false},
    })
}

/// Routes one message from the server.
fn dispatch(shared: &Shared, message: Value) {
    let method = message.get("method").and_then(Value::as_str);
    let id = message.get("id").cloned();
    match (method, id) {
        (None, Some(id)) => {
            let Some(id) = id.as_i64() else { return };
            let waiter = shared
                .pending
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .remove(&id);
            let reply = match message.get("error") {
                Some(error) => Err((
                    error.get("code").and_then(Value::as_i64).unwrap_or(0),
                    error
                        .get("message")
                        .and_then(Value::as_str)
                        .unwrap_or("")
                        .to_owned(),
                )),
                None => Ok(message.get("result").cloned().unwrap_or(Value::Null)),
            };
            if let Some(waiter) = waiter {
                let _ = waiter.send(reply);
            }
        }
        (Some(method), Some(id)) => {
            let params = message.get("params").cloned().unwrap_or(Value::Null);
            let answer = match method {
                "workspace/configuration" => Ok(configuration(shared.settings.as_ref(), &params)),
                "workspace/workspaceFolders" => {
                    Ok(json!([{"uri": shared.root_uri, "name": "workspace"}]))
                }
                "client/registerCapability"
                | "client/unregisterCapability"
                | "window/workDoneProgress/create"
                | "window/showMessageRequest"
                | "workspace/diagnostic/refresh"
                | "workspace/semanticTokens/refresh"
                | "workspace/inlayHint/refresh"
                | "workspace/codeLens/refresh" => Ok(Value::Null),
                _ => Err(method),
            };
            shared.send(match answer {
                Ok(result) => json!({"jsonrpc": "2.0", "id": id, "result": result}),
                Err(method) => json!({"jsonrpc": "2.0", "id": id, "error": {
                    "code": -32601, "message": format!("clawsmith does not handle {method}")
                }}),
            });
        }
        (Some("textDocument/publishDiagnostics"), None) => {
            let Some(params) = message.get("params") else {
                return;
            };
            let Some(uri) = params.get("uri").and_then(Value::as_str) else {
                return;
            };
            let items: Vec<lsp_types::Diagnostic> = params
                .get("diagnostics")
                .and_then(|d| serde_json::from_value(d.clone()).ok())
                .unwrap_or_default();
            let version = params
                .get("version")
                .and_then(Value::as_i64)
                .and_then(|v| i32::try_from(v).ok());
            let arrival = shared.arrivals.fetch_add(1, Ordering::SeqCst) + 1;
            shared
                .diagnostics
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .insert(
                    uri.to_owned(),
                    Published {
                        version,
                        arrival,
                        items,
                    },
                );
            shared.diagnostics_changed.send_modify(|n| *n += 1);
        }
        _ => {}
    }
}

/// The answer to `workspace/configuration`: per item, the settings at its dotted section.
fn configuration(settings: Option<&Value>, params: &Value) -> Value {
    let items = params
        .get("items")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    Value::Array(
        items
            .iter()
            .map(|item| {
                let Some(settings) = settings else {
                    return Value::Null;
                };
                match item.get("section").and_then(Value::as_str) {
                    None | Some("") => settings.clone(),
                    Some(section) => section
                        .split('.')
                        .try_fold(settings, |value, key| value.get(key))
                        .cloned()
                        .unwrap_or(Value::Null),
                }
            })
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uris_round_trip_and_quote_what_they_must() {
        let cases = [
            ("/ws/src/a.py", "file:///ws/src/a.py"),
            ("/ws/my file#1.c", "file:///ws/my%20file%231.c"),
            ("/ws/é.py", "file:///ws/%C3%A9.py"),
        ];
        for (path, uri) in cases {
            assert_eq!(path_to_uri(Path::new(path)), uri);
            assert_eq!(uri_to_path(uri).unwrap(), Path::new(path));
        }
        assert_eq!(uri_to_path("file://localhost/x").unwrap(), Path::new("/x"));
        assert_eq!(uri_to_path("untitled:1"), None);
    }

    #[test]
    fn configuration_answers_by_dotted_section() {
        let settings = json!({"pylsp": {"plugins": {"pyflakes": {"enabled": true}}}});
        let params = json!({"items": [
            {"section": "pylsp.plugins"}, {"section": "nope"}, {}
        ]});
        assert_eq!(
            configuration(Some(&settings), &params),
            json!([{"pyflakes": {"enabled": true}}, null, settings])
        );
        assert_eq!(configuration(None, &params), json!([null, null, null]));
    }
}

/// What a server's stderr line says it cannot check, as a sentence for the model: pylsp loads
/// its linters as plugins and, when one is missing, says so only in its log (at `INFO`, which
/// the default pylsp configuration asks for with `-v`) and then reports no diagnostics of that
/// kind — "0 diagnostics" for a file with an undefined name.
fn limitation(line: &str) -> Option<&'static str> {
    line.contains("Failed to load pylsp entry point 'pyflakes'")
        .then_some(
            "pylsp could not load pyflakes, so undefined names, unused imports and syntax errors \
         are not reported; install pyflakes (Debian: python3-pyflakes) and restart clawsmith",
        )
}

/// A server's stderr split into lines across reads: each whole line is shown to a scanner,
/// and what is kept for the crash tail leaves out pylsp's `INFO`/`DEBUG` log lines (asked for
/// only to be scanned).
#[derive(Default)]
struct StderrLines {
    partial: Vec<u8>,
}

impl StderrLines {
    /// Adds `bytes`; calls `scan` on every line completed and returns the bytes to keep.
    fn push(&mut self, bytes: &[u8], mut scan: impl FnMut(&str)) -> Vec<u8> {
        let mut kept = Vec::new();
        self.partial.extend_from_slice(bytes);
        while let Some(end) = self.partial.iter().position(|&byte| byte == b'\n') {
            let line: Vec<u8> = self.partial.drain(..=end).collect();
            let text = String::from_utf8_lossy(&line);
            scan(&text);
            if !(text.contains(" - INFO - ") || text.contains(" - DEBUG - ")) {
                kept.extend_from_slice(&line);
            }
        }
        // A line longer than the tail is kept as it comes (its end is what matters).
        if self.partial.len() > STDERR_TAIL_BYTES {
            kept.append(&mut self.partial);
        }
        kept
    }
}

#[cfg(test)]
mod stderr_tests {
    use super::{StderrLines, limitation};

    #[test]
    fn lines_split_across_reads_are_scanned_whole_and_log_lines_are_not_kept() {
        let mut lines = StderrLines::default();
        let mut seen = Vec::new();
        let chunks: [&[u8]; 4] = [
            b"2026 UTC - INFO - pylsp.config.config - Failed to load pylsp entry ",
            b"point 'pyflakes': No module named 'pyflakes'\nTraceback (most recent",
            b" call last):\n2026 UTC - DEBUG - x\n",
            b"boom\n",
        ];
        let mut kept = Vec::new();
        for chunk in chunks {
            kept.extend(lines.push(chunk, |line| seen.push(line.to_owned())));
        }
        assert_eq!(seen.len(), 4, "{seen:?}");
        assert_eq!(
            String::from_utf8(kept).unwrap(),
            "Traceback (most recent call last):\nboom\n"
        );
        assert!(limitation(&seen[0]).is_some());
        assert!(seen[1..].iter().all(|line| limitation(line).is_none()));
    }
}
