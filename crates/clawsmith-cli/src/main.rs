//! # clawsmith (the binary)
//!
//! The front end people and other programs meet: it lists the frozen tool table, runs calls and
//! whole turns through the core, undoes turns, prunes old checkpoints, checks command text against
//! the disaster classifier, serves the tools over the Model Context Protocol, and prints shell
//! completions (`clap_complete`, from the same definition as the parser).
//!
//! ## Decisions
//! - **Embedded state.** Everything lives in one SQLite database in the state directory
//!   (`--state-dir`, `CLAWSMITH_STATE_DIR`, `$XDG_STATE_HOME/clawsmith` or
//!   `~/.local/state/clawsmith`); no server is needed. The state directory is refused when it lies
//!   inside the workspace being served, because the tools could then read or rewrite their own
//!   audit trail and undo data.
//! - **A private state directory, trusted like `~/.ssh`.** It is created 0700 and its files
//!   0600 whatever the umask; looser read bits are removed with a one-line notice. A directory or
//!   `clawsmith.toml` owned by another user or writable by group/others is refused with the path,
//!   the owner and what to do (the configuration names commands clawsmith starts), and so is a
//!   symlink inside the directory. Background-command logs live in `commands/<pid>/`, removed
//!   when the server ends (a one-shot process's, and leftovers of dead processes, are swept by
//!   the next start).
//! - **One tool table.** `tools`, `call`, `turn`, `run` and `mcp` build the same table
//!   (`run::build_core`), background commands included; a one-shot process's background
//!   commands end with it, which `call`/`turn` say on stderr after a `start_command`.
//! - **One writer per session.** `call`, `turn`, `mcp`, `undo` and `session fork` take the
//!   session's lease; a second writer exits 1 with "session X is in use by pid N", or queues with
//!   `--wait`. `undo` writes only in the `--workspace` it is given (default: the current
//!   directory) and refuses a session that works elsewhere.
//! - **Each batch is a model request.** `call` and each batch of `turn` record the request they
//!   stand for (A9 evidence); a turn that ran `search_tools` also records the next request's
//!   list before the process ends, so the hits are callable from the session's next command.
//! - **Bounded input.** `turn` reads at most 16 MiB of calls from stdin; session ids are 1–128
//!   printable characters that cannot read as a path.
//! - **Machine output is a contract.** `call` prints one `ToolExecutionResult` JSON object
//!   (through a pipe or with `--json`; on a terminal, or with `--pretty`, a readable form:
//!   `timeline::call_result`), `turn` one JSON line per event and a final `turn.result`,
//!   `check-command` one verdict object. Other commands print for people unless `--json` is
//!   given. A `call` that waits for a busy session says so on stderr.
//! - **`call` continues the day's session.** Without `--session`, `call` uses one session per
//!   workspace and local day (`ses_calls_<YYYYMMDD>_<hash of the workspace path>`) and waits
//!   for another `call` in it, so people running many calls in a row get one history and one
//!   undo list; `--session new` asks for a fresh session. `turn` and `mcp` start a fresh
//!   session without `--session` (a turn is already a unit).
//! - **Text for people** goes through one output layer (`output.rs`: colour with `--color` and
//!   `NO_COLOR`, glyphs, aligned tables, local times with their zone, sizes); `turn --pretty`
//!   and `session show` print the same timeline (`timeline.rs`). Logs (`tracing`, `RUST_LOG`,
//!   `-v`, `-q`) go to stderr (`logging.rs`).
//! - **Exit codes, one meaning each** (the constants in [`exit`]): 0 when a command did its job
//!   (for `call`, whenever a result was produced, whatever its status, unless `--exit-status`);
//!   1 when clawsmith itself failed (unreadable or untrusted state, a session in use); 2 for a
//!   usage error (clap's own: bad flags or values); 3 when an undo was refused by its precheck
//!   (nothing changed); 4 when `check-command` blocks; 5 when `call --exit-status` produced a
//!   result that is not a success (as `jq -e` does); 130 and 143 when `run` was cancelled by
//!   Ctrl-C or SIGTERM (128 + the signal's number, as a shell reports it; the turn is finished
//!   and `run.result` printed first). A reader that closes the pipe early
//!   (`| head`) ends the output quietly with 0, as ripgrep and git do.
//! - **Errors for people** are `error: …`, each cause once (`a: b: c`), then `help: …` when
//!   there is something to do ([`Help`]).
//!
//! ## What it does not do
//! It holds no policy of its own: permissions, limits and checkpoints are the core's, so a call
//! made here and the same call made over MCP behave identically.

