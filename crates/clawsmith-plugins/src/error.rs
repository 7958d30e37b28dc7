//! The crate's error: a plugin that could not be loaded, named by file, line and column.

use std::ops::Range;
use std::path::{Path, PathBuf};

use clawsmith_protocol::text::line_column;

/// Why a plugin (or the `plugins` key of `clawsmith.toml`) could not be loaded. Each names the
/// file, and the line and column when the problem sits at a place in it.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PluginError {
    /// The manifest (or a file it names) is not valid.
    #[error("{}: {message}", place(path, *line_column))]
    Invalid {
        /// The file.
        path: PathBuf,
        /// 1-based line and column (in characters) of the offending value, when known.
        line_column: Option<(usize, usize)>,
        /// What is wrong and, where it helps, what to do.
        message: String,
    },
    /// A file could not be read.
    #[error("cannot read {}: {cause}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        cause: std::io::Error,
    },
    /// The folder holds none of the manifests clawsmith reads.
    #[error(
        "{} is not a plugin: it holds no clawsmith-plugin.toml, .claude-plugin/plugin.json, \
         .codex-plugin/plugin.json or gemini-extension.json",
        dir.display()
    )]
    NotAPlugin {
        /// The folder.
        dir: PathBuf,
    },
    /// Two plugins share a name (their tools would share names too).
    #[error("plugin `{name}` is loaded twice: from {} and from {}", first.display(), second.display())]
    Duplicate {
        /// The name.
        name: String,
        /// The folder loaded first.
        first: PathBuf,
        /// The folder refused.
        second: PathBuf,
    },
}

fn place(path: &Path, line_column: Option<(usize, usize)>) -> String {
    match line_column {
        Some((line, column)) => format!("{}:{line}:{column}", path.display()),
        None => path.display().to_string(),
    }
}

/// A file's text, kept to turn byte spans into line and column.
#[derive(Debug, Clone)]
pub(crate) struct SourceFile {
    pub(crate) path: PathBuf,
    pub(crate) text: String,
}

impl SourceFile {
    pub(crate) fn read(path: &Path) -> Result<SourceFile, PluginError> {
        let text = std::fs::read_to_string(path).map_err(|cause| PluginError::Read {
            path: path.to_path_buf(),
            cause,
        })?;
        Ok(SourceFile {
            path: path.to_path_buf(),
            text,
        })
    }

    /// An error at byte `span` of the file (`None`: the whole file).
    pub(crate) fn error(
        &self,
        span: Option<Range<usize>>,
        message: impl Into<String>,
    ) -> PluginError {
        PluginError::Invalid {
            path: self.path.clone(),
            line_column: span.map(|span| line_column(&self.text, span.start)),
            message: message.into(),
        }
    }
}
