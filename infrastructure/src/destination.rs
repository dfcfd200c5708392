//! The destination policy (SSRF): which addresses a tenant's outgoing requests (webhooks, SIFEN
//! channels, autoimpresor reports) may reach. A production tenant reaches only public addresses;
//! so does a demo tenant while public signup is on (anyone can make one); the operator's
//! allow-list ([`Policy::allow`], `KUATIA_PRIVATE_DESTINATIONS`) opens chosen private ranges to
//! both, for a SIFEN simulator or a receiver on a private network. One table, [`SPECIAL`], of the IANA special-purpose address registries
//! (IPv4 and IPv6, RFC 6890 and its updates) and the other ranges no public service lives in;
//! an IPv6 address that embeds an IPv4 one (IPv4-mapped, IPv4-compatible, NAT64, 6to4) is judged
//! by the IPv4 address it leads to.
//!
//! The table and the rules are pure; resolving a host and pinning the address checked is
//! `webhook_sender::check_destination`'s, and [`TenantDestinations`] puts both behind the
//! workflows' port.

use async_trait::async_trait;
use kuatia_application::event_store::StoreError;
use kuatia_application::process::ports::{Destinations, RefusedDestination, TenantReads};
use kuatia_domain::tenancy::TenantId;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;

/// A special-purpose range: its prefix, its length and what it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Range {
    /// The network address.
    pub network: IpAddr,
    /// The prefix length.
    pub prefix: u8,
    /// What it is (IANA's name, shortened).
    pub name: &'static str,
}

const fn v4(a: u8, b: u8, c: u8, d: u8, prefix: u8, name: &'static str) -> Range {
    Range {
        network: IpAddr::V4(Ipv4Addr::new(a, b, c, d)),
        prefix,
        name,
    }
}

#[allow(clippy::too_many_arguments)]
const fn v6(s: [u16; 8], prefix: u8, name: &'static str) -> Range {
    Range {
        network: IpAddr::V6(Ipv6Addr::new(s[0], s[1], s[2], s[3], s[4], s[5], s[6], s[7])),
        prefix,
        name,
    }
}

/// Every range a production tenant may not reach, IPv4 then IPv6. The IPv6 ranges that embed an
/// IPv4 address are not here: [`special`] judges them by that address.
pub static SPECIAL: &[Range] = &[
    v4(0, 0, 0, 0, 8, "\"this network\" (RFC 791)"),
    v4(10, 0, 0, 0, 8, "private use (RFC 1918)"),
    v4(
        100,
        64,
        0,
        0,
        10,
        "shared address space, carrier-grade NAT (RFC 6598)",
    ),
    v4(127, 0, 0, 0, 8, "loopback (RFC 1122)"),
    v4(169, 254, 0, 0, 16, "link local, cloud metadata (RFC 3927)"),
    v4(172, 16, 0, 0, 12, "private use (RFC 1918)"),
    v4(192, 0, 0, 0, 24, "IETF protocol assignments (RFC 6890)"),
    v4(192, 0, 2, 0, 24, "documentation TEST-NET-1 (RFC 5737)"),
    v4(192, 31, 196, 0, 24, "AS112-v4 (RFC 7535)"),
    v4(192, 52, 193, 0, 24, "AMT (RFC 7450)"),
    v4(192, 88, 99, 0, 24, "deprecated 6to4 relay anycast (RFC 7526)"),
    v4(192, 168, 0, 0, 16, "private use (RFC 1918)"),
    v4(192, 175, 48, 0, 24, "direct delegation AS112 service (RFC 7534)"),
    v4(198, 18, 0, 0, 15, "benchmarking (RFC 2544)"),
    v4(198, 51, 100, 0, 24, "documentation TEST-NET-2 (RFC 5737)"),
    v4(203, 0, 113, 0, 24, "documentation TEST-NET-3 (RFC 5737)"),
    v4(224, 0, 0, 0, 4, "multicast (RFC 5771)"),
    v4(
        240,
        0,
        0,
        0,
        4,
        "reserved, and limited broadcast (RFC 1112, RFC 919)",
    ),
    v6([0, 0, 0, 0, 0, 0, 0, 0], 128, "unspecified (RFC 4291)"),
    v6([0, 0, 0, 0, 0, 0, 0, 1], 128, "loopback (RFC 4291)"),
    v6(
        [0x0064, 0xff9b, 1, 0, 0, 0, 0, 0],
        48,
        "local-use IPv4/IPv6 translation (RFC 8215)",
    ),
    v6([0x0100, 0, 0, 0, 0, 0, 0, 0], 64, "discard-only (RFC 6666)"),
    v6(
        [0x2001, 0, 0, 0, 0, 0, 0, 0],
        23,
        "IETF protocol assignments, Teredo included (RFC 2928, 4380)",
    ),
    v6([0x2001, 0x0db8, 0, 0, 0, 0, 0, 0], 32, "documentation (RFC 3849)"),
    v6([0x3fff, 0, 0, 0, 0, 0, 0, 0], 20, "documentation (RFC 9637)"),
    v6(
        [0x5f00, 0, 0, 0, 0, 0, 0, 0],
        16,
        "segment routing SIDs (RFC 9602)",
    ),
    v6([0xfc00, 0, 0, 0, 0, 0, 0, 0], 7, "unique local (RFC 4193)"),
    v6([0xfe80, 0, 0, 0, 0, 0, 0, 0], 10, "link local (RFC 4291)"),
    v6(
        [0xfec0, 0, 0, 0, 0, 0, 0, 0],
        10,
        "deprecated site local (RFC 3879)",
    ),
    v6([0xff00, 0, 0, 0, 0, 0, 0, 0], 8, "multicast (RFC 4291)"),
];

