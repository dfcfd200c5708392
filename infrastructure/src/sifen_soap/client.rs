//! `SifenClient`: SIFEN's web services over HTTPS with the company's certificate as the TLS
//! client identity, or over plain HTTP to the simulator.
//!
//! TLS is rustls (aws-lc-rs, the provider sqlx already builds) with the system's roots through
//! the platform verifier, plus optionally extra PEM roots (a simulator's self-signed
//! certificate). reqwest's rustls backend takes the client identity only as PEM (key and chain
//! in one buffer), which is exactly what the vault hands out after opening a PFX.
//!
//! Failures are sorted by what they mean for the request ([`Delivery`]): a connection that
//! never opened (refused, DNS, TLS handshake, connect timeout) is [`SoapError::NotSent`];
//! anything after the request may have left (read timeout, connection dropped, a body cut
//! short) is [`SoapError::OutcomeUnknown`]. The client never retries by itself: whether to
//! resend, and after which reconciliation, is the pipeline's decision.
//!
//! Every exchange is observed here, once for every caller: a client span (`SIFEN siRecepDE`, …)
//! whose context goes to SIFEN as a `traceparent` header, the latency histogram
//! `kuatia_sifen_request_duration_seconds{operation}` and the counter
//! `kuatia_sifen_responses_total{operation,code}` — SIFEN's `dCodRes` per answer (per document
//! of a lot result, besides the lot's own code), or what went wrong instead ([`failure_code`]).

use super::messages::{
    self, DeQuery, DeReception, EventReception, LotQuery, LotReception, LotResult, RucQuery,
};
use super::{Delivery, Environment, Service, SoapError};
pub use kuatia_domain::sifen::exchange::Answered;
use serde::{Deserialize, Serialize};
use std::time::{Duration, Instant};
use tracing::Instrument;
use zeroize::Zeroizing;

/// Largest answer read (SIFEN's are far smaller: a siConsDE container is one DE and its events).
pub const MAX_ANSWER_BYTES: usize = 16 * 1024 * 1024;

/// Timeouts and headers of the SOAP client. Every field has a default; the values are
/// milliseconds so that they read from environment variables as plain numbers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct SoapClientConfig {
    /// Time allowed to open the connection (TCP and TLS). RSHK uses 15 s.
    pub connect_timeout_ms: u64,
    /// Time allowed between reads of the answer once the request is sent. RSHK uses 45 s;
    /// SIFEN targets one minute per DE (MT §6.2).
    pub read_timeout_ms: u64,
    /// Upper bound for the whole exchange, so a server that trickles bytes cannot hold a
    /// worker forever.
    pub total_timeout_ms: u64,
    /// `Content-Type` of the requests. SIFEN's documentation leaves it open; RSHK's
    /// `application/xml; charset=utf-8` is the safest reference.
    pub content_type: String,
    /// A PEM file of root certificates trusted besides the system's, e.g. the self-signed
    /// certificate of a simulator served over HTTPS (`kuatia sifen-sim --tls-cert`).
    pub extra_roots_file: Option<std::path::PathBuf>,
}

impl Default for SoapClientConfig {
    fn default() -> Self {
        Self {
            connect_timeout_ms: 15_000,
            read_timeout_ms: 45_000,
            total_timeout_ms: 120_000,
            content_type: "application/xml; charset=utf-8".to_owned(),
            extra_roots_file: None,
        }
    }
}

impl SoapClientConfig {
    /// `connect_timeout_ms` as a duration.
    pub fn connect_timeout(&self) -> Duration {
        Duration::from_millis(self.connect_timeout_ms)
    }

    /// `read_timeout_ms` as a duration.
    pub fn read_timeout(&self) -> Duration {
        Duration::from_millis(self.read_timeout_ms)
    }

    /// `total_timeout_ms` as a duration.
    pub fn total_timeout(&self) -> Duration {
        Duration::from_millis(self.total_timeout_ms)
    }
}

/// The TLS client identity: a private key and its certificate chain as PEM (PKCS#8 or RSA
/// key, leaf first). Zeroed on drop; `Debug` prints nothing of it.
#[derive(Clone)]
pub struct ClientIdentity {
    pem: Zeroizing<Vec<u8>>,
}

impl ClientIdentity {
    /// From one PEM buffer holding the key and the chain (what the vault's `OpenedPfx::pem`
    /// holds).
    pub fn from_pem(pem: impl Into<Vec<u8>>) -> Self {
        Self {
            pem: Zeroizing::new(pem.into()),
        }
    }

