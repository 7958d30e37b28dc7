//! TLS to the database, by libpq's `sslmode` and `sslrootcert`.
//!
//! tokio-postgres knows `sslmode=disable|prefer|require` and no certificate settings, so the
//! connection string is read here first: `sslmode` and `sslrootcert` are taken out of it (in
//! either the URL or the key-value form), the rest goes to tokio-postgres unchanged, and the
//! TLS client (rustls with ring, as the rest of the workspace) is built to match libpq:
//!
//! | `sslmode` | encrypted | certificate checked |
//! |---|---|---|
//! | `disable` | never | — |
//! | `prefer` (the default) | when the server offers it | no |
//! | `require` | always | only when `sslrootcert` is given (then as `verify-ca`) |
//! | `verify-ca` | always | chained to `sslrootcert` |
//! | `verify-full` | always | chained to `sslrootcert`, and naming the host connected to |
//!
//! `sslrootcert` is a PEM file of trusted certificates, or `system` for the Mozilla roots
//! built in (`webpki-roots`). The two `verify-` modes need it: there is no default file to fall
//! back on silently. Client certificates (`sslcert`, `sslkey`) are refused by name rather than
//! ignored.

use std::sync::Arc;

use clawsmith_store::StoreError;
use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{CryptoProvider, WebPkiSupportedAlgorithms};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{
    CertificateError, ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme,
};
use tokio_postgres::config::SslMode;
use tokio_postgres_rustls::MakeRustlsConnect;

/// libpq's `sslmode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TlsMode {
    /// Never encrypted.
    Disable,
    /// Encrypted when the server offers it; the certificate is not checked.
    Prefer,
    /// Always encrypted; the certificate is checked only against a given `sslrootcert`.
    Require,
    /// Always encrypted, the certificate chained to `sslrootcert`.
    VerifyCa,
    /// Always encrypted, the certificate chained to `sslrootcert` and naming the host.
    VerifyFull,
}

impl TlsMode {
    fn parse(value: &str) -> Result<TlsMode, StoreError> {
        Ok(match value {
            "disable" => TlsMode::Disable,
            "prefer" => TlsMode::Prefer,
            "require" => TlsMode::Require,
            "verify-ca" => TlsMode::VerifyCa,
            "verify-full" => TlsMode::VerifyFull,
            other => {
                return Err(invalid(format!(
                    "sslmode `{other}` is not one of disable, prefer, require, verify-ca, \
                     verify-full"
                )));
            }
        })
    }

    /// The name libpq gives it.
    pub fn as_str(self) -> &'static str {
        match self {
            TlsMode::Disable => "disable",
            TlsMode::Prefer => "prefer",
            TlsMode::Require => "require",
            TlsMode::VerifyCa => "verify-ca",
            TlsMode::VerifyFull => "verify-full",
        }
    }
}

/// A connection string made ready: what tokio-postgres connects with, and how.
#[derive(Clone)]
pub(crate) struct Connection {
    pub config: tokio_postgres::Config,
    pub tls: MakeRustlsConnect,
    pub mode: TlsMode,
}

fn invalid(message: String) -> StoreError {
    StoreError::Backend {
        context: "reading the PostgreSQL connection string",
        message,
    }
}

/// Reads `url` (`postgres://…?sslmode=…` or `host=… sslmode=…`).
pub(crate) fn connection(url: &str) -> Result<Connection, StoreError> {
    let (rest, settings) = take_tls_settings(url)?;
    let mut config: tokio_postgres::Config = rest
        .parse()
        .map_err(|error: tokio_postgres::Error| invalid(crate::chain(&error)))?;
    let mut mode = TlsMode::Prefer;
    let mut root = None;
    for (key, value) in settings {
        match key {
            "sslmode" => mode = TlsMode::parse(&value)?,
            "sslrootcert" => root = Some(value),
            "sslcert" | "sslkey" | "sslpassword" => {
                return Err(invalid(format!(
                    "`{key}`: client certificates are not supported; authenticate with a \
                     password (or SCRAM) over TLS instead"
                )));
            }
            _ => unreachable!("take_tls_settings takes only the keys above"),
        }
    }
    config.ssl_mode(match mode {
        TlsMode::Disable => SslMode::Disable,
        TlsMode::Prefer => SslMode::Prefer,
        TlsMode::Require | TlsMode::VerifyCa | TlsMode::VerifyFull => SslMode::Require,
    });
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let roots = match root.as_deref() {
        None if matches!(mode, TlsMode::VerifyCa | TlsMode::VerifyFull) => {
            return Err(invalid(format!(
                "sslmode={} checks the server's certificate, so it needs sslrootcert: the path \
                 of a PEM file of the certificates to trust, or `system` for the built-in roots",
                mode.as_str()
            )));
        }
        None => None,
        Some("system") => Some(RootCertStore {
            roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
        }),
        Some(path) => Some(read_roots(path)?),
    };
    let verifier: Arc<dyn ServerCertVerifier> = match (mode, roots) {
        (TlsMode::VerifyFull, Some(roots)) => full_verifier(roots, &provider)?,
        (_, roots) => Arc::new(Lenient {
            chain: roots
                .map(|roots| full_verifier(roots, &provider))
                .transpose()?,
            algorithms: provider.signature_verification_algorithms,
        }),
    };
    let client = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|error| invalid(error.to_string()))?
        .dangerous()
        .with_custom_certificate_verifier(verifier)
        .with_no_client_auth();
    Ok(Connection {
        config,
        tls: MakeRustlsConnect::new(client),
        mode,
    })
}