fn contains(range: &Range, ip: IpAddr) -> bool {
    match (range.network, ip) {
        (IpAddr::V4(net), IpAddr::V4(ip)) => {
            let mask = u32::MAX.checked_shl(32 - u32::from(range.prefix)).unwrap_or(0);
            u32::from(net) & mask == u32::from(ip) & mask
        }
        (IpAddr::V6(net), IpAddr::V6(ip)) => {
            let mask = u128::MAX.checked_shl(128 - u32::from(range.prefix)).unwrap_or(0);
            u128::from(net) & mask == u128::from(ip) & mask
        }
        _ => false,
    }
}

/// The IPv4 address an IPv6 one leads to: IPv4-mapped (`::ffff:a.b.c.d`), IPv4-compatible
/// (`::a.b.c.d`), NAT64 (`64:ff9b::a.b.c.d`, RFC 6052), 6to4 (`2002:aabb:ccdd::/48`, RFC 3056).
pub fn embedded_v4(ip: Ipv6Addr) -> Option<Ipv4Addr> {
    let s = ip.segments();
    let low = Ipv4Addr::new((s[6] >> 8) as u8, s[6] as u8, (s[7] >> 8) as u8, s[7] as u8);
    if s[..5] == [0; 5] && (s[5] == 0xffff || (s[5] == 0 && u128::from(ip) > 1)) {
        return Some(low);
    }
    if s[0] == 0x0064 && s[1] == 0xff9b && s[2..6] == [0; 4] {
        return Some(low);
    }
    if s[0] == 0x2002 {
        return Some(Ipv4Addr::new(
            (s[1] >> 8) as u8,
            s[1] as u8,
            (s[2] >> 8) as u8,
            s[2] as u8,
        ));
    }
    None
}

/// Why a production tenant may not reach `ip`: the special-purpose range it is in (for an IPv6
/// address that embeds an IPv4 one, the range of that IPv4 address), or `None` for a public
/// address.
pub fn special(ip: IpAddr) -> Option<&'static str> {
    if let IpAddr::V6(v6) = ip
        && let Some(v4) = embedded_v4(v6)
    {
        return special(IpAddr::V4(v4));
    }
    SPECIAL.iter().find(|r| contains(r, ip)).map(|r| r.name)
}

/// Whether `ip` is one a production tenant may not reach.
pub fn is_special(ip: IpAddr) -> bool {
    special(ip).is_some()
}

/// A range of the operator's allow-list (`10.0.0.0/8`, `127.0.0.1`, `::1/128`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Allowed {
    network: IpAddr,
    prefix: u8,
}

impl Allowed {
    /// Parses `address[/prefix]`.
    pub fn parse(text: &str) -> Result<Self, String> {
        let (address, prefix) = match text.trim().split_once('/') {
            Some((a, p)) => (a, Some(p)),
            None => (text.trim(), None),
        };
        let network: IpAddr = address
            .parse()
            .map_err(|_| format!("{text:?} is not an IP address or CIDR range"))?;
        let max = if network.is_ipv4() { 32 } else { 128 };
        let prefix = match prefix {
            Some(p) => p
                .parse::<u8>()
                .ok()
                .filter(|p| *p <= max)
                .ok_or_else(|| format!("{text:?} has an invalid prefix length"))?,
            None => max,
        };
        Ok(Self { network, prefix })
    }

