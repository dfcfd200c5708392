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
use kuatia_domain::ruc::Ruc;
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

mod lots;

pub use lots::{LotSettings, SIFEN_LOT, SifenLot};

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
    store: SharedStore,
    vault: Vault,
    artifacts: Arc<dyn ArtifactStore>,
    config: Arc<dyn ConfigurationReads>,
    series: Arc<dyn NumberSeries>,
    sifen: Arc<dyn SifenConnector>,
    signer: Arc<dyn Signer>,
    clock: Arc<dyn Clock>,
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
    /// The destination policy channel endpoints are checked against when sending.
    destinations: Arc<dyn Destinations>,
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
            store: ports.store,
            vault: ports.vault,
            artifacts: ports.artifacts,
            config: ports.config,
            series: ports.series,
            sifen: ports.sifen,
            signer: ports.signer,
            clock: ports.clock,
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
            destinations: ports.destinations,
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
        let store = crate::aggregate::AggregateStore::<Document>::new(self.store.clone(), tenant);
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
        documents::commands(&self.store, tenant, id, commands, metadata(ACTOR)).await
    }

    fn series_turns(&self, series: &str) -> Arc<SeriesTurns> {
        let mut turns = self
            .series_turns
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if turns.len() > 10_000 {
            turns.retain(|_, t| Arc::strong_count(t) > 1);
        }
        turns
            .entry(series.to_owned())
            .or_insert_with(|| {
                let (gate, window) = (self.gate.clone(), self.lots.window);
                Arc::new(
                    Combiner::new(MAX_PREPARE_TURN, |_| 1).with_gather(Box::new(move || {
                        let gate = gate.clone();
                        Box::pin(async move { gate.gather(window).await })
                    })),
                )
            })
            .clone()
    }

    /// The company's SIFEN setup for a document: issuer, channel settings, signing PEM, CSC.
    /// Kept per process by the company's `config_version` (read on every call, as intake's
    /// snapshot cache does), so a document's jobs read one row, not five tables and two sealed
    /// secrets, each time — and a configuration change made through any instance is seen at once.
    async fn setup(&self, tenant: TenantId, state: &DocumentState) -> Result<Setup, JobFailure> {
        let routing = &state.routing;
        let company = self
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
            .config
            .channel(tenant, routing.channel_id)
            .await
            .map_err(retry)?
            .ok_or_else(|| permanent("no channel"))?;
        let sifen = channel
            .sifen
            .clone()
            .ok_or_else(|| permanent("no sifen settings"))?;
        let branch = self
            .config
            .branch(tenant, routing.branch_id)
            .await
            .map_err(retry)?
            .ok_or_else(|| permanent("no branch"))?;
        let point = self
            .config
            .issuance_point(tenant, routing.issuance_point_id)
            .await
            .map_err(retry)?
            .ok_or_else(|| permanent("no issuance point"))?;
        let ruc = Ruc::parse(&company.ruc).map_err(|_| permanent("an unreadable company RUC"))?;
        let issuer = Issuer::from_config(&ruc, &company.profile, &branch, &point, &sifen);
        let certificate = self
            .config
            .certificate(tenant, sifen.certificate_id)
            .await
            .map_err(retry)?
            .ok_or_else(|| permanent("no certificate"))?;
        let pem = self
            .vault
            .get(tenant, certificate.secret_id)
            .await
            .map_err(|e| unopened(state.document_id, "the certificate's private key", e))?;
        let csc = self
            .vault
            .get(tenant, sifen.csc_secret_id)
            .await
            .map_err(|e| unopened(state.document_id, "the CSC", e))?;
        let csc = String::from_utf8(csc.to_vec()).map_err(|_| permanent("an unreadable CSC"))?;
        // The destination policy when sending, not only when the channel was saved: the
        // endpoint must lead to public (or allow-listed) addresses now, and the client is pinned
        // to the address checked. A refusal is retried (it may be DNS, and it is logged with the
        // reason); only demo tenants of a service without public signup connect as they resolve.
        let pinned = self
            .destinations
            .check(tenant, &channel.endpoint)
            .await
            .map_err(|e| retry(format!("the sifen channel's endpoint: {e}")))?;
        let key = self.signer.key(&pem).map_err(|e| {
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

/// `sifen.prepare`.
#[derive(Debug)]
pub struct Prepare(Pipeline);

/// `sifen.submit`.
#[derive(Debug)]
pub struct Submit(Pipeline);

/// Builds and signs (CPU work: run off the runtime).
fn build_and_sign(
    state: &DocumentState,
    setup: &Setup,
    series: String,
    number: u64,
    now: DateTime<Utc>,
) -> Result<Signed, JobFailure> {
    let signing = SigningSetup {
        issuer: &setup.issuer,
        key: &*setup.key,
        csc_id: &setup.csc_id,
        csc: &setup.csc,
        environment: setup.environment,
    };
    build::build_and_sign(&state.document, &signing, series, number, now)
        .map_err(|what| JobFailure::Permanent(format!("document {}: {what}", state.document_id)))
}

#[async_trait]
impl JobHandler for Prepare {
    fn kind(&self) -> &'static str {
        SIFEN_PREPARE
    }

    fn backoff(&self) -> Backoff {
        backoff_from_ms(200)
    }

    async fn run(&self, job: &Job) -> Result<(), JobFailure> {
        match self.prepare(job).await {
            // Built, signed and sent, or to be tried again.
            Ok(()) => Ok(()),
            Err(JobFailure::Permanent(reason)) => self.0.refuse(job, reason).await,
            Err(other) => Err(other),
        }
    }
}

impl Pipeline {
    /// A queued document whose preparation failed for good (its DE cannot be built or signed, its
    /// channel's setup is unusable) ends `failed_terminal` with the reason, instead of staying
    /// queued with a dead job: `DocumentIssuanceRefused` (`document_build_failed`), which raises
    /// `document.failed`. A document already past queuing keeps its state (the failure is then
    /// the job's alone).
    async fn refuse(&self, job: &Job, reason: String) -> Result<(), JobFailure> {
        let id = document_id(job)?;
        tracing::warn!(document = %id, %reason, "sifen: the document cannot be prepared");
        // The document's own error need not name it.
        let message = reason
            .strip_prefix(&format!("document {id}: "))
            .unwrap_or(&reason)
            .to_owned();
        let command = DocumentCommand::RefuseIssuance {
            code: "document_build_failed".to_owned(),
            message,
            field: Some("sifen".to_owned()),
            at: self.clock.now(),
        };
        match self.run(job.tenant_id, id, vec![command]).await {
            Ok(()) => Ok(()),
            Err(DocumentsError::Conflict) => Err(retry("the document changed meanwhile")),
            Err(DocumentsError::Refused(_) | DocumentsError::NotFound) => Err(JobFailure::Permanent(reason)),
            Err(e) => Err(retry(e)),
        }
    }
}

impl Prepare {
    async fn prepare(&self, job: &Job) -> Result<(), JobFailure> {
        let p = &self.0;
        let mut ticket = p.gate.start();
        // Numbered only by the turn's append, which expects the version loaded: a cached state
        // that would be numbered needs no read.
        let (tenant, id, state) = p
            .document_to_act(job, |s| {
                matches!(s.status, DocumentStatus::Queued | DocumentStatus::Transforming)
            })
            .await?;
        match state.status {
            DocumentStatus::Queued | DocumentStatus::Transforming => {}
            // Its first attempt is on record, but this job did not see it through (a crash, a
            // failure while sending or recording): it may have left, so reconcile first.
            DocumentStatus::Submitting => {
                ticket.arrive();
                return p.resend(tenant, id, state).await;
            }
            // Decided, retrying on its schedule, or cancelled meanwhile.
            _ => return Ok(()),
        }
        let setup = Arc::new(p.setup(tenant, &state).await?);
        setup.check_certificate(id, p.clock.now())?;
        let doc_type = state
            .document
            .doc_type
            .sifen_code()
            .ok_or_else(|| JobFailure::Permanent(format!("document {id} is not a SIFEN type")))?;
        let series = series_key(
            state.routing.company_id,
            &setup.issuer.timbrado,
            &setup.issuer.establishment,
            &setup.issuer.point,
            doc_type,
        );
        let turns = p.series_turns(&format!("{tenant}/{series}"));
        let preparing = Preparing {
            tenant,
            id,
            state,
            setup,
            span: tracing::Span::current(),
        };
        ticket.arrive();
        turns
            .submit(preparing, |batch| {
                let (p, series) = (p.clone(), series.clone());
                tokio::spawn(async move { p.prepare_turn(&series, batch).await })
            })
            .await
            .unwrap_or_else(|| Err(retry("the numbering turn ended without an answer")))
    }
}

/// Documents of one series numbered in one turn, at most (and a lot's most).
const MAX_PREPARE_TURN: usize = 50;

/// `sifen.prepare` jobs of one series waiting for their turn.
type SeriesTurns = Combiner<Preparing, Result<(), JobFailure>>;

/// A queued document waiting for its number.
struct Preparing {
    tenant: TenantId,
    id: Uuid,
    state: DocumentState,
    setup: Arc<Setup>,
    /// The job's span: the document's commands run in it, so its jobs join the trace.
    span: tracing::Span,
}

/// The `sifen.prepare` jobs of this process that have started, and those that have arrived at
/// their series' turn (or ended before). A turn's leader waits, at most the lot window, until
/// every job started before it began gathering has arrived: documents claimed together are
/// numbered together, and so sent together (one lot). At low load no one is on the way and the
/// turn starts at once; under load the jobs are already queued.
#[derive(Default)]
struct TurnGate {
    started: AtomicU64,
    arrived: AtomicU64,
    arrivals: tokio::sync::Notify,
}

/// A started job; it arrives when told or when dropped.
struct Ticket<'a>(Option<&'a TurnGate>);

impl Ticket<'_> {
    fn arrive(&mut self) {
        if let Some(gate) = self.0.take() {
            gate.arrived.fetch_add(1, Ordering::AcqRel);
            gate.arrivals.notify_waiters();
        }
    }
}