    /// From a key PEM and a chain PEM.
    pub fn from_key_and_chain(key_pem: &[u8], chain_pem: &[u8]) -> Self {
        let mut pem = Zeroizing::new(Vec::with_capacity(key_pem.len() + chain_pem.len() + 1));
        pem.extend_from_slice(key_pem);
        if !key_pem.ends_with(b"\n") {
            pem.push(b'\n');
        }
        pem.extend_from_slice(chain_pem);
        Self { pem }
    }
}

impl std::fmt::Debug for ClientIdentity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ClientIdentity([redacted])")
    }
}

/// SIFEN's web services at one base URL.
#[derive(Debug, Clone)]
pub struct SifenClient {
    http: reqwest::Client,
    base_url: String,
    content_type: String,
}

fn cause_chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        let message = s.to_string();
        if !text.contains(&message) {
            text.push_str(": ");
            text.push_str(&message);
        }
        source = s.source();
    }
    text
}

/// Sorts a reqwest failure by what it means for the request.
fn classify(url: &str, e: &reqwest::Error) -> SoapError {
    let reason = cause_chain(e);
    if e.is_builder() {
        SoapError::InvalidRequest(reason)
    } else if e.is_connect() {
        // Refused, unreachable, DNS, TLS handshake, connect timeout: nothing was written.
        let reason = if e.is_timeout() && !reason.contains("timed out") {
            format!("connect timed out: {reason}")
        } else {
            reason
        };
        SoapError::NotSent {
            url: url.to_owned(),
            reason,
        }
    } else {
        SoapError::OutcomeUnknown {
            url: url.to_owned(),
            timeout: e.is_timeout(),
            reason,
        }
    }
}

impl SifenClient {
    /// A client for `base_url` (`https://sifen-test.set.gov.py`, or the simulator's
    /// `http://127.0.0.1:8082`); the service paths are appended to it. `identity` is the
    /// company's certificate for mutual TLS; `extra_roots_pem` (and the certificates of
    /// `config.extra_roots_file`) are trusted in addition to the system's roots.
    pub fn new(
        base_url: &str,
        config: &SoapClientConfig,
        identity: Option<&ClientIdentity>,
        extra_roots_pem: Option<&[u8]>,
    ) -> Result<Self, SoapError> {
        Self::pinned(base_url, config, identity, extra_roots_pem, None)
    }

    /// [`SifenClient::new`] connecting to `pinned` whatever the base URL's host resolves to
    /// (TLS still verifies the host name): the address the destination policy checked, so that
    /// a DNS answer given later cannot move the connection elsewhere.
    pub fn pinned(
        base_url: &str,
        config: &SoapClientConfig,
        identity: Option<&ClientIdentity>,
        extra_roots_pem: Option<&[u8]>,
        pinned: Option<std::net::SocketAddr>,
    ) -> Result<Self, SoapError> {
        let base_url = base_url.trim().trim_end_matches('/').to_owned();
        if !(base_url.starts_with("https://") || base_url.starts_with("http://")) {
            return Err(SoapError::Config(format!(
                "the SIFEN base URL must start with https:// or http://, not {base_url:?}"
            )));
        }
        let mut builder = reqwest::Client::builder()
            .connect_timeout(config.connect_timeout())
            .read_timeout(config.read_timeout())
            .timeout(config.total_timeout())
            .user_agent(concat!("kuatia/", env!("CARGO_PKG_VERSION")))
            // A redirect is never followed (a POST would become a GET to wherever it points,
            // a private address included): it is an answer that is not SOAP.
            .redirect(reqwest::redirect::Policy::none())
            // SIFEN is HTTP/1.1 (WS-I Basic Profile); keep the simulator the same.
            .http1_only();
        if let Some(identity) = identity {
            let identity = reqwest::Identity::from_pem(&identity.pem)
                .map_err(|e| SoapError::Config(format!("the client certificate: {}", cause_chain(&e))))?;
            builder = builder.identity(identity);
        }
        let file_roots = match &config.extra_roots_file {
            Some(path) => Some(std::fs::read(path).map_err(|e| {
                SoapError::Config(format!("the extra root certificates {}: {e}", path.display()))
            })?),
            None => None,
        };
        for pem in [extra_roots_pem, file_roots.as_deref()].into_iter().flatten() {
            let roots = reqwest::Certificate::from_pem_bundle(pem).map_err(|e| {
                SoapError::Config(format!("the extra root certificates: {}", cause_chain(&e)))
            })?;
            if roots.is_empty() {
                return Err(SoapError::Config(
                    "the extra root certificates: no certificate in the PEM".into(),
                ));
            }
            builder = builder.tls_certs_merge(roots);
        }
        if let Some(addr) = pinned {
            let host = reqwest::Url::parse(&base_url)
                .ok()
                .and_then(|u| u.host_str().map(|h| h.trim_matches(['[', ']']).to_owned()))
                .unwrap_or_default();
            builder = builder.resolve(&host, addr);
        }
        let http = builder.build().map_err(|e| SoapError::Config(cause_chain(&e)))?;
        Ok(Self {
            http,
            base_url,
            content_type: config.content_type.clone(),
        })
    }

