//! In-process pairs for `cargo xtask bench` (ours vs theirs, measured alternately in one run):
//! - `run_command "true"` through the full sandbox (disaster check, environment, rlimits,
//!   Landlock, seccomp, mount namespace, process group, output capture) against a bare
//!   `sh -c true` spawn;
//! - the same against `bwrap --ro-bind / / --unshare-net true` where bubblewrap is installed;
//! - the disaster check alone on an everyday command.
//!
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

fn spawn_seconds(program: &str, args: &[&str]) -> f64 {
    timed(|| {
        let status = std::process::Command::new(program)
            .args(args)
            .status()
            .unwrap();
        assert!(status.success(), "{program} {args:?}");
    })
}

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let rounds = if quick { 10 } else { 60 };
    let temp = tempfile::tempdir().unwrap();
    let mut config = SandboxConfig::new(temp.path());
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
            let outcome = runtime
                .block_on(run_command(
                    &config,
                    &CommandRequest::new("true"),
                    &CancellationSignal::new(),
                ))
                .unwrap();
            assert_eq!(outcome.exit, ExitKind::Code(0));
        })
    };
    let note = if confined {
        "full sandbox: Landlock + seccomp + mount namespace + rlimits"
    } else {
        "Landlock unavailable: unconfined"
    };

    let (ours, theirs) = alternate(rounds, &mut sandboxed, || {
        spawn_seconds("/bin/sh", &["-c", "true"])
    });
    print_pair(
        "run_command true vs sh -c true",
        "run_command",
        "sh -c true",
        &ours,
        &theirs,
        4.0,
        note,
    );

    if Path::new("/usr/bin/bwrap").exists() {
        let (ours, theirs) = alternate(rounds, &mut sandboxed, || {
            spawn_seconds(
                "/usr/bin/bwrap",
                &["--ro-bind", "/", "/", "--unshare-net", "true"],
            )
        });
        print_pair(
            "run_command true vs bwrap",
            "run_command",
            "bwrap --ro-bind / / --unshare-net true",
            &ours,
            &theirs,
            2.0,
            note,
        );
    } else {
        eprintln!("bubblewrap not installed: no run_command vs bwrap pair");
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
