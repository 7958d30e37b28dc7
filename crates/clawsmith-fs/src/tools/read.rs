//! `read_file` (F2).

use std::fs::File;
use std::io::{self, BufRead, BufReader, Read};
use std::sync::Arc;

use clawsmith_protocol::{Display, DisplayKind, ToolExecutionContext, ToolExecutionResult};
use schemars::JsonSchema;
use serde::Deserialize;

use super::{FileTool, invalid_arguments, resolve_file};
use crate::escape::escape_control;
use crate::workspace::{Workspace, WorkspacePath};

/// At most this many bytes of a file reach the model per call; one more byte is read only to know
/// that the file was truncated.
pub const READ_MAX_BYTES: usize = 100_000;

/// A NUL byte in this many leading bytes marks a file as binary.
const BINARY_PROBE_BYTES: usize = 8 * 1024;

/// Arguments of `read_file`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ReadFileInput {
    /// Path of the file: relative to the workspace root, or absolute inside it.
    pub path: String,
    /// First line to return (1-based). Use with `limit` to page through large files.
    #[serde(default)]
    #[schemars(range(min = 1))]
    pub offset: Option<u64>,
    /// Number of lines to return.
    #[serde(default)]
    #[schemars(range(min = 1))]
    pub limit: Option<u64>,
}

pub(super) struct ReadFile {
    pub(super) workspace: Arc<Workspace>,
}

impl FileTool for ReadFile {
    type Input = ReadFileInput;
    const NAME: &'static str = "read_file";
    const DESCRIPTION: &'static str = "Read a text file in the workspace. Returns at most 100000 \
        bytes; larger files are truncated with a marker, and `offset`/`limit` (1-based lines) read \
        any window. Binary files are refused.";
    const WRITES: bool = false;

    fn summarize(input: &ReadFileInput) -> String {
        match (input.offset, input.limit) {
            (None, None) => format!("Read {}", escape_control(&input.path)),
            (offset, Some(limit)) => {
                let first = offset.unwrap_or(1);
                let last = first.saturating_add(limit).saturating_sub(1);
                format!(
                    "Read {} (lines {first}-{last})",
                    escape_control(&input.path)
                )
            }
            (Some(offset), None) => {
                format!("Read {} (from line {offset})", escape_control(&input.path))
            }
        }
    }

    fn run(&self, input: ReadFileInput, _context: &ToolExecutionContext) -> ToolExecutionResult {
        if input.offset == Some(0) {
            return invalid_arguments("offset is 1-based and must be at least 1");
        }
        if input.limit == Some(0) {
            return invalid_arguments("limit must be at least 1");
        }
        let path = match resolve_file(&self.workspace, &input.path) {
            Ok(path) => path,
            Err(refusal) => return refusal,
        };
        let (file, size) = match self.workspace.open_for_read(&path) {
            Ok(opened) => opened,
            Err(error) => return super::fs_failure(error),
        };
        match read(&file, size, &path, &input) {
            Ok(result) => result,
            Err(error) => ToolExecutionResult::tool_failed(format!("Cannot read {path}: {error}")),
        }
    }
}

fn read(
    file: &File,
    size: u64,
    path: &WorkspacePath,
    input: &ReadFileInput,
) -> io::Result<ToolExecutionResult> {
    let binary = || {
        Ok(ToolExecutionResult::tool_failed(format!(
            "Cannot read {path}: it is a binary file (NUL byte in the first 8 KiB)"
        )))
    };
    let windowed = input.offset.is_some() || input.limit.is_some();
    let (bytes, mut notes) = if windowed {
        match read_lines(file, input.offset.unwrap_or(1), input.limit)? {
            Some(window) => window,
            None => return binary(),
        }
    } else {
        // The head read holds the probe's bytes: the file is read once.
        let (bytes, notes) = read_head(file, size)?;
        if bytes[..bytes.len().min(BINARY_PROBE_BYTES)].contains(&0) {
            return binary();
        }
        (bytes, notes)
    };
    let (mut text, lossy) = decode(bytes);
    if lossy {
        notes.insert(
            0,
            "[note: the file is not valid UTF-8; invalid bytes are shown as U+FFFD]".to_owned(),
        );
    }
    // The display keeps only what it can show; the model's copy is `text`.
    let body = super::clip(&text, clawsmith_protocol::DISPLAY_BODY_MAX_BYTES);
    if text.is_empty() && notes.is_empty() {
        text.push_str("[empty file]");
    }
    for note in &notes {
        if !text.is_empty() && !text.ends_with('\n') {
            text.push('\n');
        }
        text.push_str(note);
    }
    let display = Display::new(DisplayKind::Text)
        .with_title(format!("read {path}"))
        .with_body(body)
        .with_field("size", format!("{size} bytes"))
        .with_field(
            "truncated",
            notes.iter().any(|n| n.starts_with("[truncated")),
        );
    Ok(ToolExecutionResult::success(text).with_display(display))
}

