//! An allowlisted network: the command's network namespace (loopback only, as when the network
//! is off) gets exits that the view builder opens inside it and hands to this process, where
//! `clawsmith-egress` serves them. There is no other way out: no bridge process, no socket
//! file, no route.
//!
//! - `127.0.0.1:3128`: the HTTP and SOCKS5 proxy; commands get `HTTP_PROXY`, `HTTPS_PROXY`,
//!   `ALL_PROXY` (and the lower-case names) pointing at it.
//! - `127.0.0.1:53` (UDP): the DNS stub, named by the view's `/etc/resolv.conf` (mounted over
//!   the host's file, or over the link when it is one): allowed names resolve to stand-in
//!   addresses, nothing else resolves.
//! - `0.0.0.0:PORT` for 80, 443 and every port an allow rule names: transparent listeners, so
//!   a tool that ignores proxy variables and connects to a stand-in address goes through the
//!   gateway too.
//!
//! Every destination is decided, resolved, checked and dialled by the gateway on the host side.
//! When the exits cannot be opened or served, the namespace keeps only its loopback (the
//! network fails closed) and each command's [`crate::SandboxReport::network`] says why.
//!
//! Every connection the gateway allows or refuses, and every name the DNS stub refuses, is a
//! [`NetworkEvent`] of the command that was running ([`crate::CommandOutcome::network`]).
//! Commands with equal configurations share a namespace; when two ran at once, each one's
//! events are those of the namespace during its run, and it is marked
//! ([`crate::CommandOutcome::network_shared`]).

use std::collections::{BTreeMap, VecDeque};
use std::io;
use std::os::fd::OwnedFd;
use std::sync::{Arc, Mutex, PoisonError};

use clawsmith_egress::EgressEvent;

use clawsmith_egress::{Connect, DirectConnect, DnsStub, EgressPolicy, Gateway, NameMap, Resolve};

/// Where the proxy listens inside an allowlisted namespace.
pub const PROXY_PORT: u16 = 3128;
/// Where the DNS stub listens inside an allowlisted namespace.
pub const DNS_PORT: u16 = 53;
/// The most transparent listeners one namespace gets.
pub(crate) const TRANSPARENT_MAX: usize = 16;

/// The most events one namespace keeps for the commands running in it.
const LOG_MAX: usize = 1024;
/// The most distinct events one command's result lists (the rest are counted).
pub(crate) const EVENTS_LISTED_MAX: usize = 32;

/// An allowlisted network: the policy, and how the gateway resolves names and dials addresses
/// (the system's resolver and direct connections, unless a test stands in for them).
#[derive(Clone)]
pub struct Egress {
    policy: EgressPolicy,
    resolver: Arc<dyn Resolve>,
    connector: Arc<dyn Connect>,
    /// Whether the view builder is made to open an exit the kernel refuses (tests of the
    /// closed failure).
    unopenable_exit: bool,
}

impl Egress {
    /// The allowlist of `policy`.
    pub fn new(policy: EgressPolicy) -> Egress {
        Egress {
            policy,
            resolver: Arc::new(clawsmith_egress::SystemResolver),
            connector: Arc::new(DirectConnect),
            unopenable_exit: false,
        }
    }

    /// This allowlist with a transparent listener on the proxy's own port, which the kernel
    /// refuses to bind (`EADDRINUSE`): for tests of a gateway that cannot start.
    #[doc(hidden)]
    pub fn with_unopenable_exit(mut self) -> Egress {
        self.unopenable_exit = true;
        self
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
        if self.unopenable_exit {
            ports.push(PROXY_PORT);
        }
        ports
    }

    /// The gateway of this allowlist, its events kept in `log` and traced.
    fn gateway(&self, log: &Arc<EventLog>) -> Gateway {
        Gateway::new(self.policy.clone())
            .with_resolver(Arc::clone(&self.resolver))
            .with_connector(Arc::clone(&self.connector))
            .with_events(log.sink())
    }
}

