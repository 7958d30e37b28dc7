//! Running a plain command without the shell in between.
//!
//! `bash -c 'cargo test'` parses the text, finds a single simple command and `exec`s it in the
//! same process: the program that runs, its arguments, its exit status and its signals are the
//! ones of a direct `execve`. What bash adds is its own start (dynamic linking, locale, its
//! variables): about 40% of the processor time of a sandboxed `run_command true` in a profile
//! of the sandbox's bench. So when the text is a command bash would run exactly that way,
//! clawsmith `exec`s the program itself, with the environment bash would have given it (`PWD`,
//! `SHLVL`, `_`; a test compares the two).
//!
//! "Exactly that way" is decided conservatively, on the text alone:
//! - words of the characters `A–Z a–z 0–9 _ - . / : = , + @ %` separated by spaces — nothing bash
//!   would expand, quote, redirect, glob, substitute or treat as an operator, no newline, no
//!   comment, no tilde;
//! - the first word is a bare name (no `/`, no `=`: not an assignment), not a keyword and not a
//!   builtin (a builtin runs inside bash; `true` and `false` without arguments are the exception:
//!   the programs behave the same), found by the `PATH` the command gets in an entry that is
//!   absolute and follows only absolute ones (an empty or relative entry means the working
//!   directory);
//! - the file found is a regular file with an execute bit that starts like an executable
//!   (`\x7fELF` or `#!`): a file without either is a script bash would run itself.
//!
//! Not when bash would source a file first (`BASH_ENV` passed on), nor where there is no bash
//! (`sh` sets other variables). Everything else goes to `bash -c`. The lookup happens in clawsmith's view of the machine; if
//! the program cannot be executed in the command's view (a covered directory, say), the spawn
//! fails before anything ran and is retried through bash, which reports it as bash would.

use std::ffi::OsString;
use std::io::Read;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// A command to `exec` without a shell.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Direct {
    /// The program found on `PATH`.
    pub(crate) program: PathBuf,
    /// `argv[0]`: the name as written, as bash passes it.
    pub(crate) name: String,
    pub(crate) args: Vec<String>,
}

/// Bash's keywords and builtins (bash 5: `compgen -k`, `compgen -b`).
const SHELL_WORDS: &[&str] = &[
    "!",
    "[[",
    "]]",
    "{",
    "}",
    "case",
    "coproc",
    "do",
    "done",
    "elif",
    "else",
    "esac",
    "fi",
    "for",
    "function",
    "if",
    "in",
    "select",
    "then",
    "time",
    "until",
    "while",
    ".",
    ":",
    "[",
    "alias",
    "bg",
    "bind",
    "break",
    "builtin",
    "caller",
    "cd",
    "command",
    "compgen",
    "complete",
    "compopt",
    "continue",
    "declare",
    "dirs",
    "disown",
    "echo",
    "enable",
    "eval",
    "exec",
    "exit",
    "export",
    "false",
    "fc",
    "fg",
    "getopts",
    "hash",
    "help",
    "history",
    "jobs",
    "kill",
    "let",
    "local",
    "logout",
    "mapfile",
    "popd",
    "printf",
    "pushd",
    "pwd",
    "read",
    "readarray",
    "readonly",
    "return",
    "set",
    "shift",
    "shopt",
    "source",
    "suspend",
    "test",
    "times",
    "trap",
    "true",
    "type",
    "typeset",
    "ulimit",
    "umask",
    "unalias",
    "unset",
    "wait",
];

fn plain(byte: u8) -> bool {
    byte.is_ascii_alphanumeric() || b"_-./:=,+@%".contains(&byte)
}

/// The command as a direct `exec`, when bash would run exactly that (see the module docs).
pub(crate) fn resolve(command: &str, env: &[(OsString, OsString)]) -> Option<Direct> {
    if !command.bytes().all(|b| b == b' ' || plain(b)) {
        return None;
    }
    let mut words = command.split(' ').filter(|w| !w.is_empty());
    let name = words.next()?;
    let args: Vec<String> = words.map(str::to_owned).collect();
    if name.contains('/') || name.contains('=') {
        return None;
    }
    let same_as_builtin = matches!(name, "true" | "false") && args.is_empty();
    if SHELL_WORDS.contains(&name) && !same_as_builtin {
        return None;
    }
    if env.iter().any(|(k, _)| k == "BASH_ENV") {
        // bash would source that file first (an allow-listed BASH_ENV): leave it to bash.
        return None;
    }
    if inherited_level(env) >= 999 {
        // bash warns that the level is too high and resets it: leave that to bash.
        return None;
    }
    let program = on_path(name, env)?;
    starts_like_executable(&program).then(|| Direct {
        program,
        name: name.to_owned(),
        args,
    })
}

