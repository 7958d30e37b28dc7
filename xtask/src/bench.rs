//! `cargo xtask bench`: side-by-side performance figures.
//!
//! Every figure is a *pair* measured alternately in one run (A B A B …, after a warm-up), so
//! that the noise of a shared machine hits both sides alike; the ratio ours/theirs is the figure,
//! absolute times are context. Pairs come from two places:
//! - process-level pairs run here: the `clawsmith` release binary against `rg`, against
//!   `@modelcontextprotocol/server-filesystem` (same hand-written JSON-RPC client for both), and
//!   against itself on a small and a huge tree; plus peak and idle memory;
//! - in-process pairs from the crates' `benches/pairs.rs` (harness = false), which print
//!   `CLAWSMITH-BENCH {json}` lines that this harness collects.
//!
//! The table goes to stdout and, from a full run (no names, no `--quick`), to
//! `docs/benchmarks.md` with the machine, the commit, the load average and the date. Everything
//! in that file from the [`KEPT_MARKER`] line on is written by hand (profile findings, history,
//! rows measured apart) and is carried over unchanged by a full run; a file without the marker is
//! not overwritten, so hand-written notes are never dropped.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use serde_json::{Value, json};

// `clawsmith web` on a long session.
mod web;

// Language-server pairs (clawsmith-lsp).
mod lsp;

// OTLP export on vs off.
mod traces;

// MCP over Streamable HTTP vs stdio.
mod mcp_http;

// MCP read_file on the fleet store (PostgreSQL) vs the embedded one.
mod fleet;

/// What a figure is compared with.
#[derive(Debug, Clone, Copy)]
pub enum Target {
    /// ours/theirs must be at most this.
    RatioAtMost(f64),
    /// ours/theirs must be at least this (throughput pairs).
    RatioAtLeast(f64),
    /// ours alone, seconds, at most.
    SecondsAtMost(f64),
    /// ours minus theirs (medians), seconds, at most: what a feature adds to the same work.
    SecondsMoreAtMost(f64),
    /// ours alone, bytes, at most.
    BytesAtMost(u64),
    /// ours alone, operations per second, at least.
    PerSecondAtLeast(f64),
    /// ours/theirs at least `ratio` and ours alone at least `per_second` (throughput pairs with
    /// an absolute floor as well).
    RatioAndRateAtLeast { ratio: f64, per_second: f64 },
}

/// One row of the report.
#[derive(Debug, Clone)]
pub struct Row {
    pub name: String,
    pub ours_label: String,
    pub theirs_label: String,
    /// Seconds per sample (or bytes for memory rows).
    pub ours: Vec<f64>,
    pub theirs: Vec<f64>,
    pub target: Target,
    pub unit: Unit,
    pub note: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    Seconds,
    Bytes,
    /// Operations per second (higher is better).
    PerSecond,
}

pub struct Options {
    pub quick: bool,
    pub names: Vec<String>,
}

/// The groups a run is made of, in the order they run; a NAME selects those containing it.
pub const GROUPS: &[&str] = &[
    "mcp-read-file",
    "fleet-mcp-read-file",
    "mcp-http-read-file",
    "traces-export",
    "call-vs-cat",
    "one-shot-command",
    "one-shot-vs-codex",
    "search-vs-rg",
    "search-scale",
    "memory",
    "mcp-unread-client",
    "web-history",
    "history-scale",
    "lsp-diagnostics",
    "crate-pairs",
];

const BENCH_USAGE: &str = "usage: cargo xtask bench [--quick] [NAME...]
  Without NAME, every group runs and docs/benchmarks.md's table is rewritten (not with --quick).
  NAME selects the groups whose name contains it; they print their rows only.
  --quick  3 rounds a pair instead of 7
groups:";

impl Options {
    /// The options, `Ok(None)` for `--help`; an unknown option or a NAME no group contains is an
    /// error before anything is built or run.
    pub fn parse(args: &[String]) -> Result<Option<Options>> {
        let mut quick = false;
        let mut names = Vec::new();
        for arg in args {
            match arg.as_str() {
                "--help" | "-h" => return Ok(None),
                "--quick" => quick = true,
                option if option.starts_with('-') => {
                    bail!("unknown bench option {option:?}\n\n{}", usage())
                }
                name if !GROUPS.iter().any(|group| group.contains(name)) => {
                    bail!("no bench group contains {name:?}\n\n{}", usage())
                }
                name => names.push(name.to_owned()),
            }
        }
        Ok(Some(Options { quick, names }))
    }

    fn wants(&self, name: &str) -> bool {
        debug_assert!(GROUPS.contains(&name), "{name} is missing from GROUPS");
        self.names.is_empty() || self.names.iter().any(|n| name.contains(n.as_str()))
    }

    fn rounds(&self) -> usize {
        if self.quick { 3 } else { 7 }
    }
}

fn usage() -> String {
    format!("{BENCH_USAGE} {}", GROUPS.join(", "))
}

pub fn median(samples: &[f64]) -> f64 {
    if samples.is_empty() {
        return f64::NAN;
    }
    let mut sorted = samples.to_vec();
    sorted.sort_by(f64::total_cmp);
    let mid = sorted.len() / 2;
    if sorted.len().is_multiple_of(2) {
        (sorted[mid - 1] + sorted[mid]) / 2.0
    } else {
        sorted[mid]
    }
}

/// Runs `ours` and `theirs` alternately: one warm-up each, then `rounds` pairs.
pub fn alternate(
    rounds: usize,
    mut ours: impl FnMut() -> Result<f64>,
    mut theirs: impl FnMut() -> Result<f64>,
) -> Result<(Vec<f64>, Vec<f64>)> {
    ours().context("warm-up (ours)")?;
    theirs().context("warm-up (theirs)")?;
    let (mut a, mut b) = (Vec::new(), Vec::new());
    for _ in 0..rounds {
        a.push(ours()?);
        b.push(theirs()?);
    }
    Ok((a, b))
}

