//! # xtask
//!
//! clawsmith's own automation, in Rust so that it runs wherever cargo runs:
//!
//! - `cargo xtask ci` — the one command CI and people run: rustfmt check, clippy with
//!   `-D warnings` on all targets, the tests (cargo-nextest when installed, else `cargo test`;
//!   doc tests either way), `cargo doc` with `-D warnings`, `tidy`, `codegen --check`, and
//!   `cargo deny check licenses bans sources`, then `publish`. It first checks that the cargo subcommands it
//!   needs are installed (rustfmt, clippy, cargo-deny; cargo-nextest is optional) and names
//!   every missing one with its install command before building anything.
//! - `cargo xtask tidy` — project rules no compiler checks: dependency arrows follow the
//!   layering of `CONTRIBUTING.md` (read from `cargo metadata`), every crate opens with a `//!`
//!   essay and uses the workspace lints, no `mod.rs`, no unfinished-work markers or ignored
//!   tests, a `// SAFETY:` comment on every `unsafe`, and no comment citing an issue number.
//! - `cargo xtask readmes [--check]` — writes each published crate's `README.md` from the `//!`
//!   essay of its `lib.rs` (see `readmes.rs`); `--check` fails when one differs.
//! - `cargo xtask publish` — what keeps the crates publishable (see `publish.rs`): manifests,
//!   stability tiers against `docs/STABILITY.md`, the protocol's dependency graph, READMEs,
//!   examples, `cargo package`, `cargo hack` over each feature, `cargo semver-checks`.
//! - `cargo xtask codegen [--check]` — writes the protocol's JSON Schema to
//!   `docs/protocol.schema.json`; `--check` fails when the file is stale.
//! - `cargo xtask bench [--quick] [NAME…]` — side-by-side benchmarks (see `bench.rs`); a full
//!   run (no names, no `--quick`) rewrites `docs/benchmarks.md`'s table and keeps its
//!   hand-written part. Not part of `ci`, which only compiles the benches.
//! - `cargo xtask soak [--minutes N]` — the kill -9 soak of the release binary (see `soak.rs`).
//! - `cargo xtask fuzz [--seconds N]` — the cargo-fuzz targets in `fuzz/` (see `fuzz.rs`).
//! - `cargo xtask order-file` — rewrites the list of functions the `clawsmith` binary's start-ups
//!   run, which its build script has the linker place together (see `order.rs`; needs valgrind).
//!
//! It is a binary, so it uses `anyhow` with context at each I/O, and it spawns processes (cargo,
//! the tools CI runs), which the workspace's `clippy.toml` reserves for clawsmith-sandbox: the
//! `#[allow]` below is that documented exception.
#![allow(clippy::disallowed_methods)]

mod bench;
mod fuzz;
mod order;
mod publish;
mod readmes;
mod soak;
mod tidy;

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let root = workspace_root();
    match args.first().map(String::as_str) {
        Some("ci") => ci(&root),
        Some("tidy") => tidy::run(&root),
        Some("readmes") => readmes::run(&root, args.iter().any(|a| a == "--check")),
        Some("publish") => publish::run(&root),
        Some("codegen") => codegen(&root, args.iter().any(|a| a == "--check")),
        Some("bench") => bench::run(&root, &args[1..]),
        Some("soak") => soak::run(&root, &args[1..]),
        Some("fuzz") => fuzz::run(&root, &args[1..]),
        Some("order-file") => order::run(&root, &args[1..]),
        Some("help") | Some("--help") | Some("-h") | None => {
            println!("{USAGE}");
            Ok(())
        }
        Some(other) => bail!("unknown xtask command {other:?}\n\n{USAGE}"),
    }
}

const USAGE: &str = "usage: cargo xtask <command>
  ci                 fmt, clippy, tests, docs, tidy, codegen --check, cargo deny, publish
  tidy               layering, crate essays, lints, forbidden markers, SAFETY comments, no
                     issue numbers in comments
  codegen [--check]  write (or check) docs/protocol.schema.json
  readmes [--check]  write (or check) each crate's README.md from its `//!` essay
  publish            manifests, tiers, protocol API, READMEs, examples, package, hack, semver
  bench [--quick] [NAME...]  side-by-side benchmarks; a full run rewrites docs/benchmarks.md's
                     table and keeps its hand-written notes
  soak [--minutes N] [--seed S] [--binary PATH] [--keep]  kill -9 soak of the release binary
  fuzz [--seconds N] [--sanitizer S] [TARGET...]  run the cargo-fuzz targets in fuzz/ (nightly)
  order-file         rewrite crates/clawsmith-cli/order/clawsmith.txt from callgrind runs of the
                     release binary (needs valgrind); the next release build applies it";

fn workspace_root() -> PathBuf {
    // xtask lives at <root>/xtask.
    let manifest_dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    manifest_dir
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or(manifest_dir)
}

/// A cargo subcommand `ci` runs: (name, whether `ci` needs it, how to install it).
const CI_TOOLS: &[(&str, bool, &str)] = &[
    ("fmt", true, "rustup component add rustfmt"),
    ("clippy", true, "rustup component add clippy"),
    (
        "deny",
        true,
        "cargo install --locked cargo-deny (.ci/run does)",
    ),
    (
        "hack",
        true,
        "cargo install --locked cargo-hack (.ci/run does)",
    ),
    (
        "semver-checks",
        true,
        "cargo install --locked cargo-semver-checks (.ci/run does)",
    ),
    (
        "nextest",
        false,
        "cargo install --locked cargo-nextest (optional: `cargo test` runs the tests without it)",
    ),
];

