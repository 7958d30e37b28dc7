//! `write_file`, `edit_file`, `rename_file`, `delete_file` (F5–F8), each reporting to the
//! [`ChangeRecorder`] in the order the checkpoint contract fixes.

use std::sync::Arc;

use clawsmith_protocol::{Display, DisplayKind, ToolExecutionContext, ToolExecutionResult};
use schemars::JsonSchema;
use serde::Deserialize;
use sha2::{Digest, Sha256};

use super::{FileTool, invalid_arguments, resolve_file};
use crate::diff::{DiffPurpose, LineDiff};
use crate::error::FsError;
use crate::escape::escape_control;
use crate::recorder::{ChangeOrigin, ChangeRecorder, PostState, PriorState, RecorderError};
use crate::workspace::{FileVersion, MAX_SNAPSHOT_BYTES, Workspace, WorkspacePath};

/// The largest content `write_file` writes and the largest result `edit_file` produces (1 MiB).
pub const WRITE_MAX_BYTES: usize = 1024 * 1024;

/// Inputs larger than this are not diffed for the display (the model never needs the diff).
const DIFF_MAX_INPUT_BYTES: usize = 256 * 1024;

/// Arguments of `write_file`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct WriteFileInput {
    /// Path of the new file; its folder must exist and the file must not.
    pub path: String,
    /// The complete content (at most 1 MiB).
    pub content: String,
}

/// Arguments of `edit_file`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct EditFileInput {
    /// Path of the file to change.
    pub path: String,
    /// Exact text to replace; it must occur exactly once in the file.
    pub old_text: String,
    /// Replacement text.
    pub new_text: String,
    /// Edit even a read-only file (one whose owner has no write permission); its mode is kept.
    /// Without it such a file is refused.
    #[serde(default)]
    pub allow_read_only: bool,
}

/// Arguments of `rename_file`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RenameFileInput {
    /// Current path of a regular file.
    pub from: String,
    /// New path; it must not exist and its folder must.
    pub to: String,
}

/// Arguments of `delete_file`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DeleteFileInput {
    /// Path of a regular file (never a folder).
    pub path: String,
}

pub(super) struct WriteFile {
    pub(super) workspace: Arc<Workspace>,
    pub(super) recorder: Arc<dyn ChangeRecorder>,
}

pub(super) struct EditFile {
    pub(super) workspace: Arc<Workspace>,
    pub(super) recorder: Arc<dyn ChangeRecorder>,
}

pub(super) struct RenameFile {
    pub(super) workspace: Arc<Workspace>,
    pub(super) recorder: Arc<dyn ChangeRecorder>,
}

pub(super) struct DeleteFile {
    pub(super) workspace: Arc<Workspace>,
    pub(super) recorder: Arc<dyn ChangeRecorder>,
}

impl FileTool for WriteFile {
    type Input = WriteFileInput;
    const NAME: &'static str = "write_file";
    const DESCRIPTION: &'static str = "Create a new file in the workspace with the given content \
        (at most 1 MiB). Refuses to overwrite: use edit_file to change an existing file. The \
        parent folder must exist.";
    const WRITES: bool = true;

    fn summarize(input: &WriteFileInput) -> String {
        format!(
            "Create {} ({} bytes)",
            escape_control(&input.path),
            input.content.len()
        )
    }

    fn run(&self, input: WriteFileInput, context: &ToolExecutionContext) -> ToolExecutionResult {
        let origin = ChangeOrigin::from_context(context);
        let path = match resolve_file(&self.workspace, &input.path) {
            Ok(path) => path,
            Err(refusal) => return refusal,
        };
        let content = input.content.as_bytes();
        if content.len() > WRITE_MAX_BYTES {
            return ToolExecutionResult::tool_failed(format!(
                "Content is too large: {} bytes (limit {WRITE_MAX_BYTES} bytes)",
                content.len()
            ));
        }
        if let Err(error) = self.workspace.check_creatable(&path) {
            return failed_write(error);
        }
        if let Err(error) = self
            .recorder
            .before_change(&origin, path.as_str(), &PriorState::Absent)
        {
            return recorder_failed(error);
        }
        let post = match self.workspace.create_new(&path, content) {
            Ok(post) => post,
            Err(error) => return failed_write(error),
        };
        if let Err(error) = self.recorder.after_change(&origin, path.as_str(), &post) {
            return recorded_late(&path, error);
        }
        let lines = count_lines(&input.content);
        let display = diff_display(&path, "created", "", &input.content);
        ToolExecutionResult::success(format!(
            "Created {path} ({} bytes, {lines} lines).",
            content.len()
        ))
        .with_display(display)
    }
}

