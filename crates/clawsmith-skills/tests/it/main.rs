//! Skills and memory against real folders, real files and a real SQLite index in temp dirs.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod hidden;
mod memory;
mod skills;

use std::path::{Path, PathBuf};

use clawsmith_protocol::{Tool, ToolExecutionContext, ToolExecutionResult, ToolOutput};
use clawsmith_skills::UserDirs;

/// A workspace, a home and a config home side by side in one temp dir; nothing reads the real
/// home.
pub struct Fixture {
    pub dir: tempfile::TempDir,
}

impl Default for Fixture {
    fn default() -> Fixture {
        Fixture::new()
    }
}

impl Fixture {
    pub fn new() -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        for sub in ["ws", "home", "config", "state"] {
            std::fs::create_dir(dir.path().join(sub)).unwrap();
        }
        Fixture { dir }
    }

    pub fn ws(&self) -> PathBuf {
        self.dir.path().join("ws")
    }

    pub fn path(&self, relative: &str) -> PathBuf {
        self.dir.path().join(relative)
    }

    pub fn dirs(&self) -> UserDirs {
        UserDirs {
            home: Some(self.path("home")),
            xdg_config_home: Some(self.path("config")),
        }
    }

    /// Writes `relative` (under the temp dir), creating folders.
    pub fn write(&self, relative: &str, content: impl AsRef<[u8]>) {
        let path = self.path(relative);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, content).unwrap();
    }

    /// A valid skill `name` under the skills root `root` (relative to the temp dir).
    pub fn skill(&self, root: &str, name: &str, description: &str) {
        self.write(
            &format!("{root}/{name}/SKILL.md"),
            format!("---\nname: {name}\ndescription: {description}\n---\n# {name}\nDo the {name} thing.\n"),
        );
    }
}

pub fn symlink(target: impl AsRef<Path>, link: impl AsRef<Path>) {
    std::os::unix::fs::symlink(target, link).unwrap();
}

/// Runs `tool` with `input` as the core would after validation.
pub async fn call(tool: &dyn Tool, input: serde_json::Value) -> ToolExecutionResult {
    match tool
        .execute(input, ToolExecutionContext::new("s", "t", "c"))
        .await
    {
        ToolOutput::Result(result) => result,
        other => panic!("unexpected output {other:?}"),
    }
}

/// The result's code (`None` for a success).
pub fn code(result: &ToolExecutionResult) -> Option<String> {
    result.code().map(|code| code.as_str().to_owned())
}
