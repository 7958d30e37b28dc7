//! Commands that run another command or a script: which of their arguments that is.

use std::ops::Range;

/// Shells: `-c SCRIPT` runs a script; with no script argument they read standard input.
pub(crate) const SHELLS: &[&str] = &[
    "sh",
    "bash",
    "zsh",
    "dash",
    "ksh",
    "mksh",
    "ash",
    "fish",
    "busybox-sh",
];

/// What a wrapper runs.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Unwrapped {
    /// The command made of its arguments from this index on.
    Command {
        /// Index of the command name among the wrapper's arguments.
        start: usize,
        /// The wrapper appends arguments it reads at run time (`xargs`).
        input_arguments: bool,
    },
    /// Several commands, each a range of its arguments (`find -exec … \; -exec … +`).
    Commands(Vec<Range<usize>>),
    /// A script to parse again.
    Script(String),
    /// Nothing (not a wrapper, or no command given).
    Nothing,
}

/// A wrapper whose command follows its options: `timeout -s KILL 5 rm x`.
struct Wrapper {
    names: &'static [&'static str],
    /// Options whose value is the next word (`-n 5`; `-n5` and `--signal=KILL` carry it).
    options_with_value: &'static [&'static str],
    /// Operands between the options and the command (the `5` of `timeout 5`).
    operands: usize,
    /// Arguments read at run time are appended to the command.
    input_arguments: bool,
}

const fn wrapper(
    names: &'static [&'static str],
    options_with_value: &'static [&'static str],
    operands: usize,
) -> Wrapper {
    Wrapper {
        names,
        options_with_value,
        operands,
        input_arguments: false,
    }
}

/// The options of `xargs` that take the next word as their value.
const XARGS_OPTIONS_WITH_VALUE: &[&str] = &[
    "-I",
    "-i",
    "-n",
    "-P",
    "-L",
    "-l",
    "-d",
    "-E",
    "-e",
    "-s",
    "-a",
    "--max-args",
    "--max-procs",
    "--max-lines",
    "--delimiter",
    "--eof",
    "--max-chars",
    "--arg-file",
    "--replace",
    "--process-slot-var",
];

/// The plain wrappers. Those that need more than options and operands (`env`, `command`,
/// shells, `eval`, `find`, …) are in [`unwrap`].
const WRAPPERS: &[Wrapper] = &[
    wrapper(
        &[
            "nohup",
            "coproc",
            "builtin",
            "setsid",
            "unbuffer",
            "caffeinate",
            "doas-nopass",
            "fakeroot",
            "proxychains",
            "proxychains4",
            "torsocks",
            "firejail",
            "catchsegv",
            "valgrind",
            "strace",
            "ltrace",
            "gdb",
            "sg",
            "busybox",
            "toybox",
        ],
        &[],
        0,
    ),
    wrapper(&["time"], &["-f", "--format", "-o", "--output"], 0),
    wrapper(&["exec"], &["-a"], 0),
    wrapper(&["nice"], &["-n", "--adjustment"], 0),
    wrapper(
        &["ionice"],
        &["-c", "-n", "-t", "--class", "--classdata"],
        0,
    ),
    wrapper(&["chrt"], &["-T", "-P", "-D"], 1),
    wrapper(&["timeout"], &["-s", "--signal", "-k", "--kill-after"], 1),
    wrapper(
        &["stdbuf"],
        &["-i", "-o", "-e", "--input", "--output", "--error"],
        0,
    ),
    wrapper(&["chroot"], &["--userspec", "--groups"], 1),
    wrapper(
        &["flock"],
        &["-w", "--timeout", "-E", "--conflict-exit-code"],
        1,
    ),
    wrapper(
        &["sudo"],
        &[
            "-u",
            "-g",
            "-C",
            "-D",
            "-h",
            "-p",
            "-r",
            "-t",
            "-T",
            "-U",
            "--user",
            "--group",
            "--close-from",
            "--chdir",
            "--host",
            "--prompt",
            "--role",
            "--type",
            "--command-timeout",
            "--other-user",
        ],
        0,
    ),
    wrapper(&["doas"], &["-u", "-C"], 0),
    wrapper(&["pkexec"], &["--user"], 0),
    Wrapper {
        names: &["xargs"],
        options_with_value: XARGS_OPTIONS_WITH_VALUE,
        operands: 0,
        input_arguments: true,
    },
];

