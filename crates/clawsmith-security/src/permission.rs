//! Permission modes and rules (S4).

use std::path::{Component, Path, PathBuf};
use std::str::FromStr;

use clawsmith_protocol::{Capability, PermissionDecision, Risk, Verdict};
use clawsmith_shell::SimpleCommand;
use globset::{GlobBuilder, GlobMatcher};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::capability::ToolFacts;
use crate::protected::{PathSet, ProtectedPaths, Protection};
use crate::repository::{RepositoryDamage, repository_damage};

/// The default per effective risk.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum PermissionMode {
    /// Allow `read`, deny everything above it. Allow rules cannot lift this ceiling.
    ReadOnly,
    /// Allow `read`, ask for `workspace-write` and `execute`.
    #[default]
    Ask,
    /// Allow `read` and `workspace-write`, ask for `execute`.
    AcceptEdits,
    /// Allow everything; the hard command limits still apply.
    Full,
}

impl PermissionMode {
    /// Every mode.
    pub const ALL: [PermissionMode; 4] = [
        PermissionMode::ReadOnly,
        PermissionMode::Ask,
        PermissionMode::AcceptEdits,
        PermissionMode::Full,
    ];

    /// The wire string.
    pub fn as_str(self) -> &'static str {
        match self {
            PermissionMode::ReadOnly => "read-only",
            PermissionMode::Ask => "ask",
            PermissionMode::AcceptEdits => "accept-edits",
            PermissionMode::Full => "full",
        }
    }

    /// The mode's verdict for a call of `risk` when no rule matches.
    pub fn default_verdict(self, risk: Risk) -> Verdict {
        match (self, risk) {
            (_, Risk::Read) => Verdict::Allow,
            (PermissionMode::ReadOnly, _) => Verdict::Deny,
            (PermissionMode::Ask, _) => Verdict::Ask,
            (PermissionMode::AcceptEdits, Risk::WorkspaceWrite) => Verdict::Allow,
            (PermissionMode::AcceptEdits, Risk::Execute) => Verdict::Ask,
            (PermissionMode::Full, _) => Verdict::Allow,
        }
    }
}

impl FromStr for PermissionMode {
    type Err = RuleError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        PermissionMode::ALL
            .into_iter()
            .find(|mode| mode.as_str() == text)
            .ok_or_else(|| RuleError::UnknownMode(text.to_owned()))
    }
}

/// Why a rule or mode could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RuleError {
    /// The mode string is not one of the four.
    #[error("unknown permission mode {0:?}; expected read-only, ask, accept-edits or full")]
    UnknownMode(String),
    /// The rule text is empty.
    #[error("empty permission rule")]
    Empty,
    /// `@capability` names no known capability.
    #[error("unknown capability {0:?} in permission rule")]
    UnknownCapability(String),
    /// `tool(` without the closing `)`.
    #[error("permission rule {0:?} is missing its closing parenthesis")]
    Unclosed(String),
    /// The tool or argument pattern is not a valid glob.
    #[error("invalid pattern in permission rule {rule:?}: {message}")]
    BadPattern {
        /// The rule.
        rule: String,
        /// What the glob parser said.
        message: String,
    },
}

/// What a matching rule decides.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum RuleEffect {
    /// Allow without asking.
    Allow,
    /// Ask a person.
    Ask,
    /// Refuse.
    Deny,
}

/// One permission rule.
///
/// Syntax: `TOOL`, `TOOL(ARGUMENT)`, `@CAPABILITY` or `@CAPABILITY(ARGUMENT)`, where `TOOL` and
/// `ARGUMENT` are globs: `run_command(git status*)`, `edit_file(src/**)`, `mcp__github__*`,
/// `@network`. The argument pattern matches the call's subject — `command` for commands, `path`
/// (or both `from` and `to`) for files, else `pattern`, `query` or `url`.
#[derive(Debug, Clone)]
pub struct Rule {
    effect: RuleEffect,
    text: String,
    target: RuleTarget,
    argument: Option<ArgumentPattern>,
}

#[derive(Debug, Clone)]
enum RuleTarget {
    Tool(GlobMatcher),
    Capability(Capability),
}

#[derive(Debug, Clone)]
struct ArgumentPattern {
    /// The pattern as written.
    text: String,
    /// `*` crosses `/` (for commands and free text).
    loose: GlobMatcher,
    /// `*` stops at `/`, `**` crosses it (for paths).
    path: GlobMatcher,
}

