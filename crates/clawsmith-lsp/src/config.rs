//! The `[[lsp_servers]]` part of `clawsmith.toml`, and the usual servers found on `PATH`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

use crate::error::LspError;

/// `startup_timeout_ms` when absent: spawn through `initialize` (30 s).
pub const DEFAULT_STARTUP_TIMEOUT_MS: u64 = 30_000;
/// `request_timeout_ms` when absent: one request, or the wait for diagnostics (10 s).
pub const DEFAULT_REQUEST_TIMEOUT_MS: u64 = 10_000;
/// `max_restarts` when absent.
pub const DEFAULT_MAX_RESTARTS: u32 = 3;

/// The language servers the tools use.
///
/// Other top-level tables of the file belong to other readers and are ignored here; inside
/// `[[lsp_servers]]` unknown keys are errors (a misspelled `extensions` would otherwise leave a
/// language without its server, silently).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct LspConfig {
    /// The servers, in file order. For a file extension the first server listing it is used.
    #[serde(default)]
    pub lsp_servers: Vec<LspServerConfig>,
}

/// One language server, spawned over stdio.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LspServerConfig {
    /// Short name (letters, digits, `-`, `_`, `.`), shown in results and errors.
    pub name: String,
    /// The program (absolute, or found on the sandbox's `PATH`).
    pub command: String,
    /// Its arguments.
    #[serde(default)]
    pub args: Vec<String>,
    /// File extensions it serves, without the dot (`["py", "pyi"]`).
    pub extensions: Vec<String>,
    /// Files or folders that mark a project root (`["pyproject.toml"]`): the server of a file
    /// starts at the nearest folder above it (inside the workspace) that holds one, else at the
    /// workspace root. One server runs per root.
    #[serde(default)]
    pub root_markers: Vec<String>,
    /// `initializationOptions` sent in `initialize`.
    #[serde(default)]
    pub initialization_options: Option<serde_json::Value>,
    /// Settings: sent with `workspace/didChangeConfiguration` after start, and the answer to the
    /// server's `workspace/configuration` requests (looked up by section, dotted).
    #[serde(default)]
    pub settings: Option<serde_json::Value>,
    /// Environment variables set for the server (names that look like secrets are refused).
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// From spawn through `initialize` (default 30,000).
    #[serde(default = "default_startup_timeout_ms")]
    pub startup_timeout_ms: u64,
    /// Each request, and the wait for diagnostics (default 10,000).
    #[serde(default = "default_request_timeout_ms")]
    pub request_timeout_ms: u64,
    /// Restarts after crashes before calls fail with `tool_failed` (default 3).
    #[serde(default = "default_max_restarts")]
    pub max_restarts: u32,
}

fn default_startup_timeout_ms() -> u64 {
    DEFAULT_STARTUP_TIMEOUT_MS
}
fn default_request_timeout_ms() -> u64 {
    DEFAULT_REQUEST_TIMEOUT_MS
}
fn default_max_restarts() -> u32 {
    DEFAULT_MAX_RESTARTS
}

impl LspServerConfig {
    /// A server with the defaults.
    pub fn new(
        name: impl Into<String>,
        command: impl Into<String>,
        args: &[&str],
        extensions: &[&str],
    ) -> LspServerConfig {
        LspServerConfig {
            name: name.into(),
            command: command.into(),
            args: args.iter().map(|a| (*a).to_owned()).collect(),
            extensions: extensions.iter().map(|e| (*e).to_owned()).collect(),
            root_markers: Vec::new(),
            initialization_options: None,
            settings: None,
            env: BTreeMap::new(),
            startup_timeout_ms: DEFAULT_STARTUP_TIMEOUT_MS,
            request_timeout_ms: DEFAULT_REQUEST_TIMEOUT_MS,
            max_restarts: DEFAULT_MAX_RESTARTS,
        }
    }

    /// `startup_timeout_ms` as a duration.
    pub fn startup_timeout(&self) -> Duration {
        Duration::from_millis(self.startup_timeout_ms)
    }

    /// `request_timeout_ms` as a duration.
    pub fn request_timeout(&self) -> Duration {
        Duration::from_millis(self.request_timeout_ms)
    }

    /// Whether it serves files ending in `.extension`.
    pub fn serves(&self, extension: &str) -> bool {
        self.extensions.iter().any(|e| e == extension)
    }
}