/// Lines `offset..offset+limit` of a text file, or `None` for a binary one (a NUL byte in the
/// first [`BINARY_PROBE_BYTES`]). The window is read on from the probe's bytes: the head is read
/// once, and the lines shown begin with the bytes the probe looked at.
fn read_lines(
    file: &File,
    offset: u64,
    limit: Option<u64>,
) -> io::Result<Option<(Vec<u8>, Vec<String>)>> {
    let head = read_probe(file)?;
    if head.contains(&0) {
        return Ok(None);
    }
    read_window(io::Cursor::new(head).chain(file), offset, limit).map(Some)
}

/// The first [`BINARY_PROBE_BYTES`] bytes (fewer only at the end of the file), read from the
/// file's position, which is left just after them.
fn read_probe(file: &File) -> io::Result<Vec<u8>> {
    let mut head = Vec::with_capacity(BINARY_PROBE_BYTES);
    file.take(BINARY_PROBE_BYTES as u64)
        .read_to_end(&mut head)?;
    Ok(head)
}

/// The first [`READ_MAX_BYTES`] bytes, reading one more only to learn whether there is more.
/// `size` (the file's size when it was opened) only sizes the buffer: a file that grew since
/// is read as far as it goes, one that shrank as far as it still goes. An unchanged file takes
/// two `read` calls: one of `size + 1` bytes that comes back short, and one that returns 0
/// (a short read alone does not prove the end on every filesystem, so the end is always an
/// empty read; `read_to_end` takes three, the first capped at 8 KiB).
fn read_head(file: &File, size: u64) -> io::Result<(Vec<u8>, Vec<String>)> {
    const CAP: usize = READ_MAX_BYTES + 1;
    let expected = usize::try_from(size).map_or(CAP, |size| size.saturating_add(1).min(CAP));
    let mut bytes = vec![0; expected];
    let mut filled = 0;
    loop {
        if filled == bytes.len() {
            if filled == CAP {
                break;
            }
            // The file grew since it was opened: make room for the rest, up to the cap.
            bytes.resize(filled.saturating_mul(2).clamp(BINARY_PROBE_BYTES, CAP), 0);
        }
        match (&*file).read(&mut bytes[filled..]) {
            Ok(0) => break,
            Ok(read) => filled += read,
            Err(error) if error.kind() == io::ErrorKind::Interrupted => {}
            Err(error) => return Err(error),
        }
    }
    bytes.truncate(filled);
    let mut notes = Vec::new();
    if bytes.len() > READ_MAX_BYTES {
        bytes.truncate(READ_MAX_BYTES);
        trim_incomplete_char(&mut bytes);
        notes.push(format!(
            "[truncated: file is larger than {READ_MAX_BYTES} bytes; use offset/limit to read more]"
        ));
    }
    Ok((bytes, notes))
}

/// Lines `offset..offset+limit` of `file` (read from its start), never more than
/// [`READ_MAX_BYTES`] bytes of them.
fn read_window(
    file: impl Read,
    offset: u64,
    limit: Option<u64>,
) -> io::Result<(Vec<u8>, Vec<String>)> {
    let mut reader = BufReader::with_capacity(64 * 1024, file);
    // Skip the lines before the window without keeping them.
    let mut line = 1;
    while line < offset {
        let buffer = reader.fill_buf()?;
        if buffer.is_empty() {
            break;
        }
        match buffer.iter().position(|&byte| byte == b'\n') {
            Some(index) => {
                reader.consume(index + 1);
                line += 1;
            }
            None => {
                let length = buffer.len();
                reader.consume(length);
            }
        }
    }
    let mut bytes = Vec::new();
    let mut notes = Vec::new();
    if line < offset {
        notes.push(format!(
            "[offset {offset} is past the end of the file ({} lines)]",
            line - 1
        ));
        return Ok((bytes, notes));
    }
    let mut taken = 0u64;
    let mut truncated = false;
    while limit.is_none_or(|limit| taken < limit) {
        let buffer = reader.fill_buf()?;
        if buffer.is_empty() {
            break;
        }
        let (length, ends_line) = match buffer.iter().position(|&byte| byte == b'\n') {
            Some(index) => (index + 1, true),
            None => (buffer.len(), false),
        };
        if bytes.len() + length > READ_MAX_BYTES {
            let room = READ_MAX_BYTES - bytes.len();
            bytes.extend_from_slice(&buffer[..room]);
            trim_incomplete_char(&mut bytes);
            truncated = true;
            break;
        }
        bytes.extend_from_slice(&buffer[..length]);
        reader.consume(length);
        if ends_line {
            taken += 1;
        }
    }
    let partial_last_line = !bytes.is_empty() && !bytes.ends_with(b"\n");
    let shown = taken + u64::from(partial_last_line && !truncated);
    let more = truncated || !reader.fill_buf()?.is_empty();
    if truncated {
        notes.push(format!(
            "[truncated: the requested lines exceed {READ_MAX_BYTES} bytes; use a smaller limit]"
        ));
    } else if more {
        let next = offset + shown;
        notes.push(format!(
            "[showing lines {offset}-{}; more lines follow: use offset={next} to continue]",
            next - 1
        ));
    }
    Ok((bytes, notes))
}