fn full_verifier(
    roots: RootCertStore,
    provider: &Arc<CryptoProvider>,
) -> Result<Arc<WebPkiServerVerifier>, StoreError> {
    WebPkiServerVerifier::builder_with_provider(Arc::new(roots), Arc::clone(provider))
        .build()
        .map_err(|error| invalid(format!("sslrootcert: {error}")))
}

fn read_roots(path: &str) -> Result<RootCertStore, StoreError> {
    let unreadable =
        |error: &dyn std::fmt::Display| invalid(format!("sslrootcert {path}: {error}"));
    let bytes = std::fs::read(path).map_err(|error| unreadable(&error))?;
    let mut roots = RootCertStore::empty();
    for certificate in CertificateDer::pem_slice_iter(&bytes) {
        let certificate = certificate.map_err(|error| unreadable(&error))?;
        roots.add(certificate).map_err(|error| unreadable(&error))?;
    }
    if roots.is_empty() {
        return Err(unreadable(&"no PEM certificate in it"));
    }
    Ok(roots)
}

/// TLS settings taken out of a connection string, in order: (key, value).
type Settings = Vec<(&'static str, String)>;

/// Splits the TLS settings this module handles off `url`: the rest, and the settings in order.
fn take_tls_settings(url: &str) -> Result<(String, Settings), StoreError> {
    const KEYS: [&str; 5] = ["sslmode", "sslrootcert", "sslcert", "sslkey", "sslpassword"];
    let ours = |key: &str| KEYS.iter().copied().find(|known| *known == key);
    let mut settings = Vec::new();
    if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        let Some((base, query)) = url.split_once('?') else {
            return Ok((url.to_owned(), settings));
        };
        let mut kept = Vec::new();
        for pair in query.split('&') {
            let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
            match ours(key) {
                Some(key) => settings.push((key, percent_decode(value)?)),
                None => kept.push(pair),
            }
        }
        let rest = if kept.is_empty() {
            base.to_owned()
        } else {
            format!("{base}?{}", kept.join("&"))
        };
        return Ok((rest, settings));
    }
    // The key-value form: `key = value` pairs apart by spaces, a value quoted with '…' (with
    // backslash escapes) or bare (up to the next space, with backslash escapes).
    let mut rest = String::with_capacity(url.len());
    let mut chars = url.char_indices().peekable();
    while let Some(&(start, _)) = chars.peek() {
        while chars.next_if(|(_, c)| c.is_whitespace()).is_some() {}
        let Some(&(key_start, _)) = chars.peek() else {
            break;
        };
        let mut key_end = key_start;
        while let Some((index, _)) = chars.next_if(|(_, c)| *c != '=' && !c.is_whitespace()) {
            key_end = index + 1;
        }
        while chars.next_if(|(_, c)| c.is_whitespace()).is_some() {}
        if chars.next_if(|(_, c)| *c == '=').is_none() {
            // Not a pair: leave it to tokio-postgres to refuse.
            rest.push_str(&url[start..]);
            break;
        }
        while chars.next_if(|(_, c)| c.is_whitespace()).is_some() {}
        let mut value = String::new();
        if chars.next_if(|(_, c)| *c == '\'').is_some() {
            loop {
                match chars.next() {
                    Some((_, '\'')) => break,
                    Some((_, '\\')) => value.extend(chars.next().map(|(_, c)| c)),
                    Some((_, c)) => value.push(c),
                    None => return Err(invalid("a quoted value is not closed".to_owned())),
                }
            }
        } else {
            while let Some((_, c)) = chars.next_if(|(_, c)| !c.is_whitespace()) {
                if c == '\\' {
                    value.extend(chars.next().map(|(_, c)| c));
                } else {
                    value.push(c);
                }
            }
        }
        let end = chars.peek().map_or(url.len(), |&(index, _)| index);
        match ours(&url[key_start..key_end]) {
            Some(key) => settings.push((key, value)),
            None => rest.push_str(&url[start..end]),
        }
    }
    Ok((rest, settings))
}

