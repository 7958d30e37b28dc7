//! Which destinations a command may reach: rules by host name (with a leading `*.` wildcard)
//! and port, deny rules first, nothing that is not allowed.

use std::fmt;
use std::str::FromStr;

/// One rule: a host pattern and the ports it covers.
///
/// Written `HOST[:PORT]`: `github.com` (any port), `*.githubusercontent.com:443` (every name
/// under that domain, not the domain itself), `*:443` (any name, port 443). Names compare
/// case-insensitively and without a trailing dot. An address literal is not a valid pattern:
/// destinations are named, and the gateway refuses address literals whatever the rules say.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rule {
    host: HostPattern,
    port: Option<u16>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum HostPattern {
    /// `*`: any name.
    Any,
    /// `*.suffix`: any name strictly under `suffix`.
    Under(String),
    /// A name, exactly.
    Exact(String),
}

/// Why a rule does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("network rule {rule:?}: {reason}")]
pub struct RuleError {
    rule: String,
    reason: &'static str,
}

impl FromStr for Rule {
    type Err = RuleError;

    fn from_str(text: &str) -> Result<Rule, RuleError> {
        let refuse = |reason| RuleError {
            rule: text.to_owned(),
            reason,
        };
        let text = text.trim();
        if text.starts_with('[') || text.parse::<std::net::IpAddr>().is_ok() {
            return Err(refuse(
                "an address is not a rule; name the host (address literals are always refused)",
            ));
        }
        let (host, port) = match text.rsplit_once(':') {
            Some((host, port)) => {
                let port = port
                    .parse::<u16>()
                    .ok()
                    .filter(|port| *port != 0)
                    .ok_or_else(|| refuse("the port must be a number from 1 to 65535"))?;
                (host, Some(port))
            }
            None => (text, None),
        };
        if host.trim() == "*." {
            return Err(refuse("`*.` must be followed by a host name"));
        }
        let host = normalize(host);
        let pattern = if host == "*" {
            HostPattern::Any
        } else if let Some(suffix) = host.strip_prefix("*.") {
            if !is_name(suffix) {
                return Err(refuse("`*.` must be followed by a host name"));
            }
            HostPattern::Under(suffix.to_owned())
        } else if is_name(&host) {
            if is_numeric_host(&host) {
                return Err(refuse(
                    "an address is not a rule; name the host (address literals are always refused)",
                ));
            }
            HostPattern::Exact(host)
        } else {
            return Err(refuse(
                "not a host name (letters, digits, `-` and `.`, with an optional leading `*.`)",
            ));
        };
        Ok(Rule {
            host: pattern,
            port,
        })
    }
}

impl fmt::Display for Rule {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.host {
            HostPattern::Any => formatter.write_str("*")?,
            HostPattern::Under(suffix) => write!(formatter, "*.{suffix}")?,
            HostPattern::Exact(name) => formatter.write_str(name)?,
        }
        match self.port {
            Some(port) => write!(formatter, ":{port}"),
            None => Ok(()),
        }
    }
}

impl Rule {
    /// The port the rule is for, when it names one.
    pub fn port(&self) -> Option<u16> {
        self.port
    }

    /// Whether the rule covers `host` (normalized) on `port`.
    fn covers(&self, host: &str, port: u16) -> bool {
        self.port.is_none_or(|wanted| wanted == port) && self.covers_host(host)
    }

    /// Whether the rule's host pattern covers `host` (normalized), whatever the port.
    fn covers_host(&self, host: &str) -> bool {
        match &self.host {
            HostPattern::Any => true,
            HostPattern::Exact(name) => host == name,
            HostPattern::Under(suffix) => host
                .strip_suffix(suffix.as_str())
                .is_some_and(|head| head.len() > 1 && head.ends_with('.')),
        }
    }
}

/// The rules of one network policy: `deny` first, then `allow`; what neither names is refused.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EgressPolicy {
    /// Destinations allowed.
    pub allow: Vec<Rule>,
    /// Destinations refused even when an allow rule covers them.
    pub deny: Vec<Rule>,
    /// Whether allowed names may resolve to private addresses (RFC 1918, RFC 6598, IPv6
    /// unique-local): for hosts on the user's own network. Loopback, link-local (cloud metadata
    /// services) and the host's own addresses stay refused.
    pub allow_private: bool,
}

/// The policy's answer for one destination, with a reason a model can read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    /// Whether the destination may be reached.
    pub allowed: bool,
    /// Which rule decided, or why none did.
    pub reason: String,
}

impl EgressPolicy {
    /// A policy from rule texts; the first rule that does not parse is the error.
    pub fn parse(
        allow: &[impl AsRef<str>],
        deny: &[impl AsRef<str>],
    ) -> Result<EgressPolicy, RuleError> {
        Ok(EgressPolicy {
            allow: parse_rules(allow)?,
            deny: parse_rules(deny)?,
            allow_private: false,
        })
    }