/// The usual servers, in order of preference per language, with their root markers.
pub fn default_servers() -> Vec<LspServerConfig> {
    let python = ["py", "pyi"];
    let python_roots = [
        "pyproject.toml",
        "setup.py",
        "setup.cfg",
        "requirements.txt",
    ];
    let with_roots = |mut server: LspServerConfig, roots: &[&str]| {
        server.root_markers = roots.iter().map(|r| (*r).to_owned()).collect();
        server
    };
    vec![
        with_roots(
            // `-v`: pylsp says which linter plugins it failed to load only at `INFO`.
            LspServerConfig::new("pylsp", "pylsp", &["-v"], &python),
            &python_roots,
        ),
        with_roots(
            LspServerConfig::new("pyright", "pyright-langserver", &["--stdio"], &python),
            &python_roots,
        ),
        with_roots(
            LspServerConfig::new(
                "basedpyright",
                "basedpyright-langserver",
                &["--stdio"],
                &python,
            ),
            &python_roots,
        ),
        with_roots(
            LspServerConfig::new(
                "typescript-language-server",
                "typescript-language-server",
                &["--stdio"],
                &["ts", "tsx", "js", "jsx", "mjs", "cjs", "mts", "cts"],
            ),
            &["tsconfig.json", "jsconfig.json", "package.json"],
        ),
        with_roots(
            LspServerConfig::new(
                "clangd",
                "clangd",
                &[],
                &["c", "h", "cc", "cpp", "cxx", "hpp", "hh", "hxx"],
            ),
            &["compile_commands.json", "compile_flags.txt"],
        ),
        with_roots(
            LspServerConfig::new("rust-analyzer", "rust-analyzer", &[], &["rs"]),
            &["Cargo.toml"],
        ),
        with_roots(
            LspServerConfig::new("gopls", "gopls", &[], &["go"]),
            &["go.mod"],
        ),
        LspServerConfig::new(
            "bash-language-server",
            "bash-language-server",
            &["start"],
            &["sh", "bash"],
        ),
    ]
}

impl LspConfig {
    /// Parses the TOML text of `clawsmith.toml` and validates the server entries.
    pub fn from_toml_str(text: &str) -> Result<LspConfig, LspError> {
        LspConfig::parse(text, None)
    }

    /// Reads and parses `path`; errors name the file, line and column.
    pub fn load(path: &Path) -> Result<LspConfig, LspError> {
        let text = std::fs::read_to_string(path).map_err(|cause| LspError::ReadConfig {
            path: path.to_path_buf(),
            cause,
        })?;
        LspConfig::parse(&text, Some(path.to_path_buf()))
    }

    fn parse(text: &str, path: Option<PathBuf>) -> Result<LspConfig, LspError> {
        let config: LspConfig = toml::from_str(text).map_err(|error| LspError::InvalidConfig {
            path: path.clone(),
            message: error.to_string(),
        })?;
        config
            .validate()
            .map_err(|message| LspError::InvalidConfig { path, message })?;
        Ok(config)
    }

    fn validate(&self) -> Result<(), String> {
        let mut names = BTreeSet::new();
        for server in &self.lsp_servers {
            let name = &server.name;
            if name.is_empty()
                || name.len() > 64
                || !name
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
            {
                return Err(format!(
                    "lsp_servers: name {name:?} must be 1–64 letters, digits, `-`, `_` or `.`"
                ));
            }
            if !names.insert(name.as_str()) {
                return Err(format!("lsp_servers: `{name}` is configured twice"));
            }
            if server.command.trim().is_empty() {
                return Err(format!("lsp_servers `{name}`: command is empty"));
            }
            if server.extensions.is_empty() {
                return Err(format!(
                    "lsp_servers `{name}`: extensions is empty (e.g. extensions = [\"py\"])"
                ));
            }
            if let Some(bad) = server
                .extensions
                .iter()
                .find(|e| e.is_empty() || e.contains(['.', '/']))
            {
                return Err(format!(
                    "lsp_servers `{name}`: extension {bad:?} must be a name without dots (\"py\")"
                ));
            }
            if let Some(bad) = server
                .root_markers
                .iter()
                .find(|m| m.is_empty() || m.contains('/') || *m == ".." || *m == ".")
            {
                return Err(format!(
                    "lsp_servers `{name}`: root marker {bad:?} must be a file or folder name"
                ));
            }
            if let Some(secret) = server
                .env
                .keys()
                .find(|k| clawsmith_sandbox::looks_secret(k))
            {
                return Err(format!(
                    "lsp_servers `{name}`: env `{secret}` looks like a secret; language servers \
                     get none"
                ));
            }
            if let Some(bad) = server.env.keys().find(|k| !valid_env_name(k)) {
                return Err(format!(
                    "lsp_servers `{name}`: env name {bad:?} is not a valid variable name"
                ));
            }
            for (key, value) in [
                ("startup_timeout_ms", server.startup_timeout_ms),
                ("request_timeout_ms", server.request_timeout_ms),
            ] {
                if value == 0 {
                    return Err(format!("lsp_servers `{name}`: {key} must be at least 1"));
                }
            }
        }
        Ok(())
    }

