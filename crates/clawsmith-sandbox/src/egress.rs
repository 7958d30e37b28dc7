//! An allowlisted network: the command's network namespace (loopback only, as when the network
//! is off) gets exits that the view builder opens inside it and hands to this process, where
//! `clawsmith-egress` serves them. There is no other way out: no bridge process, no socket
//! file, no route.
//!
//! - `127.0.0.1:3128`: the HTTP and SOCKS5 proxy; commands get `HTTP_PROXY`, `HTTPS_PROXY`,
//!   `ALL_PROXY` (and the lower-case names) pointing at it.
//! - `127.0.0.1:53` (UDP): the DNS stub, named by the view's `/etc/resolv.conf` when the host's
//!   is a plain file: allowed names resolve to stand-in addresses, nothing else resolves.
//! - `0.0.0.0:PORT` for 80, 443 and every port an allow rule names: transparent listeners, so
//!   a tool that ignores proxy variables and connects to a stand-in address goes through the
//!   gateway too.
//!
//! Every destination is decided, resolved, checked and dialled by the gateway on the host side.
//! When the exits cannot be opened, the namespace keeps only its loopback (the network fails
//! closed) and the reason is logged.

use std::io;
use std::os::fd::OwnedFd;
use std::sync::Arc;

use clawsmith_egress::{Connect, DirectConnect, DnsStub, EgressPolicy, Gateway, NameMap, Resolve};

/// Where the proxy listens inside an allowlisted namespace.
pub const PROXY_PORT: u16 = 3128;
/// Where the DNS stub listens inside an allowlisted namespace.
pub const DNS_PORT: u16 = 53;
/// The most transparent listeners one namespace gets.
pub(crate) const TRANSPARENT_MAX: usize = 16;

/// An allowlisted network: the policy, and how the gateway resolves names and dials addresses
/// (the system's resolver and direct connections, unless a test stands in for them).
#[derive(Clone)]
pub struct Egress {
    policy: EgressPolicy,
    resolver: Arc<dyn Resolve>,
    connector: Arc<dyn Connect>,
}

impl Egress {
    /// The allowlist of `policy`.
    pub fn new(policy: EgressPolicy) -> Egress {
        Egress {
            policy,
            resolver: Arc::new(clawsmith_egress::SystemResolver),
            connector: Arc::new(DirectConnect),
        }
    }

    /// This allowlist with names resolved by `resolver` and addresses dialled by `connector`:
    /// for tests, whose origins stand on 127.0.0.1 for public hosts.
    #[doc(hidden)]
    pub fn through(mut self, resolver: Arc<dyn Resolve>, connector: Arc<dyn Connect>) -> Egress {
        self.resolver = resolver;
        self.connector = connector;
        self
    }

    /// The rules.
    pub fn policy(&self) -> &EgressPolicy {
        &self.policy
    }

    /// The ports of the transparent listeners: 80, 443 and every port an allow rule names, at
    /// most [`TRANSPARENT_MAX`].
    pub(crate) fn transparent_ports(&self) -> Vec<u16> {
        let mut ports = vec![80, 443];
        for port in self.policy.allow.iter().filter_map(|rule| rule.port()) {
            if !ports.contains(&port) && port != PROXY_PORT && port != DNS_PORT {
                ports.push(port);
            }
        }
        ports.truncate(TRANSPARENT_MAX);
        ports
    }

    /// The gateway of this allowlist, its events logged.
    fn gateway(&self) -> Gateway {
        Gateway::new(self.policy.clone())
            .with_resolver(Arc::clone(&self.resolver))
            .with_connector(Arc::clone(&self.connector))
            .with_events(|event| {
                if event.allowed {
                    tracing::info!(host = %event.host, port = event.port, protocol = event.protocol, "egress allowed: {}", event.reason);
                } else {
                    tracing::warn!(host = %event.host, port = event.port, protocol = event.protocol, "egress refused: {}", event.reason);
                }
            })
    }
}

impl PartialEq for Egress {
    fn eq(&self, other: &Egress) -> bool {
        self.policy == other.policy
            && Arc::ptr_eq(&self.resolver, &other.resolver)
            && Arc::ptr_eq(&self.connector, &other.connector)
    }
}

impl Eq for Egress {}

impl std::fmt::Debug for Egress {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("Egress")
            .field("policy", &self.policy)
            .finish_non_exhaustive()
    }
}

/// The variables that send a command's clients through the proxy.
pub(crate) fn proxy_environment() -> [(&'static str, String); 8] {
    let http = format!("http://127.0.0.1:{PROXY_PORT}");
    let socks = format!("socks5h://127.0.0.1:{PROXY_PORT}");
    let local = "localhost,127.0.0.1,::1".to_owned();
    [
        ("HTTP_PROXY", http.clone()),
        ("http_proxy", http.clone()),
        ("HTTPS_PROXY", http.clone()),
        ("https_proxy", http),
        ("ALL_PROXY", socks.clone()),
        ("all_proxy", socks),
        ("NO_PROXY", local.clone()),
        ("no_proxy", local),
    ]
}

/// The gateway serving one namespace's exits, on a thread of its own; stopped on drop.
pub(crate) struct EgressService {
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl std::fmt::Debug for EgressService {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("EgressService")
            .finish_non_exhaustive()
    }
}

impl EgressService {
    /// Serves `exits` as the builder opened them: the proxy listener, the DNS socket, then
    /// the transparent listeners.
    pub(crate) fn start(egress: &Egress, exits: Vec<OwnedFd>) -> io::Result<EgressService> {
        let mut exits = exits.into_iter();
        let (Some(proxy), Some(dns)) = (exits.next(), exits.next()) else {
            return Err(io::Error::other("the view builder opened no exits"));
        };
        let proxy = std::net::TcpListener::from(proxy);
        let dns = std::net::UdpSocket::from(dns);
        let transparent: Vec<std::net::TcpListener> =
            exits.map(std::net::TcpListener::from).collect();
        proxy.set_nonblocking(true)?;
        dns.set_nonblocking(true)?;
        for listener in &transparent {
            listener.set_nonblocking(true)?;
        }
        let gateway = Arc::new(egress.gateway());
        let names = Arc::new(NameMap::new());
        let stub = Arc::new(DnsStub::new(egress.policy.clone(), Arc::clone(&names)));
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_io()
            .enable_time()
            .build()?;
        let thread = std::thread::Builder::new()
            .name("clawsmith-egress".to_owned())
            .spawn(move || {
                runtime.block_on(async move {
                    let serve = async {
                        let proxy = tokio::net::TcpListener::from_std(proxy)?;
                        let dns = tokio::net::UdpSocket::from_std(dns)?;
                        for listener in transparent {
                            let listener = tokio::net::TcpListener::from_std(listener)?;
                            tokio::spawn(
                                Arc::clone(&gateway)
                                    .serve_transparent(listener, Arc::clone(&names)),
                            );
                        }
                        tokio::spawn(stub.serve(dns));
                        tokio::spawn(Arc::clone(&gateway).serve(proxy));
                        Ok::<_, io::Error>(())
                    };
                    if let Err(error) = serve.await {
                        tracing::warn!(%error, "the egress gateway could not serve its exits");
                        return;
                    }
                    let _ = stopped.await;
                });
            })?;
        Ok(EgressService {
            stop: Some(stop),
            thread: Some(thread),
        })
    }
}

impl Drop for EgressService {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}