/// One connection the gateway allowed or refused during a command (or a name the DNS stub
/// refused), as the command's result lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct NetworkEvent {
    /// The name asked for (an address literal as written, when one was).
    pub host: String,
    /// The port (53 for a DNS question).
    pub port: u16,
    /// How it was asked: `http-connect`, `http`, `socks5`, `transparent` or `dns`.
    pub protocol: &'static str,
    /// Whether the connection went through.
    pub allowed: bool,
    /// Which rule allowed it, or why it was refused, in words a model can act on.
    pub reason: String,
    /// How many times this same event happened during the command.
    pub count: u32,
}

impl std::fmt::Display for NetworkEvent {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            formatter,
            "{} {}:{} ({}): {}",
            if self.allowed { "allowed" } else { "refused" },
            self.host,
            self.port,
            self.protocol,
            self.reason
        )?;
        if self.count > 1 {
            write!(formatter, " (×{})", self.count)?;
        }
        Ok(())
    }
}

/// The events of one namespace, kept while commands that may own them run.
#[derive(Debug, Default)]
pub(crate) struct EventLog {
    inner: Mutex<LogInner>,
}

#[derive(Debug, Default)]
struct LogInner {
    /// The number the next event gets.
    next: u64,
    /// Events numbered from `next - events.len()`.
    events: VecDeque<EgressEvent>,
    /// Events no longer kept because the log was full.
    dropped_before: u64,
    /// The commands running: (where their events start, whether another ran with them).
    watchers: BTreeMap<u64, (u64, bool)>,
    next_watcher: u64,
}

impl EventLog {
    /// A sink for the gateway and the stub: keeps the event (while a command watches) and
    /// traces it.
    fn sink(self: &Arc<Self>) -> impl Fn(&EgressEvent) + Send + Sync + 'static {
        let log = Arc::clone(self);
        move |event: &EgressEvent| {
            if event.allowed {
                tracing::info!(host = %event.host, port = event.port, protocol = event.protocol, "egress allowed: {}", event.reason);
            } else {
                tracing::warn!(host = %event.host, port = event.port, protocol = event.protocol, "egress refused: {}", event.reason);
            }
            log.push(event);
        }
    }

    fn push(&self, event: &EgressEvent) {
        let mut inner = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        inner.next += 1;
        if inner.watchers.is_empty() {
            // Nobody can own it (a command's processes are gone with it): nothing to keep.
            inner.events.clear();
            return;
        }
        if inner.events.len() == LOG_MAX {
            inner.events.pop_front();
            let first = inner.next - 1 - LOG_MAX as u64;
            inner.dropped_before = first + 1;
        }
        inner.events.push_back(event.clone());
    }

    /// Starts watching for a command that is about to start.
    pub(crate) fn watch(self: &Arc<Self>) -> Watch {
        let mut inner = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        let shared = !inner.watchers.is_empty();
        for (_, other_shared) in inner.watchers.values_mut() {
            *other_shared |= shared;
        }
        let id = inner.next_watcher;
        inner.next_watcher += 1;
        let start = inner.next;
        inner.watchers.insert(id, (start, shared));
        Watch {
            log: Arc::clone(self),
            id,
        }
    }
}

/// The events of one command, from when it started until [`Watch::finish`].
#[derive(Debug)]
pub(crate) struct Watch {
    log: Arc<EventLog>,
    id: u64,
}

/// What one command's [`Watch`] saw.
#[derive(Debug, Default)]
pub(crate) struct Seen {
    /// Distinct events, in the order they first happened, at most [`EVENTS_LISTED_MAX`].
    pub(crate) events: Vec<NetworkEvent>,
    /// Events not listed: beyond the listed kinds, or no longer kept by a full log.
    pub(crate) unlisted: u64,
    /// Whether another command ran in the same namespace meanwhile.
    pub(crate) shared: bool,
}

