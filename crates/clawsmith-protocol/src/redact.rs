//! Secret detection (A5), the one detector of clawsmith: the core masks displays with it before
//! anything shows them, and the store masks messages, events and journal arguments with it
//! before they reach the disk. It lives here, in the crate every other one depends on, because
//! both the store and the command logs of the sandbox need it and neither may depend on the
//! other; it is plain text processing (no I/O), like the rest of this crate.
//!
//! A small scanner, not a regex engine: it masks
//! - values after a secret-looking key (`password=…`, `"api_key": "…"`, `TOKEN: …`),
//! - `Bearer`/`Basic` credentials after an `Authorization` header,
//! - well-known token shapes (`sk-…`, `ghp_…`, `github_pat_…`, `xox?-…`, `glpat-…`, `AKIA…`),
//! - the password of a URL's user info (`https://user:secret@host`),
//! - PEM private key blocks,
//! - the secrets this process knows by value (a provider's API key, [`mask_known_secret`]),
//!   a short one only where it stands as a whole token (`known`'s token rule).
//!
//! It errs on the side of masking: a false positive costs a reader a few characters.

use std::borrow::Cow;

use serde::Serialize;

mod known;
mod masking;

pub use known::{MASKED_ANYWHERE_BYTES, mask_known_secret, mask_secret_value};

/// What replaces a secret.
pub const REDACTED: &str = "[REDACTED]";

/// The words that make a key secret anywhere in it, as one list: the detector looks them up by
/// first letter ([`secret_key_words_from`]), and a test checks that lookup holds exactly these.
/// Keys are field labels, JSON keys and environment variable names alike: the sandbox keeps
/// every variable this detector calls secret out of a command's environment, so a value the
/// logs would mask is never handed to a command either. `_key` names a key in a variable
/// (`STRIPE_KEY`, `SIGNING_KEY`) as `token` does a token.
#[cfg(test)]
const SECRET_KEY_WORDS: &[&str] = &[
    "password",
    "passwd",
    "pwd",
    "secret",
    "token",
    "api_key",
    "apikey",
    "api-key",
    "access_key",
    "accesskey",
    "private_key",
    "privatekey",
    "credential",
    "authorization",
    "auth_",
    "x-auth",
    "session_key",
    "cookie",
    "_key",
];

/// Endings that make a key secret only at its end: `_pat` is a personal access token in a
/// variable name (`GITHUB_PAT`, `AZURE_DEVOPS_PAT`) but the start of `_path` and `_pattern`
/// anywhere else.
const SECRET_KEY_ENDINGS: &[&str] = &["_pat"];

const TOKEN_PREFIXES: &[&str] = &[
    "sk-",
    "sk_live_",
    "sk_test_",
    "rk_live_",
    "ghp_",
    "gho_",
    "ghu_",
    "ghs_",
    "ghr_",
    "github_pat_",
    "xoxb-",
    "xoxp-",
    "xoxa-",
    "xoxs-",
    "glpat-",
    "AKIA",
    "ASIA",
    "AIza",
    "npm_",
    "hf_",
];

/// Whether a label names a secret (field labels, JSON keys, env var names): it holds one of the
/// words of `SECRET_KEY_WORDS` or ends with one of `SECRET_KEY_ENDINGS`, in any case.
pub fn is_secret_key(key: &str) -> bool {
    // ASCII case-insensitive substring search without allocating: it runs at every `=` and `:`
    // of every masked text and at every string-valued key of every stored JSON object, and keys
    // are short. Only the words starting with a position's letter are tried there (trying
    // every word at every position was ~3.5% of the pipeline pair's samples).
    let key = key.as_bytes();
    let secret_ending = SECRET_KEY_ENDINGS.iter().any(|ending| {
        key.len() >= ending.len()
            && key[key.len() - ending.len()..].eq_ignore_ascii_case(ending.as_bytes())
    });
    secret_ending
        || (0..key.len()).any(|start| {
            let rest = &key[start..];
            secret_key_words_from(rest[0]).iter().any(|word| {
                rest.get(..word.len())
                    .is_some_and(|window| window.eq_ignore_ascii_case(word.as_bytes()))
            })
        })
}