impl FileTool for EditFile {
    type Input = EditFileInput;
    const NAME: &'static str = "edit_file";
    const DESCRIPTION: &'static str = "Replace one exact occurrence of `oldText` with `newText` in \
        an existing file. `oldText` must occur exactly once (include surrounding lines to make it \
        unique); no fuzzy matching. Line endings, a BOM, the file mode and owner are kept. Fails \
        (retryable) if the file changes while the edit is made; a read-only file needs \
        `allowReadOnly`.";
    const WRITES: bool = true;

    fn summarize(input: &EditFileInput) -> String {
        format!("Edit {}", escape_control(&input.path))
    }

    fn run(&self, input: EditFileInput, context: &ToolExecutionContext) -> ToolExecutionResult {
        let origin = ChangeOrigin::from_context(context);
        if input.old_text.is_empty() {
            return invalid_arguments("oldText must not be empty");
        }
        let path = match resolve_file(&self.workspace, &input.path) {
            Ok(path) => path,
            Err(refusal) => return refusal,
        };
        // A file that cannot shrink to 1 MiB by this edit is refused before it is read.
        let limit = (WRITE_MAX_BYTES + input.old_text.len()) as u64;
        let (old_content, version) = match read_existing(&self.workspace, &path, limit) {
            Ok(read) => read,
            Err(refusal) => return refusal,
        };
        if !version.owner_can_write() && !input.allow_read_only {
            return ToolExecutionResult::tool_failed(format!(
                "Cannot edit {path}: it is read-only (mode {:04o}); pass allowReadOnly: true to \
                 edit it anyway",
                version.mode()
            ));
        }
        let new_content = match apply_edit(&old_content, &input.old_text, &input.new_text) {
            Ok(new_content) => new_content,
            Err(EditError::NotFound) => {
                return ToolExecutionResult::tool_failed("The old text was not found");
            }
            // The mission's sentence first, then how often and what to do instead.
            Err(EditError::NotUnique(count)) => {
                return ToolExecutionResult::tool_failed(format!(
                    "The old text must occur exactly once; provide more surrounding context \
                     (it occurs {count} times in {path}: include neighbouring lines so oldText \
                     matches one place, or choose a string unique in the file)"
                ));
            }
        };
        if new_content.len() > WRITE_MAX_BYTES {
            return ToolExecutionResult::tool_failed(format!(
                "The edited file would be too large: {} bytes (limit {WRITE_MAX_BYTES} bytes)",
                new_content.len()
            ));
        }
        let prior = PriorState::File {
            content: old_content,
            mode: version.mode(),
        };
        if let Err(error) = self.recorder.before_change(&origin, path.as_str(), &prior) {
            return recorder_failed(error);
        }
        let post = match self
            .workspace
            .replace_if_unchanged(&path, &version, &new_content)
        {
            Ok(post) => post,
            Err(error) => return failed(error),
        };
        if let Err(error) = self.recorder.after_change(&origin, path.as_str(), &post) {
            return recorded_late(&path, error);
        }
        let old_text = match &prior {
            PriorState::File { content, .. } => String::from_utf8_lossy(content),
            PriorState::Absent => std::borrow::Cow::Borrowed(""),
        };
        let new_text = String::from_utf8_lossy(&new_content);
        let removed = count_lines(&input.old_text);
        let added = count_lines(&input.new_text);
        let display = diff_display(&path, "edited", &old_text, &new_text);
        ToolExecutionResult::success(format!(
            "Edited {path}: replaced {removed} line(s) with {added} line(s) ({} bytes now).",
            new_content.len()
        ))
        .with_display(display)
    }
}

impl FileTool for RenameFile {
    type Input = RenameFileInput;
    const NAME: &'static str = "rename_file";
    const DESCRIPTION: &'static str = "Move or rename a regular file inside the workspace. The \
        target must not exist and its folder must.";
    const WRITES: bool = true;

