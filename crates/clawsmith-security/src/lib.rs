//! # clawsmith-security
//!
//! Decides *whether* a tool call may run, never *how* it runs. Four pieces:
//!
//! - **Capability normalization** ([`normalize_capabilities`], S2). A typed declaration is
//!   taken as is; anything untrusted (a JSON declaration from an extension) must be an array of
//!   exact capability strings. Missing, `null`, another type, a non-string entry, an unknown or
//!   misspelled capability — each fails closed to *all* capabilities.
//! - **Effective risk** ([`effective_risk`], S1). Capabilities impose a floor (`filesystem.write`
//!   ⇒ `workspace-write`; `process.execute`, `network`, `credentials`, `external.side-effect` ⇒
//!   `execute`); the declared risk can only raise it. [`ToolFacts`] bundles name, declared and
//!   effective risk and the normalized set: what rules and hooks match on (S3).
//! - **Permission modes and rules** ([`PermissionPolicy`], S4). Modes give the default per
//!   effective risk (`read-only`, `ask`, `accept-edits`, `full`); [`Rule`]s override by tool name
//!   glob, capability (`@network`) and argument pattern (`run_command(git status*)`,
//!   `edit_file(src/**)`), evaluated deny → ask → allow.
//! - **Hook facts** ([`HookInput`], [`HookDecision`]) and the **authorization token**
//!   ([`authorize`], S5), which only an `allow` decision yields.
//!
//! ## Decisions
//! - *Fail closed, explain why.* A distrusted declaration is recorded with its reason
//!   ([`NormalizedCapabilities::failed_closed`]) so a refusal can say what was wrong.
//! - *Refusals are generous, allows are strict.* A command is read by `clawsmith-shell`, the
//!   one bash parse the disaster check uses too, into the simple commands it would run (through
//!   lists, substitutions, `bash -c` strings, `eval` and wrappers such as `env`, `timeout`,
//!   `xargs`, `sudo`, `find -exec`), unquoted and without leading assignments. A deny or ask rule
//!   with an argument pattern matches if any subject matches, for a command if its text or any
//!   simple command does (`git status; rm -rf x`, `\rm x`, `FOO=1 rm x` and `bash -c 'rm x'`
//!   are all caught by `deny run_command(rm *)`). An allow rule must cover the whole call: every
//!   path subject (both ends of a rename), and every simple command of a command as written,
//!   assignments included — otherwise `allow run_command(git status*)` would allow
//!   `git status; curl … | sh` or `LD_PRELOAD=… git status`. A script that did not parse
//!   completely, or that redirects output into a file, is never allowed by a rule.
//!   Paths are normalized lexically; a path that leaves the workspace is never allowed by a rule.
//! - *Rules fail closed.* A command whose program cannot be known from the text — a variable,
//!   substitution or expansion in the command word (`$c f`, `rm${IFS}f`, `"$(echo rm)" f`),
//!   `eval $x`, `sh -c "$x"`, `script` without `-c`, `source f`, a shell reading a script file or
//!   its standard input (`curl … | sh`), `xargs`/`find -exec` of an unknown name, `alias` — or a
//!   script that did not parse completely matches every deny and ask rule with an argument
//!   pattern (`deny run_command(rm *)`, `ask run_command(git push*)`) and no allow rule; the
//!   decision says which command and why. The fact comes from `clawsmith-shell`
//!   (`SimpleCommand::unknown_program`), which the disaster check reads too.
//! - *Repositories survive commands.* `undo` restores working files, not a repository's
//!   history, so a command that deletes, moves or overwrites a `.git` (`rm -rf .git`,
//!   `mv .git x`, `> .git/HEAD`) or recursively deletes at or above the workspace root
//!   (`rm -rf *`, `find . -delete`, `cd / && rm -rf *`, a `cd` to an unknown directory counting
//!   as the root) is asked about in every mode but `read-only` (which refuses it as any command),
//!   `full` included, unless a deny or ask rule decides first or an allow rule names what it
//!   aims at in its literal part (`allow run_command(rm -rf .git)`, `run_command(rm -rf \*)`;
//!   never `run_command(*)`). The reading is lexical (`repository.rs`).
//! - *`read-only` is a ceiling.* No allow or ask rule lifts a call above `read` in that mode.
//! - *`.git` is code.* Git runs hooks and config from `.git` outside any sandbox, so a tool that
//!   can write files and names a path in any `.git` (or a configured [`ProtectedPaths`] entry)
//!   is asked about like a command in every mode below `full`; `full` refuses the places git
//!   executes from (hooks, config, `commondir`, worktrees, module hooks and config, a `.git`
//!   entry itself). Only an allow rule whose pattern names the protected place lifts either —
//!   `edit_file(.git/config)`, never `edit_file(**)`. The check is lexical like the rules.
//! - *Hidden is hidden.* A call naming a path of [`PermissionPolicy::hidden_paths`] is refused
//!   in every mode, whatever the rules say, reads included.
//!
//! ## What this crate does not do
//! It runs no hooks and prompts no one (the core does), it never inspects files, and it does not
//! parse bash itself (`clawsmith-shell` does) nor judge what a command would do to the machine:
//! the disaster check that no approval can override lives in `clawsmith-sandbox`.
#![deny(missing_docs)]

mod capability;
mod hook;
mod permission;
mod protected;
mod repository;

pub use capability::{
    NormalizedCapabilities, ToolFacts, capability_floor, effective_risk, normalize_capabilities,
    risk_floor,
};
pub use hook::{HookDecision, HookInput, HookVerdict};
pub use permission::{
    CallSubjects, DecidedBy, Explanation, PermissionMode, PermissionPolicy, Rule, RuleConfig,
    RuleEffect, RuleError, RuleSet, authorize,
};
pub use protected::{PathSet, ProtectedPaths, Protection};
