//! The minimal environment of a command (C2): a fixed allow-list, the configured extras, a private
//! `TMPDIR`, and never anything that looks like a secret.
//!
//! A variable this process was told to withhold ([`withhold`]: the one the fleet store read its
//! connection string from) never reaches any process it starts, whatever name it has and
//! whatever an allow-list, a server's `env` entry or a pattern such as `LC_*` says: the rule
//! is the variable's identity, not a list of names that look secret.
//!
//! `TRACEPARENT` and `TRACESTATE` never come from the host, even when `env_allow` names them:
//! they name the calling tool call's span when the call is traced, and are unset
//! otherwise, so a command never reports under a parent that is not its caller.

use std::ffi::OsString;
use std::path::Path;

use clawsmith_protocol::TraceHeaders;

/// Variables every command gets from the host when they are set.
const BASE: &[&str] = &[
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "SHELL",
    "LANG",
    "LANGUAGE",
    "LC_*",
    "TERM",
    "TZ",
    "COLORTERM",
    "NO_COLOR",
    "CARGO_HOME",
    "RUSTUP_HOME",
    "RUSTUP_TOOLCHAIN",
    "GOPATH",
    "GOROOT",
    "GOMODCACHE",
    "GOCACHE",
    "JAVA_HOME",
    "NVM_DIR",
    "NVM_BIN",
    "PYENV_ROOT",
    "VIRTUAL_ENV",
    "CONDA_PREFIX",
    "PNPM_HOME",
    "BUN_INSTALL",
    "DENO_DIR",
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
];

/// Whether a variable name looks like it carries a secret; such a variable is never passed on,
/// whatever the allow-list says. It is the masker's rule, so a variable whose value the logs
/// would mask never reaches a command, and the list of secret words has one owner.
pub use clawsmith_protocol::redact::is_secret_key as looks_secret;

/// The variables this process withholds from every process it starts.
static WITHHELD: std::sync::RwLock<Vec<OsString>> = std::sync::RwLock::new(Vec::new());

/// From now on, `name` is left out of the environment of every process this one starts
/// (commands, MCP servers confined or not, hooks, language servers), whatever lists name it.
/// For variables this process read a credential from.
pub fn withhold(name: &str) {
    let mut withheld = WITHHELD
        .write()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if !withheld.iter().any(|known| known == name) {
        withheld.push(name.into());
    }
}

/// The credential held by the variable `name` (`None` when it is unset or empty), which from now
/// on is withheld from every process this one starts (see [`withhold`]): the one way clawsmith
/// reads a secret it was pointed at by name (a provider's API key, an MCP server's token, the
/// fleet store's connection string).
pub fn credential(name: &str) -> Option<String> {
    withhold(name);
    std::env::var(name).ok().filter(|value| !value.is_empty())
}

/// Whether `name` is withheld from every process this one starts (see [`withhold`]).
pub fn is_withheld(name: &std::ffi::OsStr) -> bool {
    WITHHELD
        .read()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .iter()
        .any(|known| known == name)
}

fn matches(pattern: &str, name: &str) -> bool {
    match pattern.strip_suffix('*') {
        Some(prefix) => name.starts_with(prefix),
        None => pattern == name,
    }
}