impl Rule {
    /// Parses `text` as a rule with `effect`.
    pub fn parse(effect: RuleEffect, text: &str) -> Result<Rule, RuleError> {
        let trimmed = text.trim();
        if trimmed.is_empty() {
            return Err(RuleError::Empty);
        }
        let (head, argument) = match trimmed.find('(') {
            Some(open) => {
                let Some(inner) = trimmed[open + 1..].strip_suffix(')') else {
                    return Err(RuleError::Unclosed(trimmed.to_owned()));
                };
                (&trimmed[..open], Some(inner))
            }
            None => (trimmed, None),
        };
        let glob = |pattern: &str, literal_separator: bool| {
            compile_glob(trimmed, pattern, literal_separator)
        };
        let target = match head.trim().strip_prefix('@') {
            Some(name) => RuleTarget::Capability(
                Capability::parse(name.trim())
                    .ok_or_else(|| RuleError::UnknownCapability(name.trim().to_owned()))?,
            ),
            None => RuleTarget::Tool(glob(head.trim(), false)?),
        };
        let argument = match argument {
            Some(pattern) => Some(ArgumentPattern {
                text: pattern.to_owned(),
                loose: glob(pattern, false)?,
                path: glob(pattern, true)?,
            }),
            None => None,
        };
        Ok(Rule {
            effect,
            text: trimmed.to_owned(),
            target,
            argument,
        })
    }

    /// What the rule decides when it matches.
    pub fn effect(&self) -> RuleEffect {
        self.effect
    }

    /// The rule as written.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// Whether the rule applies to a call of `tool` with `input`.
    pub fn matches(&self, tool: &ToolFacts, subjects: &CallSubjects) -> bool {
        self.match_reason(tool, subjects).is_some()
    }

    /// How the rule applies, if it does: by the call's text, or — for a deny or ask rule with an
    /// argument pattern — because a command's program cannot be known from the text.
    fn match_reason<'s>(
        &self,
        tool: &ToolFacts,
        subjects: &'s CallSubjects,
    ) -> Option<RuleMatch<'s>> {
        if self.matches_text(tool, subjects) {
            return Some(RuleMatch::Text);
        }
        let target_matches = match &self.target {
            RuleTarget::Tool(glob) => glob.is_match(&tool.name),
            RuleTarget::Capability(capability) => tool.capabilities.contains(*capability),
        };
        if !target_matches || self.effect == RuleEffect::Allow {
            return None;
        }
        subjects
            .items
            .iter()
            .find_map(|subject| subject.unknown_program.as_deref())
            .map(RuleMatch::UnknownProgram)
    }

    fn matches_text(&self, tool: &ToolFacts, subjects: &CallSubjects) -> bool {
        let target_matches = match &self.target {
            RuleTarget::Tool(glob) => glob.is_match(&tool.name),
            RuleTarget::Capability(capability) => tool.capabilities.contains(*capability),
        };
        if !target_matches {
            return false;
        }
        let Some(pattern) = &self.argument else {
            return true;
        };
        match self.effect {
            // Refusals match if any spelling of any subject matches: `git status; rm x`,
            // `bash -c 'rm x'` and `\rm x` are all caught by `deny run_command(rm *)`.
            RuleEffect::Deny | RuleEffect::Ask => subjects.items.iter().any(|subject| {
                subject
                    .refusal_spellings()
                    .any(|text| pattern_matches(pattern, subject.kind, text))
            }),
            // An allow must cover the whole call: every subject, and for a command every simple
            // command it runs, as written; never a script the parse could not read in full.
            RuleEffect::Allow => {
                !subjects.items.is_empty()
                    && subjects
                        .items
                        .iter()
                        .all(|subject| match &subject.allow_spellings {
                            Some(texts) => texts
                                .iter()
                                .all(|text| pattern_matches(pattern, subject.kind, text)),
                            None => false,
                        })
            }
        }
    }
}

/// How a rule applies to a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum RuleMatch<'s> {
    /// Its pattern matches the call's text.
    Text,
    /// A deny or ask rule applies because what a command runs cannot be known (the sentence).
    UnknownProgram(&'s str),
}

