//! The disaster check (C1): a pure function over the command text that no approval can
//! override.
//!
//! The text is read by `clawsmith-shell`, the one bash parse, which yields every simple command
//! wherever it hides (lists, pipelines, subshells, substitutions, function bodies, strings handed
//! to a shell again, wrappers such as `env`, `timeout`, `xargs` or `find -exec`), every file
//! redirect, every function definition and whatever it could not read. This module only judges
//! those parts, in source order; the first rule that fires decides.
//!
//! A command *name* only known at run time (`$cmd -rf /`) is not guessed at. Text that does not
//! parse cleanly and mentions a blocked word fails closed (rule `unparseable`). Quoted text that
//! is only *printed* or *searched* (`echo "rm -rf /"`, `grep -r sudo docs`) is data, not a
//! command, and passes.

use clawsmith_shell::{
    Function, Part, Redirect, SimpleCommand, UnparsedReason, find_exec_commands, program_name,
};
use serde::Serialize;

/// How many times a string may be handed to a shell again (`bash -c "bash -c '…'"`) before the
/// check gives up and blocks.
pub use clawsmith_shell::MAX_NESTING;

/// The rules the check knows, by the name a verdict reports.
pub mod rule {
    /// `sudo`, `doas`, `su`, `pkexec`, `run0`.
    pub const PRIVILEGE_ESCALATION: &str = "privilege_escalation";
    /// `mkfs*`, `mke2fs`, `mkswap`, `wipefs`, `fdisk`, `parted`, `sgdisk`, …
    pub const DISK_FORMAT: &str = "disk_format";
    /// Writes to a block device or kernel memory (`dd of=/dev/sda`, `> /dev/nvme0n1`, `shred /dev/…`).
    pub const BLOCK_DEVICE_WRITE: &str = "block_device_write";
    /// Recursive delete (or move away) of `/`, `/*`, `~`, `$HOME` or a top-level system directory.
    pub const RECURSIVE_DELETE_ROOT: &str = "recursive_delete_root";
    /// Recursive `chmod`/`chown`/`chgrp` of `/` or a top-level system directory.
    pub const RECURSIVE_PERMISSION_ROOT: &str = "recursive_permission_root";
    /// `shutdown`, `reboot`, `halt`, `poweroff`, `init 0|6`, `systemctl poweroff|reboot|halt`, sysrq.
    pub const POWER_STATE: &str = "power_state";
    /// `kill -9 -1` and other signals to every process.
    pub const KILL_ALL_PROCESSES: &str = "kill_all_processes";
    /// A function that calls itself through a pipe or in the background (`:(){ :|:& };:`).
    pub const FORK_BOMB: &str = "fork_bomb";
    /// The text does not parse cleanly and mentions a blocked command: fail closed.
    pub const UNPARSEABLE: &str = "unparseable";
    /// Shell strings nested deeper than [`super::MAX_NESTING`].
    pub const NESTING_TOO_DEEP: &str = "nesting_too_deep";
}

/// Blocked or allowed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum VerdictKind {
    /// The command must not run.
    Blocked,
    /// No disaster rule matched.
    Allowed,
}

/// What the disaster check decided, serialized as `{"verdict":…,"rule":…,"reason":…}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CommandVerdict {
    /// `blocked` or `allowed`.
    pub verdict: VerdictKind,
    /// The rule that fired (one of [`rule`]), `None` when allowed.
    pub rule: Option<&'static str>,
    /// A sentence a person can read.
    pub reason: String,
}

impl CommandVerdict {
    /// Whether the command must not run.
    pub fn is_blocked(&self) -> bool {
        self.verdict == VerdictKind::Blocked
    }

    fn allowed() -> CommandVerdict {
        CommandVerdict {
            verdict: VerdictKind::Allowed,
            rule: None,
            reason: "no disaster rule matched".to_owned(),
        }
    }

    fn blocked(rule: &'static str, reason: impl Into<String>) -> CommandVerdict {
        CommandVerdict {
            verdict: VerdictKind::Blocked,
            rule: Some(rule),
            reason: reason.into(),
        }
    }
}

/// Checks `text` (one `bash -c` script) against every disaster rule.
pub fn check_command(text: &str) -> CommandVerdict {
    clawsmith_shell::parse(text)
        .parts()
        .iter()
        .find_map(check_part)
        .unwrap_or_else(CommandVerdict::allowed)
}

