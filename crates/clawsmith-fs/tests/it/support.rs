//! Shared fixtures: a temp dir holding `ws/` (the workspace) and `outside/` (must never change).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use clawsmith_fs::Workspace;

pub struct Fixture {
    _temp: tempfile::TempDir,
    pub base: PathBuf,
    pub ws: PathBuf,
    pub outside: PathBuf,
}

impl Fixture {
    pub fn new() -> Fixture {
        let temp = tempfile::tempdir().unwrap();
        let base = temp.path().canonicalize().unwrap();
        let ws = base.join("ws");
        let outside = base.join("outside");
        std::fs::create_dir(&ws).unwrap();
        std::fs::create_dir(&outside).unwrap();
        std::fs::write(outside.join("secret.txt"), "OUTSIDE-SECRET\n").unwrap();
        std::fs::create_dir(outside.join("dir")).unwrap();
        std::fs::write(outside.join("dir/inner.txt"), "OUTSIDE-SECRET inner\n").unwrap();
        Fixture {
            _temp: temp,
            base,
            ws,
            outside,
        }
    }

    pub fn workspace(&self) -> Workspace {
        Workspace::open(&self.ws).unwrap()
    }

    pub fn write(&self, relative: &str, content: impl AsRef<[u8]>) {
        let path = self.ws.join(relative);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).unwrap();
        }
        std::fs::write(path, content).unwrap();
    }

    pub fn read(&self, relative: &str) -> Vec<u8> {
        std::fs::read(self.ws.join(relative)).unwrap()
    }

    pub fn symlink(&self, target: impl AsRef<Path>, relative: &str) {
        std::os::unix::fs::symlink(target, self.ws.join(relative)).unwrap();
    }

    /// Every entry under `root` with its content (files) or link target (symlinks).
    pub fn snapshot(root: &Path) -> BTreeMap<PathBuf, String> {
        let mut out = BTreeMap::new();
        snapshot_into(root, root, &mut out);
        out
    }

    pub fn outside_snapshot(&self) -> BTreeMap<PathBuf, String> {
        Fixture::snapshot(&self.outside)
    }

    /// Names in the workspace that look like leftover temp files.
    pub fn temp_files(&self) -> Vec<PathBuf> {
        Fixture::snapshot(&self.ws)
            .into_keys()
            .filter(|p| p.to_string_lossy().contains(".clawsmith-tmp-"))
            .collect()
    }
}

fn snapshot_into(root: &Path, dir: &Path, out: &mut BTreeMap<PathBuf, String>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let entry = entry.unwrap();
        let path = entry.path();
        let relative = path.strip_prefix(root).unwrap().to_path_buf();
        let kind = entry.file_type().unwrap();
        if kind.is_symlink() {
            let target = std::fs::read_link(&path).unwrap();
            out.insert(relative, format!("symlink -> {}", target.display()));
        } else if kind.is_dir() {
            out.insert(relative, "dir".to_owned());
            snapshot_into(root, &path, out);
        } else if !kind.is_file() {
            // FIFOs, sockets and devices are recorded, never opened (a FIFO would block).
            out.insert(relative, format!("special {kind:?}"));
        } else {
            let content = std::fs::read(&path).unwrap();
            out.insert(relative, String::from_utf8_lossy(&content).into_owned());
        }
    }
}

use std::sync::{Arc, Mutex};

use clawsmith_fs::{
    ChangeOrigin, ChangeRecorder, NoopRecorder, PostState, PriorState, RecorderError,
};
use clawsmith_protocol::{
    Authorization, PermissionDecision, Tool, ToolExecutionContext, ToolExecutionResult, ToolOutput,
    ToolStatus, Verdict,
};
use serde_json::Value;

/// Runs a future that never waits (the file tools complete in their first poll).
pub fn block_on<F: std::future::Future>(future: F) -> F::Output {
    let mut future = std::pin::pin!(future);
    let mut context = std::task::Context::from_waker(std::task::Waker::noop());
    match future.as_mut().poll(&mut context) {
        std::task::Poll::Ready(output) => output,
        std::task::Poll::Pending => panic!("file tools complete without waiting"),
    }
}

