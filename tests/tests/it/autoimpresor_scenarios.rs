//! The autoimpresor channel scenario by scenario, through its ports: given a channel's settings
//! and the reporting endpoint's answers, when a job runs, then these events and these calls. The
//! store (the backend under test), the vault, the number series, the artifact store and the
//! reporter (`HttpNumberReporter`, against a real HTTP endpoint of the test) are the real ones;
//! the configuration is fixed, the clock set by the scenario, the printer counts what it is
//! asked to print, and the destination policy pins every report to the test endpoint's address
//! (the endpoint is named by a host no resolver knows, so only the pinned address reaches it).
//! The end-to-end tests over HTTP (`autoimpresor`, `printables`) stay beside these.

use crate::scenario_support::{
    Ground, SetClock, artifact_store, handler, head_office, point_001, profile, running_job,
};
use async_trait::async_trait;
use chrono::{DateTime, Duration as TimeDelta, NaiveDate, Utc};
use kuatia_application::aggregate::AggregateStore;
use kuatia_application::documents::{self, AUTOIMPRESOR_ISSUE, AUTOIMPRESOR_REPORT, Intake};
use kuatia_application::event_store::{EventMetadata, SharedStore, StoreError};
use kuatia_application::printables::{PrintError, Printable, Printer};
use kuatia_application::process::autoimpresor::{Autoimpresor, AutoimpresorPorts, series_key};
use kuatia_application::process::ports::{
    Clock, CompanyConfig, ConfigurationReads, Destinations, NumberSeries, RefusedDestination,
};
use kuatia_application::worker::{JobFailure, JobHandler};
use kuatia_domain::certificate::CertificateRecord;
use kuatia_domain::channel::{AutoimpresorSettings, ChannelKind, EmissionChannel};
use kuatia_domain::company::{Branch, IssuancePoint};
use kuatia_domain::document::aggregate::{Document, DocumentState, DocumentStatus, stream_id};
use kuatia_domain::document::canonical::{self, sample_invoice};
use kuatia_domain::document::routing::Routing;
use kuatia_domain::local_time::paraguay_today;
use kuatia_domain::print_settings::PrintSettings;
use kuatia_domain::tenancy::TenantId;
use kuatia_infrastructure::number_reporter::HttpNumberReporter;
use kuatia_projections::reads::Reads;
use kuatia_tests::ScratchDir;
use kuatia_tests::TestDb;
use serde_json::{Value, json};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use uuid::Uuid;

use crate::autoimpresor::{API_KEY, Endpoint};

const RUC: &str = "80069563-1";

/// Renders nothing: counts the printables it is asked for and answers a stand-in PDF.
#[derive(Default)]
struct CountingPrinter(Mutex<Vec<String>>);

impl CountingPrinter {
    /// The numbers printed, in order.
    fn printed(&self) -> Vec<String> {
        self.0.lock().unwrap().clone()
    }
}

#[async_trait]
impl Printer for CountingPrinter {
    async fn render(&self, printable: Printable, _settings: &PrintSettings) -> Result<Vec<u8>, PrintError> {
        let Printable::Autoimpresor(p) = printable else {
            return Err(PrintError::Input("not an autoimpresor printable".into()));
        };
        self.0.lock().unwrap().push(p.number.number.clone());
        Ok(format!("%PDF-1.7 {}", p.number).into_bytes())
    }
}

/// The destination policy: every report goes to the address it pins (the test endpoint's,
/// unless the scenario moves it), and each check is recorded.
struct PinnedTo {
    addr: Mutex<SocketAddr>,
    checked: Mutex<Vec<String>>,
}

#[async_trait]
impl Destinations for PinnedTo {
    async fn check(&self, _tenant: TenantId, url: &str) -> Result<Option<SocketAddr>, String> {
        self.checked.lock().unwrap().push(url.to_owned());
        Ok(Some(*self.addr.lock().unwrap()))
    }
    async fn check_saved(
        &self,
        _tenant: TenantId,
        _url: &str,
    ) -> Result<Result<(), RefusedDestination>, StoreError> {
        Ok(Ok(()))
    }
}