/// Compiles `pattern` of the rule (or protected path) `rule`; with `literal_separator`, `*`
/// stops at `/` and `**` crosses it.
pub(crate) fn compile_glob(
    rule: &str,
    pattern: &str,
    literal_separator: bool,
) -> Result<GlobMatcher, RuleError> {
    GlobBuilder::new(pattern)
        .literal_separator(literal_separator)
        .backslash_escape(true)
        .build()
        .map(|glob| glob.compile_matcher())
        .map_err(|error| RuleError::BadPattern {
            rule: rule.to_owned(),
            message: error.to_string(),
        })
}

fn pattern_matches(pattern: &ArgumentPattern, kind: SubjectKind, text: &str) -> bool {
    match kind {
        SubjectKind::Path => pattern.path.is_match(text),
        SubjectKind::Command | SubjectKind::Text => pattern.loose.is_match(text),
    }
}

/// A set of rules, evaluated deny → ask → allow.
#[derive(Debug, Clone, Default)]
pub struct RuleSet {
    rules: Vec<Rule>,
}

/// The serialized form of a rule set, e.g. in `clawsmith.toml`:
/// `{"deny": ["run_command(git push*)"], "ask": [], "allow": ["edit_file(src/**)"]}`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct RuleConfig {
    /// Rules that refuse.
    pub deny: Vec<String>,
    /// Rules that ask.
    pub ask: Vec<String>,
    /// Rules that allow.
    pub allow: Vec<String>,
}

impl RuleSet {
    /// An empty set.
    pub fn new() -> RuleSet {
        RuleSet::default()
    }

    /// Parses every rule of `config`; the first bad rule is the error.
    pub fn from_config(config: &RuleConfig) -> Result<RuleSet, RuleError> {
        let mut set = RuleSet::new();
        for (effect, texts) in [
            (RuleEffect::Deny, &config.deny),
            (RuleEffect::Ask, &config.ask),
            (RuleEffect::Allow, &config.allow),
        ] {
            for text in texts {
                set.push(Rule::parse(effect, text)?);
            }
        }
        Ok(set)
    }

    /// Adds a rule.
    pub fn push(&mut self, rule: Rule) {
        self.rules.push(rule);
    }

    /// Adds a parsed rule (builder style).
    pub fn with(mut self, effect: RuleEffect, text: &str) -> Result<RuleSet, RuleError> {
        self.push(Rule::parse(effect, text)?);
        Ok(self)
    }

    /// Whether the set has no rules.
    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    /// The first matching rule in deny → ask → allow order.
    pub fn first_match(&self, tool: &ToolFacts, subjects: &CallSubjects) -> Option<&Rule> {
        self.first_match_where(tool, subjects, |_| true)
            .map(|(rule, _)| rule)
    }

    /// [`RuleSet::first_match`] where an allow rule also has to pass `allow_counts`.
    fn first_match_where<'r, 's>(
        &'r self,
        tool: &ToolFacts,
        subjects: &'s CallSubjects,
        allow_counts: impl Fn(&Rule) -> bool,
    ) -> Option<(&'r Rule, RuleMatch<'s>)> {
        [RuleEffect::Deny, RuleEffect::Ask, RuleEffect::Allow]
            .into_iter()
            .find_map(|effect| {
                self.rules.iter().find_map(|rule| {
                    if rule.effect != effect || (effect == RuleEffect::Allow && !allow_counts(rule))
                    {
                        return None;
                    }
                    Some((rule, rule.match_reason(tool, subjects)?))
                })
            })
    }
}

/// What decided a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum DecidedBy {
    /// A rule matched (its text is in the decision's `rule`).
    Rule,
    /// The call writes a protected path and no rule naming it matched.
    ProtectedPath,
    /// The call names a hidden path.
    HiddenPath,
    /// The command would destroy a repository's history and no allow rule naming it matched.
    Repository,
    /// The mode's default for the effective risk.
    Mode,
}

/// A decision and what made it (for `clawsmith policy check`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Explanation {
    /// The decision.
    pub decision: PermissionDecision,
    /// What made it.
    pub decided_by: DecidedBy,
}

/// The mode and rules a host configured.
#[derive(Debug, Clone, Default)]
pub struct PermissionPolicy {
    /// The default per risk.
    pub mode: PermissionMode,
    /// Overrides.
    pub rules: RuleSet,
    /// Lets rules match absolute paths inside the workspace by their relative form.
    pub workspace_root: Option<PathBuf>,
    /// Paths a file write may not reach on the mode's say-so alone (every `.git`, plus the
    /// configured ones): see [`ProtectedPaths`].
    pub protected_paths: ProtectedPaths,
    /// Paths no tool may name, for reading or writing, whatever the mode and the rules.
    pub hidden_paths: PathSet,
}

