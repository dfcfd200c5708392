//! The SIFEN process manager scenario by scenario, through its ports: given a document's events
//! and SIFEN's answers, when a job runs, then these events and these calls. The store (the
//! backend under test), the vault, the number series and the signer are the real ones; SIFEN is
//! scripted (every answer given by the scenario, every call recorded: SIFEN itself is out of
//! reach), the configuration fixed and the clock set by the scenario. The end-to-end tests
//! against the simulator (`sifen_pipeline`, `sifen_lots`, `sifen_answers`) stay beside these.

use crate::scenario_support::{
    Anywhere, Ground, SetClock, artifact_store, handler, head_office, point_001, profile, running_job,
};
use async_trait::async_trait;
use chrono::{Duration as TimeDelta, Utc};
use kuatia_application::aggregate::AggregateStore;
use kuatia_application::documents::{
    self, Intake, SIFEN_EVENT, SIFEN_PREPARE, SIFEN_SUBMIT, VoidOutcome, VoidRequest,
};
use kuatia_application::event_store::{EventMetadata, SharedStore, StoreError};
use kuatia_application::jobs::{Job, JobFilter};
use kuatia_application::process::ports::{
    Clock, CompanyConfig, ConfigurationReads, SifenConnector, SifenGateway,
};
use kuatia_application::process::sifen::{LotSettings, Pipeline, SIFEN_LOT, SifenPorts};
use kuatia_application::worker::{JobFailure, JobHandler};
use kuatia_domain::certificate::{CertificateFacts, CertificateRecord};
use kuatia_domain::channel::{ChannelKind, EmissionChannel, SifenEnvironment, SifenSettings};
use kuatia_domain::company::{Branch, IssuancePoint};
use kuatia_domain::document::aggregate::{
    Document, DocumentState, DocumentStatus, FiscalEventKind, stream_id,
};
use kuatia_domain::document::canonical::{self, sample_invoice};
use kuatia_domain::document::routing::Routing;
use kuatia_domain::sifen::exchange::{
    Answered, DeQuery, DeReception, DocumentStatus as SifenStatus, EventOutcome, EventReception, LotDocument,
    LotQuery, LotReception, LotResult, ResultCode, SoapError,
};
use kuatia_domain::tenancy::TenantId;
use kuatia_infrastructure::selfsigned::SelfSigned;
use kuatia_infrastructure::sifen::sign::OpensslSigner;
use kuatia_infrastructure::store::Database;
use kuatia_tests::ScratchDir;
use kuatia_tests::TestDb;
use serde_json::json;
use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use uuid::Uuid;

const RUC: &str = "80069563-1";
const ENDPOINT: &str = "https://sifen.example.test";

/// One exchange the scenario saw: where it went, which service, which CDC or lot.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Call {
    endpoint: String,
    service: &'static str,
    about: String,
}

/// SIFEN's answers, in the order the scenario gives them, per service.
#[derive(Default)]
struct Script {
    send_de: VecDeque<Result<Answered<DeReception>, SoapError>>,
    send_lot: VecDeque<Result<Answered<LotReception>, SoapError>>,
    lot_result: VecDeque<Result<Answered<LotResult>, SoapError>>,
    query_de: VecDeque<Result<Answered<DeQuery>, SoapError>>,
    /// siRecepEvento's answers: `dEstRes`, the code and its message.
    send_events: VecDeque<(SifenStatus, &'static str, &'static str)>,
    calls: Vec<Call>,
}

/// SIFEN, scripted: an unscripted call is an exchange that never left.
#[derive(Default, Clone)]
struct ScriptedSifen(Arc<Mutex<Script>>);

struct Gateway {
    endpoint: String,
    sifen: ScriptedSifen,
}

fn unscripted<T>() -> Result<T, SoapError> {
    Err(SoapError::NotSent {
        url: "scripted".into(),
        reason: "no answer scripted".into(),
    })
}