mod agent;
mod history;
mod logging;
mod lsp;
mod output;
mod plugins;
mod policy;
mod run;
mod skills;
mod state;
mod store;
mod timeline;
mod traces;
mod web;

use std::io::Write;
use std::path::PathBuf;

use anyhow::Result;
use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};
use clawsmith_checkpoint::UndoScope;
use clawsmith_protocol::ToolStatus;

/// clawsmith: a runtime for the tools of an LLM coding agent.
#[derive(Debug, Parser)]
#[command(name = "clawsmith", version, about)]
struct Cli {
    #[command(flatten)]
    globals: Globals,
    #[command(subcommand)]
    command: Command,
}

/// The command tree of `call` alone, with the same global options: what [`parse`] tries first
/// for a `call`.
#[derive(Debug, Parser)]
#[command(name = "clawsmith")]
struct CallCli {
    #[command(flatten)]
    globals: Globals,
    #[command(subcommand)]
    command: CallCommand,
}

/// The options every command takes.
#[derive(Debug, clap::Args)]
struct Globals {
    /// Where the state database lives (never inside a workspace it serves).
    #[arg(long, global = true, env = "CLAWSMITH_STATE_DIR", value_name = "DIR")]
    state_dir: Option<PathBuf>,
    /// Print JSON instead of text for people.
    #[arg(long, global = true)]
    json: bool,
    /// Fsync every commit of the state database, so the audit trail also survives a power loss
    /// (about 10× slower per call; without it, commits survive a killed process).
    #[arg(long, global = true)]
    fsync: bool,
    /// When another process is writing the session (one writer per session), wait for it
    /// instead of failing with "session … is in use by pid N".
    #[arg(long, global = true)]
    wait: bool,
    /// The caller's W3C trace context for `call`, `turn`, `run` and `mcp`
    /// (`00-<trace id>-<parent span id>-<flags>`): their spans join that trace. Takes precedence
    /// over the TRACEPARENT environment variable.
    #[arg(long, global = true, value_name = "W3C", value_parser = traces::parse_traceparent)]
    traceparent: Option<clawsmith_trace::TraceParent>,
    /// Colour in text for people: auto (on a terminal, unless NO_COLOR is set), always, never.
    #[arg(long, global = true, value_enum, default_value_t, value_name = "WHEN")]
    color: output::ColorArg,
    #[command(flatten)]
    verbosity: logging::Verbosity,
}

