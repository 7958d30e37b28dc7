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
//! - PEM private key blocks.
//!
//! It errs on the side of masking: a false positive costs a reader a few characters.

/// What replaces a secret.
pub const REDACTED: &str = "[REDACTED]";

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
];

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

/// Whether a label names a secret (field labels, JSON keys, env var names).
pub fn is_secret_key(key: &str) -> bool {
    let key = key.to_ascii_lowercase();
    SECRET_KEY_WORDS.iter().any(|word| key.contains(word))
}

/// Masks secrets in `text`.
pub fn redact_text(text: &str) -> String {
    let text = redact_pem(text);
    let text = redact_url_userinfo(&text);
    let text = redact_key_values(&text);
    redact_token_shapes(&text)
}

/// Masks secrets in every string of a JSON value, and every value under a secret-named key.
pub fn redact_json(value: &serde_json::Value) -> serde_json::Value {
    match value {
        serde_json::Value::String(text) => serde_json::Value::String(redact_text(text)),
        serde_json::Value::Array(items) => {
            serde_json::Value::Array(items.iter().map(redact_json).collect())
        }
        serde_json::Value::Object(map) => serde_json::Value::Object(
            map.iter()
                .map(|(key, inner)| {
                    let inner = if is_secret_key(key) && inner.is_string() {
                        serde_json::Value::String(REDACTED.to_owned())
                    } else {
                        redact_json(inner)
                    };
                    (key.clone(), inner)
                })
                .collect(),
        ),
        scalar => scalar.clone(),
    }
}

fn redact_pem(text: &str) -> String {
    const BEGIN: &str = "-----BEGIN ";
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
    out
}

fn redact_url_userinfo(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
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
        }
    }
    out.push_str(rest);
    out
}

/// `key=value`, `key: value`, `"key": "value"` with a secret-looking key.
fn redact_key_values(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut copied = 0;
    let mut index = 0;
    while index < bytes.len() {
        let byte = bytes[index];
        if byte != b'=' && byte != b':' {
            index += 1;
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
            out.push_str(&text[copied..value_start]);
            out.push_str(REDACTED);
            copied = value_end;
        }
        index = value_end.max(index + 1);
    }
    out.push_str(&text[copied..]);
    out
}

fn is_key_byte(byte: u8) -> bool {
    byte.is_ascii_alphanumeric() || byte == b'_' || byte == b'-' || byte == b'.'
}

fn redact_token_shapes(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut word_start = None;
    let flush = |out: &mut String, word: &str| match token_start(word) {
        Some(start) => {
            out.push_str(&word[..start]);
            out.push_str(REDACTED);
        }
        None => out.push_str(word),
    };
    for (position, character) in text.char_indices() {
        let token_char = character.is_ascii_alphanumeric()
            || matches!(character, '_' | '-' | '.' | '/' | '+' | '=');
        match (token_char, word_start) {
            (true, None) => word_start = Some(position),
            (false, Some(start)) => {
                flush(&mut out, &text[start..position]);
                out.push(character);
                word_start = None;
            }
            (false, None) => out.push(character),
            (true, Some(_)) => {}
        }
    }
    if let Some(start) = word_start {
        flush(&mut out, &text[start..]);
    }
    out
}

/// Where a token starts in `word`: at its start or right after a separator inside it
/// (`missing-AKIA…`, `path/ghp_…`), so a prefix glued to a token does not hide it.
fn token_start(word: &str) -> Option<usize> {
    let bytes = word.as_bytes();
    (0..bytes.len()).find(|&index| {
        (index == 0 || matches!(bytes[index - 1], b'-' | b'_' | b'.' | b'/' | b'=' | b'+'))
            && word.is_char_boundary(index)
            && looks_like_token(&word[index..])
    })
}

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
}