/// What the command `program` with arguments `args` runs besides itself.
pub(crate) fn unwrap(program: &str, args: &[&str]) -> Unwrapped {
    if SHELLS.contains(&program) {
        return match shell_script_argument(args) {
            Some(index) => Unwrapped::Script(args[index].to_owned()),
            None => Unwrapped::Nothing,
        };
    }
    if let Some(wrapper) = WRAPPERS.iter().find(|w| w.names.contains(&program)) {
        let start = skip_options(args, wrapper.options_with_value) + wrapper.operands;
        return command_at(args, start, wrapper.input_arguments);
    }
    match program {
        "eval" => Unwrapped::Script(args.join(" ")),
        // `alias x='rm -rf /'` and `trap 'rm -rf /' EXIT` store scripts that run later.
        "alias" => {
            let bodies: Vec<&str> = args
                .iter()
                .filter_map(|t| t.split_once('=').map(|(_, body)| body))
                .collect();
            Unwrapped::Script(bodies.join("\n"))
        }
        "trap" => match args.iter().find(|t| !t.starts_with('-')) {
            Some(script) => Unwrapped::Script((*script).to_owned()),
            None => Unwrapped::Nothing,
        },
        "env" => unwrap_env(args),
        "command" => {
            // `command -v rm` only looks the name up.
            let looks_up = args
                .iter()
                .take_while(|t| t.starts_with('-'))
                .any(|t| t.contains('v') || t.contains('V'));
            if looks_up {
                return Unwrapped::Nothing;
            }
            command_at(args, skip_options(args, &[]), false)
        }
        "taskset" => {
            // `taskset -p MASK PID` changes a running process.
            if args
                .first()
                .is_some_and(|t| t.starts_with('-') && t.contains('p'))
            {
                return Unwrapped::Nothing;
            }
            command_at(args, skip_options(args, &[]) + 1, false)
        }
        "watch" => {
            let i = skip_options(args, &["-n", "--interval", "-d", "--differences"]);
            if i < args.len() {
                Unwrapped::Script(args[i..].join(" "))
            } else {
                Unwrapped::Nothing
            }
        }
        "su" | "runuser" => match args.iter().position(|t| *t == "-c" || *t == "--command") {
            Some(i) if i + 1 < args.len() => Unwrapped::Script(args[i + 1].to_owned()),
            _ => Unwrapped::Nothing,
        },
        "find" => Unwrapped::Commands(find_exec_commands(args)),
        "script" => match script_command(args) {
            Some(script) => Unwrapped::Script(script.to_owned()),
            None => Unwrapped::Nothing,
        },
        _ => Unwrapped::Nothing,
    }
}

fn command_at(args: &[&str], start: usize, input_arguments: bool) -> Unwrapped {
    if start < args.len() {
        Unwrapped::Command {
            start,
            input_arguments,
        }
    } else {
        Unwrapped::Nothing
    }
}

/// `env [-i] [-u NAME] [NAME=VALUE]… COMMAND`; `env -S 'cmd args'` (`--split-string=…`) hands
/// over a string to split.
fn unwrap_env(args: &[&str]) -> Unwrapped {
    let mut i = 0;
    while i < args.len() {
        let t = args[i];
        if t == "-S" || t == "--split-string" {
            return match args.get(i + 1) {
                Some(s) => Unwrapped::Script((*s).to_owned()),
                None => Unwrapped::Nothing,
            };
        }
        if let Some(s) = t.strip_prefix("--split-string=") {
            return Unwrapped::Script(s.to_owned());
        }
        if let Some(s) = t.strip_prefix("-S")
            && !s.is_empty()
        {
            return Unwrapped::Script(s.to_owned());
        }
        if t == "--" {
            i += 1;
            break;
        }
        if t.starts_with('-') {
            i += if matches!(t, "-u" | "--unset" | "-C" | "--chdir") {
                2
            } else {
                1
            };
            continue;
        }
        if t.contains('=') {
            i += 1;
            continue;
        }
        break;
    }
    command_at(args, i, false)
}

/// `script -c CMD`, `script -qc CMD`, `script -cCMD`, `script --command=CMD`: the command
/// `script` hands to the user's shell.
pub(crate) fn script_command<'a>(args: &[&'a str]) -> Option<&'a str> {
    let mut i = 0;
    while i < args.len() {
        let t = args[i];
        if let Some(command) = t.strip_prefix("--command=") {
            return Some(command);
        }
        if t == "--command" {
            return args.get(i + 1).copied();
        }
        if let Some(cluster) = t.strip_prefix('-').filter(|c| !c.starts_with('-'))
            && let Some(at) = cluster.find('c')
        {
            let rest = &cluster[at + 1..];
            return if rest.is_empty() {
                args.get(i + 1).copied()
            } else {
                Some(rest)
            };
        }
        i += 1;
    }
    None
}

/// The replace string of `xargs -I R`, `-IR`, `-i[R]` or `--replace[=R]`: wherever it appears in
/// the command, xargs puts what it reads.
pub(crate) fn xargs_placeholder(args: &[&str]) -> Option<String> {
    let end = skip_options(args, XARGS_OPTIONS_WITH_VALUE);
    let mut i = 0;
    while i < end.min(args.len()) {
        let t = args[i];
        if t == "-I" {
            return args.get(i + 1).map(|r| (*r).to_owned());
        }
        if let Some(r) = t
            .strip_prefix("-I")
            .or_else(|| t.strip_prefix("--replace="))
        {
            return Some(r.to_owned());
        }
        if t == "--replace" || t == "-i" {
            return Some("{}".to_owned());
        }
        if let Some(r) = t.strip_prefix("-i") {
            return Some(r.to_owned());
        }
        i += 1;
    }
    None
}

