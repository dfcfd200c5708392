//! The ports the process managers work through: what they read of the configuration and the
//! number series (implemented by `kuatia_projections`), what they talk to (SIFEN, the signer,
//! the destination policy: implemented by `kuatia_infrastructure`), and the clock. Each is a
//! small trait; `kuatia_api::compose` builds the adapters and hands them over, and the scenario
//! tests hand over fakes instead.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use kuatia_domain::certificate::CertificateRecord;
use kuatia_domain::channel::{BranchWithPoints, EmissionChannel};
use kuatia_domain::company::{Branch, CompanyProfile, IssuancePoint};
use kuatia_domain::print_settings::PrintSettings;
use kuatia_domain::sifen::exchange::{
    Answered, DeQuery, DeReception, EventReception, LotQuery, LotReception, LotResult, SoapError,
};
use kuatia_domain::tenancy::TenantId;
use std::net::SocketAddr;
use std::sync::Arc;
use uuid::Uuid;

use crate::event_store::StoreError;

/// What time it is. The workflows read it here and nowhere else, so a test can fix it.
pub trait Clock: Send + Sync + 'static {
    /// Now.
    fn now(&self) -> DateTime<Utc>;
}

/// The system clock.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> DateTime<Utc> {
        Utc::now()
    }
}

/// A company as the workflows need it: who it is and the version of its configuration (any
/// change to the company, its branches, points, certificates or channels raises it).
#[derive(Debug, Clone, PartialEq)]
pub struct CompanyConfig {
    /// Id.
    pub id: Uuid,
    /// RUC with DV.
    pub ruc: String,
    /// Profile.
    pub profile: CompanyProfile,
    /// Stream version of the last change to anything of its configuration.
    pub config_version: i64,
}

/// What intake needs of a company's configuration, read together (one snapshot per
/// configuration version).
#[derive(Debug, Clone, PartialEq)]
pub struct CompanySnapshot {
    /// The company (its `config_version` names this snapshot).
    pub company: CompanyConfig,
    /// Its channels, in creation order.
    pub channels: Vec<EmissionChannel>,
    /// Its branches with their points.
    pub locations: Vec<BranchWithPoints>,
    /// Its certificates, newest first.
    pub certificates: Vec<CertificateRecord>,
    /// Whether print settings were saved.
    pub print_settings_saved: bool,
}

/// The configuration read models, as the workflows read them. `None`: no such record of the
/// tenant.
#[async_trait]
pub trait ConfigurationReads: Send + Sync {
    /// A company.
    async fn company(&self, tenant: TenantId, id: Uuid) -> Result<Option<CompanyConfig>, StoreError>;
    /// An emission channel.
    async fn channel(&self, tenant: TenantId, id: Uuid) -> Result<Option<EmissionChannel>, StoreError>;
    /// A branch.
    async fn branch(&self, tenant: TenantId, id: Uuid) -> Result<Option<Branch>, StoreError>;
    /// An issuance point.
    async fn issuance_point(&self, tenant: TenantId, id: Uuid) -> Result<Option<IssuancePoint>, StoreError>;
    /// A certificate's record (its sealed key's id; no secret).
    async fn certificate(&self, tenant: TenantId, id: Uuid) -> Result<Option<CertificateRecord>, StoreError>;
    /// A company's saved print settings (`None`: it saved none, the defaults apply).
    async fn print_settings(
        &self,
        tenant: TenantId,
        company: Uuid,
    ) -> Result<Option<PrintSettings>, StoreError>;
}

/// What the number series read model refuses an append with when a document takes a number
/// that is not its series' next (another instance drew it first): the refusal's message holds
/// these words, and the workflow draws again.
pub const NOT_NEXT: &str = "not the series' next number";

/// The number series read model.
#[async_trait]
pub trait NumberSeries: Send + Sync {
    /// The next number of a series, `None` for a series never used.
    async fn next_number(&self, tenant: TenantId, series: &str) -> Result<Option<u64>, StoreError>;
}

