//! Commands that destroy a repository's history, read from the text.
//!
//! `undo` restores a command's working files, not what it does to `.git`: a command that deletes,
//! moves or overwrites a `.git` (`rm -rf .git`, `mv .git x`, `> .git/HEAD`), or deletes
//! everything under the workspace root (`rm -rf *`, `find . -delete`, `cd / && rm -rf *`), loses
//! the repository's history for good. Such a command is asked about in every mode that would
//! otherwise run it, unless an allow rule names it.
//!
//! The reading is lexical, like the rules: it follows `cd`/`pushd` in source order (a directory
//! that is the workspace, one of its ancestors, or unknown — `cd $X`, `cd -`, `cd ~` — counts as
//! the workspace root) and does not see which directories contain a `.git` on disk, nor which
//! `cd` a subshell undoes.

use std::path::{Component, Path, PathBuf};

use clawsmith_shell::{Part, Script, SimpleCommand, Word};
use globset::Glob;

use crate::permission::spell;

/// One command of a script that would destroy a repository's history.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RepositoryDamage {
    /// The simple command (or redirect) as written after quote removal: `rm -rf .git`.
    pub(crate) command: String,
    /// The word it aims at: `.git`, `*`, `.`; an allow rule must name it.
    pub(crate) target: String,
    /// What it does, as a verb: `deletes`, `moves`, `overwrites`.
    pub(crate) action: &'static str,
    /// What it reaches.
    pub(crate) reach: Reach,
    /// The `cd` that put the working directory at or above the workspace root, if one did.
    pub(crate) after_cd: Option<String>,
}

/// What a damaging command reaches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Reach {
    /// A `.git` directory or file, or something inside one.
    History,
    /// Everything under the workspace root (or one of its ancestors), `.git` included.
    WorkspaceRoot,
}

impl RepositoryDamage {
    /// `` `rm -rf .git` deletes the repository's history (.git) ``.
    pub(crate) fn describe(&self) -> String {
        let what = match self.reach {
            Reach::History => "the repository's history (.git)".to_owned(),
            Reach::WorkspaceRoot => {
                "everything under the workspace root, the repository's history (.git) with it"
                    .to_owned()
            }
        };
        let context = match &self.after_cd {
            Some(cd) => format!(
                " (after `{cd}` the working directory is the workspace, above it or unknown)"
            ),
            None => String::new(),
        };
        format!("`{}` {} {what}{context}", self.command, self.action)
    }
}

/// The working directory while reading a script.
#[derive(Debug, Clone)]
enum Cwd {
    /// An absolute, lexically normalized directory.
    Known(PathBuf),
    /// Only known at run time (`cd $X`, `cd -`, `cd ~`, `popd`).
    Unknown,
}

/// Reads `script` in source order for commands that destroy a repository's history.
/// `workspace_root` is where the command starts; without it a stand-in root is used and any
/// absolute `cd` makes the directory unknown.
pub(crate) fn repository_damage(
    script: &Script,
    workspace_root: Option<&Path>,
) -> Vec<RepositoryDamage> {
    let root_known = workspace_root.is_some();
    let root = workspace_root
        .map(normalize)
        .unwrap_or_else(|| PathBuf::from("/workspace-root"));
    let mut reader = Reader {
        root,
        root_known,
        cwd: Cwd::Unknown,
        after_cd: None,
        found: Vec::new(),
    };
    reader.cwd = Cwd::Known(reader.root.clone());
    for part in script.parts() {
        match part {
            Part::Command(command) => reader.command(command),
            Part::Redirect(redirect) if redirect.writes_file() => {
                let target = &redirect.target;
                if reader.names_history(target) {
                    let command = format!("{}{}", redirect.operator, target.text);
                    reader.push(command, &target.text, "overwrites", Reach::History);
                }
            }
            _ => {}
        }
    }
    reader.found
}

struct Reader {
    root: PathBuf,
    root_known: bool,
    cwd: Cwd,
    after_cd: Option<String>,
    found: Vec<RepositoryDamage>,
}

/// Names git keeps inside `.git`: a `find -name` pattern matching none of them leaves the
/// repository alone.
const GIT_ENTRY_SAMPLES: &[&str] = &[
    ".git",
    "HEAD",
    "ORIG_HEAD",
    "FETCH_HEAD",
    "config",
    "index",
    "objects",
    "refs",
    "heads",
    "main",
    "packed-refs",
    "description",
    "hooks",
    "info",
    "exclude",
    "logs",
    "pack",
    "pack-0123456789abcdef.pack",
    "pack-0123456789abcdef.idx",
    "ab",
    "0123456789abcdef0123456789abcdef012345",
];