// `check-command` is the contract's name; the variant follows it.
#[allow(clippy::enum_variant_names)]
#[derive(Debug, Subcommand)]
enum Command {
    /// The frozen tool table: name, effective risk, capabilities, concurrency, deferral, schema.
    Tools {
        #[command(flatten)]
        core: run::CoreOptions,
    },
    #[command(flatten)]
    Call(CallCommand),
    /// Run a task with the configured model (`[provider]` in clawsmith.toml): the model's calls
    /// go through the core until it answers; prints progress and the answer (`--json`: every
    /// event as a JSON line, then a `run.result` line).
    Run {
        #[command(flatten)]
        args: agent::RunArgs,
    },
    /// Run one assistant message's tool calls (JSON array on stdin); prints events as JSON lines.
    ///
    /// A call is `{"id", "name", "arguments"}`; `arguments` is the JSON text (OpenAI's form) or
    /// the object itself (Anthropic's `input`, also accepted under that name).
    Turn {
        #[command(flatten)]
        core: run::CoreOptions,
        #[command(flatten)]
        turn: run::TurnOptions,
    },
    /// Serve the frozen tool table over the Model Context Protocol on stdio (or HTTP with
    /// `--http`).
    Mcp {
        #[command(flatten)]
        core: run::CoreOptions,
        #[command(flatten)]
        http: run::McpHttpOptions,
    },
    /// Authorize clawsmith at a remote MCP server of `clawsmith.toml` that uses OAuth: prints a
    /// URL to open in a browser, waits for the redirect on 127.0.0.1 and stores the tokens
    /// (0600, in the state directory) for the next start to use and refresh.
    McpLogin {
        /// The server's `name` in `[[mcp_servers]]`.
        server: String,
        /// The configuration file (default: `clawsmith.toml` in the state directory).
        #[arg(long, value_name = "FILE")]
        config: Option<PathBuf>,
        /// How long to wait for the browser to come back, in seconds.
        #[arg(long, value_name = "SECONDS", default_value_t = clawsmith_mcp::LOGIN_TIMEOUT.as_secs())]
        timeout: u64,
    },
    /// The policy of `clawsmith.toml`: `policy check` explains a decision without running it.
    Policy {
        #[command(subcommand)]
        command: policy::PolicyCommand,
    },
    /// Run the disaster classifier on command text (never executes it); exits 4 when blocked.
    CheckCommand {
        /// The shell text to classify.
        text: String,
    },
    /// Inspect and fork sessions.
    Session {
        #[command(subcommand)]
        command: SessionCommand,
    },
    /// List, inspect and undo turns (hash-checked; conflicts change nothing).
    Undo {
        #[command(subcommand)]
        command: UndoCommand,
    },
    /// A local web view of sessions, tool calls, checkpoints and diffs, with undo; prints
    /// `http://127.0.0.1:PORT/s/<secret>/?token=…` and serves until stopped.
    Web(web::WebOptions),
    /// The session store `[store]` names: `store migrate` prepares a PostgreSQL database,
    /// `store check` says what was reached.
    Store {
        #[command(subcommand)]
        command: store::StoreCommand,
    },
    /// Delete expired or over-quota checkpoints and collect unreferenced blobs (with `[store]
    /// kind = "postgres"`: sessions older than 30 days, then blobs nothing names any more).
    Prune {
        /// Report what would be removed without removing it.
        #[arg(long)]
        dry_run: bool,
        /// The configuration file (default: `clawsmith.toml` in the state directory).
        #[arg(long, value_name = "FILE")]
        config: Option<PathBuf>,
    },
    /// Skills found for a workspace (`skills list`), valid or not, with their sources.
    Skills {
        #[command(subcommand)]
        command: skills::SkillsCommand,
    },
    /// Plugins (`plugins list`): their tools with effective risk, skills, MCP servers, hooks,
    /// what clawsmith does not run of them, and load errors.
    Plugins {
        #[command(subcommand)]
        command: plugins::PluginsCommand,
    },
    /// Long-term memory: notes (`add`, `list`, `rm`) and `search`, as `memory_search` does.
    Memory {
        #[command(subcommand)]
        command: skills::MemoryCommand,
    },
    /// Print a completion script for a shell, e.g. `clawsmith completions bash >
    /// ~/.local/share/bash-completion/completions/clawsmith`.
    Completions {
        /// The shell.
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
}

/// `call`, an enum of its own so that [`CallCli`] can parse it without the rest of the tree.
#[derive(Debug, Subcommand)]
enum CallCommand {
    /// Run one call as a one-call turn through the whole core; prints the result as JSON.
    ///
    /// Without --session, calls continue the workspace's session of the day (`ses_calls_<date>_…`,
    /// waiting for another call in it to finish), so many calls in a row make one session to
    /// `session show` and undo; `--session new` starts a fresh session.
    Call {
        #[command(flatten)]
        core: run::CoreOptions,
        /// The tool's name.
        tool: String,
        /// The arguments as a JSON string (as a provider sends them).
        arguments: String,
        /// Exit 5 when the result's status is not `success` (as `jq -e` does); without it,
        /// `call` exits 0 whenever it produced a result.
        #[arg(long)]
        exit_status: bool,
        /// Print the result for people (status line, facts, the whole result text) instead of
        /// JSON; the default when stdout is a terminal and --json is not given.
        #[arg(long)]
        pretty: bool,
    },
}

#[derive(Debug, Subcommand)]
enum SessionCommand {
    /// Every session, newest first.
    List,
    /// A session's messages, events and todos (streamed; page with --since and --limit).
    Show {
        /// The session id.
        #[arg(value_parser = history::session_id)]
        id: String,
        #[command(flatten)]
        range: history::ShowRange,
    },
    /// Fork a session: the child shares history and blobs; undo in one never touches the other.
    Fork {
        /// The parent session id.
        #[arg(value_parser = history::session_id)]
        id: String,
        /// The child's id (generated when omitted).
        #[arg(long = "as", value_name = "NEW_ID", value_parser = history::session_id)]
        new_id: Option<String>,
    },
}

#[derive(Debug, Subcommand)]
enum UndoCommand {
    /// Turns with their changed files, newest first: on a terminal the 20 newest turns that
    /// changed files; with `--json` every turn.
    List(history::UndoListOptions),
    /// Before/after text (≤ 64 KiB each) and a unified diff of one path in one turn.
    Diff {
        /// The turn id.
        turn: String,
        /// The workspace-relative path.
        path: String,
        /// The session, when the turn is in several (forks).
        #[arg(long)]
        session: Option<String>,
    },
    /// Roll back the files of this turn and every later turn (hash-checked).
    Files(history::UndoTarget),
    /// Rewind messages, events, approvals and todos to the start of this turn.
    Session(history::UndoTarget),
    /// Precheck the files, then roll back files and session.
    All(history::UndoTarget),
}

/// Exit statuses: one meaning each, listed in README's "Exit status" and the crate essay.
pub mod exit {
    /// The command did its job.
    pub const OK: i32 = 0;
    /// clawsmith itself failed.
    pub const ERROR: i32 = 1;
    /// A usage error: clap's own code for bad flags or values.
    pub const USAGE: i32 = 2;
    /// An undo refused by its precheck: files changed since the agent wrote them; nothing changed.
    pub const UNDO_REFUSED: i32 = 3;
    /// `check-command` classified the text as blocked.
    pub const BLOCKED: i32 = 4;
    /// `call --exit-status`: the result's status is not `success`.
    pub const NOT_SUCCESS: i32 = 5;
    /// `run` cancelled by Ctrl-C (SIGINT): 128 + 2, as a shell reports it.
    pub const INTERRUPTED: i32 = 130;
    /// `run` cancelled by SIGTERM: 128 + 15, as a shell reports it.
    pub const TERMINATED: i32 = 143;
}

/// What a person can do about an error, attached as context (`.context(Help(…))`) and printed
/// as `help: …` under the `error:` line instead of in the chain of causes.
#[derive(Debug)]
pub struct Help(pub String);

impl std::fmt::Display for Help {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str(&self.0)
    }
}

