//! Content-addressed blobs: small ones in their rows, large ones as objects created only if
//! absent, every read checked against the name.

use std::sync::Arc;

use object_store::path::Path as ObjectPath;
use object_store::{ObjectStore, ObjectStoreExt, PutMode, PutOptions, PutPayload};
use sha2::{Digest, Sha256};

use crate::{INLINE_MAX, backend, connect, pg};
use clawsmith_store::StoreError;

/// The object a blob named `hash` (lower-case hex) is kept as: `blobs/ab/cdef…`.
pub(crate) fn object_path(hash: &str) -> ObjectPath {
    ObjectPath::from(format!("blobs/{}/{}", &hash[..2], &hash[2..]))
}

/// Stores each of `contents` unless it is stored already; their names in order, in one
/// transaction.
pub(crate) async fn put(
    pool: &deadpool_postgres::Pool,
    objects: Option<&dyn ObjectStore>,
    contents: Vec<Vec<u8>>,
) -> Result<Vec<String>, StoreError> {
    let tx = crate::Tx::begun(pool, "storing blobs").await?;
    let stored = async {
        let mut names = Vec::with_capacity(contents.len());
        for content in contents {
            names.push(put_in(&tx, objects, content).await?);
        }
        Ok(names)
    }
    .await;
    match stored {
        Ok(names) => {
            tx.commit().await?;
            Ok(names)
        }
        Err(error) => {
            tx.rollback().await;
            Err(error)
        }
    }
}

/// Stores `content` in the transaction `tx` unless it is stored already: its name. The row is
/// inserted or touched first, and stays locked until the commit, so a garbage collection that
/// claimed it finishes (object and row gone) before this goes on, and one that comes later
/// skips it; a large blob's object is then created unless it exists.
pub(crate) async fn put_in(
    tx: &crate::Tx,
    objects: Option<&dyn ObjectStore>,
    content: Vec<u8>,
) -> Result<String, StoreError> {
    let hash = hex::encode(Sha256::digest(&content));
    let size = i64::try_from(content.len()).unwrap_or(i64::MAX);
    let in_object = objects.is_some() && content.len() > INLINE_MAX;
    let inline: Option<&[u8]> = (!in_object).then_some(content.as_slice());
    // `in_object` of an existing row is kept: the same content is kept where it first went.
    let row = tx
        .query_one(
            "INSERT INTO clawsmith_blobs (hash, size, content, in_object) VALUES ($1, $2, $3, $4)
             ON CONFLICT (hash) DO UPDATE SET touched_at = now()
             RETURNING in_object",
            &[&hash, &size, &inline, &in_object],
        )
        .await
        .map_err(pg("storing a blob"))?;
    if let (true, Some(objects)) = (row.get::<_, bool>(0), objects) {
        let options = PutOptions {
            mode: PutMode::Create,
            ..PutOptions::default()
        };
        match objects
            .put_opts(&object_path(&hash), PutPayload::from(content), options)
            .await
        {
            Ok(_) | Err(object_store::Error::AlreadyExists { .. }) => {}
            Err(error) => return Err(backend("storing a blob in the object store")(error)),
        }
    }
    Ok(hash)
}

/// The bytes named `sha256`, checked; `None` when no row names them.
pub(crate) async fn get(
    pool: &deadpool_postgres::Pool,
    objects: Option<&dyn ObjectStore>,
    sha256: [u8; 32],
) -> Result<Option<Vec<u8>>, StoreError> {
    let client = connect(pool, "reading a blob").await?;
    get_with(&**client, objects, sha256).await
}

