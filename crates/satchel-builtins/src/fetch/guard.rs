//! Server-side request forgery kept out: loopback, private, link-local
//! (the cloud metadata address `169.254.169.254` among them), unique-local
//! and other non-public addresses are refused unless the host is allowed
//! (`fetch.allowHosts`) or private addresses are (`fetch.allowPrivate`).
//!
//! The check is made on the addresses the client will actually connect
//! to: [`GuardedResolver`] is the HTTP client's only resolver and hands it
//! only public addresses, so a name that resolves (or re-resolves, DNS
//! rebinding) to a private one cannot be reached; an address written in
//! the URL never goes through a resolver and is checked by
//! [`Guard::check_url`], at the first request and at every redirect.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;

use std::future::Future;
use std::pin::Pin;

/// A boxed future of a lookup.
pub(crate) type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;

/// What may be fetched beyond the public internet.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Guard {
    /// Every address may be reached (`fetch.allowPrivate`).
    pub allow_private: bool,
    /// Hosts that may be reached whatever they resolve to
    /// (`fetch.allowHosts`): a name, an address, or `*.example.com`.
    pub allow_hosts: Vec<String>,
}

/// Why an address is not public, or `None` when it is.
pub(crate) fn non_public(ip: IpAddr) -> Option<&'static str> {
    match ip {
        IpAddr::V4(v4) => non_public_v4(v4),
        IpAddr::V6(v6) => {
            if let Some(v4) = v6.to_ipv4_mapped() {
                return non_public_v4(v4);
            }
            let segments = v6.segments();
            // NAT64 (64:ff9b::/96) carries an IPv4 address in its last bits.
            if segments[..6] == [0x64, 0xff9b, 0, 0, 0, 0] {
                let [.., a, b, c, d] = v6.octets();
                return non_public_v4(Ipv4Addr::new(a, b, c, d));
            }
            if v6.is_loopback() {
                Some("a loopback address")
            } else if v6.is_unspecified() {
                Some("the unspecified address")
            } else if segments[0] & 0xfe00 == 0xfc00 {
                Some("a unique-local address")
            } else if segments[0] & 0xffc0 == 0xfe80 || segments[0] & 0xffc0 == 0xfec0 {
                Some("a link-local address")
            } else if v6.is_multicast() {
                Some("a multicast address")
            } else {
                None
            }
        }
    }
}

fn non_public_v4(ip: Ipv4Addr) -> Option<&'static str> {
    let [a, b, ..] = ip.octets();
    if ip.is_loopback() {
        Some("a loopback address")
    } else if ip.is_private() {
        Some("a private address")
    } else if ip.is_link_local() {
        Some("a link-local address (cloud metadata lives there)")
    } else if a == 0 {
        Some("an address of \"this network\" (0.0.0.0/8)")
    } else if a == 100 && (64..128).contains(&b) {
        Some("a carrier-grade NAT address")
    } else if a == 198 && (b == 18 || b == 19) {
        Some("a benchmarking address")
    } else if ip.is_multicast() || a >= 240 {
        Some("a multicast or reserved address")
    } else {
        None
    }
}

impl Guard {
    /// Whether `host` (a name or an address, as in a URL) is allowed to
    /// reach any address.
    pub(crate) fn host_allowed(&self, host: &str) -> bool {
        if self.allow_private {
            return true;
        }
        let host = host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .trim_end_matches('.')
            .to_ascii_lowercase();
        self.allow_hosts.iter().any(|allowed| {
            let allowed = allowed.trim_end_matches('.').to_ascii_lowercase();
            match allowed.strip_prefix("*.") {
                Some(domain) => host.ends_with(&format!(".{domain}")),
                None => allowed == host,
            }
        })
    }

    /// Refuses a URL whose host is a non-public address written as such
    /// (names are checked when resolved); says why.
    pub(crate) fn check_url(&self, url: &url::Url) -> Result<(), String> {
        if !matches!(url.scheme(), "http" | "https") {
            return Err(format!(
                "`{url}` is not an http or https URL; `fetch` fetches web pages only"
            ));
        }
        let Some(host) = url.host() else {
            return Err(format!("`{url}` has no host"));
        };
        let ip = match host {
            url::Host::Ipv4(ip) => IpAddr::V4(ip),
            url::Host::Ipv6(ip) => IpAddr::V6(ip),
            url::Host::Domain(_) => return Ok(()),
        };
        match non_public(ip) {
            Some(why) if !self.host_allowed(&host.to_string()) => {
                Err(refusal(&host.to_string(), ip, why))
            }
            _ => Ok(()),
        }
    }
}

/// Words every refusal of an address carries.
pub(crate) const REFUSED_MARK: &str = "which `fetch` does not reach";

/// The message for a refused address.
pub(crate) fn refusal(host: &str, ip: IpAddr, why: &str) -> String {
    let shown = if host == ip.to_string() {
        format!("`{host}`")
    } else {
        format!("`{host}` ({ip})")
    };
    format!(
        "{shown} is {why}, {REFUSED_MARK}: only public addresses are fetched. If the user wants this \
         host fetched, they can allow it in .agents/agent.json with \"fetch\": {{\"allowHosts\": [\"{host}\"]}} \
         (or \"allowPrivate\": true)"
    )
}