/// An error `message` with what to do about it, printed as `error: message` then `help: help`.
pub fn refusal(message: impl std::fmt::Display, help: impl Into<String>) -> anyhow::Error {
    anyhow::anyhow!("{message}").context(Help(help.into()))
}

/// Where and how a command prints.
pub struct Output {
    /// `--json` was given.
    pub json: bool,
}

impl Output {
    /// One line of text for people (styles are stripped unless colour is on).
    pub fn line(&self, text: &str) -> Result<()> {
        let mut stdout = anstream::stdout().lock();
        writeln!(stdout, "{text}")?;
        Ok(())
    }

    /// Text for people as is (styles are stripped unless colour is on).
    pub fn raw(&self, text: &str) -> Result<()> {
        let mut stdout = anstream::stdout().lock();
        write!(stdout, "{text}")?;
        stdout.flush()?;
        Ok(())
    }

    /// One JSON value on one line, written with one `write` where the pipe takes it whole
    /// (serialised first: through stdout's line buffer of 1 KB, a 10 KB result was ~20 writes).
    pub fn json_line(&self, value: &impl serde::Serialize) -> Result<()> {
        let mut line = serde_json::to_vec(value)?;
        line.push(b'\n');
        let mut stdout = std::io::stdout().lock();
        stdout.write_all(&line)?;
        stdout.flush()?;
        Ok(())
    }
}

