//! A repository's config reduced to the keys on an allowlist of inert keys, read by git itself.
//!
//! A denylist of dangerous keys always misses one (`remote.*.uploadpack`, `url.*.insteadOf`,
//! `protocol.*.allow`, …), and a parser of our own disagrees with git's on the corners an attacker
//! picks (a value on the section-header line, quoting, continuation lines, invalid UTF-8). So the
//! config is listed by the host's git (`git config --no-includes --file X --list -z`, with no
//! system or global config and no inherited `GIT_*` variable: parsing a file runs nothing), only
//! the keys of [`INERT_KEYS`] are kept, and the file is written again in one plain form and read
//! back by git to check that it says exactly what was kept. A file git cannot read, a
//! subsection that cannot be written back, or no git at all replaces the file with
//! [`MINIMAL_CONFIG`]: what cannot be read is never kept.

use std::io::{self, Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::process::{Command, Stdio};

/// `section.key` (lowercase; `section.*.key` for any subsection) a cleaned config keeps: the
/// repository's format and layout, where its remotes are, what its branches track, who commits.
/// Nothing here makes git run a program, read more config, or look for hooks, objects or a work
/// tree elsewhere. Left out on purpose, among others: `core.fsmonitor`, `core.hooksPath`,
/// `core.sshCommand`, `core.editor`, `core.pager`, `core.worktree`, `extensions.worktreeConfig`
/// (makes git read `config.worktree`), `include.*`, `includeIf.*`, `remote.*.uploadpack`,
/// `remote.*.receivepack`, `remote.*.vcs`, `remote.*.proxy`, `protocol.*`, `http.*`, `url.*`,
/// `credential.*`, `diff.*`, `filter.*`, `merge.*`, `gpg.*`, `alias.*`, `submodule.*`.
pub(crate) const INERT_KEYS: &[&str] = &[
    "core.repositoryformatversion",
    "core.filemode",
    "core.bare",
    "core.logallrefupdates",
    "core.ignorecase",
    "core.precomposeunicode",
    "core.symlinks",
    "core.autocrlf",
    "core.eol",
    "extensions.objectformat",
    "extensions.refstorage",
    "remote.*.url",
    "remote.*.pushurl",
    "remote.*.fetch",
    "remote.*.push",
    "remote.*.tagopt",
    "branch.*.remote",
    "branch.*.pushremote",
    "branch.*.merge",
    "branch.*.rebase",
    "user.name",
    "user.email",
    "init.defaultbranch",
];

/// What replaces a config git cannot read: the format a fresh `git init` writes.
pub(crate) const MINIMAL_CONFIG: &str = "[core]\n\trepositoryformatversion = 0\n\tfilemode = true\n\tbare = false\n\tlogallrefupdates = true\n";

/// What cleaning one config did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Cleaned {
    /// Every key was inert; the file holds them in the plain form (unchanged if it already did).
    Kept,
    /// Written again with only the inert keys; the names of the keys removed (as git lists
    /// them: `core.fsmonitor`, `remote.origin.uploadpack`).
    Removed(Vec<String>),
    /// Replaced by [`MINIMAL_CONFIG`]; why (git could not read it, or is not there).
    Replaced(String),
}

/// One `key=value` as git lists it; `None` for a key without `=` (a boolean true).
type Entry = (Vec<u8>, Option<Vec<u8>>);

