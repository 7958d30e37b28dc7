//! Shared helpers: a manual clock and message/event builders.
#![allow(dead_code)] // Shared helpers; not every test module uses every one.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use clawsmith_checkpoint::{Clock, Store};
use clawsmith_protocol::{EventPayload, ModelMessage, Role, TurnStarted};

pub const DAY_MS: u64 = 24 * 60 * 60 * 1000;

/// A clock the test moves by hand.
#[derive(Clone, Default)]
pub struct ManualClock(Arc<AtomicU64>);

impl ManualClock {
    pub fn at(ms: u64) -> ManualClock {
        let clock = ManualClock::default();
        clock.set(ms);
        clock
    }
    pub fn set(&self, ms: u64) {
        self.0.store(ms, Ordering::SeqCst);
    }
    pub fn advance(&self, ms: u64) {
        self.0.fetch_add(ms, Ordering::SeqCst);
    }
    pub fn now(&self) -> u64 {
        self.0.load(Ordering::SeqCst)
    }
    pub fn clock(&self) -> Clock {
        let inner = self.0.clone();
        Arc::new(move || inner.load(Ordering::SeqCst))
    }
}

pub fn memory_store() -> Store {
    Store::open_in_memory().unwrap()
}

pub fn user(text: &str) -> ModelMessage {
    ModelMessage::text(Role::User, text)
}

pub fn turn_started(turn: &str) -> EventPayload {
    EventPayload::TurnStarted(TurnStarted {
        turn_id: turn.to_string(),
    })
}

/// A store with session `s` over a temp workspace, plus tool-like helpers that go through the
/// recorder exactly as the fs tools do.
pub struct Fixture {
    pub dir: tempfile::TempDir,
    pub store: std::sync::Arc<Store>,
    pub workspace: clawsmith_fs::Workspace,
    pub recorder: clawsmith_checkpoint::CheckpointRecorder,
}

pub fn origin(session: &str, turn: &str) -> clawsmith_fs::ChangeOrigin {
    clawsmith_fs::ChangeOrigin {
        session_id: session.to_string(),
        turn_id: turn.to_string(),
        tool_call_id: format!("call-{turn}"),
    }
}

impl Fixture {
    pub fn new() -> Fixture {
        Fixture::with_store(|_| memory_store())
    }