fn main() {
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    // `--color` applies to clap's own messages too, so it is read before clap parses.
    let color = output::color_from_args(args.iter().cloned());
    output::init_color(color);
    let cli = parse(args, output::clap_color(color));
    // clap's reading is the authority (the early scan only styled clap's own messages).
    output::init_color(cli.globals.color);
    logging::init(cli.globals.verbosity);
    output::set_quiet(cli.globals.verbosity.quiet);
    let outcome = run(cli);
    // The last spans reach the collector (bounded wait) before the process ends.
    traces::finish();
    match outcome {
        Ok(code) => std::process::exit(code),
        Err(error) if is_broken_pipe(&error) => std::process::exit(exit::OK),
        Err(error) => {
            // Nobody to tell when stderr is closed too.
            let _ = write!(anstream::stderr().lock(), "{}", error_text(&error));
            std::process::exit(exit::ERROR);
        }
    }
}

/// Reads the command line. clap prints usage errors and exits 2 (`exit::USAGE`); `--help` and
/// `--version` exit 0.
///
/// A command line that names `call` is first read with [`CallCli`], the tree of `call` alone:
/// clap builds the whole tree before it reads anything (every subcommand, every argument), ~0.4
/// million of a `call`'s ~7.7 million instructions and ~55 of its ~700 page faults.
/// Whatever `CallCli` does not accept — `--help`, `--version`, any error, another subcommand
/// whose arguments hold the word `call` — is read again by the whole tree, so every message is
/// the whole tree's; what it accepts, the whole tree reads the same way (the same global options
/// and `call` arguments, and `call` is a subcommand name only in first position in both).
fn parse(args: Vec<std::ffi::OsString>, color: clap::ColorChoice) -> Cli {
    if args.iter().any(|arg| arg == "call") {
        let call = CallCli::command()
            .color(color)
            .try_get_matches_from(&args)
            // `_mut` takes the values out instead of cloning every match first (the clone and
            // its drop were ~1% of a `call`'s instructions).
            .and_then(|mut matches| CallCli::from_arg_matches_mut(&mut matches));
        if let Ok(CallCli { globals, command }) = call {
            return Cli {
                globals,
                command: Command::Call(command),
            };
        }
    }
    let mut matches = Cli::command().color(color).get_matches_from(args);
    Cli::from_arg_matches_mut(&mut matches).unwrap_or_else(|error| error.exit())
}

/// Whether `error` is stdout closed by its reader (`clawsmith … | head`): the output ends
/// quietly then, as in every Unix tool (Rust ignores SIGPIPE, so writes report `EPIPE`).
fn is_broken_pipe(error: &anyhow::Error) -> bool {
    error.chain().any(|cause| {
        cause
            .downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
            || cause
                .downcast_ref::<serde_json::Error>()
                .and_then(serde_json::Error::io_error_kind)
                == Some(std::io::ErrorKind::BrokenPipe)
    })
}

/// `error: a: b: c` (each cause once, outermost first), then `help: …` when the error carries
/// a [`Help`].
fn error_text(error: &anyhow::Error) -> String {
    let help = error.downcast_ref::<Help>().map(|help| help.0.as_str());
    // clawsmith's own errors print a cause once (tidy checks it). Some third-party errors
    // still end their message with their source's (`…: {source}`) and return it as `source()`
    // too: a cause that the message before it ends with, after `: `, is that repetition and is
    // printed once. A cause merely mentioned elsewhere in the message is still printed.
    let mut causes: Vec<String> = Vec::new();
    for cause in error.chain().map(|cause| cause.to_string()) {
        let repeated = causes.last().is_some_and(|last| {
            last.strip_suffix(cause.as_str())
                .is_some_and(|head| head.ends_with(": "))
        });
        if !repeated && Some(cause.as_str()) != help {
            causes.push(cause);
        }
    }
    let mut text = format!(
        "{}: {}\n",
        output::paint(output::style::ERROR, "error"),
        causes.join(": ")
    );
    if let Some(help) = help {
        text.push_str(&format!(
            "{}: {help}\n",
            output::paint(output::style::HELP, "help")
        ));
    }
    text
}

