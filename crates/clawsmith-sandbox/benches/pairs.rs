//! In-process pairs for `cargo xtask bench` (ours vs theirs, measured alternately in one run):
//! - `run_command "true"` through the full sandbox (disaster check, environment, rlimits,
//!   namespaces and the built view, Landlock, seccomp, relay and init, output capture) against a
//!   bare
//!   `sh -c true` spawn;
//! - the same against `bwrap --ro-bind / / --unshare-net true` (bubblewrap is installed from
//!   Debian's packages when missing; the pair is skipped, with the reason, when it cannot run);
//! - the disaster check alone on an everyday command.
//!
//! Each sample is the time of a batch of spawns, the sides alternating per batch after a warm-up.
//! Prints one `CLAWSMITH-BENCH {json}` line per pair; `--quick` runs fewer rounds.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::disallowed_methods)]

use std::path::Path;
use std::time::Instant;

use clawsmith_protocol::CancellationSignal;
use clawsmith_sandbox::classify::check_command;
use clawsmith_sandbox::{
    CommandRequest, ExitKind, KernelSupport, SandboxConfig, SandboxPolicy, run_command,
};
use serde_json::json;

fn alternate(
    rounds: usize,
    mut ours: impl FnMut() -> f64,
    mut theirs: impl FnMut() -> f64,
) -> (Vec<f64>, Vec<f64>) {
    ours();
    theirs();
    let (mut a, mut b) = (Vec::new(), Vec::new());
    for _ in 0..rounds {
        a.push(ours());
        b.push(theirs());
    }
    (a, b)
}

fn timed(f: impl FnOnce()) -> f64 {
    let start = Instant::now();
    f();
    start.elapsed().as_secs_f64()
}

fn spawn_once(program: &str, args: &[&str]) {
    let status = std::process::Command::new(program)
        .args(args)
        .status()
        .unwrap();
    assert!(status.success(), "{program} {args:?}");
}

/// Finds bubblewrap, installing Debian's package when it is missing (as `cargo xtask bench` does
/// for its peers), and checks that it can run here; `Err` says why the pair is skipped.
fn bwrap_ready() -> Result<&'static str, String> {
    let program = "/usr/bin/bwrap";
    if !Path::new(program).exists() {
        eprintln!("installing bubblewrap from Debian's packages");
        let _ = std::process::Command::new("sh")
            .args([
                "-c",
                "(apt-get update -qq || true) && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq bubblewrap",
            ])
            .status();
    }
    if !Path::new(program).exists() {
        return Err("bubblewrap is not installed and could not be installed".into());
    }
    let output = std::process::Command::new(program)
        .args(BWRAP_ARGS)
        .output()
        .map_err(|error| format!("bwrap could not start: {error}"))?;
    if !output.status.success() {
        return Err(format!(
            "bwrap cannot run here (user namespaces?): {}",
            String::from_utf8_lossy(&output.stderr).trim()
        ));
    }
    Ok(program)
}

const BWRAP_ARGS: &[&str] = &["--ro-bind", "/", "/", "--unshare-net", "true"];

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    // Each sample is a batch of spawns; the sides alternate per batch.
    let (rounds, batch) = if quick { (5, 10) } else { (15, 20) };
    let temp = tempfile::tempdir().unwrap();
    let mut config = SandboxConfig::new(temp.path(), clawsmith_sandbox::StateDir::NotKept);
    let confined = KernelSupport::probe().landlock_abi.is_some();
    if !confined {
        eprintln!("Landlock unavailable: run_command is measured best-effort (unconfined)");
        config.policy = SandboxPolicy::BestEffort;
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let mut sandboxed = || {
        timed(|| {
            for _ in 0..batch {
                let outcome = runtime
                    .block_on(run_command(
                        &config,
                        &CommandRequest::new("true"),
                        &CancellationSignal::new(),
                    ))
                    .unwrap();
                assert_eq!(outcome.exit, ExitKind::Code(0));
            }
        })
    };
    let note = if confined {
        format!(
            "{batch} spawns per sample; full sandbox: disaster check, user/mount/pid/ipc/net namespaces and the built view, Landlock, seccomp, rlimits, relay and init, output capture"
        )
    } else {
        format!("{batch} spawns per sample; Landlock unavailable: unconfined")
    };

    let (ours, theirs) = alternate(rounds, &mut sandboxed, || {
        timed(|| {
            for _ in 0..batch {
                spawn_once("/bin/sh", &["-c", "true"]);
            }
        })
    });
    print_pair(
        "run_command true vs sh -c true",
        "run_command",
        "sh -c true",
        &ours,
        &theirs,
        1.5,
        &note,
    );

    match bwrap_ready() {
        Ok(program) => {
            let (ours, theirs) = alternate(rounds, &mut sandboxed, || {
                timed(|| {
                    for _ in 0..batch {
                        spawn_once(program, BWRAP_ARGS);
                    }
                })
            });
            print_pair(
                "run_command true vs bwrap",
                "run_command",
                "bwrap --ro-bind / / --unshare-net true",
                &ours,
                &theirs,
                0.7,
                &note,
            );
        }
        Err(reason) => eprintln!("no run_command vs bwrap pair: {reason}"),
    }

    let command = "cargo test -p clawsmith-sandbox 2>&1 | tee log && echo done";
    let samples: Vec<f64> = (0..rounds)
        .map(|_| timed(|| assert!(!check_command(std::hint::black_box(command)).is_blocked())))
        .collect();
    println!(
        "CLAWSMITH-BENCH {}",
        json!({
            "name": "disaster check (one everyday command)",
            "ours": "check_command",
            "theirs": "",
            "oursSamples": samples,
            "theirsSamples": [],
            "unit": "seconds",
            "target": {"secondsAtMost": 0.001},
        })
    );
}

fn print_pair(
    name: &str,
    ours_label: &str,
    theirs_label: &str,
    ours: &[f64],
    theirs: &[f64],
    ratio_at_most: f64,
    note: &str,
) {
    println!(
        "CLAWSMITH-BENCH {}",
        json!({
            "name": name,
            "ours": ours_label,
            "theirs": theirs_label,
            "oursSamples": ours,
            "theirsSamples": theirs,
            "unit": "seconds",
            "target": {"ratioAtMost": ratio_at_most},
            "note": note,
        })
    );
}