/// The program of an argv request ([`crate::Argv`]) to `exec` as it is: an absolute path, or a
/// bare name found on the command's `PATH` (as `execvp` would find it), that is an executable.
/// `None` (a relative path, a name not found, a file that is not an executable) leaves the
/// request to bash, which runs its quoted words and reports a failure as bash would.
pub(crate) fn locate(
    program: &str,
    args: &[String],
    env: &[(OsString, OsString)],
) -> Option<Direct> {
    let path = if program.starts_with('/') {
        PathBuf::from(program)
    } else if program.contains('/') || program.is_empty() {
        // Relative to the working directory, which is the child's, not this process's.
        return None;
    } else {
        on_path(program, env)?
    };
    let meta = std::fs::metadata(&path).ok()?;
    (meta.is_file() && meta.permissions().mode() & 0o111 != 0 && starts_like_executable(&path))
        .then(|| Direct {
            program: path,
            name: program.to_owned(),
            args: args.to_vec(),
        })
}

/// The first executable file named `name` in the absolute entries of the environment's `PATH`;
/// `None` when an entry is empty or relative (it names the working directory: bash decides).
fn on_path(name: &str, env: &[(OsString, OsString)]) -> Option<PathBuf> {
    let path = env.iter().find(|(k, _)| k == "PATH")?.1.to_str()?;
    for dir in path.split(':') {
        if !dir.starts_with('/') {
            return None;
        }
        let candidate = Path::new(dir).join(name);
        if let Ok(meta) = std::fs::metadata(&candidate)
            && meta.is_file()
            && meta.permissions().mode() & 0o111 != 0
        {
            return Some(candidate);
        }
    }
    None
}

/// Whether the file starts like something the kernel executes (`\x7fELF` or `#!`); a file
/// without either is a script bash would run itself.
fn starts_like_executable(program: &Path) -> bool {
    let mut magic = [0u8; 4];
    let Ok(mut file) = std::fs::File::open(program) else {
        return false;
    };
    let Ok(read) = file.read(&mut magic) else {
        return false;
    };
    (read == 4 && &magic == b"\x7fELF") || (read >= 2 && &magic[..2] == b"#!")
}

/// The inherited `SHLVL` as bash reads it: a number, else 0; never negative.
fn inherited_level(env: &[(OsString, OsString)]) -> i64 {
    env.iter()
        .find(|(k, _)| k == "SHLVL")
        .and_then(|(_, v)| v.to_str()?.trim().parse::<i64>().ok())
        .unwrap_or(0)
        .max(0)
}