/// The environment for a command, from `host` (usually `std::env::vars_os()`).
pub fn command_environment(
    host: impl IntoIterator<Item = (OsString, OsString)>,
    allow: &[String],
    temp_dir: &Path,
    trace: Option<&TraceHeaders>,
) -> Vec<(OsString, OsString)> {
    let mut env: Vec<(OsString, OsString)> = host
        .into_iter()
        .filter(|(name, _)| {
            let Some(name) = name.to_str() else {
                return false;
            };
            !looks_secret(name)
                && !matches!(
                    name,
                    "TMPDIR" | "TMP" | "TEMP" | "TRACEPARENT" | "TRACESTATE"
                )
                && (BASE.iter().any(|p| matches(p, name)) || allow.iter().any(|p| matches(p, name)))
        })
        .collect();
    if !env.iter().any(|(name, _)| name == "PATH") {
        env.push(("PATH".into(), "/usr/local/bin:/usr/bin:/bin".into()));
    }
    if !env.iter().any(|(name, _)| name == "TERM") {
        env.push(("TERM".into(), "dumb".into()));
    }
    for name in ["TMPDIR", "TMP", "TEMP"] {
        env.push((name.into(), temp_dir.as_os_str().to_owned()));
    }
    if let Some(trace) = trace {
        env.push(("TRACEPARENT".into(), trace.traceparent.clone().into()));
        if let Some(state) = &trace.tracestate {
            env.push(("TRACESTATE".into(), state.clone().into()));
        }
    }
    env.sort();
    env
}

/// The author and committer variables git reads (`GIT_AUTHOR_NAME`, …) from the `[user]` name
/// and email of the user's git configuration (`~/.gitconfig`, else `~/.config/git/config`):
/// the built view shows neither file (they can hold tokens), and `git commit` in a command still
/// needs an identity. Only those two values are read, by a plain scan of the file (includes,
/// conditional sections and every other key are ignored); nothing here runs a program.
pub fn git_identity(home: &Path) -> Vec<(OsString, OsString)> {
    let text = ["/.gitconfig", "/.config/git/config"]
        .iter()
        .find_map(|file| std::fs::read(format!("{}{file}", home.display())).ok())
        .unwrap_or_default();
    let (name, email) = user_name_and_email(&String::from_utf8_lossy(&text));
    let mut env = Vec::new();
    for (value, variables) in [
        (name, ["GIT_AUTHOR_NAME", "GIT_COMMITTER_NAME"]),
        (email, ["GIT_AUTHOR_EMAIL", "GIT_COMMITTER_EMAIL"]),
    ] {
        if let Some(value) = value {
            for variable in variables {
                env.push((variable.into(), value.clone().into()));
            }
        }
    }
    env
}

