//! # clawsmith-egress
//!
//! The network gateway of clawsmith: a command whose network is an allowlist reaches the hosts
//! the policy names, and nothing else. The sandbox gives such a command a network namespace of
//! its own whose only way out is a listener served by this gateway on the host.
//!
//! ## What it checks, in order
//! 1. **The name**, against [`EgressPolicy`]: deny rules first, then allow rules
//!    (`github.com`, `*.githubusercontent.com:443`, `*:443`); what no rule allows is refused.
//!    Address literals are refused whatever the rules say, in every form a resolver accepts
//!    (`10.0.0.1`, `[::1]`, `2130706433`, `0x7f.1`): destinations are reached by name.
//! 2. **The address.** The gateway resolves the name itself, once ([`Resolve`]), and refuses
//!    addresses no command should reach through it: this machine's own, loopback, link-local
//!    (where cloud metadata services answer), unspecified, multicast and reserved ones, and
//!    private ones unless the policy allows them; IPv4 carried in IPv6 (mapped, compatible,
//!    NAT64, 6to4) is judged as that IPv4 address, and other IPv6 addresses must be global
//!    unicast (`2000::/3`, less its protocol assignments and documentation block). It then dials the address it checked
//!    ([`Connect`]), so a name that resolves differently a moment later (DNS rebinding) changes
//!    nothing.
//! 3. **The TLS server name.** A tunnel's first client bytes, when they are a TLS ClientHello,
//!    must name the host that was allowed (rustls parses the hello): a tunnel to an allowed name
//!    cannot carry a handshake for another (domain fronting), and a hello naming no server is
//!    refused. Bytes that are not TLS (SSH, plain HTTP) pass; the server's bytes flow from the
//!    start, for protocols where the server speaks first.
//!
//! Every connection allowed or refused is an [`EgressEvent`] with a reason a model can read.
//!
//! ## Limits
//! The gateway runs in the host process, so a command must not be able to exhaust it: at most
//! [`DEFAULT_MAX_CONNECTIONS`] client connections are served at once (one more is closed at
//! once and reported), a tunnel that carries no byte either way for [`DEFAULT_IDLE`] is
//! closed, and resolving, dialling and a client's first bytes each have 10 seconds
//! ([`Gateway::with_limits`] sets the first two).
//!
//! ## Protocols on one port
//! [`Gateway::handle`] tells them apart by the first byte:
//! - **HTTP proxy**: `CONNECT host:port` (answered `200` and tunnelled, or `403` / `502` with the
//!   reason in the body) and requests with an absolute `http://` URI (forwarded with hyper;
//!   `https://` must use CONNECT).
//! - **SOCKS5** (RFC 1928), for TCP that is not HTTP (git over SSH): no authentication, the
//!   CONNECT command with a domain name. Address requests are refused (`0x02`, not allowed by
//!   the ruleset), as are UDP ASSOCIATE and BIND (`0x07`).
//!
//! ## Tools that ignore proxy variables
//! [`DnsStub`] answers the names the policy allows with stand-in addresses
//! (`127.77.0.1` onwards, kept in a [`NameMap`]) and refuses every other question; it never
//! asks another server, so nothing leaves the namespace through DNS. A connection to a
//! stand-in address, accepted by [`Gateway::serve_transparent`], is for the name the address
//! stands for and gets every check above.
//!
//! ## What this crate does not do
//! It does not build network namespaces or open listeners in them: `clawsmith-sandbox` does,
//! and serves them with this gateway.

mod address;
mod dns;
mod gateway;
mod policy;
mod sni;

pub use crate::address::{own_addresses, refused as refused_address};
pub use crate::dns::{DnsStub, NameMap};
pub use crate::gateway::{
    BoxFuture, Connect, DEFAULT_IDLE, DEFAULT_MAX_CONNECTIONS, DirectConnect, EgressEvent, Gateway,
    Resolve, SystemResolver,
};
pub use crate::policy::{Decision, EgressPolicy, Rule, RuleError};
pub use crate::sni::{Hello, client_hello, client_hello_for};