/// SIFEN's web services at one endpoint, through one TLS identity. Each call is one exchange;
/// none retries by itself (whether to send again, and after which reconciliation, is the
/// workflow's decision).
#[async_trait]
pub trait SifenGateway: Send + Sync {
    /// siRecepDE: one signed `rDE`.
    async fn send_de(&self, d_id: u64, signed_rde: &str) -> Result<Answered<DeReception>, SoapError>;
    /// siRecepLoteDE: 1–50 signed DEs of one type and one issuer.
    async fn send_lot(&self, d_id: u64, signed_rdes: &[&str]) -> Result<Answered<LotReception>, SoapError>;
    /// siResultLoteDE: a lot's state and, once done, each DE's result.
    async fn lot_result(&self, d_id: u64, query: &LotQuery) -> Result<Answered<LotResult>, SoapError>;
    /// siConsDE: what SIFEN holds for a CDC.
    async fn query_de(&self, d_id: u64, cdc: &str) -> Result<Answered<DeQuery>, SoapError>;
    /// siRecepEvento: 1–15 signed events.
    async fn send_events(
        &self,
        d_id: u64,
        signed_events: &[&str],
    ) -> Result<Answered<EventReception>, SoapError>;
}

/// Opens [`SifenGateway`]s.
pub trait SifenConnector: Send + Sync {
    /// A gateway to `endpoint` (SIFEN's base URL) with the certificate's key and chain (PEM) as
    /// its TLS client identity, connecting to `pinned` only when given (the address the
    /// destination policy checked).
    fn connect(
        &self,
        endpoint: &str,
        identity_pem: &[u8],
        pinned: Option<SocketAddr>,
    ) -> Result<Arc<dyn SifenGateway>, String>;
}

/// A signed DE before its QR: the XML and the signature's `DigestValue` (the QR carries it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SignedXml {
    /// The signed `rDE`.
    pub xml: String,
    /// `DigestValue`, base64.
    pub digest_value: String,
}

/// A certificate's private key, ready to sign (parsing a PEM costs more than a signature: a
/// key is made once per configuration and kept).
pub trait SigningKey: Send + Sync {
    /// Signs an unsigned `rDE` (XMLDSig, enveloped, RSA-SHA256).
    fn sign_de(&self, unsigned: &str) -> Result<SignedXml, String>;
    /// Appends `gCamFuFD` with the QR URL after the signature of a signed `rDE`.
    fn append_qr(&self, signed: &mut String, qr_url: &str) -> Result<(), String>;
    /// Signs an unsigned event (`rEve` inside `rGesEve`).
    fn sign_event(&self, unsigned: &str) -> Result<String, String>;
}

/// Makes [`SigningKey`]s.
pub trait Signer: Send + Sync {
    /// The key of a PEM holding a private key and its certificate chain.
    fn key(&self, pem: &[u8]) -> Result<Arc<dyn SigningKey>, String>;
}

/// What the workflows read of a tenant.
#[async_trait]
pub trait TenantReads: Send + Sync {
    /// Whether the tenant is a production one (an unknown tenant counts as one: the stricter
    /// rules apply).
    async fn is_production(&self, tenant: TenantId) -> Result<bool, StoreError>;
}

/// The destination policy: where a tenant's outgoing requests may go.
#[async_trait]
pub trait Destinations: Send + Sync {
    /// Checks `url` against `tenant`'s rules now; the address its client must connect to when
    /// the rules pin one. The error says why the destination is refused (it may be DNS: the
    /// caller tries again later).
    async fn check(&self, tenant: TenantId, url: &str) -> Result<Option<SocketAddr>, String>;
    /// Checks `url` when it is saved (a channel's endpoint, a webhook's URL): as
    /// [`check`](Self::check), except that a demo tenant's host that does not resolve yet passes
    /// (it is checked again before every connection). The outer error: the tenant could not be
    /// read; the inner one: the destination is refused.
    async fn check_saved(
        &self,
        tenant: TenantId,
        url: &str,
    ) -> Result<Result<(), RefusedDestination>, StoreError>;
}

/// Why a destination is refused: a code for the API's `details.errors` and the reason.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RefusedDestination {
    /// `invalid_url`, `https_required`, `private_address`, …
    pub code: &'static str,
    /// The reason, in words.
    pub message: String,
}
