//! Content-addressed blobs (K3): stored once per SHA-256, shared by checkpoints, forks and
//! artifacts.

use rusqlite::{OptionalExtension, Transaction, params};
use sha2::{Digest, Sha256};

use crate::error::{SqlContext, StoreError};

/// SHA-256 of `content`.
pub fn sha256(content: &[u8]) -> [u8; 32] {
    Sha256::digest(content).into()
}

/// Lowercase hex of a hash.
pub fn hash_hex(hash: &[u8; 32]) -> String {
    hex::encode(hash)
}

/// Stores `content` once; returns its hex hash.
pub(crate) fn put_blob(tx: &Transaction<'_>, content: &[u8]) -> Result<String, StoreError> {
    let hash = hash_hex(&sha256(content));
    tx.execute(
        "INSERT OR IGNORE INTO blobs (hash, size, content) VALUES (?1, ?2, ?3)",
        params![hash, content.len() as u64, content],
    )
    .ctx("storing a blob")?;
    Ok(hash)
}

/// A blob's content, `None` if absent. The content is hashed again on every read: a blob that no
/// longer matches its name (a damaged or hand-edited file) is [`StoreError::CorruptBlob`], so no
/// caller can write it into a workspace or show it as a diff side.
pub(crate) fn get_blob(tx: &Transaction<'_>, hash: &str) -> Result<Option<Vec<u8>>, StoreError> {
    let content: Option<Vec<u8>> = tx
        .query_row("SELECT content FROM blobs WHERE hash = ?1", [hash], |row| {
            row.get(0)
        })
        .optional()
        .ctx("reading a blob")?;
    match content {
        Some(content) if hash_hex(&sha256(&content)) != hash => {
            Err(StoreError::CorruptBlob(hash.to_string()))
        }
        content => Ok(content),
    }
}

/// A blob's content, [`StoreError::MissingBlob`] if absent.
pub(crate) fn require_blob(tx: &Transaction<'_>, hash: &str) -> Result<Vec<u8>, StoreError> {
    get_blob(tx, hash)?.ok_or_else(|| StoreError::MissingBlob(hash.to_string()))
}

/// Number of lines as an editor counts them: a final line without `\n` counts.
pub(crate) fn line_count(content: &[u8]) -> u64 {
    let newlines = content.iter().filter(|&&byte| byte == b'\n').count() as u64;
    if content.last().is_some_and(|&byte| byte != b'\n') {
        newlines + 1
    } else {
        newlines
    }
}