pub fn authorized_context() -> ToolExecutionContext {
    let decision = PermissionDecision {
        verdict: Verdict::Allow,
        reason: "test".to_owned(),
        rule: None,
    };
    ToolExecutionContext::new("session-1", "turn-1", "call-1")
        .with_authorization(Authorization::from_decision(&decision).unwrap())
}

/// The seven tools over `fixture.ws` with `recorder`.
pub struct Tools {
    pub tools: Vec<Arc<dyn Tool>>,
}

impl Tools {
    pub fn new(fixture: &Fixture) -> Tools {
        Tools::with_recorder(fixture, Arc::new(NoopRecorder))
    }

    pub fn with_recorder(fixture: &Fixture, recorder: Arc<dyn ChangeRecorder>) -> Tools {
        Tools {
            tools: clawsmith_fs::builtin_tools(Arc::new(fixture.workspace()), recorder),
        }
    }

    pub fn get(&self, name: &str) -> &Arc<dyn Tool> {
        self.tools.iter().find(|tool| tool.name() == name).unwrap()
    }

    /// Calls `name` with an authorized context.
    pub fn call(&self, name: &str, input: Value) -> ToolExecutionResult {
        self.call_with(name, input, authorized_context())
    }

    pub fn call_with(
        &self,
        name: &str,
        input: Value,
        context: ToolExecutionContext,
    ) -> ToolExecutionResult {
        match block_on(self.get(name).execute(input, context)) {
            ToolOutput::Result(result) => result,
            other => panic!("file tools return typed results, got {other:?}"),
        }
    }

    /// Calls and asserts success, returning the content.
    pub fn ok(&self, name: &str, input: Value) -> String {
        let result = self.call(name, input.clone());
        assert_eq!(
            result.status(),
            ToolStatus::Success,
            "{name} {input}: {}",
            result.content
        );
        result.content
    }

    /// Calls and asserts a `tool_failed` error, returning the message without its prefix.
    pub fn fails(&self, name: &str, input: Value) -> String {
        let result = self.call(name, input.clone());
        assert_eq!(
            result.status(),
            ToolStatus::Error,
            "{name} {input}: {}",
            result.content
        );
        result.content.strip_prefix("Error: ").unwrap().to_owned()
    }
}

/// A recorder double: logs every call as a line, and can be told to fail.
#[derive(Default)]
pub struct Recording {
    pub calls: Mutex<Vec<String>>,
    pub fail_before: Mutex<bool>,
    pub fail_after: Mutex<bool>,
}

impl Recording {
    pub fn take(&self) -> Vec<String> {
        std::mem::take(&mut *self.calls.lock().unwrap())
    }
}

impl ChangeRecorder for Recording {
    fn before_change(
        &self,
        origin: &ChangeOrigin,
        path: &str,
        prior: &PriorState,
    ) -> Result<(), RecorderError> {
        assert_eq!(origin.tool_call_id, "call-1");
        let state = match prior {
            PriorState::Absent => "absent".to_owned(),
            PriorState::File { content, mode } => {
                format!("file {:?} {mode:o}", String::from_utf8_lossy(content))
            }
        };
        self.calls
            .lock()
            .unwrap()
            .push(format!("before {path} {state}"));
        if *self.fail_before.lock().unwrap() {
            return Err(RecorderError {
                path: path.to_owned(),
                message: "disk full".to_owned(),
            });
        }
        Ok(())
    }

    fn after_change(
        &self,
        origin: &ChangeOrigin,
        path: &str,
        post: &PostState,
    ) -> Result<(), RecorderError> {
        assert_eq!(origin.session_id, "session-1");
        assert_eq!(origin.turn_id, "turn-1");
        let state = match post {
            PostState::Absent => "absent".to_owned(),
            PostState::File { sha256, size, mode } => {
                format!("file {} {size} {mode:o}", &hex::encode(sha256)[..8])
            }
        };
        self.calls
            .lock()
            .unwrap()
            .push(format!("after {path} {state}"));
        if *self.fail_after.lock().unwrap() {
            return Err(RecorderError {
                path: path.to_owned(),
                message: "disk full".to_owned(),
            });
        }
        Ok(())
    }
}

/// First 8 hex digits of the SHA-256 of `content`.
pub fn short_hash(content: &[u8]) -> String {
    use sha2::Digest;
    hex::encode(sha2::Sha256::digest(content))[..8].to_owned()
}