type Check = Option<CommandVerdict>;

/// Command words whose mere presence in unparseable text fails closed.
const BLOCKED_WORDS: &[&str] = &[
    "sudo",
    "doas",
    "su",
    "pkexec",
    "run0",
    "mkfs",
    "mke2fs",
    "mkswap",
    "wipefs",
    "fdisk",
    "sfdisk",
    "cfdisk",
    "parted",
    "gdisk",
    "sgdisk",
    "blkdiscard",
    "dd",
    "shred",
    "rm",
    "chmod",
    "chown",
    "chgrp",
    "shutdown",
    "reboot",
    "halt",
    "poweroff",
    "init",
    "telinit",
    "systemctl",
    "kill",
    "eval",
];

fn check_part(part: &Part) -> Check {
    match part {
        Part::Command(command) => check_simple_command(command),
        Part::Redirect(redirect) => check_redirect(redirect),
        Part::Function(function) => check_function(function),
        Part::Unparsed(unparsed) => match unparsed.reason {
            UnparsedReason::TooDeep => Some(CommandVerdict::blocked(
                rule::NESTING_TOO_DEEP,
                format!("shell strings nested more than {MAX_NESTING} levels deep"),
            )),
            // A syntax error, or a reason the parser may add later: text that names a disaster
            // program is refused rather than guessed at.
            _ => textual_fork_bomb(&unparsed.text).or_else(|| fail_closed(&unparsed.text)),
        },
    }
}

/// A command whose program is only known at run time is not guessed at.
fn check_simple_command(command: &SimpleCommand) -> Check {
    let program = command.program.as_deref()?;
    let args: Vec<&str> = command.args().iter().map(|w| w.text.as_str()).collect();
    check_simple(program, &args)
}

/// `> /dev/sda`, `>> /dev/nvme0n1`, `&> /dev/mem`, `> /proc/sysrq-trigger`.
fn check_redirect(redirect: &Redirect) -> Check {
    if !redirect.writes() {
        return None;
    }
    let target = &redirect.target.text;
    if is_block_device(target) {
        return Some(CommandVerdict::blocked(
            rule::BLOCK_DEVICE_WRITE,
            format!("redirects output onto the device {target}"),
        ));
    }
    (target == "/proc/sysrq-trigger")
        .then(|| CommandVerdict::blocked(rule::POWER_STATE, "writes to /proc/sysrq-trigger"))
}

/// A function that calls itself in a pipeline or in the background: `f(){ f|f& };f`.
fn check_function(function: &Function) -> Check {
    let Function {
        name,
        self_calls,
        forks,
        ..
    } = function;
    (*self_calls >= 2 || (*self_calls >= 1 && *forks)).then(|| {
        CommandVerdict::blocked(
            rule::FORK_BOMB,
            format!("function `{name}` calls itself recursively in parallel (fork bomb)"),
        )
    })
}

fn fail_closed(text: &str) -> Check {
    let word = text
        .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '-' || c == '.'))
        .map(|w| w.trim_matches('.'))
        .find(|w| BLOCKED_WORDS.contains(w) || w.starts_with("mkfs") || w.starts_with("mkfs."))?;
    Some(CommandVerdict::blocked(
        rule::UNPARSEABLE,
        format!("the command does not parse cleanly and mentions `{word}`; refusing to guess"),
    ))
}

/// The classic `:(){ :|:& };:` in any spacing, for text the parser chokes on (parsed text is
/// judged by its function definitions, so `echo ':(){ :|:& };:'` stays harmless).
fn textual_fork_bomb(text: &str) -> Check {
    let squeezed: String = text.chars().filter(|c| !c.is_whitespace()).collect();
    (squeezed.contains(":(){:|:&};:") || squeezed.contains(":(){:|:&}"))
        .then(|| CommandVerdict::blocked(rule::FORK_BOMB, "the classic fork bomb"))
}