/// One company's configuration, its autoimpresor channel changed by the scenario.
struct Configured {
    company: CompanyConfig,
    channel: Mutex<EmissionChannel>,
    branch: Branch,
    point: IssuancePoint,
}

#[async_trait]
impl ConfigurationReads for Configured {
    async fn company(&self, _t: TenantId, id: Uuid) -> Result<Option<CompanyConfig>, StoreError> {
        Ok(Some(self.company.clone()).filter(|c| c.id == id))
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

    async fn certificate(&self, _t: TenantId, _id: Uuid) -> Result<Option<CertificateRecord>, StoreError> {
        Ok(None)
    }

    async fn print_settings(
        &self,
        _t: TenantId,
        _company: Uuid,
    ) -> Result<Option<PrintSettings>, StoreError> {
        Ok(None)
    }
}

/// A scenario: the ports, the channel over them, and a tenant.
struct Scenario {
    _db: TestDb,
    _artifacts: ScratchDir,
    store: SharedStore,
    tenant: TenantId,
    clock: Arc<SetClock>,
    config: Arc<Configured>,
    printer: Arc<CountingPrinter>,
    destinations: Arc<PinnedTo>,
    endpoint: Endpoint,
    /// The channel's endpoint as configured: a host no resolver knows, on the test endpoint's
    /// port.
    url: String,
    reads: Arc<Reads>,
    channel: Autoimpresor,
}

impl Scenario {
    /// An autoimpresor channel of `range` (first number its start), valid from 30 days ago to
    /// 30 days ahead, reporting to an endpoint that answers 500 to its first `fail_first`
    /// requests.
    async fn new(range: (u64, u64), fail_first: usize) -> Self {
        let Ground {
            db,
            artifacts,
            store,
            vault,
            tenant,
            ..
        } = Ground::new().await;
        let api_key = vault
            .put(tenant, "api_key", API_KEY.as_bytes())
            .await
            .expect("sealed API key");
        let (endpoint, local) = Endpoint::start(fail_first).await;
        let addr: SocketAddr = local
            .trim_start_matches("http://")
            .trim_end_matches("/reports")
            .parse()
            .expect("the endpoint's address");
        let url = format!("http://reports.scenario.invalid:{}/reports", addr.port());
        let now = Utc::now();
        let today = paraguay_today(now);
        let (company_id, branch_id, point_id, channel_id) =
            (Uuid::now_v7(), Uuid::now_v7(), Uuid::now_v7(), Uuid::now_v7());
        let profile = profile();
        let config = Arc::new(Configured {
            company: CompanyConfig {
                id: company_id,
                ruc: RUC.into(),
                profile,
                config_version: 1,
            },
            channel: Mutex::new(EmissionChannel {
                channel_id,
                kind: ChannelKind::Autoimpresor,
                is_default: false,
                endpoint: url.clone(),
                client_id: None,
                credentials_secret_id: Some(api_key),
                sifen: None,
                autoimpresor: Some(AutoimpresorSettings {
                    authorization: "AUT-2026-001".into(),
                    declared_software: Some("kuatia".into()),
                    timbrado: "87654321".into(),
                    valid_from: today - TimeDelta::days(30),
                    valid_to: today + TimeDelta::days(30),
                    branch_id,
                    issuance_point_id: point_id,
                    range_start: range.0,
                    range_end: range.1,
                    next_number: range.0,
                }),
            }),
            branch: head_office(branch_id),
            point: point_001(point_id, branch_id),
        });
        let clock = Arc::new(SetClock::at(now));
        let printer = Arc::new(CountingPrinter::default());
        let destinations = Arc::new(PinnedTo {
            addr: Mutex::new(addr),
            checked: Mutex::default(),
        });
        let reads = Arc::new(Reads::new(store.clone()));
        let channel = Autoimpresor::new(AutoimpresorPorts {
            store: store.clone(),
            vault,
            artifacts: artifact_store(&artifacts),
            printer: printer.clone(),
            config: config.clone(),
            series: reads.clone(),
            reporter: Arc::new(HttpNumberReporter::new()),
            destinations: destinations.clone(),
            clock: clock.clone(),
        });
        Self {
            _db: db,
            _artifacts: artifacts,
            store,
            tenant,
            clock,
            config,
            printer,
            destinations,
            endpoint,
            url,
            reads,
            channel,
        }
    }

