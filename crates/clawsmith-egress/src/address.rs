//! Which resolved addresses an allowed name may be dialled at: never this machine, its
//! loopback, link-local addresses (cloud metadata services) or addresses no host has; private
//! ones only when the policy says so. IPv4 carried in IPv6 (mapped, compatible, NAT64's
//! well-known prefix, 6to4) is judged as the IPv4 address it carries.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// Why `ip` may not be dialled, or `None` when it may. `own` lists this machine's addresses.
pub fn refused(ip: IpAddr, own: &[IpAddr], allow_private: bool) -> Option<&'static str> {
    let ip = embedded_v4(ip).map_or(ip, IpAddr::V4);
    let by_kind = match ip {
        IpAddr::V4(v4) => refused_v4(v4, allow_private),
        IpAddr::V6(v6) => refused_v6(v6, allow_private),
    };
    by_kind.or_else(|| {
        own.contains(&ip)
            .then_some("it is an address of this machine")
    })
}

fn refused_v4(ip: Ipv4Addr, allow_private: bool) -> Option<&'static str> {
    let [a, b, ..] = ip.octets();
    if ip.is_loopback() {
        Some("it is a loopback address")
    } else if ip.is_link_local() {
        Some("it is link-local (where cloud metadata services answer)")
    } else if ip.is_unspecified() || a == 0 {
        Some("it is the unspecified network")
    } else if ip.is_multicast() || ip.is_broadcast() || a >= 240 {
        Some("it is a multicast, broadcast or reserved address")
    } else if (ip.is_private() || (a == 100 && b & 0xc0 == 64)) && !allow_private {
        Some("it is a private address (allow_private is off)")
    } else if a == 192 && b == 0 && ip.octets()[2] == 0 {
        Some("it is an IETF protocol assignment")
    } else {
        None
    }
}

/// IPv6 by construction: only global unicast (`2000::/3`) is dialled, less its IETF protocol
/// assignments (`2001::/23`: Teredo, benchmarking, ORCHID…) and documentation (`2001:db8::/32`);
/// unique-local (`fc00::/7`) only with `allow_private`. Every other block (loopback,
/// unspecified, link- and site-local, multicast, discard-only, the reserved rest) is refused
/// without being named one by one.
fn refused_v6(ip: Ipv6Addr, allow_private: bool) -> Option<&'static str> {
    let [first, second, ..] = ip.segments();
    if first & 0xfe00 == 0xfc00 {
        return (!allow_private)
            .then_some("it is a unique-local (private) address (allow_private is off)");
    }
    if first & 0xe000 != 0x2000 {
        return Some(if ip.is_loopback() {
            "it is a loopback address"
        } else if ip.is_unicast_link_local() {
            "it is link-local"
        } else if ip.is_multicast() {
            "it is a multicast address"
        } else {
            "it is not a global unicast address"
        });
    }
    if first == 0x2001 && second == 0x0db8 {
        Some("it is a documentation address")
    } else if first == 0x2001 && second < 0x0200 {
        Some("it is an IETF protocol assignment (Teredo, benchmarking, ORCHID…)")
    } else {
        None
    }
}

/// The IPv4 address an IPv6 address carries: mapped (`::ffff:a.b.c.d`), compatible
/// (`::a.b.c.d`), NAT64's well-known prefix (`64:ff9b::a.b.c.d`) or 6to4 (`2002:AABB:CCDD::`).
fn embedded_v4(ip: IpAddr) -> Option<Ipv4Addr> {
    let IpAddr::V6(v6) = ip else {
        return None;
    };
    if let Some(v4) = v6.to_ipv4_mapped() {
        return Some(v4);
    }
    let s = v6.segments();
    let low = Ipv4Addr::new(
        (s[6] >> 8) as u8,
        (s[6] & 0xff) as u8,
        (s[7] >> 8) as u8,
        (s[7] & 0xff) as u8,
    );
    if s[..6] == [0; 6] && !v6.is_loopback() && !v6.is_unspecified() {
        return Some(low);
    }
    if s[..6] == [0x64, 0xff9b, 0, 0, 0, 0] {
        return Some(low);
    }
    if s[0] == 0x2002 {
        return Some(Ipv4Addr::new(
            (s[1] >> 8) as u8,
            (s[1] & 0xff) as u8,
            (s[2] >> 8) as u8,
            (s[2] & 0xff) as u8,
        ));
    }
    None
}

/// This machine's own addresses (every interface's), which no command may reach through the
/// gateway even when a name resolves to one.
pub fn own_addresses() -> Vec<IpAddr> {
    let Ok(interfaces) = nix::ifaddrs::getifaddrs() else {
        return Vec::new();
    };
    interfaces
        .filter_map(|interface| {
            let address = interface.address?;
            if let Some(v4) = address.as_sockaddr_in() {
                return Some(IpAddr::V4(v4.ip()));
            }
            address.as_sockaddr_in6().map(|v6| IpAddr::V6(v6.ip()))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_other_hosts_public_addresses_are_dialled() {
        let own: Vec<IpAddr> = vec![
            "198.51.100.7".parse().unwrap(),
            "2a01:4f8::7".parse().unwrap(),
        ];
        // (address, allow_private, refused)
        let table = [
            ("93.184.216.34", false, false),
            ("2606:2800:220:1::1", false, false),
            ("198.51.100.7", false, true),
            ("2a01:4f8::7", false, true),
            ("::ffff:198.51.100.7", false, true),
            ("127.0.0.1", false, true),
            ("127.5.6.7", true, true),
            ("::1", true, true),
            ("::ffff:127.0.0.1", true, true),
            ("::127.0.0.1", true, true),
            ("64:ff9b::7f00:1", true, true),
            ("2002:7f00:1::", true, true),
            ("169.254.169.254", true, true),
            ("::ffff:169.254.169.254", true, true),
            ("64:ff9b::a9fe:a9fe", true, true),
            ("fe80::1", true, true),
            ("0.0.0.0", true, true),
            ("0.1.2.3", true, true),
            ("::", true, true),
            ("224.0.0.1", true, true),
            ("255.255.255.255", true, true),
            ("240.0.0.1", true, true),
            ("ff02::1", true, true),
            ("10.0.0.9", false, true),
            ("10.0.0.9", true, false),
            ("172.16.0.1", false, true),
            ("192.168.1.1", false, true),
            ("100.64.0.1", false, true),
            ("100.64.0.1", true, false),
            ("fd00::1", false, true),
            ("fd00:ec2::254", false, true),
            ("fd00::1", true, false),
            ("::ffff:10.0.0.9", false, true),
            ("2001:db8::1", false, true),
            // IPv6 outside global unicast, without a rule of its own: refused all the same.
            ("100::1", true, true),
            ("fec0::1", true, true),
            ("4000::1", true, true),
            ("::2:3:4:5:6", true, true),
            // Inside it: IETF assignments (Teredo carries an obfuscated IPv4 address).
            ("2001:0:4136:e378:8000:63bf:3fff:fdd2", true, true),
            ("2001:2::1", true, true),
            ("2001:20::1", true, true),
            ("2001:200::1", false, false),
            ("2a00:1450:4001::1", false, false),
        ];
        for (address, allow_private, is_refused) in table {
            let ip: IpAddr = address.parse().unwrap();
            let verdict = refused(ip, &own, allow_private);
            assert_eq!(verdict.is_some(), is_refused, "{address}: {verdict:?}");
        }
    }

    #[test]
    fn this_machine_has_a_loopback_address() {
        let own = own_addresses();
        assert!(own.iter().any(IpAddr::is_loopback), "{own:?}");
    }
}