/// The words of [`SECRET_KEY_WORDS`] that start with `byte` (either case).
fn secret_key_words_from(byte: u8) -> &'static [&'static str] {
    match byte.to_ascii_lowercase() {
        b'a' => &[
            "api_key",
            "apikey",
            "api-key",
            "access_key",
            "accesskey",
            "authorization",
            "auth_",
        ],
        b'c' => &["credential", "cookie"],
        b'p' => &["password", "passwd", "pwd", "private_key", "privatekey"],
        b's' => &["secret", "session_key"],
        b't' => &["token"],
        b'x' => &["x-auth"],
        b'_' => &["_key"],
        _ => &[],
    }
}

/// Masks secrets in `text`.
pub fn redact_text(text: &str) -> String {
    redact(text).into_owned()
}

/// [`redact_text`] of a text the caller owns: the same `String` back when nothing is masked (no
/// copy, no allocation: a 4 KB file's display body would otherwise be copied at every call).
pub fn redact_owned(text: String) -> String {
    match redact(&text) {
        Cow::Borrowed(_) => text,
        Cow::Owned(masked) => masked,
    }
}

/// [`redact_text`] without a copy when nothing is masked (the common case: one pass over the
/// text per detector, no allocation).
pub fn redact(text: &str) -> Cow<'_, str> {
    // Known secrets first: the other detectors may mask around a key and hide its shape.
    let text = chain(Cow::Borrowed(text), known::redact_known_secrets);
    let text = chain(text, redact_pem);
    let text = chain(text, redact_url_userinfo);
    let text = chain(text, redact_key_values);
    chain(text, redact_token_shapes)
}

/// Applies one detector, keeping the borrow when it changes nothing.
fn chain<'a>(text: Cow<'a, str>, detector: fn(&str) -> Option<String>) -> Cow<'a, str> {
    match detector(&text) {
        Some(masked) => Cow::Owned(masked),
        None => text,
    }
}

/// Masks secrets in every string of a JSON value, and every value under a secret-named key.
pub fn redact_json(value: &serde_json::Value) -> serde_json::Value {
    let mut value = value.clone();
    redact_json_in_place(&mut value);
    value
}

/// [`redact_json`] on the value itself: only the strings that hold a secret are replaced.
pub fn redact_json_in_place(value: &mut serde_json::Value) {
    match value {
        serde_json::Value::String(text) => {
            if let Cow::Owned(masked) = redact(text) {
                *text = masked;
            }
        }
        serde_json::Value::Array(items) => items.iter_mut().for_each(redact_json_in_place),
        serde_json::Value::Object(map) => {
            for (key, inner) in map.iter_mut() {
                if is_secret_key(key) && inner.is_string() {
                    *inner = serde_json::Value::String(REDACTED.to_owned());
                } else {
                    redact_json_in_place(inner);
                }
            }
        }
        _ => {}
    }
}

/// `value` as compact JSON text with every string masked, in one pass: the same JSON as
/// `serde_json::to_string(&redact_json(&serde_json::to_value(value)?))` (the same text where
/// `serde_json` keeps object keys in their order, as every clawsmith binary builds it), without
/// building the `serde_json::Value` tree in between.
pub fn to_redacted_json<T: Serialize + ?Sized>(value: &T) -> serde_json::Result<String> {
    masking::to_masked_json(value, None)
}

/// [`to_redacted_json`] with the outermost object's field `field`, when it holds `text`, written
/// as it is: for a text the caller has just masked with this same detector (a tool message
/// whose text is the core's masked display body), which a second pass would only scan again.
/// The JSON's buffer is allocated once for `text`, and `text` is escaped eight bytes at a time.
/// A field holding anything else is masked as [`to_redacted_json`] masks it.
pub fn to_redacted_json_except<T: Serialize + ?Sized>(
    value: &T,
    field: &str,
    text: &str,
) -> serde_json::Result<String> {
    masking::to_masked_json(value, Some((field, text)))
}