/// Programs that delete their operands.
const DELETERS: &[&str] = &["rm", "unlink", "rmdir", "shred"];

/// Programs whose destination (the last operand, or `-t DIR`) is overwritten.
const COPIERS: &[&str] = &["cp", "ln", "install", "rsync"];

/// Programs that overwrite every operand.
const OVERWRITERS: &[&str] = &["truncate", "tee"];

impl Reader {
    fn command(&mut self, command: &SimpleCommand) {
        let Some(program) = command.program.as_deref() else {
            return;
        };
        let program = program.rsplit('/').next().unwrap_or(program);
        let args = command.args();
        match program {
            "cd" | "pushd" => self.change_directory(command, args),
            "popd" => {
                self.cwd = Cwd::Unknown;
                self.after_cd = Some(spelled(command));
            }
            _ if DELETERS.contains(&program) => self.delete(command, args),
            "mv" => {
                for operand in operands(args) {
                    if self.names_history(operand) {
                        self.push(spelled(command), &operand.text, "moves", Reach::History);
                    }
                }
            }
            _ if COPIERS.contains(&program) => {
                let directory_option = args
                    .iter()
                    .position(|w| w.text == "-t" || w.text == "--target-directory")
                    .and_then(|i| args.get(i + 1));
                let last = operands(args).last();
                for destination in directory_option.into_iter().chain(last) {
                    if self.names_history(destination) {
                        let text = &destination.text;
                        self.push(spelled(command), text, "overwrites", Reach::History);
                    }
                }
            }
            _ if OVERWRITERS.contains(&program) => {
                for operand in operands(args) {
                    if self.names_history(operand) {
                        let text = &operand.text;
                        self.push(spelled(command), text, "overwrites", Reach::History);
                    }
                }
            }
            "dd" => {
                for arg in args {
                    if let Some(path) = arg.text.strip_prefix("of=") {
                        let word = Word {
                            text: path.to_owned(),
                            dynamic: arg.dynamic,
                        };
                        if self.names_history(&word) {
                            self.push(spelled(command), path, "overwrites", Reach::History);
                        }
                    }
                }
            }
            "find" => self.find(command, args),
            _ => {}
        }
    }

    /// `cd DIR`, `pushd DIR`: where later relative paths start.
    fn change_directory(&mut self, command: &SimpleCommand, args: &[Word]) {
        let target = operands(args).next();
        self.cwd = match target {
            Some(word) if !word.dynamic && word.text != "-" && !word.text.starts_with('~') => {
                match (&self.cwd, Path::new(&word.text).is_absolute()) {
                    (_, true) if !self.root_known => Cwd::Unknown,
                    (_, true) => Cwd::Known(normalize(Path::new(&word.text))),
                    (Cwd::Known(current), false) => {
                        Cwd::Known(normalize(&current.join(&word.text)))
                    }
                    (Cwd::Unknown, false) => Cwd::Unknown,
                }
            }
            // `cd` alone goes home; `cd -`, `cd ~`, `cd $X` go where only the run knows.
            _ => Cwd::Unknown,
        };
        self.after_cd = self.cwd_reaches_root().then(|| spelled(command));
    }

    /// `rm`, `unlink`, `rmdir`, `shred`: any operand in a `.git`; with `-r`, an operand at or
    /// above the workspace root, or operands only known at run time.
    fn delete(&mut self, command: &SimpleCommand, args: &[Word]) {
        let recursive = args
            .iter()
            .take_while(|w| w.text != "--")
            .any(|w| is_recursive_flag(&w.text));
        for operand in operands(args) {
            if self.names_history(operand) {
                self.push(spelled(command), &operand.text, "deletes", Reach::History);
            } else if recursive
                && !is_home_or_filesystem_root(operand)
                && self.reaches_root(operand)
            {
                let text = &operand.text;
                self.push(spelled(command), text, "deletes", Reach::WorkspaceRoot);
            }
        }
        if recursive && command.input_arguments && self.cwd_reaches_root() {
            self.push(spelled(command), "…", "deletes", Reach::WorkspaceRoot);
        }
    }

