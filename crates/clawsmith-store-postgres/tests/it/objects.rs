//! Blobs: in their rows, and in an S3-compatible object store for large ones.

use std::io::{Read, Write};
use std::sync::Arc;

use clawsmith_store::contract;
use clawsmith_store_postgres::{INLINE_MAX, PgOptions, PgStore};
use object_store::aws::AmazonS3Builder;
use object_store::{ObjectStore, ObjectStoreExt};

use crate::{migrated, postgres};

#[test]
fn blobs_kept_in_rows_keep_the_blob_contract() {
    let Some(base) = postgres("blobs_kept_in_rows_keep_the_blob_contract") else {
        return;
    };
    let (_, open) = migrated(&base, PgOptions::default());
    contract::blobs(&*open());
}

/// The S3 endpoint on 127.0.0.1, or `None` after saying why the test does not run.
fn s3(test: &str) -> Option<String> {
    match std::env::var("CLAWSMITH_TEST_S3") {
        Ok(endpoint) if !endpoint.trim().is_empty() => Some(endpoint),
        _ => {
            assert!(
                std::env::var_os("CLAWSMITH_REQUIRE_SERVICES").is_none(),
                "CLAWSMITH_REQUIRE_SERVICES is set and CLAWSMITH_TEST_S3 is not"
            );
            eprintln!("SKIP {test}: no S3-compatible server (CLAWSMITH_TEST_S3 is unset)");
            None
        }
    }
}

/// Creates `bucket` on the S3 endpoint (a plain `PUT /bucket`; the test server checks no
/// signature).
fn create_bucket(endpoint: &str, bucket: &str) {
    let address = endpoint.trim_start_matches("http://").trim_end_matches('/');
    let mut stream = std::net::TcpStream::connect(address).unwrap();
    write!(
        stream,
        "PUT /{bucket} HTTP/1.1\r\nHost: {address}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).unwrap();
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
}

fn bucket(endpoint: &str, name: &str) -> Arc<dyn ObjectStore> {
    create_bucket(endpoint, name);
    Arc::new(
        AmazonS3Builder::new()
            .with_endpoint(endpoint)
            .with_allow_http(true)
            .with_bucket_name(name)
            .with_region("us-east-1")
            .with_access_key_id("test")
            .with_secret_access_key("test")
            .build()
            .unwrap(),
    )
}

#[test]
fn large_blobs_go_to_the_object_store_once_and_come_back_checked() {
    let test = "large_blobs_go_to_the_object_store_once_and_come_back_checked";
    let (Some(base), Some(endpoint)) = (postgres(test), s3(test)) else {
        return;
    };
    let name = format!("clawsmith-test-{}", std::process::id());
    let objects = bucket(&endpoint, &name);
    let options = PgOptions {
        objects: Some(Arc::clone(&objects)),
        ..PgOptions::default()
    };
    let (url, open) = migrated(&base, options);
    let store = open();
    contract::blobs(&*store);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    // The contract's large blob is an object; its small one is not.
    let listed: Vec<String> = runtime.block_on(async {
        use futures_util::StreamExt;
        objects
            .list(None)
            .map(|meta| meta.unwrap().location.to_string())
            .collect()
            .await
    });
    assert_eq!(listed.len(), 1, "{listed:?}");
    assert!(listed[0].starts_with("blobs/"), "{listed:?}");
    // Two hosts storing the same large content at once: one object, both succeed.
    let content: Vec<u8> = (0..INLINE_MAX as u32 * 2)
        .map(|n| (n % 239) as u8)
        .collect();
    let names: Vec<Vec<String>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..4)
            .map(|_| {
                let store = PgStore::connect(
                    &url,
                    PgOptions {
                        objects: Some(Arc::clone(&objects)),
                        ..PgOptions::default()
                    },
                )
                .unwrap();
                let content = content.clone();
                scope.spawn(move || {
                    use clawsmith_store::BlobStore;
                    store.put_blobs(&[&content]).unwrap()
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|handle| handle.join().unwrap())
            .collect()
    });
    assert!(names.windows(2).all(|pair| pair[0] == pair[1]), "{names:?}");
    // A changed object is caught when read.
    let hash = &names[0][0];
    let path = object_store::path::Path::from(format!("blobs/{}/{}", &hash[..2], &hash[2..]));
    runtime.block_on(async {
        objects
            .put(&path, object_store::PutPayload::from(b"tampered".to_vec()))
            .await
            .unwrap();
    });
    let sha: [u8; 32] = hex::decode(hash).unwrap().try_into().unwrap();
    use clawsmith_store::BlobStore;
    assert!(matches!(
        store.get_blob(&sha),
        Err(clawsmith_store::StoreError::CorruptBlob(_))
    ));
}
