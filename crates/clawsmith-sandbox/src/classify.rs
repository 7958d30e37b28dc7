//! The disaster check (SPEC C1): a pure function over the command text that no approval can
//! override.
//!
//! The text is parsed with tree-sitter-bash and every simple command is examined wherever it
//! hides: lists (`&&`, `||`, `;`), pipelines, subshells, `{ …; }` groups, `$(…)` and backticks,
//! process substitutions, `if`/`for`/`while`/`case` bodies and functions. Strings handed to a
//! shell again (`bash -c '…'`, `eval …`, `echo … | sh`, here-strings and here-documents fed to a
//! shell) are parsed again, up to [`MAX_NESTING`] levels. Wrappers that run their arguments as a
//! command (`env`, `nohup`, `nice`, `timeout`, `xargs`, `command`, `exec`, `time`, `stdbuf`,
//! `setsid`, `chroot`, `busybox`, `find -exec` …) are peeled off first.
//!
//! Words are resolved statically: quotes and backslashes are removed (`\rm`, `"rm"`, `r''m` all
//! name `rm`), and `/bin/rm` is reduced to its base name. Expansions stay as their source text so
//! `"$HOME"` and `${HOME}` can be recognised as targets, while a command *name* that is only known
//! at run time (`$cmd -rf /`) is not guessed at.
//!
//! Text that does not parse cleanly and mentions a blocked word fails closed (rule
//! `unparseable`). Quoted text that is only *printed* or *searched* (`echo "rm -rf /"`,
//! `grep -r sudo docs`) is data, not a command, and passes.

use serde::Serialize;
use tree_sitter::{Node, Parser};

/// How many times a string may be handed to a shell again (`bash -c "bash -c '…'"`) before the
/// check gives up and blocks.
pub const MAX_NESTING: usize = 8;

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
    match check_script(text, 0) {
        Some(blocked) => blocked,
        None => CommandVerdict::allowed(),
    }
}

type Check = Option<CommandVerdict>;

const SHELLS: &[&str] = &[
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

fn check_script(text: &str, depth: usize) -> Check {
    if depth > MAX_NESTING {
        return Some(CommandVerdict::blocked(
            rule::NESTING_TOO_DEEP,
            format!("shell strings nested more than {MAX_NESTING} levels deep"),
        ));
    }
    let sanitized = parser_safe(text);
    let text = sanitized.as_ref();
    let mut parser = Parser::new();
    let parsed = parser
        .set_language(&tree_sitter_bash::LANGUAGE.into())
        .ok()
        .and_then(|()| parser.parse(text, None));
    let Some(tree) = parsed else {
        return fail_closed(text);
    };
    let root = tree.root_node();
    let walker = Walker {
        source: text.as_bytes(),
        depth,
    };
    if let Some(found) = walker.walk(root) {
        return Some(found);
    }
    if root.has_error() {
        return textual_fork_bomb(text).or_else(|| fail_closed(text));
    }
    None
}

/// Characters from U+30000 up (unassigned planes, tags, variation selectors, private use) are
/// replaced by `x` before parsing: tree-sitter-bash 0.25 reads out of bounds on some of them
/// (`{` followed by U+E01D1 crashes the process). No shell treats them specially, and any
/// single non-blank character keeps word boundaries where bash sees them, so verdicts do not
/// change: a word containing one is not a blocked name either way.
fn parser_safe(text: &str) -> std::borrow::Cow<'_, str> {
    if text.chars().all(|c| (c as u32) < 0x30000) {
        return std::borrow::Cow::Borrowed(text);
    }
    std::borrow::Cow::Owned(
        text.chars()
            .map(|c| if (c as u32) < 0x30000 { c } else { 'x' })
            .collect(),
    )
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

struct Walker<'s> {
    source: &'s [u8],
    depth: usize,
}

/// A word after quote removal. `dynamic` is set when part of it is only known at run time.
#[derive(Debug, Clone)]
struct Word {
    text: String,
    dynamic: bool,
}

