//! The SIFEN process manager: the job handlers that take a queued document to a verdict, and
//! send its cancelación or inutilización. It works through ports only ([`SifenPorts`]): the
//! configuration and number series read models, SIFEN's web services, the signer, the
//! destination policy, the clock (docs/sifen-channel.md).
//!
//! - [`Prepare`] (`sifen.prepare`): the jobs of one series waiting at the same time share a
//!   *turn*: it draws the series' next number once, numbers the documents in queue order, builds
//!   and signs them (off the async runtime), stores the signed bytes as artifacts and records
//!   each document's transformed → artifact → signed → first attempt in **one** append (the
//!   turn's appends queued together). Nothing is consumed unless that append commits: the number
//!   series projection refuses a number someone else drew (the job draws again), and a crash
//!   before the commit leaves at most an unreferenced artifact. Then the turn **sends** its
//!   documents' first attempts — the attempt is on record before anything leaves — as one lot
//!   (siRecepLoteDE, `lots`) when there are several, or alone (siRecepDE), and records SIFEN's
//!   answers together; the series' next turn does not wait for that. A job run again after its
//!   document's first attempt is on record (a crash, a failure while sending or recording) never
//!   sends it blindly: it reconciles first, as a retry does.
//! - [`Submit`] (`sifen.submit`): every later attempt (a retry scheduled after an operational
//!   failure, a manual retry). It asks SIFEN for the CDC first (siConsDE, then a lot holding it):
//!   an earlier attempt may have been approved without us hearing the answer, and a CDC is never
//!   sent again once approved. Then the attempt goes on record and the stored signed bytes are
//!   sent unchanged.
//!
//! SIFEN's answer to any attempt becomes an event (accepted, rejected, in a lot, or an
//! operational failure with the next attempt's time, which queues the next job), and its raw body
//! a `channel_response` artifact.
//! - [`SifenEvent`] (`sifen.event`): sends the cancelación or inutilización the document has
//!   pending (`DocumentState::pending`, requested by `POST /cancel` or `/inutilize`), signed off
//!   the runtime, through siRecepEvento, and records SIFEN's verdict (`RecordCancelled` /
//!   `RecordCancellationRefused`, `RecordInutilized` / `RecordInutilizationRefused`) with the raw
//!   answer as a `channel_response` artifact. A transport failure or an answer that settles
//!   nothing (0161/0162, an unlisted code) retries the job. An event sent again after an unheard
//!   answer meets SIFEN's "already registered" (4003 for a cancelación, 4066 for an inutilización
//!   of that very number): the document is in the state asked for, so that is recorded as
//!   registered, with SIFEN's code.
//!
//! Every answer is read with SIFEN's answers table (`kuatia_domain::sifen::answers`, published in
//! `docs/sifen-channel.md`) and nowhere else: approved, rejected, known absent, still processing,
//! or an operational failure. A CDC is sent again only after siConsDE's "known absent" (0420) and
//! a lot answer that no lot holding it is processing; a rejection is recorded only from a
//! definitive one; an approval from before (1001/1002) stays unrecorded until siConsDE confirms
//! it.

use async_trait::async_trait;
use chrono::{DateTime, TimeDelta, Utc};
use kuatia_domain::document::aggregate::{
    ArtifactKind, Document, DocumentCommand, DocumentState, DocumentStatus, FiscalEventKind,
    SUBMISSION_HORIZON,
};
use kuatia_domain::sifen::answers::Meaning;
use kuatia_domain::sifen::de::Issuer;
use kuatia_domain::sifen::event::{self as sifen_event, EventInput, EventKind};
use kuatia_domain::sifen::exchange::{LotQuery, SoapError};
use kuatia_domain::tenancy::TenantId;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use tokio::sync::oneshot;
use tracing::Instrument;
use uuid::Uuid;

use super::build::{self, Signed, SigningSetup};
use super::ports::{
    Clock, ConfigurationReads, Destinations, NOT_NEXT, NumberSeries, SifenConnector, SifenGateway, Signer,
    SigningKey,
};
use super::{document_id, metadata, retry};
use crate::artifacts::ArtifactStore;
use crate::combine::{Combiner, Waiting};
use crate::documents::{self, DocumentsError, SIFEN_EVENT, SIFEN_PREPARE, SIFEN_SUBMIT};
use crate::event_store::{SharedStore, StoreError};
use crate::jobs::{Backoff, Job, JobQueue};
use crate::vault::{Vault, VaultError};
use crate::worker::{JobFailure, JobHandler};

mod answer;
mod event;
mod lots;
mod prepare;
mod submit;