    fn summarize(input: &RenameFileInput) -> String {
        format!(
            "Rename {} to {}",
            escape_control(&input.from),
            escape_control(&input.to)
        )
    }

    fn run(&self, input: RenameFileInput, context: &ToolExecutionContext) -> ToolExecutionResult {
        let origin = ChangeOrigin::from_context(context);
        let from = match resolve_file(&self.workspace, &input.from) {
            Ok(path) => path,
            Err(refusal) => return refusal,
        };
        let to = match resolve_file(&self.workspace, &input.to) {
            Ok(path) => path,
            Err(refusal) => return refusal,
        };
        if from == to || from.as_str() == to.as_str() {
            return ToolExecutionResult::tool_failed(format!(
                "Source and target are the same path: {from}"
            ));
        }
        let (content, version) = match read_existing(&self.workspace, &from, MAX_SNAPSHOT_BYTES) {
            Ok(read) => read,
            Err(refusal) => return refusal,
        };
        let mode = version.mode();
        if let Err(error) = self.workspace.check_creatable(&to) {
            return failed_target(error);
        }
        let post_to = PostState::File {
            sha256: Sha256::digest(&content).into(),
            size: content.len() as u64,
            mode,
        };
        let size = content.len();
        let prior = PriorState::File { content, mode };
        if let Err(error) = self.recorder.before_change(&origin, from.as_str(), &prior) {
            return recorder_failed(error);
        }
        if let Err(error) = self
            .recorder
            .before_change(&origin, to.as_str(), &PriorState::Absent)
        {
            return recorder_failed(error);
        }
        if let Err(error) = self.workspace.rename_if_unchanged(&from, &version, &to) {
            return failed_target(error);
        }
        if let Err(error) = self
            .recorder
            .after_change(&origin, from.as_str(), &PostState::Absent)
        {
            return recorded_late(&from, error);
        }
        if let Err(error) = self.recorder.after_change(&origin, to.as_str(), &post_to) {
            return recorded_late(&to, error);
        }
        let display = Display::new(DisplayKind::Text)
            .with_title(format!("rename {from} → {to}"))
            .with_field("from", from.to_string())
            .with_field("to", to.to_string())
            .with_field("size", format!("{size} bytes"));
        ToolExecutionResult::success(format!("Renamed {from} to {to}.")).with_display(display)
    }
}

impl FileTool for DeleteFile {
    type Input = DeleteFileInput;
    const NAME: &'static str = "delete_file";
    const DESCRIPTION: &'static str = "Delete one regular file in the workspace. Never deletes \
        folders and never recurses.";
    const WRITES: bool = true;

    fn summarize(input: &DeleteFileInput) -> String {
        format!("Delete {}", escape_control(&input.path))
    }

    fn run(&self, input: DeleteFileInput, context: &ToolExecutionContext) -> ToolExecutionResult {
        let origin = ChangeOrigin::from_context(context);
        let path = match resolve_file(&self.workspace, &input.path) {
            Ok(path) => path,
            Err(refusal) => return refusal,
        };
        let (content, version) = match self.workspace.read_versioned(&path, MAX_SNAPSHOT_BYTES) {
            Ok(Some(read)) => read,
            Ok(None) => {
                return failed(FsError::NotFound {
                    path: path.display().to_owned(),
                });
            }
            Err(error @ FsError::NotRegularFile { .. }) => {
                return ToolExecutionResult::tool_failed(format!(
                    "{error} (delete_file removes regular files only, never folders)"
                ));
            }
            Err(error) => return failed(error),
        };
        let prior = PriorState::File {
            content,
            mode: version.mode(),
        };
        if let Err(error) = self.recorder.before_change(&origin, path.as_str(), &prior) {
            return recorder_failed(error);
        }
        if let Err(error) = self.workspace.remove_if_unchanged(&path, &version) {
            return failed(error);
        }
        if let Err(error) = self
            .recorder
            .after_change(&origin, path.as_str(), &PostState::Absent)
        {
            return recorded_late(&path, error);
        }
        let PriorState::File { content, .. } = &prior else {
            return ToolExecutionResult::success(format!("Deleted {path}."));
        };
        let old_text = String::from_utf8_lossy(content);
        let display = diff_display(&path, "deleted", &old_text, "");
        ToolExecutionResult::success(format!("Deleted {path} ({} bytes).", content.len()))
            .with_display(display)
    }
}