impl Row {
    fn ratio(&self) -> Option<f64> {
        if self.theirs.is_empty() {
            return None;
        }
        Some(median(&self.ours) / median(&self.theirs))
    }

    fn met(&self) -> bool {
        match self.target {
            Target::RatioAtMost(max) => self.ratio().is_some_and(|r| r <= max),
            Target::RatioAtLeast(min) => self.ratio().is_some_and(|r| r >= min),
            Target::SecondsAtMost(max) => median(&self.ours) <= max,
            Target::SecondsMoreAtMost(max) => {
                !self.theirs.is_empty() && median(&self.ours) - median(&self.theirs) <= max
            }
            Target::BytesAtMost(max) => median(&self.ours) <= max as f64,
            Target::PerSecondAtLeast(min) => median(&self.ours) >= min,
            Target::RatioAndRateAtLeast { ratio, per_second } => {
                self.ratio().is_some_and(|r| r >= ratio) && median(&self.ours) >= per_second
            }
        }
    }

    fn target_text(&self) -> String {
        match self.target {
            Target::RatioAtMost(max) => format!("≤ {max}×"),
            Target::RatioAtLeast(min) => format!("≥ {min}×"),
            Target::SecondsAtMost(max) => format!("≤ {max} s"),
            Target::SecondsMoreAtMost(max) => {
                format!("≤ +{}", format_value(max, Unit::Seconds))
            }
            Target::BytesAtMost(max) => format!("≤ {}", format_value(max as f64, Unit::Bytes)),
            Target::PerSecondAtLeast(min) => format!("≥ {}", format_value(min, Unit::PerSecond)),
            Target::RatioAndRateAtLeast { ratio, per_second } => format!(
                "≥ {ratio}× and ≥ {}",
                format_value(per_second, Unit::PerSecond)
            ),
        }
    }
}

fn format_value(value: f64, unit: Unit) -> String {
    match unit {
        Unit::Seconds if value < 1e-3 => format!("{:.1} µs", value * 1e6),
        Unit::Seconds if value < 1.0 => format!("{:.2} ms", value * 1e3),
        Unit::Seconds => format!("{value:.2} s"),
        Unit::Bytes => format!("{:.1} MiB", value / (1024.0 * 1024.0)),
        Unit::PerSecond => format!("{value:.0}/s"),
    }
}

fn spread(samples: &[f64], unit: Unit) -> String {
    if samples.is_empty() {
        return "—".into();
    }
    let min = samples.iter().copied().fold(f64::INFINITY, f64::min);
    let max = samples.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    format!(
        "{} ({}–{})",
        format_value(median(samples), unit),
        format_value(min, unit),
        format_value(max, unit)
    )
}

pub fn render(rows: &[Row], machine: &str) -> String {
    let mut text = String::new();
    text.push_str("# Benchmarks\n\n");
    text.push_str("Generated by `cargo xtask bench`; pairs run alternately in one run. ");
    text.push_str("The ratio ours/theirs is the figure; absolute times are context.\n\n");
    text.push_str(machine);
    text.push_str(
        "\n\n| pair | ours: median (min–max) | theirs: median (min–max) | ratio | target | met |\n",
    );
    text.push_str("|---|---|---|---|---|---|\n");
    for row in rows {
        let ratio = row
            .ratio()
            .map(|r| format!("{r:.2}×"))
            .unwrap_or_else(|| "—".into());
        text.push_str(&format!(
            "| {} | {}: {} | {}: {} | {} | {} | {} |\n",
            row.name,
            row.ours_label,
            spread(&row.ours, row.unit),
            if row.theirs_label.is_empty() {
                "—"
            } else {
                &row.theirs_label
            },
            spread(&row.theirs, row.unit),
            ratio,
            row.target_text(),
            if row.met() { "yes" } else { "**no**" },
        ));
    }
    let notes: Vec<&Row> = rows.iter().filter(|r| !r.note.is_empty()).collect();
    if !notes.is_empty() {
        text.push_str("\nNotes:\n");
        for row in notes {
            text.push_str(&format!("- {}: {}\n", row.name, row.note));
        }
    }
    text
}

/// The line of `docs/benchmarks.md` from which on the text is written by hand and kept by a full
/// run.
pub const KEPT_MARKER: &str =
    "<!-- Everything from this line on is written by hand and kept by `cargo xtask bench`. -->";

/// The new file: the generated `report`, then the hand-written part of `previous` (from
/// [`KEPT_MARKER`] on). `previous` of `None` (no file yet) gives the report and the marker.
pub fn with_kept_notes(report: &str, previous: Option<&str>) -> Result<String> {
    let kept = match previous {
        None => format!("{KEPT_MARKER}\n"),
        Some(previous) => match previous.find(KEPT_MARKER) {
            Some(at) => previous[at..].to_owned(),
            None => bail!(
                "docs/benchmarks.md has no line `{KEPT_MARKER}`: put it where the hand-written \
                 notes start (a full run keeps everything from it on) and run again"
            ),
        },
    };
    Ok(format!("{}\n\n{kept}", report.trim_end()))
}

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|text| {
            let fields: Vec<&str> = text.split_whitespace().take(3).collect();
            (fields.len() == 3).then(|| fields.join(" "))
        })
        .unwrap_or_else(|| "unknown".into())
}

fn commit(root: &Path) -> String {
    let run = |args: &[&str]| {
        Command::new("git")
            .args(args)
            .current_dir(root)
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
    };
    let head = run(&["rev-parse", "--short", "HEAD"]).unwrap_or_else(|| "unknown".into());
    match run(&["status", "--porcelain", "--untracked-files=no"]) {
        Some(changes) if !changes.is_empty() => format!("{head} with uncommitted changes"),
        _ => head,
    }
}

fn machine_description() -> String {
    let cores = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(0);
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    let date = Command::new("date")
        .args(["-u", "+%Y-%m-%d %H:%M UTC"])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .unwrap_or_default();
    format!(
        "Machine: {cores} cores, Linux {}; run {date}.",
        kernel.trim()
    )
}

