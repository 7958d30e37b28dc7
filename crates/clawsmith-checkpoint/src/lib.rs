//! # clawsmith-checkpoint
//!
//! (essay written below)

mod artifact;
mod blob;
mod checkpoint;
mod diff;
mod error;
mod journal;
mod recorder;
mod retention;
mod schema;
mod session;
mod store;
mod undo;

pub use blob::{hash_hex, sha256};
pub use checkpoint::{ChangeKind, CheckpointInfo, CheckpointState, FileChange, TurnManifest};
pub use diff::{DIFF_SIDE_MAX_BYTES, DiffSide, FileDiff};
pub use error::StoreError;
pub use journal::{JournalEntry, JournalStart};
pub use recorder::CheckpointRecorder;
pub use retention::{PruneReport, RetentionPolicy};
pub use schema::SCHEMA_VERSION;
pub use session::{PendingApproval, SessionInfo, Todo, TodoStatus};
pub use store::{BUSY_TIMEOUT, Clock, Store, system_clock};
pub use undo::{
    PendingRestore, RecoveredRestore, UndoConflict, UndoOutcome, UndoReport, UndoScope,
};
