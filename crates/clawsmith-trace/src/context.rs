//! W3C Trace Context: the `traceparent` and `tracestate` headers, parsed strictly and formatted.
//!
//! The rules are those of the W3C Trace Context recommendation (level 1, with level 2's
//! random-flag left alone): lowercase hex only, all-zero trace and parent ids invalid, version
//! `ff` invalid, version `00` exactly 55 characters, a later version at least 55 characters with
//! a `-` after the fourth field. `tracestate` keys and values follow the grammar's character
//! sets, at most 32 members, no duplicate keys.

use std::fmt;
use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};

/// A 16-byte trace id; never all zeros.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct TraceId(pub [u8; 16]);

/// An 8-byte span id; never all zeros.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct SpanId(pub [u8; 8]);

/// The trace flags byte; bit 0 is `sampled`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct TraceFlags(pub u8);

impl TraceFlags {
    /// Only `sampled` set.
    pub const SAMPLED: TraceFlags = TraceFlags(1);

    /// Whether the caller recorded its span (and wants ours recorded).
    pub fn is_sampled(self) -> bool {
        self.0 & 1 == 1
    }
}

/// A parsed `traceparent`: who the parent span is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TraceParent {
    /// The trace the span belongs to.
    pub trace_id: TraceId,
    /// The parent span.
    pub parent_id: SpanId,
    /// The flags the parent sent.
    pub flags: TraceFlags,
}

/// A parsed `tracestate`: vendor entries in order, most recent first.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TraceState {
    entries: Vec<(String, String)>,
}

/// Why a `traceparent` or `tracestate` was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TraceContextError {
    /// Not `version-traceid-parentid-flags` of the right lengths in lowercase hex.
    #[error("invalid traceparent `{value}`: {reason}")]
    TraceParent {
        /// The value as received (shortened to 80 characters).
        value: String,
        /// What rule it broke.
        reason: &'static str,
    },
    /// A `tracestate` that breaks the grammar.
    #[error("invalid tracestate: {reason}")]
    TraceState {
        /// What rule it broke.
        reason: String,
    },
}

const TRACEPARENT_LEN: usize = 55;
const MAX_TRACESTATE_MEMBERS: usize = 32;

impl TraceId {
    /// A fresh random trace id (never all zeros).
    pub fn random() -> TraceId {
        let high = random_u64(1).to_be_bytes();
        let low = random_u64(2).to_be_bytes();
        let mut bytes = [0u8; 16];
        bytes[..8].copy_from_slice(&high);
        bytes[8..].copy_from_slice(&low);
        if bytes == [0; 16] {
            bytes[15] = 1;
        }
        TraceId(bytes)
    }

    /// 32 lowercase hex digits.
    pub fn to_hex(self) -> String {
        hex(&self.0)
    }
}

impl SpanId {
    /// A fresh random span id (never all zeros).
    pub fn random() -> SpanId {
        let value = random_u64(3);
        SpanId(if value == 0 { 1 } else { value }.to_be_bytes())
    }

    /// 16 lowercase hex digits.
    pub fn to_hex(self) -> String {
        hex(&self.0)
    }
}

impl fmt::Debug for TraceId {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(formatter, "TraceId({})", self.to_hex())
    }
}

impl fmt::Debug for SpanId {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(formatter, "SpanId({})", self.to_hex())
    }
}

impl fmt::Display for TraceId {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str(&self.to_hex())
    }
}

impl fmt::Display for SpanId {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str(&self.to_hex())
    }
}

impl TraceParent {
    /// Parses a `traceparent` header value strictly (see the module docs).
    pub fn parse(value: &str) -> Result<TraceParent, TraceContextError> {
        let refuse = |reason: &'static str| TraceContextError::TraceParent {
            value: value.chars().take(80).collect(),
            reason,
        };
        let bytes = value.as_bytes();
        if bytes.len() < TRACEPARENT_LEN {
            return Err(refuse("shorter than 55 characters"));
        }
        if bytes[2] != b'-' || bytes[35] != b'-' || bytes[52] != b'-' {
            return Err(refuse("fields are not separated by `-` at 2, 35 and 52"));
        }
        let version =
            decode_hex::<1>(&value[0..2]).ok_or(refuse("version is not lowercase hex"))?;
        let trace_id = decode_hex::<16>(&value[3..35])
            .ok_or(refuse("trace id is not 32 lowercase hex digits"))?;
        let parent_id = decode_hex::<8>(&value[36..52])
            .ok_or(refuse("parent id is not 16 lowercase hex digits"))?;
        let flags = decode_hex::<1>(&value[53..55])
            .ok_or(refuse("flags are not 2 lowercase hex digits"))?;
        match version[0] {
            0xff => return Err(refuse("version ff is forbidden")),
            0x00 if bytes.len() != TRACEPARENT_LEN => {
                return Err(refuse("version 00 must be exactly 55 characters"));
            }
            // A later version may append fields, each after a `-`.
            _ if bytes.len() > TRACEPARENT_LEN && bytes[TRACEPARENT_LEN] != b'-' => {
                return Err(refuse("data after the flags must start with `-`"));
            }
            _ => {}
        }
        if trace_id == [0; 16] {
            return Err(refuse("trace id is all zeros"));
        }
        if parent_id == [0; 8] {
            return Err(refuse("parent id is all zeros"));
        }
        Ok(TraceParent {
            trace_id: TraceId(trace_id),
            parent_id: SpanId(parent_id),
            flags: TraceFlags(flags[0]),
        })
    }
}

