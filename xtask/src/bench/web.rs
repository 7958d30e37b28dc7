//! `clawsmith web` on a long session: time to the first byte of a 10,000-event session's
//! page and of its first page of events as JSON, through a real `clawsmith web` on 127.0.0.1.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Instant;

use anyhow::{Context, Result, bail};
use serde_json::json;

use super::{Options, Row, Target, Unit, clawsmith_call, ensure_debian, tempdir, time_process};

/// Events in the benchmarked session.
const EVENTS: u64 = 10_000;

/// A `clawsmith web` process, killed on drop.
struct WebProcess {
    child: Child,
    port: u16,
    /// `/s/<hex>/`: where the pages and the API live.
    prefix: String,
    cookie: String,
}

impl Drop for WebProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Seconds from connecting to the first byte of the answer to `GET path`.
fn time_to_first_byte(web: &WebProcess, path: &str) -> Result<f64> {
    let started = Instant::now();
    let mut stream = TcpStream::connect(("127.0.0.1", web.port)).context("connecting")?;
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nCookie: {}\r\nConnection: close\r\n\r\n",
        web.port, web.cookie
    )?;
    let mut first = [0u8; 1];
    stream
        .read_exact(&mut first)
        .context("reading the answer")?;
    let elapsed = started.elapsed().as_secs_f64();
    let mut rest = Vec::new();
    stream.read_to_end(&mut rest)?;
    let head = String::from_utf8_lossy(&rest);
    if !head.starts_with("TTP/1.1 200") {
        bail!(
            "GET {path} answered {}",
            head.lines().next().unwrap_or_default()
        );
    }
    Ok(elapsed)
}

pub(super) fn web_rows(bin: &Path, data: &Path, options: &Options) -> Result<Vec<Row>> {
    ensure_debian("sqlite3", "sqlite3")?;
    let workspace = data.join("web-ws");
    std::fs::create_dir_all(&workspace)?;
    std::fs::write(workspace.join("a.txt"), "alpha\n")?;
    let state = tempdir("web-history")?;
    let session = "bench-web";
    for _ in 0..2 {
        let mut command = clawsmith_call(
            bin,
            &state,
            &workspace,
            "read_file",
            &json!({"path": "a.txt"}),
        );
        command.args(["--session", session]);
        time_process(command)?;
    }
    // Grow the history to EVENTS with copies of its real events, sequences gap-free.
    let sql = format!(
        "WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n WHERE x < \
         (SELECT {EVENTS} - MAX(sequence) FROM events WHERE session_id = '{session}')) \
         INSERT INTO events (session_id, sequence, type, timestamp_ms, event_json) \
         SELECT e.session_id, m.top + n.x, e.type, e.timestamp_ms, e.event_json FROM n, \
         (SELECT * FROM events WHERE session_id = '{session}' AND type = 'tool.completed' \
         LIMIT 1) AS e, (SELECT MAX(sequence) AS top FROM events WHERE session_id = \
         '{session}') AS m;"
    );
    let status = Command::new("sqlite3")
        .arg(state.join("clawsmith.db"))
        .arg(&sql)
        .status()
        .context("running sqlite3")?;
    if !status.success() {
        bail!("sqlite3 could not grow the session's history");
    }
    let mut child = Command::new(bin)
        .args(["--state-dir"])
        .arg(&state)
        .args(["web", "--workspace"])
        .arg(&workspace)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .context("starting clawsmith web")?;
    let mut line = String::new();
    BufReader::new(child.stdout.take().context("no stdout")?).read_line(&mut line)?;
    // `http://127.0.0.1:PORT/s/<prefix>/?token=TOKEN`: every route lives under the prefix.
    let (port, prefix, token) = line
        .trim()
        .strip_prefix("http://127.0.0.1:")
        .and_then(|rest| rest.split_once('/'))
        .and_then(|(port, rest)| {
            let (prefix, token) = rest.split_once("?token=")?;
            Some((port, format!("/{prefix}"), token))
        })
        .with_context(|| format!("clawsmith web printed {line:?}"))?;
    let port: u16 = port.parse()?;
    let web = WebProcess {
        port,
        prefix,
        cookie: format!("clawsmith_web={token}"),
        child,
    };
    let mut rows = Vec::new();
    for (name, path) in [
        ("page", format!("{}sessions/{session}", web.prefix)),
        (
            "JSON",
            format!(
                "{}api/sessions/{session}/events?after=0&limit=200",
                web.prefix
            ),
        ),
    ] {
        let mut samples = Vec::new();
        for _ in 0..options.rounds() {
            samples.push(time_to_first_byte(&web, &path)?);
        }
        rows.push(Row {
            name: format!(
                "`clawsmith web`: time to first byte of a {EVENTS}-event session's {name}"
            ),
            // Labelled without the random prefix, so runs compare.
            ours_label: format!("GET /{}", path[web.prefix.len()..].replace(session, "ID")),
            theirs_label: String::new(),
            ours: samples,
            theirs: Vec::new(),
            target: Target::SecondsAtMost(1.0),
            unit: Unit::Seconds,
            note: "a real `clawsmith web` on 127.0.0.1 with the cookie; the page is the HTML \
                   shell, the JSON the first page of 200 events it then loads (the history is \
                   grown by sqlite3 with copies of a real tool.completed event)"
                .into(),
        });
    }
    Ok(rows)
}
