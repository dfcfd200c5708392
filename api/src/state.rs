//! What handlers share.

use kuatia_application::event_store::SharedStore;
use kuatia_application::jobs::JobQueue;
use kuatia_infrastructure::config::Secret;
use metrics_exporter_prometheus::PrometheusHandle;
use std::sync::Arc;

/// The state every handler can extract.
#[derive(Clone)]
pub struct AppState {
    /// The event store.
    pub store: SharedStore,
    /// The job queue.
    pub jobs: Arc<dyn JobQueue>,
    /// Bearer token of `/metrics`; `None` disables it.
    pub metrics_token: Option<Arc<Secret>>,
    /// Renders the Prometheus exposition.
    pub prometheus: PrometheusHandle,
    /// Largest accepted request body.
    pub max_body_bytes: usize,
    /// Whether `POST /v1/tenants` is open to anyone.
    pub public_signup: bool,
    /// Whether the session cookie omits `Secure` (plain-HTTP development).
    pub insecure_cookies: bool,
    /// Request limits shared across instances.
    pub limiter: Arc<kuatia_application::rate_limit::RateLimiter>,
    /// Requests per minute per API key or user.
    pub rate_limit_per_key: u32,
    /// Requests per minute per IP on unauthenticated endpoints.
    pub rate_limit_per_ip: u32,
    /// Requests per minute of a whole tenant.
    pub rate_limit_per_tenant: u32,
    /// Sealed secrets (certificate keys, CSCs, channel credentials).
    pub vault: kuatia_application::vault::Vault,
    /// The pool PFX uploads are opened in, with the reader that opens them (`KUATIA_PFX_WORKERS`,
    /// `KUATIA_PFX_QUEUE`).
    pub pfx_slots: Arc<kuatia_application::vault::PfxSlots>,
    /// What the intake use case reads through (companies as snapshots kept by configuration
    /// version, branches, points, number series, the taxpayer registry) and its clock.
    pub intake: kuatia_application::intake::IntakePorts,
    /// Where documents' files are stored.
    pub artifacts: Arc<dyn kuatia_application::artifacts::ArtifactStore>,
    /// Renders KuDE and autoimpresor PDFs.
    pub printer: Arc<dyn kuatia_application::printables::Printer>,
    /// Signs and checks artifact download URLs.
    pub artifact_urls: Arc<kuatia_application::download_urls::UrlSigner>,
    /// The destination policy outgoing requests follow (`KUATIA_PRIVATE_DESTINATIONS`,
    /// `KUATIA_PUBLIC_SIGNUP`).
    pub destinations: Arc<kuatia_infrastructure::destination::Policy>,
    /// The webhook deliveries (the endpoints' `test` sends through them).
    pub webhook_delivery: Arc<kuatia_application::process::webhook_delivery::WebhookDelivery>,
    /// Whether a mail server is configured (`KUATIA_SMTP_URL`): invitations are emailed, and
    /// otherwise their `accept_url` is given to the inviter.
    pub mail_configured: bool,
    /// The sandbox preview's settings (where `sifen_dev` sends).
    pub sandbox: Arc<Sandbox>,
}

/// Where `sifen_dev` previews go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SifenTarget {
    /// A SIFEN simulator started for each preview on a loopback port, with the preview's CSC,
    /// stopped when the answer is in: nothing is kept, not even by the simulator.
    OwnSimulator,
    /// A SIFEN test endpoint's base URL (`https://sifen-test.set.gov.py`, a simulator's
    /// `http://host:port`).
    Url(String),
}

/// The sandbox's settings (the preview itself is `crate::sandbox`).
#[derive(Debug, Clone)]
pub struct Sandbox {
    /// Where `sifen_dev` sends.
    pub sifen_target: SifenTarget,
    /// Timeouts of the SOAP client.
    pub soap: kuatia_infrastructure::sifen_soap::SoapClientConfig,
}

impl Default for Sandbox {
    fn default() -> Self {
        Self {
            sifen_target: SifenTarget::OwnSimulator,
            // A person waits for the answer: shorter than the pipeline's 15 s / 45 s.
            soap: kuatia_infrastructure::sifen_soap::SoapClientConfig {
                connect_timeout_ms: 5_000,
                read_timeout_ms: 30_000,
                total_timeout_ms: 40_000,
                ..kuatia_infrastructure::sifen_soap::SoapClientConfig::default()
            },
        }
    }
}