    /// A client for SIFEN's own hosts.
    pub fn for_environment(
        environment: Environment,
        config: &SoapClientConfig,
        identity: Option<&ClientIdentity>,
    ) -> Result<Self, SoapError> {
        Self::new(environment.base_url(), config, identity, None)
    }

    /// The base URL.
    pub fn base_url(&self) -> &str {
        &self.base_url
    }

    /// The endpoint of a service.
    pub fn url(&self, service: Service) -> String {
        format!("{}{}", self.base_url, service.path())
    }

    /// Posts an envelope to a service and returns the HTTP status and the body, whatever they
    /// are. Transport failures are sorted into [`SoapError::NotSent`] and
    /// [`SoapError::OutcomeUnknown`].
    pub async fn post(&self, service: Service, envelope: String) -> Result<(u16, Vec<u8>), SoapError> {
        let url = self.url(service);
        let mut request = self
            .http
            .post(&url)
            .header(reqwest::header::CONTENT_TYPE, &self.content_type)
            .header(
                reqwest::header::ACCEPT,
                "application/soap+xml, application/xml, text/xml",
            );
        // The trace continues at SIFEN's side (or the simulator's), if it reads W3C context.
        if let Some(context) = crate::telemetry::current_context() {
            request = request.header("traceparent", context.traceparent());
        }
        let mut response = request
            .body(envelope)
            .send()
            .await
            .map_err(|e| classify(&url, &e))?;
        let status = response.status().as_u16();
        let mut body = Vec::new();
        loop {
            match response.chunk().await {
                Ok(Some(chunk)) => {
                    if body.len() + chunk.len() > MAX_ANSWER_BYTES {
                        return Err(SoapError::NotSoap {
                            status,
                            snippet: format!("an answer larger than {MAX_ANSWER_BYTES} bytes"),
                        });
                    }
                    body.extend_from_slice(&chunk);
                }
                Ok(None) => break,
                Err(e) => {
                    // The request went out and an answer began: whatever SIFEN did, we did not
                    // hear it in full.
                    let e = classify(&url, &e);
                    return Err(match e {
                        SoapError::NotSent { url, reason } => SoapError::OutcomeUnknown {
                            url,
                            timeout: false,
                            reason,
                        },
                        other => other,
                    });
                }
            }
        }
        tracing::debug!(
            service = service.name(),
            status,
            bytes = body.len(),
            "SIFEN answered"
        );
        Ok((status, body))
    }

