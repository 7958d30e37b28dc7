//! The tree-sitter walk: every node of the syntax tree, every part in source order.

use std::borrow::Cow;

use tree_sitter::{Node, Parser};

use crate::word::{
    looked_up_name, unescape_ansi_c, unescape_double_quoted, unescape_word, unknown_name,
};
use crate::wrapper::{SHELLS, Unwrapped, unwrap, xargs_placeholder};
use crate::{
    Function, MAX_NESTING, Part, Redirect, SimpleCommand, UnknownProgram, Unparsed, UnparsedReason,
    Word, program_name,
};

/// Parses `text` (handed to a shell `depth` times already) and appends its parts to `out`.
pub(crate) fn parse_into(text: &str, depth: usize, out: &mut Vec<Part>) {
    if depth > MAX_NESTING {
        out.push(Part::Unparsed(Unparsed {
            text: text.to_owned(),
            reason: UnparsedReason::TooDeep,
        }));
        return;
    }
    let sanitized = parser_safe(text);
    let text = sanitized.as_ref();
    let mut parser = Parser::new();
    let parsed = parser
        .set_language(&tree_sitter_bash::LANGUAGE.into())
        .ok()
        .and_then(|()| parser.parse(text, None));
    let Some(tree) = parsed else {
        out.push(Part::Unparsed(Unparsed {
            text: text.to_owned(),
            reason: UnparsedReason::Syntax,
        }));
        return;
    };
    let root = tree.root_node();
    let mut walker = Walker {
        source: text.as_bytes(),
        depth,
        out,
    };
    walker.walk(root);
    if root.has_error() {
        walker.out.push(Part::Unparsed(Unparsed {
            text: text.to_owned(),
            reason: UnparsedReason::Syntax,
        }));
    }
}

/// Characters from U+30000 up (unassigned planes, tags, variation selectors, private use) are
/// replaced by `x` before parsing: tree-sitter-bash 0.25 reads out of bounds on some of them
/// (`{` followed by U+E01D1 crashes the process). No shell treats them specially, and any
/// single non-blank character keeps word boundaries where bash sees them: a word containing
/// one names no known program either way.
fn parser_safe(text: &str) -> Cow<'_, str> {
    if text.chars().all(|c| (c as u32) < 0x30000) {
        return Cow::Borrowed(text);
    }
    Cow::Owned(
        text.chars()
            .map(|c| if (c as u32) < 0x30000 { c } else { 'x' })
            .collect(),
    )
}

/// What the surroundings of a simple command tell about it.
#[derive(Debug, Clone, Default)]
struct Surroundings {
    /// More arguments are appended at run time (the command `xargs` runs).
    input_arguments: bool,
    /// A word the wrapper replaces at run time (`{}` of `find -exec`, `xargs -I R`).
    placeholder: Option<String>,
    /// Standard input is a script the text holds (`echo '…' | sh`, `sh <<< '…'`), parsed
    /// where it is fed.
    static_stdin: bool,
}

struct Walker<'s, 'o> {
    source: &'s [u8],
    depth: usize,
    out: &'o mut Vec<Part>,
}

impl Walker<'_, '_> {
    fn text(&self, node: Node<'_>) -> &str {
        node.utf8_text(self.source).unwrap_or("")
    }

    /// Visits every node. A node's own parts come before those of its children, so the parts
    /// of `bash -c '…'` follow the `bash` command and precede the next statement.
    fn walk(&mut self, node: Node<'_>) {
        match node.kind() {
            "command" => {
                let (assignments, words) = self.command_words(node);
                let surroundings = Surroundings {
                    static_stdin: self.stdin_is_static_script(node),
                    ..Surroundings::default()
                };
                self.command(assignments, words, surroundings);
                self.shell_stdin_redirect(node);
            }
            "declaration_command" | "unset_command" => self.declaration(node),
            // `PATH=/x` alone as a statement changes what later commands run.
            "variable_assignment" | "variable_assignments"
                if node.parent().is_none_or(|p| {
                    !matches!(
                        p.kind(),
                        "command" | "declaration_command" | "variable_assignments"
                    )
                }) =>
            {
                let assignments = if node.kind() == "variable_assignment" {
                    vec![self.resolve(node)]
                } else {
                    let mut cursor = node.walk();
                    node.named_children(&mut cursor)
                        .map(|n| self.resolve(n))
                        .collect()
                };
                self.command(assignments, Vec::new(), Surroundings::default());
            }
            "file_redirect" => self.redirect(node),
            "function_definition" => self.function(node),
            "pipeline" => self.pipe_into_shell(node),
            "redirected_statement" => self.shell_stdin_redirect(node),
            _ => {}
        }
        let mut cursor = node.walk();
        let children: Vec<Node<'_>> = node.children(&mut cursor).collect();
        for child in children {
            self.walk(child);
        }
    }