/// `user.name` and `user.email` of a git config text (the last of each wins, as in git).
fn user_name_and_email(text: &str) -> (Option<String>, Option<String>) {
    let (mut name, mut email) = (None, None);
    let mut in_user = false;
    for line in text.lines() {
        let line = line.trim();
        if let Some(header) = line.strip_prefix('[') {
            let section = header.split(']').next().unwrap_or("").trim();
            in_user = section.eq_ignore_ascii_case("user");
            continue;
        }
        if !in_user {
            continue;
        }
        let Some((key, value)) = line.split_once('=') else {
            continue;
        };
        let value = value.split(['#', ';']).next().unwrap_or("").trim();
        let value = value.trim_matches('"').to_owned();
        if value.is_empty() || value.contains(['\n', '\0']) {
            continue;
        }
        match key.trim().to_ascii_lowercase().as_str() {
            "name" => name = Some(value),
            "email" => email = Some(value),
            _ => {}
        }
    }
    (name, email)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn git_identity_reads_the_user_section_only() {
        // (config text, name, email)
        let table = [
            (
                "[user]\n\tname = Ada L\n\temail = ada@example.invalid\n",
                Some("Ada L"),
                Some("ada@example.invalid"),
            ),
            (
                "[User]\nname = \"Ada\" # who\n[core]\nname = no\n",
                Some("Ada"),
                None,
            ),
            (
                "[credential]\nhelper = store\n[user]\nemail=a@b\n",
                None,
                Some("a@b"),
            ),
            ("[include]\npath = ~/.other\n", None, None),
            ("[user]\nname =\n", None, None),
        ];
        for (text, name, email) in table {
            let (found_name, found_email) = user_name_and_email(text);
            assert_eq!(found_name.as_deref(), name, "{text:?}");
            assert_eq!(found_email.as_deref(), email, "{text:?}");
        }
    }

    #[test]
    fn secrets_never_pass() {
        let host = [
            ("PATH", "/bin"),
            ("HOME", "/home/u"),
            ("GITHUB_TOKEN", "x"),
            ("AWS_SECRET_ACCESS_KEY", "x"),
            ("OPENAI_API_KEY", "x"),
            ("DB_PASSWORD", "x"),
            ("MY_SECRET_THING", "x"),
            ("RANDOM_VAR", "x"),
            ("LC_ALL", "C"),
            ("TMPDIR", "/tmp"),
            ("EXTRA_OK", "1"),
            ("EXTRA_TOKEN", "x"),
        ]
        .map(|(k, v)| (OsString::from(k), OsString::from(v)));
        let env = command_environment(host, &["EXTRA_*".to_owned()], Path::new("/p"), None);
        let names: Vec<_> = env.iter().map(|(k, _)| k.to_str().unwrap()).collect();
        assert_eq!(
            names,
            [
                "EXTRA_OK", "HOME", "LC_ALL", "PATH", "TEMP", "TERM", "TMP", "TMPDIR"
            ]
        );
        assert!(env.iter().any(|(k, v)| k == "TMPDIR" && v == "/p"));
    }

    #[test]
    fn exactly_the_names_the_masker_calls_secret_are_kept_out() {
        // (name, passed on when allow-listed)
        let table = [
            ("PATH", true),
            ("HOME", true),
            ("LANG", true),
            ("TERM", true),
            ("CARGO_HOME", true),
            ("KEYBOARD", true),
            ("PKG_CONFIG_PATH", true),
            ("TOKEN", false),
            ("GITHUB_TOKEN", false),
            ("GITHUB_PAT", false),
            ("AWS_SECRET_ACCESS_KEY", false),
            ("STRIPE_KEY", false),
            ("DB_PASSWORD", false),
            ("SSH_AUTH_SOCK", false),
            ("SESSION_COOKIE", false),
        ];
        let host = table.map(|(name, _)| (OsString::from(name), OsString::from("x")));
        let env = command_environment(host, &["*".to_owned()], Path::new("/p"), None);
        for (name, passed) in table {
            assert_eq!(env.iter().any(|(key, _)| key == name), passed, "{name}");
            assert_eq!(
                clawsmith_protocol::redact::is_secret_key(name),
                !passed,
                "{name}"
            );
        }
        // The variables every command gets are never taken for secrets.
        for name in BASE {
            assert!(!looks_secret(name), "{name}");
        }
    }

    #[test]
    fn trace_context_comes_from_the_call_never_from_the_host() {
        let host = [
            ("PATH", "/bin"),
            ("TRACEPARENT", "00-stale"),
            ("TRACESTATE", "stale=1"),
        ]
        .map(|(k, v)| (OsString::from(k), OsString::from(v)));
        // Even allow-listed, the host's values never pass.
        let allow = ["TRACE*".to_owned()];
        let trace = |pairs: &[(OsString, OsString)], name: &str| {
            pairs
                .iter()
                .find(|(key, _)| key == name)
                .map(|(_, value)| value.to_str().unwrap().to_owned())
        };
        let untraced = command_environment(host.clone(), &allow, Path::new("/p"), None);
        assert_eq!(trace(&untraced, "TRACEPARENT"), None);
        assert_eq!(trace(&untraced, "TRACESTATE"), None);
        let call = TraceHeaders {
            traceparent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01".to_owned(),
            tracestate: Some("rojo=1".to_owned()),
        };
        let traced = command_environment(host, &allow, Path::new("/p"), Some(&call));
        assert_eq!(
            trace(&traced, "TRACEPARENT").as_deref(),
            Some(call.traceparent.as_str())
        );
        assert_eq!(trace(&traced, "TRACESTATE").as_deref(), Some("rojo=1"));
    }
}
