//! TLS to a real PostgreSQL server: the test's cluster is given a certificate an authority made
//! here signed (for `localhost` only), and the store connects under each `sslmode`. What must
//! hold: `disable` is plain, the others are encrypted, the `verify-` modes refuse a certificate
//! the given roots did not sign, `verify-full` also one that does not name the host, and a
//! `require` given roots checks them as libpq does.

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use clawsmith_store_postgres::{PgOptions, PgStore, TlsMode};
use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair, KeyUsagePurpose,
};

use crate::{fresh_database, postgres, query_text, run_sql};

fn authority(name: &str) -> CertifiedIssuer<'static, KeyPair> {
    let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.distinguished_name.push(
        DnType::CommonName,
        format!("clawsmith test authority {name}"),
    );
    params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    CertifiedIssuer::self_signed(params, KeyPair::generate().unwrap()).unwrap()
}

/// Puts the server's SSL settings back and removes the files, however the test ends.
struct ServerCertificate {
    admin_url: String,
    directory: PathBuf,
}

impl Drop for ServerCertificate {
    fn drop(&mut self) {
        let _ = std::panic::catch_unwind(|| {
            run_sql(
                &self.admin_url,
                &[
                    "ALTER SYSTEM RESET ssl_cert_file",
                    "ALTER SYSTEM RESET ssl_key_file",
                    "ALTER SYSTEM RESET ssl",
                    "SELECT pg_reload_conf()",
                ],
            );
        });
        let _ = std::fs::remove_dir_all(&self.directory);
    }
}

/// The part of a key-value connection string after `key=`, up to the next space.
fn setting<'a>(base: &'a str, key: &str) -> Option<&'a str> {
    base.split_whitespace()
        .find_map(|pair| pair.strip_prefix(key)?.strip_prefix('='))
}

#[test]
fn every_sslmode_against_a_server_with_a_certificate_of_our_own() {
    let Some(base) = postgres("every_sslmode_against_a_server_with_a_certificate_of_our_own")
    else {
        return;
    };
    let url = fresh_database(&base);
    if query_text(
        &url,
        "SELECT rolsuper::text FROM pg_roles WHERE rolname = current_user",
    ) != "true"
    {
        assert!(
            std::env::var_os("CLAWSMITH_REQUIRE_SERVICES").is_none(),
            "the TLS test sets the server's certificate, which needs a superuser"
        );
        eprintln!("SKIP: the test's PostgreSQL user is not a superuser");
        return;
    }
    // The server reads the files as the user that owns its data directory.
    let data_directory = query_text(&url, "SHOW data_directory");
    let owner = std::fs::metadata(&data_directory).unwrap();
    let directory = std::env::temp_dir().join(format!("clawsmith-pg-tls-{}", std::process::id()));
    std::fs::create_dir_all(&directory).unwrap();
    std::fs::set_permissions(&directory, std::fs::Permissions::from_mode(0o755)).unwrap();
    let guard = ServerCertificate {
        admin_url: url.clone(),
        directory: directory.clone(),
    };

    let ours = authority("ours");
    let theirs = authority("theirs");
    let mut params = CertificateParams::new(vec!["localhost".to_owned()]).unwrap();
    params
        .distinguished_name
        .push(DnType::CommonName, "localhost");
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    let server_key = KeyPair::generate().unwrap();
    let server = params.signed_by(&server_key, &ours).unwrap();
    let write = |name: &str, text: String, mode: u32| -> PathBuf {
        let path = directory.join(name);
        std::fs::write(&path, text).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
        path
    };
    let certificate = write("server.pem", server.pem(), 0o644);
    let key = write("server.key", server_key.serialize_pem(), 0o600);
    std::os::unix::fs::chown(&key, Some(owner.uid()), Some(owner.gid())).unwrap();
    let our_roots = write("ours.pem", ours.pem(), 0o644);
    let their_roots = write("theirs.pem", theirs.pem(), 0o644);
    run_sql(
        &url,
        &[
            &format!(
                "ALTER SYSTEM SET ssl_cert_file = '{}'",
                certificate.display()
            ),
            &format!("ALTER SYSTEM SET ssl_key_file = '{}'", key.display()),
            "ALTER SYSTEM SET ssl = on",
            "SELECT pg_reload_conf()",
        ],
    );

    // TCP to the server's address, under the name the certificate gives or its bare address.
    let port = setting(&base, "port").unwrap_or("5432");
    let mut login = format!("port={port}");
    for key in ["user", "password", "dbname"] {
        if let Some(value) = setting(&url, key) {
            login.push_str(&format!(" {key}={value}"));
        }
    }
    let by_name = format!("host=localhost hostaddr=127.0.0.1 {login}");
    let by_address = format!("host=127.0.0.1 {login}");
    let roots = |path: &Path| format!("sslrootcert={}", path.display());

    // The reload takes effect for connections made after it: wait until one verifies.
    let verified = format!("{by_name} sslmode=verify-full {}", roots(&our_roots));
    let deadline = Instant::now() + Duration::from_secs(10);
    while let Err(error) =
        PgStore::unchecked(&verified, PgOptions::default()).and_then(|store| store.encrypted())
    {
        assert!(
            Instant::now() < deadline,
            "the server never served the new certificate: {error}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }

    let accepted = [
        (
            format!("{by_address} sslmode=disable"),
            TlsMode::Disable,
            false,
        ),
        (by_address.clone(), TlsMode::Prefer, true),
        (
            format!("{by_address} sslmode=require"),
            TlsMode::Require,
            true,
        ),
        (
            format!("{by_address} sslmode=require {}", roots(&our_roots)),
            TlsMode::Require,
            true,
        ),
        (
            format!("{by_address} sslmode=verify-ca {}", roots(&our_roots)),
            TlsMode::VerifyCa,
            true,
        ),
        (verified.clone(), TlsMode::VerifyFull, true),
    ];
    for (url, mode, encrypted) in &accepted {
        let store = PgStore::unchecked(url, PgOptions::default()).unwrap();
        assert_eq!(store.tls_mode(), *mode, "{url}");
        assert_eq!(store.encrypted().unwrap(), *encrypted, "{url}");
    }
    // A follower's connection of its own goes the same way.
    let store = PgStore::unchecked(&verified, PgOptions::default()).unwrap();
    store.follow().unwrap();

    let refused = [
        (
            format!("{by_address} sslmode=verify-full {}", roots(&our_roots)),
            "certificate not valid for name \"127.0.0.1\"",
        ),
        (
            format!("{by_name} sslmode=verify-full {}", roots(&their_roots)),
            "UnknownIssuer",
        ),
        (
            format!("{by_name} sslmode=verify-ca {}", roots(&their_roots)),
            "UnknownIssuer",
        ),
        (
            format!("{by_address} sslmode=require {}", roots(&their_roots)),
            "UnknownIssuer",
        ),
        (
            format!("{by_name} sslmode=verify-full sslrootcert=system"),
            "UnknownIssuer",
        ),
    ];
    for (url, expected) in &refused {
        let error = PgStore::unchecked(url, PgOptions::default())
            .and_then(|store| store.encrypted())
            .expect_err(url);
        let message = error.to_string();
        assert!(message.contains(expected), "{url}: {message}");
    }
    drop(guard);
}