impl Watch {
    /// The watch of the command about to start in `base`, when its network is an allowlist
    /// whose gateway serves it.
    pub(crate) fn of(base: &crate::child::BaseNamespaces) -> Option<Watch> {
        match &base.egress {
            Some(EgressState::Serving(service)) => Some(service.log.watch()),
            _ => None,
        }
    }

    /// The events since the command started (it has ended: its processes are gone).
    pub(crate) fn finish(self) -> Seen {
        let mut inner = self
            .log
            .inner
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let Some((start, shared)) = inner.watchers.remove(&self.id) else {
            return Seen::default();
        };
        let first_kept = inner.next - inner.events.len() as u64;
        let mut seen = Seen {
            shared,
            unlisted: first_kept.saturating_sub(start),
            ..Seen::default()
        };
        let skip = usize::try_from(start.saturating_sub(first_kept)).unwrap_or(usize::MAX);
        for event in inner.events.iter().skip(skip) {
            let listed_count = seen.events.len();
            let same = seen.events.iter_mut().find(|listed| {
                listed.allowed == event.allowed
                    && listed.port == event.port
                    && listed.protocol == event.protocol
                    && listed.host == event.host
                    && listed.reason == event.reason
            });
            match same {
                Some(listed) => listed.count = listed.count.saturating_add(1),
                None if listed_count < EVENTS_LISTED_MAX => seen.events.push(NetworkEvent {
                    host: event.host.clone(),
                    port: event.port,
                    protocol: event.protocol,
                    allowed: event.allowed,
                    reason: event.reason.clone(),
                    count: 1,
                }),
                None => seen.unlisted += 1,
            }
        }
        // Events older than every remaining watcher's start are nobody's.
        let oldest = inner.watchers.values().map(|(start, _)| *start).min();
        let keep_from = oldest.unwrap_or(inner.next);
        while inner.next - (inner.events.len() as u64) < keep_from && !inner.events.is_empty() {
            inner.events.pop_front();
        }
        seen
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        // A command whose events nobody asked for (a background command, a plugin's process)
        // stops holding them when its watch goes.
        self.log
            .inner
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .watchers
            .remove(&self.id);
    }
}