    /// `find PATH… -delete` and `find PATH… -exec rm …`: a starting point in a `.git` or at or
    /// above the workspace root, unless `-name` patterns rule out every name git keeps.
    fn find(&mut self, command: &SimpleCommand, args: &[Word]) {
        let texts: Vec<&str> = args.iter().map(|w| w.text.as_str()).collect();
        let deletes = texts.contains(&"-delete")
            || clawsmith_shell::find_exec_commands(&texts)
                .into_iter()
                .filter_map(|range| texts.get(range.start))
                .any(|program| {
                    let program = program.rsplit('/').next().unwrap_or(program);
                    DELETERS.contains(&program) || program == "mv"
                });
        if !deletes {
            return;
        }
        let expression_start = args
            .iter()
            .position(|w| w.text.starts_with('-') || w.text == "(" || w.text == "!")
            .unwrap_or(args.len());
        let expression = &texts[expression_start..];
        let spares_git = spares_git_entries(expression);
        let default_start = [Word {
            text: ".".to_owned(),
            dynamic: false,
        }];
        let starts = match expression_start {
            0 => &default_start[..],
            n => &args[..n],
        };
        for start in starts {
            if self.names_history(start) {
                self.push(spelled(command), &start.text, "deletes", Reach::History);
            } else if !spares_git && self.reaches_root(start) {
                let text = &start.text;
                self.push(spelled(command), text, "deletes", Reach::WorkspaceRoot);
            }
        }
    }

    fn push(&mut self, command: String, target: &str, action: &'static str, reach: Reach) {
        let after_cd = match reach {
            Reach::WorkspaceRoot => self.after_cd.clone(),
            Reach::History => None,
        };
        self.found.push(RepositoryDamage {
            command,
            target: target.to_owned(),
            action,
            reach,
            after_cd,
        });
    }

    /// Whether the working directory is the workspace root, above it, or unknown.
    fn cwd_reaches_root(&self) -> bool {
        match &self.cwd {
            Cwd::Known(dir) => self.root.starts_with(dir),
            Cwd::Unknown => true,
        }
    }

    /// Whether `word` names a `.git` or a path inside one: a component `.git`, or a glob
    /// component matching it (`.g*`).
    fn names_history(&self, word: &Word) -> bool {
        word.text.split('/').any(|component| {
            component == ".git" || (is_glob(component) && shell_glob_matches(component, ".git"))
        })
    }

    /// Whether a recursive delete of `word` reaches the workspace root: it resolves to the root
    /// or an ancestor, or it is a glob at such a directory matching everything (`*`), `.git`, or
    /// the next directory down to the workspace. A word that is only an expansion (`$X`,
    /// `$X/*`) could be anything, and so could a relative word when the directory is unknown.
    fn reaches_root(&self, word: &Word) -> bool {
        let text = word.text.as_str();
        let (base, rest): (Cwd, &str) = if let Some(rest) = pwd_expansion(text) {
            (self.cwd.clone(), rest)
        } else if text.starts_with('~') || (word.dynamic && text.starts_with(['$', '`'])) {
            // `~`, `$X`, `$(…)`: a directory only the run knows.
            let first = text.split('/').next().unwrap_or(text);
            (Cwd::Unknown, &text[first.len()..])
        } else if text.starts_with('/') {
            (Cwd::Known(PathBuf::from("/")), text)
        } else {
            (self.cwd.clone(), text)
        };
        let mut dir = base;
        for component in rest.split('/').filter(|c| !c.is_empty()) {
            dir = match (dir, component) {
                (dir, ".") => dir,
                (Cwd::Known(path), "..") => Cwd::Known(normalize(&path.join(".."))),
                (Cwd::Unknown, "..") => Cwd::Unknown,
                // Below an unknown directory only a glob matching everything may be the root.
                (Cwd::Unknown, component) => {
                    return component.chars().all(|c| c == '*')
                        || shell_glob_matches(component, ".git");
                }
                (Cwd::Known(path), component) if is_glob(component) => {
                    return self.glob_reaches_root(&path, component);
                }
                (Cwd::Known(path), component) => Cwd::Known(path.join(component)),
            };
        }
        match dir {
            Cwd::Known(path) => self.root.starts_with(&path),
            Cwd::Unknown => true,
        }
    }

