//! A `[[hooks]]` entry as configuration files write it: the one shape `clawsmith.toml` and a
//! plugin's `clawsmith-plugin.toml` share, read with spans so an error names its line and
//! column, and the checks both apply before a [`CommandHook`] is built from it. Where the
//! command is looked up is each file's own business (beside `clawsmith.toml`, inside a plugin's
//! root), so the caller passes the resolved program.

use std::ops::Range;
use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;
use toml::Spanned;

use crate::hooks::CommandHook;

/// The longest `timeout_ms` a hook entry may set (ten minutes).
pub const MAX_HOOK_TIMEOUT_MS: u64 = 600_000;

/// One `[[hooks]]` table: `name`, `command`, optional `args` and `timeout_ms`; any other key is
/// an error.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HookEntry {
    /// The hook's name, shown in refusals.
    pub name: Spanned<String>,
    /// The program, as written.
    pub command: Spanned<String>,
    /// Its arguments.
    #[serde(default)]
    pub args: Vec<String>,
    /// How long it may take, in milliseconds (default
    /// [`DEFAULT_HOOK_TIMEOUT`](crate::DEFAULT_HOOK_TIMEOUT)).
    #[serde(default)]
    pub timeout_ms: Option<Spanned<u64>>,
}

/// What is wrong with a [`HookEntry`], and where in its file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HookEntryError {
    /// The byte span of the offending value.
    pub span: Range<usize>,
    /// What is wrong.
    pub message: String,
}

impl HookEntry {
    /// Refuses a blank `name` or `command`.
    pub fn check_name_and_command(&self) -> Result<(), HookEntryError> {
        for field in [&self.name, &self.command] {
            if field.get_ref().trim().is_empty() {
                return Err(HookEntryError {
                    span: field.span(),
                    message: "a hook needs a name and a command".to_owned(),
                });
            }
        }
        Ok(())
    }

    /// The hook `name` running `program` with `args`, with this entry's `timeout_ms` when it
    /// sets one; a timeout outside 1..=[`MAX_HOOK_TIMEOUT_MS`] is refused.
    pub fn hook(
        &self,
        name: impl Into<String>,
        program: impl Into<PathBuf>,
        args: Vec<String>,
    ) -> Result<CommandHook, HookEntryError> {
        let hook = CommandHook::new(name, program, args);
        let Some(timeout) = &self.timeout_ms else {
            return Ok(hook);
        };
        if !(1..=MAX_HOOK_TIMEOUT_MS).contains(timeout.get_ref()) {
            return Err(HookEntryError {
                span: timeout.span(),
                message: format!("timeout_ms must be between 1 and {MAX_HOOK_TIMEOUT_MS}"),
            });
        }
        Ok(hook.with_timeout(Duration::from_millis(*timeout.get_ref())))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Deserialize)]
    struct File {
        hooks: Vec<HookEntry>,
    }

    /// The checks of the one hook of `text`: `Err((the spanned text, message))` on a refusal,
    /// `Err(("", message))` when the file does not parse.
    fn check(text: &str) -> Result<(), (&str, String)> {
        let file: File =
            toml::from_str(text).map_err(|error| ("", error.message().trim().to_owned()))?;
        let entry = &file.hooks[0];
        entry
            .check_name_and_command()
            .and_then(|()| entry.hook("h", entry.command.get_ref(), entry.args.clone()))
            .map(drop)
            .map_err(|error| (&text[error.span], error.message))
    }

    #[test]
    fn entries() {
        let blank = "a hook needs a name and a command";
        let timeout = "timeout_ms must be between 1 and 600000";
        /// `Ok` or `Err((spanned text, part of the message))`.
        type Expected<'a> = Result<(), (&'a str, &'a str)>;
        // (file, expected)
        let table: [(&str, Expected<'_>); 8] = [
            ("[[hooks]]\nname = \"a\"\ncommand = \"c\"\n", Ok(())),
            (
                "[[hooks]]\nname = \"a\"\ncommand = \"c\"\nargs = [\"x\"]\ntimeout_ms = 5\n",
                Ok(()),
            ),
            (
                "[[hooks]]\nname = \" \"\ncommand = \"c\"\n",
                Err(("\" \"", blank)),
            ),
            (
                "[[hooks]]\nname = \"a\"\ncommand = \"\"\n",
                Err(("\"\"", blank)),
            ),
            (
                "[[hooks]]\nname = \"a\"\ncommand = \"c\"\ntimeout_ms = 0\n",
                Err(("0", timeout)),
            ),
            (
                "[[hooks]]\nname = \"a\"\ncommand = \"c\"\ntimeout_ms = 600001\n",
                Err(("600001", timeout)),
            ),
            (
                "[[hooks]]\nname = \"a\"\ncommand = \"c\"\nevent = \"x\"\n",
                Err(("", "unknown field `event`")),
            ),
            (
                "[[hooks]]\nname = \"a\"\n",
                Err(("", "missing field `command`")),
            ),
        ];
        for (text, expected) in table {
            match (check(text), expected) {
                (Ok(()), Ok(())) => {}
                (Err((spanned, message)), Err((want_spanned, part))) => {
                    assert_eq!(spanned, want_spanned, "{text}");
                    assert!(message.contains(part), "{text}: {message:?} lacks {part:?}");
                }
                (got, want) => panic!("{text}: got {got:?}, want {want:?}"),
            }
        }
    }
}