pub fn run(root: &Path, args: &[String]) -> Result<()> {
    let Some(options) = Options::parse(args)? else {
        println!("{}", usage());
        return Ok(());
    };
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    println!("==> building release binaries");
    let status = Command::new(&cargo)
        .args(["build", "--release", "-p", "clawsmith-cli"])
        .current_dir(root)
        .status()
        .context("running cargo build")?;
    if !status.success() {
        bail!("release build failed");
    }
    let bin = root.join("target/release/clawsmith");
    let data = root.join("target/bench-data");
    std::fs::create_dir_all(&data).context("creating target/bench-data")?;
    let load_before = load_average();
    let mut rows = Vec::new();
    let mut failures = Vec::new();
    let mut attempt = |name: &str, rows: &mut Vec<Row>, f: &mut dyn FnMut() -> Result<Vec<Row>>| {
        if !options.wants(name) {
            return;
        }
        println!("==> {name}");
        match f() {
            Ok(new) => {
                for row in &new {
                    println!(
                        "    {}",
                        render(std::slice::from_ref(row), "")
                            .lines()
                            .last()
                            .unwrap_or_default()
                    );
                }
                rows.extend(new);
            }
            Err(error) => {
                eprintln!("    {name} failed: {error:#}");
                failures.push(format!("{name}: {error:#}"));
            }
        }
    };
    attempt("mcp-read-file", &mut rows, &mut || {
        mcp_read_pair(root, &bin, &data, &options)
    });
    attempt("fleet-mcp-read-file", &mut rows, &mut || {
        fleet::fleet_rows(&bin, &data, &options)
    });
    attempt("mcp-http-read-file", &mut rows, &mut || {
        mcp_http::http_vs_stdio(&bin, &data, &options)
    });
    attempt("traces-export", &mut rows, &mut || {
        traces::export_pair(&bin, &data, &options)
    });
    attempt("call-vs-cat", &mut rows, &mut || {
        call_vs_cat(&bin, &data, &options)
    });
    attempt("one-shot-command", &mut rows, &mut || {
        one_shot_command(&bin, &data, &options)
    });
    attempt("one-shot-vs-codex", &mut rows, &mut || {
        one_shot_vs_codex(root, &bin, &data, &options)
    });
    attempt("search-vs-rg", &mut rows, &mut || {
        search_vs_rg(&bin, &data, &options)
    });
    attempt("search-scale", &mut rows, &mut || {
        search_scale(&bin, &data, &options)
    });
    attempt("memory", &mut rows, &mut || memory_rows(&bin, &data));
    attempt("mcp-unread-client", &mut rows, &mut || {
        mcp_unread_client(&bin, &data)
    });
    attempt("web-history", &mut rows, &mut || {
        web::web_rows(&bin, &data, &options)
    });
    attempt("history-scale", &mut rows, &mut || {
        history_scale(&bin, &data, &options)
    });
    attempt("lsp-diagnostics", &mut rows, &mut || {
        lsp::lsp_pairs(&bin, &data, &options)
    });
    attempt("crate-pairs", &mut rows, &mut || {
        crate_pairs(root, &cargo, &options)
    });
    let machine = format!(
        "{} Commit {}; load average (1, 5, 15 min) {load_before} at the start, {} at the end.",
        machine_description(),
        commit(root),
        load_average()
    );
    let report = render(&rows, &machine);
    println!("\n{report}");
    if options.names.is_empty() && !options.quick {
        let path = root.join("docs/benchmarks.md");
        let previous = match std::fs::read_to_string(&path) {
            Ok(text) => Some(text),
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => None,
            Err(error) => return Err(error).context("reading docs/benchmarks.md"),
        };
        let text = with_kept_notes(&report, previous.as_deref())?;
        std::fs::write(&path, text).context("writing docs/benchmarks.md")?;
        println!("wrote docs/benchmarks.md (the hand-written part kept)");
    }
    if !failures.is_empty() {
        bail!(
            "{} benchmark group(s) failed:\n{}",
            failures.len(),
            failures.join("\n")
        );
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Peers and data.

fn have(program: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {program} >/dev/null 2>&1")])
        .status()
        .is_ok_and(|s| s.success())
}

/// Installs a Debian package providing `program` when it is missing (CI and these machines run as
/// root with apt available).
fn ensure_debian(program: &str, package: &str) -> Result<()> {
    if have(program) {
        return Ok(());
    }
    println!("    installing {package} from Debian's packages");
    let status = Command::new("sh")
        .args(["-c", &format!("(apt-get update -qq || true) && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq {package}")])
        .status()
        .context("running apt-get")?;
    if !status.success() || !have(program) {
        bail!("could not install {package}");
    }
    Ok(())
}

/// `package` installed with npm into `target/peers` unless `find` already finds what it gives;
/// then what `find` finds.
fn ensure_npm(
    root: &Path,
    package: &str,
    find: impl Fn(&Path) -> Option<PathBuf>,
) -> Result<PathBuf> {
    let peers = root.join("target/peers");
    if let Some(found) = find(&peers) {
        return Ok(found);
    }
    std::fs::create_dir_all(&peers)?;
    println!("    installing {package} into target/peers");
    let status = Command::new("npm")
        .args(["install", "--silent", "--no-audit", "--no-fund", "--prefix"])
        .arg(&peers)
        .arg(package)
        .status()
        .context("running npm")?;
    match find(&peers) {
        Some(found) if status.success() => Ok(found),
        _ => bail!("npm could not install {package}"),
    }
}

fn ensure_server_filesystem(root: &Path) -> Result<PathBuf> {
    ensure_npm(root, "@modelcontextprotocol/server-filesystem", |peers| {
        Some(peers.join("node_modules/@modelcontextprotocol/server-filesystem/dist/index.js"))
            .filter(|entry| entry.exists())
    })
}

/// Codex's native Linux binary (`@openai/codex`'s platform package).
fn ensure_codex(root: &Path) -> Result<PathBuf> {
    ensure_npm(root, "@openai/codex", |peers| {
        let arch = if cfg!(target_arch = "aarch64") {
            "arm64"
        } else {
            "x64"
        };
        let vendor = peers.join(format!("node_modules/@openai/codex-linux-{arch}/vendor"));
        std::fs::read_dir(vendor)
            .ok()?
            .flatten()
            .map(|triple| triple.path().join("bin/codex"))
            .find(|bin| bin.is_file())
    })
}

/// A deterministic tree of `files` text files with `bytes_per_file` each, in directories of 100,
/// with the word `needle` in every 50th file. Reused when it already exists.
fn generate_tree(dir: &Path, files: usize, bytes_per_file: usize) -> Result<()> {
    let marker = dir.join(".complete");
    if marker.exists() {
        return Ok(());
    }
    if dir.exists() {
        std::fs::remove_dir_all(dir)?;
    }
    let line = "the quick brown fox jumps over the lazy dog while tokens flow\n";
    for index in 0..files {
        let sub = dir.join(format!("d{:04}", index / 100));
        if index.is_multiple_of(100) {
            std::fs::create_dir_all(&sub)?;
        }
        let mut body = String::with_capacity(bytes_per_file + 64);
        if index.is_multiple_of(50) {
            body.push_str("fn needle() {}\n");
        }
        while body.len() < bytes_per_file {
            body.push_str(line);
        }
        body.truncate(bytes_per_file);
        std::fs::write(sub.join(format!("f{index}.rs")), body)?;
    }
    std::fs::write(marker, b"")?;
    Ok(())
}

fn time_process(mut command: Command) -> Result<f64> {
    let started = Instant::now();
    let output = command
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output()?;
    let elapsed = started.elapsed().as_secs_f64();
    if !output.status.success() && output.status.code() != Some(1) {
        bail!(
            "{:?} failed: {}",
            command,
            String::from_utf8_lossy(&output.stderr)
        );
    }
    Ok(elapsed)
}

fn clawsmith_call(bin: &Path, state: &Path, workspace: &Path, tool: &str, args: &Value) -> Command {
    let mut command = Command::new(bin);
    command
        .arg("--state-dir")
        .arg(state)
        .args(["call", "--workspace"])
        .arg(workspace)
        .args(["--mode", "full", tool, &args.to_string()]);
    command
}

/// `clawsmith call read_file` of a 10 KB file, process start to result, against `cat` of the
/// same file.
fn call_vs_cat(bin: &Path, data: &Path, options: &Options) -> Result<Vec<Row>> {
    let dir = data.join("call-read");
    std::fs::create_dir_all(&dir)?;
    let file = dir.join("ten-kb.txt");
    std::fs::write(&file, "0123456789abcdef\n".repeat(10 * 1024 / 17))?;
    let state = tempdir("call-state")?;
    let (ours, theirs) = alternate(
        options.rounds() * 3,
        || {
            time_process(clawsmith_call(
                bin,
                &state,
                &dir,
                "read_file",
                &json!({"path": "ten-kb.txt"}),
            ))
        },
        || {
            let mut command = Command::new("cat");
            command.arg(&file);
            time_process(command)
        },
    )?;
    Ok(vec![Row {
        name: "`clawsmith call read_file` vs `cat` (10 KB, whole processes)".into(),
        ours_label: "clawsmith call".into(),
        theirs_label: "cat".into(),
        ours,
        theirs,
        target: Target::RatioAtMost(3.0),
        unit: Unit::Seconds,
        note: "process start to result: ours opens the state database, creates a session, stores \
               the turn, its events and messages (default durability)"
            .into(),
    }])
}

/// `clawsmith call run_command true` on a 20,000-file workspace against the same call on an
/// empty one, whole processes. A one-shot call is always its session's first command in its
/// process, so the undo capture's look at the tree before and after the command is what grows
/// with the workspace. One call each first, as a user's earlier call would have made, so the
/// workspace's manifest is in the store.
fn one_shot_command(bin: &Path, data: &Path, options: &Options) -> Result<Vec<Row>> {
    let tree = data.join("command-20k");
    generate_tree(&tree, 20_000, 200)?;
    let empty = data.join("command-empty");
    std::fs::create_dir_all(&empty)?;
    let state = tempdir("one-shot-state")?;
    let command = json!({"command": "true"});
    for workspace in [&tree, &empty] {
        time_process(clawsmith_call(
            bin,
            &state,
            workspace,
            "run_command",
            &command,
        ))?;
    }
    let (ours, theirs) = alternate(
        options.rounds() * 2,
        || time_process(clawsmith_call(bin, &state, &tree, "run_command", &command)),
        || time_process(clawsmith_call(bin, &state, &empty, "run_command", &command)),
    )?;
    Ok(vec![Row {
        name: "one-shot `call run_command true`: 20,000-file vs empty workspace".into(),
        ours_label: "20k files".into(),
        theirs_label: "empty".into(),
        ours,
        theirs,
        target: Target::RatioAtMost(1.5),
        unit: Unit::Seconds,
        note: "whole processes, the command sandboxed; the extra is the capture's `lstat` of \
               every entry before and after the command (the workspace's manifest is read back \
               from the store, so no unchanged file is read)"
            .into(),
    }])
}

/// One-shot `clawsmith call run_command true` against Codex's sandbox of `true`, both whole
/// native processes in the same empty folder (target ≤ 0.5×). Codex's sandbox keeps
/// no history and offers no undo; ours stores the call and captures for undo.
fn one_shot_vs_codex(root: &Path, bin: &Path, data: &Path, options: &Options) -> Result<Vec<Row>> {
    let codex = ensure_codex(root)?;
    let empty = data.join("command-empty");
    std::fs::create_dir_all(&empty)?;
    let state = tempdir("codex-pair-state")?;
    let command = json!({"command": "true"});
    time_process(clawsmith_call(bin, &state, &empty, "run_command", &command))?;
    let (ours, theirs) = alternate(
        options.rounds() * 2,
        || time_process(clawsmith_call(bin, &state, &empty, "run_command", &command)),
        || {
            let mut sandboxed = Command::new(&codex);
            sandboxed.args(["sandbox", "true"]).current_dir(&empty);
            time_process(sandboxed)
        },
    )?;
    Ok(vec![Row {
        name: "one-shot `call run_command true` vs `codex sandbox true` (native binary)".into(),
        ours_label: "clawsmith call".into(),
        theirs_label: "codex sandbox".into(),
        ours,
        theirs,
        target: Target::RatioAtMost(0.5),
        unit: Unit::Seconds,
        note: "whole processes in an empty folder; ours also stores the call, its events and \
               the undo capture"
            .into(),
    }])
}

fn search_vs_rg(bin: &Path, data: &Path, options: &Options) -> Result<Vec<Row>> {
    ensure_debian("rg", "ripgrep")?;
    let tree = data.join("search-1500");
    generate_tree(&tree, 1500, 1000)?;
    let state = tempdir("search-state")?;
    let (ours, theirs) = alternate(
        options.rounds() * 3,
        || {
            time_process(clawsmith_call(
                bin,
                &state,
                &tree,
                "search_files",
                &json!({"query": "needle"}),
            ))
        },
        || {
            let mut rg = Command::new("rg");
            rg.args(["-n", "-i", "-F", "--sort", "path", "needle"])
                .arg(&tree);
            time_process(rg)
        },
    )?;
    Ok(vec![Row {
        name: "search_files vs rg (1,500 files, 1.5 MB, literal)".into(),
        ours_label: "clawsmith call".into(),
        theirs_label: "rg".into(),
        ours,
        theirs,
        target: Target::RatioAtMost(1.3),
        unit: Unit::Seconds,
        note: "whole processes: ours includes opening the state database, journaling and events"
            .into(),
    }])
}

fn search_scale(bin: &Path, data: &Path, options: &Options) -> Result<Vec<Row>> {
    let small = data.join("search-2k");
    let huge = data.join("search-200k");
    generate_tree(&small, 2_000, 200)?;
    println!("    generating 200,000 files (once; reused from target/bench-data)");
    generate_tree(&huge, 200_000, 200)?;
    let state = tempdir("scale-state")?;
    let query = json!({"query": "absent-word-xyz"});
    let (ours, theirs) = alternate(
        options.rounds(),
        || time_process(clawsmith_call(bin, &state, &huge, "search_files", &query)),
        || time_process(clawsmith_call(bin, &state, &small, "search_files", &query)),
    )?;
    Ok(vec![Row {
        name: "search_files on 200,000 vs 2,000 files".into(),
        ours_label: "200k tree".into(),
        theirs_label: "2k tree".into(),
        ours,
        theirs,
        target: Target::RatioAtMost(1.5),
        unit: Unit::Seconds,
        note: "the visited-files budget (2,000) bounds the cost, not the repository".into(),
    }])
}

fn tempdir(name: &str) -> Result<PathBuf> {
    let dir = std::env::temp_dir().join(format!("clawsmith-bench-{name}-{}", std::process::id()));
    if dir.exists() {
        std::fs::remove_dir_all(&dir)?;
    }
    std::fs::create_dir_all(&dir)?;
    Ok(dir)
}

// ---------------------------------------------------------------------------------------------
// A minimal MCP client over stdio: newline-delimited JSON-RPC, one request at a time. The same
// client talks to both servers, so the comparison is about the servers.

struct McpClient {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    next_id: u64,
}

impl McpClient {
    fn spawn(mut command: Command) -> Result<McpClient> {
        let mut child = command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .context("starting the MCP server")?;
        let stdin = child.stdin.take().context("no stdin")?;
        let stdout = BufReader::new(child.stdout.take().context("no stdout")?);
        let mut client = McpClient {
            child,
            stdin,
            stdout,
            next_id: 1,
        };
        client.request(
            "initialize",
            json!({"protocolVersion": "2025-06-18", "capabilities": {},
                   "clientInfo": {"name": "clawsmith-bench", "version": "0"}}),
        )?;
        client.notify("notifications/initialized")?;
        Ok(client)
    }

    fn notify(&mut self, method: &str) -> Result<()> {
        writeln!(
            self.stdin,
            "{}",
            json!({"jsonrpc": "2.0", "method": method})
        )?;
        self.stdin.flush()?;
        Ok(())
    }

    fn request(&mut self, method: &str, params: Value) -> Result<Value> {
        let id = self.next_id;
        self.next_id += 1;
        writeln!(
            self.stdin,
            "{}",
            json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
        )?;
        self.stdin.flush()?;
        let mut line = String::new();
        loop {
            line.clear();
            if self.stdout.read_line(&mut line)? == 0 {
                bail!("the MCP server closed its output during {method}");
            }
            let Ok(message) = serde_json::from_str::<Value>(&line) else {
                continue;
            };
            if message.get("id").and_then(Value::as_u64) == Some(id) {
                if let Some(error) = message.get("error") {
                    bail!("{method} failed: {error}");
                }
                return Ok(message["result"].clone());
            }
        }
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for McpClient {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn mcp_read_pair(root: &Path, bin: &Path, data: &Path, options: &Options) -> Result<Vec<Row>> {
    let entry = ensure_server_filesystem(root)?;
    let dir = data.join("mcp-read");
    std::fs::create_dir_all(&dir)?;
    let file = dir.join("ten-kb.txt");
    std::fs::write(&file, "0123456789abcdef\n".repeat(10 * 1024 / 17))?;
    let state = tempdir("mcp-state")?;
    let mut ours_command = Command::new(bin);
    ours_command
        .arg("--state-dir")
        .arg(&state)
        .args(["mcp", "--workspace"])
        .arg(&dir);
    let mut ours = McpClient::spawn(ours_command)?;
    let mut theirs_command = Command::new("node");
    theirs_command.arg(&entry).arg(&dir);
    let mut theirs = McpClient::spawn(theirs_command)?;
    let their_tools = theirs.request("tools/list", json!({}))?;
    let their_tool = if their_tools.to_string().contains("\"read_text_file\"") {
        "read_text_file"
    } else {
        "read_file"
    };
    let calls = if options.quick { 100 } else { 1000 };
    let absolute = file.canonicalize()?.display().to_string();
    let (a, b) = alternate(
        options.rounds(),
        || {
            let started = Instant::now();
            for _ in 0..calls {
                ours.request(
                    "tools/call",
                    json!({"name": "read_file", "arguments": {"path": "ten-kb.txt"}}),
                )?;
            }
            Ok(started.elapsed().as_secs_f64())
        },
        || {
            let started = Instant::now();
            for _ in 0..calls {
                theirs.request(
                    "tools/call",
                    json!({"name": their_tool, "arguments": {"path": absolute}}),
                )?;
            }
            Ok(started.elapsed().as_secs_f64())
        },
    )?;
    Ok(vec![Row {
        name: format!("MCP read_file round trips (10 KB, {calls} calls)"),
        ours_label: "clawsmith mcp".into(),
        theirs_label: format!("server-filesystem {their_tool}"),
        ours: a,
        theirs: b,
        target: Target::RatioAtMost(0.5),
        unit: Unit::Seconds,
        note: "journaling, events and checkpoints on for clawsmith".into(),
    }])
}

// ---------------------------------------------------------------------------------------------
// Memory.

fn status_kib(pid: u32, field: &str) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find(|l| l.starts_with(field))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
}

fn memory_rows(bin: &Path, data: &Path) -> Result<Vec<Row>> {
    let workspace = data.join("memory-ws");
    std::fs::create_dir_all(&workspace)?;
    let state = tempdir("memory-state")?;
    // Peak memory of clawsmith while a command prints 1 GB into a 1 MB cap.
    let mut command = clawsmith_call(
        bin,
        &state,
        &workspace,
        "run_command",
        &json!({"command": "yes | head -c 1000000000", "timeoutMs": 600000}),
    );
    let mut child = command
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()?;
    let pid = child.id();
    let mut peak_kib = 0;
    loop {
        if let Some(hwm) = status_kib(pid, "VmHWM:") {
            peak_kib = peak_kib.max(hwm);
        }
        if child.try_wait()?.is_some() {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    // Idle resident memory of `clawsmith mcp` after the handshake.
    let mut mcp = Command::new(bin);
    mcp.arg("--state-dir")
        .arg(&state)
        .args(["mcp", "--workspace"])
        .arg(&workspace);
    let client = McpClient::spawn(mcp)?;
    std::thread::sleep(Duration::from_millis(500));
    let idle_kib = status_kib(client.pid(), "VmRSS:").context("reading the server's VmRSS")?;
    Ok(vec![
        Row {
            name: "peak memory, command printing 1 GB into a 1 MB cap".into(),
            ours_label: "clawsmith call (VmHWM)".into(),
            theirs_label: String::new(),
            ours: vec![(peak_kib * 1024) as f64],
            theirs: Vec::new(),
            target: Target::BytesAtMost(50 * 1024 * 1024),
            unit: Unit::Bytes,
            note: String::new(),
        },
        Row {
            name: "`clawsmith mcp` idle resident memory".into(),
            ours_label: "VmRSS".into(),
            theirs_label: String::new(),
            ours: vec![(idle_kib * 1024) as f64],
            theirs: Vec::new(),
            target: Target::BytesAtMost(20 * 1024 * 1024),
            unit: Unit::Bytes,
            note: String::new(),
        },
    ])
}

/// Peak resident memory of `clawsmith mcp` while a client writes 20,000 `read_file` requests and
/// reads none of the answers (backpressure, target ≤ 50 MiB).
fn mcp_unread_client(bin: &Path, data: &Path) -> Result<Vec<Row>> {
    let workspace = data.join("unread-ws");
    std::fs::create_dir_all(&workspace)?;
    std::fs::write(workspace.join("a.txt"), "0123456789\n".repeat(512))?;
    let state = tempdir("unread-state")?;
    let mut child = Command::new(bin)
        .arg("--state-dir")
        .arg(&state)
        .args(["mcp", "--workspace"])
        .arg(&workspace)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .context("starting clawsmith mcp")?;
    let mut stdin = child.stdin.take().context("no stdin")?;
    // Held, never read: the server's answers pile up in the pipe and then in the server.
    let _stdout = child.stdout.take().context("no stdout")?;
    let pid = child.id();
    let writer = std::thread::spawn(move || -> std::io::Result<()> {
        writeln!(
            stdin,
            "{}",
            json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
                "protocolVersion": "2025-06-18", "capabilities": {},
                "clientInfo": {"name": "clawsmith-bench", "version": "0"}}})
        )?;
        writeln!(
            stdin,
            "{}",
            json!({"jsonrpc": "2.0", "method": "notifications/initialized"})
        )?;
        for id in 1..=20_000 {
            writeln!(
                stdin,
                "{}",
                json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                       "params": {"name": "read_file", "arguments": {"path": "a.txt"}}})
            )?;
        }
        stdin.flush()
    });
    // Sample for a while: a server without backpressure grows linearly during this time.
    let mut peak_kib = 0;
    for _ in 0..150 {
        if let Some(hwm) = status_kib(pid, "VmHWM:") {
            peak_kib = peak_kib.max(hwm);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    let _ = child.wait();
    // The writer ends with a broken pipe once the server is gone (or finished writing).
    let _ = writer.join();
    Ok(vec![Row {
        name: "`clawsmith mcp` peak memory, 20,000 requests from a client that never reads".into(),
        ours_label: "VmHWM".into(),
        theirs_label: String::new(),
        ours: vec![(peak_kib * 1024) as f64],
        theirs: Vec::new(),
        target: Target::BytesAtMost(50 * 1024 * 1024),
        unit: Unit::Bytes,
        note: "3 s of sampling while the client writes and never reads; the server stops \
               reading requests while answers are unwritten"
            .into(),
    }])
}

/// `clawsmith call read_file` in a session of 1,000,000 events against one of 10
/// (opening a session costs the same whatever its history, target ≤ 1.2×). The long history is
/// made by copying one stored event with `sqlite3` (sequences stay gap-free).
fn history_scale(bin: &Path, data: &Path, options: &Options) -> Result<Vec<Row>> {
    ensure_debian("sqlite3", "sqlite3")?;
    let workspace = data.join("history-ws");
    std::fs::create_dir_all(&workspace)?;
    std::fs::write(workspace.join("a.txt"), "alpha\n")?;
    let read = json!({"path": "a.txt"});
    let mut sessions = Vec::new();
    for (name, extra_events) in [("short", 0u64), ("long", 1_000_000)] {
        let state = tempdir(&format!("history-{name}"))?;
        let session = format!("bench-{name}");
        // Two calls make the session and a few real events (about ten).
        for _ in 0..2 {
            let mut command = clawsmith_call(bin, &state, &workspace, "read_file", &read);
            command.args(["--session", &session]);
            time_process(command)?;
        }
        if extra_events > 0 {
            let sql = format!(
                "WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n WHERE x < \
                 {extra_events}) INSERT INTO events (session_id, sequence, type, timestamp_ms, \
                 event_json) SELECT e.session_id, m.top + n.x, e.type, e.timestamp_ms, \
                 e.event_json FROM n, (SELECT * FROM events WHERE session_id = '{session}' AND \
                 type = 'tool.started' LIMIT 1) AS e, (SELECT MAX(sequence) AS top FROM events \
                 WHERE session_id = '{session}') AS m;"
            );
            let status = Command::new("sqlite3")
                .arg(state.join("clawsmith.db"))
                .arg(&sql)
                .status()
                .context("running sqlite3")?;
            if !status.success() {
                bail!("sqlite3 could not grow the session's history");
            }
        }
        sessions.push((state, session));
    }
    let call = |index: usize| {
        let (state, session) = &sessions[index];
        let mut command = clawsmith_call(bin, state, &workspace, "read_file", &read);
        command.args(["--session", session]);
        time_process(command)
    };
    let (ours, theirs) = alternate(options.rounds(), || call(1), || call(0))?;
    Ok(vec![Row {
        name: "`clawsmith call read_file` in a session of 1,000,000 events vs 10".into(),
        ours_label: "1,000,000 events".into(),
        theirs_label: "10 events".into(),
        ours,
        theirs,
        target: Target::RatioAtMost(1.2),
        unit: Unit::Seconds,
        note: "whole processes; the long history is one stored event copied by sqlite3".into(),
    }])
}

// ---------------------------------------------------------------------------------------------
// In-process pairs from the crates.

/// The crates with a `benches/pairs.rs`.
const PAIR_CRATES: &[&str] = &[
    "clawsmith-sandbox",
    "clawsmith-checkpoint",
    "clawsmith-core",
    "clawsmith-store-postgres",
];

fn crate_pairs(root: &Path, cargo: &str, options: &Options) -> Result<Vec<Row>> {
    let mut rows = Vec::new();
    for krate in PAIR_CRATES {
        if !root
            .join("crates")
            .join(krate)
            .join("benches/pairs.rs")
            .exists()
        {
            continue;
        }
        let mut command = Command::new(cargo);
        command
            .args(["bench", "-q", "-p", krate, "--bench", "pairs", "--"])
            .current_dir(root);
        if options.quick {
            command.arg("--quick");
        }
        let output = command
            .stderr(Stdio::inherit())
            .output()
            .with_context(|| format!("benching {krate}"))?;
        if !output.status.success() {
            bail!("{krate} pairs failed");
        }
        rows.extend(parse_pair_lines(&String::from_utf8_lossy(&output.stdout))?);
    }
    Ok(rows)
}

/// Parses `CLAWSMITH-BENCH {json}` lines:
/// `{"name", "ours", "theirs", "oursSamples": [..], "theirsSamples": [..], "unit": "seconds"|"bytes"|"per-second",
///   "target": {"ratioAtMost"|"ratioAtLeast"|"secondsAtMost"|"bytesAtMost": n}, "note"?}`.
pub fn parse_pair_lines(text: &str) -> Result<Vec<Row>> {
    let mut rows = Vec::new();
    for line in text.lines() {
        let Some(body) = line.strip_prefix("CLAWSMITH-BENCH ") else {
            continue;
        };
        let value: Value =
            serde_json::from_str(body).with_context(|| format!("bad bench line {body}"))?;
        let samples = |key: &str| -> Vec<f64> {
            value[key]
                .as_array()
                .map(|a| a.iter().filter_map(Value::as_f64).collect())
                .unwrap_or_default()
        };
        let target: BTreeMap<String, Value> = serde_json::from_value(value["target"].clone())
            .context("bench line without a target")?;
        let rate_floor = target.get("perSecondAtLeast").and_then(Value::as_f64);
        let ratio_floor = target.get("ratioAtLeast").and_then(Value::as_f64);
        let (kind, number) = target.into_iter().next().context("empty target")?;
        let number = number.as_f64().context("target is not a number")?;
        let target = match kind.as_str() {
            _ if rate_floor.is_some() && ratio_floor.is_some() => Target::RatioAndRateAtLeast {
                ratio: ratio_floor.unwrap_or_default(),
                per_second: rate_floor.unwrap_or_default(),
            },
            "perSecondAtLeast" => Target::PerSecondAtLeast(number),
            "ratioAtMost" => Target::RatioAtMost(number),
            "ratioAtLeast" => Target::RatioAtLeast(number),
            "secondsAtMost" => Target::SecondsAtMost(number),
            "secondsMoreAtMost" => Target::SecondsMoreAtMost(number),
            "bytesAtMost" => Target::BytesAtMost(number as u64),
            other => bail!("unknown target kind {other}"),
        };
        let unit = match value["unit"].as_str().unwrap_or("seconds") {
            "bytes" => Unit::Bytes,
            "per-second" => Unit::PerSecond,
            _ => Unit::Seconds,
        };
        rows.push(Row {
            name: value["name"].as_str().unwrap_or("?").to_owned(),
            ours_label: value["ours"].as_str().unwrap_or("ours").to_owned(),
            theirs_label: value["theirs"].as_str().unwrap_or_default().to_owned(),
            ours: samples("oursSamples"),
            theirs: samples("theirsSamples"),
            target,
            unit,
            note: value["note"].as_str().unwrap_or_default().to_owned(),
        });
    }
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_refuse_what_no_group_takes() {
        let parse =
            |args: &[&str]| Options::parse(&args.iter().map(|a| a.to_string()).collect::<Vec<_>>());
        assert!(parse(&["--help"]).unwrap().is_none());
        assert!(parse(&["--quick", "-h"]).unwrap().is_none());
        let options = parse(&["--quick", "call", "mcp"]).unwrap().unwrap();
        assert!(options.quick && options.names == ["call", "mcp"]);
        assert!(options.wants("call-vs-cat") && options.wants("mcp-unread-client"));
        assert!(!options.wants("search-vs-rg"));
        let all = parse(&[]).unwrap().unwrap();
        assert!(!all.quick && GROUPS.iter().all(|group| all.wants(group)));
        for (args, error) in [
            (&["--fast"][..], "unknown bench option \"--fast\""),
            (
                &["call", "nothing-like-it"][..],
                "no bench group contains \"nothing-like-it\"",
            ),
        ] {
            let message = parse(args).err().unwrap().to_string();
            assert!(message.starts_with(error), "{message}");
            assert!(message.contains("crate-pairs"), "{message}");
        }
    }

    #[test]
    fn medians_and_targets() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), 2.5);
        let row = |ours: f64, theirs: f64, target| Row {
            name: "x".into(),
            ours_label: "a".into(),
            theirs_label: "b".into(),
            ours: vec![ours],
            theirs: vec![theirs],
            target,
            unit: Unit::Seconds,
            note: String::new(),
        };
        assert!(row(1.0, 2.0, Target::RatioAtMost(0.5)).met());
        assert!(!row(1.1, 2.0, Target::RatioAtMost(0.5)).met());
        assert!(row(1.0, 4.0, Target::RatioAtLeast(0.2)).met());
        assert!(!row(0.5, 4.0, Target::RatioAtLeast(0.2)).met());
        assert!(
            render(&[row(1.0, 2.0, Target::RatioAtMost(1.5))], "m")
                .contains("| 0.50× | ≤ 1.5× | yes |")
        );
    }

    #[test]
    fn a_full_run_keeps_the_hand_written_notes() {
        let previous = format!(
            "# Benchmarks\n\n| old table |\n\n{KEPT_MARKER}\n\n## Findings\n- kept ◈ note\n"
        );
        let text = with_kept_notes("# Benchmarks\n\n| new table |\n\n", Some(&previous)).unwrap();
        assert_eq!(
            text,
            format!(
                "# Benchmarks\n\n| new table |\n\n{KEPT_MARKER}\n\n## Findings\n- kept ◈ note\n"
            )
        );
        // Run again on its own output: nothing is duplicated or lost.
        let again = with_kept_notes("# Benchmarks\n\n| newer |", Some(&text)).unwrap();
        assert_eq!(again.matches(KEPT_MARKER).count(), 1);
        assert!(again.ends_with("- kept ◈ note\n") && again.contains("| newer |"));
        assert!(!again.contains("| new table |"));
        // No file yet: the report and the marker.
        assert_eq!(
            with_kept_notes("r\n", None).unwrap(),
            format!("r\n\n{KEPT_MARKER}\n")
        );
        // A file written by hand without the marker is refused, never overwritten.
        let error = with_kept_notes("r", Some("# notes without a marker\n")).unwrap_err();
        assert!(error.to_string().contains("has no line"), "{error}");
    }

    #[test]
    fn alternation_interleaves() {
        let log = std::cell::RefCell::new(Vec::new());
        let (a, b) = alternate(
            2,
            || {
                log.borrow_mut().push('a');
                Ok(1.0)
            },
            || {
                log.borrow_mut().push('b');
                Ok(2.0)
            },
        )
        .unwrap();
        assert_eq!(log.into_inner(), vec!['a', 'b', 'a', 'b', 'a', 'b']);
        assert_eq!((a.len(), b.len()), (2, 2));
    }

    #[test]
    fn pair_lines() {
        let rows = parse_pair_lines(
            "noise\nCLAWSMITH-BENCH {\"name\":\"n\",\"ours\":\"o\",\"theirs\":\"t\",\"oursSamples\":[1,2],\"theirsSamples\":[2],\"target\":{\"ratioAtMost\":1.5}}\n",
        )
        .unwrap();
        assert_eq!(rows.len(), 1);
        assert!(rows[0].met());
        assert!(parse_pair_lines("CLAWSMITH-BENCH {\"target\":{\"nope\":1}}").is_err());
        // What a feature adds: the difference of the medians.
        let added = |ours: f64, theirs: f64| {
            parse_pair_lines(&format!(
                "CLAWSMITH-BENCH {{\"name\":\"n\",\"oursSamples\":[{ours}],\"theirsSamples\":[{theirs}],\"target\":{{\"secondsMoreAtMost\":0.001}}}}"
            ))
            .unwrap()
            .remove(0)
        };
        assert!(added(0.0105, 0.010).met());
        assert!(!added(0.0115, 0.010).met());
        assert_eq!(added(0.0105, 0.010).target_text(), "≤ +1.00 ms");
    }
}
