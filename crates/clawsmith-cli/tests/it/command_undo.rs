//! Undo covers what commands change, through the binary: `turn` runs one
//! `run_command` in the kernel sandbox, `undo files TURN` puts the tree back byte for byte
//! (modes and symlinks included), refuses after a user edit, and never touches ignored paths.

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use serde_json::{Value, json};

use crate::Fixture;

/// Everything under `root` but `.git`: path → (content or link target, mode), directories as
/// `None`.
fn tree(root: &Path) -> BTreeMap<String, Option<(Vec<u8>, u32)>> {
    fn visit(root: &Path, directory: &Path, found: &mut BTreeMap<String, Option<(Vec<u8>, u32)>>) {
        for item in std::fs::read_dir(directory).unwrap() {
            let path = item.unwrap().path();
            let relative = path.strip_prefix(root).unwrap().display().to_string();
            if relative == ".git" {
                continue;
            }
            let meta = std::fs::symlink_metadata(&path).unwrap();
            let mode = meta.permissions().mode() & 0o7777;
            let entry = if meta.file_type().is_symlink() {
                let target = std::fs::read_link(&path).unwrap();
                Some((target.into_os_string().into_encoded_bytes(), 0))
            } else if meta.is_dir() {
                visit(root, &path, found);
                None
            } else {
                Some((std::fs::read(&path).unwrap(), mode))
            };
            found.insert(relative, entry);
        }
    }
    let mut found = BTreeMap::new();
    visit(root, root, &mut found);
    found
}

