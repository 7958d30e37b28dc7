//! `clawsmith web`: the local web view of the state database (the `clawsmith-web` crate), bound
//! to 127.0.0.1 and guarded by a token printed once.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use clawsmith_fs::Workspace;
use clawsmith_web::{WebConfig, WebServer};

/// Options of `clawsmith web`.
#[derive(Debug, Clone, clap::Args)]
pub struct WebOptions {
    /// The port on 127.0.0.1 (0 = any free port). The server never listens elsewhere.
    #[arg(long, default_value_t = 0)]
    pub port: u16,
    /// Open the printed URL in the default browser (`xdg-open`).
    #[arg(long)]
    pub open: bool,
    /// The workspace undo may write in (default: the current directory). Sessions that work
    /// elsewhere are shown, and their undo is refused, as `clawsmith undo` refuses them.
    #[arg(long, value_name = "DIR", default_value = ".")]
    pub workspace: PathBuf,
}

pub fn run(state_dir: &Path, options: &WebOptions) -> Result<i32> {
    let store = crate::state::open_existing_store(state_dir)?;
    let undo_workspace = Workspace::open(&options.workspace)
        .with_context(|| format!("opening the workspace {}", options.workspace.display()))?
        .root()
        .to_path_buf();
    crate::state::ensure_outside(state_dir, &undo_workspace)?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    runtime.block_on(async {
        let server = WebServer::bind(WebConfig {
            store,
            port: options.port,
            undo_workspace: Some(undo_workspace),
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
