//! `WorkspaceWatch`: after a watched listing, `changes_since` names only what changed, and the
//! previous listing with those changes applied is exactly what a new full listing finds — after
//! every kind of change a command makes, and while a writer races the calls. Where the events
//! cannot say (an ignore file changed, a new hard link), it answers `None`.

use std::os::unix::fs::{PermissionsExt, symlink};

use clawsmith_fs::{FileListing, ListingChanges, Workspace, WorkspaceWatch};

use crate::support::Fixture;

const CONSUMER: &str = "session";

/// Files, links (with stamps), the other entries (kind and stamp, printed) and the
/// directories, sorted.
type Plain = (
    Vec<(String, clawsmith_fs::FileStamp)>,
    Vec<(String, clawsmith_fs::FileStamp)>,
    Vec<(String, String)>,
    Vec<String>,
);

/// The listing as comparable data.
fn plain(listing: &FileListing) -> Plain {
    let mut files: Vec<_> = listing.files.iter().map(|(p, s)| (p.clone(), *s)).collect();
    let mut links: Vec<_> = listing.links.iter().map(|(p, s)| (p.clone(), *s)).collect();
    let mut others: Vec<_> = listing
        .others
        .iter()
        .map(|(p, e)| (p.clone(), format!("{e:?}")))
        .collect();
    files.sort_by(|a, b| a.0.cmp(&b.0));
    links.sort_by(|a, b| a.0.cmp(&b.0));
    others.sort();
    let mut directories: Vec<String> = listing.directories.iter().cloned().collect();
    directories.sort();
    (files, links, others, directories)
}

fn chmod(fixture: &Fixture, relative: &str, mode: u32) {
    std::fs::set_permissions(
        fixture.ws.join(relative),
        std::fs::Permissions::from_mode(mode),
    )
    .unwrap();
}

struct Watched {
    workspace: Workspace,
    watch: WorkspaceWatch,
    listing: FileListing,
}

impl Watched {
    fn new(fixture: &Fixture) -> Watched {
        let workspace = fixture.workspace();
        let mut watch = workspace
            .watch()
            .expect("inotify on the test's file system");
        let listing = workspace.list_files_watched(&mut watch, CONSUMER);
        assert!(watch.is_usable());
        Watched {
            workspace,
            watch,
            listing,
        }
    }

    /// Applies what the watch says changed and checks the result against a full listing;
    /// returns the changes (`None`: the watch said to list again, which is then done).
    fn step(&mut self, what: &str) -> Option<ListingChanges> {
        let changes = self.workspace.changes_since(&mut self.watch, CONSUMER);
        match &changes {
            Some(changes) => self.listing.apply(changes),
            None => self.listing = self.workspace.list_files_watched(&mut self.watch, CONSUMER),
        }
        let full = self.workspace.list_files();
        assert_eq!(plain(&self.listing), plain(&full), "after {what}");
        changes
    }

    /// Like [`Watched::step`], and the watch must have answered.
    fn answered(&mut self, what: &str) -> ListingChanges {
        self.step(what)
            .unwrap_or_else(|| panic!("the watch gave up after {what}"))
    }
}

#[test]
fn an_unchanged_tree_has_no_changes_and_one_write_names_one_path() {
    let fixture = Fixture::new();
    for index in 0..50 {
        fixture.write(&format!("d{}/f{index}.rs", index % 5), "fn f() {}\n");
    }
    let mut watched = Watched::new(&fixture);
    assert!(watched.answered("nothing").is_empty());
    fixture.write("d3/f8.rs", "fn g() {}\n");
    let changes = watched.answered("one write");
    assert_eq!(changes.paths, vec!["d3/f8.rs".to_owned()]);
    assert!(changes.subtrees.is_empty());
    assert!(changes.listing.files.contains_key("d3/f8.rs"));
    assert!(watched.answered("nothing again").is_empty());
}