    fn contains(&self, ip: IpAddr) -> bool {
        let range = Range {
            network: self.network,
            prefix: self.prefix,
            name: "",
        };
        contains(&range, ip)
            || matches!(ip, IpAddr::V6(v6) if embedded_v4(v6).is_some_and(|v4| contains(&range, IpAddr::V4(v4))))
    }
}

/// Who may reach special-purpose addresses: the operator's allow-list, and whether demo tenants
/// may send anywhere (only when public signup is off: then every demo tenant is the operator's).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Policy {
    /// Ranges every tenant may reach although they are special-purpose.
    pub allow: Vec<Allowed>,
    /// Demo tenants skip the address check (public signup off).
    pub demo_unrestricted: bool,
}

impl Policy {
    /// Parses a comma-separated allow-list (empty: none).
    pub fn parse_allow_list(text: &str) -> Result<Vec<Allowed>, String> {
        text.split(',')
            .map(str::trim)
            .filter(|t| !t.is_empty())
            .map(Allowed::parse)
            .collect()
    }

    /// The rules for a tenant: production tenants use https; the addresses of every tenant but
    /// an unrestricted demo one are checked.
    pub fn rules(&self, production: bool) -> Rules {
        Rules {
            https_only: production,
            check_addresses: production || !self.demo_unrestricted,
            allow: self.allow.clone(),
        }
    }
}

/// The destination policy behind the workflows' [`Destinations`] port: the tenant's rules
/// (production or demo, from [`TenantReads`]) under the operator's policy, then the URL checked
/// now ([`crate::webhook_sender::check_destination`]).
pub struct TenantDestinations {
    policy: Arc<Policy>,
    tenants: Arc<dyn TenantReads>,
}

impl TenantDestinations {
    /// The operator's policy, applied to each tenant as `tenants` says it is.
    pub fn new(policy: Arc<Policy>, tenants: Arc<dyn TenantReads>) -> Self {
        Self { policy, tenants }
    }
}

impl std::fmt::Debug for TenantDestinations {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TenantDestinations")
            .field("policy", &self.policy)
            .finish_non_exhaustive()
    }
}

#[async_trait]
impl Destinations for TenantDestinations {
    async fn check(&self, tenant: TenantId, url: &str) -> Result<Option<SocketAddr>, String> {
        let production = self
            .tenants
            .is_production(tenant)
            .await
            .map_err(|e| e.to_string())?;
        crate::webhook_sender::check_destination(url, &self.policy.rules(production))
            .await
            .map(|d| d.pinned)
            .map_err(|e| e.to_string())
    }

    async fn check_saved(
        &self,
        tenant: TenantId,
        url: &str,
    ) -> Result<Result<(), RefusedDestination>, StoreError> {
        let production = self.tenants.is_production(tenant).await?;
        Ok(
            crate::webhook_sender::check_saved(url, &self.policy.rules(production))
                .await
                .map_err(|refusal| RefusedDestination {
                    code: refusal.code(),
                    message: refusal.to_string(),
                }),
        )
    }
}

/// What one tenant's destination must satisfy.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Rules {
    /// Only `https://` URLs.
    pub https_only: bool,
    /// Every address the host resolves to must be public or allow-listed (and the connection is
    /// pinned to the address checked).
    pub check_addresses: bool,
    /// The operator's allow-list.
    pub allow: Vec<Allowed>,
}

impl Rules {
    /// No check at all (a demo tenant with public signup off).
    pub fn open() -> Self {
        Self::default()
    }

    /// Production rules without an allow-list.
    pub fn strict() -> Self {
        Self {
            https_only: true,
            check_addresses: true,
            allow: Vec::new(),
        }
    }