impl fmt::Display for TraceParent {
    /// Always version `00`, the only version this crate writes.
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            formatter,
            "00-{}-{}-{:02x}",
            self.trace_id, self.parent_id, self.flags.0
        )
    }
}

impl TraceState {
    /// Parses a `tracestate` header value strictly: empty members (`a=1,,b=2`) are allowed and
    /// skipped, as the grammar allows; anything else that breaks it refuses the whole header.
    pub fn parse(value: &str) -> Result<TraceState, TraceContextError> {
        let refuse = |reason: String| TraceContextError::TraceState { reason };
        let mut entries: Vec<(String, String)> = Vec::new();
        for member in value.split(',') {
            let member = member.trim_matches([' ', '\t']);
            if member.is_empty() {
                continue;
            }
            let Some((key, entry_value)) = member.split_once('=') else {
                return Err(refuse(format!("member `{member}` has no `=`")));
            };
            if !valid_key(key) {
                return Err(refuse(format!("invalid key `{key}`")));
            }
            if !valid_value(entry_value) {
                return Err(refuse(format!("invalid value for key `{key}`")));
            }
            if entries.iter().any(|(existing, _)| existing == key) {
                return Err(refuse(format!("duplicate key `{key}`")));
            }
            entries.push((key.to_owned(), entry_value.to_owned()));
            if entries.len() > MAX_TRACESTATE_MEMBERS {
                return Err(refuse(format!(
                    "more than {MAX_TRACESTATE_MEMBERS} members"
                )));
            }
        }
        Ok(TraceState { entries })
    }

    /// The entries in order.
    pub fn entries(&self) -> &[(String, String)] {
        &self.entries
    }

    /// Whether there are no entries (an empty header is not sent).
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

impl fmt::Display for TraceState {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (index, (key, value)) in self.entries.iter().enumerate() {
            if index > 0 {
                formatter.write_str(",")?;
            }
            write!(formatter, "{key}={value}")?;
        }
        Ok(())
    }
}

/// `simple-key` (`lcalpha 0*255(lcalpha / DIGIT / "_" / "-"/ "*" / "/")`) or `multi-tenant-key`
/// (`tenant-id "@" system-id`, 241 and 14 characters at most, the tenant may start with a digit).
fn valid_key(key: &str) -> bool {
    let rest_ok = |text: &str| {
        text.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"_-*/".contains(&b))
    };
    match key.split_once('@') {
        None => {
            key.len() <= 256
                && key.as_bytes().first().is_some_and(u8::is_ascii_lowercase)
                && rest_ok(key)
        }
        Some((tenant, system)) => {
            (1..=241).contains(&tenant.len())
                && tenant
                    .as_bytes()
                    .first()
                    .is_some_and(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
                && rest_ok(tenant)
                && (1..=14).contains(&system.len())
                && system
                    .as_bytes()
                    .first()
                    .is_some_and(u8::is_ascii_lowercase)
                && rest_ok(system)
        }
    }
}

/// `0*255(chr) nblk-chr`: printable ASCII without `,` and `=`, not ending in a space.
fn valid_value(value: &str) -> bool {
    (1..=256).contains(&value.len())
        && value
            .bytes()
            .all(|b| (0x20..=0x7e).contains(&b) && b != b',' && b != b'=')
        && !value.ends_with(' ')
}

fn decode_hex<const N: usize>(text: &str) -> Option<[u8; N]> {
    let digit = |b: u8| match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        _ => None,
    };
    let bytes = text.as_bytes();
    if bytes.len() != N * 2 {
        return None;
    }
    let mut out = [0u8; N];
    for (index, pair) in bytes.chunks_exact(2).enumerate() {
        out[index] = digit(pair[0])? << 4 | digit(pair[1])?;
    }
    Some(out)
}

fn hex(bytes: &[u8]) -> String {
    use fmt::Write as _;
    let mut out = String::with_capacity(bytes.len() * 2);
    for byte in bytes {
        let _ = write!(out, "{byte:02x}");
    }
    out
}

static COUNTER: AtomicU64 = AtomicU64::new(0);

