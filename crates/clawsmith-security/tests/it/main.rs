//! Tables of capability declarations, risks and permission rules.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod capabilities;
mod properties;
mod protected;
mod repository;
mod rules;
mod unknown_programs;

use clawsmith_protocol::{Capability, CapabilityDeclaration, Risk};
use clawsmith_security::{PermissionMode, PermissionPolicy, Rule, RuleEffect, RuleSet, ToolFacts};

/// A policy with `mode`, `rules` and the workspace at `root`.
fn policy_at(root: &str, mode: PermissionMode, rules: &[(RuleEffect, &str)]) -> PermissionPolicy {
    let mut set = RuleSet::new();
    for (effect, text) in rules {
        set.push(Rule::parse(*effect, text).unwrap());
    }
    PermissionPolicy {
        mode,
        rules: set,
        workspace_root: Some(root.into()),
        ..PermissionPolicy::default()
    }
}

/// The facts of `run_command`.
fn run_command() -> ToolFacts {
    ToolFacts::from_declaration(
        "run_command",
        Risk::Execute,
        &CapabilityDeclaration::Declared(vec![Capability::ProcessExecute]),
    )
}