    /// Why `ip` may not be reached under these rules (`None`: it may).
    pub fn refusal(&self, ip: IpAddr) -> Option<&'static str> {
        if !self.check_addresses || self.allow.iter().any(|a| a.contains(ip)) {
            return None;
        }
        special(ip)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_allow_list_opens_only_its_ranges_and_demo_tenants_are_checked_unless_signup_is_closed() {
        let allow = Policy::parse_allow_list(" 10.1.0.0/16, 127.0.0.1 ,::1").expect("list");
        let policy = Policy {
            allow,
            demo_unrestricted: false,
        };
        let ip = |t: &str| t.parse::<IpAddr>().expect(t);
        for production in [true, false] {
            let rules = policy.rules(production);
            assert_eq!(rules.https_only, production);
            assert_eq!(rules.refusal(ip("10.1.200.3")), None);
            assert_eq!(rules.refusal(ip("127.0.0.1")), None);
            assert_eq!(rules.refusal(ip("::ffff:127.0.0.1")), None);
            assert_eq!(rules.refusal(ip("::1")), None);
            assert!(
                rules
                    .refusal(ip("127.0.0.2"))
                    .is_some_and(|r| r.contains("loopback"))
            );
            assert!(
                rules
                    .refusal(ip("10.2.0.1"))
                    .is_some_and(|r| r.contains("private use"))
            );
            assert!(
                rules
                    .refusal(ip("169.254.169.254"))
                    .is_some_and(|r| r.contains("link local"))
            );
        }
        let closed = Policy {
            allow: Vec::new(),
            demo_unrestricted: true,
        };
        assert_eq!(closed.rules(false).refusal(ip("169.254.169.254")), None);
        assert!(closed.rules(true).refusal(ip("169.254.169.254")).is_some());
        for bad in ["10.0.0.0/33", "localhost", "::1/129", "1.2.3"] {
            assert!(Policy::parse_allow_list(bad).is_err(), "{bad}");
        }
        assert_eq!(Policy::parse_allow_list("").expect("empty"), Vec::new());
    }

    #[test]
    fn every_special_form_is_refused_and_public_addresses_pass() {
        let refused = [
            ("0.1.2.3", "this network"),
            ("10.1.2.3", "private"),
            ("100.64.0.1", "shared"),
            ("100.127.255.255", "shared"),
            ("127.0.0.1", "loopback"),
            ("127.255.0.9", "loopback"),
            ("169.254.169.254", "link local"),
            ("172.16.0.1", "private"),
            ("172.31.255.254", "private"),
            ("192.0.0.170", "IETF"),
            ("192.0.2.1", "TEST-NET-1"),
            ("192.31.196.1", "AS112"),
            ("192.52.193.1", "AMT"),
            ("192.88.99.1", "6to4 relay"),
            ("192.168.1.1", "private"),
            ("192.175.48.6", "AS112"),
            ("198.18.0.1", "benchmarking"),
            ("198.19.255.255", "benchmarking"),
            ("198.51.100.7", "TEST-NET-2"),
            ("203.0.113.9", "TEST-NET-3"),
            ("224.0.0.1", "multicast"),
            ("239.255.255.250", "multicast"),
            ("240.0.0.1", "reserved"),
            ("255.255.255.255", "broadcast"),
            ("::", "unspecified"),
            ("::1", "loopback"),
            // IPv4-mapped, IPv4-compatible, NAT64 and 6to4 forms of special IPv4 addresses.
            ("::ffff:127.0.0.1", "loopback"),
            ("::ffff:169.254.169.254", "link local"),
            ("::127.0.0.1", "loopback"),
            ("::10.0.0.1", "private"),
            ("64:ff9b::127.0.0.1", "loopback"),
            ("64:ff9b::a9fe:a9fe", "link local"),
            ("2002:7f00:1::", "loopback"),
            ("2002:c0a8:0101::1", "private"),
            ("64:ff9b:1::1", "local-use"),
            ("100::1", "discard"),
            ("2001::1", "Teredo"),
            ("2001:0:4136:e378:8000:63bf:3fff:fdd2", "Teredo"),
            ("2001:2::1", "IETF"),
            ("2001:db8::1", "documentation"),
            ("3fff::1", "documentation"),
            ("5f00::1", "segment routing"),
            ("fc00::1", "unique local"),
            ("fd12:3456::1", "unique local"),
            ("fe80::1", "link local"),
            ("febf::1", "link local"),
            ("fec0::1", "site local"),
            ("ff02::1", "multicast"),
        ];
        for (ip, why) in refused {
            let found = special(ip.parse().expect(ip));
            assert!(
                found.is_some_and(|n| n.contains(why)),
                "{ip}: {found:?}, expected {why}"
            );
        }
        for ip in [
            "8.8.8.8",
            "1.1.1.1",
            "200.85.32.1",
            "100.128.0.1",
            "172.32.0.1",
            "192.0.1.1",
            "198.20.0.1",
            "223.255.255.255",
            "2800:3f0:4002::1",
            "2001:4860:4860::8888",
            "::ffff:8.8.8.8",
            "64:ff9b::808:808",
            "2002:808:808::1",
        ] {
            assert_eq!(special(ip.parse().expect(ip)), None, "{ip}");
        }
    }
}