/// Resolves a name to its addresses (the system's resolver, or a fixed
/// table in tests).
pub(crate) type Lookup =
    Arc<dyn Fn(String) -> BoxFuture<std::io::Result<Vec<IpAddr>>> + Send + Sync>;

/// The system's resolver.
pub(crate) fn system_lookup() -> Lookup {
    Arc::new(|host: String| {
        Box::pin(async move {
            let addrs = tokio::net::lookup_host((host.as_str(), 0)).await?;
            Ok(addrs.map(|addr| addr.ip()).collect())
        })
    })
}

/// The HTTP client's resolver: only public addresses come out, unless the
/// name is allowed.
pub(crate) struct GuardedResolver {
    pub(crate) guard: Arc<Guard>,
    pub(crate) lookup: Lookup,
}

/// A name that resolves only to addresses `fetch` does not reach.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub(crate) struct Refused(pub(crate) String);

impl reqwest::dns::Resolve for GuardedResolver {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let host = name.as_str().to_owned();
        let guard = self.guard.clone();
        let lookup = self.lookup.clone();
        Box::pin(async move {
            let found = lookup(host.clone()).await?;
            let allowed = guard.host_allowed(&host);
            let mut refused = None;
            let public: Vec<SocketAddr> = found
                .into_iter()
                .filter(|ip| match non_public(*ip) {
                    Some(why) if !allowed => {
                        refused.get_or_insert((*ip, why));
                        false
                    }
                    _ => true,
                })
                .map(|ip| SocketAddr::new(ip, 0))
                .collect();
            if public.is_empty() {
                let error: Box<dyn std::error::Error + Send + Sync> = match refused {
                    Some((ip, why)) => Box::new(Refused(refusal(&host, ip, why))),
                    None => format!("`{host}` has no address").into(),
                };
                return Err(error);
            }
            let addrs: reqwest::dns::Addrs = Box::new(public.into_iter());
            Ok(addrs)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn non_public_addresses_are_named() {
        for ip in [
            "127.0.0.1",
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "169.254.169.254",
            "0.0.0.0",
            "100.64.0.1",
            "::1",
            "::",
            "fd00::1",
            "fe80::1",
            "::ffff:127.0.0.1",
            "::ffff:169.254.169.254",
            "64:ff9b::a9fe:a9fe",
        ] {
            let ip: IpAddr = ip.parse().unwrap();
            assert!(non_public(ip).is_some(), "{ip}");
        }
        for ip in ["93.184.216.34", "1.1.1.1", "2606:4700:4700::1111"] {
            let ip: IpAddr = ip.parse().unwrap();
            assert_eq!(non_public(ip), None, "{ip}");
        }
    }

    #[test]
    fn allowed_hosts_match_exactly_or_by_suffix() {
        let guard = Guard {
            allow_private: false,
            allow_hosts: vec![
                "intranet.local".into(),
                "*.corp.example".into(),
                "127.0.0.1".into(),
            ],
        };
        assert!(guard.host_allowed("INTRANET.local."));
        assert!(guard.host_allowed("wiki.corp.example"));
        assert!(!guard.host_allowed("corp.example.evil.com"));
        assert!(
            guard
                .check_url(&"http://127.0.0.1:8080/".parse().unwrap())
                .is_ok()
        );
        assert!(guard.check_url(&"http://[::1]/".parse().unwrap()).is_err());
        assert!(
            guard
                .check_url(&"http://169.254.169.254/latest/meta-data/".parse().unwrap())
                .is_err()
        );
        assert!(
            guard
                .check_url(&"file:///etc/passwd".parse().unwrap())
                .is_err()
        );
        assert!(
            guard
                .check_url(&"https://example.com/".parse().unwrap())
                .is_ok()
        );
    }

    /// A public-looking name that resolves to the metadata address (or
    /// partly to loopback) never yields that address to the client.
    #[tokio::test]
    async fn names_resolving_to_private_addresses_are_refused() {
        use reqwest::dns::Resolve;
        let lookup: Lookup = Arc::new(|host: String| {
            Box::pin(async move {
                Ok(match host.as_str() {
                    "metadata.example.com" => vec!["169.254.169.254".parse().unwrap()],
                    "mixed.example.com" => {
                        vec![
                            "127.0.0.1".parse().unwrap(),
                            "93.184.216.34".parse().unwrap(),
                        ]
                    }
                    _ => Vec::new(),
                })
            })
        });
        let resolver = GuardedResolver {
            guard: Arc::new(Guard::default()),
            lookup: lookup.clone(),
        };
        let name = |n: &str| n.parse::<reqwest::dns::Name>().unwrap();
        let error = match resolver.resolve(name("metadata.example.com")).await {
            Ok(_) => panic!("resolved"),
            Err(error) => error.to_string(),
        };
        assert!(error.contains("169.254.169.254"), "{error}");
        let addrs: Vec<SocketAddr> = match resolver.resolve(name("mixed.example.com")).await {
            Ok(addrs) => addrs.collect(),
            Err(error) => panic!("{error}"),
        };
        assert_eq!(addrs, ["93.184.216.34:0".parse::<SocketAddr>().unwrap()]);
        let open = GuardedResolver {
            guard: Arc::new(Guard {
                allow_private: true,
                allow_hosts: Vec::new(),
            }),
            lookup,
        };
        assert!(open.resolve(name("metadata.example.com")).await.is_ok());
    }
}