use answer::{
    Heard, Outcome, Response, Verdict, asking, outcome_commands, record, response_artifact, send_alone,
    transport_failure, verdict,
};
pub use event::SifenEvent;
pub use lots::{LotSettings, SIFEN_LOT, SifenLot};
pub use prepare::{Prepare, normalized_payload, normalized_payload_artifact};
use prepare::{SeriesTurns, TurnGate};
pub use submit::Submit;

/// The actor recorded on the pipeline's events.
const ACTOR: &str = "system:sifen";

/// Delay before the automatic attempt after the `failures`-th operational failure: 30 s, 2 min,
/// 10 min, 30 min, 1 h, then every 2 h.
pub fn retry_delay(failures: u32) -> TimeDelta {
    match failures {
        0 | 1 => TimeDelta::seconds(30),
        2 => TimeDelta::minutes(2),
        3 => TimeDelta::minutes(10),
        4 => TimeDelta::minutes(30),
        5 => TimeDelta::hours(1),
        _ => TimeDelta::hours(2),
    }
}

/// The number series a document draws from: company, timbrado, establishment, point, type.
pub fn series_key(
    company_id: Uuid,
    timbrado: &str,
    establishment: &str,
    point: &str,
    doc_type: u8,
) -> String {
    format!("{company_id}:{timbrado}:{establishment}:{point}:{doc_type}")
}

/// The ports the SIFEN process manager works through.
#[derive(Clone)]
pub struct SifenPorts {
    /// The event store (documents are loaded and changed through it).
    pub store: SharedStore,
    /// Sealed secrets: the certificates' keys, the CSCs.
    pub vault: Vault,
    /// Signed XML, SIFEN's answers, normalized payloads.
    pub artifacts: Arc<dyn ArtifactStore>,
    /// The configuration read models.
    pub config: Arc<dyn ConfigurationReads>,
    /// The number series read model.
    pub series: Arc<dyn NumberSeries>,
    /// SIFEN's web services.
    pub sifen: Arc<dyn SifenConnector>,
    /// Makes signing keys.
    pub signer: Arc<dyn Signer>,
    /// The destination policy channel endpoints are checked against when sending.
    pub destinations: Arc<dyn Destinations>,
    /// The time.
    pub clock: Arc<dyn Clock>,
}

/// What the handlers share.
#[derive(Clone)]
pub struct Pipeline {
    ports: SifenPorts,
    /// Gateways by (endpoint, certificate): opening one sets up TLS.
    clients: Arc<Mutex<Gateways>>,
    /// Setups by configuration version (`setup`).
    setups: Arc<Mutex<HashMap<SetupKey, Arc<Setup>>>>,
    /// Transforms of one series in this process take turns, several documents per turn (other
    /// instances are kept honest by the number series projection).
    series_turns: Arc<Mutex<HashMap<String, Arc<SeriesTurns>>>>,
    retry_scale: f64,
    /// Lots: whether a turn's first attempts share one, how long a turn gathers, how lots are
    /// polled.
    lots: LotSettings,
    /// `sifen.prepare` jobs started and arrived at their turn (a turn gathers the ones on their
    /// way).
    gate: Arc<TurnGate>,
    /// Where the lot polls are queued (lots are off without it).
    jobs: Option<Arc<dyn JobQueue>>,
}

impl std::fmt::Debug for Pipeline {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pipeline").finish_non_exhaustive()
    }
}

/// A sealed secret that does not open stays so until an operator gives the master key that
/// sealed it: the document fails visibly with the reason (`failed_terminal`,
/// `document.failed`) instead of waiting in `queued` with nothing said. A store failure is
/// retried.
pub(crate) fn unopened(document: Uuid, what: &str, e: VaultError) -> JobFailure {
    if e.is_transient() {
        retry(e)
    } else {
        JobFailure::Permanent(format!("document {document}: {what} cannot be opened: {e}"))
    }
}

/// The worker's backoff for failures around SIFEN (the store, a lost race), starting at `ms`.
fn backoff_from_ms(ms: u64) -> Backoff {
    Backoff {
        base: std::time::Duration::from_millis(ms),
        ..Backoff::default()
    }
}

impl Pipeline {
    /// A pipeline over its ports; lots off, the retry schedule as decided.
    pub fn new(ports: SifenPorts) -> Self {
        Self {
            ports,
            clients: Arc::default(),
            setups: Arc::default(),
            series_turns: Arc::default(),
            retry_scale: 1.0,
            lots: LotSettings {
                window: std::time::Duration::ZERO,
                ..LotSettings::default()
            },
            gate: Arc::default(),
            jobs: None,
        }
    }