/// Each detector returns `None` when it masks nothing.
fn redact_pem(text: &str) -> Option<String> {
    const BEGIN: &str = "-----BEGIN ";
    memchr::memmem::find(text.as_bytes(), BEGIN.as_bytes())?;
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find(BEGIN) {
        let header_end = rest[start..].find("-----\n").or_else(|| {
            rest[start + BEGIN.len()..]
                .find("-----")
                .map(|p| p + BEGIN.len())
        });
        let Some(header_end) = header_end else { break };
        let header = &rest[start..start + header_end];
        if !header.contains("PRIVATE KEY") {
            out.push_str(&rest[..start + header_end]);
            rest = &rest[start + header_end..];
            continue;
        }
        out.push_str(&rest[..start]);
        out.push_str(REDACTED);
        match rest[start..].find("-----END ") {
            Some(end) => {
                let after = &rest[start + end + "-----END ".len()..];
                let close = after.find("-----").map_or(after.len(), |p| p + 5);
                rest = &after[close..];
            }
            None => {
                rest = "";
            }
        }
    }
    out.push_str(rest);
    (out != text).then_some(out)
}

fn redact_url_userinfo(text: &str) -> Option<String> {
    // `@` first: rarer than `://` in most texts, and one byte is the fastest search.
    if memchr::memchr(b'@', text.as_bytes()).is_none()
        || memchr::memmem::find(text.as_bytes(), b"://").is_none()
    {
        return None;
    }
    let mut out = String::with_capacity(text.len());
    let mut changed = false;
    let mut rest = text;
    while let Some(position) = rest.find("://") {
        let after = position + 3;
        out.push_str(&rest[..after]);
        rest = &rest[after..];
        let authority_end = rest
            .find(|c: char| c == '/' || c.is_whitespace() || c == '"' || c == '\'')
            .unwrap_or(rest.len());
        let authority = &rest[..authority_end];
        if let Some(at) = authority.rfind('@')
            && let Some(colon) = authority[..at].find(':')
        {
            out.push_str(&authority[..=colon]);
            out.push_str(REDACTED);
            out.push_str(&authority[at..]);
            rest = &rest[authority_end..];
            changed = true;
        }
    }
    out.push_str(rest);
    changed.then_some(out)
}

/// `key=value`, `key: value`, `"key": "value"` with a secret-looking key.
fn redact_key_values(text: &str) -> Option<String> {
    let bytes = text.as_bytes();
    let mut out: Option<String> = None;
    let mut copied = 0;
    let mut index = 0;
    while index < bytes.len() {
        let byte = bytes[index];
        if byte != b'=' && byte != b':' {
            index = next_separator(bytes, index + 1);
            continue;
        }
        // The key: identifier characters (and one closing quote) right before the separator.
        let mut key_end = index;
        if key_end > 0 && (bytes[key_end - 1] == b'"' || bytes[key_end - 1] == b'\'') {
            key_end -= 1;
        }
        let mut key_start = key_end;
        while key_start > 0 && is_key_byte(bytes[key_start - 1]) {
            key_start -= 1;
        }
        let key = &text[key_start..key_end];
        // Skip `://` (URLs) and `==`.
        let is_url = byte == b':' && text[index..].starts_with("://");
        if key.is_empty() || is_url || !is_secret_key(key) {
            index += 1;
            continue;
        }
        // The value: after optional spaces and an optional quote, up to the closing quote or
        // whitespace / separator.
        let mut value_start = index + 1;
        while value_start < bytes.len() && bytes[value_start] == b' ' {
            value_start += 1;
        }
        let quote = bytes
            .get(value_start)
            .copied()
            .filter(|b| *b == b'"' || *b == b'\'');
        if quote.is_some() {
            value_start += 1;
        }
        // `Authorization: Bearer xyz`: keep the scheme word, mask the credential.
        let scheme_end = ["Bearer ", "Basic ", "bearer ", "basic ", "Token ", "token "]
            .iter()
            .find(|scheme| text[value_start..].starts_with(**scheme))
            .map(|scheme| value_start + scheme.len());
        if let Some(end) = scheme_end {
            value_start = end;
        }
        let mut value_end = value_start;
        while value_end < bytes.len() {
            let b = bytes[value_end];
            let stop = match quote {
                Some(q) => b == q || b == b'\n',
                None => b.is_ascii_whitespace() || matches!(b, b',' | b';' | b'&' | b'\'' | b'"'),
            };
            if stop {
                break;
            }
            value_end += 1;
        }
        if value_end > value_start {
            let out = out.get_or_insert_with(|| String::with_capacity(text.len()));
            out.push_str(&text[copied..value_start]);
            out.push_str(REDACTED);
            copied = value_end;
        }
        index = value_end.max(index + 1);
    }
    let mut out = out?;
    out.push_str(&text[copied..]);
    Some(out)
}

