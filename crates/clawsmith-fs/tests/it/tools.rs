//! Each tool's behaviour, limits at their exact boundaries, and its metadata.

use std::os::unix::fs::PermissionsExt;
use std::sync::Arc;

use clawsmith_fs::{ChangeRecorder, READ_MAX_BYTES, WRITE_MAX_BYTES};
use clawsmith_protocol::{
    Capability, CapabilityDeclaration, DisplayKind, ErrorCode, Risk, ToolExecutionContext,
    ToolStatus,
};
use serde_json::json;

use crate::support::{Fixture, Recording, Tools, short_hash};

#[test]
fn table_order_metadata_and_schemas() {
    let fixture = Fixture::new();
    let tools = Tools::new(&fixture);
    let names: Vec<&str> = tools.tools.iter().map(|tool| tool.name()).collect();
    assert_eq!(
        names,
        [
            "read_file",
            "search_files",
            "glob_files",
            "write_file",
            "edit_file",
            "rename_file",
            "delete_file"
        ]
    );
    let expected_properties: [(&str, &[&str], &[&str]); 7] = [
        ("read_file", &["limit", "offset", "path"], &["path"]),
        (
            "search_files",
            &[
                "caseSensitive",
                "glob",
                "maxResults",
                "path",
                "query",
                "regex",
            ],
            &["query"],
        ),
        ("glob_files", &["maxResults", "pattern"], &["pattern"]),
        ("write_file", &["content", "path"], &["content", "path"]),
        (
            "edit_file",
            &["allowReadOnly", "newText", "oldText", "path"],
            &["newText", "oldText", "path"],
        ),
        ("rename_file", &["from", "to"], &["from", "to"]),
        ("delete_file", &["path"], &["path"]),
    ];
    for (tool, (name, properties, required)) in tools.tools.iter().zip(expected_properties) {
        assert_eq!(tool.name(), name);
        let schema = tool.input_schema();
        let mut keys: Vec<&str> = schema["properties"]
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        keys.sort_unstable();
        assert_eq!(keys, properties, "{name}");
        let mut required_keys: Vec<&str> = schema["required"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap())
            .collect();
        required_keys.sort_unstable();
        assert_eq!(required_keys, required, "{name}");
        assert_eq!(schema["additionalProperties"], json!(false), "{name}");
        let writes = !matches!(name, "read_file" | "search_files" | "glob_files");
        assert_eq!(tool.concurrency_safe(), !writes, "{name}");
        if writes {
            assert_eq!(tool.risk(), Risk::WorkspaceWrite);
            assert_eq!(
                tool.capabilities(),
                CapabilityDeclaration::Declared(vec![
                    Capability::FilesystemRead,
                    Capability::FilesystemWrite
                ])
            );
        } else {
            assert_eq!(tool.risk(), Risk::Read);
            assert_eq!(
                tool.capabilities(),
                CapabilityDeclaration::Declared(vec![Capability::FilesystemRead])
            );
        }
        assert!(!tool.description().is_empty());
        // summarize never fails, even on nonsense.
        assert!(!tool.summarize(&json!({"nonsense": 1})).is_empty());
    }
    assert_eq!(
        tools.get("read_file").summarize(&json!({"path": "a.rs"})),
        "Read a.rs"
    );
}

#[test]
fn write_tools_require_authorization() {
    let fixture = Fixture::new();
    fixture.write("a.txt", "a");
    let tools = Tools::new(&fixture);
    let cases = [
        ("write_file", json!({"path": "b.txt", "content": "b"})),
        (
            "edit_file",
            json!({"path": "a.txt", "oldText": "a", "newText": "b"}),
        ),
        ("rename_file", json!({"from": "a.txt", "to": "c.txt"})),
        ("delete_file", json!({"path": "a.txt"})),
    ];
    for (name, input) in cases {
        let context = ToolExecutionContext::new("session-1", "turn-1", "call-1");
        let result = tools.call_with(name, input, context);
        assert_eq!(result.status(), ToolStatus::Denied);
        assert_eq!(result.code(), Some(&ErrorCode::PERMISSION_DENIED));
        assert_eq!(
            result.content,
            format!("Denied: Tool {name} requires explicit authorization")
        );
    }
    assert_eq!(fixture.read("a.txt"), b"a");
    assert!(!fixture.ws.join("b.txt").exists());
    // Read tools run without authorization.
    let context = ToolExecutionContext::new("session-1", "turn-1", "call-1");
    let result = tools.call_with("read_file", json!({"path": "a.txt"}), context);
    assert_eq!(result.content, "a");
}

