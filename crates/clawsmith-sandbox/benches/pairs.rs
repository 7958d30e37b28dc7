//! In-process pairs for `cargo xtask bench` (ours vs theirs, measured alternately in one run):
//! - `run_command "true"` through the full sandbox (disaster check, environment, rlimits,
//!   namespaces and the built view, Landlock, seccomp, relay and init, output capture) against a
//!   bare
//!   `sh -c true` spawn;
//! - the same against `bwrap --ro-bind / / --unshare-net true` (bubblewrap is installed from
//!   Debian's packages when missing; the pair is skipped, with the reason, when it cannot run);
//! - `run_command "true"` with a network allowlist against the same with the network off (the
//!   base namespace and its gateway are built once and kept, as for any configuration: the
//!   row is what an allowlist adds to each command);
//! - 64 MiB through the egress gateway's CONNECT tunnel against the same read straight from
//!   the origin, both on loopback;
//! - the disaster check alone on an everyday command.
//!
//! Each sample is the time of a batch of spawns, the sides alternating per batch after a warm-up.
//! Prints one `CLAWSMITH-BENCH {json}` line per pair; `--quick` runs fewer rounds.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::disallowed_methods)]

use std::io::{Read, Write};
use std::net::{IpAddr, SocketAddr};
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use clawsmith_egress::{BoxFuture, Connect, EgressPolicy, Gateway, Resolve};

use clawsmith_protocol::CancellationSignal;
use clawsmith_sandbox::classify::check_command;
use clawsmith_sandbox::{
    CommandRequest, Egress, ExitKind, KernelSupport, SandboxConfig, SandboxPolicy, run_command,
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

    if confined {
        allowlist_pair(&runtime, &config, rounds, batch);
    }
    gateway_pair(rounds);

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

/// `run_command true` with an allowlist against the network off, per command.
fn allowlist_pair(
    runtime: &tokio::runtime::Runtime,
    off: &SandboxConfig,
    rounds: usize,
    batch: usize,
) {
    let mut allowlist = off.clone();
    let policy = EgressPolicy::parse(&["example.com:443"], &[] as &[&str]).unwrap();
    allowlist.egress = Some(Egress::new(policy));
    let per_spawn = |config: &SandboxConfig| {
        timed(|| {
            for _ in 0..batch {
                let outcome = runtime
                    .block_on(run_command(
                        config,
                        &CommandRequest::new("true"),
                        &CancellationSignal::new(),
                    ))
                    .unwrap();
                assert_eq!(outcome.exit, ExitKind::Code(0));
            }
        }) / batch as f64
    };
    let (ours, theirs) = alternate(rounds, || per_spawn(&allowlist), || per_spawn(off));
    println!(
        "CLAWSMITH-BENCH {}",
        json!({
            "name": "run_command true: network allowlist vs off",
            "ours": "allowlist",
            "theirs": "off",
            "oursSamples": ours,
            "theirsSamples": theirs,
            "unit": "seconds",
            "target": {"secondsMoreAtMost": 0.001},
            "note": format!("per command, mean of {batch}; the namespace, its exits and the gateway thread are built with the base view and kept with it"),
        })
    );
}

/// Resolves every name to one documentation address.
struct OneAddress;

impl Resolve for OneAddress {
    fn resolve<'a>(&'a self, _host: &'a str) -> BoxFuture<'a, std::io::Result<Vec<IpAddr>>> {
        Box::pin(async { Ok(vec!["203.0.113.7".parse().unwrap()]) })
    }
}

/// Dials the origin on 127.0.0.1 whatever address was checked.
struct ToOrigin(u16);

impl Connect for ToOrigin {
    fn connect(
        &self,
        _address: SocketAddr,
    ) -> BoxFuture<'_, std::io::Result<tokio::net::TcpStream>> {
        let port = self.0;
        Box::pin(async move { tokio::net::TcpStream::connect(("127.0.0.1", port)).await })
    }
}

/// 64 MiB read through the gateway's CONNECT tunnel against the same read from the origin.
fn gateway_pair(rounds: usize) {
    const BYTES: usize = 64 << 20;
    // The origin writes BYTES to every connection and closes it.
    let origin = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let origin_port = origin.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for stream in origin.incoming() {
            let Ok(mut stream) = stream else { return };
            std::thread::spawn(move || {
                let chunk = vec![7_u8; 1 << 16];
                for _ in 0..BYTES / chunk.len() {
                    if stream.write_all(&chunk).is_err() {
                        return;
                    }
                }
            });
        }
    });
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let policy = EgressPolicy::parse(&["origin.test:443"], &[] as &[&str]).unwrap();
    let gateway = Arc::new(
        Gateway::new(policy)
            .with_resolver(Arc::new(OneAddress))
            .with_connector(Arc::new(ToOrigin(origin_port))),
    );
    let listener = runtime
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .unwrap();
    let gateway_port = listener.local_addr().unwrap().port();
    runtime.spawn(gateway.serve(listener));
    let drain = |mut stream: std::net::TcpStream| {
        let mut buffer = vec![0_u8; 1 << 16];
        let mut total = 0;
        loop {
            match stream.read(&mut buffer).unwrap() {
                0 => break,
                read => total += read,
            }
        }
        assert_eq!(total, BYTES);
    };
    let through_gateway = || {
        timed(|| {
            let mut stream = std::net::TcpStream::connect(("127.0.0.1", gateway_port)).unwrap();
            stream
                .write_all(b"CONNECT origin.test:443 HTTP/1.1\r\nHost: origin.test:443\r\n\r\n")
                .unwrap();
            // The answer's head, then the tunnel.
            let mut head = Vec::new();
            let mut byte = [0_u8; 1];
            while !head.ends_with(b"\r\n\r\n") {
                stream.read_exact(&mut byte).unwrap();
                head.push(byte[0]);
            }
            assert!(
                head.starts_with(b"HTTP/1.1 200"),
                "{}",
                String::from_utf8_lossy(&head)
            );
            drain(stream);
        })
    };
    let direct =
        || timed(|| drain(std::net::TcpStream::connect(("127.0.0.1", origin_port)).unwrap()));
    let (ours, theirs) = alternate(rounds, through_gateway, direct);
    print_pair(
        "64 MiB through the egress gateway vs direct",
        "CONNECT tunnel",
        "direct",
        &ours,
        &theirs,
        2.0,
        "loopback both; the gateway relays in userspace on one tokio worker (two socket copies more than the direct read)",
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