    async fn exchange<T: AnswerCodes>(
        &self,
        service: Service,
        envelope: String,
        parse: fn(u16, &[u8]) -> Result<T, SoapError>,
    ) -> Result<Answered<T>, SoapError> {
        let operation = service.operation();
        let span = tracing::info_span!(
            "sifen",
            otel.name = %format!("SIFEN {}", service.name()),
            otel.kind = "client",
            trace_id = tracing::field::Empty,
            sifen.operation = operation,
            url.full = %self.url(service),
            sifen.code = tracing::field::Empty,
            http.response.status_code = tracing::field::Empty,
            otel.status_code = tracing::field::Empty,
            otel.status_message = tracing::field::Empty,
        );
        if let Some(context) = crate::telemetry::context_of(&span) {
            span.record("trace_id", context.trace_id_hex());
        }
        let started = Instant::now();
        let answered = async {
            let (status, body) = self.post(service, envelope).await?;
            let result = parse(status, &body)?;
            // The parsers accept only UTF-8, so this is lossless.
            let raw = String::from_utf8_lossy(&body).into_owned();
            Ok(Answered { result, status, raw })
        }
        .instrument(span.clone())
        .await;
        metrics::histogram!("kuatia_sifen_request_duration_seconds", "operation" => operation)
            .record(started.elapsed().as_secs_f64());
        match &answered {
            Ok(answered) => {
                let codes = answered.result.codes();
                for code in &codes {
                    metrics::counter!("kuatia_sifen_responses_total", "operation" => operation, "code" => code_label(code))
                        .increment(1);
                }
                span.record("sifen.code", codes.first().map_or("none", |c| c.as_str()));
                span.record("http.response.status_code", answered.status);
            }
            Err(e) => {
                metrics::counter!("kuatia_sifen_responses_total", "operation" => operation, "code" => failure_code(e))
                    .increment(1);
                if let Some(status) = e.http_status() {
                    span.record("http.response.status_code", status);
                }
                span.record("otel.status_code", "error");
                span.record("otel.status_message", e.to_string());
            }
        }
        answered
    }

    /// siRecepDE: one signed DE (the `rDE` exactly as signed).
    pub async fn send_de(&self, d_id: u64, signed_rde: &str) -> Result<Answered<DeReception>, SoapError> {
        let envelope = messages::recep_de(d_id, signed_rde)?;
        self.exchange(Service::RecepDe, envelope, messages::parse_recep_de)
            .await
    }

    /// siRecepLoteDE: 1–50 signed DEs of one type and one issuer.
    pub async fn send_lot(
        &self,
        d_id: u64,
        signed_rdes: &[&str],
    ) -> Result<Answered<LotReception>, SoapError> {
        let entry = messages::lot_entry_name(kuatia_domain::local_time::paraguay_today(chrono::Utc::now()));
        let envelope = messages::recep_lote(d_id, signed_rdes, &entry)?;
        self.exchange(Service::RecepLoteDe, envelope, messages::parse_recep_lote)
            .await
    }

    /// siResultLoteDE: a lot's state and, once done, each DE's result.
    pub async fn lot_result(&self, d_id: u64, query: &LotQuery) -> Result<Answered<LotResult>, SoapError> {
        let envelope = messages::result_lote(d_id, query)?;
        self.exchange(Service::ResultLoteDe, envelope, messages::parse_result_lote)
            .await
    }

    /// siConsDE: what SIFEN holds for a CDC (reconciliation).
    pub async fn query_de(&self, d_id: u64, cdc: &str) -> Result<Answered<DeQuery>, SoapError> {
        let envelope = messages::cons_de(d_id, cdc)?;
        self.exchange(Service::ConsDe, envelope, messages::parse_cons_de)
            .await
    }

    /// siConsRUC.
    pub async fn query_ruc(&self, d_id: u64, ruc: &str) -> Result<Answered<RucQuery>, SoapError> {
        let envelope = messages::cons_ruc(d_id, ruc)?;
        self.exchange(Service::ConsRuc, envelope, messages::parse_cons_ruc)
            .await
    }

    /// siRecepEvento: one signed `gGroupGesEve`, or 1–15 signed `rGesEve`.
    pub async fn send_events(
        &self,
        d_id: u64,
        signed_events: &[&str],
    ) -> Result<Answered<EventReception>, SoapError> {
        let envelope = messages::recep_evento(d_id, signed_events)?;
        self.exchange(Service::RecepEvento, envelope, messages::parse_recep_evento)
            .await
    }
}

/// The `code` label of an exchange that brought no SIFEN code: the connection never opened
/// (`not_sent`), the answer did not come in time (`timeout`), the connection broke after the
/// request went (`transport_error`), a SOAP fault (`fault`), or an answer that is not the
/// expected SOAP (`invalid_answer`: an HTML error page, another root, …).
pub fn failure_code(error: &SoapError) -> &'static str {
    match error {
        SoapError::NotSent { .. } if error.is_timeout() => "timeout",
        SoapError::NotSent { .. } => "not_sent",
        SoapError::OutcomeUnknown { timeout: true, .. } => "timeout",
        SoapError::OutcomeUnknown { .. } => "transport_error",
        SoapError::Fault { .. } => "fault",
        SoapError::NotSoap { .. } | SoapError::UnexpectedResponse { .. } => "invalid_answer",
        SoapError::InvalidRequest(_) => "invalid_request",
        SoapError::Config(_) => "config",
    }
}

