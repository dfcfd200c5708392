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
    /// What authentication reads (API keys by hash, memberships).
    pub access: Arc<dyn kuatia_application::access::AccessReads>,
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
    /// How long a document's public link works (`KUATIA_PUBLIC_LINK_DAYS`).
    pub public_link_days: u32,
    /// The destination policy outgoing requests follow, per tenant (`KUATIA_PRIVATE_DESTINATIONS`,
    /// `KUATIA_PUBLIC_SIGNUP`): a channel's endpoint and a webhook's URL are checked when saved.
    pub destinations: Arc<dyn kuatia_application::process::ports::Destinations>,
    /// The webhook deliveries (the endpoints' `test` sends through them).
    pub webhook_delivery: Arc<kuatia_application::process::webhook_delivery::WebhookDelivery>,
    /// Whether a mail server is configured (`KUATIA_SMTP_URL`): invitations are emailed, and
    /// otherwise their `accept_url` is given to the inviter.
    pub mail_configured: bool,
    /// The deliveries of documents (a document emailed from the console goes through them).
    pub deliveries: kuatia_application::process::delivery::Deliveries,
    /// What the sandbox preview reads and talks to (intake's reads, the vault, the signer, the
    /// printer, throw-away certificates, SIFEN's checks in process or at a test endpoint).
    pub sandbox: kuatia_application::sandbox::SandboxPorts,
    /// The operators' room's long task (a rebuild or a verification), one at a time.
    pub operator_task: kuatia_application::support::Tasks,
    /// The projections, for the operators' room (rebuilt by the projections' own runtime).
    pub projections: Arc<dyn kuatia_application::support::ProjectionAdmin>,
}