impl PartialEq for Egress {
    fn eq(&self, other: &Egress) -> bool {
        self.policy == other.policy
            && self.unopenable_exit == other.unopenable_exit
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

/// The gateway of a namespace: serving its exits, or why it is not (the namespace then has
/// its loopback only).
#[derive(Debug)]
pub(crate) enum EgressState {
    Serving(EgressService),
    Failed(String),
}

/// The gateway serving one namespace's exits, on a thread of its own; stopped on drop.
pub(crate) struct EgressService {
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
    pub(crate) log: Arc<EventLog>,
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
        let log = Arc::new(EventLog::default());
        let gateway = Arc::new(egress.gateway(&log));
        let names = Arc::new(NameMap::new());
        let stub = Arc::new(
            DnsStub::new(egress.policy.clone(), Arc::clone(&names)).with_events(log.sink()),
        );
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_io()
            .enable_time()
            .build()?;
        // The sockets join the runtime here, so that a failure is this function's error.
        let (proxy, dns, transparent) = {
            let _entered = runtime.enter();
            let transparent = transparent
                .into_iter()
                .map(tokio::net::TcpListener::from_std)
                .collect::<io::Result<Vec<_>>>()?;
            (
                tokio::net::TcpListener::from_std(proxy)?,
                tokio::net::UdpSocket::from_std(dns)?,
                transparent,
            )
        };
        let thread = std::thread::Builder::new()
            .name("clawsmith-egress".to_owned())
            .spawn(move || {
                runtime.block_on(async move {
                    for listener in transparent {
                        tokio::spawn(
                            Arc::clone(&gateway).serve_transparent(listener, Arc::clone(&names)),
                        );
                    }
                    tokio::spawn(stub.serve(dns));
                    tokio::spawn(Arc::clone(&gateway).serve(proxy));
                    let _ = stopped.await;
                });
            })?;
        Ok(EgressService {
            stop: Some(stop),
            thread: Some(thread),
            log,
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

#[cfg(test)]
mod tests {
    use super::*;

    fn event(host: &str, allowed: bool) -> EgressEvent {
        EgressEvent {
            host: host.to_owned(),
            port: 443,
            protocol: "http-connect",
            allowed,
            reason: format!("{host}: {}", if allowed { "a rule" } else { "no rule" }),
            address: None,
        }
    }

    fn hosts(seen: &Seen) -> Vec<(String, u32)> {
        seen.events
            .iter()
            .map(|event| (event.host.clone(), event.count))
            .collect()
    }

    #[test]
    fn a_command_gets_the_events_of_its_run_counted_and_nobody_elses() {
        let log = Arc::new(EventLog::default());
        let sink = log.sink();
        // Before any command: nobody's.
        sink(&event("before.test", true));
        let first = log.watch();
        sink(&event("a.test", true));
        sink(&event("b.test", false));
        sink(&event("a.test", true));
        let seen = first.finish();
        assert_eq!(
            hosts(&seen),
            [("a.test".to_owned(), 2), ("b.test".to_owned(), 1)]
        );
        assert!(!seen.shared && seen.unlisted == 0);
        assert!(!seen.events[1].allowed);
        assert_eq!(
            seen.events[1].to_string(),
            "refused b.test:443 (http-connect): b.test: no rule"
        );
        assert_eq!(
            seen.events[0].to_string(),
            "allowed a.test:443 (http-connect): a.test: a rule (×2)"
        );
        // After it: the next command sees only its own.
        sink(&event("between.test", true));
        let second = log.watch();
        sink(&event("c.test", true));
        assert_eq!(hosts(&second.finish()), [("c.test".to_owned(), 1)]);
        assert!(log.inner.lock().unwrap().events.is_empty());
    }

    #[test]
    fn commands_that_overlap_in_one_namespace_are_each_marked_shared() {
        let log = Arc::new(EventLog::default());
        let sink = log.sink();
        let first = log.watch();
        sink(&event("one.test", true));
        let second = log.watch();
        sink(&event("two.test", true));
        let second = second.finish();
        assert!(second.shared);
        assert_eq!(hosts(&second), [("two.test".to_owned(), 1)]);
        // The first keeps everything since its start: the second's events are in its window.
        let first = first.finish();
        assert!(first.shared);
        assert_eq!(
            hosts(&first),
            [("one.test".to_owned(), 1), ("two.test".to_owned(), 1)]
        );
        // A watch dropped without finishing (a background command that ended) leaves no mark.
        let dropped = log.watch();
        drop(dropped);
        let alone = log.watch();
        sink(&event("three.test", false));
        assert!(!alone.finish().shared);
    }

    #[test]
    fn a_flood_is_listed_up_to_the_cap_and_counted_beyond_it() {
        let log = Arc::new(EventLog::default());
        let sink = log.sink();
        // More distinct events than a result lists: the first ones listed, the rest counted.
        let watch = log.watch();
        let distinct = EVENTS_LISTED_MAX + 8;
        for index in 0..distinct {
            sink(&event(&format!("n{index}.test"), false));
        }
        sink(&event("n0.test", false));
        let seen = watch.finish();
        assert_eq!(seen.events.len(), EVENTS_LISTED_MAX);
        assert_eq!(seen.events[0].host, "n0.test");
        assert_eq!(seen.events[0].count, 2);
        assert_eq!(seen.unlisted, 8);
        // More events than the log keeps: the oldest go, and are counted.
        let watch = log.watch();
        sink(&event("first.test", false));
        for _ in 0..LOG_MAX + 9 {
            sink(&event("again.test", false));
        }
        let seen = watch.finish();
        assert_eq!(hosts(&seen), [("again.test".to_owned(), LOG_MAX as u32)]);
        assert_eq!(seen.unlisted, 10);
    }
}