impl PermissionPolicy {
    /// A policy with `mode` and no rules.
    pub fn new(mode: PermissionMode) -> PermissionPolicy {
        PermissionPolicy {
            mode,
            ..PermissionPolicy::default()
        }
    }

    /// Decides a call (S4): the first matching rule in deny → ask → allow order, else the mode's
    /// default for the tool's *effective* risk. In `read-only` mode no rule can allow anything
    /// above `read`.
    ///
    /// A tool that can write files and names a protected path (see [`ProtectedPaths`]) is asked
    /// about in every mode below `full`, and refused in `full` when the path is where git
    /// executes from; only an allow rule whose pattern names the protected place lifts either.
    ///
    /// A command whose program cannot be known from the text matches every deny and ask rule
    /// with an argument pattern and no allow rule. A command that would destroy a repository's
    /// history (`rm -rf .git`, `cd / && rm -rf *`) is asked about in every mode but `read-only`
    /// unless an allow rule naming what it aims at matches.
    pub fn decide(&self, tool: &ToolFacts, input: &serde_json::Value) -> PermissionDecision {
        self.explain(tool, input).decision
    }

    /// [`PermissionPolicy::decide`], saying what decided: a rule, a protected path or the mode.
    pub fn explain(&self, tool: &ToolFacts, input: &serde_json::Value) -> Explanation {
        self.explain_subjects(tool, &self.subjects(input))
    }

    /// The subjects of `input` as this policy sees them (absolute paths inside its workspace
    /// made relative); a host adds what it knows with [`CallSubjects::with_resolved_paths`].
    pub fn subjects(&self, input: &serde_json::Value) -> CallSubjects {
        CallSubjects::from_input(input, self.workspace_root.as_deref())
    }

    /// [`PermissionPolicy::explain`] over subjects the host extended.
    pub fn explain_subjects(&self, tool: &ToolFacts, subjects: &CallSubjects) -> Explanation {
        if let Some(decision) = self.hidden_decision(tool, subjects) {
            return Explanation {
                decision,
                decided_by: DecidedBy::HiddenPath,
            };
        }
        let risk = tool.effective_risk;
        let protected = self.protected_subjects(tool, subjects);
        let damage: Vec<&RepositoryDamage> = subjects
            .items
            .iter()
            .flat_map(|subject| &subject.repository_damage)
            .collect();
        let names_what_it_protects = |rule: &Rule| {
            let pattern = rule.argument.as_ref().map(|pattern| pattern.text.as_str());
            protected.iter().all(|(path, _)| {
                pattern.is_some_and(|pattern| self.protected_paths.named_by(pattern, path))
            }) && damage
                .iter()
                .all(|damage| pattern.is_some_and(|pattern| names_damage(pattern, damage)))
        };
        if let Some((rule, how)) =
            self.rules
                .first_match_where(tool, subjects, names_what_it_protects)
        {
            let verdict = match rule.effect {
                RuleEffect::Deny => Verdict::Deny,
                RuleEffect::Ask => Verdict::Ask,
                RuleEffect::Allow => Verdict::Allow,
            };
            let ceiling_holds = self.mode == PermissionMode::ReadOnly
                && verdict != Verdict::Deny
                && risk > Risk::Read;
            if !ceiling_holds {
                let effect = match rule.effect {
                    RuleEffect::Deny => "deny",
                    RuleEffect::Ask => "ask",
                    RuleEffect::Allow => "allow",
                };
                let mut reason = format!("rule `{effect} {}` matched {}", rule.text, tool.name);
                if let RuleMatch::UnknownProgram(why) = how {
                    reason = format!(
                        "{reason}: {why}; it matches every deny and ask rule on {}",
                        tool.name
                    );
                }
                return Explanation {
                    decision: PermissionDecision {
                        verdict,
                        reason,
                        rule: Some(format!("{effect} {}", rule.text)),
                    },
                    decided_by: DecidedBy::Rule,
                };
            }
        }
        if let Some(decision) = self.repository_decision(tool, &damage) {
            return Explanation {
                decision,
                decided_by: DecidedBy::Repository,
            };
        }
        if let Some(decision) = self.protected_decision(tool, &protected) {
            return Explanation {
                decision,
                decided_by: DecidedBy::ProtectedPath,
            };
        }
        let verdict = self.mode.default_verdict(risk);
        let reason = match verdict {
            Verdict::Allow => format!("{} mode allows {risk} tools", self.mode.as_str()),
            Verdict::Ask => format!("{} mode asks before {risk} tools", self.mode.as_str()),
            Verdict::Deny => format!(
                "{} mode does not allow {} (effective risk {risk})",
                self.mode.as_str(),
                tool.name
            ),
        };
        Explanation {
            decision: PermissionDecision {
                verdict,
                reason,
                rule: None,
            },
            decided_by: DecidedBy::Mode,
        }
    }
}