impl Drop for Ticket<'_> {
    fn drop(&mut self) {
        self.arrive();
    }
}

impl TurnGate {
    fn start(&self) -> Ticket<'_> {
        self.started.fetch_add(1, Ordering::AcqRel);
        Ticket(Some(self))
    }

    /// Waits until the jobs started so far have arrived, at most `window`.
    async fn gather(&self, window: std::time::Duration) {
        if window.is_zero() {
            return;
        }
        let started = self.started.load(Ordering::Acquire);
        let deadline = tokio::time::Instant::now() + window;
        loop {
            let arrival = self.arrivals.notified();
            tokio::pin!(arrival);
            arrival.as_mut().enable();
            if self.arrived.load(Ordering::Acquire) >= started {
                return;
            }
            if tokio::time::timeout_at(deadline, arrival).await.is_err() {
                return;
            }
        }
    }
}

/// A document of a turn with its first attempt on record: the turn sends it.
struct Sending {
    /// Its place in the turn.
    index: usize,
    /// Its signed XML.
    xml: Arc<str>,
    /// Its state after the turn's append.
    state: DocumentState,
    /// Its job's answer.
    reply: oneshot::Sender<Result<(), JobFailure>>,
}

impl Pipeline {
    /// One turn of a series: draws the next number once, gives the queued documents consecutive
    /// numbers in queue order, builds and signs them on every core, stores the signed bytes, and
    /// records each document's transformed → artifact → signed → first attempt in appends queued
    /// together and in number order (one transaction, usually). A document that fails leaves
    /// its number unused: the ones after it in the turn find their number not next and draw
    /// again (a retry). The recorded ones are then sent (`send_turn`) while the series' next
    /// turn may begin.
    async fn prepare_turn(&self, series: &str, batch: Vec<Waiting<Preparing, Result<(), JobFailure>>>) {
        let (preparing, replies): (Vec<Preparing>, Vec<_>) =
            batch.into_iter().map(|w| (w.request, w.reply)).unzip();
        let Some(tenant) = preparing.first().map(|p| p.tenant) else {
            return;
        };
        metrics::histogram!("kuatia_sifen_numbering_turn_documents").record(preparing.len() as f64);
        let preparing = Arc::new(preparing);
        let results = match self.series.next_number(tenant, series).await {
            Ok(first) => {
                self.number_and_record(tenant, series, first.unwrap_or(1), &preparing)
                    .await
            }
            Err(e) => preparing.iter().map(|_| Err(retry(&e))).collect(),
        };
        let mut sending = Vec::new();
        for (index, (reply, result)) in replies.into_iter().zip(results).enumerate() {
            match result {
                Ok((xml, state)) => sending.push(Sending {
                    index,
                    xml,
                    state,
                    reply,
                }),
                Err(e) => {
                    let _ = reply.send(Err(e));
                }
            }
        }
        if !sending.is_empty() {
            let p = self.clone();
            tokio::spawn(async move { p.send_turn(tenant, &preparing, sending).await });
        }
    }

