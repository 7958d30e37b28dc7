//! The server name a TLS client asks for, read from its ClientHello (with rustls's parser),
//! so a tunnel to an allowed name cannot carry a handshake for another one (domain fronting).

use rustls::server::Acceptor;

/// What the first bytes a client sent through a tunnel are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Hello {
    /// A TLS ClientHello, with the server name it asks for (`None`: it names none).
    Tls(Option<String>),
    /// Not TLS (SSH, plain HTTP…): there is no name to check.
    NotTls,
    /// The start of a ClientHello; more bytes are needed.
    Incomplete,
    /// TLS that does not parse.
    Malformed(String),
}

/// Reads `bytes`, the first a client sent.
pub fn client_hello(bytes: &[u8]) -> Hello {
    match bytes.first() {
        None => return Hello::Incomplete,
        // A TLS record of type handshake.
        Some(0x16) => {}
        Some(_) => return Hello::NotTls,
    }
    let mut acceptor = Acceptor::default();
    let mut rest = bytes;
    while !rest.is_empty() {
        match acceptor.read_tls(&mut rest) {
            Ok(0) => break,
            Ok(_) => {}
            Err(error) => return Hello::Malformed(error.to_string()),
        }
    }
    match acceptor.accept() {
        Ok(Some(accepted)) => Hello::Tls(
            accepted
                .client_hello()
                .server_name()
                .map(|name| name.trim_end_matches('.').to_ascii_lowercase()),
        ),
        Ok(None) => Hello::Incomplete,
        Err((error, _)) => Hello::Malformed(error.to_string()),
    }
}

/// The ClientHello a rustls client sends for `name` (for tests of this check).
#[doc(hidden)]
pub fn client_hello_for(name: &str) -> Vec<u8> {
    let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map(|builder| {
            builder
                .with_root_certificates(rustls::RootCertStore::empty())
                .with_no_client_auth()
        });
    let (Ok(config), Ok(server)) = (
        config,
        rustls::pki_types::ServerName::try_from(name.to_owned()),
    ) else {
        return Vec::new();
    };
    let Ok(mut connection) = rustls::ClientConnection::new(std::sync::Arc::new(config), server)
    else {
        return Vec::new();
    };
    let mut hello = Vec::new();
    while connection.wants_write() {
        if connection.write_tls(&mut hello).is_err() {
            break;
        }
    }
    hello
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_server_name_of_a_client_hello() {
        let hello = client_hello_for("api.github.com");
        assert_eq!(
            client_hello(&hello),
            Hello::Tls(Some("api.github.com".to_owned()))
        );
        assert_eq!(client_hello(&hello[..20]), Hello::Incomplete);
        assert_eq!(client_hello(b""), Hello::Incomplete);
        assert_eq!(client_hello(b"SSH-2.0-OpenSSH_9.6\r\n"), Hello::NotTls);
        assert_eq!(client_hello(b"GET / HTTP/1.1\r\n"), Hello::NotTls);
        let mut broken = hello.clone();
        broken[5] = 0x02; // a ServerHello where a ClientHello belongs
        assert!(
            matches!(client_hello(&broken), Hello::Malformed(_)),
            "{:?}",
            client_hello(&broken)
        );
    }
}