/// `bash -c 'script'`, `sh -xc 'script'`, `bash -l -c 'script'`: the index of the script.
fn shell_script_argument(args: &[&str]) -> Option<usize> {
    let mut i = 0;
    let mut wants_command = false;
    while i < args.len() {
        let t = args[i];
        if t == "--" {
            i += 1;
            break;
        }
        if t.starts_with("--") {
            if t == "--rcfile" || t == "--init-file" {
                i += 1;
            }
            i += 1;
            continue;
        }
        if (t.starts_with('-') || t.starts_with('+')) && t.len() > 1 {
            if t[1..].contains('c') {
                wants_command = true;
            }
            if t == "-o" || t == "+o" || t == "-O" || t == "+O" {
                i += 1;
            }
            i += 1;
            continue;
        }
        break;
    }
    (wants_command && i < args.len()).then_some(i)
}

/// Index of the first non-option argument, skipping options that take a value (`with_value`).
fn skip_options(args: &[&str], with_value: &[&str]) -> usize {
    let mut i = 0;
    while i < args.len() {
        let t = args[i];
        if t == "--" {
            i += 1;
            break;
        }
        if !t.starts_with('-') || t == "-" {
            break;
        }
        // `-n5` / `--signal=KILL` carry their value; `-n 5` takes the next word.
        if with_value.contains(&t) {
            i += 2;
        } else {
            i += 1;
        }
    }
    i
}

/// The commands `find ARGS` runs: each `-exec CMD … ;` (and `-execdir`, `-ok`, `-okdir`, or
/// ended by `+`) as the range of `args` from `CMD` to before the terminator.
pub fn find_exec_commands(args: &[&str]) -> Vec<Range<usize>> {
    let mut commands = Vec::new();
    let mut i = 0;
    while i < args.len() {
        if matches!(args[i], "-exec" | "-execdir" | "-ok" | "-okdir") {
            let end = args[i + 1..]
                .iter()
                .position(|a| *a == ";" || *a == "+")
                .map_or(args.len(), |p| i + 1 + p);
            if end > i + 1 {
                commands.push(i + 1..end);
            }
            i = end;
        }
        i += 1;
    }
    commands
}

#[cfg(test)]
mod tests {
    use super::*;

    #[track_caller]
    fn check(program: &str, args: &str, expected: Unwrapped) {
        let args: Vec<&str> = args.split_whitespace().collect();
        assert_eq!(unwrap(program, &args), expected, "{program} {args:?}");
    }

    fn at(start: usize) -> Unwrapped {
        Unwrapped::Command {
            start,
            input_arguments: false,
        }
    }

    #[test]
    fn xargs_replace_strings() {
        // (xargs arguments, the replace string)
        let table = [
            ("-I X X f", Some("X")),
            ("-IX X f", Some("X")),
            ("-i rm {}", Some("{}")),
            ("--replace=@ rm @", Some("@")),
            ("-n 1 rm", None),
            ("rm -I x", None),
        ];
        for (args, expected) in table {
            let args: Vec<&str> = args.split_whitespace().collect();
            assert_eq!(xargs_placeholder(&args).as_deref(), expected, "{args:?}");
        }
    }

    #[test]
    fn where_the_wrapped_command_starts() {
        check("timeout", "5 rm x", at(1));
        check("timeout", "-s KILL 5 rm x", at(3));
        check("timeout", "--signal=KILL 5 rm x", at(2));
        check("nice", "-n 5 rm", at(2));
        check("nice", "-n5 rm", at(1));
        check("nohup", "rm x", at(0));
        check("nohup", "", Unwrapped::Nothing);
        check("sudo", "-u root -- rm x", at(3));
        check("env", "A=1 -u B rm x", at(3));
        check("env", "-S rm", Unwrapped::Script("rm".to_owned()));
        check("command", "-v rm", Unwrapped::Nothing);
        check("command", "-p rm", at(1));
        check("taskset", "-p 3 1234", Unwrapped::Nothing);
        check("taskset", "3 rm", at(1));
        check(
            "xargs",
            "-n 1 rm",
            Unwrapped::Command {
                start: 2,
                input_arguments: true,
            },
        );
        check("bash", "-lc ls", Unwrapped::Script("ls".to_owned()));
        check(
            "bash",
            "-o pipefail -c ls",
            Unwrapped::Script("ls".to_owned()),
        );
        check("bash", "script.sh", Unwrapped::Nothing);
        check("eval", "rm x", Unwrapped::Script("rm x".to_owned()));
        check("trap", "ls EXIT", Unwrapped::Script("ls".to_owned()));
        check(
            "find",
            ". -exec rm {} ; -execdir ls +",
            Unwrapped::Commands(vec![2..4, 6..7]),
        );
        check("find", ". -exec", Unwrapped::Commands(vec![]));
        check("script", "-qc ls", Unwrapped::Script("ls".to_owned()));
        check(
            "script",
            "-q -c ls /dev/null",
            Unwrapped::Script("ls".to_owned()),
        );
        check("script", "--command=ls", Unwrapped::Script("ls".to_owned()));
        check("script", "-q", Unwrapped::Nothing);
        check("ls", "rm", Unwrapped::Nothing);
    }
}
