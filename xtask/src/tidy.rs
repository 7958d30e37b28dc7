//! Project rules the compiler does not check (CONTRIBUTING.md).

mod error_causes;
mod issue_refs;
mod lex;
mod requirement_refs;
mod safety;
mod stated;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};

/// Which workspace crates each crate may depend on (normal and build dependencies). Tests and
/// benchmarks (dev-dependencies) may reach further down, never up.
pub const LAYERS: &[(&str, &[&str])] = &[
    ("clawsmith-protocol", &[]),
    // The one bash parse: a leaf, read by the permission rules and the disaster check.
    ("clawsmith-shell", &[]),
    // Trace context and OpenTelemetry export: spans are named with clawsmith's constants here,
    // so the core, the MCP sides, the agent loop and the front end agree on them.
    ("clawsmith-trace", &["clawsmith-protocol"]),
    (
        "clawsmith-security",
        &["clawsmith-protocol", "clawsmith-shell"],
    ),
    ("clawsmith-fs", &["clawsmith-protocol"]),
    // The network gateway of allowlisted commands: policy, address checks, HTTP and SOCKS5.
    ("clawsmith-egress", &[]),
    (
        "clawsmith-sandbox",
        &[
            "clawsmith-protocol",
            "clawsmith-shell",
            "clawsmith-trace",
            "clawsmith-egress",
        ],
    ),
    (
        "clawsmith-checkpoint",
        &["clawsmith-protocol", "clawsmith-fs"],
    ),
    // The session store as traits, with the SQLite store behind them.
    (
        "clawsmith-store",
        &["clawsmith-protocol", "clawsmith-fs", "clawsmith-checkpoint"],
    ),
    // The fleet store: PostgreSQL and object storage behind the same traits.
    (
        "clawsmith-store-postgres",
        &[
            "clawsmith-protocol",
            "clawsmith-fs",
            "clawsmith-checkpoint",
            "clawsmith-store",
        ],
    ),
    (
        "clawsmith-core",
        &[
            "clawsmith-protocol",
            "clawsmith-security",
            "clawsmith-fs",
            "clawsmith-sandbox",
            "clawsmith-checkpoint",
            "clawsmith-store",
            "clawsmith-trace",
        ],
    ),
    (
        "clawsmith-mcp",
        &["clawsmith-protocol", "clawsmith-core", "clawsmith-trace"],
    ),
    // Skills and read-only memory: extension tools above the core (memory's SQL lives in the
    // checkpoint crate, the one owner of SQL).
    (
        "clawsmith-skills",
        &[
            "clawsmith-protocol",
            "clawsmith-fs",
            "clawsmith-checkpoint",
            "clawsmith-core",
        ],
    ),
    // Plugins: tools run as sandboxed processes, plus their skills and MCP servers.
    (
        "clawsmith-plugins",
        &[
            "clawsmith-protocol",
            "clawsmith-security",
            "clawsmith-fs",
            "clawsmith-sandbox",
            "clawsmith-core",
            "clawsmith-mcp",
            "clawsmith-skills",
            "clawsmith-trace",
        ],
    ),
    // Language servers behind deferred, read-only tools.
    (
        "clawsmith-lsp",
        &[
            "clawsmith-protocol",
            "clawsmith-fs",
            "clawsmith-sandbox",
            "clawsmith-core",
        ],
    ),
    // Providers, the model loop and sub-agents.
    (
        "clawsmith-agent",
        &[
            "clawsmith-protocol",
            "clawsmith-security",
            "clawsmith-fs",
            "clawsmith-sandbox",
            "clawsmith-checkpoint",
            "clawsmith-core",
            "clawsmith-trace",
        ],
    ),
    // The local web view of the store.
    (
        "clawsmith-web",
        &[
            "clawsmith-protocol",
            "clawsmith-fs",
            "clawsmith-checkpoint",
            "clawsmith-store",
        ],
    ),
    (
        "clawsmith-cli",
        &[
            "clawsmith-protocol",
            "clawsmith-shell",
            "clawsmith-security",
            "clawsmith-fs",
            "clawsmith-egress",
            "clawsmith-sandbox",
            "clawsmith-checkpoint",
            "clawsmith-store",
            "clawsmith-store-postgres",
            "clawsmith-core",
            "clawsmith-mcp",
            "clawsmith-trace",
            "clawsmith-skills",
            "clawsmith-plugins",
            "clawsmith-lsp",
            "clawsmith-agent",
            "clawsmith-web",
        ],
    ),
    ("xtask", &["clawsmith-protocol"]),
];

