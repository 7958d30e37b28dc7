//! Cleaning the repositories a background command makes as they appear, not when it ends.
//!
//! A `start_command` may run for hours; a repository it makes (`git init sub`, a `.git` file)
//! is outside the read-only binds (it did not exist when the view was built). This watch
//! (inotify on every directory the repository scan would visit, and on every new git dir) runs
//! from before the command starts until its tree is gone, and cleans a new repository — the
//! same cleaning as at the end, through directories opened without following links, since the
//! command is still running and may swap one for a link — as soon as anything in it or at its
//! `.git` changes. What
//! remains is the time between a write and its cleaning (one inotify wake-up and, for a config,
//! two runs of `git config`): a command rewriting the file in a loop keeps that window
//! reopening. Directories past the scan's limits, or past the kernel's inotify watch limit, are
//! cleaned at the end only.

use std::collections::{BTreeSet, HashMap};
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Component, Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;

use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use nix::sys::inotify::{AddWatchFlags, InitFlags, Inotify};

use super::{SCAN_MAX_DIRS, SCAN_SKIP, clean_new, scan};

/// A running watch; [`Watch::stop`] (or dropping it) ends it.
#[derive(Debug)]
pub(crate) struct Watch {
    /// Closing it wakes the thread, which then ends.
    stop: Option<OwnedFd>,
    thread: Option<JoinHandle<()>>,
    /// What the watch cleaned, for the report.
    cleaned: Arc<Mutex<Vec<String>>>,
}

impl Watch {
    /// Starts watching `workspace`; `known` are the git dirs that existed before the command
    /// (bound read-only in its view, never cleaned here). `None` when inotify is unavailable.
    pub(crate) fn start(workspace: &Path, known: Vec<PathBuf>) -> Option<Watch> {
        let inotify = Inotify::init(InitFlags::IN_CLOEXEC | InitFlags::IN_NONBLOCK).ok()?;
        let (stop_read, stop_write) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).ok()?;
        let mut state = State {
            inotify,
            workspace: workspace.to_path_buf(),
            known: known.into_iter().collect(),
            directories: HashMap::new(),
            watched: 0,
        };
        // Watched before the command starts, so nothing it makes goes unseen.
        let mut dirty = BTreeSet::new();
        state.watch_tree(workspace, &mut dirty);
        let cleaned = Arc::new(Mutex::new(Vec::new()));
        let report = Arc::clone(&cleaned);
        let thread = std::thread::Builder::new()
            .name("git-watch".to_owned())
            .spawn(move || state.run(&stop_read, &report, dirty))
            .ok()?;
        Some(Watch {
            stop: Some(stop_write),
            thread: Some(thread),
            cleaned,
        })
    }

    /// Ends the watch; what it cleaned.
    pub(crate) fn stop(mut self) -> Vec<String> {
        self.end();
        std::mem::take(&mut *self.cleaned.lock().unwrap_or_else(PoisonError::into_inner))
    }

    fn end(&mut self) {
        self.stop = None;
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        self.end();
    }
}

struct State {
    inotify: Inotify,
    workspace: PathBuf,
    known: BTreeSet<PathBuf>,
    /// Watch descriptor → the directory it watches.
    directories: HashMap<i32, PathBuf>,
    watched: usize,
}

impl State {
    fn run(mut self, stop: &OwnedFd, report: &Mutex<Vec<String>>, mut dirty: BTreeSet<PathBuf>) {
        loop {
            for git in std::mem::take(&mut dirty) {
                let cleaned = clean_new(&self.workspace, &git);
                if !cleaned.is_empty() {
                    report
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .extend(cleaned);
                }
            }
            let mut fds = [
                PollFd::new(self.inotify.as_fd(), PollFlags::POLLIN),
                PollFd::new(stop.as_fd(), PollFlags::POLLIN),
            ];
            if poll(&mut fds, PollTimeout::NONE).is_err() {
                continue;
            }
            // The stop pipe's write end was closed: the command's tree is gone.
            if fds[1].any().unwrap_or(true) {
                return;
            }
            while let Ok(events) = self.inotify.read_events() {
                for event in events {
                    if event.mask.contains(AddWatchFlags::IN_Q_OVERFLOW) {
                        // Events were lost: look at every repository the scan finds.
                        let (found, _) = scan(&self.workspace);
                        dirty.extend(found.into_iter().filter(|git| !self.known.contains(git)));
                        continue;
                    }
                    let Some(dir) = self.directories.get(&event.wd.as_raw()).cloned() else {
                        continue;
                    };
                    let Some(name) = event.name else {
                        continue;
                    };
                    let path = dir.join(name);
                    let created_dir = event.mask.contains(AddWatchFlags::IN_ISDIR)
                        && event
                            .mask
                            .intersects(AddWatchFlags::IN_CREATE | AddWatchFlags::IN_MOVED_TO);
                    if created_dir {
                        self.watch_tree(&path, &mut dirty);
                    }
                    if let Some(git) = self.new_git_dir(&path) {
                        dirty.insert(git);
                    }
                }
            }
        }
    }

    /// The new repository `path` is in or is (`…/.git` or beneath), if any.
    fn new_git_dir(&self, path: &Path) -> Option<PathBuf> {
        let relative = path.strip_prefix(&self.workspace).ok()?;
        let mut git = self.workspace.clone();
        for component in relative.components() {
            let Component::Normal(name) = component else {
                return None;
            };
            git.push(name);
            if name == ".git" {
                return (!self.known.contains(&git)).then_some(git);
            }
        }
        None
    }

    /// Watches `root` and the directories beneath it the scan would visit (and a new git dir's
    /// insides); marks the new repositories already there.
    fn watch_tree(&mut self, root: &Path, dirty: &mut BTreeSet<PathBuf>) {
        let mask = AddWatchFlags::IN_CREATE
            | AddWatchFlags::IN_MOVED_TO
            | AddWatchFlags::IN_CLOSE_WRITE
            | AddWatchFlags::IN_MODIFY
            | AddWatchFlags::IN_ATTRIB
            | AddWatchFlags::IN_ONLYDIR
            | AddWatchFlags::IN_DONT_FOLLOW;
        let mut queue = std::collections::VecDeque::from([root.to_path_buf()]);
        while let Some(dir) = queue.pop_front() {
            if self.watched >= SCAN_MAX_DIRS {
                return;
            }
            let Ok(wd) = self.inotify.add_watch(&dir, mask) else {
                continue;
            };
            self.watched += 1;
            self.directories.insert(wd.as_raw(), dir.clone());
            if let Some(git) = self.new_git_dir(&dir) {
                dirty.insert(git);
            }
            let Ok(entries) = std::fs::read_dir(&dir) else {
                continue;
            };
            for entry in entries.flatten() {
                let path = entry.path();
                let name = entry.file_name();
                if let Some(git) = self.new_git_dir(&path) {
                    dirty.insert(git);
                }
                let is_dir = entry.file_type().is_ok_and(|kind| kind.is_dir());
                let skipped = SCAN_SKIP
                    .iter()
                    .any(|skip| name.as_encoded_bytes() == skip.as_bytes());
                let known_git = self.known.contains(&path);
                if is_dir && !skipped && !known_git {
                    queue.push_back(path);
                }
            }
        }
    }
}
