//! Any bytes as a tool call's `arguments`, for any tool of the table (or an unknown name),
//! through the full pipeline of the core: exactly one result per call, no `Err` out of the
//! core, no panic, and nothing outside the workspace changes. `accept-edits` without an
//! approver: file writes run (in a temp workspace), commands are asked and so refused.
#![no_main]

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use clawsmith_core::checkpoint::{Durability, Store, StoreOptions};
use clawsmith_core::security::{PermissionMode, PermissionPolicy};
use clawsmith_core::{AgentCore, CoreConfig, NullSink, SessionHandle};
use clawsmith_protocol::ToolCall;
use libfuzzer_sys::fuzz_target;

const SESSION_CALLS: u64 = 500;

struct Harness {
    _dir: tempfile::TempDir,
    outside: PathBuf,
    core: AgentCore,
    names: Vec<String>,
    runtime: tokio::runtime::Runtime,
    session: Mutex<Option<SessionHandle>>,
}

fn harness() -> &'static Harness {
    static HARNESS: OnceLock<Harness> = OnceLock::new();
    HARNESS.get_or_init(|| {
        let dir = tempfile::tempdir().expect("temp dir");
        let base = dir.path().canonicalize().expect("canonical temp dir");
        let root = base.join("ws");
        let outside = base.join("outside");
        std::fs::create_dir_all(root.join("src")).expect("ws");
        std::fs::create_dir_all(&outside).expect("outside");
        std::fs::write(outside.join("secret"), "OUTSIDE").expect("secret");
        std::fs::write(root.join("a.txt"), "alpha\nbeta\n").expect("a.txt");
        std::fs::write(root.join("src/lib.rs"), "fn main() {}\n").expect("lib.rs");
        std::os::unix::fs::symlink("../outside", root.join("escape")).expect("symlink");
        let mut options = StoreOptions::default();
        options.durability = Durability::Normal;
        let store = Arc::new(Store::open_with(base.join("state.db"), options).expect("store"));
        let mut config = CoreConfig::new(&root, store);
        config.policy = PermissionPolicy::new(PermissionMode::AcceptEdits);
        let core = AgentCore::new(config).expect("core");
        let names = core
            .tools()
            .entries()
            .iter()
            .map(|entry| entry.name().to_owned())
            .collect();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        Harness {
            _dir: dir,
            outside,
            core,
            names,
            runtime,
            session: Mutex::new(None),
        }
    })
}

fuzz_target!(|data: &[u8]| {
    static CALLS: AtomicU64 = AtomicU64::new(0);
    let harness = harness();
    let Some((&selector, rest)) = data.split_first() else {
        return;
    };
    let name = harness
        .names
        .get(usize::from(selector) % (harness.names.len() + 1))
        .cloned()
        .unwrap_or_else(|| "no_such_tool".to_owned());
    let count = CALLS.fetch_add(1, Ordering::Relaxed);
    let mut session = harness.session.lock().unwrap_or_else(|e| e.into_inner());
    if count % SESSION_CALLS == 0 || session.is_none() {
        *session = Some(harness.core.open_session(None).expect("open a session"));
    }
    let Some(handle) = session.as_ref() else {
        return;
    };
    let call = ToolCall {
        id: format!("fuzz-{count}"),
        name,
        arguments: String::from_utf8_lossy(rest).into_owned(),
    };
    let outcome = harness
        .runtime
        .block_on(handle.run_turn(vec![call], &NullSink))
        .expect("the core must answer with a result, not an Err");
    assert_eq!(outcome.results.len(), 1, "exactly one result per call");
    assert_eq!(
        std::fs::read(harness.outside.join("secret")).expect("the outside file"),
        b"OUTSIDE"
    );
    assert_eq!(
        std::fs::read_dir(&harness.outside)
            .expect("outside")
            .count(),
        1
    );
});