    /// Sends the first attempts of a turn as lots, polled through `sifen.lot` jobs queued on
    /// `jobs`.
    pub fn with_lots(mut self, lots: LotSettings, jobs: Arc<dyn JobQueue>) -> Self {
        self.lots = lots;
        self.jobs = Some(jobs);
        self
    }

    /// Multiplies the retry schedule (tests and simulations shrink it).
    pub fn with_retry_scale(mut self, scale: f64) -> Self {
        self.retry_scale = if scale.is_finite() && scale > 0.0 {
            scale
        } else {
            1.0
        };
        self
    }

    /// The job handlers: prepare, submit, lots, events.
    pub fn handlers(&self) -> Vec<Arc<dyn JobHandler>> {
        vec![
            Arc::new(Prepare(self.clone())),
            Arc::new(Submit(self.clone())),
            Arc::new(SifenLot(self.clone())),
            Arc::new(SifenEvent(self.clone())),
        ]
    }

    /// The job's tenant, document id and document state, read from the store.
    async fn document(&self, job: &Job) -> Result<(TenantId, Uuid, DocumentState), JobFailure> {
        self.document_to_act(job, |_| false).await
    }

    /// The job's document as [`Self::load_to_act`] loads it.
    async fn document_to_act(
        &self,
        job: &Job,
        acts: impl FnOnce(&DocumentState) -> bool,
    ) -> Result<(TenantId, Uuid, DocumentState), JobFailure> {
        let id = document_id(job)?;
        match self.load_to_act(job.tenant_id, id, acts).await? {
            Some(state) => Ok((job.tenant_id, id, state)),
            None => Err(JobFailure::Permanent(format!("no document {id}"))),
        }
    }

    /// The document as its stream stands.
    async fn load(&self, tenant: TenantId, id: Uuid) -> Result<Option<DocumentState>, JobFailure> {
        self.load_to_act(tenant, id, |_| false).await
    }

    /// The document for a step that acts on it only through appends expecting the version it
    /// was loaded at (`AggregateStore::load_to_act`): the cached state, without a read, when
    /// `acts` says the step would act on it; read from the store otherwise (a stale cache must
    /// not make a step skip its work).
    async fn load_to_act(
        &self,
        tenant: TenantId,
        id: Uuid,
        acts: impl FnOnce(&DocumentState) -> bool,
    ) -> Result<Option<DocumentState>, JobFailure> {
        let store = crate::aggregate::AggregateStore::<Document>::new(self.ports.store.clone(), tenant);
        let loaded = store
            .load_to_act(
                &kuatia_domain::document::aggregate::stream_id(tenant, id),
                |document| document.state().is_some_and(acts),
            )
            .await
            .map_err(retry)?;
        Ok(loaded.aggregate().state().cloned())
    }

    /// Runs commands on the document in one append; a job's write that came first makes them
    /// decided again on the newer state (`documents::commands`), so a verdict heard from SIFEN
    /// is not lost to a KuDE or delivery record.
    async fn run(
        &self,
        tenant: TenantId,
        id: Uuid,
        commands: Vec<DocumentCommand>,
    ) -> Result<(), DocumentsError> {
        documents::commands(&self.ports.store, tenant, id, commands, metadata(ACTOR)).await
    }

    /// The company's SIFEN setup for a document: issuer, channel settings, signing PEM, CSC.
    /// Kept per process by the company's `config_version` (read on every call, as intake's
    /// snapshot cache does), so a document's jobs read one row, not five tables and two sealed
    /// secrets, each time — and a configuration change made through any instance is seen at once.
    async fn setup(&self, tenant: TenantId, state: &DocumentState) -> Result<Setup, JobFailure> {
        let routing = &state.routing;
        let company = self
            .ports
            .config
            .company(tenant, routing.company_id)
            .await
            .map_err(retry)?
            .ok_or_else(|| JobFailure::Permanent(format!("no company of document {}", state.document_id)))?;
        let key = (
            tenant,
            company.id,
            company.config_version,
            routing.channel_id,
            routing.branch_id,
            routing.issuance_point_id,
        );
        let cached = self
            .setups
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(&key)
            .cloned();
        let base = match cached {
            Some(base) => base,
            None => {
                let base = Arc::new(self.read_setup(tenant, state, company).await?);
                let mut setups = self
                    .setups
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                if setups.len() >= 1_000 {
                    setups.clear();
                }
                setups.insert(key, base.clone());
                base
            }
        };
        Ok((*base).clone())
    }

