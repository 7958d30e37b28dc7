//! How clawsmith diffs two texts: one `similar` line diff, its deadline by purpose, its counts
//! of added and removed lines, and its unified text (three lines of context, `a/` and `b/`
//! headers). The edit tools' displays and the checkpoint store's line counts and diffs all go
//! through [`LineDiff`], so they agree on what a change is.
//!
//! The deadline bounds the search for the smallest edit script: past it, `similar` settles for a
//! larger script that is still correct (every line it reports as kept is kept), so a deadline
//! trades the diff's size for time and never its correctness.

use std::fmt::Display;
use std::time::Duration;

use similar::{DiffTag, TextDiff};

/// What a diff is for; each purpose has its own deadline ([`DiffPurpose::deadline`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DiffPurpose {
    /// The diff an edit tool shows people in its result: computed inside every edit call, while
    /// the model waits for the result, and only shown, never stored.
    ToolDisplay,
    /// A change as the checkpoint store records it (lines added and removed, in the write
    /// transaction that finishes a turn) and as it shows it on demand: the two must agree, and
    /// the counts are kept, so the search gets the longer deadline.
    Record,
}

impl DiffPurpose {
    /// How long the search for the smallest edit script may take.
    pub const fn deadline(self) -> Duration {
        match self {
            // A larger diff in a display costs nothing; a slow one delays every edit.
            DiffPurpose::ToolDisplay => Duration::from_millis(200),
            DiffPurpose::Record => Duration::from_secs(2),
        }
    }
}

/// A line diff of two texts.
pub struct LineDiff<'a> {
    diff: TextDiff<'a, 'a, str>,
}

impl<'a> LineDiff<'a> {
    /// Diffs `old` and `new` line by line within `purpose`'s deadline.
    pub fn new(old: &'a str, new: &'a str, purpose: DiffPurpose) -> LineDiff<'a> {
        LineDiff {
            diff: TextDiff::configure()
                .timeout(purpose.deadline())
                .diff_lines(old, new),
        }
    }

    /// Lines added and lines removed (a changed line counts once in each).
    pub fn counts(&self) -> (usize, usize) {
        self.diff.ops().iter().fold((0, 0), |(added, removed), op| {
            let (tag, old_range, new_range) = op.as_tag_tuple();
            match tag {
                DiffTag::Equal => (added, removed),
                _ => (added + new_range.len(), removed + old_range.len()),
            }
        })
    }

    /// The unified diff of `path` (headers `a/<path>` and `b/<path>`, three lines of context);
    /// empty when nothing changed.
    pub fn unified(&self, path: impl Display) -> String {
        self.diff
            .unified_diff()
            .context_radius(3)
            .header(&format!("a/{path}"), &format!("b/{path}"))
            .to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_and_unified_text() {
        // (old, new, (added, removed), unified diff of `f`)
        let table = [
            ("a\nb\n", "a\nb\n", (0, 0), ""),
            ("", "x\n", (1, 0), "--- a/f\n+++ b/f\n@@ -0,0 +1 @@\n+x\n"),
            (
                "a\nb\n",
                "a\nc\n",
                (1, 1),
                "--- a/f\n+++ b/f\n@@ -1,2 +1,2 @@\n a\n-b\n+c\n",
            ),
            (
                "a\nb\nc\n",
                "a\n",
                (0, 2),
                "--- a/f\n+++ b/f\n@@ -1,3 +1 @@\n a\n-b\n-c\n",
            ),
        ];
        for purpose in [DiffPurpose::ToolDisplay, DiffPurpose::Record] {
            for (old, new, counts, unified) in table {
                let diff = LineDiff::new(old, new, purpose);
                assert_eq!(diff.counts(), counts, "{old:?} → {new:?}");
                assert_eq!(diff.unified("f"), unified, "{old:?} → {new:?}");
            }
        }
    }
}