impl ScriptedSifen {
    fn script(&self) -> std::sync::MutexGuard<'_, Script> {
        self.0.lock().unwrap()
    }

    fn calls(&self) -> Vec<Call> {
        self.script().calls.clone()
    }

    fn services(&self) -> Vec<&'static str> {
        self.calls().into_iter().map(|c| c.service).collect()
    }
}

impl Gateway {
    fn note(&self, service: &'static str, about: &str) -> std::sync::MutexGuard<'_, Script> {
        let mut script = self.sifen.script();
        script.calls.push(Call {
            endpoint: self.endpoint.clone(),
            service,
            about: about.to_owned(),
        });
        script
    }
}

/// The CDC inside a signed rDE (`<DE Id="…">`).
fn cdc_of(xml: &str) -> String {
    let at = xml.find("<DE Id=\"").expect("a DE") + 8;
    xml[at..at + 44].to_owned()
}

#[async_trait]
impl SifenGateway for Gateway {
    async fn send_de(&self, _d_id: u64, signed_rde: &str) -> Result<Answered<DeReception>, SoapError> {
        self.note("siRecepDE", &cdc_of(signed_rde))
            .send_de
            .pop_front()
            .unwrap_or_else(unscripted)
    }

    async fn send_lot(&self, _d_id: u64, signed_rdes: &[&str]) -> Result<Answered<LotReception>, SoapError> {
        let cdcs: Vec<String> = signed_rdes.iter().map(|x| cdc_of(x)).collect();
        self.note("siRecepLoteDE", &cdcs.join(","))
            .send_lot
            .pop_front()
            .unwrap_or_else(unscripted)
    }

    async fn lot_result(&self, _d_id: u64, query: &LotQuery) -> Result<Answered<LotResult>, SoapError> {
        let about = match query {
            LotQuery::Number(n) => format!("lot {n}"),
            LotQuery::Cdc(c) => format!("cdc {c}"),
        };
        self.note("siResultLoteDE", &about)
            .lot_result
            .pop_front()
            .unwrap_or_else(unscripted)
    }

    async fn query_de(&self, _d_id: u64, cdc: &str) -> Result<Answered<DeQuery>, SoapError> {
        self.note("siConsDE", cdc)
            .query_de
            .pop_front()
            .unwrap_or_else(unscripted)
    }

    async fn send_events(&self, _d_id: u64, _signed: &[&str]) -> Result<Answered<EventReception>, SoapError> {
        let answer = self.note("siRecepEvento", "").send_events.pop_front();
        answer.map_or_else(unscripted, |(status, code, message)| {
            answered(EventReception {
                processed_at: None,
                events: vec![EventOutcome {
                    id: "1".into(),
                    authorization: status.is_approved().then(|| "8000000000077".to_owned()),
                    status,
                    results: codes(code, message),
                }],
            })
        })
    }
}

impl SifenConnector for ScriptedSifen {
    fn connect(
        &self,
        endpoint: &str,
        _identity_pem: &[u8],
        _pinned: Option<SocketAddr>,
    ) -> Result<Arc<dyn SifenGateway>, String> {
        Ok(Arc::new(Gateway {
            endpoint: endpoint.to_owned(),
            sifen: self.clone(),
        }))
    }
}

fn answered<T>(result: T) -> Result<Answered<T>, SoapError> {
    Ok(Answered {
        result,
        status: 200,
        raw: format!("<answer n=\"{}\"/>", Uuid::now_v7()),
    })
}

fn codes(code: &str, message: &str) -> Vec<ResultCode> {
    vec![ResultCode {
        code: code.into(),
        message: message.into(),
    }]
}

fn de_answer(status: SifenStatus, code: &str, message: &str) -> Result<Answered<DeReception>, SoapError> {
    answered(DeReception {
        cdc: None,
        processed_at: None,
        digest_value: None,
        authorization: status.is_approved().then(|| "8000000000001".to_owned()),
        status,
        results: codes(code, message),
    })
}

fn found(authorization: &str) -> Result<Answered<DeQuery>, SoapError> {
    answered(DeQuery {
        processed_at: None,
        code: "0422".into(),
        message: "CDC encontrado".into(),
        container: Some(kuatia_domain::sifen::exchange::ContainedDe {
            xml: "<rContDe/>".into(),
            cdc: None,
            authorization: Some(authorization.into()),
            cancelled: false,
        }),
    })
}

fn lot_answer(code: &str, documents: Vec<LotDocument>) -> Result<Answered<LotResult>, SoapError> {
    answered(LotResult {
        processed_at: None,
        code: code.into(),
        message: format!("lote {code}"),
        documents,
    })
}

/// One company's configuration, changed by the scenario when it needs to.
struct Configured {
    company: Mutex<CompanyConfig>,
    channel: Mutex<EmissionChannel>,
    branch: Branch,
    point: IssuancePoint,
    certificate: Mutex<CertificateRecord>,
}

#[async_trait]
impl ConfigurationReads for Configured {
    async fn company(&self, _t: TenantId, id: Uuid) -> Result<Option<CompanyConfig>, StoreError> {
        Ok(Some(self.company.lock().unwrap().clone()).filter(|c| c.id == id))
    }

