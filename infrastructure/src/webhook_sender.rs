//! The webhook sender (docs/webhooks.md): signs a body (`X-Webhook-Signature: t=<unix>,v1=<hex>`,
//! HMAC-SHA-256 over `<t>.<raw body>`, one `v1` per valid secret), checks where a URL leads, and
//! POSTs with a 10 s timeout.
//!
//! URL safety (SSRF): under the destination policy's rules ([`crate::destination::Rules`]) every
//! address the host resolves to must be a public one (none of the special-purpose ranges:
//! loopback, private, link-local, CGNAT, unique-local, multicast, documentation, the IPv6 forms
//! that embed such an IPv4 address…) or one the operator allow-listed, checked when the endpoint
//! is saved and again before every attempt (DNS can change), and the connection goes to the very
//! address that was checked (no second lookup that a rebinding DNS server could answer
//! differently). Only demo tenants of a service without public signup send anywhere.

use async_trait::async_trait;
use kuatia_application::process::webhook_delivery::{self as process, WebhookAnswer, WebhookRequest};
use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, Instant};

/// How long one attempt may take.
pub const TIMEOUT: Duration = Duration::from_secs(10);

/// Lower-case hex HMAC-SHA-256 of `<t>.<body>` under `secret`.
pub fn sign(secret: &[u8], timestamp: i64, body: &[u8]) -> String {
    kuatia_application::mac::hmac_sha256_hex(secret, &[timestamp.to_string().as_bytes(), b".", body])
}

/// The `X-Webhook-Signature` value: `t=<unix>` and a `v1=` per secret (current first).
pub fn signature_header(secrets: &[&[u8]], timestamp: i64, body: &[u8]) -> String {
    let mut header = format!("t={timestamp}");
    for secret in secrets {
        header.push_str(",v1=");
        header.push_str(&sign(secret, timestamp, body));
    }
    header
}

/// Why a destination is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UrlRefusal {
    /// Not an absolute http(s) URL.
    #[error("not an absolute http(s) URL")]
    Invalid,
    /// Production tenants use https.
    #[error("a production tenant's URL must use https")]
    HttpsRequired,
    /// The host does not resolve.
    #[error("the host does not resolve: {0}")]
    Unresolvable(String),
    /// The host resolves to a non-public address.
    #[error("the host resolves to a non-public address ({0}), which a production tenant may not use")]
    PrivateAddress(IpAddr),
}

impl UrlRefusal {
    /// The issue code an API answer names the refusal with.
    pub fn code(&self) -> &'static str {
        match self {
            Self::Invalid => "invalid_url",
            Self::HttpsRequired => "https_required",
            Self::Unresolvable(_) | Self::PrivateAddress(_) => "url_not_allowed",
        }
    }
}

/// Whether an address is one a production tenant may not send to: any special-purpose
/// address of the destination policy ([`crate::destination`]), IPv6 forms that embed a special
/// IPv4 address included.
pub fn is_private(ip: IpAddr) -> bool {
    crate::destination::is_special(ip)
}

/// Where an attempt will connect.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Destination {
    /// The URL.
    pub url: reqwest::Url,
    /// The checked address to connect to (production), or `None` (demo: resolve as usual).
    pub pinned: Option<SocketAddr>,
}

/// Checks a URL: always an absolute http(s) URL; under `rules`, https only (production) and every
/// resolved address public or allow-listed. Returns the address to connect to.
pub async fn check_destination(
    url: &str,
    rules: &crate::destination::Rules,
) -> Result<Destination, UrlRefusal> {
    let parsed = reqwest::Url::parse(url.trim()).map_err(|_| UrlRefusal::Invalid)?;
    if !matches!(parsed.scheme(), "http" | "https") || parsed.host_str().is_none() {
        return Err(UrlRefusal::Invalid);
    }
    if rules.https_only && parsed.scheme() != "https" {
        return Err(UrlRefusal::HttpsRequired);
    }
    if !rules.check_addresses {
        return Ok(Destination {
            url: parsed,
            pinned: None,
        });
    }
    let host = parsed
        .host_str()
        .unwrap_or_default()
        .trim_matches(['[', ']'])
        .to_owned();
    let port = parsed.port_or_known_default().unwrap_or(443);
    let addresses: Vec<SocketAddr> = match host.parse::<IpAddr>() {
        Ok(ip) => vec![SocketAddr::new(ip, port)],
        Err(_) => tokio::net::lookup_host((host.as_str(), port))
            .await
            .map_err(|e| UrlRefusal::Unresolvable(e.to_string()))?
            .collect(),
    };
    if addresses.is_empty() {
        return Err(UrlRefusal::Unresolvable("no address".into()));
    }
    if let Some(bad) = addresses.iter().find(|a| rules.refusal(a.ip()).is_some()) {
        return Err(UrlRefusal::PrivateAddress(bad.ip()));
    }
    Ok(Destination {
        url: parsed,
        pinned: addresses.first().copied(),
    })
}