    /// Numbers, signs, stores and records a turn's documents; each recorded one comes back with
    /// its signed XML and its state after the append.
    async fn number_and_record(
        &self,
        tenant: TenantId,
        series: &str,
        first: u64,
        preparing: &Arc<Vec<Preparing>>,
    ) -> Vec<Result<(Arc<str>, DocumentState), JobFailure>> {
        let now = self.clock.now();
        let signed = sign_turn(preparing, series, first, now).await;
        // The signed bytes are stored (concurrently) before anything refers to them.
        // So is the normalized payload (the canonical document as kept, defaults applied).
        let puts: Vec<_> = signed
            .into_iter()
            .zip(preparing.iter())
            .map(|(s, doc)| {
                s.and_then(|signed| {
                    let (artifacts, xml) = (self.artifacts.clone(), Arc::<str>::from(signed.xml.as_str()));
                    let stored = xml.clone();
                    let payload = normalized_payload(&doc.state)?;
                    let put = tokio::spawn(async move {
                        let xml_sha = artifacts.put(stored.as_bytes()).await?;
                        let payload_sha = artifacts.put(&payload).await?;
                        Ok::<_, crate::artifacts::ArtifactError>((
                            xml_sha,
                            (payload_sha, payload.len() as u64),
                        ))
                    });
                    Ok((signed, xml, put))
                })
            })
            .collect();
        let mut results: Vec<Option<Result<Arc<str>, JobFailure>>> = Vec::with_capacity(preparing.len());
        let (mut work, mut numbers) = (Vec::new(), Vec::new());
        for (i, (doc, put)) in preparing.iter().zip(puts).enumerate() {
            let stored = match put {
                Ok((signed, xml, put)) => match put.await.map_err(retry).and_then(|r| r.map_err(retry)) {
                    Ok(sha) => Ok((signed, xml, sha)),
                    Err(e) => Err(e),
                },
                Err(e) => Err(e),
            };
            let (signed, xml, (sha, payload)) = match stored {
                Ok(stored) => stored,
                Err(e) => {
                    results.push(Some(Err(e)));
                    continue;
                }
            };
            results.push(Some(Ok(xml)));
            numbers.push(first + i as u64);
            work.push((
                doc.id,
                prepared_commands(&doc.state, signed, sha, payload, now),
                doc.span.clone(),
            ));
        }
        let mut recorded = documents::commands_each(&self.store, tenant, work, metadata(ACTOR))
            .await
            .into_iter()
            .zip(numbers);
        results
            .into_iter()
            .map(|r| match r {
                Some(Ok(xml)) => match recorded.next() {
                    Some((Ok(Some(state)), _)) => Ok((xml, state)),
                    Some((Ok(None), _)) => Err(retry("the document is gone")),
                    // Another instance drew this number first, an earlier document of the turn
                    // failed, or the document changed: start over.
                    Some((Err(DocumentsError::Store(StoreError::Projection { message, .. })), number))
                        if message.contains(NOT_NEXT) =>
                    {
                        Err(retry(format!("number {number} was taken; drawing again")))
                    }
                    Some((Err(DocumentsError::Conflict), _)) => Err(retry("the document changed meanwhile")),
                    Some((Err(e), _)) => Err(retry(e)),
                    None => Err(retry("no answer from the append")),
                },
                Some(Err(e)) => Err(e),
                None => Err(retry("not prepared")),
            })
            .collect()
    }

    /// Sends a turn's recorded first attempts — as lots when there are several and lots are on,
    /// otherwise each alone — records SIFEN's answers together, and answers each document's job.
    /// A turn is one series (one issuer, one type); a configuration change between its jobs may
    /// still give its documents different endpoints or certificates: one group each.
    async fn send_turn(&self, tenant: TenantId, preparing: &[Preparing], sending: Vec<Sending>) {
        let mut groups: Vec<(lots::LotKey, Vec<Sending>)> = Vec::new();
        for s in sending {
            let key = lots::LotKey::of(tenant, &preparing[s.index].setup, &s.state);
            match groups.iter_mut().find(|(k, _)| *k == key) {
                Some((_, group)) => group.push(s),
                None => groups.push((key, vec![s])),
            }
        }
        for (key, group) in groups {
            let setup = &preparing[group[0].index].setup;
            let results = match self.client(setup) {
                Ok(client) => self.send_group(tenant, preparing, &key, &client, &group).await,
                Err(e) => group.iter().map(|_| Err(e.clone())).collect(),
            };
            for (s, result) in group.into_iter().zip(results) {
                let _ = s.reply.send(result);
            }
        }
    }