/// The first index at or after `from` that holds `=` or `:` (or the end): a vectorised search
/// (`memchr2`), as most of a long text has no separator.
fn next_separator(bytes: &[u8], from: usize) -> usize {
    bytes
        .get(from..)
        .and_then(|rest| memchr::memchr2(b'=', b':', rest))
        .map_or(bytes.len(), |offset| from + offset)
}

fn is_key_byte(byte: u8) -> bool {
    byte.is_ascii_alphanumeric() || byte == b'_' || byte == b'-' || byte == b'.'
}

/// The characters a token is made of (all ASCII, so words split on byte boundaries).
fn is_token_byte(byte: u8) -> bool {
    byte.is_ascii_alphanumeric() || matches!(byte, b'_' | b'-' | b'.' | b'/' | b'+' | b'=')
}

fn redact_token_shapes(text: &str) -> Option<String> {
    let bytes = text.as_bytes();
    let mut out: Option<String> = None;
    let mut copied = 0;
    let mut index = 0;
    // A token starts where a word starts or right after a separator inside a word (`missing-AKIA…`,
    // `path/ghp_…`, so a prefix glued to a token does not hide it): wherever the byte before is
    // not a letter or digit. It runs to the end of its word, which is masked from there.
    while index < bytes.len() {
        let byte = bytes[index];
        if !TOKEN_FIRST_BYTES[usize::from(byte)]
            || (index > 0 && bytes[index - 1].is_ascii_alphanumeric())
        {
            index += 1;
            continue;
        }
        let rest = &bytes[index..];
        if !TOKEN_PREFIXES
            .iter()
            .any(|prefix| rest.starts_with(prefix.as_bytes()))
        {
            index += 1;
            continue;
        }
        let word_end = rest
            .iter()
            .position(|byte| !is_token_byte(*byte))
            .map_or(bytes.len(), |length| index + length);
        if looks_like_token(&text[index..word_end]) {
            let out = out.get_or_insert_with(|| String::with_capacity(text.len()));
            out.push_str(&text[copied..index]);
            out.push_str(REDACTED);
            copied = word_end;
            index = word_end;
        } else {
            index += 1;
        }
    }
    let mut out = out?;
    out.push_str(&text[copied..]);
    Some(out)
}

/// The first bytes of [`TOKEN_PREFIXES`], as a table: most positions are rejected by one load.
const TOKEN_FIRST_BYTES: [bool; 256] = {
    let mut table = [false; 256];
    let mut index = 0;
    while index < TOKEN_PREFIXES.len() {
        table[TOKEN_PREFIXES[index].as_bytes()[0] as usize] = true;
        index += 1;
    }
    table
};