/// Drops a UTF-8 sequence cut in half at the end (a cut, not an encoding error).
fn trim_incomplete_char(bytes: &mut Vec<u8>) {
    if let Err(error) = std::str::from_utf8(bytes)
        && error.error_len().is_none()
    {
        bytes.truncate(error.valid_up_to());
    }
}

/// UTF-8 text, lossily when needed; the flag says whether anything was replaced.
fn decode(bytes: Vec<u8>) -> (String, bool) {
    match String::from_utf8(bytes) {
        Ok(text) => (text, false),
        Err(error) => (String::from_utf8_lossy(error.as_bytes()).into_owned(), true),
    }
}

#[cfg(test)]
mod tests {
    use std::io::{Seek, Write};

    use super::{BINARY_PROBE_BYTES, READ_MAX_BYTES, read_head, read_lines};

    /// Reads a file of `length` bytes as if it had been `size_at_open` bytes when opened (it grew
    /// or shrank in between): everything there is comes back, capped at [`READ_MAX_BYTES`] with
    /// the truncation note.
    fn check(length: usize, size_at_open: u64) {
        let content: Vec<u8> = (0..length).map(|index| b'a' + (index % 26) as u8).collect();
        let mut file = tempfile::tempfile().expect("temp file");
        file.write_all(&content).expect("write");
        file.rewind().expect("rewind");
        let (bytes, notes) = read_head(&file, size_at_open).expect("read");
        let shown = length.min(READ_MAX_BYTES);
        assert_eq!(
            bytes,
            content[..shown],
            "{length} bytes, {size_at_open} at open"
        );
        assert_eq!(
            notes.len(),
            usize::from(length > READ_MAX_BYTES),
            "{length} bytes, {size_at_open} at open: {notes:?}"
        );
    }

    #[test]
    fn a_file_that_changed_size_since_it_was_opened_is_read_as_it_is() {
        for (length, size_at_open) in [
            (0, 0),
            (10_240, 10_240),
            (10_240, 0),
            (10_240, 1),
            (10_240, 9_000),
            (1, 10_240),
            (0, 10_240),
            (READ_MAX_BYTES, READ_MAX_BYTES as u64),
            (READ_MAX_BYTES + 1, READ_MAX_BYTES as u64 + 1),
            (READ_MAX_BYTES + 1, 10),
            (3 * READ_MAX_BYTES, 0),
            (3 * READ_MAX_BYTES, u64::MAX),
        ] {
            check(length, size_at_open);
        }
    }

    /// A file of `lines` whose lengths vary so that line ends fall before, on and after the
    /// probe's end.
    fn lined_file(lines: &[Vec<u8>]) -> std::fs::File {
        let mut file = tempfile::tempfile().expect("temp file");
        for line in lines {
            file.write_all(line).expect("write");
        }
        file.rewind().expect("rewind");
        file
    }

    /// Windows read on from the probe's bytes give exactly the lines asked for, wherever the
    /// window and the lines fall against the probe's end; a NUL past the probe is text, one
    /// inside it makes the file binary.
    #[test]
    fn windows_read_on_from_the_probe_are_the_lines_asked_for() {
        let lines: Vec<Vec<u8>> = (0..90)
            .map(|index| {
                let mut line = vec![b'a' + (index % 26) as u8; 1 + (index * 37) % 400];
                line.push(b'\n');
                line
            })
            .collect();
        let total: usize = lines.iter().map(Vec::len).sum();
        assert!(total > 2 * BINARY_PROBE_BYTES, "the file spans the probe");
        for offset in 1..=lines.len() as u64 + 1 {
            for limit in [Some(1), Some(7), Some(40), None] {
                let file = lined_file(&lines);
                let (bytes, _) = read_lines(&file, offset, limit)
                    .expect("read")
                    .expect("text");
                let first = (offset - 1) as usize;
                let end = limit.map_or(lines.len(), |limit| {
                    (first + limit as usize).min(lines.len())
                });
                let expected: Vec<u8> = lines[first.min(lines.len())..end]
                    .iter()
                    .flatten()
                    .copied()
                    .collect();
                assert_eq!(bytes, expected, "offset {offset}, limit {limit:?}");
            }
        }
        let mut late_nul = lines.clone();
        late_nul[60][0] = 0;
        let file = lined_file(&late_nul);
        let (bytes, _) = read_lines(&file, 61, Some(1))
            .expect("read")
            .expect("a NUL past the probe is text");
        assert_eq!(bytes, late_nul[60]);
        let mut early_nul = lines;
        early_nul[2][0] = 0;
        let file = lined_file(&early_nul);
        assert!(
            read_lines(&file, 60, Some(1)).expect("read").is_none(),
            "a NUL in the probe makes the file binary, whatever the window"
        );
    }
}
