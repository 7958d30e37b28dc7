//! Shared fixtures: a temp dir holding `ws/` (the workspace) and `outside/` (must never change).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use clawsmith_fs::Workspace;

pub struct Fixture {
    _temp: tempfile::TempDir,
    pub base: PathBuf,
    pub ws: PathBuf,
    pub outside: PathBuf,
}

impl Fixture {
    pub fn new() -> Fixture {
        let temp = tempfile::tempdir().unwrap();
        let base = temp.path().canonicalize().unwrap();
        let ws = base.join("ws");
        let outside = base.join("outside");
        std::fs::create_dir(&ws).unwrap();
        std::fs::create_dir(&outside).unwrap();
        std::fs::write(outside.join("secret.txt"), "OUTSIDE-SECRET\n").unwrap();
        std::fs::create_dir(outside.join("dir")).unwrap();
        std::fs::write(outside.join("dir/inner.txt"), "OUTSIDE-SECRET inner\n").unwrap();
        Fixture {
            _temp: temp,
            base,
            ws,
            outside,
        }
    }

    pub fn workspace(&self) -> Workspace {
        Workspace::open(&self.ws).unwrap()
    }

    pub fn write(&self, relative: &str, content: impl AsRef<[u8]>) {
        let path = self.ws.join(relative);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).unwrap();
        }
        std::fs::write(path, content).unwrap();
    }

    pub fn read(&self, relative: &str) -> Vec<u8> {
        std::fs::read(self.ws.join(relative)).unwrap()
    }

    pub fn symlink(&self, target: impl AsRef<Path>, relative: &str) {
        std::os::unix::fs::symlink(target, self.ws.join(relative)).unwrap();
    }

    /// Every entry under `root` with its content (files) or link target (symlinks).
    pub fn snapshot(root: &Path) -> BTreeMap<PathBuf, String> {
        let mut out = BTreeMap::new();
        snapshot_into(root, root, &mut out);
        out
    }

    pub fn outside_snapshot(&self) -> BTreeMap<PathBuf, String> {
        Fixture::snapshot(&self.outside)
    }

    /// Names in the workspace that look like leftover temp files.
    pub fn temp_files(&self) -> Vec<PathBuf> {
        Fixture::snapshot(&self.ws)
            .into_keys()
            .filter(|p| p.to_string_lossy().contains(".clawsmith-tmp-"))
            .collect()
    }
}

fn snapshot_into(root: &Path, dir: &Path, out: &mut BTreeMap<PathBuf, String>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let entry = entry.unwrap();
        let path = entry.path();
        let relative = path.strip_prefix(root).unwrap().to_path_buf();
        let kind = entry.file_type().unwrap();
        if kind.is_symlink() {
            let target = std::fs::read_link(&path).unwrap();
            out.insert(relative, format!("symlink -> {}", target.display()));
        } else if kind.is_dir() {
            out.insert(relative, "dir".to_owned());
            snapshot_into(root, &path, out);
        } else {
            let content = std::fs::read(&path).unwrap();
            out.insert(relative, String::from_utf8_lossy(&content).into_owned());
        }
    }
}