/// `find / -delete`, `find / -exec rm -rf {} +`.
fn find_check(args: &[&str]) -> Check {
    let starts: Vec<&str> = args
        .iter()
        .take_while(|a| !a.starts_with('-') && **a != "(" && **a != "!")
        .copied()
        .collect();
    let destructive = args.contains(&"-delete");
    if destructive && let Some(start) = starts.iter().find(|s| is_protected_target(s)) {
        return Some(CommandVerdict::blocked(
            rule::RECURSIVE_DELETE_ROOT,
            format!("find -delete over {start}"),
        ));
    }
    for range in find_exec_commands(args) {
        let inner = &args[range];
        let Some(name) = inner.first() else { continue };
        let name = program_name(name);
        let per_file = inner[1..].contains(&"{}");
        if per_file && let Some(start) = starts.iter().find(|s| is_protected_target(s)) {
            let rule = match name {
                "rm" | "shred" | "unlink" => Some(rule::RECURSIVE_DELETE_ROOT),
                "chmod" | "chown" | "chgrp" => Some(rule::RECURSIVE_PERMISSION_ROOT),
                _ => None,
            };
            if let Some(rule) = rule {
                return Some(CommandVerdict::blocked(
                    rule,
                    format!("find -exec {name} over every file under {start}"),
                ));
            }
        }
        let mut inner_args: Vec<&str> = inner[1..].to_vec();
        // `{}` stands for every file found under the start points.
        if inner_args.contains(&"{}") {
            inner_args.extend(starts.iter().copied());
        }
        if let Some(found) = check_simple(name, &inner_args) {
            return Some(found);
        }
    }
    None
}

/// The rules that look at one command name and its (resolved) arguments.
fn check_simple(name: &str, args: &[&str]) -> Check {
    match name {
        "sudo" | "doas" | "su" | "pkexec" | "run0" | "sudoedit" => Some(CommandVerdict::blocked(
            rule::PRIVILEGE_ESCALATION,
            format!("`{name}` escalates privileges; commands run as the current user only"),
        )),
        _ if name.starts_with("mkfs")
            || matches!(
                name,
                "mke2fs"
                    | "mkswap"
                    | "mkntfs"
                    | "mkdosfs"
                    | "mkexfatfs"
                    | "wipefs"
                    | "fdisk"
                    | "sfdisk"
                    | "cfdisk"
                    | "parted"
                    | "gdisk"
                    | "sgdisk"
                    | "cgdisk"
                    | "blkdiscard"
                    | "hdparm"
            ) =>
        {
            Some(CommandVerdict::blocked(
                rule::DISK_FORMAT,
                format!("`{name}` formats or repartitions disks"),
            ))
        }
        "dd" => args
            .iter()
            .filter_map(|a| a.strip_prefix("of="))
            .find(|target| is_block_device(target))
            .map(|target| {
                CommandVerdict::blocked(
                    rule::BLOCK_DEVICE_WRITE,
                    format!("`dd` writes onto the device {target}"),
                )
            }),
        "shred" | "tee" | "cp" | "mv" | "truncate" | "install" | "cat" | "badblocks" => {
            if let Some(found) = args.iter().find(|a| is_block_device(a))
                && name != "cat"
            {
                return Some(CommandVerdict::blocked(
                    rule::BLOCK_DEVICE_WRITE,
                    format!("`{name}` writes onto the device {found}"),
                ));
            }
            if name == "mv" {
                let operands = operands(args);
                if let Some(target) = operands.iter().find(|a| is_protected_target(a)) {
                    return Some(CommandVerdict::blocked(
                        rule::RECURSIVE_DELETE_ROOT,
                        format!("`mv` moves away {target}"),
                    ));
                }
            }
            None
        }
        "rm" => check_rm(args),
        "chmod" | "chown" | "chgrp" => check_recursive_permission(name, args),
        "shutdown" | "reboot" | "halt" | "poweroff" | "kexec" => Some(CommandVerdict::blocked(
            rule::POWER_STATE,
            format!("`{name}` changes the machine's power state"),
        )),
        "init" | "telinit" => args
            .iter()
            .find(|a| matches!(**a, "0" | "6" | "1" | "s" | "S" | "single"))
            .map(|level| {
                CommandVerdict::blocked(
                    rule::POWER_STATE,
                    format!("`{name} {level}` changes the runlevel"),
                )
            }),
        "systemctl" | "loginctl" => args
            .iter()
            .find(|a| {
                matches!(
                    **a,
                    "poweroff"
                        | "reboot"
                        | "halt"
                        | "kexec"
                        | "soft-reboot"
                        | "suspend"
                        | "hibernate"
                        | "hybrid-sleep"
                        | "suspend-then-hibernate"
                        | "rescue"
                        | "emergency"
                )
            })
            .map(|verb| {
                CommandVerdict::blocked(
                    rule::POWER_STATE,
                    format!("`{name} {verb}` changes the machine's power state"),
                )
            }),
        "kill" | "pkill" | "killall" | "killall5" => check_kill(name, args),
        "find" => find_check(args),
        _ => None,
    }
}