/// Why an edit cannot be applied.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum EditError {
    NotFound,
    /// The text occurs this many times (overlapping occurrences counted).
    NotUnique(usize),
}

/// F6: replaces the single occurrence of `old` with `new`, keeping a UTF-8 BOM and CRLF line
/// endings. In a file whose line breaks are all CRLF, both texts are matched and written with
/// the file's CRLF, whatever the model sent.
pub(crate) fn apply_edit(content: &[u8], old: &str, new: &str) -> Result<Vec<u8>, EditError> {
    const BOM: &[u8] = b"\xEF\xBB\xBF";
    let (bom, body) = match content.strip_prefix(BOM) {
        Some(body) => (BOM, body),
        None => (&b""[..], content),
    };
    let old = old.strip_prefix('\u{FEFF}').unwrap_or(old);
    let mut out = bom.to_vec();
    if uses_crlf_only(body) {
        let body = body_without_cr(body);
        let old = old.replace("\r\n", "\n");
        let new = new.replace("\r\n", "\n");
        let replaced = replace_once(&body, old.as_bytes(), new.as_bytes())?;
        for &byte in &replaced {
            if byte == b'\n' {
                out.push(b'\r');
            }
            out.push(byte);
        }
    } else {
        out.extend(replace_once(body, old.as_bytes(), new.as_bytes())?);
    }
    Ok(out)
}

fn uses_crlf_only(body: &[u8]) -> bool {
    let mut saw_crlf = false;
    for (index, &byte) in body.iter().enumerate() {
        if byte == b'\n' {
            if index > 0 && body[index - 1] == b'\r' {
                saw_crlf = true;
            } else {
                return false;
            }
        }
    }
    saw_crlf
}

fn body_without_cr(body: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(body.len());
    for (index, &byte) in body.iter().enumerate() {
        if byte == b'\r' && body.get(index + 1) == Some(&b'\n') {
            continue;
        }
        out.push(byte);
    }
    out
}

/// Counts occurrences (overlapping ones too, so `aa` in `aaa` is ambiguous) and replaces the one.
fn replace_once(haystack: &[u8], old: &[u8], new: &[u8]) -> Result<Vec<u8>, EditError> {
    let first = find(haystack, old, 0).ok_or(EditError::NotFound)?;
    if let Some(second) = find(haystack, old, first + 1) {
        let mut count = 2;
        let mut at = second;
        while let Some(next) = find(haystack, old, at + 1) {
            count += 1;
            at = next;
        }
        return Err(EditError::NotUnique(count));
    }
    let mut out = Vec::with_capacity(haystack.len() - old.len() + new.len());
    out.extend_from_slice(&haystack[..first]);
    out.extend_from_slice(new);
    out.extend_from_slice(&haystack[first + old.len()..]);
    Ok(out)
}

/// Position of `needle` in `haystack` at or after `from`.
fn find(haystack: &[u8], needle: &[u8], from: usize) -> Option<usize> {
    if needle.is_empty() || from > haystack.len() {
        return None;
    }
    let rest = &haystack[from..];
    // `str::find` is a fast two-way search; non-UTF-8 files fall back to a plain scan.
    if let (Ok(rest), Ok(needle)) = (std::str::from_utf8(rest), std::str::from_utf8(needle)) {
        return rest.find(needle).map(|index| index + from);
    }
    rest.windows(needle.len())
        .position(|window| window == needle)
        .map(|index| index + from)
}

fn count_lines(text: &str) -> usize {
    if text.is_empty() {
        0
    } else {
        text.lines().count().max(1)
    }
}