#[test]
fn invalid_arguments_and_cancellation() {
    let fixture = Fixture::new();
    let tools = Tools::new(&fixture);
    let result = tools.call("read_file", json!({"path": "a", "bogus": true}));
    assert_eq!(result.code(), Some(&ErrorCode::INVALID_ARGUMENTS));
    let result = tools.call("read_file", json!({"path": "a", "offset": 0}));
    assert_eq!(result.code(), Some(&ErrorCode::INVALID_ARGUMENTS));
    let result = tools.call("search_files", json!({"query": ""}));
    assert_eq!(result.code(), Some(&ErrorCode::INVALID_ARGUMENTS));
    let result = tools.call("search_files", json!({"query": "(", "regex": true}));
    assert_eq!(result.code(), Some(&ErrorCode::INVALID_ARGUMENTS));
    let context = crate::support::authorized_context();
    context.cancellation.cancel();
    let result = tools.call_with("write_file", json!({"path": "x", "content": ""}), context);
    assert_eq!(result.status(), ToolStatus::Cancelled);
    assert!(!fixture.ws.join("x").exists());
}

#[test]
fn read_file_cap_boundaries() {
    let fixture = Fixture::new();
    fixture.write("exact.txt", "a".repeat(READ_MAX_BYTES));
    fixture.write("over.txt", "b".repeat(READ_MAX_BYTES + 1));
    fixture.write("big.txt", "c".repeat(1024 * 1024));
    let tools = Tools::new(&fixture);
    let marker = "[truncated: file is larger than 100000 bytes; use offset/limit to read more]";
    let exact = tools.ok("read_file", json!({"path": "exact.txt"}));
    assert_eq!(exact, "a".repeat(READ_MAX_BYTES));
    let over = tools.ok("read_file", json!({"path": "over.txt"}));
    assert_eq!(over, format!("{}\n{marker}", "b".repeat(READ_MAX_BYTES)));
    let big = tools.ok("read_file", json!({"path": "big.txt"}));
    assert_eq!(big, format!("{}\n{marker}", "c".repeat(READ_MAX_BYTES)));
    let result = tools.call("read_file", json!({"path": "big.txt"}));
    let display = result.metadata.display.unwrap();
    assert_eq!(display.kind, DisplayKind::Text);
    assert!(display.body.unwrap().len() <= clawsmith_protocol::DISPLAY_BODY_MAX_BYTES);
}

#[test]
fn read_file_text_forms() {
    let fixture = Fixture::new();
    fixture.write("empty.txt", "");
    fixture.write("binary.bin", b"abc\0def");
    fixture.write("latin1.txt", b"caf\xe9\n");
    // A multi-byte character cut by the cap is dropped, not shown as U+FFFD.
    let mut cut = "x".repeat(READ_MAX_BYTES - 1);
    cut.push('é');
    fixture.write("cut.txt", &cut);
    let lines: String = (1..=10).map(|n| format!("line {n}\n")).collect();
    fixture.write("lines.txt", &lines);
    let tools = Tools::new(&fixture);
    assert_eq!(
        tools.ok("read_file", json!({"path": "empty.txt"})),
        "[empty file]"
    );
    assert_eq!(
        tools.fails("read_file", json!({"path": "binary.bin"})),
        "Cannot read binary.bin: it is a binary file (NUL byte in the first 8 KiB)"
    );
    // The probe is the first 8 KiB exactly, whether the whole head or a window is read.
    let mut last_probed = vec![b'a'; 8 * 1024];
    last_probed[8 * 1024 - 1] = 0;
    fixture.write("nul_at_8191.bin", &last_probed);
    let mut past_probe = vec![b'a'; 8 * 1024 + 1];
    past_probe[8 * 1024] = 0;
    fixture.write("nul_at_8192.txt", &past_probe);
    for arguments in [
        json!({"path": "nul_at_8191.bin"}),
        json!({"path": "nul_at_8191.bin", "offset": 1}),
        json!({"path": "binary.bin", "limit": 1}),
    ] {
        let path = arguments["path"].as_str().unwrap().to_owned();
        assert_eq!(
            tools.fails("read_file", arguments),
            format!("Cannot read {path}: it is a binary file (NUL byte in the first 8 KiB)")
        );
    }
    let read = tools.ok("read_file", json!({"path": "nul_at_8192.txt"}));
    assert!(
        read.starts_with("aaaa") && read.contains('\0'),
        "{}",
        read.len()
    );
    let window = tools.ok("read_file", json!({"path": "nul_at_8192.txt", "limit": 1}));
    assert!(window.starts_with("aaaa") && window.contains('\0'));
    assert_eq!(
        tools.ok("read_file", json!({"path": "latin1.txt"})),
        "caf\u{FFFD}\n[note: the file is not valid UTF-8; invalid bytes are shown as U+FFFD]"
    );
    let cut_read = tools.ok("read_file", json!({"path": "cut.txt"}));
    assert!(cut_read.starts_with(&"x".repeat(READ_MAX_BYTES - 1)));
    assert!(!cut_read.contains('\u{FFFD}'));
    assert!(cut_read.ends_with("use offset/limit to read more]"));
    assert_eq!(
        tools.ok(
            "read_file",
            json!({"path": "lines.txt", "offset": 3, "limit": 2})
        ),
        "line 3\nline 4\n[showing lines 3-4; more lines follow: use offset=5 to continue]"
    );
    assert_eq!(
        tools.ok("read_file", json!({"path": "lines.txt", "offset": 9})),
        "line 9\nline 10\n"
    );
    assert_eq!(
        tools.ok("read_file", json!({"path": "lines.txt", "limit": 1})),
        "line 1\n[showing lines 1-1; more lines follow: use offset=2 to continue]"
    );
    assert_eq!(
        tools.ok("read_file", json!({"path": "lines.txt", "offset": 50})),
        "[offset 50 is past the end of the file (10 lines)]"
    );
    assert_eq!(
        tools.fails("read_file", json!({"path": "missing.txt"})),
        "File not found: missing.txt"
    );
    std::fs::create_dir(fixture.ws.join("dir")).unwrap();
    assert_eq!(
        tools.fails("read_file", json!({"path": "dir"})),
        "Not a regular file: dir"
    );
}

