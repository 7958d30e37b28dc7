//! The one id generator: `<prefix>_<ULID>` (`ses_01JDQ…`, `turn_…`, `call_…`, `art_…`).
//!
//! A ULID is a 48-bit millisecond timestamp and 80 random bits in Crockford base32 (26
//! characters), so ids sort by creation time as text, in SQL `ORDER BY` and in `ls`. Within one
//! process every id is strictly greater than the one before (same millisecond: the previous id
//! plus one), so two ids made in a row never tie. The random bits come from the standard
//! library's randomly keyed SipHash (`RandomState`) over time, pid and a counter: unique enough
//! for ids, no extra crate, and no I/O.
//!
//! Ids are opaque strings everywhere else: ids written by older versions (`ses_` + 16 hex
//! digits, `call-…`, `art_` + a hash prefix) stay readable; nothing parses an id.

use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};

use ulid::Ulid;

/// What an id names; its prefix says so at a glance.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum IdKind {
    /// A session: `ses_`.
    Session,
    /// A turn: `turn_`.
    Turn,
    /// A tool call made by clawsmith itself (the CLI's `call`, the MCP server): `call_`.
    Call,
    /// A stored artifact: `art_`.
    Artifact,
    /// A model request recorded as evidence: `req_`.
    Request,
    /// An approval request: `apr_`.
    Approval,
}

impl IdKind {
    /// The prefix, without its `_`.
    pub fn prefix(self) -> &'static str {
        match self {
            IdKind::Session => "ses",
            IdKind::Turn => "turn",
            IdKind::Call => "call",
            IdKind::Artifact => "art",
            IdKind::Request => "req",
            IdKind::Approval => "apr",
        }
    }
}

/// A fresh id of `kind`: `<prefix>_<ULID>`, time-ordered and unique.
pub fn new_id(kind: IdKind) -> String {
    format!("{}_{}", kind.prefix(), next_ulid())
}

/// The last ULID this process made: the next one is strictly greater.
static LAST: Mutex<Option<Ulid>> = Mutex::new(None);
static COUNTER: AtomicU64 = AtomicU64::new(0);

fn next_ulid() -> Ulid {
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|elapsed| elapsed.as_millis() as u64)
        .unwrap_or(0);
    let fresh = Ulid::from_parts(now_ms, random_bits());
    let mut last = LAST.lock().unwrap_or_else(PoisonError::into_inner);
    // A clock that stood still or stepped back: the previous id plus one keeps the order (an
    // increment overflows only after 2^80 ids in one millisecond).
    let next = match *last {
        Some(previous) if fresh <= previous => previous.increment().unwrap_or(fresh),
        _ => fresh,
    };
    *last = Some(next);
    next
}

/// 80 random bits (the rest of the `u128` is ignored by [`Ulid::from_parts`]).
fn random_bits() -> u128 {
    let keys = std::hash::RandomState::new();
    let count = COUNTER.fetch_add(1, Ordering::Relaxed);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|elapsed| elapsed.as_nanos())
        .unwrap_or(0);
    // The pid tells a forked child's ids from its parent's (both start from the same keys and
    // counter); read once an id, not once a half (`getpid` is a system call).
    let pid = std::process::id();
    let half = |salt: u64| {
        let mut hasher = keys.build_hasher();
        hasher.write_u64(salt);
        hasher.write_u64(count);
        hasher.write_u128(nanos);
        hasher.write_u32(pid);
        hasher.finish()
    };
    (u128::from(half(1)) << 64) | u128::from(half(2))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_prefixed_and_strictly_increasing() {
        let ids: Vec<String> = (0..1000).map(|_| new_id(IdKind::Turn)).collect();
        for pair in ids.windows(2) {
            assert!(pair[0] < pair[1], "{} then {}", pair[0], pair[1]);
        }
        for id in &ids {
            let ulid = id.strip_prefix("turn_").unwrap();
            assert_eq!(ulid.len(), 26, "{id}");
            assert!(Ulid::from_string(ulid).is_ok(), "{id}");
        }
    }

    #[test]
    fn every_kind_has_its_prefix() {
        let table = [
            (IdKind::Session, "ses_"),
            (IdKind::Turn, "turn_"),
            (IdKind::Call, "call_"),
            (IdKind::Artifact, "art_"),
            (IdKind::Request, "req_"),
            (IdKind::Approval, "apr_"),
        ];
        for (kind, prefix) in table {
            assert!(new_id(kind).starts_with(prefix), "{kind:?}");
        }
    }
}
