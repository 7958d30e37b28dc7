//! # clawsmith-shell
//!
//! The one bash parse of clawsmith. [`parse`] reads a `bash -c` script with tree-sitter-bash and
//! yields, in source order, the [`Part`]s a judge needs: every [`SimpleCommand`] the script would
//! run, every file [`Redirect`], every [`Function`] definition, and every piece of text it could
//! not read ([`Unparsed`]). Two judges read it: the permission rules of `clawsmith-security`
//! (`deny run_command(rm *)`) and the disaster check of `clawsmith-sandbox` (`rm -rf /`). Before
//! this crate each had its own reading, and the naive one missed `\rm x`, `FOO=1 rm x` and
//! `bash -c 'rm x'`; now both see the same commands.
//!
//! ## Where commands hide
//! Simple commands are found through lists (`&&`, `||`, `;`), pipelines, subshells, `{ …; }`
//! groups, `$(…)` and backticks, process substitutions, `if`/`for`/`while`/`case` bodies,
//! functions and declarations (`export A=$(…)`). Text handed to a shell again is parsed again,
//! up to [`MAX_NESTING`] levels: `bash -c '…'`, `eval …`, `trap '…' EXIT`, `alias x='…'`,
//! `env -S '…'`, `su -c '…'`, `watch …`, static text piped into a shell (`echo '…' | sh`), and
//! here-strings and here-documents fed to one (`sh <<< '…'`). Wrappers that run their arguments
//! as a command (`env`, `nohup`, `nice`, `timeout`, `xargs`, `sudo`, `command`, `builtin`,
//! `exec`, `time`, `stdbuf`, `setsid`, `chroot`, `busybox`, `find -exec` …) yield both the
//! wrapper and the command they run; the wrapper table in `wrapper.rs` says how many option
//! values and operands each one takes before its command.
//!
//! ## Words
//! Words are resolved statically: quotes and backslashes are removed (`\rm`, `"rm"`, `r''m` all
//! read `rm`); leading assignments (`FOO=1 rm x`) are kept apart from the words. Expansions stay
//! as their source text and mark the word [`Word::dynamic`], so `"$HOME"` can be recognised as a
//! target while a command *name* only known at run time (`$cmd -rf /`) is not guessed at:
//! [`SimpleCommand::program`] is `None` for it. `/bin/rm` runs the program `rm`, and so do
//! `$(which rm)` and `` `command -v rm` ``.
//!
//! ## Programs the text does not name
//! A command records *why* what it runs cannot be known from the text
//! ([`SimpleCommand::unknown_program`], an [`UnknownProgram`]): a variable, substitution,
//! parameter expansion (`rm${IFS}f`, `"${a[@]}"`), glob or brace expansion in the command word;
//! the `{}` of `find -exec` or the replace string of `xargs -I` as the name; a shell given a
//! script file (`sh f`, `sh <(…)`, `source f`), its standard input (`curl … | sh`, `sh < f`) or
//! what `xargs` reads; `alias`; `script` without `-c`. Strings handed to a shell again are
//! parsed again, so `sh -c "$x"` and `eval $x` yield a command `$x` whose name is a variable.
//! Both judges read this one fact: the permission rules match such a command against every
//! deny and ask rule.
//!
//! ## Fail closed
//! Text tree-sitter cannot parse cleanly (a syntax error anywhere in the script or in a nested
//! one) and scripts nested too deep are reported as [`Unparsed`] parts, after whatever could be
//! read. A caller must treat a script that is not [`Script::is_complete`] as "the parse does not
//! know everything this would run": the permission rules never allow such a script, the disaster
//! check refuses it when it mentions a blocked word.
//!
//! ## What this crate does not know
//! Nothing about policy: which commands are dangerous, which rules match, what a user allowed.
//! It runs nothing, reads no file and no environment, so `$PATH`, aliases of the user's shell,
//! functions defined elsewhere and the contents of `script.sh` in `bash script.sh` are beyond
//! it. Arguments that only exist at run time (what `xargs` reads, what `$X` expands to) are
//! marked, not invented.
#![deny(missing_docs)]