/// The check when a URL is saved: [`check_destination`], except that a demo tenant's host that
/// does not resolve (yet) passes: it is checked again before every connection.
pub async fn check_saved(url: &str, rules: &crate::destination::Rules) -> Result<(), UrlRefusal> {
    match check_destination(url, rules).await {
        Ok(_) => Ok(()),
        Err(UrlRefusal::Unresolvable(_)) if !rules.https_only => Ok(()),
        Err(refusal) => Err(refusal),
    }
}

/// What one attempt gave.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    /// The receiver's HTTP status.
    pub status: u16,
    /// How long it took.
    pub latency: Duration,
}

/// One webhook request.
#[derive(Debug, Clone)]
pub struct Outgoing<'a> {
    /// Where.
    pub destination: &'a Destination,
    /// `X-Webhook-Id`.
    pub event_id: &'a str,
    /// `X-Webhook-Event`.
    pub event_type: &'a str,
    /// The raw JSON body.
    pub body: &'a str,
    /// Signing secrets, current first (two during a rotation).
    pub secrets: &'a [&'a [u8]],
    /// `t=` of the signature.
    pub timestamp: i64,
}

/// Sends webhooks.
#[derive(Debug, Clone)]
pub struct WebhookSender {
    client: reqwest::Client,
    timeout: Duration,
}

impl Default for WebhookSender {
    fn default() -> Self {
        Self::new(TIMEOUT)
    }
}

fn builder(timeout: Duration) -> reqwest::ClientBuilder {
    reqwest::Client::builder()
        .timeout(timeout)
        .connect_timeout(timeout)
        // A redirect could lead anywhere (a private address): the receiver's URL is the one
        // configured, and a 3xx is a failed attempt.
        .redirect(reqwest::redirect::Policy::none())
        .user_agent(concat!("kuatia-webhooks/", env!("CARGO_PKG_VERSION")))
}

impl WebhookSender {
    /// A sender whose attempts time out after `timeout`.
    pub fn new(timeout: Duration) -> Self {
        Self {
            client: builder(timeout).build().expect("an HTTP client"),
            timeout,
        }
    }

    /// POSTs one signed webhook. `Err` is a transport failure (refused, timed out, cut).
    pub async fn send(&self, out: &Outgoing<'_>) -> Result<Answer, String> {
        let client = match out.destination.pinned {
            // Connect to the checked address only (TLS still verifies the host name).
            Some(addr) => builder(self.timeout)
                .resolve(out.destination.url.host_str().unwrap_or_default(), addr)
                .build()
                .map_err(|e| e.to_string())?,
            None => self.client.clone(),
        };
        let signature = signature_header(out.secrets, out.timestamp, out.body.as_bytes());
        let started = Instant::now();
        let response = client
            .post(out.destination.url.clone())
            .header("Content-Type", "application/json")
            .header("X-Webhook-Id", out.event_id)
            .header("X-Webhook-Event", out.event_type)
            .header("X-Webhook-Signature", signature)
            .body(out.body.to_owned())
            .send()
            .await
            .map_err(|e| transport_failure(&e))?;
        Ok(Answer {
            status: response.status().as_u16(),
            latency: started.elapsed(),
        })
    }
}