#[test]
fn every_kind_of_change_is_seen_as_a_full_listing_sees_it() {
    let fixture = Fixture::new();
    fixture.write(".gitignore", "build/\n");
    fixture.write("src/a.rs", "a\n");
    fixture.write("src/b.rs", "b\n");
    fixture.write("src/deep/c.rs", "c\n");
    fixture.write("build/out.o", "obj\n");
    fixture.write("target/debug/app", "bin\n");
    let mut watched = Watched::new(&fixture);

    fixture.write("src/a.rs", "A\n");
    watched.answered("a rewrite");
    fixture.write("src/new.rs", "new\n");
    watched.answered("a new file");
    chmod(&fixture, "src/b.rs", 0o755);
    watched.answered("a chmod");
    std::fs::remove_file(fixture.ws.join("src/new.rs")).unwrap();
    watched.answered("a removal");
    std::fs::rename(
        fixture.ws.join("src/b.rs"),
        fixture.ws.join("src/deep/b.rs"),
    )
    .unwrap();
    watched.answered("a move between folders");
    std::fs::create_dir_all(fixture.ws.join("x/y/z")).unwrap();
    std::fs::write(fixture.ws.join("x/y/z/f"), "f\n").unwrap();
    let changes = watched.answered("mkdir -p x/y/z && touch x/y/z/f");
    assert!(changes.listing.files.contains_key("x/y/z/f"));
    // The directories the walk enters are listed (what undo removes once empty again); ignored
    // and skipped ones are not.
    for directory in ["x", "x/y", "x/y/z", "src", "src/deep"] {
        assert!(
            watched.listing.directories.contains(directory),
            "{directory}"
        );
    }
    for directory in ["build", "target", "target/debug"] {
        assert!(
            !watched.listing.directories.contains(directory),
            "{directory}"
        );
    }
    std::fs::create_dir(fixture.ws.join("w")).unwrap();
    std::fs::rename(fixture.ws.join("x"), fixture.ws.join("w/x")).unwrap();
    std::fs::write(fixture.ws.join("w/x/y/z/g"), "g\n").unwrap();
    watched.answered("a folder moved, then written in");
    std::fs::write(fixture.ws.join("w/x/y/h"), "h\n").unwrap();
    let changes = watched.answered("a write in the moved folder");
    assert_eq!(changes.paths, vec!["w/x/y/h".to_owned()]);
    // A folder built outside the workspace and moved in: its content had no watch.
    std::fs::create_dir_all(fixture.base.join("elsewhere/inner")).unwrap();
    std::fs::write(fixture.base.join("elsewhere/inner/file"), "from outside\n").unwrap();
    std::fs::rename(fixture.base.join("elsewhere"), fixture.ws.join("moved-in")).unwrap();
    let changes = watched.answered("a folder moved in from outside");
    assert!(changes.listing.files.contains_key("moved-in/inner/file"));
    std::fs::rename(fixture.ws.join("moved-in"), fixture.base.join("gone")).unwrap();
    watched.answered("a folder moved out");
    std::fs::write(fixture.base.join("gone/inner/file"), "written outside\n").unwrap();
    assert!(
        watched
            .answered("a write in the folder moved out")
            .is_empty(),
        "the moved-out folder's events are no longer the workspace's"
    );
    std::fs::remove_dir_all(fixture.ws.join("w")).unwrap();
    watched.answered("rm -rf");
    symlink("a.rs", fixture.ws.join("src/link")).unwrap();
    watched.answered("a new link");
    std::fs::remove_file(fixture.ws.join("src/link")).unwrap();
    symlink("deep", fixture.ws.join("src/link")).unwrap();
    watched.answered("a link replaced");
    fixture.write("build/out.o", "new obj\n");
    fixture.write("target/debug/new", "bin\n");
    let changes = watched.answered("writes in ignored folders");
    assert!(changes.listing.others.contains_key("target/debug/new"));
    std::fs::remove_file(fixture.ws.join("src/a.rs")).unwrap();
    std::fs::create_dir(fixture.ws.join("src/a.rs")).unwrap();
    std::fs::write(fixture.ws.join("src/a.rs/inner"), "i\n").unwrap();
    watched.answered("a file replaced by a folder");
    rustix::fs::mknodat(
        rustix::fs::CWD,
        fixture.ws.join("src/pipe").as_path(),
        rustix::fs::FileType::Fifo,
        rustix::fs::Mode::from_raw_mode(0o600),
        0,
    )
    .unwrap();
    watched.answered("a FIFO");
    chmod(&fixture, "src/deep", 0o000);
    watched.answered("a folder made unreadable");
    chmod(&fixture, "src/deep", 0o755);
    watched.answered("a folder made readable again");

    // Which files are captured changed: only a full listing can say.
    fixture.write(".gitignore", "build/\nsrc/deep/\n");
    assert!(watched.step("an ignore file changed").is_none());
    fixture.write("src/.gitignore", "*.tmp\n");
    assert!(watched.step("a nested ignore file").is_none());
    watched.answered("nothing after the full listing");
}

