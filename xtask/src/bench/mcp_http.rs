//! `read_file` round trips through `clawsmith mcp --http` against the same calls over stdio: what
//! the Streamable HTTP transport and its guard cost a call. One keep-alive connection, as an MCP
//! client keeps; each answer is an event stream read to its end.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Instant;

use anyhow::{Context, Result, bail};
use serde_json::{Value, json};

use super::{McpClient, Options, Row, Target, Unit, alternate, tempdir};

const TOKEN: &str = "bench-token-0123456789abcdef";

/// A `clawsmith mcp --http 127.0.0.1:0` and one connection to it.
struct HttpClient {
    child: Child,
    port: u16,
    stream: BufReader<TcpStream>,
    session: Option<String>,
    next_id: u64,
}

impl HttpClient {
    fn start(bin: &Path, state: &Path, workspace: &Path) -> Result<HttpClient> {
        let mut child = Command::new(bin)
            .arg("--state-dir")
            .arg(state)
            .args(["mcp", "--workspace"])
            .arg(workspace)
            .args(["--http", "127.0.0.1:0"])
            .env("CLAWSMITH_MCP_TOKEN", TOKEN)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .context("starting clawsmith mcp --http")?;
        let mut stderr = BufReader::new(child.stderr.take().context("no stderr")?);
        let mut line = String::new();
        let port = loop {
            line.clear();
            if stderr.read_line(&mut line)? == 0 {
                bail!("clawsmith mcp --http ended before serving");
            }
            if let Some(rest) = line.split("http://127.0.0.1:").nth(1) {
                break rest
                    .split('/')
                    .next()
                    .and_then(|port| port.parse::<u16>().ok())
                    .context("no port in the serving line")?;
            }
        };
        std::thread::spawn(move || std::io::copy(&mut stderr, &mut std::io::sink()));
        let stream = TcpStream::connect(("127.0.0.1", port))?;
        stream.set_nodelay(true)?;
        let stream = BufReader::new(stream);
        let mut client = HttpClient {
            child,
            port,
            stream,
            session: None,
            next_id: 1,
        };
        client.request(
            "initialize",
            json!({"protocolVersion": "2025-06-18", "capabilities": {},
                   "clientInfo": {"name": "clawsmith-bench", "version": "0"}}),
        )?;
        client.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))?;
        Ok(client)
    }

    /// POSTs `message`; the answer's JSON-RPC messages (none for a notification).
    fn send(&mut self, message: &Value) -> Result<Vec<Value>> {
        let body = message.to_string();
        let mut head = format!(
            "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nAuthorization: Bearer {TOKEN}\r\n\
             Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n\
             Content-Length: {}\r\n",
            self.port,
            body.len()
        );
        if let Some(session) = &self.session {
            head.push_str(&format!("Mcp-Session-Id: {session}\r\n"));
        }
        head.push_str("\r\n");
        head.push_str(&body);
        self.stream.get_mut().write_all(head.as_bytes())?;
        let mut status = String::new();
        self.stream.read_line(&mut status)?;
        if !status.starts_with("HTTP/1.1 2") {
            bail!("the server answered {}", status.trim());
        }
        let (mut chunked, mut length) = (false, 0usize);
        loop {
            let mut line = String::new();
            self.stream.read_line(&mut line)?;
            let line = line.trim_end();
            if line.is_empty() {
                break;
            }
            let Some((name, value)) = line.split_once(':') else {
                continue;
            };
            let value = value.trim();
            match name.to_ascii_lowercase().as_str() {
                "transfer-encoding" => chunked = value.eq_ignore_ascii_case("chunked"),
                "content-length" => length = value.parse().unwrap_or(0),
                "mcp-session-id" => self.session = Some(value.to_owned()),
                _ => {}
            }
        }
        let mut body = Vec::new();
        if chunked {
            loop {
                let mut size = String::new();
                self.stream.read_line(&mut size)?;
                let size = usize::from_str_radix(size.trim(), 16).context("a chunk size")?;
                let mut chunk = vec![0; size + 2];
                self.stream.read_exact(&mut chunk)?;
                if size == 0 {
                    break;
                }
                body.extend_from_slice(&chunk[..size]);
            }
        } else {
            body.resize(length, 0);
            self.stream.read_exact(&mut body)?;
        }
        let text = String::from_utf8_lossy(&body);
        let text = text.as_ref();
        if text.trim_start().starts_with('{') {
            return Ok(vec![serde_json::from_str(text)?]);
        }
        Ok(text
            .lines()
            .filter_map(|line| line.strip_prefix("data: "))
            .filter_map(|data| serde_json::from_str(data).ok())
            .collect())
    }

    fn request(&mut self, method: &str, params: Value) -> Result<Value> {
        let id = self.next_id;
        self.next_id += 1;
        let messages =
            self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))?;
        let answer = messages
            .into_iter()
            .find(|message| message.get("id").and_then(Value::as_u64) == Some(id))
            .with_context(|| format!("no answer to {method}"))?;
        if let Some(error) = answer.get("error") {
            bail!("{method} failed: {error}");
        }
        Ok(answer["result"].clone())
    }
}

impl Drop for HttpClient {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The row: the same `read_file` of a 10 KB file, over HTTP and over stdio, alternated.
pub fn http_vs_stdio(bin: &Path, data: &Path, options: &Options) -> Result<Vec<Row>> {
    let dir = data.join("mcp-read");
    std::fs::create_dir_all(&dir)?;
    std::fs::write(
        dir.join("ten-kb.txt"),
        "0123456789abcdef\n".repeat(10 * 1024 / 17),
    )?;
    let mut http = HttpClient::start(bin, &tempdir("mcp-http-state")?, &dir)?;
    let mut stdio_command = Command::new(bin);
    stdio_command
        .arg("--state-dir")
        .arg(tempdir("mcp-stdio-state")?)
        .args(["mcp", "--workspace"])
        .arg(&dir);
    let mut stdio = McpClient::spawn(stdio_command)?;
    let calls = if options.quick { 100 } else { 1000 };
    let read = json!({"name": "read_file", "arguments": {"path": "ten-kb.txt"}});
    let (ours, theirs) = alternate(
        options.rounds(),
        || {
            let started = Instant::now();
            for _ in 0..calls {
                http.request("tools/call", read.clone())?;
            }
            Ok(started.elapsed().as_secs_f64())
        },
        || {
            let started = Instant::now();
            for _ in 0..calls {
                stdio.request("tools/call", read.clone())?;
            }
            Ok(started.elapsed().as_secs_f64())
        },
    )?;
    Ok(vec![Row {
        name: format!("MCP read_file round trips over HTTP vs stdio (10 KB, {calls} calls)"),
        ours_label: "clawsmith mcp --http".into(),
        theirs_label: "clawsmith mcp (stdio)".into(),
        ours,
        theirs,
        target: Target::RatioAtMost(1.5),
        unit: Unit::Seconds,
        note: "one keep-alive connection, each answer an event stream read to its end; the \
               guard (Host, token, slot) on every request"
            .into(),
    }])
}