/// [`get`] through `client`.
pub(crate) async fn get_with(
    client: &impl tokio_postgres::GenericClient,
    objects: Option<&dyn ObjectStore>,
    sha256: [u8; 32],
) -> Result<Option<Vec<u8>>, StoreError> {
    let hash = hex::encode(sha256);
    let Some(row) = client
        .query_opt(
            "SELECT content, in_object FROM clawsmith_blobs WHERE hash = $1",
            &[&hash],
        )
        .await
        .map_err(pg("reading a blob"))?
    else {
        return Ok(None);
    };
    let bytes = match (row.get::<_, Option<Vec<u8>>>(0), row.get::<_, bool>(1)) {
        (Some(bytes), false) => bytes,
        (_, true) => {
            let Some(objects) = objects else {
                return Err(StoreError::Backend {
                    context: "reading a blob",
                    message: format!(
                        "blob {hash} is in the object store, and this store has none configured"
                    ),
                });
            };
            match objects.get(&object_path(&hash)).await {
                Ok(found) => found
                    .bytes()
                    .await
                    .map_err(backend("reading a blob from the object store"))?
                    .to_vec(),
                Err(object_store::Error::NotFound { .. }) => {
                    return Err(StoreError::MissingBlob(hash));
                }
                Err(error) => return Err(backend("reading a blob from the object store")(error)),
            }
        }
        (None, false) => return Err(StoreError::MissingBlob(hash)),
    };
    if Sha256::digest(&bytes).as_slice() != sha256 {
        return Err(StoreError::CorruptBlob(hash));
    }
    Ok(Some(bytes))
}

/// The object store at `location`: `s3://bucket[/prefix]` (credentials, region and endpoint
/// from the `AWS_*` variables, e.g. `AWS_ENDPOINT` and `AWS_ALLOW_HTTP` for an S3-compatible
/// server), `file:///folder` or `memory://`.
pub fn object_store_at(location: &str) -> Result<Arc<dyn ObjectStore>, StoreError> {
    let refused = |message: String| StoreError::Backend {
        context: "opening the blob store",
        message,
    };
    let objects: Arc<dyn ObjectStore> = if let Some(rest) = location.strip_prefix("s3://") {
        let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
        if bucket.is_empty() {
            return Err(refused(format!("{location}: no bucket named")));
        }
        let s3 = object_store::aws::AmazonS3Builder::from_env()
            .with_bucket_name(bucket)
            .build()
            .map_err(|error| refused(error.to_string()))?;
        prefixed(Arc::new(s3), prefix)
    } else if let Some(folder) = location.strip_prefix("file://") {
        let local = object_store::local::LocalFileSystem::new_with_prefix(folder)
            .map_err(|error| refused(format!("{location}: {error}")))?;
        Arc::new(local)
    } else if location == "memory://" {
        Arc::new(object_store::memory::InMemory::new())
    } else {
        return Err(refused(format!(
            "{location}: a blob store is `s3://bucket[/prefix]`, `file:///folder` or `memory://`"
        )));
    };
    Ok(objects)
}

fn prefixed(objects: Arc<dyn ObjectStore>, prefix: &str) -> Arc<dyn ObjectStore> {
    let prefix = prefix.trim_matches('/');
    if prefix.is_empty() {
        objects
    } else {
        Arc::new(object_store::prefix::PrefixStore::new(objects, prefix))
    }
}

/// Writes, reads back and deletes a probe object: whether `objects` is reachable and writable.
pub fn probe_objects(objects: &Arc<dyn ObjectStore>) -> Result<(), StoreError> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(backend("starting a runtime for the probe"))?;
    let objects = Arc::clone(objects);
    runtime.block_on(async move {
        let path = ObjectPath::from(format!("probes/clawsmith-{}", std::process::id()));
        let body = b"clawsmith store check".to_vec();
        objects
            .put(&path, PutPayload::from(body.clone()))
            .await
            .map_err(backend("writing a probe object"))?;
        let read = objects
            .get(&path)
            .await
            .map_err(backend("reading the probe object"))?
            .bytes()
            .await
            .map_err(backend("reading the probe object"))?;
        objects
            .delete(&path)
            .await
            .map_err(backend("deleting the probe object"))?;
        if read.as_ref() != body.as_slice() {
            return Err(StoreError::Backend {
                context: "reading the probe object",
                message: "it came back changed".to_owned(),
            });
        }
        Ok(())
    })
}