#[test]
fn read_file_refuses_fifo_without_blocking() {
    let fixture = Fixture::new();
    rustix::fs::mknodat(
        rustix::fs::CWD,
        fixture.ws.join("pipe"),
        rustix::fs::FileType::Fifo,
        rustix::fs::Mode::from_raw_mode(0o644),
        0,
    )
    .unwrap();
    let tools = Tools::new(&fixture);
    assert_eq!(
        tools.fails("read_file", json!({"path": "pipe"})),
        "Not a regular file: pipe"
    );
    assert_eq!(
        tools.ok("search_files", json!({"query": "pipe"})),
        "No results for \"pipe\".\n[skipped pipe: not a regular file (a FIFO)]"
    );
}

#[test]
fn write_file_rules() {
    let fixture = Fixture::new();
    fixture.write("exists.txt", "old");
    let tools = Tools::new(&fixture);
    assert_eq!(
        tools.ok(
            "write_file",
            json!({"path": "new.txt", "content": "one\ntwo\n"})
        ),
        "Created new.txt (8 bytes, 2 lines)."
    );
    assert_eq!(fixture.read("new.txt"), b"one\ntwo\n");
    assert_eq!(
        tools.fails("write_file", json!({"path": "exists.txt", "content": "x"})),
        "File already exists: exists.txt (write_file only creates new files; use edit_file to change it)"
    );
    assert_eq!(fixture.read("exists.txt"), b"old");
    assert_eq!(
        tools.fails(
            "write_file",
            json!({"path": "no/such/dir.txt", "content": "x"})
        ),
        "Parent directory does not exist: no/such"
    );
    let exact = "m".repeat(WRITE_MAX_BYTES);
    tools.ok("write_file", json!({"path": "mib.txt", "content": exact}));
    assert_eq!(fixture.read("mib.txt").len(), WRITE_MAX_BYTES);
    let over = "m".repeat(WRITE_MAX_BYTES + 1);
    assert_eq!(
        tools.fails("write_file", json!({"path": "over.txt", "content": over})),
        "Content is too large: 1048577 bytes (limit 1048576 bytes)"
    );
    assert!(!fixture.ws.join("over.txt").exists());
    let result = tools.call("write_file", json!({"path": "d.txt", "content": "hi\n"}));
    let display = result.metadata.display.unwrap();
    assert_eq!(display.kind, DisplayKind::Diff);
    assert!(display.body.unwrap().contains("+hi"));
    assert!(fixture.temp_files().is_empty());
}