    /// Changes the channel's autoimpresor settings.
    fn settings(&self, change: impl FnOnce(&mut AutoimpresorSettings)) {
        let mut channel = self.config.channel.lock().unwrap();
        change(channel.autoimpresor.as_mut().expect("autoimpresor settings"));
    }

    fn series(&self) -> String {
        let channel = self.config.channel.lock().unwrap();
        series_key(
            self.config.company.id,
            channel.autoimpresor.as_ref().expect("settings"),
            &self.config.branch.code,
            &self.config.point.code,
        )
    }

    /// The next number of the channel's series; `None` while none was drawn.
    async fn next_number(&self) -> Option<u64> {
        self.reads
            .next_number(self.tenant, &self.series())
            .await
            .expect("the number series")
    }

    /// Given: an invoice issued at `issued`, received and queued on the autoimpresor channel.
    async fn queued_at(&self, issued: DateTime<Utc>) -> Uuid {
        let mut value = sample_invoice();
        value["issue_datetime"] = json!(issued.to_rfc3339());
        let document = canonical::from_value(value).expect("the sample invoice");
        let id = Uuid::now_v7();
        let routing = Routing {
            company_id: self.config.company.id,
            branch_id: self.config.branch.branch_id,
            issuance_point_id: self.config.point.point_id,
            channel: ChannelKind::Autoimpresor,
            channel_id: self.config.channel.lock().unwrap().channel_id,
        };
        documents::receive(
            &self.store,
            self.tenant,
            Intake {
                document_id: id,
                routing,
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

    /// Given: an invoice issued an hour ago, queued.
    async fn queued(&self) -> Uuid {
        self.queued_at(self.clock.now() - TimeDelta::hours(1)).await
    }

    fn handler(&self, kind: &str) -> Arc<dyn JobHandler> {
        handler(self.channel.handlers(), kind)
    }

    /// When: a job of `kind` runs with `payload`.
    async fn run(&self, kind: &str, payload: Value) -> Result<(), JobFailure> {
        let job = running_job(self.tenant, kind, payload, self.clock.now());
        self.handler(kind).run(&job).await
    }

    /// When: the document's `autoimpresor.issue` job runs.
    async fn issue(&self, document: Uuid) -> Result<(), JobFailure> {
        self.run(AUTOIMPRESOR_ISSUE, json!({ "document_id": document }))
            .await
    }

    /// When: the document's `autoimpresor.report` job of `report` runs.
    async fn report(&self, document: Uuid, report: &str) -> Result<(), JobFailure> {
        self.run(
            AUTOIMPRESOR_REPORT,
            json!({ "document_id": document, "report": report }),
        )
        .await
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

    /// Then: the document's events, type and fields.
    async fn events(&self, document: Uuid) -> Vec<(String, Value)> {
        self.store
            .load_stream(&stream_id(self.tenant, document))
            .await
            .expect("the stream")
            .into_iter()
            .map(|e| {
                // Stored tagged by the variant's name (`{"NumberReported": {…}}`).
                let fields = e.payload.get(&e.event_type).cloned().unwrap_or(e.payload);
                (e.event_type, fields)
            })
            .collect()
    }

    async fn types(&self, document: Uuid) -> Vec<String> {
        self.events(document).await.into_iter().map(|(t, _)| t).collect()
    }

    /// The payload of the document's one event of `event_type`.
    async fn event(&self, document: Uuid, event_type: &str) -> Value {
        let found: Vec<Value> = self
            .events(document)
            .await
            .into_iter()
            .filter(|(t, _)| t == event_type)
            .map(|(_, p)| p)
            .collect();
        assert_eq!(found.len(), 1, "one {event_type}: {found:?}");
        found[0].clone()
    }
}

fn count(types: &[String], event_type: &str) -> usize {
    types.iter().filter(|t| *t == event_type).count()
}

/// The range's last number is printed; the next document finds the range used up and is refused
/// with `configuration_error` before any number is drawn (the series stays where it was, nothing
/// is printed).
#[tokio::test]
async fn a_range_used_up_by_its_last_number_refuses_the_next_document_without_drawing() {
    let s = Scenario::new((1, 2), 0).await;
    for expected in ["0000001", "0000002"] {
        let doc = s.queued().await;
        s.issue(doc).await.expect("issued");
        let state = s.state(doc).await;
        assert_eq!(state.status, DocumentStatus::Accepted, "{state:?}");
        assert_eq!(state.number.as_ref().map(|n| n.number.as_str()), Some(expected));
    }
    assert_eq!(s.next_number().await, Some(3));

    let late = s.queued().await;
    s.issue(late).await.expect("refused, not failed");
    let state = s.state(late).await;
    assert_eq!(state.status, DocumentStatus::FailedTerminal, "{state:?}");
    assert_eq!(state.number, None);
    let refusal = s.event(late, "DocumentIssuanceRefused").await;
    assert_eq!(refusal["code"], "configuration_error", "{refusal}");
    assert_eq!(
        refusal["message"],
        "the authorised range 1–2 of timbrado 87654321 is exhausted; configure a new range on the channel"
    );
    let types = s.types(late).await;
    assert_eq!(count(&types, "DocumentRenderingStarted"), 0, "{types:?}");
    assert_eq!(s.next_number().await, Some(3), "no number drawn");
    assert_eq!(s.printer.printed(), ["0000001", "0000002"]);

    // Run again (a repeated job), the refusal stands and nothing more is recorded.
    s.issue(late).await.expect("nothing to do");
    assert_eq!(s.types(late).await, types);
}

/// The number that uses 90 % of the range records `NumberingRangeNearlyExhausted` in the same
/// append as the number, and no other number records it again.
#[tokio::test]
async fn the_ninety_per_cent_warning_is_recorded_once_with_the_number_that_crosses_it() {
    let s = Scenario::new((1, 10), 0).await;
    let mut warned = Vec::new();
    for n in 1..=10_u64 {
        let doc = s.queued().await;
        s.issue(doc).await.expect("issued");
        let types = s.types(doc).await;
        if count(&types, "NumberingRangeNearlyExhausted") > 0 {
            let at = types
                .iter()
                .position(|t| t == "NumberingRangeNearlyExhausted")
                .expect("the warning");
            assert_eq!(types[at - 1], "DocumentRenderingStarted", "{types:?}");
            let warning = s.event(doc, "NumberingRangeNearlyExhausted").await;
            assert_eq!(
                (warning["used"].clone(), warning["size"].clone()),
                (json!(9), json!(10))
            );
            assert_eq!(warning["series"], s.series());
            warned.push(n);
        }
    }
    assert_eq!(warned, [9], "once, on the ninth number of ten");
}

/// A series that opens past the mark (the channel configured to start near the range's end)
/// warns on its first number, and only then.
#[tokio::test]
async fn a_series_opened_past_the_mark_warns_on_its_first_number_only() {
    let s = Scenario::new((1, 10), 0).await;
    s.settings(|a| a.next_number = 10);
    let first = s.queued().await;
    s.issue(first).await.expect("issued");
    assert_eq!(count(&s.types(first).await, "NumberingRangeNearlyExhausted"), 1);
    let state = s.state(first).await;
    assert_eq!(state.number.map(|n| n.number), Some("0000010".to_owned()));
    let next = s.queued().await;
    s.issue(next).await.expect("refused");
    assert_eq!(count(&s.types(next).await, "NumberingRangeNearlyExhausted"), 0);
    assert_eq!(s.state(next).await.status, DocumentStatus::FailedTerminal);
}

/// The endpoint answers the first report 500: the job is retried with the endpoint's answer as
/// the reason; the second answer, 200, records `NumberReported` once; a third run sends nothing.
/// Every request carries the API key and the report's idempotency key, and goes to the address
/// the destination policy pinned.
#[tokio::test]
async fn a_report_answered_500_then_200_is_retried_and_recorded_once() {
    let s = Scenario::new((1, 100), 1).await;
    let doc = s.queued().await;
    s.issue(doc).await.expect("issued");
    assert_eq!(s.state(doc).await.status, DocumentStatus::Accepted);

    let first = s.report(doc, "issued").await;
    assert_eq!(
        first,
        Err(JobFailure::Retry(format!(
            "{} answered 500 Internal Server Error to the issued report",
            s.url
        )))
    );
    assert_eq!(count(&s.types(doc).await, "NumberReported"), 0);

    s.clock.advance(TimeDelta::seconds(2));
    s.report(doc, "issued").await.expect("reported");
    let reported = s.event(doc, "NumberReported").await;
    assert_eq!(reported["report"], "issued", "{reported}");
    assert_eq!(reported["http_status"], 200, "{reported}");
    let at: DateTime<Utc> = serde_json::from_value(reported["at"].clone()).expect("at");
    assert_eq!(at, s.clock.now(), "recorded at the clock's time");

    s.report(doc, "issued").await.expect("nothing to do");
    assert_eq!(count(&s.types(doc).await, "NumberReported"), 1);

    let received = s.endpoint.received();
    assert_eq!(
        received.iter().map(|r| r.answered).collect::<Vec<_>>(),
        [500, 200],
        "two requests, none after the report is on record"
    );
    for r in &received {
        assert_eq!(r.authorization.as_deref(), Some(&*format!("Bearer {API_KEY}")));
        assert_eq!(r.idempotency_key.as_deref(), Some(&*format!("{doc}:issued")));
        assert_eq!(r.body["event"], "issued");
        assert_eq!(r.body["number"], "0000001");
        assert_eq!(r.body["issuer_ruc"], RUC);
        assert_eq!(r.body["authorization"], "AUT-2026-001");
    }
    assert_eq!(
        *s.destinations.checked.lock().unwrap(),
        [s.url.clone(), s.url.clone()],
        "the destination is checked before every report"
    );
}

/// A reporting endpoint that cannot be reached is retried with the reason, the endpoint named.
#[tokio::test]
async fn a_report_that_reaches_no_one_is_retried_with_the_reason() {
    let s = Scenario::new((1, 100), 0).await;
    let doc = s.queued().await;
    s.issue(doc).await.expect("issued");
    // The endpoint's host now leads to an address nobody listens on (a pinned address keeps
    // the URL's port: another loopback address, where the test's endpoint is not).
    *s.destinations.addr.lock().unwrap() = "127.0.0.2:1".parse().expect("an address");
    let failed = s.report(doc, "issued").await;
    assert_eq!(
        failed,
        Err(JobFailure::Retry(format!(
            "reporting to {}: the receiver could not be reached, or did not answer in time",
            s.url
        )))
    );
    assert_eq!(count(&s.types(doc).await, "NumberReported"), 0);
    assert!(s.endpoint.received().is_empty());
}

/// An authorization that begins after the document's issue date does not cover it, although it
/// covers today: refused with `configuration_error`, no number drawn, nothing printed.
#[tokio::test]
async fn an_authorization_not_yet_valid_on_the_issue_date_refuses_the_document() {
    let s = Scenario::new((1, 100), 0).await;
    let today = paraguay_today(s.clock.now());
    s.settings(|a| a.valid_from = today);
    let doc = s.queued_at(s.clock.now() - TimeDelta::days(2)).await;
    s.issue(doc).await.expect("refused, not failed");

    let state = s.state(doc).await;
    assert_eq!(state.status, DocumentStatus::FailedTerminal, "{state:?}");
    assert_eq!(state.number, None);
    let refusal = s.event(doc, "DocumentIssuanceRefused").await;
    assert_eq!(refusal["code"], "configuration_error", "{refusal}");
    let issue_date: NaiveDate = paraguay_today(s.clock.now() - TimeDelta::days(2));
    assert_eq!(
        refusal["message"],
        format!(
            "timbrado 87654321 is valid from {today} to {}; the document's issue date {issue_date} is outside it",
            today + TimeDelta::days(30)
        )
    );
    assert_eq!(s.next_number().await, None, "no number drawn");
    assert!(s.printer.printed().is_empty());
}