    /// A word after quote removal.
    fn resolve(&self, node: Node<'_>) -> Word {
        match node.kind() {
            // `FOO='a b'` reads `FOO=a b`.
            "variable_assignment" => {
                let name = node
                    .child_by_field_name("name")
                    .map_or("", |n| self.text(n));
                let value = node.child_by_field_name("value").map(|n| self.resolve(n));
                Word {
                    text: format!("{name}={}", value.as_ref().map_or("", |v| v.text.as_str())),
                    dynamic: value.is_some_and(|v| v.dynamic),
                }
            }
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

    /// The leading assignments and the words (name, then arguments) of a `command` node;
    /// redirects are not words.
    fn command_words(&self, node: Node<'_>) -> (Vec<Word>, Vec<Word>) {
        let mut assignments = Vec::new();
        let mut words = Vec::new();
        let mut cursor = node.walk();
        let mut seen_name = false;
        for child in node.children(&mut cursor) {
            match child.kind() {
                "command_name" => {
                    seen_name = true;
                    words.push(self.resolve(child));
                }
                "variable_assignment" if !seen_name => assignments.push(self.resolve(child)),
                "variable_assignment"
                | "file_redirect"
                | "herestring_redirect"
                | "heredoc_redirect" => {}
                _ if seen_name && child.is_named() => words.push(self.resolve(child)),
                _ => {}
            }
        }
        (assignments, words)
    }

    /// The words of a `command` node.
    fn argv(&self, node: Node<'_>) -> Vec<Word> {
        self.command_words(node).1
    }

    /// Records a simple command, then what it runs if it is a wrapper.
    fn command(&mut self, assignments: Vec<Word>, words: Vec<Word>, around: Surroundings) {
        let mut program = words
            .first()
            .and_then(|first| match looked_up_name(&first.text) {
                Some(name) => Some(program_name(&name).to_owned()),
                None if first.dynamic => None,
                None => Some(program_name(&first.text).to_owned()),
            });
        let args: Vec<Word> = words.get(1..).unwrap_or(&[]).to_vec();
        let texts: Vec<&str> = args.iter().map(|w| w.text.as_str()).collect();
        let placeholder = around.placeholder.as_deref().filter(|p| !p.is_empty());
        let mut unknown_program = match words.first() {
            Some(first) if placeholder.is_some_and(|p| first.text.contains(p)) => {
                Some(UnknownProgram::Placeholder)
            }
            Some(first) if program.is_none() || looked_up_name(&first.text).is_none() => {
                unknown_name(first)
            }
            _ => None,
        };
        if unknown_program.is_some() {
            program = None;
        }
        let unwrapped = match &program {
            Some(program) => unwrap(program, &texts),
            None => Unwrapped::Nothing,
        };
        if let (Unwrapped::Script(script), Some(placeholder)) = (&unwrapped, placeholder)
            && script.contains(placeholder)
        {
            unknown_program = Some(UnknownProgram::Placeholder);
        }
        if let Some(program) = &program
            && unknown_program.is_none()
        {
            unknown_program = runs_unknown_script(program, &texts, &unwrapped, &around);
        }
        self.out.push(Part::Command(SimpleCommand {
            assignments,
            words,
            program: program.clone(),
            unknown_program,
            input_arguments: around.input_arguments,
        }));
        let inner = |input_arguments: bool, placeholder: Option<String>| Surroundings {
            input_arguments,
            placeholder,
            static_stdin: around.static_stdin,
        };
        match unwrapped {
            Unwrapped::Command {
                start,
                input_arguments: appended,
            } => {
                let placeholder = match appended {
                    true => xargs_placeholder(&texts),
                    false => around.placeholder.clone(),
                };
                self.command(
                    Vec::new(),
                    args[start..].to_vec(),
                    inner(around.input_arguments || appended, placeholder),
                );
            }
            Unwrapped::Commands(ranges) => {
                for range in ranges {
                    let around = inner(false, Some("{}".to_owned()));
                    self.command(Vec::new(), args[range].to_vec(), around);
                }
            }
            Unwrapped::Script(script) => parse_into(&script, self.depth + 1, self.out),
            Unwrapped::Nothing => {}
        }
    }

    /// `export A=$(…)`, `local x`, `unset PATH`: a command named by its keyword.
    fn declaration(&mut self, node: Node<'_>) {
        let mut cursor = node.walk();
        let words = node
            .children(&mut cursor)
            .filter(|child| !matches!(child.kind(), "file_redirect" | "herestring_redirect"))
            .map(|child| match child.is_named() {
                true => self.resolve(child),
                // The keyword itself: `export`, `local`, `unset`, …
                false => Word {
                    text: self.text(child).to_owned(),
                    dynamic: false,
                },
            })
            .collect();
        self.command(Vec::new(), words, Surroundings::default());
    }

    /// `> /dev/sda`, `>> log`, `2>&1`, `< input`.
    fn redirect(&mut self, node: Node<'_>) {
        let mut cursor = node.walk();
        let operator: String = node
            .children(&mut cursor)
            .filter(|child| !child.is_named())
            .map(|child| self.text(child))
            .collect();
        let Some(destination) = node.child_by_field_name("destination") else {
            return;
        };
        let target = self.resolve(destination);
        self.out.push(Part::Redirect(Redirect { operator, target }));
    }

    /// A function and how its body calls it (a fork bomb calls itself in parallel).
    fn function(&mut self, node: Node<'_>) {
        let Some(name) = node.child_by_field_name("name").map(|n| self.text(n)) else {
            return;
        };
        let Some(body) = node.child_by_field_name("body") else {
            return;
        };
        let mut self_calls = 0;
        let mut forks = false;
        self.count_calls(body, name, &mut self_calls, &mut forks, false);
        self.out.push(Part::Function(Function {
            name: name.to_owned(),
            self_calls,
            forks,
        }));
    }

    fn count_calls(
        &self,
        node: Node<'_>,
        name: &str,
        calls: &mut usize,
        forks: &mut bool,
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
            *forks |= in_pipeline || backgrounded;
        }
        let in_pipeline = in_pipeline || node.kind() == "pipeline";
        if !node.is_named() && self.text(node) == "&" {
            *forks = true;
        }
        let mut cursor = node.walk();
        for child in node.children(&mut cursor) {
            self.count_calls(child, name, calls, forks, in_pipeline);
        }
    }

    /// `echo 'rm -rf /' | sh`: static text printed into a shell is a script;
    /// `echo / | xargs rm -rf`: xargs appends what it reads to its command.
    fn pipe_into_shell(&mut self, node: Node<'_>) {
        let mut cursor = node.walk();
        let stages: Vec<Node<'_>> = node.named_children(&mut cursor).collect();
        for pair in stages.windows(2) {
            let (Some(producer), Some(consumer)) = (as_command(pair[0]), as_command(pair[1]))
            else {
                continue;
            };
            let consumer_argv = self.argv(consumer);
            if let (Some(first), Some(produced)) =
                (consumer_argv.first(), self.static_output(producer))
                && program_name(&first.text) == "xargs"
            {
                let mut argv = consumer_argv.clone();
                argv.extend(produced.split_whitespace().map(|t| Word {
                    text: t.to_owned(),
                    dynamic: false,
                }));
                self.command(Vec::new(), argv, Surroundings::default());
            }
            if !self.is_bare_shell(consumer) {
                continue;
            }
            let argv = self.argv(producer);
            let Some(first) = argv.first() else { continue };
            if matches!(program_name(&first.text), "echo" | "printf" | "cat") {
                let script: Vec<&str> = argv[1..]
                    .iter()
                    .map(|w| w.text.as_str())
                    .filter(|t| !t.starts_with('-'))
                    .collect();
                let script = script.join(" ").replace("\\n", "\n");
                parse_into(&script, self.depth + 1, self.out);
            }
        }
    }

    /// `sh <<< 'rm -rf /'` and `bash <<EOF … EOF`: the redirect hangs either on the
    /// `redirected_statement` around the command or on the command itself.
    fn shell_stdin_redirect(&mut self, node: Node<'_>) {
        let command = match node.kind() {
            "command" => Some(node),
            _ => node.child_by_field_name("body").and_then(as_command),
        };
        if !command.is_some_and(|command| self.is_bare_shell(command)) {
            return;
        }
        let mut cursor = node.walk();
        let children: Vec<Node<'_>> = node.children(&mut cursor).collect();
        for child in children {
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
            parse_into(&script, self.depth + 1, self.out);
        }
    }

    /// Whether a bare shell run by `command` reads a script the text holds: a here-string or
    /// here-document, or static `echo`/`printf` output piped in.
    fn stdin_is_static_script(&self, command: Node<'_>) -> bool {
        let outer = match command.parent() {
            Some(parent) if parent.kind() == "redirected_statement" => parent,
            _ => command,
        };
        let fed_here = [command, outer].iter().any(|node| {
            let mut cursor = node.walk();
            node.children(&mut cursor)
                .any(|c| matches!(c.kind(), "herestring_redirect" | "heredoc_redirect"))
        });
        let piped_static = outer.parent().is_some_and(|p| p.kind() == "pipeline")
            && outer
                .prev_named_sibling()
                .and_then(as_command)
                .is_some_and(|producer| self.static_output(producer).is_some());
        fed_here || piped_static
    }

    /// What `echo`/`printf` with static arguments prints, roughly.
    fn static_output(&self, producer: Node<'_>) -> Option<String> {
        let argv = self.argv(producer);
        let first = argv.first()?;
        if !matches!(program_name(&first.text), "echo" | "printf") {
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
        SHELLS.contains(&program_name(&first.text))
            && argv[1..].iter().all(|w| w.text.starts_with('-'))
    }
}

/// Why a command with a known program runs a script the text does not hold: a shell given a
/// script file, its standard input or what xargs reads; `source`; `alias`; `script` without
/// `-c`.
fn runs_unknown_script(
    program: &str,
    args: &[&str],
    unwrapped: &Unwrapped,
    around: &Surroundings,
) -> Option<UnknownProgram> {
    let operands = args
        .iter()
        .any(|a| !a.starts_with('-') && !a.starts_with('+'));
    match program {
        _ if SHELLS.contains(&program) => {
            let informational = args.iter().any(|a| matches!(*a, "--version" | "--help"));
            if matches!(unwrapped, Unwrapped::Script(_)) || informational {
                None
            } else if operands {
                Some(UnknownProgram::ScriptFile)
            } else if around.input_arguments {
                Some(UnknownProgram::InputArguments)
            } else if !around.static_stdin {
                Some(UnknownProgram::StandardInput)
            } else {
                None
            }
        }
        "source" | "." => Some(UnknownProgram::ScriptFile),
        "alias" => args
            .iter()
            .any(|a| a.contains('='))
            .then_some(UnknownProgram::NameBinding),
        "hash" | "enable" => {
            let option = if program == "hash" { 'p' } else { 'f' };
            args.iter()
                .take_while(|a| a.starts_with('-'))
                .any(|a| !a.starts_with("--") && a.contains(option))
                .then_some(UnknownProgram::NameBinding)
        }
        "script" => (!matches!(unwrapped, Unwrapped::Script(_)))
            .then_some(UnknownProgram::ScriptWithoutCommand),
        _ => None,
    }
}

fn as_command(node: Node<'_>) -> Option<Node<'_>> {
    match node.kind() {
        "command" => Some(node),
        "redirected_statement" => node.child_by_field_name("body").and_then(as_command),
        _ => None,
    }
}