/// Reduces the config of the git dir `git` to its inert keys, listing it with the git at
/// `git_program`. The command may still be running (see the parent's `watch`): the config is
/// read without following a link, parsed and checked as private copies, and the result takes
/// its place by a rename, which replaces whatever is there without following it.
pub(crate) fn clean(git_program: &Path, git: &Path) -> io::Result<Cleaned> {
    let config = git.join("config");
    let original = read_regular(&config)?;
    let copy = private_copy(&original)?;
    let entries = match list(git_program, copy.path()) {
        Ok(entries) => entries,
        Err(reason) => {
            install(git, MINIMAL_CONFIG.as_bytes())?;
            return Ok(Cleaned::Replaced(reason));
        }
    };
    let (kept, removed): (Vec<Entry>, Vec<Entry>) =
        entries.into_iter().partition(|(key, _)| is_inert(key));
    let Some(text) = write_config(&kept) else {
        install(git, MINIMAL_CONFIG.as_bytes())?;
        return Ok(Cleaned::Replaced(
            "a subsection that cannot be written back".to_owned(),
        ));
    };
    if original != text {
        // Read back by git before it takes the config's place.
        let written = private_copy(&text)?;
        if list(git_program, written.path()).ok().as_ref() != Some(&kept) {
            install(git, MINIMAL_CONFIG.as_bytes())?;
            return Ok(Cleaned::Replaced(
                "git read the cleaned config differently".to_owned(),
            ));
        }
        install(git, &text)?;
    }
    if removed.is_empty() {
        return Ok(Cleaned::Kept);
    }
    let mut names: Vec<String> = removed
        .iter()
        .map(|(key, _)| String::from_utf8_lossy(key).into_owned())
        .collect();
    names.dedup();
    Ok(Cleaned::Removed(names))
}

/// The bytes of `path` if it is a regular file (not a link, FIFO or device), opened without
/// following a link and without blocking.
fn read_regular(path: &Path) -> io::Result<Vec<u8>> {
    let mut file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)?;
    if !file.metadata()?.is_file() {
        return Err(io::Error::other("not a regular file"));
    }
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes)?;
    Ok(bytes)
}

/// `bytes` in a private temporary file (outside the workspace), for git to read.
fn private_copy(bytes: &[u8]) -> io::Result<tempfile::NamedTempFile> {
    let mut file = tempfile::NamedTempFile::new()?;
    file.write_all(bytes)?;
    file.flush()?;
    Ok(file)
}

/// Puts `bytes` in place of the git dir's `config`: written to a new file beside it (created,
/// never opened through a link) and renamed over it.
fn install(git: &Path, bytes: &[u8]) -> io::Result<()> {
    let staged = git.join("config.clawsmith-clean");
    // Whatever the command left there (a link included) goes first; the new file is exclusive.
    let _ = std::fs::remove_file(&staged);
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .custom_flags(libc::O_NOFOLLOW)
        .mode(0o644)
        .open(&staged)?;
    file.write_all(bytes)?;
    drop(file);
    std::fs::rename(&staged, git.join("config"))
}

/// Whether git's name of a key (`section.key` or `section.subsection.key`, section and key
/// lowercase) is on [`INERT_KEYS`].
fn is_inert(key: &[u8]) -> bool {
    let Some((section, name, subsection)) = split_key(key) else {
        return false;
    };
    INERT_KEYS.iter().any(|pattern| {
        let mut parts = pattern.split('.');
        let (Some(want_section), Some(middle)) = (parts.next(), parts.next()) else {
            return false;
        };
        match (parts.next(), subsection) {
            (None, None) => section == want_section.as_bytes() && name == middle.as_bytes(),
            (Some(want_name), Some(_)) => {
                middle == "*" && section == want_section.as_bytes() && name == want_name.as_bytes()
            }
            _ => false,
        }
    })
}

/// A key's section, name and subsection (if any), as byte slices of git's name of it.
type KeyParts<'a> = (&'a [u8], &'a [u8], Option<&'a [u8]>);

/// `(section, key, subsection)` of git's name of a key: the section ends at the first dot, the
/// key starts after the last one, and a subsection (which may hold dots) is what lies between.
fn split_key(key: &[u8]) -> Option<KeyParts<'_>> {
    let first = key.iter().position(|&byte| byte == b'.')?;
    let last = key.iter().rposition(|&byte| byte == b'.')?;
    let subsection = (last > first).then(|| &key[first + 1..last]);
    Some((&key[..first], &key[last + 1..], subsection))
}