    async fn channel(&self, _t: TenantId, id: Uuid) -> Result<Option<EmissionChannel>, StoreError> {
        Ok(Some(self.channel.lock().unwrap().clone()).filter(|c| c.channel_id == id))
    }

    async fn branch(&self, _t: TenantId, id: Uuid) -> Result<Option<Branch>, StoreError> {
        Ok(Some(self.branch.clone()).filter(|b| b.branch_id == id))
    }

    async fn issuance_point(&self, _t: TenantId, id: Uuid) -> Result<Option<IssuancePoint>, StoreError> {
        Ok(Some(self.point.clone()).filter(|p| p.point_id == id))
    }

    async fn certificate(&self, _t: TenantId, id: Uuid) -> Result<Option<CertificateRecord>, StoreError> {
        Ok(Some(self.certificate.lock().unwrap().clone()).filter(|c| c.certificate_id == id))
    }

    async fn print_settings(
        &self,
        _t: TenantId,
        _company: Uuid,
    ) -> Result<Option<kuatia_domain::print_settings::PrintSettings>, StoreError> {
        Ok(None)
    }
}

/// A scenario: the ports, the pipeline over them, and a tenant.
struct Scenario {
    _db: TestDb,
    _artifacts: ScratchDir,
    database: Database,
    store: SharedStore,
    tenant: TenantId,
    sifen: ScriptedSifen,
    clock: Arc<SetClock>,
    config: Arc<Configured>,
    pipeline: Pipeline,
}

impl Scenario {
    async fn new(lots: bool) -> Self {
        let Ground {
            db,
            artifacts,
            database,
            store,
            vault,
            tenant,
        } = Ground::new().await;
        let now = Utc::now();
        let (key, cert) = SelfSigned::for_ruc("Scenario S.A.", RUC, 365)
            .generate()
            .expect("a certificate");
        let mut pem = key.private_key_to_pem_pkcs8().expect("key PEM");
        pem.extend(cert.to_pem().expect("certificate PEM"));
        let secret_id = vault.put(tenant, "certificate", &pem).await.expect("sealed key");
        let csc_secret_id = vault
            .put(tenant, "csc", b"ABCD0000000000000000000000000000")
            .await
            .expect("sealed CSC");
        let (company_id, branch_id, point_id, channel_id, certificate_id) = (
            Uuid::now_v7(),
            Uuid::now_v7(),
            Uuid::now_v7(),
            Uuid::now_v7(),
            Uuid::now_v7(),
        );
        let profile = profile();
        let config = Arc::new(Configured {
            company: Mutex::new(CompanyConfig {
                id: company_id,
                ruc: RUC.into(),
                profile,
                config_version: 1,
            }),
            channel: Mutex::new(EmissionChannel {
                channel_id,
                kind: ChannelKind::Sifen,
                is_default: true,
                endpoint: ENDPOINT.into(),
                client_id: None,
                credentials_secret_id: None,
                sifen: Some(SifenSettings {
                    environment: SifenEnvironment::Test,
                    timbrado: "12560693".into(),
                    timbrado_valid_from: chrono::NaiveDate::from_ymd_opt(2024, 1, 1).unwrap(),
                    csc_id: "0001".into(),
                    certificate_id,
                    csc_secret_id,
                    remision_notice: None,
                }),
                autoimpresor: None,
            }),
            branch: head_office(branch_id),
            point: point_001(point_id, branch_id),
            certificate: Mutex::new(CertificateRecord {
                certificate_id,
                label: None,
                facts: CertificateFacts {
                    subject: "CN=Scenario S.A.".into(),
                    issuer: "CN=Scenario S.A.".into(),
                    serial_number: "01".into(),
                    ruc: Some(RUC.into()),
                    not_before: now - TimeDelta::days(1),
                    not_after: now + TimeDelta::days(365),
                    fingerprint_sha256: "00".repeat(32),
                    key_algorithm: "RSA".into(),
                    key_bits: 2048,
                    key_matches: true,
                    client_auth: true,
                    chain_length: 1,
                    chain: None,
                },
                secret_id,
            }),
        });
        let sifen = ScriptedSifen::default();
        let clock = Arc::new(SetClock::at(now));
        let reads = Arc::new(kuatia_projections::reads::Reads::new(store.clone()));
        let mut pipeline = Pipeline::new(SifenPorts {
            store: store.clone(),
            vault,
            artifacts: artifact_store(&artifacts),
            config: config.clone(),
            series: reads,
            sifen: Arc::new(sifen.clone()),
            signer: Arc::new(OpensslSigner),
            destinations: Arc::new(Anywhere),
            clock: clock.clone(),
        });
        if lots {
            pipeline = pipeline.with_lots(
                LotSettings {
                    // The turn waits for the jobs already started to arrive, at most this long (it
                    // returns as soon as they have): long enough for a loaded machine's PostgreSQL.
                    window: std::time::Duration::from_secs(5),
                    poll: std::time::Duration::from_secs(600),
                },
                database.jobs(),
            );
        }
        Self {
            _db: db,
            _artifacts: artifacts,
            database,
            store,
            tenant,
            sifen,
            clock,
            config,
            pipeline,
        }
    }