    pub fn with_store(make: impl FnOnce(&std::path::Path) -> Store) -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("ws")).unwrap();
        let store = std::sync::Arc::new(make(dir.path()));
        let workspace = clawsmith_fs::Workspace::open(dir.path().join("ws")).unwrap();
        if store.get_session("s").unwrap().is_none() {
            store
                .create_session("s", &workspace.root().display().to_string())
                .unwrap();
        }
        let recorder = clawsmith_checkpoint::CheckpointRecorder::new(store.clone());
        Fixture {
            dir,
            store,
            workspace,
            recorder,
        }
    }

    pub fn root(&self) -> &std::path::Path {
        self.workspace.root()
    }

    /// Writes a file outside any turn (the user's own work).
    pub fn write_initial(&self, path: &str, content: &[u8], mode: u32) {
        use std::os::unix::fs::PermissionsExt;
        let full = self.root().join(path);
        std::fs::create_dir_all(full.parent().unwrap()).unwrap();
        std::fs::write(&full, content).unwrap();
        std::fs::set_permissions(&full, std::fs::Permissions::from_mode(mode)).unwrap();
    }

    fn resolve(&self, path: &str) -> clawsmith_fs::WorkspacePath {
        self.workspace.resolve(path).unwrap()
    }

    fn prior(&self, path: &str) -> clawsmith_fs::PriorState {
        self.workspace.read_state(&self.resolve(path)).unwrap()
    }

    fn post(&self, path: &str) -> clawsmith_fs::PostState {
        match self.prior(path) {
            clawsmith_fs::PriorState::Absent => clawsmith_fs::PostState::Absent,
            clawsmith_fs::PriorState::File { content, mode } => clawsmith_fs::PostState::File {
                sha256: clawsmith_checkpoint::sha256(&content),
                size: content.len() as u64,
                mode,
            },
        }
    }

    fn change(&self, turn: &str, path: &str, apply: impl FnOnce()) {
        use clawsmith_fs::ChangeRecorder;
        let origin = origin("s", turn);
        self.recorder
            .before_change(&origin, path, &self.prior(path))
            .unwrap();
        apply();
        self.recorder
            .after_change(&origin, path, &self.post(path))
            .unwrap();
    }

    /// Like `write_file` / `edit_file`: puts `content`, keeping an existing file's mode.
    pub fn put(&self, turn: &str, path: &str, content: &[u8]) {
        let mode = match self.prior(path) {
            clawsmith_fs::PriorState::File { mode, .. } => mode,
            clawsmith_fs::PriorState::Absent => 0o644,
        };
        self.change(turn, path, || {
            self.workspace
                .restore_file(&self.resolve(path), content, mode, true)
                .unwrap();
        });
    }

    pub fn create(&self, turn: &str, path: &str, content: &[u8]) {
        assert_eq!(self.prior(path), clawsmith_fs::PriorState::Absent);
        self.put(turn, path, content);
    }

    pub fn edit(&self, turn: &str, path: &str, content: &[u8]) {
        assert_ne!(self.prior(path), clawsmith_fs::PriorState::Absent);
        self.put(turn, path, content);
    }

    pub fn delete(&self, turn: &str, path: &str) {
        self.change(turn, path, || {
            self.workspace.remove_file(&self.resolve(path)).unwrap()
        });
    }

    /// Like `rename_file`: before(from), before(to) → move → after(from), after(to).
    pub fn rename(&self, turn: &str, from: &str, to: &str) {
        use clawsmith_fs::ChangeRecorder;
        let origin = origin("s", turn);
        self.recorder
            .before_change(&origin, from, &self.prior(from))
            .unwrap();
        self.recorder
            .before_change(&origin, to, &self.prior(to))
            .unwrap();
        let full_to = self.root().join(to);
        std::fs::create_dir_all(full_to.parent().unwrap()).unwrap();
        std::fs::rename(self.root().join(from), full_to).unwrap();
        self.recorder
            .after_change(&origin, from, &self.post(from))
            .unwrap();
        self.recorder
            .after_change(&origin, to, &self.post(to))
            .unwrap();
    }

    pub fn finish(&self, turn: &str) -> clawsmith_checkpoint::TurnManifest {
        self.store.finish_turn("s", turn, &self.workspace).unwrap()
    }

    /// Every regular file under the root: path → (content, mode).
    pub fn tree(&self) -> std::collections::BTreeMap<String, (Vec<u8>, u32)> {
        fn walk(
            base: &std::path::Path,
            dir: &std::path::Path,
            out: &mut std::collections::BTreeMap<String, (Vec<u8>, u32)>,
        ) {
            use std::os::unix::fs::PermissionsExt;
            for entry in std::fs::read_dir(dir).unwrap() {
                let entry = entry.unwrap();
                let meta = std::fs::symlink_metadata(entry.path()).unwrap();
                if meta.is_dir() {
                    walk(base, &entry.path(), out);
                } else {
                    let relative = entry
                        .path()
                        .strip_prefix(base)
                        .unwrap()
                        .to_string_lossy()
                        .into_owned();
                    out.insert(
                        relative,
                        (
                            std::fs::read(entry.path()).unwrap(),
                            meta.permissions().mode() & 0o7777,
                        ),
                    );
                }
            }
        }
        let mut out = std::collections::BTreeMap::new();
        walk(self.root(), self.root(), &mut out);
        out
    }
}

/// Takes a database of schema 14 back to the messages and events tables of versions 10 to 13
/// (keyed by `(session_id, idx/sequence)`, with their rows), as an older build left them;
/// `events_kind` is left to the caller (its `WHERE` differs by version).
pub const BEFORE_VERSION_14: &str = "
    CREATE TABLE messages_v13 (
        session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
        idx INTEGER NOT NULL, message_json TEXT NOT NULL, PRIMARY KEY (session_id, idx));
    INSERT INTO messages_v13 SELECT session_id, idx, message_json FROM messages;
    CREATE TABLE events_v13 (
        session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
        sequence INTEGER NOT NULL, type TEXT NOT NULL, timestamp_ms INTEGER NOT NULL,
        event_json TEXT NOT NULL, message_idx INTEGER,
        display_body_in_message INTEGER NOT NULL DEFAULT 0, PRIMARY KEY (session_id, sequence));
    INSERT INTO events_v13 SELECT * FROM events;
    DROP VIEW messages; DROP VIEW events; DROP TABLE message_rows; DROP TABLE event_rows;
    DROP TRIGGER sessions_rows; DROP TRIGGER sessions_numbered; DROP INDEX sessions_number;
    ALTER TABLE sessions DROP COLUMN number;
    ALTER TABLE messages_v13 RENAME TO messages; ALTER TABLE events_v13 RENAME TO events;";

/// `events_kind` of versions 4 to 12 (every kind), after [`BEFORE_VERSION_14`].
pub const EVENTS_KIND_BEFORE_13: &str =
    "CREATE INDEX events_kind ON events(session_id, type, sequence);";

/// `events_kind` of version 13, after [`BEFORE_VERSION_14`].
pub const EVENTS_KIND_13: &str = "CREATE INDEX events_kind ON events(session_id, type, sequence)
    WHERE type NOT IN ('tool.started', 'tool.completed');";
