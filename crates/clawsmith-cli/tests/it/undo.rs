use serde_json::json;

use crate::{Fixture, read};

fn turn_with_changes(f: &Fixture) -> String {
    let calls = json!([
        {"id": "e1", "name": "edit_file", "arguments": "{\"path\":\"a.txt\",\"oldText\":\"beta\",\"newText\":\"BETA\"}"},
        {"id": "e2", "name": "write_file", "arguments": "{\"path\":\"new.txt\",\"content\":\"fresh\\n\"}"},
        {"id": "e3", "name": "rename_file", "arguments": "{\"from\":\"b.txt\",\"to\":\"moved.txt\"}"},
        {"id": "e4", "name": "todo_write", "arguments": "{\"todos\":[{\"id\":\"1\",\"content\":\"x\",\"status\":\"pending\"}]}"}
    ]);
    let run = f.turn(&["--mode", "full", "--session", "s"], &calls);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let last = run.lines().pop().unwrap();
    for result in last["results"].as_array().unwrap() {
        assert_eq!(result["result"]["status"], "success", "{result}");
    }
    last["turnId"].as_str().unwrap().to_owned()
}

#[test]
fn list_diff_and_undo_all_restore_the_tree() {
    let f = Fixture::new();
    let turn = turn_with_changes(&f);
    let list = f.run(&["--json", "undo", "list"], "").json();
    let checkpoint = &list["checkpoints"][0];
    assert_eq!(checkpoint["turnId"], turn.as_str());
    let paths: Vec<&str> = checkpoint["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["path"].as_str().unwrap())
        .collect();
    for path in ["a.txt", "new.txt", "b.txt", "moved.txt"] {
        assert!(paths.contains(&path), "{path} not in {paths:?}");
    }
    let diff = f.run(&["undo", "diff", &turn, "a.txt"], "");
    assert_eq!(diff.code, 0, "{}", diff.stderr);
    assert!(
        diff.stdout.contains("-beta") && diff.stdout.contains("+BETA"),
        "{}",
        diff.stdout
    );
    let undo = f.undo(true, &["all", &turn]).json();
    assert_eq!(undo["outcome"], "undone");
    assert_eq!(read(&f.ws().join("a.txt")), "alpha\nbeta\n");
    assert_eq!(read(&f.ws().join("b.txt")), "gamma\n");
    assert!(!f.ws().join("new.txt").exists() && !f.ws().join("moved.txt").exists());
    let show = f.run(&["--json", "session", "show", "s"], "").json();
    assert_eq!(show["messages"].as_array().unwrap().len(), 0);
    assert_eq!(show["todos"].as_array().unwrap().len(), 0);
    let again = f.undo(false, &["all", &turn]);
    assert_eq!(again.code, 0);
    assert!(again.stdout.contains("already undone"), "{}", again.stdout);
}

#[test]
fn a_conflicting_undo_changes_nothing() {
    let f = Fixture::new();
    let turn = turn_with_changes(&f);
    std::fs::write(f.ws().join("a.txt"), "the user's own edit\n").unwrap();
    let before: Vec<(String, String)> = ["a.txt", "new.txt", "moved.txt"]
        .iter()
        .map(|p| (p.to_string(), read(&f.ws().join(p))))
        .collect();
    let run = f.undo(true, &["files", &turn]);
    assert_eq!(run.code, 3, "{}", run.stderr);
    let report = run.json();
    assert_eq!(report["outcome"], "conflicts");
    assert_eq!(report["conflicts"][0]["path"], "a.txt");
    for (path, content) in before {
        assert_eq!(read(&f.ws().join(&path)), content, "{path} changed");
    }
    assert!(!f.ws().join("b.txt").exists());
    let people = f.undo(false, &["all", &turn]);
    assert_eq!(people.code, 3);
    assert!(
        people.stdout.contains("a.txt") && people.stdout.contains("nothing was changed"),
        "{}",
        people.stdout
    );
    let unknown = f.undo(false, &["files", "turn_nope"]);
    assert_eq!(unknown.code, 1);
    assert!(
        unknown.stderr.contains("no checkpoint for turn"),
        "{}",
        unknown.stderr
    );
}

#[test]
fn session_undo_keeps_files_and_prune_reports() {
    let f = Fixture::new();
    let turn = turn_with_changes(&f);
    let undo = f.undo(true, &["session", &turn]).json();
    assert_eq!(undo["outcome"], "undone");
    assert_eq!(read(&f.ws().join("a.txt")), "alpha\nBETA\n");
    let prune = f.run(&["--json", "prune", "--dry-run"], "").json();
    assert_eq!(prune["dryRun"], true);
    assert_eq!(prune["checkpointsRemoved"], 0);
    let prune = f.run(&["prune"], "");
    assert_eq!(prune.code, 0);
    assert!(prune.stdout.contains("freed"), "{}", prune.stdout);
}

/// Whether the file system under `dir` records birth times (`statx`): undo needs them to tell a
/// directory the turn made from one that was there.
fn birth_times_recorded(dir: &std::path::Path) -> bool {
    std::fs::metadata(dir).and_then(|m| m.created()).is_ok()
}

#[test]
fn undo_removes_the_directories_a_turn_made_and_keeps_the_others() {
    let f = Fixture::new();
    if !birth_times_recorded(&f.ws()) {
        eprintln!(
            "skipped: the file system under {} records no birth times",
            f.ws().display()
        );
        return;
    }
    std::fs::create_dir(f.ws().join("kept")).unwrap();
    std::fs::create_dir(f.ws().join("kept-empty")).unwrap();
    let write = |path: &str| json!({"id": path, "name": "write_file", "arguments": json!({"path": path, "content": "x\n"}).to_string()});
    let calls = json!([
        [{"id": "mk", "name": "run_command", "arguments": json!({"command": "mkdir -p made/deep made/other"}).to_string()}],
        [write("made/deep/x.txt"), write("made/other/y.txt"), write("kept/z.txt")]
    ]);
    let run = f.turn(
        &[
            "--mode",
            "full",
            "--sandbox",
            "best-effort",
            "--session",
            "s",
        ],
        &calls,
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    let last = run.lines().pop().unwrap();
    for result in last["results"].as_array().unwrap() {
        assert_eq!(result["result"]["status"], "success", "{result}");
    }
    let turn = last["turnId"].as_str().unwrap().to_owned();
    let undo = f.undo(true, &["all", &turn]).json();
    assert_eq!(undo["outcome"], "undone", "{undo}");
    let mut removed: Vec<&str> = undo["removedDirectories"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d.as_str().unwrap())
        .collect();
    removed.sort_unstable();
    assert_eq!(removed, ["made", "made/deep", "made/other"]);
    // (path, whether it exists after the undo)
    for (path, exists) in [
        ("made", false),
        ("kept", true),
        ("kept-empty", true),
        ("kept/z.txt", false),
        ("a.txt", true),
    ] {
        assert_eq!(f.ws().join(path).exists(), exists, "{path}");
    }
}

/// A file the user put back by hand (a `git checkout`, say) holds what the undo would write:
/// it is no conflict, nothing is written to it, and the undo says so; a file the turn created
/// and the user already deleted is no conflict either.
#[test]
fn a_file_already_put_back_does_not_block_undo() {
    let f = Fixture::new();
    let turn = turn_with_changes(&f);
    std::fs::write(f.ws().join("a.txt"), "alpha\nbeta\n").unwrap();
    std::fs::remove_file(f.ws().join("new.txt")).unwrap();
    let preview = f.run(&["--json", "undo", "list"], "");
    assert_eq!(preview.code, 0, "{}", preview.stderr);
    let undo = f.undo(true, &["files", &turn]);
    assert_eq!(undo.code, 0, "{}", undo.stderr);
    let undo = undo.json();
    assert_eq!(undo["outcome"], "undone", "{undo}");
    assert_eq!(undo["alreadyAsBefore"], json!(["a.txt"]), "{undo}");
    assert_eq!(undo["restored"], json!(["b.txt"]), "{undo}");
    assert_eq!(undo["removed"], json!(["moved.txt"]), "{undo}");
    assert_eq!(read(&f.ws().join("a.txt")), "alpha\nbeta\n");
    assert_eq!(read(&f.ws().join("b.txt")), "gamma\n");
    assert!(!f.ws().join("moved.txt").exists() && !f.ws().join("new.txt").exists());

    // As text: a row for it, and exit 0.
    let f = Fixture::new();
    let turn = turn_with_changes(&f);
    std::fs::write(f.ws().join("a.txt"), "alpha\nbeta\n").unwrap();
    let undo = f.undo(false, &["files", &turn]);
    assert_eq!(undo.code, 0, "{}", undo.stderr);
    assert!(
        undo.stdout.lines().any(|line| {
            line.contains("as before") && line.contains("a.txt") && line.contains("left alone")
        }),
        "{}",
        undo.stdout
    );
    // A file changed to anything else still refuses the undo, and changes nothing.
    let f = Fixture::new();
    let turn = turn_with_changes(&f);
    std::fs::write(f.ws().join("a.txt"), "alpha\nbeta, edited by hand\n").unwrap();
    let undo = f.undo(true, &["files", &turn]);
    assert_eq!(undo.code, 3, "{}", undo.stderr);
    assert_eq!(undo.json()["conflicts"][0]["path"], "a.txt");
    assert_eq!(read(&f.ws().join("a.txt")), "alpha\nbeta, edited by hand\n");
    assert!(f.ws().join("moved.txt").exists());
}

/// `undo list` as text shows the newest 20 turns that changed files, each with the tools that
/// changed them; `--all`, `--limit` and `--path` change that; `--json` lists every turn.
#[test]
fn undo_list_shows_the_turns_that_changed_files_newest_first_and_filters() {
    let f = Fixture::new();
    let first = turn_with_changes(&f);
    let mut reads = Vec::new();
    for index in 0..3 {
        let calls = json!([{"id": format!("r{index}"), "name": "read_file",
                            "arguments": "{\"path\":\"a.txt\"}"}]);
        let run = f.turn(&["--mode", "full", "--session", "s"], &calls);
        assert_eq!(run.code, 0, "{}", run.stderr);
        reads.push(
            run.lines().pop().unwrap()["turnId"]
                .as_str()
                .unwrap()
                .to_owned(),
        );
    }
    std::fs::create_dir(f.ws().join("src")).unwrap();
    let calls = json!([{"id": "w", "name": "write_file",
                        "arguments": "{\"path\":\"src/other.txt\",\"content\":\"x\\n\"}"}]);
    let run = f.turn(&["--mode", "full", "--session", "s"], &calls);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let result = run.lines().pop().unwrap();
    assert_eq!(
        result["results"][0]["result"]["status"], "success",
        "{result}"
    );
    let last = result["turnId"].as_str().unwrap().to_owned();
    let headers = |args: &[&str]| -> (Vec<String>, String) {
        let mut full = vec!["--color", "never", "undo", "list"];
        full.extend_from_slice(args);
        let run = f.run(&full, "");
        assert_eq!(run.code, 0, "{args:?}: {}", run.stderr);
        let turns = run
            .stdout
            .lines()
            .filter_map(|line| line.strip_prefix("turn "))
            .map(|line| line.split_whitespace().next().unwrap().to_owned())
            .collect();
        (turns, run.stdout)
    };
    // (flags, turns listed, newest first)
    let everything: Vec<String> = [last.clone()]
        .into_iter()
        .chain(reads.iter().rev().cloned())
        .chain([first.clone()])
        .collect();
    let table: Vec<(Vec<&str>, Vec<String>)> = vec![
        (vec![], vec![last.clone(), first.clone()]),
        (vec!["--all"], everything.clone()),
        (vec!["--limit", "1"], vec![last.clone()]),
        (vec!["--all", "--limit", "0"], everything.clone()),
        (vec!["--path", "a.txt"], vec![first.clone()]),
        (vec!["--path", "./src/"], vec![last.clone()]),
        (vec!["--path", "src/other"], vec![]),
        (
            vec!["--session", "s", "--path", "b.txt"],
            vec![first.clone()],
        ),
    ];
    for (flags, expected) in &table {
        let (listed, _) = headers(flags);
        assert_eq!(&listed, expected, "{flags:?}");
    }
    let (_, text) = headers(&[]);
    assert!(
        text.contains("calls: edit_file, write_file, rename_file, todo_write")
            && text.contains("calls: write_file"),
        "each turn names the tools it called: {text}"
    );
    let (_, text) = headers(&["--limit", "1"]);
    assert!(
        text.contains("… 1 older turn (`--limit 0` lists all"),
        "{text}"
    );
    let (_, text) = headers(&["--path", "nowhere.txt"]);
    assert!(text.contains("no turn changed that path"), "{text}");
    // JSON: every turn unless limited, with how many were left out.
    let listed = f.run(&["--json", "undo", "list"], "").json();
    assert_eq!(
        listed["checkpoints"].as_array().unwrap().len(),
        5,
        "{listed}"
    );
    assert_eq!(listed["older"], 0);
    let listed = f
        .run(&["--json", "undo", "list", "--limit", "2"], "")
        .json();
    assert_eq!(
        listed["checkpoints"].as_array().unwrap().len(),
        2,
        "{listed}"
    );
    assert_eq!(listed["older"], 3);
    // A bad limit is clap's usage error.
    assert_eq!(f.run(&["undo", "list", "--limit", "-1"], "").code, 2);
}