    fn routing(&self) -> Routing {
        let channel = self.config.channel.lock().unwrap().channel_id;
        Routing {
            company_id: self.config.company.lock().unwrap().id,
            branch_id: self.config.branch.branch_id,
            issuance_point_id: self.config.point.point_id,
            channel: ChannelKind::Sifen,
            channel_id: channel,
        }
    }

    /// Given: an invoice received and queued.
    async fn queued(&self) -> Uuid {
        let mut value = sample_invoice();
        value["issue_datetime"] = json!((self.clock.now() - TimeDelta::hours(1)).to_rfc3339());
        let document = canonical::from_value(value).expect("the sample invoice");
        let id = Uuid::now_v7();
        documents::receive(
            &self.store,
            self.tenant,
            Intake {
                document_id: id,
                routing: self.routing(),
                document,
                errors: vec![],
                warnings: vec![],
            },
            EventMetadata::default(),
            self.clock.now(),
        )
        .await
        .expect("received");
        id
    }

    fn handler(&self, kind: &str) -> Arc<dyn JobHandler> {
        handler(self.pipeline.handlers(), kind)
    }

    fn job(&self, kind: &str, payload: serde_json::Value) -> Job {
        running_job(self.tenant, kind, payload, self.clock.now())
    }

    /// When: the document's job of `kind` runs.
    async fn run(&self, kind: &str, document: Uuid) -> Result<(), JobFailure> {
        let job = self.job(kind, json!({ "document_id": document }));
        self.handler(kind).run(&job).await
    }