mod walk;
mod word;
mod wrapper;

pub use word::program_name;
pub use wrapper::find_exec_commands;

/// How many times a string may be handed to a shell again (`bash -c "bash -c '…'"`) before the
/// parse gives up and reports the rest as [`UnparsedReason::TooDeep`].
pub const MAX_NESTING: usize = 8;

/// Parses `text`, one `bash -c` script, into the parts it would run.
pub fn parse(text: &str) -> Script {
    let mut parts = Vec::new();
    walk::parse_into(text, 0, &mut parts);
    Script { parts }
}

/// What [`parse`] found, in source order (a nested script's parts where it is handed over).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Script {
    parts: Vec<Part>,
}

/// One thing a script does that a judge may care about. Deliberately exhaustive: a new kind of
/// part must make every judge decide what it means.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Part {
    /// A simple command the script runs (a wrapper and the command it wraps are two parts).
    Command(SimpleCommand),
    /// A file redirect (`> /dev/sda`, `2>&1`, `< input`).
    Redirect(Redirect),
    /// A function definition.
    Function(Function),
    /// Text that could not be read; the parse is incomplete.
    Unparsed(Unparsed),
}

/// A word after quote removal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Word {
    /// The resolved text; expansions (`$HOME`, `$(…)`) are kept as their source text.
    pub text: String,
    /// Whether part of the word is only known at run time.
    pub dynamic: bool,
}

/// One simple command: `FOO=1 rm -rf x` has the assignment `FOO=1` and the words `rm -rf x`.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct SimpleCommand {
    /// Leading variable assignments (`FOO=1`), kept apart from the words.
    pub assignments: Vec<Word>,
    /// The command name and its arguments; empty for a statement of only assignments.
    pub words: Vec<Word>,
    /// The program the name runs: `rm` for `rm`, `\rm`, `/bin/rm` and `$(which rm)`; a relative
    /// path (`./init`) stays whole. `None` when the name is only known at run time or absent.
    pub program: Option<String>,
    /// Why what this command runs cannot be known from the text, when it cannot: its name is
    /// only known at run time (`$c f`, `rm${IFS}f`, `{rm,f}`; `program` is then `None`), or it
    /// hands a shell a script the text does not hold (`source f`, `curl … | sh`, `script`).
    /// A judge must fail closed on such a command.
    pub unknown_program: Option<UnknownProgram>,
    /// More arguments are appended at run time (the command `xargs` runs gets what it reads).
    pub input_arguments: bool,
}

/// A file redirect.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Redirect {
    /// The operator as written: `>`, `>>`, `&>`, `>&`, `<`, `>|`, …
    pub operator: String,
    /// Where it points (a file, or a descriptor number for `2>&1`).
    pub target: Word,
}

/// A function definition and how its body calls the function itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Function {
    /// The function's name.
    pub name: String,
    /// How many commands in the body are named after the function.
    pub self_calls: usize,
    /// Whether the body runs something in parallel: a self call in a pipeline or in the
    /// background, or anything backgrounded with `&`.
    pub forks: bool,
}

/// Why the program a command runs cannot be known from the text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum UnknownProgram {
    /// `$c f`: a variable in the command word.
    Variable,
    /// `"$(echo rm)" f`, `` `x` f ``: a command substitution in the command word.
    CommandSubstitution,
    /// `rm${IFS}f`, `"${a[@]}"`: a parameter expansion in the command word.
    ParameterExpansion,
    /// `{rm,f}`, `/bin/r?`, `$((…))`: another expansion in the command word.
    Expansion,
    /// `find . -exec {} \;`, `xargs -I X X`: a name the wrapper fills in at run time.
    Placeholder,
    /// `source f`, `. f`, `sh f`, `sh <(…)`: a script file, whose content the text does not hold.
    ScriptFile,
    /// `curl … | sh`, `sh < f`: a shell reading its script from standard input.
    StandardInput,
    /// `xargs sh -c`: a shell given its script from what `xargs` reads.
    InputArguments,
    /// `alias ls=rm`, `hash -p /bin/rm ls`, `enable -f lib.so x`: a later name runs something
    /// else than its text says.
    NameBinding,
    /// `script` without `-c` runs the user's shell, reading what it is fed.
    ScriptWithoutCommand,
}