/// Runs `command` as one turn of session `s`; returns the turn id and the result.
fn run_command(f: &Fixture, command: &str) -> (String, Value) {
    let ws = f.ws();
    let arguments = json!({ "command": command }).to_string();
    let calls = json!([{ "id": "c1", "name": "run_command", "arguments": arguments }]);
    let run = f.run(
        &[
            "turn",
            "--workspace",
            ws.to_str().unwrap(),
            "--mode",
            "full",
            "--session",
            "s",
        ],
        &calls.to_string(),
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    let last = run.lines().pop().unwrap();
    let result = last["results"][0]["result"].clone();
    assert_eq!(result["status"], "success", "{result}");
    (last["turnId"].as_str().unwrap().to_owned(), result)
}

/// Whether user namespaces are available for the sandbox; says so when they are not.
fn sandbox_available() -> bool {
    let available = std::fs::read_to_string("/proc/sys/user/max_user_namespaces")
        .is_ok_and(|text| text.trim() != "0");
    if !available {
        eprintln!("skipped: the command sandbox needs user namespaces, which this kernel refuses");
    }
    available
}

/// Commands run on the fixture's `a.txt` and `b.txt`.
const COMMANDS: &[&str] = &[
    "sed -i s/beta/BETA/ a.txt",
    "echo hello > new.txt",
    "rm b.txt",
    "mv a.txt moved.txt",
    "mkdir -p x/y && touch x/y/z",
    "chmod +x a.txt",
    "mkdir gen && for i in $(seq 1 1000); do echo $i > gen/$i; done",
    "echo tmp > t && rm t",
    "ln -s a.txt link",
    "rm b.txt && ln -s a.txt b.txt",
];

#[test]
fn undo_files_restores_what_a_command_changed() {
    if !sandbox_available() {
        return;
    }
    for command in COMMANDS {
        let f = Fixture::new();
        let before = tree(&f.ws());
        let (turn, _) = run_command(&f, command);
        let undo = f.undo(true, &["files", &turn]);
        assert_eq!(undo.code, 0, "{command}: {}", undo.stderr);
        assert_eq!(undo.json()["outcome"], "undone", "{command}");
        assert_eq!(tree(&f.ws()), before, "{command}: the tree is back");
    }
}

#[test]
fn git_checkout_is_undone() {
    if !sandbox_available() {
        return;
    }
    let f = Fixture::new();
    let git = |arguments: &[&str]| {
        let output = std::process::Command::new("git")
            .args([
                "-c",
                "user.name=t",
                "-c",
                "user.email=t@t",
                "-c",
                "commit.gpgsign=false",
            ])
            .args(arguments)
            .current_dir(f.ws())
            .output()
            .unwrap();
        assert!(output.status.success(), "git {arguments:?}: {output:?}");
    };
    git(&["init", "-q"]);
    git(&["add", "a.txt"]);
    git(&["commit", "-q", "-m", "init"]);
    std::fs::write(f.ws().join("a.txt"), "uncommitted work\n").unwrap();
    let before = tree(&f.ws());
    let (turn, _) = run_command(&f, "git checkout -- a.txt");
    assert_eq!(crate::read(&f.ws().join("a.txt")), "alpha\nbeta\n");
    assert_eq!(f.undo(true, &["files", &turn]).json()["outcome"], "undone");
    assert_eq!(tree(&f.ws()), before);
}

#[test]
fn a_user_edit_after_the_command_makes_undo_refuse() {
    if !sandbox_available() {
        return;
    }
    let f = Fixture::new();
    let (turn, _) = run_command(&f, "sed -i s/beta/BETA/ a.txt && rm b.txt");
    // `undo list` says which call of which origin made each change.
    let list = f.run(&["undo", "list"], "");
    assert_eq!(list.code, 0, "{}", list.stderr);
    for (kind, path) in [("modified", "a.txt"), ("deleted", "b.txt")] {
        let attributed = list.stdout.lines().any(|l| {
            let words: Vec<&str> = l.split_whitespace().collect();
            words.starts_with(&[kind, path]) && l.ends_with("command c1")
        });
        assert!(
            attributed,
            "{kind} {path} … command c1 not in {}",
            list.stdout
        );
    }
    // So do `undo list --json` and `undo diff --json`.
    let listed = f.run(&["--json", "undo", "list"], "");
    assert_eq!(listed.code, 0, "{}", listed.stderr);
    assert!(
        listed.stdout.contains(r#""origin":"command""#)
            && listed.stdout.contains(r#""callId":"c1""#),
        "{}",
        listed.stdout
    );
    let a_txt = f.ws().join("a.txt");
    let diff = f.run(
        &["--json", "undo", "diff", &turn, a_txt.to_str().unwrap()],
        "",
    );
    assert_eq!(diff.code, 0, "{}", diff.stderr);
    let diff = diff.json();
    assert_eq!(diff["origin"], "command", "{diff}");
    assert_eq!(diff["callId"], "c1", "{diff}");
    std::fs::write(f.ws().join("a.txt"), "the user's own edit\n").unwrap();
    let before = tree(&f.ws());
    let undo = f.undo(true, &["files", &turn]);
    assert_eq!(undo.code, 3, "{}", undo.stderr);
    assert!(undo.stdout.contains("a.txt"), "{}", undo.stdout);
    assert_eq!(tree(&f.ws()), before, "a refused undo changes nothing");
}

#[test]
fn ignored_paths_are_named_and_left_alone() {
    if !sandbox_available() {
        return;
    }
    let f = Fixture::new();
    let (turn, result) = run_command(
        &f,
        "mkdir target && echo bin > target/out && echo x > b.txt",
    );
    let content = result["content"].as_str().unwrap();
    assert!(
        content.contains("[not captured for undo: target/out: ignored"),
        "{content}"
    );
    let undo = f.undo(true, &["files", &turn]);
    let answer = undo.json();
    assert_eq!(answer["outcome"], "undone");
    // Undo names what it cannot give back, too: on stderr and in the JSON.
    assert!(
        undo.stderr
            .contains("note: not captured: target/out: ignored"),
        "{}",
        undo.stderr
    );
    assert_eq!(answer["notCaptured"][0]["path"], "target/out", "{answer}");
    assert_eq!(
        answer["notCaptured"][0]["turnId"],
        turn.as_str(),
        "{answer}"
    );
    assert_eq!(crate::read(&f.ws().join("b.txt")), "gamma\n");
    assert_eq!(crate::read(&f.ws().join("target/out")), "bin\n");
}

/// Many paths undo cannot give back are named ten at a time, then counted; `-q` keeps the notes
/// off stderr; `--json` lists them all.
#[test]
fn many_uncaptured_paths_are_counted_not_listed() {
    if !sandbox_available() {
        return;
    }
    let command =
        "mkdir target && for i in $(seq 1 25); do echo $i > target/f$i; done && echo x > b.txt";
    // (global flags, "not captured" lines on stderr, the counting line)
    let table: [(&[&str], usize, bool); 3] = [
        (&[], 10, true),
        (&["-q"], 0, false),
        (&["--json"], 10, true),
    ];
    for (flags, named, counted) in table {
        let f = Fixture::new();
        let (turn, _) = run_command(&f, command);
        let ws = f.ws();
        let mut args: Vec<&str> = flags.to_vec();
        args.extend_from_slice(&["undo", "files", &turn, "--workspace", ws.to_str().unwrap()]);
        let undo = f.run(&args, "");
        assert_eq!(undo.code, 0, "{flags:?}: {}", undo.stderr);
        let lines = undo
            .stderr
            .lines()
            .filter(|line| line.starts_with("note: not captured: target/f"))
            .count();
        assert_eq!(lines, named, "{flags:?}: {}", undo.stderr);
        assert_eq!(
            undo.stderr
                .contains("note: … and 15 more paths not captured"),
            counted,
            "{flags:?}: {}",
            undo.stderr
        );
        if flags == ["--json"] {
            assert_eq!(undo.json()["notCaptured"].as_array().unwrap().len(), 25);
        }
        assert_eq!(crate::read(&f.ws().join("b.txt")), "gamma\n", "{flags:?}");
    }
}