/// SIFEN's code as a label: its digits, or `other` for anything that is not a short number (a
/// label must not take whatever text a server sends).
/// A code as a metrics label: a code SIFEN's answers table lists, else `other` (the endpoint
/// answering is configured by a tenant, and may answer anything).
fn code_label(code: &str) -> String {
    if kuatia_domain::sifen::answers::any_row(code).is_some() {
        code.to_owned()
    } else {
        "other".to_owned()
    }
}

/// The codes an answer carries, one per answer (one per document or event where SIFEN answers
/// per item); `none` when SIFEN gave none.
pub trait AnswerCodes {
    /// The codes, first the answer's own.
    fn codes(&self) -> Vec<String>;
}

fn first_or_none(results: &[messages::ResultCode]) -> String {
    results
        .first()
        .map_or_else(|| "none".to_owned(), |r| r.code.clone())
}

impl AnswerCodes for DeReception {
    fn codes(&self) -> Vec<String> {
        vec![first_or_none(&self.results)]
    }
}

impl AnswerCodes for LotReception {
    fn codes(&self) -> Vec<String> {
        vec![self.code.clone()]
    }
}

impl AnswerCodes for LotResult {
    /// The lot's `dCodResLot`, then each document's first `dCodRes`.
    fn codes(&self) -> Vec<String> {
        std::iter::once(self.code.clone())
            .chain(self.documents.iter().map(|d| first_or_none(&d.results)))
            .collect()
    }
}

impl AnswerCodes for DeQuery {
    fn codes(&self) -> Vec<String> {
        vec![self.code.clone()]
    }
}

impl AnswerCodes for RucQuery {
    fn codes(&self) -> Vec<String> {
        vec![self.code.clone()]
    }
}

impl AnswerCodes for EventReception {
    /// Each event's first `dCodRes`.
    fn codes(&self) -> Vec<String> {
        if self.events.is_empty() {
            return vec!["none".to_owned()];
        }
        self.events.iter().map(|e| first_or_none(&e.results)).collect()
    }
}

