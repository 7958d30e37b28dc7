//! Language-server pairs: `lsp_diagnostics` through `clawsmith mcp` (the tool, its
//! sandboxed pylsp, the re-sync by content hash, the wait for the version sent) against the same
//! requests written straight to a `pylsp` process by a minimal LSP client — cold (first call:
//! the server starts) and warm (after an edit on disk).

use std::io::{BufRead, BufReader, Read, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::Instant;

use anyhow::{Context, Result, bail};
use serde_json::{Value, json};

use super::{McpClient, Options, Row, Target, Unit, alternate, have, tempdir};

const BROKEN: &str = "import os\n\nvalue = os.getcwd()\nprint(missing_name)\n";

/// A direct LSP client of `pylsp` over stdio (Content-Length framing), one request at a time.
struct Pylsp {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    next_id: u64,
}

impl Pylsp {
    fn start(root: &Path) -> Result<Pylsp> {
        let mut child = Command::new("pylsp")
            .current_dir(root)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .context("starting pylsp")?;
        let stdin = child.stdin.take().context("no stdin")?;
        let stdout = BufReader::new(child.stdout.take().context("no stdout")?);
        let mut server = Pylsp {
            child,
            stdin,
            stdout,
            next_id: 1,
        };
        let uri = format!("file://{}", root.display());
        server.request(
            "initialize",
            json!({"processId": null, "rootUri": uri, "capabilities": {}}),
        )?;
        server.send(json!({"jsonrpc": "2.0", "method": "initialized", "params": {}}))?;
        Ok(server)
    }

    fn send(&mut self, message: Value) -> Result<()> {
        let body = message.to_string();
        write!(self.stdin, "Content-Length: {}\r\n\r\n{body}", body.len())?;
        self.stdin.flush()?;
        Ok(())
    }

    fn read(&mut self) -> Result<Value> {
        let mut length = 0;
        loop {
            let mut line = String::new();
            if self.stdout.read_line(&mut line)? == 0 {
                bail!("pylsp closed its output");
            }
            let line = line.trim();
            if line.is_empty() {
                break;
            }
            if let Some(value) = line.strip_prefix("Content-Length:") {
                length = value.trim().parse()?;
            }
        }
        let mut body = vec![0u8; length];
        self.stdout.read_exact(&mut body)?;
        Ok(serde_json::from_slice(&body)?)
    }

    fn request(&mut self, method: &str, params: Value) -> Result<Value> {
        let id = self.next_id;
        self.next_id += 1;
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))?;
        loop {
            let message = self.read()?;
            if message.get("id").and_then(Value::as_u64) == Some(id)
                && message.get("method").is_none()
            {
                return Ok(message);
            }
        }
    }

    /// Sends `notification` and waits for the diagnostics of `uri` that follow it.
    fn diagnostics_after(&mut self, notification: Value, uri: &str) -> Result<usize> {
        self.send(notification)?;
        loop {
            let message = self.read()?;
            if message["method"] == "textDocument/publishDiagnostics"
                && message["params"]["uri"] == uri
            {
                return Ok(message["params"]["diagnostics"]
                    .as_array()
                    .map_or(0, Vec::len));
            }
        }
    }
}

