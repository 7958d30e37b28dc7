//! `clawsmith web`: the local web view of the session store (the `clawsmith-web` crate), bound
//! to 127.0.0.1 under a secret path, and guarded by a token printed once. It starts from any
//! directory: the workspace matters only to undo. The store is the state directory's SQLite
//! file, or the fleet's PostgreSQL database when the configuration's `[store]` names it (then
//! sessions other hosts write appear, and grow live).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context, Result};
use clawsmith_fs::Workspace;
use clawsmith_store::SessionStore;
use clawsmith_web::{UndoWorkspace, WebConfig, WebServer};

use crate::state::StateOptions;

/// Options of `clawsmith web`.
#[derive(Debug, Clone, clap::Args)]
pub struct WebOptions {
    /// The port on 127.0.0.1 (0 = any free port). The server never listens elsewhere.
    #[arg(long, default_value_t = 0)]
    pub port: u16,
    /// Open the printed URL in the default browser (`xdg-open`).
    #[arg(long)]
    pub open: bool,
    /// The workspace undo may write in. Without it: the current directory when it can be one
    /// (not the directory holding the state directory, such as $HOME), else undo is off and the
    /// pages say why. Sessions that work elsewhere are shown, and their undo is refused, as
    /// `clawsmith undo` refuses them.
    #[arg(long, value_name = "DIR")]
    pub workspace: Option<PathBuf>,
    /// The configuration file (default: clawsmith.toml in the state directory); its `[store]`
    /// says which store to show.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
}

pub fn run(state_options: &StateOptions, options: &WebOptions) -> Result<i32> {
    let state_dir = state_options.dir.as_path();
    let config = crate::run::config_file(state_dir, options.config.as_deref())?;
    if let Some(fleet) =
        crate::store::open_fleet(config.as_deref(), state_dir, state_options.lease_wait)?
    {
        let reason = match fleet.undo_store() {
            Ok(_) => None,
            Err(reason) => Some(format!("undo is off: {reason}")),
        };
        let undo = match (reason, &options.workspace) {
            (Some(reason), _) => UndoWorkspace::Off(reason),
            (None, Some(dir)) => UndoWorkspace::In(workspace_for_undo(state_dir, dir)?),
            (None, None) => current_directory_for_undo(state_dir),
        };
        return serve(Arc::new(fleet), undo, options);
    }
    let store = crate::state::open_existing_store(state_options)?;
    let undo = match &options.workspace {
        Some(dir) => UndoWorkspace::In(workspace_for_undo(state_dir, dir)?),
        None => current_directory_for_undo(state_dir),
    };
    serve(store, undo, options)
}

/// `--workspace DIR`, opened, and outside the state directory.
fn workspace_for_undo(state_dir: &Path, dir: &Path) -> Result<PathBuf> {
    let root = Workspace::open(dir)
        .with_context(|| format!("opening the workspace {}", dir.display()))?
        .root()
        .to_path_buf();
    crate::state::ensure_outside(state_dir, &root)?;
    Ok(root)
}

fn serve(store: Arc<dyn SessionStore>, undo: UndoWorkspace, options: &WebOptions) -> Result<i32> {
    if let UndoWorkspace::Off(reason) = &undo {
        crate::output::notice(crate::output::Level::Note, reason);
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    runtime.block_on(async {
        let server = WebServer::bind(WebConfig {
            store,
            port: options.port,
            undo,
        })
        .await
        .with_context(|| format!("binding 127.0.0.1:{}", options.port))?;
        let url = server.url();
        {
            let mut stdout = std::io::stdout().lock();
            writeln!(stdout, "{url}")?;
            stdout.flush()?;
        }
        if options.open {
            open_browser(&url);
        }
        server.serve().await.context("serving the web view")
    })?;
    Ok(crate::exit::OK)
}

/// Without `--workspace`, undo writes in the current directory when it can be a workspace whose
/// tools could not reach the state directory; otherwise undo is off, for the reason returned.
fn current_directory_for_undo(state_dir: &Path) -> UndoWorkspace {
    const HOW: &str =
        "start `clawsmith web --workspace DIR` with a session's workspace to undo there";
    let current = match std::env::current_dir() {
        Ok(current) => current,
        Err(error) => {
            return UndoWorkspace::Off(format!(
                "undo is off: the current directory cannot be read ({error}); {HOW}"
            ));
        }
    };
    let root = match Workspace::open(&current) {
        Ok(workspace) => workspace.root().to_path_buf(),
        Err(error) => {
            return UndoWorkspace::Off(format!(
                "undo is off: the current directory {} is not a workspace ({error}); {HOW}",
                current.display()
            ));
        }
    };
    if crate::state::ensure_outside(state_dir, &root).is_err() {
        return UndoWorkspace::Off(format!(
            "undo is off: the current directory {} holds the state directory {}; {HOW}",
            root.display(),
            state_dir.display()
        ));
    }
    UndoWorkspace::In(root)
}

/// Best effort: the URL is printed either way.
fn open_browser(url: &str) {
    // Not a tool process: the user's own browser, started at their request, outside any sandbox.
    #[allow(clippy::disallowed_methods)]
    let spawned = std::process::Command::new("xdg-open")
        .arg(url)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn();
    if let Err(error) = spawned {
        eprintln!("note: could not open a browser ({error}); open the URL above");
    }
}