/// Whether an error leaves the request unsent (convenience for callers holding a `Result`).
pub fn was_not_sent<T>(result: &Result<T, SoapError>) -> bool {
    matches!(result, Err(e) if e.delivery() == Delivery::NotSent)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::selfsigned::SelfSigned;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    const CDC: &str = "01800695631001001000000122025011511234567899";

    fn quick() -> SoapClientConfig {
        SoapClientConfig {
            connect_timeout_ms: 2_000,
            read_timeout_ms: 300,
            total_timeout_ms: 5_000,
            ..SoapClientConfig::default()
        }
    }

    fn identity_pem() -> (Vec<u8>, Vec<u8>) {
        let (key, cert) = SelfSigned::for_ruc("DEMO S.A.", "80069563-1", 30)
            .generate()
            .unwrap();
        (key.private_key_to_pem_pkcs8().unwrap(), cert.to_pem().unwrap())
    }

    #[test]
    fn a_client_takes_the_company_certificate_and_extra_roots_as_pem() {
        let (key, cert) = identity_pem();
        let identity = ClientIdentity::from_key_and_chain(&key, &cert);
        assert_eq!(format!("{identity:?}"), "ClientIdentity([redacted])");
        let client = SifenClient::new(
            "https://sifen-test.set.gov.py/",
            &quick(),
            Some(&identity),
            Some(&cert),
        )
        .unwrap();
        assert_eq!(
            client.url(Service::RecepDe),
            "https://sifen-test.set.gov.py/de/ws/sync/recibe.wsdl"
        );
        assert_eq!(
            SifenClient::for_environment(Environment::Production, &quick(), None)
                .unwrap()
                .url(Service::ConsDe),
            "https://sifen.set.gov.py/de/ws/consultas/consulta.wsdl"
        );
        assert!(matches!(
            SifenClient::new(
                "http://x",
                &quick(),
                Some(&ClientIdentity::from_pem(b"junk".to_vec())),
                None
            ),
            Err(SoapError::Config(_))
        ));
        assert!(matches!(
            SifenClient::new("http://x", &quick(), None, Some(b"junk")),
            Err(SoapError::Config(_))
        ));
        assert!(matches!(
            SifenClient::new("ftp://x", &quick(), None, None),
            Err(SoapError::Config(_))
        ));
    }

    #[test]
    fn extra_roots_also_come_from_a_file_in_the_configuration() {
        let (_, cert) = identity_pem();
        let file = std::env::temp_dir().join(format!("kuatia-roots-{}.pem", uuid::Uuid::now_v7()));
        std::fs::write(&file, &cert).unwrap();
        let config = SoapClientConfig {
            extra_roots_file: Some(file.clone()),
            ..quick()
        };
        assert!(SifenClient::new("https://127.0.0.1:1", &config, None, None).is_ok());
        std::fs::write(&file, b"junk").unwrap();
        assert!(matches!(
            SifenClient::new("https://127.0.0.1:1", &config, None, None),
            Err(SoapError::Config(_))
        ));
        std::fs::remove_file(&file).unwrap();
        assert!(matches!(
            SifenClient::new("https://127.0.0.1:1", &config, None, None),
            Err(SoapError::Config(m)) if m.contains("kuatia-roots-")
        ));
    }

    #[tokio::test]
    async fn a_refused_connection_is_not_sent() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        drop(listener);
        let client = SifenClient::new(&format!("http://{addr}"), &quick(), None, None).unwrap();
        let err = client.query_de(1, CDC).await.unwrap_err();
        assert!(matches!(err, SoapError::NotSent { .. }), "{err:?}");
        assert_eq!(err.delivery(), Delivery::NotSent);
    }

    #[tokio::test]
    async fn a_tls_handshake_that_fails_is_not_sent() {
        // A plain-HTTP server behind an https:// URL: the handshake fails before any request.
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            while let Ok((mut socket, _)) = listener.accept().await {
                let _ = socket
                    .write_all(b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\n\r\n")
                    .await;
            }
        });
        let client = SifenClient::new(&format!("https://{addr}"), &quick(), None, None).unwrap();
        let err = client.query_de(1, CDC).await.unwrap_err();
        assert_eq!(err.delivery(), Delivery::NotSent, "{err:?}");
    }

    #[tokio::test]
    async fn silence_after_the_request_is_an_unknown_outcome_and_a_timeout() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            while let Ok((mut socket, _)) = listener.accept().await {
                tokio::spawn(async move {
                    let mut buf = vec![0u8; 65536];
                    let _ = socket.read(&mut buf).await;
                    tokio::time::sleep(Duration::from_secs(10)).await;
                });
            }
        });
        let client = SifenClient::new(&format!("http://{addr}"), &quick(), None, None).unwrap();
        let err = client.query_de(1, CDC).await.unwrap_err();
        assert!(
            matches!(err, SoapError::OutcomeUnknown { timeout: true, .. }),
            "{err:?}"
        );
        assert!(err.is_timeout());
        assert_eq!(err.delivery(), Delivery::Unknown);
    }

    /// A server on a free port that reads each request and answers it with `raw`, then closes.
    async fn answering(raw: String) -> std::net::SocketAddr {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            while let Ok((mut socket, _)) = listener.accept().await {
                let mut buf = vec![0u8; 65536];
                let _ = socket.read(&mut buf).await;
                let _ = socket.write_all(raw.as_bytes()).await;
            }
        });
        addr
    }

    #[tokio::test]
    async fn a_connection_closed_after_the_request_is_an_unknown_outcome() {
        // Headers promising more than is sent, then close.
        let addr = answering(
            "HTTP/1.1 200 OK\r\ncontent-type: application/xml\r\ncontent-length: 500\r\n\r\n<env:Envelope"
                .into(),
        )
        .await;
        let client = SifenClient::new(&format!("http://{addr}"), &quick(), None, None).unwrap();
        let err = client
            .send_de(
                1,
                &format!(
                    "<rDE xmlns=\"{}\"><DE Id=\"{CDC}\"/></rDE>",
                    super::super::SIFEN_NS
                ),
            )
            .await
            .unwrap_err();
        assert!(
            matches!(err, SoapError::OutcomeUnknown { timeout: false, .. }),
            "{err:?}"
        );
    }

    #[tokio::test]
    async fn an_html_error_page_is_not_soap_with_its_status() {
        let body = "<html><body>Service Unavailable</body></html>";
        let addr = answering(format!(
            "HTTP/1.1 503 Service Unavailable\r\ncontent-type: text/html\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
            body.len()
        ))
        .await;
        let client = SifenClient::new(&format!("http://{addr}"), &quick(), None, None).unwrap();
        let err = client.query_de(1, CDC).await.unwrap_err();
        // Its size and hash are kept, never its text (the endpoint is a tenant's).
        assert!(
            matches!(err, SoapError::NotSoap { status: 503, ref snippet } if snippet.contains("SHA-256")),
            "{err:?}"
        );
        assert!(!err.to_string().contains("Service Unavailable"), "{err}");
    }

    #[tokio::test]
    async fn a_pinned_client_connects_to_the_checked_address_whatever_the_name_resolves_to() {
        // `sifen.invalid` resolves nowhere; pinned to the simulator's address it is reached.
        let sim = crate::sifen_sim::start("127.0.0.1:0", crate::sifen_sim::SimConfig::default())
            .await
            .unwrap();
        let url = format!("http://sifen.invalid:{}", sim.addr.port());
        let pinned = SifenClient::pinned(&url, &quick(), None, None, Some(sim.addr)).unwrap();
        let answer = pinned.query_de(1, CDC).await.unwrap();
        assert_eq!(answer.result.code, "0420");
        let unpinned = SifenClient::new(&url, &quick(), None, None).unwrap();
        assert!(unpinned.query_de(1, CDC).await.is_err());
    }

    #[tokio::test]
    async fn a_redirect_is_never_followed() {
        // A 307 to another listener: following it would POST there (a 303 would GET).
        let target = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let target_addr = target.local_addr().unwrap();
        let reached = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flag = reached.clone();
        tokio::spawn(async move {
            while let Ok((_socket, _)) = target.accept().await {
                flag.store(true, std::sync::atomic::Ordering::SeqCst);
            }
        });
        let addr = answering(format!(
            "HTTP/1.1 307 Temporary Redirect\r\nlocation: http://{target_addr}/latest\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
        ))
        .await;
        let client = SifenClient::new(&format!("http://{addr}"), &quick(), None, None).unwrap();
        let err = client.query_de(1, CDC).await.unwrap_err();
        assert!(matches!(err, SoapError::NotSoap { status: 307, .. }), "{err:?}");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        assert!(
            !reached.load(std::sync::atomic::Ordering::SeqCst),
            "the redirect was followed"
        );
    }

    #[test]
    fn a_lot_result_counts_its_own_code_and_each_documents() {
        let result = LotResult {
            processed_at: None,
            code: "0362".into(),
            message: String::new(),
            documents: vec![
                messages::LotDocument {
                    cdc: CDC.into(),
                    status: messages::DocumentStatus::Approved,
                    authorization: None,
                    results: vec![messages::ResultCode {
                        code: "0260".into(),
                        message: String::new(),
                    }],
                },
                messages::LotDocument {
                    cdc: CDC.into(),
                    status: messages::DocumentStatus::Rejected,
                    authorization: None,
                    results: Vec::new(),
                },
            ],
        };
        assert_eq!(result.codes(), vec!["0362", "0260", "none"]);
        assert_eq!(code_label("0260"), "0260");
        assert_eq!(code_label("<html>"), "other");
        assert_eq!(code_label(""), "other");
        // Digits SIFEN never answers with are no new series either.
        assert_eq!(code_label("12345678"), "other");
        assert_eq!(code_label("9999"), "other");
    }

    #[test]
    fn failures_are_labelled_by_what_they_mean() {
        let url = "http://x".to_owned();
        assert_eq!(
            failure_code(&SoapError::NotSent {
                url: url.clone(),
                reason: "refused".into()
            }),
            "not_sent"
        );
        assert_eq!(
            failure_code(&SoapError::OutcomeUnknown {
                url: url.clone(),
                timeout: true,
                reason: String::new()
            }),
            "timeout"
        );
        assert_eq!(
            failure_code(&SoapError::OutcomeUnknown {
                url,
                timeout: false,
                reason: String::new()
            }),
            "transport_error"
        );
        assert_eq!(
            failure_code(&SoapError::NotSoap {
                status: 503,
                snippet: String::new()
            }),
            "invalid_answer"
        );
    }

    #[tokio::test]
    async fn an_invalid_request_is_refused_before_connecting() {
        let client = SifenClient::new("http://127.0.0.1:9", &quick(), None, None).unwrap();
        let err = client.send_de(1, "not xml").await.unwrap_err();
        assert!(matches!(err, SoapError::InvalidRequest(_)));
        assert!(was_not_sent(&Err::<(), _>(err)));
    }
}