/// A bounded unified diff for people; the model reads the one-line summary instead.
fn diff_display(path: &WorkspacePath, verb: &str, old: &str, new: &str) -> Display {
    let display = Display::new(DisplayKind::Diff).with_title(format!("{verb} {path}"));
    if old.len() > DIFF_MAX_INPUT_BYTES || new.len() > DIFF_MAX_INPUT_BYTES {
        return display.with_body(format!(
            "(diff omitted: the file is larger than {DIFF_MAX_INPUT_BYTES} bytes)"
        ));
    }
    let diff = LineDiff::new(old, new, DiffPurpose::ToolDisplay);
    let (added, removed) = diff.counts();
    let mut body = diff.unified(path);
    if body.is_empty() {
        body.push_str("(no changes)");
    }
    display
        .with_body(body)
        .with_field("added lines", added)
        .with_field("removed lines", removed)
}

/// A workspace failure as a result; a file changed by another writer is retryable (reading it
/// again and redoing the change is safe, and nothing was written).
fn failed(error: FsError) -> ToolExecutionResult {
    let retryable = matches!(error, FsError::Changed { .. });
    let mut result = super::fs_failure(error);
    if retryable {
        result.metadata.retryable = Some(true);
    }
    result
}

/// The content and version of the regular file a read-modify-write starts from; a missing file
/// is `File not found`.
#[allow(clippy::result_large_err)] // the refusal is the result handed back, built once per call
fn read_existing(
    workspace: &Workspace,
    path: &WorkspacePath,
    limit: u64,
) -> Result<(Vec<u8>, FileVersion), ToolExecutionResult> {
    match workspace.read_versioned(path, limit) {
        Ok(Some(read)) => Ok(read),
        Ok(None) => Err(failed(FsError::NotFound {
            path: path.display().to_owned(),
        })),
        Err(error) => Err(failed(error)),
    }
}

/// `write_file` explains what to do instead of overwriting.
fn failed_write(error: FsError) -> ToolExecutionResult {
    match error {
        FsError::AlreadyExists { path } => ToolExecutionResult::tool_failed(format!(
            "File already exists: {} (write_file only creates new files; use edit_file to \
             change it)",
            escape_control(&path)
        )),
        other => failed(other),
    }
}

/// `rename_file` names the target in a clash.
fn failed_target(error: FsError) -> ToolExecutionResult {
    match error {
        FsError::AlreadyExists { path } => ToolExecutionResult::tool_failed(format!(
            "Target already exists: {}",
            escape_control(&path)
        )),
        other => failed(other),
    }
}

fn recorder_failed(error: RecorderError) -> ToolExecutionResult {
    ToolExecutionResult::tool_failed(format!("{error}; nothing was changed"))
}

