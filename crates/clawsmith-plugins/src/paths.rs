//! Paths a manifest names: inside the plugin folder, symlinks resolved, never out of it.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// The variables that name the plugin folder in a command or argument. `${PLUGIN_ROOT}` is
/// clawsmith's; the others are what Claude Code plugins and Gemini extensions write.
pub const ROOT_VARIABLES: &[&str] = &[
    "${PLUGIN_ROOT}",
    "${CLAUDE_PLUGIN_ROOT}",
    "${extensionPath}",
];

/// A plugin folder, canonical (symlinks resolved), that paths are checked against.
#[derive(Debug, Clone)]
pub(crate) struct PluginRoot {
    canonical: PathBuf,
}

impl PluginRoot {
    pub(crate) fn new(canonical: PathBuf) -> PluginRoot {
        PluginRoot { canonical }
    }

    pub(crate) fn path(&self) -> &Path {
        &self.canonical
    }

    /// `text` with every root variable replaced by the folder; whether one was.
    pub(crate) fn expand(&self, text: &str) -> (String, bool) {
        let root = self.canonical.to_string_lossy();
        let mut expanded = text.to_owned();
        let mut found = false;
        for variable in ROOT_VARIABLES {
            if expanded.contains(variable) {
                found = true;
                expanded = expanded.replace(variable, &root);
            }
        }
        (expanded, found)
    }

    /// `text` (relative to the folder, or absolute) as a real path inside the folder. Symlinks
    /// are resolved first, so a link pointing out of the folder is refused like `..`.
    pub(crate) fn resolve_inside(&self, text: &str) -> Result<PathBuf, String> {
        let joined = self.canonical.join(text);
        let real = match joined.canonicalize() {
            Ok(real) => real,
            Err(error) => {
                // Say "leaves" rather than "missing" when the name alone already leaves.
                if !lexically_inside(&self.canonical, &joined) {
                    return Err(self.leaves(text, None));
                }
                return Err(format!(
                    "`{text}` cannot be found in the plugin folder {}: {error}",
                    self.canonical.display()
                ));
            }
        };
        if !real.starts_with(&self.canonical) {
            return Err(self.leaves(text, Some(&real)));
        }
        Ok(real)
    }

    fn leaves(&self, text: &str, real: Option<&Path>) -> String {
        let target = match real {
            Some(real) => format!(" (it resolves to {})", real.display()),
            None => String::new(),
        };
        format!(
            "`{text}` leaves the plugin folder {}{target}; commands and files a plugin names \
             must lie inside its folder",
            self.canonical.display()
        )
    }

    /// An argv as written in a manifest, made runnable: root variables expanded; the program,
    /// when it is a path (holds a `/`) or was written with a root variable, must be an executable
    /// file inside the folder; arguments starting with `./`, `../` or a root variable are paths
    /// inside the folder too. A bare program name is looked up on `PATH` when it runs; an
    /// absolute program (`/usr/bin/python3`) is the system's.
    pub(crate) fn resolve_command(&self, argv: &[String]) -> Result<Vec<String>, String> {
        let Some(program) = argv.first() else {
            return Err("the command is empty: give at least the program".to_owned());
        };
        if program.trim().is_empty() {
            return Err("the command's program is empty".to_owned());
        }
        let mut resolved = Vec::with_capacity(argv.len());
        let (expanded, had_variable) = self.expand(program);
        if had_variable || (expanded.contains('/') && Path::new(&expanded).is_relative()) {
            let real = self.resolve_inside(&expanded)?;
            let meta = std::fs::metadata(&real)
                .map_err(|error| format!("`{program}` cannot be read: {error}"))?;
            if !meta.is_file() {
                return Err(format!("`{program}` is not a file"));
            }
            if meta.permissions().mode() & 0o111 == 0 {
                return Err(format!(
                    "`{program}` is not executable (chmod +x it, or run it through its \
                     interpreter: [\"python3\", \"./{}\"])",
                    program.trim_start_matches("./")
                ));
            }
            resolved.push(real.to_string_lossy().into_owned());
        } else {
            resolved.push(expanded);
        }
        for argument in &argv[1..] {
            let (expanded, _) = self.expand(argument);
            // `--config=${PLUGIN_ROOT}/x` is expanded, not checked: only a whole argument is
            // known to be a path.
            let is_path = ROOT_VARIABLES
                .iter()
                .any(|variable| argument.starts_with(variable))
                || argument.starts_with("./")
                || argument.starts_with("../");
            if is_path {
                let real = self.resolve_inside(&expanded)?;
                resolved.push(real.to_string_lossy().into_owned());
            } else {
                resolved.push(expanded);
            }
        }
        Ok(resolved)
    }
}

/// Whether `path`, with `.` and `..` taken lexically, stays beneath `root`.
fn lexically_inside(root: &Path, path: &Path) -> bool {
    let mut normal = PathBuf::new();
    for component in path.components() {
        match component {
            std::path::Component::ParentDir => {
                normal.pop();
            }
            std::path::Component::CurDir => {}
            other => normal.push(other),
        }
    }
    normal.starts_with(root)
}