/// The webhook delivery process manager's sender.
#[async_trait]
impl process::WebhookSender for WebhookSender {
    async fn send(&self, request: &WebhookRequest<'_>) -> Result<WebhookAnswer, String> {
        // The URL is the one the destination policy checked (and parsed the same way).
        let url = reqwest::Url::parse(request.url.trim()).map_err(|_| UrlRefusal::Invalid.to_string())?;
        let destination = Destination {
            url,
            pinned: request.pinned,
        };
        let answer = WebhookSender::send(
            self,
            &Outgoing {
                destination: &destination,
                event_id: request.event_id,
                event_type: request.event_type,
                body: request.body,
                secrets: request.secrets,
                timestamp: request.timestamp,
            },
        )
        .await?;
        Ok(WebhookAnswer {
            status: answer.status,
            latency: answer.latency,
        })
    }
}

/// What a failed attempt records, readable by the tenant (a delivery's error, the test
/// endpoint's answer): the same words for a refused connection, a timeout and an unreachable
/// host, so that the webhook test is no port scanner (an open, a closed and a filtered port
/// look alike until something answers HTTP).
pub fn transport_failure(e: &reqwest::Error) -> String {
    if e.is_connect() || e.is_timeout() {
        "the receiver could not be reached, or did not answer in time".to_owned()
    } else if e.is_request() || e.is_body() {
        "the connection failed before the receiver answered".to_owned()
    } else {
        "the receiver's answer could not be read".to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_signature_is_hmac_sha256_over_timestamp_dot_body() {
        // Computed independently: `printf '1700000000.{"a":1}' | openssl dgst -sha256 -hmac whsec_test`.
        assert_eq!(
            sign(b"whsec_test", 1_700_000_000, br#"{"a":1}"#),
            "38877139021993b830af32feea6e18a8da83eb2f6e49ee50bd9e4cf4ca4d3789"
        );
        let header = signature_header(&[b"a", b"b"], 5, b"{}");
        assert!(header.starts_with("t=5,v1="));
        assert_eq!(header.matches(",v1=").count(), 2);
    }

    #[test]
    fn private_and_special_addresses_are_refused() {
        for ip in [
            "127.0.0.1",
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "169.254.169.254",
            "100.64.0.1",
            "0.0.0.0",
            "::1",
            "fe80::1",
            "fd00::1",
            "::ffff:127.0.0.1",
            "::127.0.0.1",
            "2002:7f00:1::1",
            "2001::1",
        ] {
            assert!(is_private(ip.parse().expect("ip")), "{ip}");
        }
        for ip in ["8.8.8.8", "200.85.32.1", "2800:3f0:4002::1"] {
            assert!(!is_private(ip.parse().expect("ip")), "{ip}");
        }
    }

    #[tokio::test]
    async fn production_refuses_http_and_private_hosts_demo_allows_them() {
        use crate::destination::Rules;
        let strict = Rules::strict();
        assert_eq!(
            check_destination("http://example.com/h", &strict).await,
            Err(UrlRefusal::HttpsRequired)
        );
        assert!(matches!(
            check_destination("https://127.0.0.1:9/h", &strict).await,
            Err(UrlRefusal::PrivateAddress(_))
        ));
        assert!(matches!(
            check_destination("https://localhost:9/h", &strict).await,
            Err(UrlRefusal::PrivateAddress(_)) | Err(UrlRefusal::Unresolvable(_))
        ));
        assert!(
            check_destination("http://127.0.0.1:9/h", &Rules::open())
                .await
                .is_ok()
        );
        // A demo tenant under public signup: http is fine, a private address is not, unless the
        // operator allow-listed it.
        let mut demo = crate::destination::Policy::default().rules(false);
        assert!(matches!(
            check_destination("http://127.0.0.1:9/h", &demo).await,
            Err(UrlRefusal::PrivateAddress(_))
        ));
        demo.allow = crate::destination::Policy::parse_allow_list("127.0.0.0/8").expect("list");
        let allowed = check_destination("http://127.0.0.1:9/h", &demo)
            .await
            .expect("allowed");
        assert_eq!(allowed.pinned, Some("127.0.0.1:9".parse().expect("addr")));
        assert_eq!(
            check_destination("mailto:x@y", &Rules::open()).await,
            Err(UrlRefusal::Invalid)
        );
    }
}
