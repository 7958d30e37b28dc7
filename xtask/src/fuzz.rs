//! `cargo xtask fuzz [--seconds N] [--sanitizer S] [TARGET…]`: runs every cargo-fuzz target in
//! `fuzz/` for N seconds each (default 60) and prints the runs and the outcome per target.
//!
//! `fuzz/` is its own Cargo workspace (not a member of the root one), so `cargo xtask ci` never
//! builds it. libFuzzer needs a nightly compiler: the targets are built with `cargo +nightly
//! fuzz` and `-s none` by default (no sanitizer: the code under test has no `unsafe` of its own,
//! and the build stays light); `--sanitizer address` turns ASan on. cargo-fuzz is installed with
//! `cargo install --locked cargo-fuzz` when missing. A crash stops that target and leaves its input
//! in `fuzz/artifacts/<target>/`; turn it into a regression test in the crate it hit.

use std::path::Path;
use std::process::Command;

use anyhow::{Context, Result, bail};

const TARGETS: &[&str] = &[
    "tool_arguments",
    "path_resolution",
    "command_classifier",
    "sqlite_state",
];

pub fn run(root: &Path, args: &[String]) -> Result<()> {
    let mut seconds: u64 = 60;
    let mut sanitizer = "none".to_owned();
    let mut chosen: Vec<String> = Vec::new();
    let mut iter = args.iter();
    while let Some(arg) = iter.next() {
        match arg.as_str() {
            "--seconds" => {
                seconds = iter
                    .next()
                    .context("--seconds needs a value")?
                    .parse()
                    .context("--seconds")?;
            }
            "--sanitizer" => {
                sanitizer = iter.next().context("--sanitizer needs a value")?.clone();
            }
            name if TARGETS.contains(&name) => chosen.push(name.to_owned()),
            other => bail!(
                "unknown fuzz option or target {other:?}; targets: {}",
                TARGETS.join(", ")
            ),
        }
    }
    if chosen.is_empty() {
        chosen = TARGETS.iter().map(|t| (*t).to_owned()).collect();
    }
    let nightly = Command::new("rustup")
        .args(["toolchain", "list"])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).contains("nightly"))
        .unwrap_or(false);
    if !nightly {
        bail!(
            "libFuzzer needs a nightly toolchain (`rustup toolchain install nightly`); the targets in fuzz/ cannot run on stable"
        );
    }
    let has_fuzz = Command::new("cargo")
        .args(["+nightly", "fuzz", "--version"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !has_fuzz {
        println!("==> cargo install --locked cargo-fuzz");
        let status = Command::new("cargo")
            .args(["install", "--locked", "cargo-fuzz"])
            .status()
            .context("installing cargo-fuzz")?;
        if !status.success() {
            bail!("installing cargo-fuzz failed");
        }
    }
    let target_dir = root.join("fuzz/target");
    let mut failures = Vec::new();
    let mut summary = Vec::new();
    for target in &chosen {
        println!("==> fuzz {target} for {seconds} s (sanitizer {sanitizer})");
        let output = Command::new("cargo")
            .current_dir(root)
            .env("CARGO_TARGET_DIR", &target_dir)
            .args(["+nightly", "fuzz", "run", "-s", &sanitizer, target, "--"])
            .arg(format!("-max_total_time={seconds}"))
            .arg("-rss_limit_mb=4096")
            .arg("-print_final_stats=1")
            .output()
            .with_context(|| format!("running cargo fuzz run {target}"))?;
        let stderr = String::from_utf8_lossy(&output.stderr);
        let runs = stderr
            .lines()
            .rev()
            .find_map(|line| line.strip_prefix("stat::number_of_executed_units:"))
            .map(|n| n.trim().to_owned())
            .unwrap_or_else(|| "?".to_owned());
        let line = format!(
            "{target}: {} after {runs} runs",
            if output.status.success() {
                "no crash"
            } else {
                "FAILED"
            }
        );
        println!("{line}");
        summary.push(line);
        if !output.status.success() {
            let tail: Vec<&str> = stderr.lines().rev().take(40).collect();
            for text in tail.iter().rev() {
                eprintln!("  {text}");
            }
            failures.push(target.clone());
        }
    }
    println!("fuzz summary ({seconds} s each):");
    for line in &summary {
        println!("  {line}");
    }
    if !failures.is_empty() {
        bail!(
            "fuzz targets failed: {} (inputs in fuzz/artifacts/)",
            failures.join(", ")
        );
    }
    Ok(())
}