/// Text the parse could not read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unparsed {
    /// The script (top-level or nested) it belongs to.
    pub text: String,
    /// Why it could not be read.
    pub reason: UnparsedReason,
}

/// Why text could not be read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum UnparsedReason {
    /// tree-sitter-bash did not parse it cleanly.
    Syntax,
    /// It was handed to a shell more than [`MAX_NESTING`] times.
    TooDeep,
}

impl Script {
    /// Every part, in source order.
    pub fn parts(&self) -> &[Part] {
        &self.parts
    }

    /// Every simple command, in source order.
    pub fn commands(&self) -> impl Iterator<Item = &SimpleCommand> {
        self.parts.iter().filter_map(|part| match part {
            Part::Command(command) => Some(command),
            _ => None,
        })
    }

    /// The first simple command whose program cannot be known from the text, if any.
    pub fn unknown_program(&self) -> Option<(&SimpleCommand, UnknownProgram)> {
        self.commands()
            .find_map(|command| Some((command, command.unknown_program?)))
    }

    /// Every file redirect, in source order.
    pub fn redirects(&self) -> impl Iterator<Item = &Redirect> {
        self.parts.iter().filter_map(|part| match part {
            Part::Redirect(redirect) => Some(redirect),
            _ => None,
        })
    }

    /// Whether everything was read: no syntax error and no nesting past [`MAX_NESTING`].
    /// Callers must fail closed when it is not.
    pub fn is_complete(&self) -> bool {
        !self
            .parts
            .iter()
            .any(|part| matches!(part, Part::Unparsed(_)))
    }
}

impl SimpleCommand {
    /// The arguments after the command name.
    pub fn args(&self) -> &[Word] {
        self.words.get(1..).unwrap_or(&[])
    }
}

impl UnknownProgram {
    /// Why, in a few words a person reads: `a variable in the command word`.
    pub fn describe(self) -> &'static str {
        match self {
            UnknownProgram::Variable => "a variable in the command word",
            UnknownProgram::CommandSubstitution => "a command substitution in the command word",
            UnknownProgram::ParameterExpansion => "a parameter expansion in the command word",
            UnknownProgram::Expansion => {
                "a glob, brace or arithmetic expansion in the command word"
            }
            UnknownProgram::Placeholder => "a name the wrapper fills in at run time",
            UnknownProgram::ScriptFile => "it runs a script file whose content is not in the text",
            UnknownProgram::StandardInput => "a shell reads its script from standard input",
            UnknownProgram::InputArguments => "a shell gets its script from what xargs reads",
            UnknownProgram::NameBinding => {
                "`alias`, `hash -p` or `enable -f` changes what a later name runs"
            }
            UnknownProgram::ScriptWithoutCommand => "`script` without -c runs the user's shell",
        }
    }
}

impl Redirect {
    /// Whether the redirect writes somewhere (`>`, `>>`, `&>`, `>|`, `>&`, `<>`).
    pub fn writes(&self) -> bool {
        self.operator.contains('>')
    }

    /// Whether it writes to a file, not just onto another descriptor (`2>&1`, `>&-`).
    pub fn writes_file(&self) -> bool {
        let duplicates = self.operator.ends_with('&')
            && (self.target.text == "-"
                || (!self.target.text.is_empty()
                    && self.target.text.chars().all(|c| c.is_ascii_digit())));
        self.writes() && !duplicates
    }
}

#[cfg(test)]
mod tests;