    /// The configured servers, then — for the extensions none of them serves — the
    /// [`default_servers`] whose program is found on `path_env` (a `PATH` value).
    pub fn with_defaults_on_path(mut self, path_env: Option<&std::ffi::OsStr>) -> LspConfig {
        let claimed: BTreeSet<String> = self
            .lsp_servers
            .iter()
            .flat_map(|s| s.extensions.iter().cloned())
            .collect();
        let names: BTreeSet<String> = self.lsp_servers.iter().map(|s| s.name.clone()).collect();
        for server in default_servers() {
            if names.contains(&server.name)
                || server.extensions.iter().all(|e| claimed.contains(e))
                || !on_path(&server.command, path_env)
            {
                continue;
            }
            self.lsp_servers.push(server);
        }
        self
    }

    /// The server for files ending in `.extension`.
    pub fn server_for(&self, extension: &str) -> Option<&LspServerConfig> {
        self.lsp_servers.iter().find(|s| s.serves(extension))
    }
}

fn valid_env_name(name: &str) -> bool {
    !name.is_empty()
        && !name.starts_with(|c: char| c.is_ascii_digit())
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

/// Whether `program` is an executable file on `path_env`.
fn on_path(program: &str, path_env: Option<&std::ffi::OsStr>) -> bool {
    use std::os::unix::fs::PermissionsExt;
    let executable = |path: &Path| {
        std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    };
    if program.contains('/') {
        return executable(Path::new(program));
    }
    path_env
        .is_some_and(|paths| std::env::split_paths(paths).any(|dir| executable(&dir.join(program))))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(text: &str, expected: Result<usize, &str>) {
        match (LspConfig::from_toml_str(text), expected) {
            (Ok(config), Ok(count)) => assert_eq!(config.lsp_servers.len(), count, "{text}"),
            (Err(error), Err(needle)) => {
                assert!(error.to_string().contains(needle), "{text}: {error}")
            }
            (got, want) => panic!("{text}: got {got:?}, want {want:?}"),
        }
    }

    #[test]
    fn sections_are_parsed_and_validated() {
        check("", Ok(0));
        check("[[mcp_servers]]\nname = \"x\"\ncommand = \"y\"\n", Ok(0));
        check(
            "[[lsp_servers]]\nname = \"py\"\ncommand = \"pylsp\"\nextensions = [\"py\"]\n\
             settings = { pylsp = { plugins = { pycodestyle = { enabled = false } } } }\n",
            Ok(1),
        );
        check(
            "[[lsp_servers]]\nname = \"py\"\ncommand = \"pylsp\"\nextension = [\"py\"]\n",
            Err("unknown field `extension`"),
        );
        check(
            "[[lsp_servers]]\nname = \"py\"\ncommand = \"pylsp\"\n",
            Err("missing field `extensions`"),
        );
        check(
            "[[lsp_servers]]\nname = \"py\"\ncommand = \"pylsp\"\nextensions = [\".py\"]\n",
            Err("extension \".py\" must be a name without dots"),
        );
        check(
            "[[lsp_servers]]\nname = \"a b\"\ncommand = \"x\"\nextensions = [\"c\"]\n",
            Err("name \"a b\" must be"),
        );
        check(
            "[[lsp_servers]]\nname = \"x\"\ncommand = \"x\"\nextensions = [\"c\"]\n\
             env = { GITHUB_TOKEN = \"t\" }\n",
            Err("env `GITHUB_TOKEN` looks like a secret"),
        );
        check(
            "[[lsp_servers]]\nname = \"x\"\ncommand = \"x\"\nextensions = [\"c\"]\n\
             request_timeout_ms = 0\n",
            Err("request_timeout_ms must be at least 1"),
        );
        check(
            "[[lsp_servers]]\nname = \"x\"\ncommand = \"x\"\nextensions = [\"c\"]\n\
             [[lsp_servers]]\nname = \"x\"\ncommand = \"y\"\nextensions = [\"d\"]\n",
            Err("`x` is configured twice"),
        );
    }

    #[test]
    fn parse_errors_name_the_file_line_and_column() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("clawsmith.toml");
        std::fs::write(&path, "[[lsp_servers]]\nname = \"x\"\ncommand = 3\n").unwrap();
        let error = LspConfig::load(&path).unwrap_err().to_string();
        assert!(error.contains(&path.display().to_string()), "{error}");
        assert!(error.contains("line 3, column 11"), "{error}");
    }

    #[test]
    fn defaults_fill_the_languages_the_file_leaves_open_when_on_path() {
        let dir = tempfile::tempdir().unwrap();
        for program in ["pylsp", "clangd", "gopls"] {
            let path = dir.path().join(program);
            std::fs::write(&path, "#!/bin/sh\n").unwrap();
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        let config = LspConfig::from_toml_str(
            "[[lsp_servers]]\nname = \"mine\"\ncommand = \"my-go\"\nextensions = [\"go\"]\n",
        )
        .unwrap()
        .with_defaults_on_path(Some(dir.path().as_os_str()));
        let names: Vec<&str> = config.lsp_servers.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["mine", "pylsp", "clangd"]);
        assert_eq!(config.server_for("go").unwrap().name, "mine");
        assert_eq!(config.server_for("hpp").unwrap().name, "clangd");
        assert!(config.server_for("rs").is_none());
    }
}