fn check_rm(args: &[&str]) -> Check {
    let mut recursive = false;
    let mut no_preserve_root = false;
    let mut operands = Vec::new();
    let mut options_done = false;
    for arg in args {
        if options_done || !arg.starts_with('-') || *arg == "-" {
            operands.push(*arg);
            continue;
        }
        match *arg {
            "--" => options_done = true,
            "--recursive" => recursive = true,
            "--no-preserve-root" => no_preserve_root = true,
            long if long.starts_with("--") => {}
            short => recursive |= short[1..].contains('r') || short[1..].contains('R'),
        }
    }
    if no_preserve_root {
        return Some(CommandVerdict::blocked(
            rule::RECURSIVE_DELETE_ROOT,
            "`rm --no-preserve-root` exists only to delete /",
        ));
    }
    if !recursive {
        return None;
    }
    operands
        .iter()
        .find(|a| is_protected_target(a))
        .map(|target| {
            CommandVerdict::blocked(
                rule::RECURSIVE_DELETE_ROOT,
                format!("recursive `rm` of {target}"),
            )
        })
}

fn check_recursive_permission(name: &str, args: &[&str]) -> Check {
    let mut recursive = false;
    let mut operands = Vec::new();
    let mut options_done = false;
    for arg in args {
        if options_done || !arg.starts_with('-') || *arg == "-" {
            operands.push(*arg);
            continue;
        }
        match *arg {
            "--" => options_done = true,
            "--recursive" => recursive = true,
            long if long.starts_with("--") => {}
            // `chmod -r` removes read permission; only `-R` recurses.
            short => recursive |= short[1..].contains('R'),
        }
    }
    if !recursive {
        return None;
    }
    operands
        .iter()
        .find(|a| is_protected_target(a))
        .map(|target| {
            CommandVerdict::blocked(
                rule::RECURSIVE_PERMISSION_ROOT,
                format!("recursive `{name}` of {target}"),
            )
        })
}

/// `kill -9 -1`, `kill -KILL -1`, `kill -s KILL -1`, `kill -- -1`.
fn check_kill(name: &str, args: &[&str]) -> Check {
    if name == "killall5" {
        return Some(CommandVerdict::blocked(
            rule::KILL_ALL_PROCESSES,
            "`killall5` signals every process",
        ));
    }
    if name != "kill" {
        return None;
    }
    let mut i = 0;
    if let Some(first) = args.first() {
        if matches!(*first, "-s" | "-n" | "--signal") {
            i = 2;
        } else if *first == "--" {
            i = 1;
        } else if first.starts_with('-') && first.len() > 1 {
            // The first dash word is the signal (`-9`, `-KILL`, `-SIGKILL`).
            i = 1;
        }
    }
    let targets = args.get(i..).unwrap_or(&[]);
    let targets: Vec<&&str> = targets.iter().filter(|t| **t != "--").collect();
    targets.iter().any(|t| **t == "-1").then(|| {
        CommandVerdict::blocked(
            rule::KILL_ALL_PROCESSES,
            "`kill … -1` signals every process the user can reach",
        )
    })
}

fn operands<'a>(args: &[&'a str]) -> Vec<&'a str> {
    let mut out = Vec::new();
    let mut options_done = false;
    for arg in args {
        if options_done || !arg.starts_with('-') || *arg == "-" {
            out.push(*arg);
        } else if *arg == "--" {
            options_done = true;
        }
    }
    out
}

/// Top-level directories whose recursive removal or permission change wrecks the system.
const SYSTEM_DIRECTORIES: &[&str] = &[
    "bin",
    "boot",
    "dev",
    "etc",
    "home",
    "lib",
    "lib32",
    "lib64",
    "libx32",
    "media",
    "mnt",
    "opt",
    "proc",
    "root",
    "run",
    "sbin",
    "srv",
    "sys",
    "usr",
    "var",
    "snap",
    "tmp",
    "nix",
    "Applications",
    "Library",
    "System",
    "Users",
    "Volumes",
    "private",
];

