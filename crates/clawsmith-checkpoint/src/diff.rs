//! Diffs on demand (K4): before/after text and a unified diff of one path of one turn, read only
//! when asked.

use clawsmith_fs::diff::{DiffPurpose, LineDiff};
use serde::{Deserialize, Serialize};

use crate::blob::get_blob;
use crate::checkpoint::{ChangeKind, FileChange, checkpoint_id, file_records};
use crate::error::StoreError;
use crate::store::Store;

/// The most bytes of each side (and of the unified diff) a [`FileDiff`] carries.
pub const DIFF_SIDE_MAX_BYTES: usize = 64 * 1024;

/// One side of a diff.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", tag = "kind")]
pub enum DiffSide {
    /// The file did not exist.
    Absent,
    /// UTF-8 text, cut at [`DIFF_SIDE_MAX_BYTES`] (on a character boundary) when `truncated`.
    Text {
        /// The text (possibly truncated).
        text: String,
        /// Whether `text` is a prefix.
        truncated: bool,
        /// Size of the full content.
        total_bytes: u64,
    },
    /// Not UTF-8 text (or contains NUL bytes).
    Binary {
        /// Size of the content.
        total_bytes: u64,
    },
    /// The content is not stored (the file changed before the turn was finished, or it was
    /// pruned).
    Unavailable {
        /// Why.
        reason: String,
    },
}

/// What [`Store::diff`] returns.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FileDiff {
    /// Workspace-relative path.
    pub path: String,
    /// How it changed.
    pub kind: ChangeKind,
    /// Before the turn.
    pub before: DiffSide,
    /// After the turn.
    pub after: DiffSide,
    /// Unified diff of the full texts (empty when a side is binary or unavailable), cut at
    /// [`DIFF_SIDE_MAX_BYTES`] with a closing note when longer.
    pub unified: String,
    /// Whether `unified` was cut.
    pub unified_truncated: bool,
    /// Who made the change when it was not a file tool: `command`; absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub origin: Option<String>,
    /// The call that made it, when `origin` is set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub call_id: Option<String>,
}

impl Store {
    /// The diff of `path` in turn `turn_id`. `Ok(None)` when the turn did not touch `path`.
    pub fn diff(
        &self,
        session_id: &str,
        turn_id: &str,
        path: &str,
    ) -> Result<Option<FileDiff>, StoreError> {
        let loaded = self.read("reading a diff", |tx| {
            let id = checkpoint_id(tx, session_id, turn_id)?;
            let Some(record) = file_records(tx, id)?
                .into_iter()
                .find(|record| record.path == path)
            else {
                return Ok(None);
            };
            let load = |hash: &Option<String>| -> Result<Option<Option<Vec<u8>>>, StoreError> {
                match hash {
                    None => Ok(None),
                    Some(hash) => get_blob(tx, hash).map(Some),
                }
            };
            let before = load(&record.pre_hash)?;
            let after = load(&record.post_hash)?;
            Ok(Some((record, before, after)))
        })?;
        let Some((record, before, after)) = loaded else {
            return Ok(None);
        };
        let change = record.change();
        Ok(Some(file_diff(change, before, after)))
    }
}

/// The diff of one recorded change from its two sides as stored: `None` for a side that did not
/// exist (an added or deleted file), `Some(None)` for a side whose content is not stored, else
/// its bytes. Every store builds [`FileDiff`] here, so the same record reads the same way.
pub fn file_diff(
    change: FileChange,
    before: Option<Option<Vec<u8>>>,
    after: Option<Option<Vec<u8>>>,
) -> FileDiff {
    let before_text = text_of(&before);
    let after_text = text_of(&after);
    let (unified, unified_truncated) = match (&before_text, &after_text) {
        (Some(old), Some(new)) => {
            let text = LineDiff::new(old, new, DiffPurpose::Record).unified(&change.path);
            cut(text, "\n… diff truncated")
        }
        _ => (String::new(), false),
    };
    FileDiff {
        path: change.path,
        kind: change.kind,
        before: side(
            before,
            before_text,
            "the content before the turn is not stored",
        ),
        after: side(
            after,
            after_text,
            "the content after the turn was not captured (changed before the turn finished, or pruned)",
        ),
        unified,
        unified_truncated,
        origin: change.origin,
        call_id: change.call_id,
    }
}

/// The text of a present side (`Some("")` for an absent one, so creations diff against empty).
fn text_of(content: &Option<Option<Vec<u8>>>) -> Option<String> {
    match content {
        None => Some(String::new()),
        Some(None) => None,
        Some(Some(bytes)) => match std::str::from_utf8(bytes) {
            Ok(text) if !text.contains('\0') => Some(text.to_string()),
            _ => None,
        },
    }
}

fn side(content: Option<Option<Vec<u8>>>, text: Option<String>, missing: &str) -> DiffSide {
    match content {
        None => DiffSide::Absent,
        Some(None) => DiffSide::Unavailable {
            reason: missing.to_string(),
        },
        Some(Some(bytes)) => match text {
            Some(text) => {
                let (text, truncated) = cut(text, "");
                DiffSide::Text {
                    text,
                    truncated,
                    total_bytes: bytes.len() as u64,
                }
            }
            None => DiffSide::Binary {
                total_bytes: bytes.len() as u64,
            },
        },
    }
}

/// Cuts `text` to [`DIFF_SIDE_MAX_BYTES`] on a character boundary, appending `note` when cut.
fn cut(mut text: String, note: &str) -> (String, bool) {
    if text.len() <= DIFF_SIDE_MAX_BYTES {
        return (text, false);
    }
    text.truncate(text.floor_char_boundary(DIFF_SIDE_MAX_BYTES));
    text.push_str(note);
    (text, true)
}