pub fn run(root: &Path) -> Result<()> {
    let mut problems = Vec::new();
    let metadata = cargo_metadata(root)?;
    let edges = workspace_edges(&metadata)?;
    problems.extend(check_layers(&edges));
    let all_dependencies = dependencies(&metadata)?;
    problems.extend(check_owned_dependencies(&all_dependencies));
    let members = workspace_crates(&metadata)?;
    let direct = stated::direct(members.iter().map(|(name, _)| name.as_str()), &edges);
    let architecture = std::fs::read_to_string(root.join("docs/ARCHITECTURE.md"))
        .context("reading docs/ARCHITECTURE.md")?;
    problems.extend(stated::check_architecture_map(&architecture, &direct));
    let protocol: BTreeSet<String> = all_dependencies
        .iter()
        .filter(|(from, _, kind)| from == "clawsmith-protocol" && kind == "normal")
        .map(|(_, to, _)| to.clone())
        .collect();
    problems.extend(stated::check_protocol_statement(&architecture, &protocol));
    let contributing =
        std::fs::read_to_string(root.join("CONTRIBUTING.md")).context("reading CONTRIBUTING.md")?;
    problems.extend(stated::check_contributing_table(&contributing, LAYERS));
    problems.extend(check_protocol_is_plain(root)?);
    for (name, dir) in members {
        problems.extend(check_crate(&name, &dir)?);
    }
    let requirements = std::fs::read_to_string(root.join("docs/REQUIREMENTS.md"))
        .context("reading docs/REQUIREMENTS.md")?;
    let requirements = requirement_refs::defined_ids(&requirements);
    for dir in ["crates", "xtask"] {
        for file in rust_files(&root.join(dir))? {
            let text = std::fs::read_to_string(&file)
                .with_context(|| format!("reading {}", file.display()))?;
            let shown = file
                .strip_prefix(root)
                .unwrap_or(&file)
                .display()
                .to_string();
            problems.extend(check_source(&shown, &text));
            problems.extend(requirement_refs::check_rust(&shown, &text, &requirements));
        }
    }
    for file in markdown_files(root)? {
        let text = std::fs::read_to_string(&file)
            .with_context(|| format!("reading {}", file.display()))?;
        let shown = file
            .strip_prefix(root)
            .unwrap_or(&file)
            .display()
            .to_string();
        problems.extend(requirement_refs::check_markdown(
            &shown,
            &text,
            &requirements,
        ));
    }
    if problems.is_empty() {
        println!("tidy: ok");
        Ok(())
    } else {
        for problem in &problems {
            eprintln!("tidy: {problem}");
        }
        bail!("tidy found {} problem(s)", problems.len())
    }
}