impl PermissionPolicy {
    /// The path subjects of a file-writing call that are protected, strongest first.
    fn protected_subjects<'s>(
        &self,
        tool: &ToolFacts,
        subjects: &'s CallSubjects,
    ) -> Vec<(&'s str, Protection)> {
        if !tool.capabilities.contains(Capability::FilesystemWrite) {
            return Vec::new();
        }
        let mut protected: Vec<(&str, Protection)> = subjects
            .items
            .iter()
            .filter(|subject| subject.kind == SubjectKind::Path)
            .filter_map(|subject| {
                let level = self.protected_paths.classify(&subject.text)?;
                Some((subject.text.as_str(), level))
            })
            .collect();
        protected.sort_by_key(|(_, level)| std::cmp::Reverse(*level));
        protected
    }

    /// What the mode does with a command that would destroy a repository's history and that no
    /// rule decided: `read-only` keeps its refusal, every other mode asks.
    fn repository_decision(
        &self,
        tool: &ToolFacts,
        damage: &[&RepositoryDamage],
    ) -> Option<PermissionDecision> {
        let first = damage.first()?;
        if self.mode == PermissionMode::ReadOnly {
            return None;
        }
        let example = format!("allow {}({})", tool.name, escape_glob(&first.command));
        Some(PermissionDecision {
            verdict: Verdict::Ask,
            reason: format!(
                "{}; {} mode asks before a command ends a repository, even one undo can put \
                 back (an allow rule naming it, e.g. `{example}`, allows it)",
                first.describe(),
                self.mode.as_str()
            ),
            rule: None,
        })
    }

    /// A refusal when a path subject of the call (as spelled or where it really leads) is hidden.
    fn hidden_decision(
        &self,
        tool: &ToolFacts,
        subjects: &CallSubjects,
    ) -> Option<PermissionDecision> {
        let hidden = subjects
            .items
            .iter()
            .filter(|subject| subject.kind == SubjectKind::Path)
            .find(|subject| self.hidden_paths.contains(&subject.text))?;
        Some(PermissionDecision {
            verdict: Verdict::Deny,
            reason: format!(
                "`{}` is hidden (hidden_paths): {} may not read or write it, in any mode",
                hidden.text, tool.name
            ),
            rule: None,
        })
    }

    /// What the mode does with a protected write no rule decided: `read-only` and `full` with
    /// [`Protection::Approval`] keep the mode's verdict; `full` refuses
    /// [`Protection::Explicit`]; every other mode asks.
    fn protected_decision(
        &self,
        tool: &ToolFacts,
        protected: &[(&str, Protection)],
    ) -> Option<PermissionDecision> {
        let &(path, level) = protected.first()?;
        let why = if path.split('/').any(|component| component == ".git") {
            "git runs hooks and config from `.git` outside any sandbox"
        } else {
            "it is listed in protected_paths"
        };
        let mode = self.mode.as_str();
        let example = format!("allow {}({path})", tool.name);
        let (verdict, reason) = match (self.mode, level) {
            (PermissionMode::ReadOnly, _) | (PermissionMode::Full, Protection::Approval) => {
                return None;
            }
            (PermissionMode::Full, Protection::Explicit) => (
                Verdict::Deny,
                format!(
                    "{} would write `{path}`, a protected path ({why}); {mode} mode never writes \
                     it without an allow rule naming it, e.g. `{example}`",
                    tool.name
                ),
            ),
            (PermissionMode::Ask | PermissionMode::AcceptEdits, _) => (
                Verdict::Ask,
                format!(
                    "{} would write `{path}`, a protected path ({why}); {mode} mode asks before it \
                     as before a command (an allow rule naming it, e.g. `{example}`, allows it)",
                    tool.name
                ),
            ),
        };
        Some(PermissionDecision {
            verdict,
            reason,
            rule: None,
        })
    }
}

