//! The lexical path check and resolution on any string, over a workspace that holds symlinks
//! escaping in every way: a path that resolves is plain and relative, and whatever opens through
//! the handle is inside the root (checked on the descriptor the kernel actually opened).
#![no_main]

use std::os::fd::AsRawFd;
use std::path::PathBuf;
use std::sync::OnceLock;

use clawsmith_fs::Workspace;
use libfuzzer_sys::fuzz_target;

struct Harness {
    _dir: tempfile::TempDir,
    root: PathBuf,
    workspace: Workspace,
}

fn harness() -> &'static Harness {
    static HARNESS: OnceLock<Harness> = OnceLock::new();
    HARNESS.get_or_init(|| {
        let dir = tempfile::tempdir().expect("temp dir");
        let base = dir.path().canonicalize().expect("canonical temp dir");
        let root = base.join("ws");
        let outside = base.join("outside");
        for directory in [&root, &outside, &root.join("sub/deep")] {
            std::fs::create_dir_all(directory).expect("directories");
        }
        std::fs::write(outside.join("secret"), "OUTSIDE").expect("secret");
        std::fs::write(root.join("a.txt"), "inside").expect("a.txt");
        std::fs::write(root.join("sub/deep/b.txt"), "inside").expect("b.txt");
        let links: [(&str, PathBuf); 6] = [
            ("up", PathBuf::from("..")),
            ("escape", PathBuf::from("../outside")),
            ("absolute", outside.clone()),
            ("secret", outside.join("secret")),
            ("sub/deep/back", PathBuf::from("../../../outside/secret")),
            ("loop", PathBuf::from("loop")),
        ];
        for (name, target) in links {
            std::os::unix::fs::symlink(target, root.join(name)).expect("symlink");
        }
        let workspace = Workspace::open(&root).expect("workspace");
        Harness {
            _dir: dir,
            root,
            workspace,
        }
    })
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let harness = harness();
    let Ok(path) = harness.workspace.resolve(text) else {
        return;
    };
    let relative = path.as_str();
    assert!(
        !relative.starts_with('/'),
        "{text:?} resolved to {relative:?}"
    );
    assert!(
        relative.is_empty()
            || relative
                .split('/')
                .all(|part| !part.is_empty() && part != "." && part != ".."),
        "{text:?} resolved to {relative:?}"
    );
    assert!(harness.root.join(relative).starts_with(&harness.root));
    let _ = harness.workspace.read_state_capped(&path, 1 << 16);
    let _ = harness.workspace.hash_file(&path);
    if let Ok((file, _)) = harness.workspace.open_for_read(&path) {
        let opened = std::fs::read_link(format!("/proc/self/fd/{}", file.as_raw_fd()))
            .expect("descriptor path");
        assert!(
            opened.starts_with(&harness.root),
            "{text:?} opened {} outside the workspace",
            opened.display()
        );
    }
});
