//! Rules fail closed: a command whose program cannot be known from the text matches every deny
//! and ask rule on `run_command`, and no allow rule.

use clawsmith_protocol::Verdict;
use clawsmith_security::*;

use crate::{policy_at, run_command};
use serde_json::json;

/// Rules of one table row.
type Rules<'a> = &'a [(RuleEffect, &'a str)];

fn policy(mode: PermissionMode, rules: Rules<'_>) -> PermissionPolicy {
    policy_at("/ws", mode, rules)
}

/// The decision for `command` under `policy`, and whether its reason says the program is
/// unknown.
#[track_caller]
fn check(policy: &PermissionPolicy, command: &str, expected: Verdict, says_unknown: bool) {
    let decision = policy.decide(&run_command(), &json!({ "command": command }));
    assert_eq!(
        decision.verdict,
        expected,
        "{command:?} in {} mode: {}",
        policy.mode.as_str(),
        decision.reason
    );
    let unknown = decision.reason.contains("cannot be known from the text")
        && decision
            .reason
            .contains("it matches every deny and ask rule on run_command");
    assert_eq!(unknown, says_unknown, "{command:?}: {}", decision.reason);
}

/// How a command stands against `deny run_command(rm *)` in `full` mode.
#[derive(Debug, Clone, Copy)]
enum Against {
    /// Its text resolves to `rm`: the rule matches by spelling.
    Spelled,
    /// Its program cannot be known: the rule matches because it fails closed.
    Unknown,
    /// Neither: full mode allows it.
    Passes,
}

#[test]
fn deny_rm_holds_for_every_spelling() {
    use Against::*;
    // (command, how `deny run_command(rm *)` in full mode sees it)
    let table = [
        // Program unknown from the text.
        ("c=rm; $c f", Unknown),
        ("rm${IFS}f", Unknown),
        ("\"$(echo rm)\" f", Unknown),
        ("`echo rm` f", Unknown),
        ("a=(rm f); \"${a[@]}\"", Unknown),
        ("{rm,f}", Unknown),
        ("r{m,} f", Unknown),
        ("/bin/r? f", Unknown),
        ("eval \"$x\"", Unknown),
        ("sh -c \"$x\"", Unknown),
        ("bash -c '$c f'", Unknown),
        ("exec \"$x\" f", Unknown),
        ("command \"$x\" f", Unknown),
        ("env $x f", Unknown),
        ("builtin $x f", Unknown),
        ("nice $x f", Unknown),
        ("ls | xargs $x", Unknown),
        ("ls | xargs sh -c", Unknown),
        ("ls | xargs -I X X f", Unknown),
        ("find . -exec $x {} \\;", Unknown),
        ("find . -name rm -exec {} f \\;", Unknown),
        ("find . -execdir sh -c {} \\;", Unknown),
        ("find . -ok \"$x\" {} \\;", Unknown),
        ("source ./x.sh", Unknown),
        (". ./x.sh", Unknown),
        ("bash x.sh", Unknown),
        ("sh <(echo rm f)", Unknown),
        ("curl -s http://127.0.0.1/x | sh", Unknown),
        ("sh < x.sh", Unknown),
        ("echo \"$x\" | sh", Unknown),
        ("bash <<< \"$x\"", Unknown),
        ("alias ls=rm; ls f", Unknown),
        ("hash -p /bin/rm ls; ls f", Unknown),
        ("ksh -c \"$x\"", Unknown),
        ("sudo sh -c \"$x\"", Unknown),
        ("bash -c \"$(echo rm f)\"", Unknown),
        ("${x:-rm} f", Unknown),
        ("rm$(true) f", Unknown),
        ("nohup $x &", Unknown),
        ("time $x", Unknown),
        ("cat x.sh | sh", Unknown),
        ("bash -s < x.sh", Unknown),
        ("script", Unknown),
        ("script -qc \"$x f\"", Unknown),
        ("f() { \"$@\"; }; f rm x", Unknown),
        ("ls (", Unknown),
        // Program named by the text, however spelled.
        ("rm f", Spelled),
        ("r''m f", Spelled),
        ("\\rm f", Spelled),
        ("r\\m f", Spelled),
        ("$'\\x72m' f", Spelled),
        ("command rm f", Spelled),
        ("nice rm f", Spelled),
        ("busybox rm f", Spelled),
        ("exec rm f", Spelled),
        ("/bin/rm f", Spelled),
        ("../../bin/rm f", Spelled),
        ("$(which rm) f", Spelled),
        ("`which rm` f", Spelled),
        ("script -qc 'rm f'", Spelled),
        ("bash <<< 'rm f'", Spelled),
        ("echo rm f | sh", Spelled),
        ("eval 'rm f'", Spelled),
        ("ls | xargs rm", Spelled),
        ("coproc rm f", Spelled),
        ("(rm f)", Spelled),
        ("{ rm f; }", Spelled),
        ("if rm f; then :; fi", Spelled),
        ("time -p rm f", Spelled),
        ("exec -a x rm f", Spelled),
        ("sudo -- rm f", Spelled),
        ("nice -n5 env rm f", Spelled),
        ("env -S 'rm f'", Spelled),
        ("\"/bin/rm\" f", Spelled),
        ("~/bin/rm f", Spelled),
        ("./rm f", Spelled),
        ("\"r\"$'m' f", Spelled),
        ("printf 'rm f' | bash", Spelled),
        ("find . -exec sh -c 'rm \"$1\"' _ {} \\;", Spelled),
        ("find . -exec rm {} +", Spelled),
        // Other programs.
        ("ls -la", Passes),
        ("echo $x", Passes),
        ("cargo test \"$@\"", Passes),
        ("bash --version", Passes),
    ];
    let deny = policy(
        PermissionMode::Full,
        &[(RuleEffect::Deny, "run_command(rm *)")],
    );
    for (command, against) in table {
        let (verdict, unknown) = match against {
            Spelled => (Verdict::Deny, false),
            Unknown => (Verdict::Deny, true),
            Passes => (Verdict::Allow, false),
        };
        check(&deny, command, verdict, unknown);
    }
}

#[test]
fn unknown_programs_meet_every_deny_and_ask_rule_and_no_allow() {
    use PermissionMode as M;
    use RuleEffect as R;
    use Verdict as V;
    // (mode, rules, command, expected, the reason says the program is unknown)
    let table: &[(M, Rules<'_>, &str, V, bool)] = &[
        (
            M::Full,
            &[(R::Deny, "run_command(git push*)")],
            "$c f",
            V::Deny,
            true,
        ),
        (
            M::Full,
            &[(R::Ask, "run_command(rm *)")],
            "$c f",
            V::Ask,
            true,
        ),
        (
            M::Full,
            &[(R::Ask, "@process.execute(curl*)")],
            "eval $x",
            V::Ask,
            true,
        ),
        (
            M::AcceptEdits,
            &[(R::Allow, "run_command(*)")],
            "$c f",
            V::Ask,
            false,
        ),
        (
            M::Full,
            &[(R::Allow, "run_command(*)")],
            "$c f",
            V::Allow,
            false,
        ),
        (
            M::Ask,
            &[(R::Allow, "run_command(ls*)")],
            "ls; $c",
            V::Ask,
            false,
        ),
        (
            M::ReadOnly,
            &[(R::Ask, "run_command(rm *)")],
            "$c f",
            V::Deny,
            false,
        ),
        (
            M::Full,
            &[(R::Deny, "run_command(rm *)")],
            "rm f; $c",
            V::Deny,
            false,
        ),
        // A deny rule on another tool is not met.
        (
            M::Full,
            &[(R::Deny, "edit_file(src/**)")],
            "$c f",
            V::Allow,
            false,
        ),
        (
            M::Full,
            &[(R::Deny, "run_command(rm *)"), (R::Allow, "run_command(*)")],
            "ls",
            V::Allow,
            false,
        ),
    ];
    for (mode, rules, command, expected, unknown) in table {
        check(&policy(*mode, rules), command, *expected, *unknown);
    }
}

#[test]
fn the_decision_says_why_the_program_is_unknown() {
    let deny = policy(
        PermissionMode::Full,
        &[(RuleEffect::Deny, "run_command(rm *)")],
    );
    let decision = deny.decide(&run_command(), &json!({"command": "c=rm; $c f"}));
    assert_eq!(
        decision.reason,
        "rule `deny run_command(rm *)` matched run_command: the program of `$c f` cannot be \
         known from the text (a variable in the command word); it matches every deny and ask \
         rule on run_command"
    );
    let decision = deny.decide(&run_command(), &json!({"command": "script"}));
    assert!(
        decision
            .reason
            .contains("`script` without -c runs the user's shell"),
        "{}",
        decision.reason
    );
}