    /// Sends one group of a turn and records what SIFEN answered for each document.
    async fn send_group(
        &self,
        tenant: TenantId,
        preparing: &[Preparing],
        key: &lots::LotKey,
        client: &Arc<dyn SifenGateway>,
        group: &[Sending],
    ) -> Vec<Result<(), JobFailure>> {
        let now = self.clock.now();
        let heard: Vec<Heard> = if self.lots_on() && group.len() > 1 {
            let mut heard = Vec::with_capacity(group.len());
            for lot in lots::split(group, |s| s.xml.len()) {
                let documents: Vec<(Uuid, &str)> =
                    lot.iter().map(|s| (preparing[s.index].id, &*s.xml)).collect();
                // The lot's request continues its first document's trace.
                let sent = self
                    .send_lot(key, &**client, &documents)
                    .instrument(preparing[lot[0].index].span.clone())
                    .await;
                heard.extend(lot.iter().map(|_| sent.clone()));
            }
            heard
        } else {
            let d_id = u64::try_from(now.timestamp_millis()).unwrap_or(1);
            let sends: Vec<_> = group
                .iter()
                .enumerate()
                .map(|(i, s)| {
                    let (client, clock, xml) = (client.clone(), self.clock.clone(), s.xml.clone());
                    let cdc = s.state.cdc.clone().unwrap_or_default();
                    let span = preparing[s.index].span.clone();
                    tokio::spawn(
                        async move { send_alone(&*client, &*clock, d_id + i as u64, &cdc, &xml).await }
                            .instrument(span),
                    )
                })
                .collect();
            let mut heard = Vec::with_capacity(sends.len());
            for send in sends {
                heard.push(match send.await {
                    Ok((outcome, raw)) => Heard::Answer(outcome, raw.map(Arc::from)),
                    Err(e) => Heard::Answer(Outcome::Failed(format!("outcome unknown: {e}")), None),
                });
            }
            heard
        };
        // SIFEN's raw answers, each stored once (a lot's is every document's).
        let mut stored: Vec<(Arc<str>, Result<Response, JobFailure>)> = Vec::new();
        for h in &heard {
            if let Some(raw) = h.raw()
                && !stored.iter().any(|(r, _)| Arc::ptr_eq(r, raw))
            {
                stored.push((raw.clone(), self.store_response(raw).await));
            }
        }
        let mut results: Vec<Option<Result<(), JobFailure>>> = Vec::with_capacity(group.len());
        let mut work = Vec::new();
        for (s, h) in group.iter().zip(heard) {
            let response = match h.raw() {
                Some(raw) => match stored.iter().find(|(r, _)| Arc::ptr_eq(r, raw)) {
                    Some((_, Ok(response))) => Some(response),
                    Some((_, Err(e))) => {
                        results.push(Some(Err(e.clone())));
                        continue;
                    }
                    None => None,
                },
                None => None,
            };
            let doc = &preparing[s.index];
            let commands = match h {
                Heard::InLot { number, .. } => {
                    let mut commands: Vec<DocumentCommand> = response
                        .map(|r| response_artifact(&s.state, r, now))
                        .into_iter()
                        .collect();
                    commands.push(DocumentCommand::RecordSubmitted {
                        attempt: s.state.attempts,
                        lot_id: Some(number),
                        at: now,
                    });
                    commands
                }
                Heard::Answer(outcome, _) => outcome_commands(self, &s.state, outcome, response),
            };
            results.push(None);
            work.push((doc.id, commands, doc.span.clone()));
        }
        let mut recorded = documents::commands_each(&self.store, tenant, work, metadata(ACTOR))
            .await
            .into_iter();
        results
            .into_iter()
            .map(|r| {
                r.unwrap_or_else(|| match recorded.next() {
                    Some(Ok(_)) => Ok(()),
                    // The job runs again and reconciles before anything is sent again.
                    Some(Err(e)) => Err(retry(format!("recording SIFEN's answer: {e}"))),
                    None => Err(retry("no answer from the append")),
                })
            })
            .collect()
    }

    fn lots_on(&self) -> bool {
        !self.lots.window.is_zero() && self.jobs.is_some()
    }
}

/// What SIFEN answered to a first attempt sent by its turn.
#[derive(Clone)]
enum Heard {
    /// In lot `number` (0300); its raw answer.
    InLot { number: String, raw: Arc<str> },
    /// A verdict or an operational failure, with SIFEN's raw answer when there was one.
    Answer(Outcome, Option<Arc<str>>),
}

impl Heard {
    fn raw(&self) -> Option<&Arc<str>> {
        match self {
            Heard::InLot { raw, .. } => Some(raw),
            Heard::Answer(_, raw) => raw.as_ref(),
        }
    }
}

