//! Logging: `tracing` events of every crate, formatted on stderr, set up once here.
//!
//! The level comes from `RUST_LOG` when it is set (the usual `EnvFilter` syntax, e.g.
//! `RUST_LOG=clawsmith_core=debug`); otherwise from the flags: warnings by default, `-v` info,
//! `-vv` debug, `-vvv` trace, `-q` errors only. Log lines go to stderr, never stdout, so they
//! never mix with JSON output; they are coloured like the rest of stderr.
//!
//! The subscriber is a [`tracing_subscriber::Registry`] with layers, so an exporter (an
//! OpenTelemetry layer) can be added next to the formatting layer by pushing one more layer in
//! [`init`]; nothing else has to change.

use tracing_subscriber::EnvFilter;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;

/// How loud the log is: `-v` (repeatable) and `-q`.
#[derive(Debug, Clone, Copy, Default, clap::Args)]
pub struct Verbosity {
    /// More log on stderr: -v info, -vv debug, -vvv trace (`RUST_LOG` overrides).
    #[arg(short, long, global = true, action = clap::ArgAction::Count, conflicts_with = "quiet")]
    pub verbose: u8,
    /// Only errors on stderr (no warnings or notes from the log).
    #[arg(short, long, global = true)]
    pub quiet: bool,
}

impl Verbosity {
    /// The filter directive the flags stand for.
    pub fn directive(self) -> &'static str {
        match (self.quiet, self.verbose) {
            (true, _) => "error",
            (false, 0) => "warn",
            (false, 1) => "info",
            (false, 2) => "debug",
            (false, _) => "trace",
        }
    }
}

/// Installs the process's subscriber: `RUST_LOG` if set, else the flags' level. Call once; a
/// second call (a subscriber already set) leaves the first in place.
pub fn init(verbosity: Verbosity) {
    let filter = match std::env::var("RUST_LOG") {
        Ok(directives) if !directives.trim().is_empty() => EnvFilter::new(directives),
        _ => EnvFilter::new(verbosity.directive()),
    };
    let format = tracing_subscriber::fmt::layer()
        .with_writer(anstream::stderr)
        .with_ansi(crate::output::stderr_is_live())
        .with_target(true)
        .without_time();
    let registry = tracing_subscriber::registry().with(filter).with(format);
    // An exporter joins here: `.with(opentelemetry_layer)`.
    if registry.try_init().is_err() {
        tracing::debug!("a log subscriber was already installed");
    }
}