fn looks_like_token(word: &str) -> bool {
    TOKEN_PREFIXES.iter().any(|prefix| {
        word.starts_with(prefix)
            && word.len() >= prefix.len() + 12
            && word[prefix.len()..]
                .bytes()
                .filter(|b| b.is_ascii_alphanumeric())
                .count()
                >= 12
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn masks_secret_shapes() {
        let cases = [
            ("password=hunter2 next", "password=[REDACTED] next"),
            ("DB_PASSWORD: s3cr3t", "DB_PASSWORD: [REDACTED]"),
            (
                r#"{"api_key": "abc123", "x": 1}"#,
                r#"{"api_key": "[REDACTED]", "x": 1}"#,
            ),
            (
                "Authorization: Bearer abc.def.ghi",
                "Authorization: Bearer [REDACTED]",
            ),
            (
                "GITHUB_TOKEN=ghp_abcdefghijklmnopqrstuvwxyz0123456789",
                "GITHUB_TOKEN=[REDACTED]",
            ),
            ("use sk-abcdefghijklmnopqrstuvwx now", "use [REDACTED] now"),
            ("key AKIAABCDEFGHIJKLMNOP", "key [REDACTED]"),
            (
                "Read missing-AKIAABCDEFGHIJKLMNOP",
                "Read missing-[REDACTED]",
            ),
            (
                "cat logs/ghp_abcdefghijklmnopqrstuvwxyz0123456789",
                "cat logs/[REDACTED]",
            ),
            (
                "git clone https://bob:pa55@example.com/x",
                "git clone https://bob:[REDACTED]@example.com/x",
            ),
            (
                "a\n-----BEGIN RSA PRIVATE KEY-----\nMIIB\n-----END RSA PRIVATE KEY-----\nb",
                "a\n[REDACTED]\nb",
            ),
        ];
        for (input, expected) in cases {
            assert_eq!(redact_text(input), expected, "input: {input}");
        }
    }

    #[test]
    fn clean_text_is_not_copied() {
        for input in ["exit code: 0", "fn main() { let token_count = 3; }", ""] {
            assert!(matches!(redact(input), Cow::Borrowed(_)), "input: {input}");
        }
        assert!(matches!(redact("token=abc"), Cow::Owned(_)));
        let clean = String::from("exit code: 0");
        let pointer = clean.as_ptr();
        let kept = redact_owned(clean);
        assert_eq!((kept.as_ptr(), kept.as_str()), (pointer, "exit code: 0"));
        assert_eq!(redact_owned("token=abc".to_owned()), "token=[REDACTED]");
    }

    #[test]
    fn json_is_masked_in_place() {
        let mut value = serde_json::json!({
            "note": "password=hunter2",
            "api_key": "abc",
            "list": ["ok", "Authorization: Bearer xyz"],
            "n": 3,
        });
        redact_json_in_place(&mut value);
        assert_eq!(
            value,
            serde_json::json!({
                "note": "password=[REDACTED]",
                "api_key": "[REDACTED]",
                "list": ["ok", "Authorization: Bearer [REDACTED]"],
                "n": 3,
            })
        );
    }

    #[test]
    fn the_separator_search_finds_what_a_look_at_every_byte_finds() {
        let texts = [
            "",
            "=",
            "no separator here at all, none in the whole of this longer text",
            "a:b=c",
            "0123456789abcdef:0123456789abcdef=",
            "é→:ü=ß",
        ];
        for text in texts {
            for from in 0..=text.len() + 1 {
                let naive = (from..text.len())
                    .find(|at| matches!(text.as_bytes()[*at], b'=' | b':'))
                    .unwrap_or(text.len());
                assert_eq!(
                    next_separator(text.as_bytes(), from),
                    naive,
                    "{text:?} {from}"
                );
            }
        }
    }

    #[test]
    fn leaves_ordinary_text_alone() {
        let cases = [
            "exit code: 0",
            "src/main.rs:12: fn main() {}",
            "https://example.com/path?q=1",
            "ratio = 3",
            "the sky-is-blue",
            "-----BEGIN CERTIFICATE-----",
        ];
        for input in cases {
            assert_eq!(redact_text(input), input);
        }
    }

    #[test]
    fn secret_names() {
        // (name, secret): labels, JSON keys and environment variable names alike; the sandbox
        // keeps exactly the secret ones out of commands.
        let table = [
            ("TOKEN", true),
            ("token", true),
            ("GITHUB_TOKEN", true),
            ("NPM_TOKEN", true),
            ("GITHUB_PAT", true),
            ("azure_devops_pat", true),
            ("AWS_SECRET_ACCESS_KEY", true),
            ("OPENAI_API_KEY", true),
            ("STRIPE_KEY", true),
            ("SIGNING_KEY", true),
            ("SSH_PRIVATE_KEY", true),
            ("DB_PASSWORD", true),
            ("MYSQL_PWD", true),
            ("GOOGLE_APPLICATION_CREDENTIALS", true),
            ("MY_SECRET_THING", true),
            ("SESSION_COOKIE", true),
            ("apiKey", true),
            ("x-auth-token", true),
            ("PATH", false),
            ("HOME", false),
            ("LANG", false),
            ("LC_ALL", false),
            ("TERM", false),
            ("CARGO_HOME", false),
            ("GOPATH", false),
            ("PKG_CONFIG_PATH", false),
            ("file_path", false),
            ("glob_pattern", false),
            ("KEYBOARD", false),
            ("KEY", false),
            ("MONKEY", false),
            ("XAUTHORITY", false),
            ("name", false),
        ];
        for (name, secret) in table {
            assert_eq!(is_secret_key(name), secret, "{name}");
        }
    }
}