/// Builds and signs a turn's documents, numbered `first`, `first + 1`, … in order, spread over
/// the cores (signing is CPU work: off the runtime).
async fn sign_turn(
    preparing: &Arc<Vec<Preparing>>,
    series: &str,
    first: u64,
    now: DateTime<Utc>,
) -> Vec<Result<Signed, JobFailure>> {
    let cores = std::thread::available_parallelism().map_or(1, std::num::NonZero::get);
    let lanes = cores.min(preparing.len()).max(1);
    let tasks: Vec<_> = (0..lanes)
        .map(|lane| {
            let (preparing, series) = (preparing.clone(), series.to_owned());
            tokio::task::spawn_blocking(move || {
                (lane..preparing.len())
                    .step_by(lanes)
                    .map(|i| {
                        let doc = &preparing[i];
                        let _span = doc.span.enter();
                        (
                            i,
                            build_and_sign(&doc.state, &doc.setup, series.clone(), first + i as u64, now),
                        )
                    })
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    let mut signed: Vec<Option<Result<Signed, JobFailure>>> = (0..preparing.len()).map(|_| None).collect();
    for task in tasks {
        match task.await {
            Ok(lane) => {
                for (i, result) in lane {
                    signed[i] = Some(result);
                }
            }
            Err(e) => tracing::error!(error = %e, "a signing lane failed"),
        }
    }
    signed
        .into_iter()
        .map(|s| s.unwrap_or_else(|| Err(retry("the signing task failed"))))
        .collect()
}

/// The normalized payload artifact's bytes: the canonical document as kept (defaults applied),
/// JSON.
pub fn normalized_payload(state: &DocumentState) -> Result<Vec<u8>, JobFailure> {
    serde_json::to_vec(&state.document)
        .map_err(|e| JobFailure::Permanent(format!("the canonical document: {e}")))
}

/// Records the normalized payload artifact, stored before under `sha256`; once per document.
pub fn normalized_payload_artifact(
    state: &DocumentState,
    sha256: String,
    size: u64,
    now: DateTime<Utc>,
) -> DocumentCommand {
    DocumentCommand::RecordArtifact {
        artifact_id: Uuid::now_v7(),
        kind: ArtifactKind::NormalizedPayload,
        content_type: "application/json".into(),
        sha256,
        size,
        version: state.next_artifact_version(ArtifactKind::NormalizedPayload),
        at: now,
    }
}

/// What a signed document records: (transformed →) the normalized payload → signed XML
/// artifact → signed, one append.
fn prepared_commands(
    state: &DocumentState,
    signed: Signed,
    sha256: String,
    (payload_sha256, payload_size): (String, u64),
    now: DateTime<Utc>,
) -> Vec<DocumentCommand> {
    let artifact_id = Uuid::now_v7();
    let mut commands = Vec::new();
    if state.status == DocumentStatus::Queued {
        commands.push(DocumentCommand::StartTransform { at: now });
    }
    commands.push(DocumentCommand::RecordTransformed {
        series: signed.series,
        number: signed.number,
        cdc: signed.cdc,
        security_code: signed.security_code,
        xml_sha256: signed.unsigned_sha256,
        at: now,
    });
    if state.latest_artifact(ArtifactKind::NormalizedPayload).is_none() {
        commands.push(normalized_payload_artifact(
            state,
            payload_sha256,
            payload_size,
            now,
        ));
    }
    commands.extend([
        DocumentCommand::RecordArtifact {
            artifact_id,
            kind: ArtifactKind::SignedXml,
            content_type: "application/xml".into(),
            sha256,
            size: signed.xml.len() as u64,
            version: state.next_artifact_version(ArtifactKind::SignedXml),
            at: now,
        },
        DocumentCommand::RecordSigned {
            signed_xml_artifact_id: artifact_id,
            signed_at: signed.signed_at,
            at: now,
        },
        // The first attempt is on record before anything can leave: the turn sends it after
        // this append commits.
        DocumentCommand::RecordSubmitted {
            attempt: 1,
            lot_id: None,
            at: now,
        },
    ]);
    commands
}

/// SIFEN's answer to one attempt, as the document records it.
#[derive(Clone)]
enum Outcome {
    Accepted {
        code: String,
        message: String,
        protocol: Option<String>,
    },
    Rejected {
        code: String,
        message: String,
    },
    Failed(String),
}

#[async_trait]
impl JobHandler for Submit {
    fn kind(&self) -> &'static str {
        SIFEN_SUBMIT
    }

    // Only for failures around SIFEN's answer (the store, a lost race): SIFEN's own failures
    // are recorded and follow the retry schedule instead.
    fn backoff(&self) -> Backoff {
        backoff_from_ms(500)
    }

    async fn run(&self, job: &Job) -> Result<(), JobFailure> {
        let p = &self.0;
        let (tenant, id, state) = p.document(job).await?;
        let now = p.clock.now();
        match state.status {
            DocumentStatus::Submitting => p.resend(tenant, id, state).await,
            DocumentStatus::Retrying => {
                let due = state.retry_requested || state.next_attempt_at.is_none_or(|t| t <= now);
                if !due {
                    // An early job (a manual retry already ran the attempt); the scheduled one
                    // comes at its time.
                    return Ok(());
                }
                match p
                    .run(tenant, id, vec![DocumentCommand::ResumeSubmission { at: now }])
                    .await
                {
                    Ok(()) | Err(DocumentsError::Conflict) => {}
                    Err(e) => return Err(retry(e)),
                }
                match p.load(tenant, id).await? {
                    Some(s) if s.status == DocumentStatus::Submitting => p.resend(tenant, id, s).await,
                    _ => Ok(()),
                }
            }
            // Decided already, or not ours to send.
            _ => Ok(()),
        }
    }
}

impl Pipeline {
    /// Sends a `submitting` document again, alone (siRecepDE). Any earlier attempt may have been
    /// approved unheard, or sit in a lot SIFEN is still processing (GMP items 2, 3 and 5): SIFEN
    /// is asked for the CDC first, and the answer recorded instead of sending when it has one.
    /// Otherwise the next attempt goes on record before the stored signed bytes leave.
    async fn resend(&self, tenant: TenantId, id: Uuid, mut state: DocumentState) -> Result<(), JobFailure> {
        let now = self.clock.now();
        let cdc = state
            .cdc
            .clone()
            .ok_or_else(|| JobFailure::Permanent(format!("document {id} has no CDC")))?;
        let setup = self.setup(tenant, &state).await?;
        let client = self.client(&setup)?;
        let d_id = u64::try_from(now.timestamp_millis()).unwrap_or(1);
        if state.attempts > 0
            && let Some((outcome, raw)) = reconcile(&*client, &*self.clock, d_id, &cdc).await
        {
            return record(self, tenant, id, &state, outcome, raw).await;
        }
        let xml = self.signed_xml(id, &state).await?;
        let attempt = state.attempts + 1;
        match self
            .run(
                tenant,
                id,
                vec![DocumentCommand::RecordSubmitted {
                    attempt,
                    lot_id: None,
                    at: now,
                }],
            )
            .await
        {
            Ok(()) => {}
            Err(DocumentsError::Conflict) => return Err(retry("the document changed meanwhile")),
            Err(e) => return Err(retry(e)),
        }
        state.attempts = attempt;
        let (outcome, raw) = send_alone(&*client, &*self.clock, d_id + 2, &cdc, &xml).await;
        record(self, tenant, id, &state, outcome, raw).await
    }

    /// The document's signed XML, from the artifact store.
    async fn signed_xml(&self, id: Uuid, state: &DocumentState) -> Result<String, JobFailure> {
        let artifact_id = state
            .signed_xml_artifact_id
            .ok_or_else(|| JobFailure::Permanent(format!("document {id} has no signed XML")))?;
        let artifact = state
            .artifact(artifact_id)
            .ok_or_else(|| JobFailure::Permanent(format!("document {id}: signed XML not recorded")))?;
        let bytes = self
            .artifacts
            .get(&artifact.sha256)
            .await
            .map_err(retry)?
            .ok_or_else(|| {
                retry(format!(
                    "the signed XML {} is not in the artifact store",
                    artifact.sha256
                ))
            })?;
        String::from_utf8(bytes).map_err(|_| JobFailure::Permanent("the signed XML is not UTF-8".into()))
    }
}

/// Sends one signed DE alone (siRecepDE): SIFEN's verdict, or the operational failure.
async fn send_alone(
    client: &dyn SifenGateway,
    clock: &dyn Clock,
    d_id: u64,
    cdc: &str,
    xml: &str,
) -> (Outcome, Option<String>) {
    match client.send_de(d_id, xml).await {
        Ok(answer) => {
            let r = &answer.result;
            let code = r.code().unwrap_or_default().to_owned();
            let message = r.results.first().map(|r| r.message.clone()).unwrap_or_default();
            let heard = Verdict {
                meaning: r.meaning(),
                approved_before: r.is_duplicate(),
                code,
                message,
                authorization: r.authorization.clone(),
            };
            let outcome = verdict(client, clock, cdc, heard).await;
            (outcome, Some(answer.raw))
        }
        Err(e) => (Outcome::Failed(transport_failure(&e)), None),
    }
}

/// An exchange that failed on the wire, as the reason of an operational failure: the answers
/// table's transport outcome (`not sent (refused): …`), which the document detail explains.
fn transport_failure(e: &SoapError) -> String {
    match e.transport() {
        Some(t) => t.reason(&e.to_string()),
        None => format!("not sent: {e}"),
    }
}

/// What SIFEN answered for one DE, as [`verdict`] reads it.
struct Verdict {
    /// The answers table's reading of `dEstRes` and the code.
    meaning: Meaning,
    /// 1001/1002: an approval held from before.
    approved_before: bool,
    /// `dCodRes`.
    code: String,
    /// `dMsgRes`.
    message: String,
    /// `dProtAut`.
    authorization: Option<String>,
}

/// SIFEN's verdict on one DE (siRecepDE's answer, or its entry in a finished lot), as the
/// answers table means it (`meaning`, from `dEstRes` and the code): approved, rejected, or an
/// operational failure. An approval held from before (`approved_before`: 1001/1002, a duplicate
/// of an approval whose answer we never heard) is confirmed with siConsDE, whose authorisation
/// is taken; until siConsDE answers "approved", it is an operational failure, never a rejection.
async fn verdict(client: &dyn SifenGateway, clock: &dyn Clock, cdc: &str, heard: Verdict) -> Outcome {
    let Verdict {
        meaning,
        approved_before,
        code,
        message,
        authorization,
    } = heard;
    match meaning {
        Meaning::Approved if approved_before => {
            let d_id = u64::try_from(clock.now().timestamp_millis()).unwrap_or(1);
            match asking(|| client.query_de(d_id, cdc), |a| a.result.meaning()).await {
                Ok(found) if found.result.meaning() == Meaning::Approved => Outcome::Accepted {
                    code: found.result.code.clone(),
                    message: found.result.message.clone(),
                    protocol: found
                        .result
                        .container
                        .as_ref()
                        .and_then(|c| c.authorization.clone()),
                },
                Ok(other) => Outcome::Failed(format!(
                    "SIFEN {code}: {message} (an approval from before); siConsDE answered {} {}, so it is \
                     asked again later",
                    other.result.code, other.result.message
                )),
                Err(e) => Outcome::Failed(format!(
                    "SIFEN {code}: {message} (an approval from before); asking siConsDE for it: {}",
                    transport_failure(&e)
                )),
            }
        }
        Meaning::Approved => Outcome::Accepted {
            code,
            message,
            protocol: authorization,
        },
        Meaning::Rejected => Outcome::Rejected { code, message },
        Meaning::Absent | Meaning::Processing | Meaning::Operational => {
            Outcome::Failed(format!("SIFEN {code}: {message}"))
        }
    }
}

/// How many times a reconciliation question is asked in one attempt before the attempt counts as
/// an operational failure.
const RECONCILE_TRIES: u32 = 3;

/// Asks a reconciliation question (siConsDE, siResultLoteDE: reads, safe to repeat) again at once
/// while its answer settles nothing — no answer, or one the answers table reads as an
/// operational failure (`meaning`: 0161, an HTTP 500, a code it does not list) — up to
/// [`RECONCILE_TRIES`] times, 200 ms apart, then 400 ms; the last answer is returned either way.
/// A retry needs every question answered before it may resend, and each unanswered one would
/// otherwise be recorded as an operational failure that moves the retry schedule a step further
/// (30 s, 2 min, 10 min, … 2 h): with SIFEN failing half its answers, a document would wait hours.
async fn asking<T, F, Fut>(mut ask: F, meaning: impl Fn(&T) -> Meaning) -> Result<T, SoapError>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, SoapError>>,
{
    let mut tries = 0;
    loop {
        tries += 1;
        let answer = ask().await;
        let settled = answer.as_ref().is_ok_and(|a| meaning(a) != Meaning::Operational);
        if settled || tries >= RECONCILE_TRIES {
            return answer;
        }
        tokio::time::sleep(std::time::Duration::from_millis(200 * u64::from(tries))).await;
    }
}

/// Before any attempt after the first: what SIFEN already holds for the CDC, read with the
/// answers table. `None` only when SIFEN said it holds no approval of the CDC (siConsDE 0420,
/// known absent) **and** that no lot holding it is processing (siResultLoteDE by CDC: 0360,
/// 0363, 0364): then the CDC may be sent. Otherwise `Some` outcome is recorded instead of
/// sending: approved (0422), the CDC's verdict in a finished lot, or an operational failure —
/// a lot still processing, or any answer that settles nothing (no answer, 0161/0162, a 5xx, a
/// body we cannot read, a code the table does not list), asked again on the retry schedule.
async fn reconcile(
    client: &dyn SifenGateway,
    clock: &dyn Clock,
    d_id: u64,
    cdc: &str,
) -> Option<(Outcome, Option<String>)> {
    let answer = match asking(|| client.query_de(d_id, cdc), |a| a.result.meaning()).await {
        Ok(answer) => answer,
        Err(e) => {
            let reason = format!(
                "asking SIFEN for the CDC before sending it again: {}",
                transport_failure(&e)
            );
            return Some((Outcome::Failed(reason), None));
        }
    };
    let r = &answer.result;
    match r.meaning() {
        Meaning::Approved => {
            let outcome = Outcome::Accepted {
                code: r.code.clone(),
                message: r.message.clone(),
                protocol: r.container.as_ref().and_then(|c| c.authorization.clone()),
            };
            return Some((outcome, Some(answer.raw)));
        }
        Meaning::Absent => {}
        Meaning::Rejected | Meaning::Processing | Meaning::Operational => {
            let reason = format!(
                "SIFEN {}: {} (asked for the CDC before sending it again; nothing is sent until SIFEN \
                 says whether it holds it)",
                r.code, r.message
            );
            return Some((Outcome::Failed(reason), Some(answer.raw)));
        }
    }
    // Known absent: a lot holding it may still be processing, or have decided it (GMP item 3:
    // the lot is found by one of its CDCs).
    let query = LotQuery::Cdc(cdc.to_owned());
    let answer = match asking(|| client.lot_result(d_id + 1, &query), |a| a.result.meaning()).await {
        Ok(answer) => answer,
        Err(e) => {
            let reason = format!(
                "asking SIFEN for the lot of the CDC before sending it again: {}",
                transport_failure(&e)
            );
            return Some((Outcome::Failed(reason), None));
        }
    };
    let r = &answer.result;
    match r.meaning() {
        // No lot holds it, its lot was refused whole, or is older than 48 h: send.
        Meaning::Absent => None,
        Meaning::Approved => {
            let outcome = match r.documents.iter().find(|d| d.cdc == cdc) {
                Some(found) => lots::lot_outcome(client, clock, cdc, found).await,
                None => Outcome::Failed(format!(
                    "SIFEN {}: {} (the lot holding the CDC does not list it; asked again later)",
                    r.code, r.message
                )),
            };
            Some((outcome, Some(answer.raw)))
        }
        Meaning::Processing => Some((
            Outcome::Failed(format!(
                "SIFEN {}: {} (SIFEN is still processing a lot holding this CDC)",
                r.code, r.message
            )),
            Some(answer.raw),
        )),
        Meaning::Rejected | Meaning::Operational => Some((
            Outcome::Failed(format!(
                "SIFEN {}: {} (asked for the lot of the CDC before sending it again; nothing is sent \
                 until SIFEN answers)",
                r.code, r.message
            )),
            Some(answer.raw),
        )),
    }
}

/// SIFEN's raw answer, stored in the artifact store.
struct Response {
    sha256: String,
    size: u64,
}

impl Pipeline {
    /// Stores SIFEN's raw answer (once, whatever number of documents it answers).
    async fn store_response(&self, raw: &str) -> Result<Response, JobFailure> {
        let sha256 = self.artifacts.put(raw.as_bytes()).await.map_err(retry)?;
        Ok(Response {
            sha256,
            size: raw.len() as u64,
        })
    }
}

/// Records a stored answer as the document's next `channel_response`.
fn response_artifact(state: &DocumentState, response: &Response, at: DateTime<Utc>) -> DocumentCommand {
    DocumentCommand::RecordArtifact {
        artifact_id: Uuid::now_v7(),
        kind: ArtifactKind::ChannelResponse,
        content_type: "application/xml".into(),
        sha256: response.sha256.clone(),
        size: response.size,
        version: state.next_artifact_version(ArtifactKind::ChannelResponse),
        at,
    }
}

/// Records an attempt's outcome (and SIFEN's raw answer as a `channel_response` artifact).
async fn record(
    p: &Pipeline,
    tenant: TenantId,
    id: Uuid,
    state: &DocumentState,
    outcome: Outcome,
    raw: Option<String>,
) -> Result<(), JobFailure> {
    let response = match raw {
        Some(raw) => Some(p.store_response(&raw).await?),
        None => None,
    };
    let commands = outcome_commands(p, state, outcome, response.as_ref());
    match p.run(tenant, id, commands).await {
        Ok(()) => Ok(()),
        Err(DocumentsError::Conflict) => Err(retry("the document changed meanwhile")),
        Err(e) => Err(retry(e)),
    }
}

/// What recording an attempt's outcome appends: SIFEN's raw answer (stored already) as a
/// `channel_response` artifact, then the verdict, or the operational failure with the next
/// attempt's time.
fn outcome_commands(
    p: &Pipeline,
    state: &DocumentState,
    outcome: Outcome,
    response: Option<&Response>,
) -> Vec<DocumentCommand> {
    let now = p.clock.now();
    let mut commands = Vec::new();
    if let Some(response) = response {
        commands.push(response_artifact(state, response, now));
    }
    commands.push(match outcome {
        Outcome::Accepted {
            code,
            message,
            protocol,
        } => DocumentCommand::RecordAccepted {
            code,
            message,
            protocol,
            approved_at: now,
            at: now,
        },
        Outcome::Rejected { code, message } => DocumentCommand::RecordRejected {
            code,
            message,
            at: now,
        },
        Outcome::Failed(reason) => {
            let horizon = state.signed_at.map_or(now, |s| s + SUBMISSION_HORIZON);
            if now >= horizon {
                DocumentCommand::GiveUp { reason, at: now }
            } else {
                let delay = retry_delay(state.failures + 1);
                let scaled =
                    TimeDelta::milliseconds((delay.num_milliseconds() as f64 * p.retry_scale) as i64);
                let next = (now + scaled).min(horizon);
                DocumentCommand::RecordOperationalFailure {
                    reason,
                    next_attempt_at: next,
                    at: now,
                }
            }
        }
    });
    commands
}

/// `sifen.event`.
#[derive(Debug)]
pub struct SifenEvent(Pipeline);

/// Builds and signs the pending event of a document (CPU work: run off the runtime).
fn build_and_sign_event(
    state: &DocumentState,
    kind: FiscalEventKind,
    reason: &str,
    key: &dyn SigningKey,
    event_id: u64,
    now: DateTime<Utc>,
) -> Result<String, JobFailure> {
    let permanent = |what: String| JobFailure::Permanent(format!("document {}: {what}", state.document_id));
    let event_kind = match kind {
        FiscalEventKind::Cancellation => EventKind::Cancellation {
            cdc: state
                .cdc
                .as_deref()
                .ok_or_else(|| permanent("a cancelación needs a CDC".into()))?,
        },
        FiscalEventKind::Inutilization => {
            let number = state
                .number
                .as_ref()
                .ok_or_else(|| permanent("an inutilización needs a number".into()))?;
            let n: u32 = number
                .number
                .parse()
                .map_err(|_| permanent(format!("the number {:?} is not numeric", number.number)))?;
            EventKind::Inutilization {
                timbrado: &number.timbrado,
                establishment: &number.establishment,
                point: &number.point,
                from: n,
                to: n,
                doc_type: state
                    .doc_type()
                    .sifen_code()
                    .ok_or_else(|| permanent("not a SIFEN document type".into()))?,
            }
        }
    };
    let unsigned = sifen_event::build_event(&EventInput {
        id: event_id,
        signed_at: kuatia_domain::local_time::paraguay(now),
        reason,
        kind: event_kind,
    })
    .map_err(|e| permanent(format!("the event cannot be built: {e}")))?;
    key.sign_event(&unsigned)
        .map_err(|e| permanent(format!("signing the event: {e}")))
}

#[async_trait]
impl JobHandler for SifenEvent {
    fn kind(&self) -> &'static str {
        SIFEN_EVENT
    }

    fn backoff(&self) -> Backoff {
        backoff_from_ms(500)
    }

    async fn run(&self, job: &Job) -> Result<(), JobFailure> {
        let p = &self.0;
        let (tenant, id, state) = p.document(job).await?;
        // Answered already (a repeated job), or nothing asked.
        let Some(pending) = state.pending.clone() else {
            return Ok(());
        };
        let setup = p.setup(tenant, &state).await?;
        let client = p.client(&setup)?;
        let now = p.clock.now();
        let d_id = u64::try_from(now.timestamp_millis()).unwrap_or(1);
        let event_id = u64::try_from(now.timestamp())
            .unwrap_or(1)
            .clamp(1, sifen_event::MAX_EVENT_ID);
        let signed = {
            let (state, key, reason) = (state.clone(), setup.key.clone(), pending.reason.clone());
            tokio::task::spawn_blocking(move || {
                build_and_sign_event(&state, pending.kind, &reason, &*key, event_id, now)
            })
            .await
            .map_err(|e| retry(format!("the signing task: {e}")))??
        };
        let answer = client
            .send_events(d_id, &[signed.as_str()])
            .await
            .map_err(|e| retry(format!("sending the {}: {e}", pending.kind)))?;
        let Some(outcome) = answer.result.events.first() else {
            return Err(retry(format!(
                "SIFEN answered the {} with no event result",
                pending.kind
            )));
        };
        let (code, message) = outcome
            .results
            .first()
            .map(|r| (r.code.clone(), r.message.clone()))
            .unwrap_or_default();
        // The answers table decides: 0600 and "already registered" (4003, 4066) register; a
        // rejection needs "Rechazado" and a rejecting code; anything else is asked again.
        let registered = match outcome.meaning() {
            Meaning::Approved => true,
            Meaning::Rejected => false,
            Meaning::Absent | Meaning::Processing | Meaning::Operational => {
                return Err(retry(format!("SIFEN {code}: {message}")));
            }
        };
        let at = p.clock.now();
        let verdict = match (pending.kind, registered) {
            (FiscalEventKind::Cancellation, true) => DocumentCommand::RecordCancelled {
                code,
                message,
                protocol: outcome.authorization.clone(),
                at,
            },
            (FiscalEventKind::Cancellation, false) => {
                DocumentCommand::RecordCancellationRefused { code, message, at }
            }
            (FiscalEventKind::Inutilization, true) => DocumentCommand::RecordInutilized {
                code,
                message,
                protocol: outcome.authorization.clone(),
                at,
            },
            (FiscalEventKind::Inutilization, false) => {
                DocumentCommand::RecordInutilizationRefused { code, message, at }
            }
        };
        let response = p.store_response(&answer.raw).await?;
        let commands = vec![response_artifact(&state, &response, at), verdict];
        match p.run(tenant, id, commands).await {
            Ok(()) => Ok(()),
            Err(DocumentsError::Conflict) => Err(retry("the document changed meanwhile")),
            Err(e) => Err(retry(e)),
        }
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