fn run(cli: Cli) -> Result<i32> {
    let Cli { globals, command } = cli;
    let out = Output { json: globals.json };
    let durability = if globals.fsync {
        clawsmith_checkpoint::Durability::Full
    } else {
        clawsmith_checkpoint::Durability::Normal
    };
    let lease_wait = if globals.wait {
        clawsmith_checkpoint::LeaseWait::Wait
    } else {
        clawsmith_checkpoint::LeaseWait::Fail
    };
    traces::set_flag(globals.traceparent);
    let state_dir =
        || state::StateOptions::new(globals.state_dir.as_deref(), durability, lease_wait);
    match command {
        Command::Tools { core } => run::tools(&state_dir()?, &core, &out),
        Command::Call(CallCommand::Call {
            core,
            tool,
            arguments,
            exit_status,
            pretty,
        }) => {
            let status = run::call(&state_dir()?, &core, (&tool, &arguments), pretty, &out)?;
            Ok(if exit_status && status != ToolStatus::Success {
                exit::NOT_SUCCESS
            } else {
                exit::OK
            })
        }
        Command::Mcp { core, http } => run::mcp(&state_dir()?, &core, &http),
        Command::McpLogin {
            server,
            config,
            timeout,
        } => run::mcp_login(
            &state_dir()?.dir,
            &server,
            config.as_deref(),
            std::time::Duration::from_secs(timeout),
            &out,
        ),
        Command::Turn { core, turn } => run::turn(&state_dir()?, &core, &turn, &out),
        Command::Run { args } => agent::run(&state_dir()?, &args, &out),
        Command::Policy { command } => policy::run(&state_dir()?, command, &out),
        Command::Skills { command } => skills::run_skills(&state_dir()?.dir, command, &out),
        Command::Memory { command } => skills::run_memory(&state_dir()?.dir, command, &out),
        Command::Plugins { command } => plugins::run(&state_dir()?.dir, command, &out),
        Command::CheckCommand { text } => {
            let verdict = clawsmith_sandbox::classify::check_command(&text);
            out.json_line(&verdict)?;
            Ok(match verdict.verdict {
                clawsmith_sandbox::classify::VerdictKind::Blocked => exit::BLOCKED,
                _ => exit::OK,
            })
        }
        Command::Session { command } => {
            let store = store::open_history_store(&state_dir()?)?;
            let store = &*store;
            match command {
                SessionCommand::List => history::session_list(store, &out),
                SessionCommand::Show { id, range } => {
                    history::session_show(store, &id, range, &out)
                }
                SessionCommand::Fork { id, new_id } => {
                    history::session_fork(store, &id, new_id, &out)
                }
            }
        }
        Command::Undo { command } => {
            let store = store::open_history_store(&state_dir()?)?;
            let store = &*store;
            match command {
                UndoCommand::List(options) => history::undo_list(store, &options, &out),
                UndoCommand::Diff {
                    turn,
                    path,
                    session,
                } => history::undo_diff(store, &turn, &path, session.as_deref(), &out),
                UndoCommand::Files(target) => history::undo(store, &target, UndoScope::Files, &out),
                UndoCommand::Session(target) => {
                    history::undo(store, &target, UndoScope::Session, &out)
                }
                UndoCommand::All(target) => history::undo(store, &target, UndoScope::All, &out),
            }
        }
        Command::Completions { shell } => {
            let mut script = Vec::new();
            clap_complete::generate(shell, &mut Cli::command(), "clawsmith", &mut script);
            out.raw(&String::from_utf8_lossy(&script))?;
            Ok(exit::OK)
        }
        Command::Web(options) => web::run(&state_dir()?, &options),
        Command::Store { command } => store::run(&state_dir()?.dir, command, &out),
        Command::Prune { dry_run, config } => {
            let state = state_dir()?;
            let path = run::config_file(&state.dir, config.as_deref())?;
            if let Some(code) = store::prune_fleet(path.as_deref(), dry_run, &out)? {
                return Ok(code);
            }
            let store = state::open_existing_store(&state)?;
            history::prune(&store, dry_run, &out)
        }
    }
}