impl Walker<'_> {
    fn text(&self, node: Node<'_>) -> &str {
        node.utf8_text(self.source).unwrap_or("")
    }

    /// Visits every node; each simple command, redirect and function is checked.
    fn walk(&self, node: Node<'_>) -> Check {
        match node.kind() {
            "command" => {
                if let Some(found) = self.check_command_node(node) {
                    return Some(found);
                }
                if let Some(found) = self.check_shell_stdin_redirect(node) {
                    return Some(found);
                }
            }
            "file_redirect" => {
                if let Some(found) = self.check_redirect(node) {
                    return Some(found);
                }
            }
            "function_definition" => {
                if let Some(found) = self.check_function(node) {
                    return Some(found);
                }
            }
            "pipeline" => {
                if let Some(found) = self.check_pipe_into_shell(node) {
                    return Some(found);
                }
            }
            "redirected_statement" => {
                if let Some(found) = self.check_shell_stdin_redirect(node) {
                    return Some(found);
                }
            }
            _ => {}
        }
        let mut cursor = node.walk();
        for child in node.children(&mut cursor) {
            if let Some(found) = self.walk(child) {
                return Some(found);
            }
        }
        None
    }

    fn resolve(&self, node: Node<'_>) -> Word {
        match node.kind() {
            "word" | "number" | "command_name" => {
                if node.kind() == "command_name"
                    && let Some(inner) = node.named_child(0)
                {
                    return self.resolve(inner);
                }
                Word {
                    text: unescape_word(self.text(node)),
                    dynamic: false,
                }
            }
            "raw_string" => {
                let raw = self.text(node);
                Word {
                    text: raw
                        .strip_prefix('\'')
                        .and_then(|r| r.strip_suffix('\''))
                        .unwrap_or(raw)
                        .to_owned(),
                    dynamic: false,
                }
            }
            "ansi_c_string" => {
                let raw = self.text(node);
                let inner = raw
                    .strip_prefix("$'")
                    .and_then(|r| r.strip_suffix('\''))
                    .unwrap_or(raw);
                Word {
                    text: unescape_ansi_c(inner),
                    dynamic: false,
                }
            }
            "string" | "translated_string" | "concatenation" => {
                let mut word = Word {
                    text: String::new(),
                    dynamic: false,
                };
                let mut cursor = node.walk();
                for child in node.children(&mut cursor) {
                    match child.kind() {
                        "\"" | "$\"" => {}
                        "string_content" => word
                            .text
                            .push_str(&unescape_double_quoted(self.text(child))),
                        "simple_expansion" | "expansion" => {
                            word.text.push_str(self.text(child));
                            word.dynamic = true;
                        }
                        _ if child.is_named() => {
                            let inner = self.resolve(child);
                            word.text.push_str(&inner.text);
                            word.dynamic |= inner.dynamic;
                        }
                        _ => word.text.push_str(self.text(child)),
                    }
                }
                word
            }
            _ => Word {
                text: self.text(node).to_owned(),
                dynamic: true,
            },
        }
    }

    /// The argv of a simple command: name then arguments, assignments skipped.
    fn argv(&self, node: Node<'_>) -> Vec<Word> {
        let mut argv = Vec::new();
        let mut cursor = node.walk();
        let mut seen_name = false;
        for child in node.children(&mut cursor) {
            match child.kind() {
                "command_name" => {
                    seen_name = true;
                    argv.push(self.resolve(child));
                }
                "variable_assignment"
                | "file_redirect"
                | "herestring_redirect"
                | "heredoc_redirect" => {}
                _ if seen_name && child.is_named() => argv.push(self.resolve(child)),
                _ => {}
            }
        }
        argv
    }

    fn check_command_node(&self, node: Node<'_>) -> Check {
        let argv = self.argv(node);
        self.check_argv(&argv)
    }

    fn check_argv(&self, argv: &[Word]) -> Check {
        let first = argv.first()?;
        let looked_up = looked_up_name(&first.text);
        let name = match &looked_up {
            Some(name) => command_base_name(name),
            None if first.dynamic => return None,
            None => command_base_name(&first.text),
        };
        let args = &argv[1..];
        let texts: Vec<&str> = args.iter().map(|w| w.text.as_str()).collect();
        if let Some(found) = check_simple(name, &texts) {
            return Some(found);
        }
        match self.unwrap_wrapper(name, args) {
            Unwrapped::Command(inner) => self.check_argv(inner),
            Unwrapped::Script(script) => check_script(&script, self.depth + 1),
            Unwrapped::Nothing => None,
        }
    }

    /// Peels off wrappers that run their arguments as a command or a script.
    fn unwrap_wrapper<'w>(&self, name: &str, args: &'w [Word]) -> Unwrapped<'w> {
        let texts: Vec<&str> = args.iter().map(|w| w.text.as_str()).collect();
        if SHELLS.contains(&name) {
            return match shell_script_argument(&texts) {
                Some(index) => Unwrapped::Script(args[index].text.clone()),
                None => Unwrapped::Nothing,
            };
        }
        let skip = match name {
            "eval" => return Unwrapped::Script(texts.join(" ")),
            // `alias x='rm -rf /'` and `trap 'rm -rf /' EXIT` store scripts that run later.
            "alias" => {
                let bodies: Vec<&str> = texts
                    .iter()
                    .filter_map(|t| t.split_once('=').map(|(_, body)| body))
                    .collect();
                return Unwrapped::Script(bodies.join("\n"));
            }
            "trap" => {
                return match texts.iter().find(|t| !t.starts_with('-')) {
                    Some(script) => Unwrapped::Script((*script).to_owned()),
                    None => Unwrapped::Nothing,
                };
            }
            "env" => {
                // `env -S 'cmd args'` / `--split-string=…` hand a string to be split.
                let mut i = 0;
                while i < texts.len() {
                    let t = texts[i];
                    if t == "-S" || t == "--split-string" {
                        return match texts.get(i + 1) {
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
                i
            }
            "nohup" | "builtin" | "unbuffer" | "caffeinate" | "doas-nopass" | "fakeroot"
            | "proxychains" | "proxychains4" | "torsocks" | "firejail" | "catchsegv"
            | "valgrind" | "strace" | "ltrace" | "gdb" | "sg" => skip_options(&texts, &[], 0),
            "time" => skip_options(&texts, &["-f", "--format", "-o", "--output"], 0),
            "command" => {
                if texts
                    .iter()
                    .take_while(|t| t.starts_with('-'))
                    .any(|t| t.contains('v') || t.contains('V'))
                {
                    // `command -v rm` only looks the name up.
                    return Unwrapped::Nothing;
                }
                skip_options(&texts, &[], 0)
            }
            "exec" => skip_options(&texts, &["-a"], 0),
            "setsid" => skip_options(&texts, &[], 0),
            "nice" => skip_options(&texts, &["-n", "--adjustment"], 0),
            "ionice" => skip_options(&texts, &["-c", "-n", "-t", "--class", "--classdata"], 0),
            "chrt" => skip_options(&texts, &["-T", "-P", "-D"], 1),
            "taskset" => {
                if texts
                    .first()
                    .is_some_and(|t| t.starts_with('-') && t.contains('p'))
                {
                    return Unwrapped::Nothing;
                }
                skip_options(&texts, &[], 1)
            }
            "timeout" => skip_options(&texts, &["-s", "--signal", "-k", "--kill-after"], 1),
            "stdbuf" => skip_options(
                &texts,
                &["-i", "-o", "-e", "--input", "--output", "--error"],
                0,
            ),
            "chroot" => skip_options(&texts, &["--userspec", "--groups"], 1),
            "flock" => skip_options(
                &texts,
                &["-w", "--timeout", "-E", "--conflict-exit-code"],
                1,
            ),
            "xargs" => skip_options(
                &texts,
                &[
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
                ],
                0,
            ),
            "busybox" | "toybox" => 0,
            "watch" => {
                let i = skip_options(&texts, &["-n", "--interval", "-d", "--differences"], 0);
                return if i < texts.len() {
                    Unwrapped::Script(texts[i..].join(" "))
                } else {
                    Unwrapped::Nothing
                };
            }
            "su" | "runuser" => {
                // `su` itself is blocked above; `runuser -c` is treated the same way.
                return match texts.iter().position(|t| *t == "-c" || *t == "--command") {
                    Some(i) if i + 1 < texts.len() => Unwrapped::Script(texts[i + 1].to_owned()),
                    _ => Unwrapped::Nothing,
                };
            }
            _ => return Unwrapped::Nothing,
        };
        if skip < args.len() {
            Unwrapped::Command(&args[skip..])
        } else {
            Unwrapped::Nothing
        }
    }

    /// `> /dev/sda`, `>> /dev/nvme0n1`, `&> /dev/mem`, `> /proc/sysrq-trigger`.
    fn check_redirect(&self, node: Node<'_>) -> Check {
        let mut cursor = node.walk();
        let mut writes = false;
        for child in node.children(&mut cursor) {
            if !child.is_named() {
                let op = self.text(child);
                writes |= op.contains('>');
            }
        }
        if !writes {
            return None;
        }
        let destination = node.child_by_field_name("destination")?;
        let target = self.resolve(destination);
        if is_block_device(&target.text) {
            return Some(CommandVerdict::blocked(
                rule::BLOCK_DEVICE_WRITE,
                format!("redirects output onto the device {}", target.text),
            ));
        }
        if target.text == "/proc/sysrq-trigger" {
            return Some(CommandVerdict::blocked(
                rule::POWER_STATE,
                "writes to /proc/sysrq-trigger",
            ));
        }
        None
    }

    /// A function that calls itself in a pipeline or in the background: `f(){ f|f& };f`.
    fn check_function(&self, node: Node<'_>) -> Check {
        let name = node.child_by_field_name("name").map(|n| self.text(n))?;
        let body = node.child_by_field_name("body")?;
        let mut calls = 0;
        let mut piped_or_backgrounded = false;
        self.count_calls(body, name, &mut calls, &mut piped_or_backgrounded, false);
        (calls >= 2 || (calls >= 1 && piped_or_backgrounded)).then(|| {
            CommandVerdict::blocked(
                rule::FORK_BOMB,
                format!("function `{name}` calls itself recursively in parallel (fork bomb)"),
            )
        })
    }

    fn count_calls(
        &self,
        node: Node<'_>,
        name: &str,
        calls: &mut usize,
        parallel: &mut bool,
        in_pipeline: bool,
    ) {
        if node.kind() == "command"
            && let Some(first) = self.argv(node).first()
            && first.text == name
        {
            *calls += 1;
            let backgrounded = node
                .next_sibling()
                .is_some_and(|s| !s.is_named() && self.text(s) == "&");
            *parallel |= in_pipeline || backgrounded;
        }
        let in_pipeline = in_pipeline || node.kind() == "pipeline";
        if !node.is_named() && self.text(node) == "&" {
            *parallel = true;
        }
        let mut cursor = node.walk();
        for child in node.children(&mut cursor) {
            self.count_calls(child, name, calls, parallel, in_pipeline);
        }
    }

    /// `echo 'rm -rf /' | sh`: static text printed into a shell is a script.
    fn check_pipe_into_shell(&self, node: Node<'_>) -> Check {
        let mut cursor = node.walk();
        let stages: Vec<Node<'_>> = node.named_children(&mut cursor).collect();
        for pair in stages.windows(2) {
            let (Some(producer), Some(consumer)) = (as_command(pair[0]), as_command(pair[1]))
            else {
                continue;
            };
            let consumer_argv = self.argv(consumer);
            let produced = self.static_output(producer);
            if let (Some(first), Some(produced)) = (consumer_argv.first(), &produced)
                && command_base_name(&first.text) == "xargs"
            {
                // `echo / | xargs rm -rf`: xargs appends what it reads to its command.
                let mut argv = consumer_argv.clone();
                argv.extend(produced.split_whitespace().map(|t| Word {
                    text: t.to_owned(),
                    dynamic: false,
                }));
                if let Some(found) = self.check_argv(&argv) {
                    return Some(found);
                }
            }
            if !self.is_bare_shell(consumer) {
                continue;
            }
            let argv = self.argv(producer);
            let Some(first) = argv.first() else { continue };
            let producer_name = command_base_name(&first.text);
            if matches!(producer_name, "echo" | "printf" | "cat") {
                let script: Vec<&str> = argv[1..]
                    .iter()
                    .map(|w| w.text.as_str())
                    .filter(|t| !t.starts_with('-'))
                    .collect();
                let script = script.join(" ").replace("\\n", "\n");
                if let Some(found) = check_script(&script, self.depth + 1) {
                    return Some(found);
                }
            }
        }
        None
    }

    /// `sh <<< 'rm -rf /'` and `bash <<EOF … EOF`: the redirect hangs either on the
    /// `redirected_statement` around the command or on the command itself.
    fn check_shell_stdin_redirect(&self, node: Node<'_>) -> Check {
        let command = match node.kind() {
            "command" => node,
            _ => as_command(node.child_by_field_name("body")?)?,
        };
        if !self.is_bare_shell(command) {
            return None;
        }
        let mut cursor = node.walk();
        for child in node.children(&mut cursor) {
            let script = match child.kind() {
                "herestring_redirect" => child
                    .named_child(0)
                    .map(|n| self.resolve(n).text)
                    .unwrap_or_default(),
                "heredoc_redirect" => {
                    let mut inner = child.walk();
                    child
                        .children(&mut inner)
                        .filter(|c| c.kind() == "heredoc_body")
                        .map(|c| self.text(c).to_owned())
                        .collect::<Vec<_>>()
                        .join("\n")
                }
                _ => continue,
            };
            if let Some(found) = check_script(&script, self.depth + 1) {
                return Some(found);
            }
        }
        None
    }

    /// What `echo`/`printf` with static arguments prints, roughly.
    fn static_output(&self, producer: Node<'_>) -> Option<String> {
        let argv = self.argv(producer);
        let first = argv.first()?;
        if !matches!(command_base_name(&first.text), "echo" | "printf") {
            return None;
        }
        let words: Vec<&str> = argv[1..]
            .iter()
            .map(|w| w.text.as_str())
            .filter(|t| !t.starts_with('-'))
            .collect();
        Some(words.join(" ").replace("\\n", "\n"))
    }

    /// A shell reading its script from standard input (no `-c`, no script file).
    fn is_bare_shell(&self, command: Node<'_>) -> bool {
        let argv = self.argv(command);
        let Some(first) = argv.first() else {
            return false;
        };
        let name = command_base_name(&first.text);
        SHELLS.contains(&name) && argv[1..].iter().all(|w| w.text.starts_with('-'))
    }
}

enum Unwrapped<'w> {
    Command(&'w [Word]),
    Script(String),
    Nothing,
}

fn as_command(node: Node<'_>) -> Option<Node<'_>> {
    match node.kind() {
        "command" => Some(node),
        "redirected_statement" => node.child_by_field_name("body").and_then(as_command),
        _ => None,
    }
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

/// Index of the first non-option argument, skipping options that take a value (`with_value`)
/// and then `positional` leading operands (e.g. the duration of `timeout`).
fn skip_options(args: &[&str], with_value: &[&str], positional: usize) -> usize {
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
    i + positional
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
    let mut i = 0;
    while i < args.len() {
        if matches!(args[i], "-exec" | "-execdir" | "-ok" | "-okdir") {
            let end = args[i + 1..]
                .iter()
                .position(|a| *a == ";" || *a == "+")
                .map_or(args.len(), |p| i + 1 + p);
            let inner = &args[i + 1..end];
            if let Some(name) = inner.first() {
                let name = command_base_name(name);
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
            i = end;
        }
        i += 1;
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

/// `$(which rm)`, `` `command -v rm` ``, `$(type -P rm)`: the name looked up.
fn looked_up_name(text: &str) -> Option<String> {
    let inner = text
        .strip_prefix("$(")
        .and_then(|t| t.strip_suffix(')'))
        .or_else(|| text.strip_prefix('`').and_then(|t| t.strip_suffix('`')))?;
    let words: Vec<&str> = inner.split_whitespace().collect();
    match words.as_slice() {
        ["which" | "whereis", name] | ["command", "-v" | "-V", name] => Some(unescape_word(name)),
        ["type", "-P" | "-p" | "-fP" | "-Pf", name] => Some(unescape_word(name)),
        _ => None,
    }
}

/// `/usr/bin/rm` → `rm`, `\rm` → `rm` (the backslash is gone after unescaping). A relative path
/// (`./init`) names a program of the workspace, not the system's, and is kept whole.
fn command_base_name(name: &str) -> &str {
    if name.starts_with('/') {
        name.rsplit('/').next().unwrap_or(name)
    } else {
        name
    }
}

fn unescape_word(raw: &str) -> String {
    let mut out = String::with_capacity(raw.len());
    let mut chars = raw.chars();
    while let Some(c) = chars.next() {
        if c == '\\' {
            match chars.next() {
                Some('\n') | None => {}
                Some(next) => out.push(next),
            }
        } else {
            out.push(c);
        }
    }
    out
}

fn unescape_double_quoted(raw: &str) -> String {
    let mut out = String::with_capacity(raw.len());
    let mut chars = raw.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\\' && matches!(chars.peek(), Some('"' | '\\' | '$' | '`' | '\n')) {
            if let Some(next) = chars.next()
                && next != '\n'
            {
                out.push(next);
            }
        } else {
            out.push(c);
        }
    }
    out
}

fn unescape_ansi_c(raw: &str) -> String {
    let mut out = String::with_capacity(raw.len());
    let mut chars = raw.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('n') => out.push('\n'),
            Some('t') => out.push('\t'),
            Some('x') => {
                let mut hex = String::new();
                while hex.len() < 2 && chars.peek().is_some_and(char::is_ascii_hexdigit) {
                    hex.extend(chars.next());
                }
                if let Some(ch) = u32::from_str_radix(&hex, 16).ok().and_then(char::from_u32) {
                    out.push(ch);
                }
            }
            Some(other) => out.push(other),
            None => {}
        }
    }
    out
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