#[test]
fn hard_links_are_looked_at_every_time() {
    let fixture = Fixture::new();
    fixture.write("a", "one\n");
    fixture.write("target/other", "x\n");
    let mut watched = Watched::new(&fixture);
    // The new name's event says nothing about `a`: only a full listing can find its names.
    std::fs::hard_link(fixture.ws.join("a"), fixture.ws.join("target/link")).unwrap();
    assert!(watched.step("a hard link into an ignored folder").is_none());
    // A write through the ignored name has an event for that name only; `a` is looked at
    // because it has several links.
    std::fs::write(fixture.ws.join("target/link"), "two, longer\n").unwrap();
    let changes = watched.answered("a write through the other name");
    assert!(changes.paths.contains(&"a".to_owned()));
    assert_eq!(
        changes.listing.files["a"].size,
        "two, longer\n".len() as u64
    );
}

#[test]
fn consumers_take_their_own_changes() {
    let fixture = Fixture::new();
    fixture.write("a", "1\n");
    let workspace = fixture.workspace();
    let mut watch = workspace.watch().unwrap();
    let mut first = workspace.list_files_watched(&mut watch, "first");
    let mut second = workspace.list_files_watched(&mut watch, "second");
    fixture.write("a", "22\n");
    first.apply(&workspace.changes_since(&mut watch, "first").unwrap());
    fixture.write("b", "3\n");
    second.apply(&workspace.changes_since(&mut watch, "second").unwrap());
    first.apply(&workspace.changes_since(&mut watch, "first").unwrap());
    let full = workspace.list_files();
    assert_eq!(plain(&first), plain(&full));
    assert_eq!(plain(&second), plain(&full));
    assert!(
        workspace
            .changes_since(&mut watch, "never listed")
            .is_none(),
        "a consumer without a listing must list"
    );
}

#[test]
fn a_writer_racing_the_calls_is_never_missed() {
    for round in 0..5 {
        let fixture = Fixture::new();
        fixture.write("seed", "s\n");
        let mut watched = Watched::new(&fixture);
        let root = fixture.ws.clone();
        let writer = std::thread::spawn(move || {
            for index in 0..60 {
                let dir = root.join(format!("r{round}/a{}/b{index}", index % 3));
                std::fs::create_dir_all(&dir).unwrap();
                std::fs::write(dir.join("c"), format!("{index}\n")).unwrap();
                if index % 7 == 0 {
                    std::fs::rename(
                        root.join(format!("r{round}/a{}", index % 3)),
                        root.join(format!("r{round}/moved{index}")),
                    )
                    .unwrap();
                }
                if index % 11 == 0 {
                    let _ =
                        std::fs::remove_dir_all(root.join(format!("r{round}/moved{}", index - 4)));
                }
            }
        });
        while !writer.is_finished() {
            let changes = watched
                .workspace
                .changes_since(&mut watched.watch, CONSUMER);
            match changes {
                Some(changes) => watched.listing.apply(&changes),
                None => {
                    watched.listing = watched
                        .workspace
                        .list_files_watched(&mut watched.watch, CONSUMER)
                }
            }
        }
        writer.join().unwrap();
        // Every change made while the calls ran is caught by the next one.
        watched.answered("the racing writer");
    }
}