    /// A glob in `dir`: at the root it reaches the root when it is `*` or matches `.git`;
    /// above it, when it matches the next directory down to the workspace.
    fn glob_reaches_root(&self, dir: &Path, glob: &str) -> bool {
        if dir == self.root {
            return glob.chars().all(|c| c == '*') || shell_glob_matches(glob, ".git");
        }
        match self.root.strip_prefix(dir) {
            Ok(below) => below
                .components()
                .next()
                .is_some_and(|next| shell_glob_matches(glob, &next.as_os_str().to_string_lossy())),
            Err(_) => false,
        }
    }
}

/// `/`, `/*`, `~`, `$HOME`, `${HOME}/*`: the disaster check of `clawsmith-sandbox` refuses a
/// recursive delete of these in every mode, so asking about one would ask about a command that
/// cannot run (and hide the disaster check's reason).
fn is_home_or_filesystem_root(word: &Word) -> bool {
    let text = word.text.as_str();
    let rest = ["~", "$HOME", "${HOME}", ""].iter().find_map(|home| {
        text.strip_prefix(home)
            .filter(|_| !home.is_empty() || text.starts_with('/'))
    });
    rest.is_some_and(|rest| rest.split('/').all(|part| matches!(part, "" | "." | "*")))
}

/// `$PWD`, `${PWD}`, `$(pwd)`, `` `pwd` ``: the working directory; the rest of the word after it.
fn pwd_expansion(text: &str) -> Option<&str> {
    ["$PWD", "${PWD}", "$(pwd)", "`pwd`"]
        .iter()
        .find_map(|prefix| text.strip_prefix(prefix))
        .filter(|rest| rest.is_empty() || rest.starts_with('/'))
}

/// The operands of a command: its arguments that are not options (everything after `--`).
fn operands(args: &[Word]) -> impl Iterator<Item = &Word> {
    let mut after_dashes = false;
    args.iter().filter(move |word| {
        if after_dashes {
            return true;
        }
        if word.text == "--" {
            after_dashes = true;
            return false;
        }
        !(word.text.starts_with('-') && word.text.len() > 1)
    })
}

/// `-r`, `-R`, `--recursive`, and short clusters holding one (`-rf`, `-fR`).
fn is_recursive_flag(text: &str) -> bool {
    text == "--recursive"
        || (text.starts_with('-') && !text.starts_with("--") && text.contains(['r', 'R']))
}

/// Whether the `find` expression's `-name`/`-iname` tests rule out every name git keeps; an
/// expression with `-o`, `!` or `-not` may delete by another branch, so it spares nothing.
fn spares_git_entries(expression: &[&str]) -> bool {
    if expression.iter().any(|t| {
        matches!(
            *t,
            "-o" | "-or" | "!" | "-not" | "-path" | "-wholename" | "-regex"
        )
    }) {
        return false;
    }
    let names: Vec<&str> = expression
        .windows(2)
        .filter(|pair| matches!(pair[0], "-name" | "-iname"))
        .map(|pair| pair[1])
        .collect();
    !names.is_empty()
        && names.iter().all(|pattern| {
            !GIT_ENTRY_SAMPLES
                .iter()
                .any(|sample| glob_matches(pattern, sample))
        })
}

fn is_glob(component: &str) -> bool {
    component.contains(['*', '?', '['])
}

/// A glob of the shell matching the name `name`: a leading `.` must be matched by a leading
/// `.` in the pattern (`*` does not reach `.git`, `.*` does).
fn shell_glob_matches(pattern: &str, name: &str) -> bool {
    (!name.starts_with('.') || pattern.starts_with('.')) && glob_matches(pattern, name)
}

/// `find -name`-style match of one path component (a leading `.` is matched like any
/// character); a pattern globset cannot read matches (fail closed).
fn glob_matches(pattern: &str, name: &str) -> bool {
    Glob::new(pattern).map_or(true, |glob| glob.compile_matcher().is_match(name))
}

/// The command's words as written after quote removal, with ` …` when xargs appends some.
fn spelled(command: &SimpleCommand) -> String {
    spell(command.words.iter().map(|w| w.text.as_str()), command)
}

/// `path` without `.` and with `..` applied, lexically; `..` above `/` stays at `/`.
fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::from("/");
    for component in path.components() {
        match component {
            Component::ParentDir => {
                out.pop();
            }
            Component::Normal(part) => out.push(part),
            Component::CurDir | Component::RootDir | Component::Prefix(_) => {}
        }
    }
    out
}