/// The authorization token for an `allow` decision (S5); `None` for ask and deny.
pub fn authorize(decision: &PermissionDecision) -> Option<clawsmith_protocol::Authorization> {
    clawsmith_protocol::Authorization::from_decision(decision)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SubjectKind {
    Command,
    Path,
    Text,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Subject {
    kind: SubjectKind,
    text: String,
    /// For commands: how each simple command reads (see [`Subject::command`]); a refusal
    /// matches the text or any of these.
    spellings: Vec<String>,
    /// What an allow rule must match, every one of them; `None` when no rule may allow it.
    allow_spellings: Option<Vec<String>>,
    /// For commands: why what the command runs cannot be known from the text, as a sentence
    /// (`the program of `$c f` cannot be known from the text (a variable in the command word)`).
    /// Such a command matches every deny and ask rule.
    unknown_program: Option<String>,
    /// For commands: what in it would destroy a repository's history.
    repository_damage: Vec<RepositoryDamage>,
}

impl Subject {
    /// A path or free text: an allow rule matches it whole, or not at all when `allowable` is
    /// false (a path leaving the workspace).
    fn plain(kind: SubjectKind, text: String, allowable: bool) -> Subject {
        Subject {
            kind,
            allow_spellings: allowable.then(|| vec![text.clone()]),
            text,
            spellings: Vec::new(),
            unknown_program: None,
            repository_damage: Vec::new(),
        }
    }

    /// A shell command, read by the one bash parse (`clawsmith-shell`). Each simple command
    /// it would run is spelled as written after quote removal (`FOO=1 rm x` for `FOO=1 \rm x`),
    /// without its assignments (`rm x`), and by its program (`rm x` for `/bin/rm x`); a refusal
    /// matches any of them. An allow rule must match every simple command as written,
    /// assignments included, so `allow run_command(cargo test*)` covers neither
    /// `LD_PRELOAD=x cargo test` nor `cargo test; rm x` nor `/tmp/cargo test`. No rule allows a
    /// script that did not parse completely, nor one that redirects output into a file.
    ///
    /// A command whose program cannot be known from the text (see
    /// [`clawsmith_shell::UnknownProgram`]), or a script that did not parse completely, matches
    /// every deny and ask rule and no allow rule.
    fn command(command: &str, workspace_root: Option<&Path>) -> Subject {
        let text = command.trim().to_owned();
        let script = clawsmith_shell::parse(command);
        let mut spellings = Vec::new();
        let mut allow_spellings = Vec::new();
        for simple in script.commands() {
            fn text_of(word: &clawsmith_shell::Word) -> &str {
                &word.text
            }
            let assignments = simple.assignments.iter().map(text_of);
            let words = simple.words.iter().map(text_of);
            let as_written = spell(assignments.chain(words.clone()), simple);
            spellings.push(spell(words, simple));
            if let Some(program) = &simple.program {
                let args = simple.args().iter().map(text_of);
                spellings.push(spell(std::iter::once(program.as_str()).chain(args), simple));
                // `../../bin/rm f` runs a file named `rm`: a refusal matches that name too.
                if let Some((_, base)) = program.rsplit_once('/') {
                    let args = simple.args().iter().map(text_of);
                    spellings.push(spell(std::iter::once(base).chain(args), simple));
                }
            }
            spellings.push(as_written.clone());
            allow_spellings.push(as_written);
        }
        if allow_spellings.is_empty() {
            // Nothing runs (empty, or only comments): an allow rule has the text to match.
            allow_spellings.push(text.clone());
        }
        let writes_file = script
            .redirects()
            .any(|redirect| redirect.writes_file() && redirect.target.text != "/dev/null");
        let unknown_program = match script.unknown_program() {
            Some((simple, reason)) => Some(format!(
                "the program of `{}` cannot be known from the text ({})",
                spell(simple.words.iter().map(|word| word.text.as_str()), simple),
                reason.describe()
            )),
            None if !script.is_complete() => Some(format!(
                "`{text}` could not be parsed in full, so what it runs cannot be known from the \
                 text"
            )),
            None => None,
        };
        let allowable = unknown_program.is_none() && !writes_file;
        Subject {
            kind: SubjectKind::Command,
            repository_damage: repository_damage(&script, workspace_root),
            text,
            spellings,
            allow_spellings: allowable.then_some(allow_spellings),
            unknown_program,
        }
    }

    fn refusal_spellings(&self) -> impl Iterator<Item = &str> {
        std::iter::once(self.text.as_str()).chain(self.spellings.iter().map(String::as_str))
    }
}

/// Whether an allow rule's argument pattern names what `damage` aims at: the pattern's literal
/// part (before its first glob character, `\*` read as `*`) holds the target word —
/// `run_command(rm -rf .git)` and `run_command(rm -rf \*)` do, `run_command(rm *)` does not.
fn names_damage(pattern: &str, damage: &RepositoryDamage) -> bool {
    let mut literal = String::new();
    let mut chars = pattern.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => literal.extend(chars.next()),
            '*' | '?' | '[' | '{' => break,
            _ => literal.push(c),
        }
    }
    literal
        .split_whitespace()
        .any(|word| word.trim_end_matches('/') == damage.target.trim_end_matches('/'))
}

