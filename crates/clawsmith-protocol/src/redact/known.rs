//! Secrets this process knows by value (a provider's API key), masked wherever the detector
//! masks: in what is stored and shown, never in what is executed.
//!
//! A key can be a short ordinary word: local model servers take `x`, `k` or `ollama`. Masking
//! every substring of it would turn `box.txt` into `bo[REDACTED].t[REDACTED]t` in a stored
//! session. So the token rule:
//! - a secret of [`MASKED_ANYWHERE_BYTES`] bytes or more is masked wherever it appears (no
//!   ordinary word holds 16 bytes of a random key);
//! - a shorter one only where it stands as a whole token: the character before it and the one
//!   after it (when there are any) are neither alphanumeric (any script) nor `_` nor `-`. Key
//!   `x`: `ollama k x kx` keeps `kx` and `box.txt` and masks the lone `x`; key `ollama` masks
//!   `OLLAMA_HOST=ollama` only after the `=`, and not in `ollama-server` or `ollama_url`.
//!
//! The list is process-wide because every writer of state (the store, the sandbox's command
//! logs, the core's displays) calls the one detector without a context to carry it; a
//! provider adds its key when it is built ([`mask_known_secret`]) and none is ever removed.

use std::sync::RwLock;
use std::sync::atomic::{AtomicBool, Ordering};

use super::REDACTED;

/// A known secret at least this long is masked wherever it appears; a shorter one only as a
/// whole token.
pub const MASKED_ANYWHERE_BYTES: usize = 16;

static KNOWN_SECRETS: RwLock<Vec<Box<str>>> = RwLock::new(Vec::new());

/// Set once a secret is known: the detector's common case (none known) takes no lock.
static ANY_KNOWN: AtomicBool = AtomicBool::new(false);

/// Masks `secret` from now on in every text this process's detector masks (stored messages,
/// events, journal arguments, command logs, displays), by the token rule of this module. An
/// empty or blank secret is ignored.
pub fn mask_known_secret(secret: &str) {
    if secret.trim().is_empty() {
        return;
    }
    let mut known = KNOWN_SECRETS
        .write()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if !known.iter().any(|held| &**held == secret) {
        known.push(secret.into());
        // Longest first: a key holding another key as a token is masked whole.
        known.sort_by_key(|held| std::cmp::Reverse(held.len()));
    }
    ANY_KNOWN.store(true, Ordering::Release);
}

/// `text` with `secret` masked by the token rule, `None` when nothing is masked.
pub fn mask_secret_value(text: &str, secret: &str) -> Option<String> {
    if secret.is_empty() {
        return None;
    }
    let anywhere = secret.len() >= MASKED_ANYWHERE_BYTES;
    let mut out: Option<String> = None;
    let mut copied = 0;
    for (start, _) in text.match_indices(secret) {
        let end = start + secret.len();
        if start < copied {
            continue;
        }
        let whole_token = is_token_edge(text[..start].chars().next_back())
            && is_token_edge(text[end..].chars().next());
        if !(anywhere || whole_token) {
            continue;
        }
        let masked = out.get_or_insert_with(|| String::with_capacity(text.len()));
        masked.push_str(&text[copied..start]);
        masked.push_str(REDACTED);
        copied = end;
    }
    let mut masked = out?;
    masked.push_str(&text[copied..]);
    Some(masked)
}

/// The detector's step: every known secret masked, `None` when none is known or found.
pub(super) fn redact_known_secrets(text: &str) -> Option<String> {
    if !ANY_KNOWN.load(Ordering::Acquire) {
        return None;
    }
    let known = KNOWN_SECRETS
        .read()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let mut out: Option<String> = None;
    for secret in known.iter() {
        if let Some(masked) = mask_secret_value(out.as_deref().unwrap_or(text), secret) {
            out = Some(masked);
        }
    }
    out
}

/// Whether the character beside an occurrence (`None`: the text's edge) ends a token there.
fn is_token_edge(beside: Option<char>) -> bool {
    beside.is_none_or(|character| !(character.is_alphanumeric() || matches!(character, '_' | '-')))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(secret: &str, text: &str, expected: &str) {
        let masked = mask_secret_value(text, secret);
        assert_eq!(
            masked.as_deref().unwrap_or(text),
            expected,
            "secret {secret:?} in {text:?}"
        );
        // Nothing masked means no copy.
        assert_eq!(
            masked.is_none(),
            text == expected,
            "secret {secret:?} in {text:?}"
        );
    }

    #[test]
    fn short_secrets_are_masked_only_as_whole_tokens() {
        let cases = [
            ("x", "box.txt", "box.txt"),
            ("x", "ollama k x kx", "ollama k [REDACTED] kx"),
            ("x", "x", "[REDACTED]"),
            ("x", "key=x;", "key=[REDACTED];"),
            ("x", "xx x_y x-y é x", "xx x_y x-y é [REDACTED]"),
            ("x", "éx xé", "éx xé"),
            ("k", "mkdir -p made_dir", "mkdir -p made_dir"),
            ("k", "\"k\" k\nk", "\"[REDACTED]\" [REDACTED]\n[REDACTED]"),
            ("p", "mkdir -p made_dir", "mkdir -p made_dir"),
            ("ollama", "ollama k x kx", "[REDACTED] k x kx"),
            (
                "ollama",
                "ollama-server ollama_url OLLAMA_HOST=ollama",
                "ollama-server ollama_url OLLAMA_HOST=[REDACTED]",
            ),
            ("ollama", "Bearer ollama", "Bearer [REDACTED]"),
            ("", "anything", "anything"),
        ];
        for (secret, text, expected) in cases {
            check(secret, text, expected);
        }
    }

    #[test]
    fn long_secrets_are_masked_anywhere() {
        let key = "sk-local-0123456789abcdef";
        check(key, &format!("prefix{key}suffix"), "prefix[REDACTED]suffix");
        check(key, &format!("{key} {key}"), "[REDACTED] [REDACTED]");
        check(key, "sk-local-0123", "sk-local-0123");
    }

    #[test]
    fn a_known_secret_is_masked_by_the_detector() {
        // A secret no other test of this binary writes: the list is process-wide.
        let secret = "qz-known";
        assert_eq!(
            super::super::redact_text("use qz-known here"),
            "use qz-known here"
        );
        mask_known_secret(secret);
        mask_known_secret("   ");
        assert_eq!(
            super::super::redact_text("use qz-known here, not qz-knownish"),
            "use [REDACTED] here, not qz-knownish"
        );
    }
}