/// The entries of the config file `config` as git reads it, includes not followed.
fn list(git: &Path, config: &Path) -> Result<Vec<Entry>, String> {
    let path = std::env::var_os("PATH").unwrap_or_else(|| "/usr/bin:/bin".into());
    // The one program the sandbox crate runs outside a sandbox: git parsing a file, with no
    // system, global or inherited configuration, from `/` (no repository to discover).
    #[allow(clippy::disallowed_methods)]
    let output = Command::new(git)
        .args(["config", "--no-includes", "--list", "-z", "--file"])
        .arg(config)
        .env_clear()
        .env("PATH", path)
        .env("HOME", "/nonexistent")
        .env("XDG_CONFIG_HOME", "/nonexistent")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CEILING_DIRECTORIES", "/")
        .env("LC_ALL", "C")
        .current_dir("/")
        .stdin(Stdio::null())
        .stderr(Stdio::piped())
        .stdout(Stdio::piped())
        .output()
        .map_err(|error| format!("git ({}) could not run: {error}", git.display()))?;
    if !output.status.success() {
        let stderr = String::from_utf8_lossy(&output.stderr);
        return Err(format!(
            "git could not read it: {}",
            stderr.lines().next().unwrap_or("no message").trim()
        ));
    }
    Ok(output
        .stdout
        .split(|&byte| byte == 0)
        .filter(|record| !record.is_empty())
        .map(
            |record| match record.iter().position(|&byte| byte == b'\n') {
                Some(newline) => (
                    record[..newline].to_vec(),
                    Some(record[newline + 1..].to_vec()),
                ),
                None => (record.to_vec(), None),
            },
        )
        .collect())
}

/// The entries in the plain form: one header per run of keys of the same section, every
/// value quoted and escaped. `None` when a subsection cannot be written (a newline or NUL).
fn write_config(entries: &[Entry]) -> Option<Vec<u8>> {
    let mut text = Vec::new();
    let mut current: Option<(&[u8], Option<&[u8]>)> = None;
    for (key, value) in entries {
        let (section, name, subsection) = split_key(key)?;
        if current != Some((section, subsection)) {
            text.push(b'[');
            text.extend_from_slice(section);
            if let Some(subsection) = subsection {
                if subsection.iter().any(|&byte| byte == b'\n' || byte == 0) {
                    return None;
                }
                text.extend_from_slice(b" \"");
                escape(subsection, &mut text);
                text.push(b'"');
            }
            text.extend_from_slice(b"]\n");
            current = Some((section, subsection));
        }
        text.push(b'\t');
        text.extend_from_slice(name);
        if let Some(value) = value {
            text.extend_from_slice(b" = \"");
            escape(value, &mut text);
            text.push(b'"');
        }
        text.push(b'\n');
    }
    Some(text)
}