    /// Reads a setup from the configuration and the vault.
    async fn read_setup(
        &self,
        tenant: TenantId,
        state: &DocumentState,
        company: super::ports::CompanyConfig,
    ) -> Result<Setup, JobFailure> {
        let routing = &state.routing;
        let permanent =
            |what: &str| JobFailure::Permanent(format!("{what} of document {}", state.document_id));
        let channel = self
            .ports
            .config
            .channel(tenant, routing.channel_id)
            .await
            .map_err(retry)?
            .ok_or_else(|| permanent("no channel"))?;
        let sifen = channel
            .sifen
            .clone()
            .ok_or_else(|| permanent("no sifen settings"))?;
        let material = build::signing_material(
            self.ports.config.as_ref(),
            &self.ports.vault,
            tenant,
            &company,
            &sifen,
            routing.branch_id,
            routing.issuance_point_id,
        )
        .await
        .map_err(|e| match e {
            build::MaterialError::Missing(what) => permanent(what),
            build::MaterialError::Store(e) => retry(e),
            build::MaterialError::Vault(what, e) => unopened(state.document_id, what, e),
        })?;
        let build::SigningMaterial {
            issuer,
            certificate,
            pem,
            csc,
        } = material;
        // The destination policy when sending, not only when the channel was saved: the
        // endpoint must lead to public (or allow-listed) addresses now, and the client is pinned
        // to the address checked. A refusal is retried (it may be DNS, and it is logged with the
        // reason); only demo tenants of a service without public signup connect as they resolve.
        let pinned = self
            .ports
            .destinations
            .check(tenant, &channel.endpoint)
            .await
            .map_err(|e| retry(format!("the sifen channel's endpoint: {e}")))?;
        let key = self.ports.signer.key(&pem).map_err(|e| {
            JobFailure::Permanent(format!("document {}: the signing key: {e}", state.document_id))
        })?;
        Ok(Setup {
            key,
            issuer,
            endpoint: channel.endpoint.clone(),
            certificate_id: sifen.certificate_id,
            csc_id: sifen.csc_id.clone(),
            csc,
            environment: sifen.environment,
            pem: pem.to_vec(),
            pinned,
            certificate_valid: (certificate.facts.not_before, certificate.facts.not_after),
        })
    }

    fn client(&self, setup: &Setup) -> Result<Arc<dyn SifenGateway>, JobFailure> {
        let key = (setup.endpoint.clone(), setup.certificate_id);
        if let Some(client) = self
            .clients
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(&key)
        {
            return Ok(client.clone());
        }
        let client = self
            .ports
            .sifen
            .connect(&setup.endpoint, &setup.pem, setup.pinned)
            .map_err(|e| JobFailure::Retry(format!("the SIFEN client: {e}")))?;
        self.clients
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(key, client.clone());
        Ok(client)
    }
}

/// Open gateways by (endpoint, certificate).
type Gateways = HashMap<(String, Uuid), Arc<dyn SifenGateway>>;

/// Which setup: tenant, company, its configuration version, channel, branch, issuance point.
type SetupKey = (TenantId, Uuid, i64, Uuid, Uuid, Uuid);

/// What signing and sending need of the configuration.
#[derive(Clone)]
struct Setup {
    issuer: Issuer,
    endpoint: String,
    certificate_id: Uuid,
    csc_id: String,
    csc: String,
    environment: kuatia_domain::channel::SifenEnvironment,
    /// The certificate's private key and chain, PEM (the SOAP client's TLS identity).
    pem: Vec<u8>,
    /// The same, made a signing key.
    key: Arc<dyn SigningKey>,
    /// For a production tenant, the endpoint's address the destination policy checked when the
    /// setup was read: its SIFEN client connects there and nowhere else (docs/security.md).
    pinned: Option<std::net::SocketAddr>,
    /// The certificate's validity (not before, not after).
    certificate_valid: (DateTime<Utc>, DateTime<Utc>),
}

impl Setup {
    /// Refuses to sign with a certificate that is not valid now: SIFEN rejects a DE whose
    /// certificate was not valid when it was signed (rule 2450, field I002), so the document
    /// would burn its number on a certain rejection. Its certificate may have expired after
    /// intake checked the channel.
    fn check_certificate(&self, document: Uuid, now: DateTime<Utc>) -> Result<(), JobFailure> {
        let (from, until) = self.certificate_valid;
        if now < from || now > until {
            return Err(JobFailure::Permanent(format!(
                "document {document}: the certificate {} is not valid now (valid from {} until {}): \
                 SIFEN rejects a DE signed with it (2450); upload a valid certificate and issue the \
                 document again",
                self.certificate_id,
                from.to_rfc3339(),
                until.to_rfc3339()
            )));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_retry_schedule_is_the_decided_one() {
        let minutes: Vec<i64> = (1..=8).map(|n| retry_delay(n).num_seconds()).collect();
        assert_eq!(minutes, vec![30, 120, 600, 1800, 3600, 7200, 7200, 7200]);
    }
}