fn cargo_metadata(root: &Path) -> Result<serde_json::Value> {
    let output = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
        .args(["metadata", "--format-version", "1", "--no-deps"])
        .current_dir(root)
        .output()
        .context("running cargo metadata")?;
    if !output.status.success() {
        bail!(
            "cargo metadata failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
    serde_json::from_slice(&output.stdout).context("parsing cargo metadata")
}

/// (from, to, kind) for every dependency of a workspace member, of any kind.
fn dependencies(metadata: &serde_json::Value) -> Result<Vec<(String, String, String)>> {
    let packages = metadata["packages"]
        .as_array()
        .context("metadata has no packages")?;
    let mut dependencies = Vec::new();
    for package in packages {
        let from = package["name"].as_str().unwrap_or_default();
        for dependency in package["dependencies"].as_array().into_iter().flatten() {
            let to = dependency["name"].as_str().unwrap_or_default();
            let kind = dependency["kind"].as_str().unwrap_or("normal").to_owned();
            dependencies.push((from.to_owned(), to.to_owned(), kind));
        }
    }
    Ok(dependencies)
}

/// (from, to, kind) for every dependency between workspace members.
fn workspace_edges(metadata: &serde_json::Value) -> Result<Vec<(String, String, String)>> {
    let packages = metadata["packages"]
        .as_array()
        .context("metadata has no packages")?;
    let members: BTreeSet<&str> = packages.iter().filter_map(|p| p["name"].as_str()).collect();
    let mut edges = dependencies(metadata)?;
    edges.retain(|(_, to, _)| members.contains(to.as_str()));
    Ok(edges)
}

/// External dependencies that carry one piece of knowledge, and the one crate that owns it.
pub const OWNED_DEPENDENCIES: &[(&str, &str)] = &[
    // One bash parse: the permission rules and the disaster check must read commands alike.
    ("tree-sitter", "clawsmith-shell"),
    ("tree-sitter-bash", "clawsmith-shell"),
    // One owner of SQL: the store's schema, migrations and the memory index live together.
    ("rusqlite", "clawsmith-checkpoint"),
    // One owner of the fleet store's servers: PostgreSQL's protocol and object storage.
    ("tokio-postgres", "clawsmith-store-postgres"),
    ("deadpool-postgres", "clawsmith-store-postgres"),
    ("tokio-postgres-rustls", "clawsmith-store-postgres"),
    ("object_store", "clawsmith-store-postgres"),
];

/// Dependencies (from, to, kind) of [`OWNED_DEPENDENCIES`] used outside their owner.
pub fn check_owned_dependencies(dependencies: &[(String, String, String)]) -> Vec<String> {
    dependencies
        .iter()
        .filter_map(|(from, to, _)| {
            let (_, owner) = OWNED_DEPENDENCIES.iter().find(|(name, _)| name == to)?;
            (from != owner).then(|| {
                format!(
                    "{from} depends on {to}, which only {owner} may use (one owner per piece of \
                     knowledge)"
                )
            })
        })
        .collect()
}

/// Layering violations among `edges`.
pub fn check_layers(edges: &[(String, String, String)]) -> Vec<String> {
    let allowed: BTreeMap<&str, &[&str]> = LAYERS.iter().copied().collect();
    let rank = |name: &str| {
        LAYERS
            .iter()
            .position(|(crate_name, _)| *crate_name == name)
    };
    let mut problems = Vec::new();
    for (from, to, kind) in edges {
        let Some(permitted) = allowed.get(from.as_str()) else {
            problems.push(format!(
                "crate {from} is not in the layer table (xtask/src/tidy.rs)"
            ));
            continue;
        };
        let ok = if kind == "dev" {
            // Tests may use any crate that is not above them.
            permitted.contains(&to.as_str()) || rank(to) <= rank(from) && to != from
        } else {
            permitted.contains(&to.as_str())
        };
        if !ok {
            problems.push(format!(
                "{from} -> {to} ({kind} dependency) goes against the layering in CONTRIBUTING.md"
            ));
        }
    }
    problems
}

/// Crates that mean a runtime, I/O or SQLite; none may be in protocol's normal dependency tree.
pub const NOT_IN_PROTOCOL: &[&str] = &[
    "tokio",
    "mio",
    "rusqlite",
    "libsqlite3-sys",
    "nix",
    "rustix",
    "libc",
    "ignore",
    "landlock",
];

fn check_protocol_is_plain(root: &Path) -> Result<Vec<String>> {
    let output = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
        .args([
            "tree",
            "-p",
            "clawsmith-protocol",
            "-e",
            "normal",
            "--prefix",
            "none",
            "--offline",
        ])
        .current_dir(root)
        .output()
        .context("running cargo tree")?;
    if !output.status.success() {
        bail!(
            "cargo tree failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
    Ok(heavy_crates_in_tree(&String::from_utf8_lossy(
        &output.stdout,
    )))
}

/// Problems for every line of a `cargo tree --prefix none` listing that names a heavy crate.
pub fn heavy_crates_in_tree(tree: &str) -> Vec<String> {
    let mut problems = BTreeSet::new();
    for line in tree.lines() {
        let name = line.split_whitespace().next().unwrap_or_default();
        if NOT_IN_PROTOCOL.contains(&name) {
            problems.insert(format!(
                "clawsmith-protocol's normal dependencies include {name}; it must stay plain data"
            ));
        }
    }
    problems.into_iter().collect()
}

fn workspace_crates(metadata: &serde_json::Value) -> Result<Vec<(String, PathBuf)>> {
    let packages = metadata["packages"]
        .as_array()
        .context("metadata has no packages")?;
    let mut crates = Vec::new();
    for package in packages {
        let name = package["name"].as_str().unwrap_or_default().to_owned();
        let manifest = PathBuf::from(package["manifest_path"].as_str().unwrap_or_default());
        let dir = manifest.parent().map(Path::to_path_buf).unwrap_or_default();
        crates.push((name, dir));
    }
    Ok(crates)
}

fn check_crate(name: &str, dir: &Path) -> Result<Vec<String>> {
    let mut problems = Vec::new();
    let entry = ["src/lib.rs", "src/main.rs"]
        .iter()
        .map(|f| dir.join(f))
        .find(|p| p.exists());
    match entry {
        None => problems.push(format!("{name}: no src/lib.rs or src/main.rs")),
        Some(path) => {
            let text = std::fs::read_to_string(&path)
                .with_context(|| format!("reading {}", path.display()))?;
            if !has_essay(&text) {
                problems.push(format!(
                    "{name}: {} must open with a `//!` essay",
                    path.display()
                ));
            }
        }
    }
    let manifest = std::fs::read_to_string(dir.join("Cargo.toml"))
        .with_context(|| format!("reading {}/Cargo.toml", dir.display()))?;
    if !manifest.contains("[lints]\nworkspace = true") {
        problems.push(format!(
            "{name}: Cargo.toml must say `[lints] workspace = true`"
        ));
    }
    Ok(problems)
}

/// Whether `text` opens with a crate essay: `//!` lines (at least three) before any item.
pub fn has_essay(text: &str) -> bool {
    let lines: Vec<&str> = text.lines().take_while(|l| l.starts_with("//!")).collect();
    lines.len() >= 3
}

fn rust_files(dir: &Path) -> Result<Vec<PathBuf>> {
    let mut files = Vec::new();
    if !dir.exists() {
        return Ok(files);
    }
    let mut stack = vec![dir.to_path_buf()];
    while let Some(current) = stack.pop() {
        for entry in
            std::fs::read_dir(&current).with_context(|| format!("listing {}", current.display()))?
        {
            let path = entry?.path();
            let name = path
                .file_name()
                .and_then(|n| n.to_str())
                .unwrap_or_default();
            if path.is_dir() {
                if name != "target" && !name.starts_with('.') {
                    stack.push(path);
                }
            } else if name.ends_with(".rs") {
                files.push(path);
            }
        }
    }
    files.sort();
    Ok(files)
}

/// The project's Markdown: the root's, `docs/`'s and each crate's README.
fn markdown_files(root: &Path) -> Result<Vec<PathBuf>> {
    let mut files = Vec::new();
    for dir in [root.to_path_buf(), root.join("docs")] {
        for entry in
            std::fs::read_dir(&dir).with_context(|| format!("listing {}", dir.display()))?
        {
            let path = entry?.path();
            if path.extension().is_some_and(|ext| ext == "md") {
                files.push(path);
            }
        }
    }
    let crates = root.join("crates");
    for entry in std::fs::read_dir(&crates).context("listing crates")? {
        let readme = entry?.path().join("README.md");
        if readme.is_file() {
            files.push(readme);
        }
    }
    files.sort();
    Ok(files)
}

/// Markers that mean unfinished or hidden work. Spelled in pieces so this file does not match.
fn forbidden_markers() -> [String; 5] {
    [
        format!("{}!(", "todo"),
        format!("{}!(", "unimplemented"),
        format!("#[{}", "ignore"),
        format!("#[{}", "should_panic"),
        format!("{}!()", "todo"),
    ]
}

/// Problems in one source file (`shown` is its path for messages).
pub fn check_source(shown: &str, text: &str) -> Vec<String> {
    let mut problems = Vec::new();
    if shown.ends_with("/mod.rs") || shown == "mod.rs" {
        problems.push(format!(
            "{shown}: use `foo.rs` + `foo/` instead of `mod.rs`"
        ));
    }
    for (number, line) in text.lines().enumerate() {
        for marker in forbidden_markers() {
            if line.contains(&marker) {
                problems.push(format!(
                    "{shown}:{}: forbidden marker `{marker}`",
                    number + 1
                ));
            }
        }
    }
    problems.extend(safety::check_unsafe_comments(shown, text));
    problems.extend(issue_refs::check_issue_references(shown, text));
    problems.extend(error_causes::check_error_causes(shown, text));
    problems
}

#[cfg(test)]
mod tests {
    use super::*;

    fn edge(from: &str, to: &str, kind: &str) -> (String, String, String) {
        (from.into(), to.into(), kind.into())
    }

    #[test]
    fn owned_dependencies_stay_with_their_owner() {
        // ((crate, dependency), allowed)
        let table = [
            (("clawsmith-shell", "tree-sitter"), true),
            (("clawsmith-shell", "tree-sitter-bash"), true),
            (("clawsmith-sandbox", "tree-sitter-bash"), false),
            (("clawsmith-security", "tree-sitter"), false),
            (("clawsmith-sandbox", "libc"), true),
        ];
        for ((from, to), allowed) in table {
            let problems = check_owned_dependencies(&[edge(from, to, "dev")]);
            assert_eq!(problems.is_empty(), allowed, "{from} -> {to}: {problems:?}");
        }
    }

    #[test]
    fn layering_table() {
        // (edge, allowed)
        let table = [
            (
                edge("clawsmith-security", "clawsmith-protocol", "normal"),
                true,
            ),
            (
                edge("clawsmith-protocol", "clawsmith-security", "normal"),
                false,
            ),
            (edge("clawsmith-fs", "clawsmith-sandbox", "normal"), false),
            (edge("clawsmith-sandbox", "clawsmith-shell", "normal"), true),
            (
                edge("clawsmith-security", "clawsmith-shell", "normal"),
                true,
            ),
            (
                edge("clawsmith-shell", "clawsmith-protocol", "normal"),
                false,
            ),
            (edge("clawsmith-fs", "clawsmith-shell", "normal"), false),
            (edge("clawsmith-checkpoint", "clawsmith-fs", "normal"), true),
            (
                edge("clawsmith-fs", "clawsmith-checkpoint", "normal"),
                false,
            ),
            (edge("clawsmith-core", "clawsmith-mcp", "normal"), false),
            (edge("clawsmith-mcp", "clawsmith-core", "normal"), true),
            (edge("clawsmith-sandbox", "clawsmith-fs", "dev"), true),
            (edge("clawsmith-fs", "clawsmith-core", "dev"), false),
            (
                edge("clawsmith-unknown", "clawsmith-protocol", "normal"),
                false,
            ),
        ];
        for (edge, allowed) in table {
            let problems = check_layers(std::slice::from_ref(&edge));
            assert_eq!(problems.is_empty(), allowed, "{edge:?}: {problems:?}");
        }
    }

    #[test]
    fn protocol_tree_check() {
        assert!(heavy_crates_in_tree("clawsmith-protocol v0.1.0\nserde v1.0.0\n").is_empty());
        let found =
            heavy_crates_in_tree("clawsmith-protocol v0.1.0\ntokio v1.0.0\nlibc v0.2.1 (*)\n");
        assert_eq!(found.len(), 2, "{found:?}");
    }

    #[test]
    fn essays_and_markers() {
        assert!(has_essay("//! # x\n//!\n//! Why.\nuse std;"));
        assert!(!has_essay("// x\n//! y\n"));
        assert!(!has_essay("//! one line\nfn main() {}"));
        let marker = format!("fn f() {{ {}!() }}", "todo");
        assert_eq!(check_source("a.rs", &marker).len(), 2);
        assert_eq!(check_source("a.rs", &format!("#[{}]", "ignore")).len(), 1);
        assert_eq!(check_source("src/x/mod.rs", "").len(), 1);
        assert!(check_source("a.rs", "fn todo_list() {}").is_empty());
    }
}