    async fn state(&self, document: Uuid) -> DocumentState {
        let store = AggregateStore::<Document>::new(self.store.clone(), self.tenant);
        store
            .load(&stream_id(self.tenant, document))
            .await
            .expect("loaded")
            .aggregate()
            .state()
            .cloned()
            .expect("a document")
    }

    /// Then: the document's event types after `after` of them.
    async fn events(&self, document: Uuid) -> Vec<String> {
        self.store
            .load_stream(&stream_id(self.tenant, document))
            .await
            .expect("the stream")
            .into_iter()
            .map(|e| e.event_type)
            .collect()
    }
}

fn tail(events: &[String], from: usize) -> Vec<&str> {
    events[from..].iter().map(String::as_str).collect()
}

/// A dropped answer (sent, no answer) is an operational failure; the retry asks SIFEN for the CDC
/// first and records the approval it holds, and never sends the CDC again.
#[tokio::test]
async fn a_dropped_answer_is_reconciled_by_a_cdc_query_and_never_resent() {
    let s = Scenario::new(false).await;
    let doc = s.queued().await;
    s.sifen.script().send_de.push_back(Err(SoapError::OutcomeUnknown {
        url: ENDPOINT.into(),
        timeout: true,
        reason: "read timed out".into(),
    }));
    s.run(SIFEN_PREPARE, doc).await.expect("prepared and sent");
    let state = s.state(doc).await;
    assert_eq!(state.status, DocumentStatus::Retrying, "{state:?}");
    let cdc = state.cdc.clone().expect("a CDC");
    let before = s.events(doc).await.len();

    s.clock.advance(TimeDelta::minutes(1));
    s.sifen.script().query_de.push_back(found("8000000000042"));
    s.run(SIFEN_SUBMIT, doc).await.expect("reconciled");

    let state = s.state(doc).await;
    assert_eq!(state.status, DocumentStatus::Accepted, "{state:?}");
    assert_eq!(
        s.sifen.services(),
        ["siRecepDE", "siConsDE"],
        "the CDC is asked for, never sent twice"
    );
    assert_eq!(s.sifen.calls()[1].about, cdc);
    let events = s.events(doc).await;
    assert_eq!(
        tail(&events, before),
        [
            "DocumentSubmissionResumed",
            "ArtifactRecorded",
            "DocumentAccepted"
        ],
        "{events:?}"
    );
}

/// A retry whose CDC query says "known absent" asks for a lot holding it, and only then sends
/// the stored bytes again, as the next attempt.
#[tokio::test]
async fn a_cdc_known_absent_and_in_no_lot_is_sent_again_as_the_next_attempt() {
    let s = Scenario::new(false).await;
    let doc = s.queued().await;
    s.sifen.script().send_de.push_back(Err(SoapError::OutcomeUnknown {
        url: ENDPOINT.into(),
        timeout: false,
        reason: "connection reset".into(),
    }));
    s.run(SIFEN_PREPARE, doc).await.expect("prepared");
    s.clock.advance(TimeDelta::minutes(1));
    {
        let mut script = s.sifen.script();
        script.query_de.push_back(answered(DeQuery {
            processed_at: None,
            code: "0420".into(),
            message: "CDC inexistente".into(),
            container: None,
        }));
        script.lot_result.push_back(lot_answer("0360", vec![]));
        script
            .send_de
            .push_back(de_answer(SifenStatus::Approved, "0260", "Aprobado"));
    }
    s.run(SIFEN_SUBMIT, doc).await.expect("sent again");
    assert_eq!(
        s.sifen.services(),
        ["siRecepDE", "siConsDE", "siResultLoteDE", "siRecepDE"]
    );
    let state = s.state(doc).await;
    assert_eq!(state.status, DocumentStatus::Accepted);
    assert_eq!(state.attempts, 2, "the resend is the second attempt on record");
}

/// 0160 "XML malformado" with "Rechazado" is SIFEN's definitive rejection: recorded, not retried.
#[tokio::test]
async fn a_0160_rejection_is_recorded_as_rejected_and_not_retried() {
    let s = Scenario::new(false).await;
    let doc = s.queued().await;
    s.sifen
        .script()
        .send_de
        .push_back(de_answer(SifenStatus::Rejected, "0160", "XML malformado"));
    s.run(SIFEN_PREPARE, doc).await.expect("prepared and sent");
    let state = s.state(doc).await;
    assert_eq!(state.status, DocumentStatus::Rejected, "{state:?}");
    let events = s.events(doc).await;
    assert_eq!(events.last().map(String::as_str), Some("DocumentRejected"));
    // A later job finds nothing to do and asks SIFEN nothing.
    s.run(SIFEN_SUBMIT, doc).await.expect("nothing to do");
    assert_eq!(s.sifen.services(), ["siRecepDE"]);
}

/// A certificate that expired after intake: the document is refused before it is numbered or
/// signed (SIFEN rejects a DE signed with a certificate not valid at signing, rule 2450), with the
/// reason, and nothing is sent.
#[tokio::test]
async fn a_certificate_expired_since_intake_refuses_the_document_before_signing() {
    let s = Scenario::new(false).await;
    let doc = s.queued().await;
    {
        let mut cert = s.config.certificate.lock().unwrap();
        cert.facts.not_after = s.clock.now() - TimeDelta::minutes(5);
    }
    s.config.company.lock().unwrap().config_version += 1;
    s.run(SIFEN_PREPARE, doc).await.expect("refused, the job done");
    let state = s.state(doc).await;
    assert_eq!(state.status, DocumentStatus::FailedTerminal, "{state:?}");
    assert!(state.number.is_none() && state.cdc.is_none(), "no number drawn");
    let events = s.events(doc).await;
    let refused = s
        .store
        .load_stream(&stream_id(s.tenant, doc))
        .await
        .unwrap()
        .pop()
        .unwrap();
    assert_eq!(events.last().map(String::as_str), Some("DocumentIssuanceRefused"));
    let said = refused.payload.to_string();
    assert!(said.contains("not valid now") && said.contains("2450"), "{said}");
    assert!(s.sifen.calls().is_empty(), "nothing sent: {:?}", s.sifen.calls());
}

/// The channel's endpoint changes between the first attempt and the retry: the retry goes to the
/// new endpoint (the setup is read again when the configuration version moves).
#[tokio::test]
async fn a_channel_changed_mid_pipeline_is_used_from_the_next_attempt() {
    let s = Scenario::new(false).await;
    let doc = s.queued().await;
    s.sifen.script().send_de.push_back(Err(SoapError::OutcomeUnknown {
        url: ENDPOINT.into(),
        timeout: true,
        reason: "read timed out".into(),
    }));
    s.run(SIFEN_PREPARE, doc).await.expect("prepared");
    let moved = "https://sifen-new.example.test";
    s.config.channel.lock().unwrap().endpoint = moved.into();
    s.config.company.lock().unwrap().config_version += 1;
    s.clock.advance(TimeDelta::minutes(1));
    s.sifen.script().query_de.push_back(found("8000000000043"));
    s.run(SIFEN_SUBMIT, doc).await.expect("reconciled");
    let endpoints: Vec<String> = s.sifen.calls().into_iter().map(|c| c.endpoint).collect();
    assert_eq!(endpoints, [ENDPOINT, moved]);
    assert_eq!(s.state(doc).await.status, DocumentStatus::Accepted);
}

/// Past the submission horizon (60 h after signing) an operational failure gives up: the
/// document ends `failed_terminal` instead of scheduling another attempt; before it, the next
/// attempt is scheduled no later than the horizon.
#[tokio::test]
async fn past_the_submission_horizon_an_operational_failure_gives_up() {
    let s = Scenario::new(false).await;
    let doc = s.queued().await;
    let down = || {
        Err(SoapError::NotSent {
            url: ENDPOINT.into(),
            reason: "connection refused".into(),
        })
    };
    s.sifen.script().send_de.push_back(down());
    s.run(SIFEN_PREPARE, doc).await.expect("prepared");
    let state = s.state(doc).await;
    assert_eq!(state.status, DocumentStatus::Retrying);
    let signed_at = state.signed_at.expect("signed");
    let horizon = signed_at + kuatia_domain::document::aggregate::SUBMISSION_HORIZON;

    // 59 h 59 min later: still scheduled, and not past the horizon.
    s.clock.advance(TimeDelta::hours(60) - TimeDelta::minutes(1));
    s.sifen.script().query_de.push_back(Err(SoapError::NotSent {
        url: ENDPOINT.into(),
        reason: "connection refused".into(),
    }));
    s.run(SIFEN_SUBMIT, doc).await.expect("failed again");
    let state = s.state(doc).await;
    assert_eq!(state.status, DocumentStatus::Retrying, "{state:?}");
    assert!(state.next_attempt_at.expect("scheduled") <= horizon);

    // Past the horizon: gives up.
    s.clock.advance(TimeDelta::minutes(2));
    s.run(SIFEN_SUBMIT, doc).await.expect("gave up");
    let state = s.state(doc).await;
    assert_eq!(state.status, DocumentStatus::FailedTerminal, "{state:?}");
    let events = s.events(doc).await;
    assert_eq!(
        events.last().map(String::as_str),
        Some("DocumentFailedTerminally")
    );
}

/// Two documents of a turn go as one lot (0300); the lot poll hears 0361 (processing: nothing
/// recorded, polled again later), then 0362 with each document's verdict.
#[tokio::test]
async fn a_lot_answered_0361_then_0362_records_each_verdict_once_done() {
    let s = Scenario::new(true).await;
    let (a, b) = (s.queued().await, s.queued().await);
    s.sifen.script().send_lot.push_back(answered(LotReception {
        processed_at: None,
        code: "0300".into(),
        message: "Lote recibido con éxito".into(),
        lot_number: Some("1234567890".into()),
        processing_seconds: Some(1),
    }));
    let (ra, rb) = tokio::join!(s.run(SIFEN_PREPARE, a), s.run(SIFEN_PREPARE, b));
    ra.expect("a prepared");
    rb.expect("b prepared");
    assert_eq!(s.sifen.services(), ["siRecepLoteDE"], "one lot for the turn");
    let (sa, sb) = (s.state(a).await, s.state(b).await);
    assert_eq!(
        (sa.status, sb.status),
        (DocumentStatus::Submitting, DocumentStatus::Submitting)
    );
    let queued = s
        .database
        .jobs()
        .list(&JobFilter {
            status: None,
            kind: Some(SIFEN_LOT.into()),
            document: None,
            limit: 10,
        })
        .await
        .expect("jobs");
    let [poll] = &queued[..] else {
        panic!("one lot poll queued: {queued:?}")
    };
    let job = s.job(SIFEN_LOT, poll.payload.clone());

    // 0361: still processing. Nothing is recorded; the job comes back after the poll interval.
    let before = (s.events(a).await.len(), s.events(b).await.len());
    s.sifen.script().lot_result.push_back(lot_answer("0361", vec![]));
    let polled = s.handler(SIFEN_LOT).run(&job).await;
    assert!(
        matches!(polled, Err(JobFailure::RetryAfter(_, after)) if after == std::time::Duration::from_secs(600)),
        "{polled:?}"
    );
    assert_eq!((s.events(a).await.len(), s.events(b).await.len()), before);

    // 0362: each document's own verdict.
    let entry = |cdc: String, status: SifenStatus, code: &str, message: &str| LotDocument {
        cdc,
        authorization: status.is_approved().then(|| "8000000000044".to_owned()),
        status,
        results: codes(code, message),
    };
    s.sifen.script().lot_result.push_back(lot_answer(
        "0362",
        vec![
            entry(sa.cdc.clone().unwrap(), SifenStatus::Approved, "0260", "Aprobado"),
            entry(
                sb.cdc.clone().unwrap(),
                SifenStatus::Rejected,
                "1303",
                "RUC del receptor inexistente",
            ),
        ],
    ));
    s.handler(SIFEN_LOT).run(&job).await.expect("recorded");
    assert_eq!(s.state(a).await.status, DocumentStatus::Accepted);
    let rejected = s.state(b).await;
    assert_eq!(rejected.status, DocumentStatus::Rejected);
    assert_eq!(
        s.sifen.services(),
        ["siRecepLoteDE", "siResultLoteDE", "siResultLoteDE"]
    );
}

/// A cancellation waits, within its bound, for SIFEN's answer to the event the job sends: a
/// refusal comes back with SIFEN's code and leaves the document `accepted`; no answer within the
/// bound is `Pending` (the request stays on record, and asking again waits for that same
/// request: one event sent); an approval is `Done` and the document `cancelled`; a cancelled
/// document asked again is `Done` at once, and SIFEN is not asked again.
#[tokio::test]
async fn a_cancellation_waits_for_sifen_and_comes_back_done_refused_or_pending() {
    let s = Scenario::new(false).await;
    let doc = s.queued().await;
    s.sifen
        .script()
        .send_de
        .push_back(de_answer(SifenStatus::Approved, "0260", "Aprobado"));
    s.run(SIFEN_PREPARE, doc).await.expect("accepted");
    let cancel = || VoidRequest {
        document_id: doc,
        kind: FiscalEventKind::Cancellation,
        reason: "Precio mal cargado".into(),
    };
    let void = |wait_ms: u64| {
        documents::void(
            &s.store,
            s.clock.as_ref(),
            s.tenant,
            cancel(),
            EventMetadata::default(),
            std::time::Duration::from_millis(wait_ms),
        )
    };
    // The job runs while the request waits (in the service: a worker, soon after the request).
    let answered_meanwhile = async {
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        s.run(SIFEN_EVENT, doc).await.expect("the event answered");
    };

    s.sifen
        .script()
        .send_events
        .push_back((SifenStatus::Rejected, "4002", "Motivo no válido"));
    let (outcome, ()) = tokio::join!(void(10_000), answered_meanwhile);
    assert_eq!(
        outcome.expect("requested"),
        VoidOutcome::Refused {
            code: "4002".into(),
            message: "Motivo no válido".into()
        }
    );
    assert_eq!(s.state(doc).await.status, DocumentStatus::Accepted);

    assert_eq!(void(0).await.expect("requested"), VoidOutcome::Pending);
    let requested = s.events(doc).await;
    assert_eq!(
        requested.last().map(String::as_str),
        Some("DocumentCancellationRequested")
    );
    assert_eq!(void(0).await.expect("asked again"), VoidOutcome::Pending);
    assert_eq!(s.events(doc).await, requested, "asking again records nothing new");

    s.sifen.script().send_events.push_back((
        SifenStatus::Approved,
        "0600",
        "Evento registrado correctamente",
    ));
    let answered_meanwhile = async {
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        s.run(SIFEN_EVENT, doc).await.expect("the event answered");
    };
    let (outcome, ()) = tokio::join!(void(10_000), answered_meanwhile);
    assert_eq!(outcome.expect("asked again"), VoidOutcome::Done);
    assert_eq!(s.state(doc).await.status, DocumentStatus::Cancelled);

    assert_eq!(void(0).await.expect("cancelled already"), VoidOutcome::Done);
    assert_eq!(
        s.sifen.services(),
        ["siRecepDE", "siRecepEvento", "siRecepEvento"],
        "one event per request: the refused one and the approved one"
    );
}