/// `text` with glob characters escaped, so a rule made of it matches only itself.
fn escape_glob(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if matches!(c, '*' | '?' | '[' | ']' | '{' | '}' | '\\') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// `words` joined by spaces; ` …` stands for the arguments `xargs` appends at run time, so
/// `rm *` matches `xargs rm` while `git status` (no star) does not match `xargs git status`.
pub(crate) fn spell<'w>(words: impl Iterator<Item = &'w str>, command: &SimpleCommand) -> String {
    let mut text = words.collect::<Vec<_>>().join(" ");
    if command.input_arguments {
        text.push_str(" …");
    }
    text
}

/// The parts of a call's input that argument patterns match.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CallSubjects {
    items: Vec<Subject>,
}

impl CallSubjects {
    /// Adds where the call's paths really lead (workspace-relative, after the symlinks of their
    /// parent directories, as the host resolved them): rules and protected paths then hold for
    /// both spellings, so `edit_file(link/config)` with `link -> .git` is a write to
    /// `.git/config`, and an allow rule must cover the real place too.
    pub fn with_resolved_paths(
        mut self,
        paths: impl IntoIterator<Item = String>,
        workspace_root: Option<&Path>,
    ) -> CallSubjects {
        for path in paths {
            let (text, inside) = normalize_path(&path, workspace_root);
            let subject = Subject::plain(SubjectKind::Path, text, inside);
            if !self.items.contains(&subject) {
                self.items.push(subject);
            }
        }
        self
    }

    /// Extracts the subjects of `input`: `command`; else `path`, `from`, `to`; else `pattern`,
    /// `query`, `url`. Paths are normalized lexically (and made relative to `workspace_root` when
    /// absolute inside it); a path that still leaves (`..`, absolute elsewhere) can be refused by a
    /// rule but never allowed by one.
    pub fn from_input(input: &serde_json::Value, workspace_root: Option<&Path>) -> CallSubjects {
        let field = |name: &str| input.get(name).and_then(serde_json::Value::as_str);
        let mut items = Vec::new();
        if let Some(command) = field("command") {
            items.push(Subject::command(command, workspace_root));
            return CallSubjects { items };
        }
        for name in ["path", "from", "to"] {
            if let Some(path) = field(name) {
                let (text, inside) = normalize_path(path, workspace_root);
                items.push(Subject::plain(SubjectKind::Path, text, inside));
            }
        }
        if items.is_empty() {
            for name in ["pattern", "query", "url"] {
                if let Some(text) = field(name) {
                    items.push(Subject::plain(SubjectKind::Text, text.to_owned(), true));
                    break;
                }
            }
        }
        CallSubjects { items }
    }
}

fn normalize_path(path: &str, workspace_root: Option<&Path>) -> (String, bool) {
    let mut candidate = PathBuf::from(path);
    if candidate.is_absolute() {
        match workspace_root.and_then(|root| candidate.strip_prefix(root).ok()) {
            Some(relative) => candidate = relative.to_path_buf(),
            None => return (path.to_owned(), false),
        }
    }
    let mut parts: Vec<String> = Vec::new();
    for component in candidate.components() {
        match component {
            Component::CurDir => {}
            Component::ParentDir => {
                if parts.pop().is_none() {
                    return (path.to_owned(), false);
                }
            }
            Component::Normal(part) => parts.push(part.to_string_lossy().into_owned()),
            Component::RootDir | Component::Prefix(_) => return (path.to_owned(), false),
        }
    }
    (parts.join("/"), true)
}