/// 64 random bits from the standard library's randomly keyed SipHash over a counter and the
/// time (the same source as clawsmith-protocol's ids): ids need uniqueness, not secrecy.
fn random_u64(salt: u64) -> u64 {
    let keys = std::hash::RandomState::new();
    let mut hasher = keys.build_hasher();
    hasher.write_u64(salt);
    hasher.write_u64(COUNTER.fetch_add(1, Ordering::Relaxed));
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|elapsed| elapsed.as_nanos())
        .unwrap_or(0);
    hasher.write_u128(nanos);
    hasher.write_u32(std::process::id());
    hasher.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    const VALID: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

    #[test]
    fn a_valid_traceparent_round_trips() {
        let parent = TraceParent::parse(VALID).unwrap();
        assert_eq!(parent.trace_id.to_hex(), "4bf92f3577b34da6a3ce929d0e0e4736");
        assert_eq!(parent.parent_id.to_hex(), "00f067aa0ba902b7");
        assert!(parent.flags.is_sampled());
        assert_eq!(parent.to_string(), VALID);
        let unsampled =
            TraceParent::parse("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00").unwrap();
        assert!(!unsampled.flags.is_sampled());
    }

    #[test]
    fn a_later_version_is_read_as_version_00() {
        let parent = TraceParent::parse(
            "cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-what-the-future-holds",
        )
        .unwrap();
        assert_eq!(parent.to_string(), VALID);
    }

    #[test]
    fn invalid_traceparents_are_refused_with_their_reason() {
        let table = [
            ("", "shorter than 55 characters"),
            (
                "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0",
                "shorter than 55 characters",
            ),
            (
                "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-",
                "version 00 must be exactly 55 characters",
            ),
            (
                "00_4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
                "fields are not separated by `-` at 2, 35 and 52",
            ),
            (
                "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
                "trace id is not 32 lowercase hex digits",
            ),
            (
                "00-4bf92f3577b34da6a3ce929d0e0e473g-00f067aa0ba902b7-01",
                "trace id is not 32 lowercase hex digits",
            ),
            (
                "00-4bf92f3577b34da6a3ce929d0e0e4736-00F067AA0BA902B7-01",
                "parent id is not 16 lowercase hex digits",
            ),
            (
                "0g-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
                "version is not lowercase hex",
            ),
            (
                "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0x",
                "flags are not 2 lowercase hex digits",
            ),
            (
                "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
                "version ff is forbidden",
            ),
            (
                "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
                "trace id is all zeros",
            ),
            (
                "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
                "parent id is all zeros",
            ),
            (
                "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01x",
                "data after the flags must start with `-`",
            ),
            (
                "é0-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
                "fields are not separated by `-` at 2, 35 and 52",
            ),
        ];
        for (value, expected) in table {
            match TraceParent::parse(value) {
                Err(TraceContextError::TraceParent { reason, .. }) => {
                    assert_eq!(reason, expected, "{value:?}")
                }
                other => panic!("{value:?}: {other:?}"),
            }
        }
    }

    #[test]
    fn tracestate_parses_and_formats() {
        let state =
            TraceState::parse("congo=t61rcWkgMzE, rojo=00f067aa0ba902b7,,tenant@vendor=x y")
                .unwrap();
        assert_eq!(state.entries().len(), 3);
        assert_eq!(
            state.entries()[2],
            ("tenant@vendor".to_owned(), "x y".to_owned())
        );
        assert_eq!(
            state.to_string(),
            "congo=t61rcWkgMzE,rojo=00f067aa0ba902b7,tenant@vendor=x y"
        );
        assert!(TraceState::parse("").unwrap().is_empty());
    }

    #[test]
    fn invalid_tracestates_are_refused() {
        let many = (0..33)
            .map(|index| format!("k{index}=v"))
            .collect::<Vec<_>>()
            .join(",");
        let table = [
            ("novalue", "member `novalue` has no `=`"),
            ("Upper=1", "invalid key `Upper`"),
            ("1abc=1", "invalid key `1abc`"),
            ("a@=1", "invalid key `a@`"),
            ("a@b@c=1", "invalid key `a@b@c`"),
            ("a=", "invalid value for key `a`"),
            ("a=x=y", "invalid value for key `a`"),
            ("a=café", "invalid value for key `a`"),
            ("a=tab\tinside", "invalid value for key `a`"),
            ("a=1,a=2", "duplicate key `a`"),
            (many.as_str(), "more than 32 members"),
        ];
        for (value, expected) in table {
            match TraceState::parse(value) {
                Err(TraceContextError::TraceState { reason }) => {
                    assert_eq!(reason, expected, "{value:?}")
                }
                other => panic!("{value:?}: {other:?}"),
            }
        }
    }

    #[test]
    fn random_ids_are_nonzero_and_distinct() {
        let traces: std::collections::HashSet<TraceId> =
            (0..1000).map(|_| TraceId::random()).collect();
        let spans: std::collections::HashSet<SpanId> =
            (0..1000).map(|_| SpanId::random()).collect();
        assert_eq!(traces.len(), 1000);
        assert_eq!(spans.len(), 1000);
        assert!(!traces.contains(&TraceId([0; 16])));
        assert!(!spans.contains(&SpanId([0; 8])));
    }
}