/// Appends `bytes` escaped for a quoted config value or subsection.
fn escape(bytes: &[u8], text: &mut Vec<u8>) {
    for &byte in bytes {
        match byte {
            b'\\' => text.extend_from_slice(b"\\\\"),
            b'"' => text.extend_from_slice(b"\\\""),
            b'\n' => text.extend_from_slice(b"\\n"),
            b'\t' => text.extend_from_slice(b"\\t"),
            b'\x08' => text.extend_from_slice(b"\\b"),
            other => text.push(other),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Cleans `input` with the host's git; the verdict and what git lists afterwards.
    fn check(git: &str, input: &[u8]) -> (Cleaned, String) {
        let dir = tempfile::tempdir().unwrap();
        let config = dir.path().join("config");
        std::fs::write(&config, input).unwrap();
        let cleaned = clean(Path::new(git), dir.path()).unwrap();
        let listed = list(Path::new("git"), &config).unwrap();
        let listed = listed
            .iter()
            .map(|(key, value)| {
                let key = String::from_utf8_lossy(key);
                match value {
                    Some(value) => format!("{key}={}", String::from_utf8_lossy(value)),
                    None => key.into_owned(),
                }
            })
            .collect::<Vec<_>>()
            .join(";");
        (cleaned, listed)
    }

    fn removed(names: &[&str]) -> Cleaned {
        Cleaned::Removed(names.iter().map(|name| (*name).to_owned()).collect())
    }

    #[test]
    fn only_inert_keys_survive_as_git_reads_them() {
        let minimal = "core.repositoryformatversion=0;core.filemode=true;core.bare=false;\
                       core.logallrefupdates=true";
        let cases: &[(&[u8], Cleaned, &str)] = &[
            (
                b"[core] fsmonitor = \"touch /x\"\n\tbare = false\n",
                removed(&["core.fsmonitor"]),
                "core.bare=false",
            ),
            (
                b"[core]\n\tbare = false\n\tfsmonitor = t\xffouch\n",
                removed(&["core.fsmonitor"]),
                "core.bare=false",
            ),
            (
                b"[remote \"origin\"]\n\turl = /r\n\tuploadpack = touch /x\n",
                removed(&["remote.origin.uploadpack"]),
                "remote.origin.url=/r",
            ),
            (
                b"[core]\n\tsshCommand = x\n[credential]\n\thelper = x\n[diff]\n\texternal = x\n\
                  [protocol \"ext\"]\n\tallow = always\n[http]\n\tproxy = x\n\
                  [url \"ext::x\"]\n\tinsteadOf = /r\n[include]\n\tpath = x\n\
                  [includeIf \"gitdir:/\"]\n\tpath = x\n[core]\n\thooksPath = /x\n\
                  [alias]\n\tst = !x\n",
                removed(&[
                    "core.sshcommand",
                    "credential.helper",
                    "diff.external",
                    "protocol.ext.allow",
                    "http.proxy",
                    "url.ext::x.insteadof",
                    "include.path",
                    "includeif.gitdir:/.path",
                    "core.hookspath",
                    "alias.st",
                ]),
                "",
            ),
            (
                b"[branch \"we\\\"ird\\\\ \"]\n\tremote = \"o\\trigin\"\n\tmerge = a\\\n b\n",
                Cleaned::Kept,
                "branch.we\"ird\\ .remote=o\trigin;branch.we\"ird\\ .merge=a b",
            ),
            (b"[user]\n\tname\n", Cleaned::Kept, "user.name"),
            (
                b"[core\n\tfsmonitor = x\n",
                Cleaned::Replaced(String::new()),
                minimal,
            ),
            (
                b"[core]\n\tbare = \"unterminated\n",
                Cleaned::Replaced(String::new()),
                minimal,
            ),
        ];
        for (input, verdict, after) in cases {
            let (cleaned, listed) = check("git", input);
            let cleaned = match cleaned {
                Cleaned::Replaced(_) => Cleaned::Replaced(String::new()),
                other => other,
            };
            assert_eq!(&cleaned, verdict, "{}", String::from_utf8_lossy(input));
            assert_eq!(listed, *after, "{}", String::from_utf8_lossy(input));
        }
    }

    #[test]
    fn without_git_every_config_is_replaced() {
        for input in [&b"[user]\n\tname = a\n"[..], b"[core]\n\tfsmonitor = x\n"] {
            let (cleaned, listed) = check("/nonexistent/git", input);
            assert!(
                matches!(&cleaned, Cleaned::Replaced(reason) if reason.contains("could not run")),
                "{cleaned:?}"
            );
            assert!(
                listed.starts_with("core.repositoryformatversion=0"),
                "{listed}"
            );
        }
    }

    #[test]
    fn the_allowlist_names_no_key_that_runs_or_redirects() {
        for key in [
            "core.fsmonitor",
            "core.hookspath",
            "core.sshcommand",
            "core.worktree",
            "extensions.worktreeconfig",
            "remote.origin.uploadpack",
            "remote.origin.receivepack",
            "remote.origin.vcs",
            "remote.origin.proxy",
            "submodule.x.update",
            "include.path",
            "includeif.onbranch:x.path",
            "core.x.bare",
            "remote.url",
        ] {
            assert!(!is_inert(key.as_bytes()), "{key}");
        }
        for key in [
            "core.bare",
            "remote.a.b.url",
            "branch.main.merge",
            "user.email",
        ] {
            assert!(is_inert(key.as_bytes()), "{key}");
        }
    }
}