/// The change happened but the checkpoint could not record its result: say so plainly, since a
/// retry would now fail or double the change.
fn recorded_late(path: &WorkspacePath, error: RecorderError) -> ToolExecutionResult {
    ToolExecutionResult::tool_failed(format!(
        "{path} was changed, but recording the change for undo failed ({error}); undo may not \
         cover it"
    ))
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;
    use std::sync::{Arc, Mutex};

    use clawsmith_protocol::{ToolExecutionContext, ToolStatus};

    use super::{EditError, EditFile, WriteFile, apply_edit};
    use crate::recorder::{ChangeOrigin, ChangeRecorder, PostState, PriorState, RecorderError};
    use crate::tools::FileTool;
    use crate::workspace::{FAIL_NEXT_WRITE, Workspace};

    fn check(content: &[u8], old: &str, new: &str, expected: Result<&[u8], EditError>) {
        let expected = expected.map(<[u8]>::to_vec);
        assert_eq!(
            apply_edit(content, old, new),
            expected,
            "{content:?} {old:?}"
        );
    }

    #[test]
    fn edit_table() {
        check(b"a b c", "b", "X", Ok(b"a X c"));
        check(b"a b b", "b", "X", Err(EditError::NotUnique(2)));
        check(b"aaa", "aa", "X", Err(EditError::NotUnique(2)));
        check(b"b b b b", "b", "X", Err(EditError::NotUnique(4)));
        check(b"abc", "z", "X", Err(EditError::NotFound));
        check(
            b"one\r\ntwo\r\nthree\r\n",
            "two\nthree",
            "2\n3",
            Ok(b"one\r\n2\r\n3\r\n"),
        );
        check(b"one\r\ntwo\r\n", "two\r\n", "2\r\n", Ok(b"one\r\n2\r\n"));
        check(b"mixed\r\nlf\n", "lf\n", "x\n", Ok(b"mixed\r\nx\n"));
        check(
            b"\xEF\xBB\xBFhead\nbody\n",
            "head",
            "HEAD",
            Ok(b"\xEF\xBB\xBFHEAD\nbody\n"),
        );
        check(
            b"\xEF\xBB\xBFa\r\nb\r\n",
            "a\nb",
            "c",
            Ok(b"\xEF\xBB\xBFc\r\n"),
        );
        check(b"\xff\xfe bin \xff", " bin ", "-", Ok(b"\xff\xfe-\xff"));
        check(b"x", "x", "", Ok(b""));
    }

    #[derive(Default)]
    struct Log(Mutex<Vec<String>>);

    impl ChangeRecorder for Log {
        fn before_change(
            &self,
            _: &ChangeOrigin,
            path: &str,
            _: &PriorState,
        ) -> Result<(), RecorderError> {
            self.0.lock().unwrap().push(format!("before {path}"));
            Ok(())
        }

        fn after_change(
            &self,
            _: &ChangeOrigin,
            path: &str,
            _: &PostState,
        ) -> Result<(), RecorderError> {
            self.0.lock().unwrap().push(format!("after {path}"));
            Ok(())
        }
    }

    fn entries(dir: &std::path::Path) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    fn inject_fault() {
        FAIL_NEXT_WRITE.with(|flag| flag.set(true));
    }

    /// F9: a write that fails after its temp file was written leaves no temp file, an untouched
    /// target, and a recorder that saw `before` but no `after`.
    #[test]
    fn failed_writes_leave_no_trace() {
        let temp = tempfile::tempdir().unwrap();
        let root = temp.path();
        std::fs::write(root.join("a.txt"), "original\r\n").unwrap();
        std::fs::set_permissions(root.join("a.txt"), std::fs::Permissions::from_mode(0o640))
            .unwrap();
        let workspace = Arc::new(Workspace::open(root).unwrap());
        let log = Arc::new(Log::default());
        let context = ToolExecutionContext::new("s", "t", "c");

        let write = WriteFile {
            workspace: workspace.clone(),
            recorder: log.clone(),
        };
        inject_fault();
        let input = super::WriteFileInput {
            path: "new.txt".to_owned(),
            content: "new".to_owned(),
        };
        let result = write.run(input, &context);
        assert_eq!(result.status(), ToolStatus::Error);
        assert_eq!(
            result.content,
            "Error: Cannot write new.txt: injected fault"
        );
        assert_eq!(entries(root), ["a.txt"]);

        let edit = EditFile {
            workspace: workspace.clone(),
            recorder: log.clone(),
        };
        inject_fault();
        let input = super::EditFileInput {
            path: "a.txt".to_owned(),
            old_text: "original".to_owned(),
            new_text: "changed".to_owned(),
            allow_read_only: false,
        };
        let result = edit.run(input, &context);
        assert_eq!(result.content, "Error: Cannot write a.txt: injected fault");
        assert_eq!(entries(root), ["a.txt"]);
        assert_eq!(std::fs::read(root.join("a.txt")).unwrap(), b"original\r\n");
        let mode = std::fs::metadata(root.join("a.txt"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o7777, 0o640);
        assert_eq!(*log.0.lock().unwrap(), ["before new.txt", "before a.txt"]);

        let path = workspace.resolve("a.txt").unwrap();
        inject_fault();
        assert!(
            workspace
                .restore_file(&path, b"restored", 0o600, false)
                .is_err()
        );
        let nested = workspace.resolve("x/y/z.txt").unwrap();
        inject_fault();
        assert!(workspace.restore_file(&nested, b"z", 0o600, true).is_err());
        assert_eq!(std::fs::read(root.join("a.txt")).unwrap(), b"original\r\n");
        assert!(entries(&root.join("x/y")).is_empty());

        // Without a fault the same calls succeed.
        let input = super::WriteFileInput {
            path: "new.txt".to_owned(),
            content: "new".to_owned(),
        };
        assert_eq!(write.run(input, &context).status(), ToolStatus::Success);
        assert_eq!(entries(root), ["a.txt", "new.txt", "x"]);
    }
}