/// `/`, `/*`, `~`, `~/`, `~/*`, `$HOME`, `${HOME}/*`, `/usr`, `/etc/*`, `/home/../`, …
fn is_protected_target(target: &str) -> bool {
    let trimmed = target.trim();
    // `${HOME:?}`, `${HOME:-/root}`, `${HOME%/}` still name the home directory.
    let normalized;
    let trimmed = match trimmed
        .strip_prefix("${HOME")
        .and_then(|r| r.split_once('}'))
    {
        Some((_, rest)) => {
            normalized = format!("$HOME{rest}");
            normalized.as_str()
        }
        None => trimmed,
    };
    for home in ["~", "$HOME", "${HOME}"] {
        if let Some(rest) = trimmed.strip_prefix(home)
            && is_only_glob_or_slashes(rest)
        {
            return true;
        }
    }
    if !trimmed.starts_with('/') {
        return false;
    }
    // Normalise lexically: `//`, `/./`, `/x/..`.
    let mut parts: Vec<&str> = Vec::new();
    for part in trimmed.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            other => parts.push(other),
        }
    }
    match parts.as_slice() {
        [] => true,
        [only] => is_glob_only(only) || SYSTEM_DIRECTORIES.contains(only),
        [top, rest] => SYSTEM_DIRECTORIES.contains(top) && is_glob_only(rest),
        _ => false,
    }
}

fn is_only_glob_or_slashes(rest: &str) -> bool {
    rest.split('/')
        .all(|p| p.is_empty() || p == "." || is_glob_only(p))
}

fn is_glob_only(part: &str) -> bool {
    !part.is_empty()
        && part.chars().all(|c| matches!(c, '*' | '?' | '.'))
        && part != "."
        && part != ".."
        || part == ".*"
}

/// Block devices and kernel memory: `/dev/sda`, `/dev/nvme0n1p2`, `/dev/mmcblk0`, `/dev/mem`, …
fn is_block_device(target: &str) -> bool {
    let Some(device) = target.strip_prefix("/dev/") else {
        return false;
    };
    const PREFIXES: &[&str] = &[
        "sd", "hd", "vd", "xvd", "nvme", "mmcblk", "loop", "dm-", "md", "mapper/", "disk/", "sr",
        "nbd", "zram", "rbd", "mtdblock", "ubd", "bcache", "fd0", "fd1", "root",
    ];
    matches!(device, "mem" | "kmem" | "port")
        || PREFIXES.iter().any(|p| {
            device.starts_with(p) && device.len() > p.len()
                || (p.ends_with('/') && device.starts_with(p))
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[track_caller]
    fn check(text: &str, expected: Option<&str>) {
        let verdict = check_command(text);
        assert_eq!(verdict.rule, expected, "{text:?}: {verdict:?}");
    }

    #[test]
    fn issue_examples() {
        check("sudo ls", Some(rule::PRIVILEGE_ESCALATION));
        check("rm -rf /", Some(rule::RECURSIVE_DELETE_ROOT));
        check("echo \"rm -rf /\"", None);
        check("grep -r sudo docs", None);
        check("rm -rf ./build target", None);
        check("git commit -m \"fix shutdown\"", None);
        check("cat /dev/null", None);
        check(":(){ :|:& };:", Some(rule::FORK_BOMB));
    }

    #[test]
    fn parser_crashers_are_defused() {
        // tree-sitter-bash 0.25 segfaults on these when given them raw.
        check("''{\u{E01D1}", None);
        check("echo {\u{E0100}", None);
        check("{\u{F0000}; sudo id", Some(rule::PRIVILEGE_ESCALATION));
    }

    #[test]
    fn verdict_serializes_for_the_cli() {
        let json = serde_json::to_value(check_command("sudo true")).unwrap();
        assert_eq!(json["verdict"], "blocked");
        assert_eq!(json["rule"], "privilege_escalation");
        let json = serde_json::to_value(check_command("true")).unwrap();
        assert_eq!(json["verdict"], "allowed");
        assert!(json["rule"].is_null());
    }
}