    /// Whether `host` (a name as the client wrote it) may be reached on `port`.
    pub fn decide(&self, host: &str, port: u16) -> Decision {
        let host = normalize(host);
        if host.parse::<std::net::IpAddr>().is_ok() || is_numeric_host(&host) {
            return Decision {
                allowed: false,
                reason: format!(
                    "{host} is an address, not a name: destinations are reached by the names \
                     the policy allows"
                ),
            };
        }
        if !is_name(&host) {
            return Decision {
                allowed: false,
                reason: format!("{host:?} is not a host name"),
            };
        }
        if let Some(rule) = self.deny.iter().find(|rule| rule.covers(&host, port)) {
            return Decision {
                allowed: false,
                reason: format!("{host}:{port} is denied by the rule `{rule}`"),
            };
        }
        match self.allow.iter().find(|rule| rule.covers(&host, port)) {
            Some(rule) => Decision {
                allowed: true,
                reason: format!("{host}:{port} is allowed by the rule `{rule}`"),
            },
            None => Decision {
                allowed: false,
                reason: format!("{host}:{port} is not in the network allowlist"),
            },
        }
    }
}

fn parse_rules(texts: &[impl AsRef<str>]) -> Result<Vec<Rule>, RuleError> {
    texts.iter().map(|text| text.as_ref().parse()).collect()
}

impl EgressPolicy {
    /// Whether `host` may be resolved at all: a name (not an address), covered by an allow
    /// rule on some port, and not by a deny rule on every port.
    pub fn resolvable(&self, host: &str) -> bool {
        let host = normalize(host);
        is_name(&host)
            && host.parse::<std::net::IpAddr>().is_err()
            && !is_numeric_host(&host)
            && !self
                .deny
                .iter()
                .any(|rule| rule.port.is_none() && rule.covers_host(&host))
            && self.allow.iter().any(|rule| rule.covers_host(&host))
    }
}

/// Lower case, no trailing dot.
fn normalize(host: &str) -> String {
    host.trim().trim_end_matches('.').to_ascii_lowercase()
}

/// Labels of letters, digits, `-` and `_`, 1–63 bytes each, 253 in all.
fn is_name(host: &str) -> bool {
    !host.is_empty()
        && host.len() <= 253
        && host.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && label
                    .bytes()
                    .all(|byte| byte.is_ascii_alphanumeric() || byte == b'-' || b'_' == byte)
        })
}

/// Whether `host` is an address in one of the forms `inet_aton` accepts (`2130706433`,
/// `0x7f.1`, `017700000001`, `127.1`): a resolver would turn it into that address.
pub(crate) fn is_numeric_host(host: &str) -> bool {
    let parts: Vec<&str> = host.split('.').collect();
    parts.len() <= 4
        && parts.iter().all(|part| {
            if let Some(hex) = part.strip_prefix("0x").or_else(|| part.strip_prefix("0X")) {
                hex.bytes().all(|byte| byte.is_ascii_hexdigit())
            } else {
                !part.is_empty() && part.bytes().all(|byte| byte.is_ascii_digit())
            }
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rules_parse_or_say_why_not() {
        // (text, parsed back, or a word of the error)
        let table = [
            ("github.com", Ok("github.com")),
            ("GitHub.com.", Ok("github.com")),
            (
                "*.githubusercontent.com:443",
                Ok("*.githubusercontent.com:443"),
            ),
            ("*:443", Ok("*:443")),
            ("*", Ok("*")),
            ("pypi.org:0", Err("port")),
            ("pypi.org:70000", Err("port")),
            ("pypi.org:https", Err("port")),
            ("10.0.0.1", Err("address")),
            ("[::1]:22", Err("address")),
            ("2130706433", Err("address")),
            ("0x7f.1", Err("address")),
            ("*.", Err("host name")),
            ("a b.com", Err("host name")),
            ("**.com", Err("host name")),
            ("", Err("host name")),
        ];
        for (text, expected) in table {
            match (text.parse::<Rule>(), expected) {
                (Ok(rule), Ok(shown)) => assert_eq!(rule.to_string(), shown, "{text}"),
                (Err(error), Err(word)) => {
                    assert!(error.to_string().contains(word), "{text}: {error}")
                }
                (got, _) => panic!("{text}: {got:?}"),
            }
        }
    }

    #[test]
    fn deny_first_then_allow_then_nothing() {
        let policy = EgressPolicy::parse(
            &["github.com", "*.github.com:443", "pypi.org:443", "*:8443"],
            &["gist.github.com", "*:25"],
        )
        .unwrap();
        // (host, port, allowed, a word of the reason)
        let table = [
            ("github.com", 443, true, "`github.com`"),
            ("GITHUB.COM.", 22, true, "`github.com`"),
            ("api.github.com", 443, true, "`*.github.com:443`"),
            ("api.github.com", 80, false, "not in the network allowlist"),
            (
                "gist.github.com",
                443,
                false,
                "denied by the rule `gist.github.com`",
            ),
            ("github.com", 25, false, "denied by the rule `*:25`"),
            ("evilgithub.com", 443, false, "not in the network allowlist"),
            (
                "github.com.evil.net",
                443,
                false,
                "not in the network allowlist",
            ),
            ("pypi.org", 80, false, "not in the network allowlist"),
            ("anything.example", 8443, true, "`*:8443`"),
            ("127.0.0.1", 8443, false, "an address"),
            ("::1", 8443, false, "an address"),
            ("2130706433", 8443, false, "an address"),
            ("0x7f000001", 8443, false, "an address"),
            ("127.1", 8443, false, "an address"),
            ("a b", 8443, false, "not a host name"),
        ];
        for (host, port, allowed, word) in table {
            let decision = policy.decide(host, port);
            assert_eq!(decision.allowed, allowed, "{host}:{port}: {decision:?}");
            assert!(
                decision.reason.contains(word),
                "{host}:{port}: {decision:?}"
            );
        }
    }
}