#[test]
fn edit_file_rules() {
    let fixture = Fixture::new();
    fixture.write("a.txt", "alpha\nbeta\nbeta\ngamma\n");
    fixture.write("crlf.txt", "\u{FEFF}one\r\ntwo\r\n");
    std::fs::set_permissions(
        fixture.ws.join("crlf.txt"),
        std::fs::Permissions::from_mode(0o751),
    )
    .unwrap();
    let tools = Tools::new(&fixture);
    let edit =
        |path: &str, old: &str, new: &str| json!({"path": path, "oldText": old, "newText": new});
    assert_eq!(
        tools.fails("edit_file", edit("a.txt", "delta", "x")),
        "The old text was not found"
    );
    assert_eq!(
        tools.fails("edit_file", edit("a.txt", "beta", "x")),
        "The old text must occur exactly once; provide more surrounding context (it occurs 2 \
         times in a.txt: include neighbouring lines so oldText matches one place, or choose a \
         string unique in the file)"
    );
    assert_eq!(fixture.read("a.txt"), b"alpha\nbeta\nbeta\ngamma\n");
    tools.ok("edit_file", edit("a.txt", "beta\ngamma", "BETA\nGAMMA"));
    assert_eq!(fixture.read("a.txt"), b"alpha\nbeta\nBETA\nGAMMA\n");
    let result = tools.call("edit_file", edit("a.txt", "alpha", "ALPHA"));
    let display = result.metadata.display.unwrap();
    assert_eq!(display.kind, DisplayKind::Diff);
    let body = display.body.unwrap();
    assert!(body.contains("-alpha") && body.contains("+ALPHA"), "{body}");
    // CRLF, BOM and mode are kept.
    tools.ok("edit_file", edit("crlf.txt", "one\ntwo", "1\n2\n3"));
    assert_eq!(
        fixture.read("crlf.txt"),
        "\u{FEFF}1\r\n2\r\n3\r\n".as_bytes()
    );
    let mode = std::fs::metadata(fixture.ws.join("crlf.txt"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o7777, 0o751);
    // The result cap is exact.
    fixture.write("grow.txt", "x");
    tools.ok(
        "edit_file",
        edit("grow.txt", "x", &"y".repeat(WRITE_MAX_BYTES)),
    );
    fixture.write("grow2.txt", "x");
    assert_eq!(
        tools.fails(
            "edit_file",
            edit("grow2.txt", "x", &"y".repeat(WRITE_MAX_BYTES + 1))
        ),
        "The edited file would be too large: 1048577 bytes (limit 1048576 bytes)"
    );
    assert_eq!(fixture.read("grow2.txt"), b"x");
    fixture.write("huge.txt", "z".repeat(WRITE_MAX_BYTES + 2));
    assert_eq!(
        tools.fails("edit_file", edit("huge.txt", "z", "")),
        "File is too large (1048578 bytes; limit 1048577 bytes): huge.txt"
    );
    fixture.write(
        "shrink.txt",
        format!("{}{}", "a".repeat(WRITE_MAX_BYTES), "bb"),
    );
    tools.ok("edit_file", edit("shrink.txt", "bb", ""));
    assert_eq!(fixture.read("shrink.txt").len(), WRITE_MAX_BYTES);
    assert_eq!(
        tools.fails("edit_file", edit("none.txt", "a", "b")),
        "File not found: none.txt"
    );
    assert!(fixture.temp_files().is_empty());
}

#[test]
fn rename_and_delete_rules() {
    let fixture = Fixture::new();
    fixture.write("a.txt", "A");
    fixture.write("b.txt", "B");
    fixture.write("dir/inner.txt", "I");
    let tools = Tools::new(&fixture);
    let rename = |from: &str, to: &str| json!({"from": from, "to": to});
    assert_eq!(
        tools.fails("rename_file", rename("a.txt", "b.txt")),
        "Target already exists: b.txt"
    );
    assert_eq!(
        tools.fails("rename_file", rename("dir", "d2")),
        "Not a regular file: dir"
    );
    assert_eq!(
        tools.fails("rename_file", rename("a.txt", "nope/a.txt")),
        "Parent directory does not exist: nope"
    );
    assert_eq!(
        tools.fails("rename_file", rename("a.txt", "./a.txt")),
        "Source and target are the same path: a.txt"
    );
    assert_eq!(
        tools.ok("rename_file", rename("a.txt", "dir/a.txt")),
        "Renamed a.txt to dir/a.txt."
    );
    assert_eq!(fixture.read("dir/a.txt"), b"A");
    assert_eq!(fixture.read("b.txt"), b"B");
    assert_eq!(
        tools.fails("delete_file", json!({"path": "dir"})),
        "Not a regular file: dir (delete_file removes regular files only, never folders)"
    );
    assert!(fixture.ws.join("dir/inner.txt").exists());
    assert_eq!(
        tools.ok("delete_file", json!({"path": "b.txt"})),
        "Deleted b.txt (1 bytes)."
    );
    assert!(!fixture.ws.join("b.txt").exists());
    assert_eq!(
        tools.fails("delete_file", json!({"path": "b.txt"})),
        "File not found: b.txt"
    );
}

#[test]
fn recorder_sees_every_change_in_order() {
    let fixture = Fixture::new();
    fixture.write("e.txt", "old\n");
    std::fs::set_permissions(
        fixture.ws.join("e.txt"),
        std::fs::Permissions::from_mode(0o644),
    )
    .unwrap();
    let recording = Arc::new(Recording::default());
    let tools = Tools::with_recorder(&fixture, recording.clone() as Arc<dyn ChangeRecorder>);
    let umask_mode = std::fs::metadata(fixture.ws.join("e.txt"))
        .unwrap()
        .permissions()
        .mode()
        & 0o7777;

    tools.ok("write_file", json!({"path": "./w.txt", "content": "new"}));
    let w_mode = std::fs::metadata(fixture.ws.join("w.txt"))
        .unwrap()
        .permissions()
        .mode()
        & 0o7777;
    assert_eq!(
        recording.take(),
        [
            "before w.txt absent".to_owned(),
            format!("after w.txt file {} 3 {w_mode:o}", short_hash(b"new")),
        ]
    );
    tools.ok(
        "edit_file",
        json!({"path": "e.txt", "oldText": "old", "newText": "NEW"}),
    );
    assert_eq!(
        recording.take(),
        [
            format!("before e.txt file \"old\\n\" {umask_mode:o}"),
            format!("after e.txt file {} 4 {umask_mode:o}", short_hash(b"NEW\n")),
        ]
    );
    std::fs::create_dir(fixture.ws.join("sub")).unwrap();
    tools.ok("rename_file", json!({"from": "e.txt", "to": "sub/e.txt"}));
    assert_eq!(
        recording.take(),
        [
            format!("before e.txt file \"NEW\\n\" {umask_mode:o}"),
            "before sub/e.txt absent".to_owned(),
            "after e.txt absent".to_owned(),
            format!(
                "after sub/e.txt file {} 4 {umask_mode:o}",
                short_hash(b"NEW\n")
            ),
        ]
    );
    tools.ok(
        "delete_file",
        json!({"path": format!("{}/sub/e.txt", fixture.ws.display())}),
    );
    assert_eq!(
        recording.take(),
        [
            format!("before sub/e.txt file \"NEW\\n\" {umask_mode:o}"),
            "after sub/e.txt absent".to_owned(),
        ]
    );
    // Failures before the change is reported never reach the recorder.
    tools.fails("write_file", json!({"path": "w.txt", "content": "x"}));
    tools.fails(
        "edit_file",
        json!({"path": "w.txt", "oldText": "zzz", "newText": "x"}),
    );
    assert!(recording.take().is_empty());
}

#[test]
fn a_failing_recorder_stops_or_reports_the_change() {
    let fixture = Fixture::new();
    fixture.write("keep.txt", "keep");
    let recording = Arc::new(Recording::default());
    let tools = Tools::with_recorder(&fixture, recording.clone() as Arc<dyn ChangeRecorder>);
    *recording.fail_before.lock().unwrap() = true;
    let cases = [
        ("write_file", json!({"path": "n.txt", "content": "x"})),
        (
            "edit_file",
            json!({"path": "keep.txt", "oldText": "keep", "newText": "x"}),
        ),
        (
            "rename_file",
            json!({"from": "keep.txt", "to": "moved.txt"}),
        ),
        ("delete_file", json!({"path": "keep.txt"})),
    ];
    for (name, input) in cases {
        let message = tools.fails(name, input);
        assert!(message.ends_with("; nothing was changed"), "{message}");
        assert!(
            message.starts_with("checkpoint recorder failed for "),
            "{message}"
        );
    }
    assert_eq!(fixture.read("keep.txt"), b"keep");
    assert!(!fixture.ws.join("n.txt").exists() && !fixture.ws.join("moved.txt").exists());
    assert!(fixture.temp_files().is_empty());
    *recording.fail_before.lock().unwrap() = false;
    *recording.fail_after.lock().unwrap() = true;
    let message = tools.fails("write_file", json!({"path": "n.txt", "content": "x"}));
    assert!(
        message.starts_with("n.txt was changed, but recording the change for undo failed"),
        "{message}"
    );
}