#[cfg(test)]
mod tests {
    use clap::{CommandFactory, Parser};

    use super::{CallCli, Cli, Command, error_text};

    /// An error whose message is `message` and whose source is `source`.
    #[derive(Debug)]
    struct Layer(&'static str, Option<Box<Layer>>);

    impl std::fmt::Display for Layer {
        fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            formatter.write_str(self.0)
        }
    }

    impl std::error::Error for Layer {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            self.1.as_deref().map(|source| source as _)
        }
    }

    #[test]
    fn each_cause_is_printed_once_and_none_is_dropped() {
        // (message, its source's message, the line printed)
        let table = [
            // A third-party error that ends with its source's message: said once.
            (
                "open failed: disk full",
                "disk full",
                "open failed: disk full",
            ),
            // A message that mentions the cause's words elsewhere keeps the cause.
            (
                "disk full check: retry",
                "disk full",
                "disk full check: retry: disk full",
            ),
            // A cause contained in the message without `: ` before it is another cause.
            (
                "the-quota-exceeded",
                "exceeded",
                "the-quota-exceeded: exceeded",
            ),
            (
                "reading a.toml",
                "no such file",
                "reading a.toml: no such file",
            ),
        ];
        for (message, source, printed) in table {
            let error = anyhow::Error::new(Layer(message, Some(Box::new(Layer(source, None)))));
            let text = error_text(&error);
            let plain: String = anstream::adapter::strip_str(&text).to_string();
            assert_eq!(plain, format!("error: {printed}\n"), "{message} / {source}");
        }
    }

    /// Reads `line` (words split at spaces) with [`CallCli`] and with the whole tree: `CallCli`
    /// accepts it exactly when `accepted`, and what it accepts reads as the whole tree reads it.
    fn check(line: &str, accepted: bool) {
        let args: Vec<&str> = std::iter::once("clawsmith")
            .chain(line.split_whitespace())
            .collect();
        let whole = Cli::try_parse_from(&args);
        match CallCli::try_parse_from(&args) {
            Ok(CallCli { globals, command }) => {
                assert!(accepted, "CallCli accepted {line:?}");
                let slim = Cli {
                    globals,
                    command: Command::Call(command),
                };
                let whole = whole.unwrap_or_else(|error| panic!("{line:?}: {error}"));
                assert_eq!(format!("{slim:?}"), format!("{whole:?}"), "{line:?}");
            }
            Err(error) => assert!(!accepted, "CallCli refused {line:?}: {error}"),
        }
    }

    #[test]
    fn call_alone_reads_a_command_line_as_the_whole_tree_does() {
        let cases = [
            ("call --workspace w read_file {}", true),
            (
                "--state-dir s --json -vv --fsync --wait call --workspace w --mode full \
                 --session new --yes read_file {} --exit-status",
                true,
            ),
            ("--color=never call --workspace w -- -x {}", true),
            ("--state-dir call call --workspace w t {}", true),
            (
                "call -q --workspace w --sandbox off t {} --traceparent \
                 00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
                true,
            ),
            (
                "call --workspace w --plugin p --plugin q --config c.toml --allow-network t {}",
                true,
            ),
            ("call --workspace w t {} --bogus", false),
            ("call --workspace w --mode nope t {}", false),
            ("call -v -q --workspace w t {}", false),
            ("call --workspace w t", false),
            ("call", false),
            ("call --help", false),
            ("--help call", false),
            ("--version", false),
            ("help call", false),
            ("check-command call", false),
            ("tools --workspace call", false),
        ];
        for (line, accepted) in cases {
            check(line, accepted);
        }
    }

    #[test]
    fn both_command_trees_are_well_formed() {
        Cli::command().debug_assert();
        CallCli::command().debug_assert();
    }
}