/// The tools of [`CI_TOOLS`] that `installed` says are missing, as (required, message) lines:
/// `ci` checks them before its first step, so a missing cargo-deny is found in seconds, not
/// after the whole build and test run.
fn missing_ci_tools(installed: impl Fn(&str) -> bool) -> Vec<(bool, String)> {
    CI_TOOLS
        .iter()
        .filter(|(name, _, _)| !installed(name))
        .map(|(name, required, install)| (*required, format!("cargo {name} is missing: {install}")))
        .collect()
}

fn ci(root: &Path) -> Result<()> {
    let missing = missing_ci_tools(|name| has_cargo_subcommand(root, name));
    for (_, message) in missing.iter().filter(|(required, _)| !required) {
        println!("note: {message}");
    }
    for (variable, server) in [
        ("CLAWSMITH_TEST_POSTGRES", "PostgreSQL"),
        ("CLAWSMITH_TEST_S3", "S3-compatible"),
    ] {
        if std::env::var_os(variable).is_none() {
            println!(
                "note: {variable} is unset: the fleet store's {server} tests skip (.ci/run \
                 starts the servers: `pg_virtualenv .ci/with-services cargo xtask ci`)"
            );
        }
    }
    let required: Vec<&str> = missing
        .iter()
        .filter(|(required, _)| *required)
        .map(|(_, message)| message.as_str())
        .collect();
    if !required.is_empty() {
        bail!(
            "`cargo xtask ci` needs tools that are not installed:\n  {}",
            required.join("\n  ")
        );
    }
    step(root, "rustfmt", &["fmt", "--all", "--", "--check"], &[])?;
    step(
        root,
        "clippy",
        &[
            "clippy",
            "--workspace",
            "--all-targets",
            "--locked",
            "--",
            "-D",
            "warnings",
        ],
        &[],
    )?;
    if has_nextest(root) {
        step(
            root,
            "tests (nextest)",
            &[
                "nextest",
                "run",
                "--workspace",
                "--locked",
                "--no-fail-fast",
            ],
            &[],
        )?;
        step(
            root,
            "doc tests",
            &["test", "--workspace", "--locked", "--doc"],
            &[],
        )?;
    } else {
        step(
            root,
            "tests",
            &["test", "--workspace", "--locked", "--no-fail-fast"],
            &[],
        )?;
    }
    // As docs.rs builds them (`[package.metadata.docs.rs]`): every feature, `--cfg docsrs`.
    step(
        root,
        "docs",
        &[
            "doc",
            "--workspace",
            "--no-deps",
            "--locked",
            "--all-features",
        ],
        &[("RUSTDOCFLAGS", "--cfg docsrs -D warnings")],
    )?;
    println!("==> tidy");
    tidy::run(root)?;
    println!("==> codegen --check");
    codegen(root, true)?;
    step(
        root,
        "cargo deny",
        &["deny", "--locked", "check", "licenses", "bans", "sources"],
        &[],
    )?;
    publish::run(root)?;
    println!("==> ci passed");
    Ok(())
}

fn step(root: &Path, name: &str, args: &[&str], env: &[(&str, &str)]) -> Result<()> {
    println!("==> {name}: cargo {}", args.join(" "));
    let status = Command::new(cargo())
        .args(args)
        .envs(env.iter().copied())
        .current_dir(root)
        .status()
        .with_context(|| format!("could not start cargo for {name}"))?;
    if !status.success() {
        bail!("{name} failed ({status})");
    }
    Ok(())
}

fn cargo() -> String {
    std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned())
}

fn has_cargo_subcommand(root: &Path, name: &str) -> bool {
    Command::new(cargo())
        .args([name, "--version"])
        .current_dir(root)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|status| status.success())
}

fn has_nextest(root: &Path) -> bool {
    has_cargo_subcommand(root, "nextest")
}

fn codegen(root: &Path, check: bool) -> Result<()> {
    let path = root.join("docs/protocol.schema.json");
    let schema = clawsmith_protocol::schema::protocol_schema();
    let mut text = serde_json::to_string_pretty(&schema).context("serializing the schema")?;
    text.push('\n');
    if check {
        let current = std::fs::read_to_string(&path)
            .with_context(|| format!("reading {}", path.display()))?;
        if current != text {
            bail!("{} is stale; run `cargo xtask codegen`", path.display());
        }
        println!("{} is up to date", path.display());
    } else {
        std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))?;
        println!("wrote {}", path.display());
    }
    Ok(())
}

#[cfg(test)]
mod ci_tests {
    use super::missing_ci_tools;

    #[test]
    fn missing_tools_are_named_before_anything_runs() {
        let everything = missing_ci_tools(|_| true);
        assert!(everything.is_empty(), "{everything:?}");
        let without_deny_and_nextest = missing_ci_tools(|name| !matches!(name, "deny" | "nextest"));
        assert_eq!(
            without_deny_and_nextest,
            [
                (
                    true,
                    "cargo deny is missing: cargo install --locked cargo-deny (.ci/run does)"
                        .to_owned()
                ),
                (
                    false,
                    "cargo nextest is missing: cargo install --locked cargo-nextest (optional: \
                     `cargo test` runs the tests without it)"
                        .to_owned()
                ),
            ]
        );
    }
}