impl Drop for Pylsp {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn clawsmith_mcp(bin: &Path, root: &Path) -> Result<McpClient> {
    let state = tempdir("lsp-state")?;
    let mut command = Command::new(bin);
    command
        .arg("--state-dir")
        .arg(&state)
        .args(["mcp", "--workspace"])
        .arg(root);
    let mut client = McpClient::spawn(command)?;
    client.request(
        "tools/call",
        json!({"name": "search_tools", "arguments": {"query": "type errors"}}),
    )?;
    Ok(client)
}

fn diagnostics_call(client: &mut McpClient, expected: &str) -> Result<()> {
    let result = client.request(
        "tools/call",
        json!({"name": "lsp_diagnostics", "arguments": {"path": "main.py"}}),
    )?;
    let text = result["content"][0]["text"].as_str().unwrap_or_default();
    if !text.contains(expected) {
        bail!("lsp_diagnostics answered {text:?}, expected {expected:?}");
    }
    Ok(())
}

pub(super) fn lsp_pairs(bin: &Path, data: &Path, options: &Options) -> Result<Vec<Row>> {
    if !have("pylsp") {
        bail!("pylsp is not installed (apt-get install python3-pylsp python3-pyflakes)");
    }
    let root = data.join("lsp");
    std::fs::create_dir_all(&root)?;
    let root = root.canonicalize()?;
    let file = root.join("main.py");
    let uri = format!("file://{}", file.display());
    let rounds = if options.quick {
        3
    } else {
        options.rounds().min(10)
    };

    // Cold: a fresh server answers the first diagnostics of the file.
    std::fs::write(&file, BROKEN)?;
    let (cold_ours, cold_theirs) = alternate(
        rounds,
        || {
            let mut client = clawsmith_mcp(bin, &root)?;
            let started = Instant::now();
            diagnostics_call(&mut client, "1 diagnostic")?;
            Ok(started.elapsed().as_secs_f64())
        },
        || {
            let started = Instant::now();
            let mut server = Pylsp::start(&root)?;
            let open = json!({"jsonrpc": "2.0", "method": "textDocument/didOpen", "params": {
                "textDocument": {"uri": uri, "languageId": "python", "version": 1, "text": BROKEN}}});
            server.diagnostics_after(open, &uri)?;
            Ok(started.elapsed().as_secs_f64())
        },
    )?;

    // Warm: the file changes on disk, then its diagnostics again (the same running servers).
    let mut client = clawsmith_mcp(bin, &root)?;
    diagnostics_call(&mut client, "1 diagnostic")?;
    let mut server = Pylsp::start(&root)?;
    let open = json!({"jsonrpc": "2.0", "method": "textDocument/didOpen", "params": {
        "textDocument": {"uri": uri, "languageId": "python", "version": 1, "text": BROKEN}}});
    server.diagnostics_after(open, &uri)?;
    let mut edits = 0u32;
    let mut version = 1;
    let (warm_ours, warm_theirs) = alternate(
        rounds * 3,
        || {
            edits += 1;
            std::fs::write(&file, format!("{BROKEN}# edit {edits}\n"))?;
            let started = Instant::now();
            diagnostics_call(&mut client, "1 diagnostic")?;
            Ok(started.elapsed().as_secs_f64())
        },
        || {
            version += 1;
            let text = format!("{BROKEN}# edit {version}\n");
            let started = Instant::now();
            let change = json!({"jsonrpc": "2.0", "method": "textDocument/didChange", "params": {
                "textDocument": {"uri": uri, "version": version},
                "contentChanges": [{"text": text}]}});
            server.diagnostics_after(change, &uri)?;
            Ok(started.elapsed().as_secs_f64())
        },
    )?;
    Ok(vec![
        Row {
            name: "lsp_diagnostics cold (pylsp starts)".into(),
            ours_label: "clawsmith mcp".into(),
            theirs_label: "pylsp direct".into(),
            ours: cold_ours,
            theirs: cold_theirs,
            target: Target::RatioAtMost(1.5),
            unit: Unit::Seconds,
            note:
                "ours: sandboxed spawn, initialize, didOpen read through the workspace, wait for \
                   the publish; theirs: the same messages from a bare client"
                    .into(),
        },
        Row {
            name: "lsp_diagnostics warm (after an edit on disk)".into(),
            ours_label: "clawsmith mcp".into(),
            theirs_label: "pylsp direct".into(),
            ours: warm_ours,
            theirs: warm_theirs,
            target: Target::RatioAtMost(1.2),
            unit: Unit::Seconds,
            note: "both wait for pylsp's debounced lint (0.5 s); ours also hashes the file and \
                   sends it whole"
                .into(),
        },
    ])
}