fn percent_decode(value: &str) -> Result<String, StoreError> {
    let bytes = value.as_bytes();
    let mut decoded = Vec::with_capacity(bytes.len());
    let mut index = 0;
    while index < bytes.len() {
        if bytes[index] == b'%' {
            let byte = value
                .get(index + 1..index + 3)
                .and_then(|hex| u8::from_str_radix(hex, 16).ok())
                .ok_or_else(|| invalid(format!("`{value}` has a bad %-escape")))?;
            decoded.push(byte);
            index += 3;
        } else {
            decoded.push(bytes[index]);
            index += 1;
        }
    }
    String::from_utf8(decoded).map_err(|_| invalid(format!("`{value}` is not UTF-8")))
}

/// `prefer` and `require` without roots (as libpq: encrypted, the certificate taken as the
/// server presents it), and `verify-ca` (`chain`: it must lead to a trusted root, the name is
/// not compared). The handshake's signatures are checked against the certificate either way.
#[derive(Debug)]
struct Lenient {
    chain: Option<Arc<WebPkiServerVerifier>>,
    algorithms: WebPkiSupportedAlgorithms,
}

impl ServerCertVerifier for Lenient {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let Some(chain) = &self.chain else {
            return Ok(ServerCertVerified::assertion());
        };
        match chain.verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now) {
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.algorithms.supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tls_settings_come_out_of_both_forms_and_the_rest_stays() {
        type Case<'a> = (&'a str, &'a str, &'a [(&'a str, &'a str)]);
        let cases: &[Case<'_>] = &[
            ("postgres://u@h/db", "postgres://u@h/db", &[]),
            (
                "postgres://u@h/db?sslmode=verify-full&sslrootcert=%2Ftmp%2Fca.pem",
                "postgres://u@h/db",
                &[("sslmode", "verify-full"), ("sslrootcert", "/tmp/ca.pem")],
            ),
            (
                "postgresql://u@h/db?application_name=x&sslmode=require&connect_timeout=5",
                "postgresql://u@h/db?application_name=x&connect_timeout=5",
                &[("sslmode", "require")],
            ),
            (
                "host=h user=u sslmode = verify-ca sslrootcert='/a dir/ca\\'s.pem' dbname=d",
                "host=h user=u dbname=d",
                &[("sslmode", "verify-ca"), ("sslrootcert", "/a dir/ca's.pem")],
            ),
            ("host=h sslcert=/c.pem", "host=h", &[("sslcert", "/c.pem")]),
        ];
        for (url, rest, settings) in cases {
            let (found_rest, found) = take_tls_settings(url).unwrap();
            assert_eq!(found_rest.trim(), *rest, "{url}");
            let found: Vec<(&str, &str)> = found.iter().map(|(k, v)| (*k, v.as_str())).collect();
            assert_eq!(found, *settings, "{url}");
        }
    }

    #[test]
    fn bad_tls_settings_are_refused_by_name() {
        let cases = [
            ("postgres://u@h/db?sslmode=always", "sslmode `always`"),
            (
                "postgres://u@h/db?sslmode=verify-full",
                "sslmode=verify-full checks the server's certificate, so it needs sslrootcert",
            ),
            ("host=h sslmode=verify-ca", "needs sslrootcert"),
            (
                "postgres://u@h/db?sslmode=require&sslrootcert=/nonexistent/ca.pem",
                "sslrootcert /nonexistent/ca.pem",
            ),
            (
                "postgres://u@h/db?sslcert=/c.pem",
                "client certificates are not supported",
            ),
            ("host=h sslkey=/k.pem", "`sslkey`"),
            ("postgres://u@h/db?sslrootcert=%zz", "bad %-escape"),
            ("host=h sslrootcert='/open", "not closed"),
            ("postgres://u@h/db?nonsense=1", "nonsense"),
        ];
        for (url, expected) in cases {
            let Err(error) = connection(url) else {
                panic!("{url} was accepted");
            };
            assert!(error.to_string().contains(expected), "{url}: {error}");
        }
    }

    #[test]
    fn a_root_file_without_certificates_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("empty.pem");
        std::fs::write(&path, "not a certificate\n").unwrap();
        let url = format!("host=h sslmode=verify-full sslrootcert={}", path.display());
        let Err(error) = connection(&url) else {
            panic!("accepted");
        };
        assert!(error.to_string().contains("no PEM certificate"), "{error}");
    }

    #[test]
    fn modes_map_to_what_tokio_postgres_does() {
        for (url, mode, ssl) in [
            ("host=h", TlsMode::Prefer, SslMode::Prefer),
            ("host=h sslmode=disable", TlsMode::Disable, SslMode::Disable),
            ("host=h sslmode=require", TlsMode::Require, SslMode::Require),
            (
                "host=h sslmode=verify-full sslrootcert=system",
                TlsMode::VerifyFull,
                SslMode::Require,
            ),
        ] {
            let connection = connection(url).unwrap();
            assert_eq!(connection.mode, mode, "{url}");
            assert_eq!(connection.config.get_ssl_mode(), ssl, "{url}");
        }
    }
}