/// The variables `bash -c` sets for the program it `exec`s: `PWD` (the working directory),
/// `SHLVL` (bash raises the inherited level at its start and lowers it again before replacing
/// itself, so the program sees the inherited level, 0 when there was none) and `_` (the
/// program's path).
pub(crate) fn shell_variables(env: &mut Vec<(OsString, OsString)>, cwd: &Path, program: &Path) {
    let level = inherited_level(env);
    env.retain(|(k, _)| k != "PWD" && k != "SHLVL" && k != "_");
    env.push(("PWD".into(), cwd.as_os_str().to_owned()));
    env.push(("SHLVL".into(), level.to_string().into()));
    env.push(("_".into(), program.as_os_str().to_owned()));
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env() -> Vec<(OsString, OsString)> {
        vec![("PATH".into(), "/usr/local/bin:/usr/bin:/bin".into())]
    }

    #[test]
    fn plain_commands_are_executed_directly() {
        let direct = resolve("ls -la src/main.rs", &env()).expect("ls is direct");
        assert!(direct.program.ends_with("ls"), "{direct:?}");
        assert_eq!(direct.name, "ls");
        assert_eq!(direct.args, ["-la", "src/main.rs"]);
        let spaced = resolve("  ls   a  ", &env()).expect("extra spaces are word separators");
        assert_eq!(spaced.args, ["a"]);
        let direct = resolve("true", &env()).expect("true without arguments");
        assert!(direct.args.is_empty());
        assert!(
            resolve("env A=b", &env()).is_some(),
            "= after the first word"
        );
    }

    #[test]
    fn anything_bash_would_interpret_goes_to_bash() {
        for command in [
            "",
            "   ",
            "ls | wc",
            "ls > out",
            "ls < in",
            "ls; ls",
            "ls && ls",
            "ls &",
            "ls $HOME",
            "ls ${HOME}",
            "ls `pwd`",
            "ls $(pwd)",
            "ls *.rs",
            "ls src/?.rs",
            "ls [ab]",
            "ls {a,b}",
            "ls ~",
            "ls ~/x",
            "ls 'a b'",
            "ls \"a\"",
            "ls a\\ b",
            "ls # comment",
            "ls\nrm x",
            "ls\tx",
            "A=1 ls",
            "cd src",
            "echo hi",
            "printf x",
            "true --help",
            "false x",
            "exec ls",
            "export A=1",
            "source x",
            ". x",
            "time ls",
            "./script",
            "/bin/ls",
            "bin/ls",
            "no-such-program-clawsmith",
            "ls é",
        ] {
            assert_eq!(resolve(command, &env()), None, "{command:?}");
        }
    }

    #[test]
    fn the_path_must_be_absolute_everywhere() {
        for path in [
            ":/usr/bin",
            "/nowhere::/usr/bin",
            "bin:/usr/bin",
            ".:/usr/bin",
        ] {
            let env = vec![("PATH".into(), path.into())];
            assert_eq!(resolve("ls", &env), None, "{path}");
        }
        // Entries after the one the program is found in are never consulted, by bash either.
        let env = vec![("PATH".into(), "/usr/bin:.".into())];
        assert!(resolve("ls", &env).is_some());
        assert_eq!(resolve("ls", &[]), None, "no PATH");
    }

    #[test]
    fn files_that_are_not_executables_go_to_bash() {
        let dir = tempfile::tempdir().unwrap();
        let write = |name: &str, body: &[u8], mode: u32| {
            let path = dir.path().join(name);
            std::fs::write(&path, body).unwrap();
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
        };
        write("script-with-shebang", b"#!/bin/sh\nexit 0\n", 0o755);
        write("script-without-shebang", b"exit 0\n", 0o755);
        write("not-executable", b"#!/bin/sh\n", 0o644);
        write("tiny", b"#", 0o755);
        std::fs::create_dir(dir.path().join("a-directory")).unwrap();
        let env = vec![("PATH".into(), dir.path().as_os_str().to_owned())];
        assert!(resolve("script-with-shebang", &env).is_some());
        for name in [
            "script-without-shebang",
            "not-executable",
            "tiny",
            "a-directory",
        ] {
            assert_eq!(resolve(name, &env), None, "{name}");
        }
    }

    #[test]
    fn bash_variables_are_set_as_bash_sets_them() {
        let mut env: Vec<(OsString, OsString)> = vec![
            ("PATH".into(), "/usr/bin".into()),
            ("PWD".into(), "/elsewhere".into()),
        ];
        shell_variables(&mut env, Path::new("/w/src"), Path::new("/usr/bin/ls"));
        let get = |env: &[(OsString, OsString)], k: &str| {
            env.iter()
                .find(|(n, _)| n == k)
                .map(|(_, v)| v.to_str().unwrap().to_owned())
        };
        assert_eq!(get(&env, "PWD").as_deref(), Some("/w/src"));
        assert_eq!(get(&env, "SHLVL").as_deref(), Some("0"));
        assert_eq!(get(&env, "_").as_deref(), Some("/usr/bin/ls"));
        assert_eq!(env.iter().filter(|(n, _)| n == "PWD").count(), 1);
        for (inherited, seen) in [("3", "3"), ("-5", "0"), ("x", "0"), ("998", "998")] {
            let mut nested: Vec<(OsString, OsString)> = vec![("SHLVL".into(), inherited.into())];
            shell_variables(&mut nested, Path::new("/w"), Path::new("/usr/bin/ls"));
            assert_eq!(get(&nested, "SHLVL").as_deref(), Some(seen), "{inherited}");
        }
        let high: Vec<(OsString, OsString)> = vec![
            ("PATH".into(), "/usr/bin:/bin".into()),
            ("SHLVL".into(), "999".into()),
        ];
        assert_eq!(resolve("ls", &high), None, "bash resets a level too high");
        let bash_env: Vec<(OsString, OsString)> = vec![
            ("PATH".into(), "/usr/bin:/bin".into()),
            ("BASH_ENV".into(), "/w/.bashrc".into()),
        ];
        assert_eq!(
            resolve("ls", &bash_env),
            None,
            "bash sources BASH_ENV first"
        );
    }
}
