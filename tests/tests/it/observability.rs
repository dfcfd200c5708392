//! Observability end to end: one trace from an HTTP request through the jobs it causes to the
//! SIFEN call, exported over OTLP/HTTP (JSON) to a collector, with the trace id in the log lines
//! and the `traceparent` on the response and on the SIFEN request; nothing exported without an
//! endpoint; SIFEN's per-document codes of a lot result counted.
//!
//! The tracing subscriber is global: the first test here installs it (with the trace layer) for
//! the whole test process, writing log lines to a capture that keeps only the lines naming a trace
//! id a test watches. Export is per service (each test's service registers its exporter for its
//! own runtime), so the other tests of the binary neither see nor disturb these collectors.

use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::Response;
use axum::routing::post;
use kuatia_infrastructure::config::{LogFormat, Secret};
use kuatia_infrastructure::sifen_sim::{SimConfig, Simulator};
use kuatia_tests::{Ready, TestApp, id, post_together, send, send_with_headers};
use reqwest::Method;
use serde_json::{Value, json};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

/// Log lines naming a watched trace id.
#[derive(Default)]
struct Logs {
    watched: Mutex<Vec<String>>,
    lines: Mutex<Vec<String>>,
}

static LOGS: OnceLock<Logs> = OnceLock::new();

fn logs() -> &'static Logs {
    LOGS.get_or_init(Logs::default)
}

impl Logs {
    fn watch(&self, trace_id: &str) {
        self.watched.lock().expect("lock").push(trace_id.to_owned());
    }

    fn naming(&self, trace_id: &str) -> Vec<String> {
        self.lines
            .lock()
            .expect("lock")
            .iter()
            .filter(|l| l.contains(trace_id))
            .cloned()
            .collect()
    }
}

/// The writer the subscriber makes per log line.
struct LogLine;

impl std::io::Write for LogLine {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let text = String::from_utf8_lossy(buf);
        let logs = logs();
        let watched = logs.watched.lock().map(|w| w.clone()).unwrap_or_default();
        if watched.iter().any(|id| text.contains(id.as_str()))
            && let Ok(mut lines) = logs.lines.lock()
        {
            lines.push(text.into_owned());
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn log_line() -> LogLine {
    LogLine
}

/// Installs the process's subscriber (once; later calls do nothing).
fn install_telemetry() {
    static INSTALLED: OnceLock<bool> = OnceLock::new();
    INSTALLED.get_or_init(|| {
        kuatia_infrastructure::telemetry::install(
            LogFormat::Json,
            "info,sqlx=warn",
            log_line as fn() -> LogLine,
        )
    });
}

/// An OTLP/HTTP receiver: stores every JSON body posted to `/v1/traces`.
struct Collector {
    url: String,
    bodies: Arc<Mutex<Vec<Value>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Collector {
    async fn start() -> Self {
        let bodies: Arc<Mutex<Vec<Value>>> = Arc::default();
        let store = bodies.clone();
        let router = axum::Router::new().route(
            "/v1/traces",
            post(move |headers: axum::http::HeaderMap, body: String| {
                let store = store.clone();
                async move {
                    assert_eq!(headers["content-type"], "application/json");
                    let value: Value = serde_json::from_str(&body).expect("OTLP JSON");
                    store.lock().expect("lock").push(value);
                    axum::Json(json!({}))
                }
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let url = format!("http://{}", listener.local_addr().expect("addr"));
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, router).await;
        });
        Self { url, bodies, task }
    }

    /// Every span received, flattened out of resourceSpans → scopeSpans → spans.
    fn spans(&self) -> Vec<Value> {
        let bodies = self.bodies.lock().expect("lock");
        bodies
            .iter()
            .flat_map(|b| b["resourceSpans"].as_array().cloned().unwrap_or_default())
            .flat_map(|r| r["scopeSpans"].as_array().cloned().unwrap_or_default())
            .flat_map(|s| s["spans"].as_array().cloned().unwrap_or_default())
            .collect()
    }

    fn spans_of(&self, trace_id: &str) -> Vec<Value> {
        self.spans()
            .into_iter()
            .filter(|s| s["traceId"] == trace_id)
            .collect()
    }
}

impl Drop for Collector {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// A SIFEN simulator that remembers the `traceparent` headers it received.
struct Sim {
    url: String,
    traceparents: Arc<Mutex<Vec<String>>>,
    task: tokio::task::JoinHandle<()>,
}

async fn remember(State(seen): State<Arc<Mutex<Vec<String>>>>, request: Request, next: Next) -> Response {
    if let Some(value) = request.headers().get("traceparent").and_then(|v| v.to_str().ok()) {
        seen.lock().expect("lock").push(value.to_owned());
    }
    next.run(request).await
}

impl Sim {
    async fn start() -> Self {
        let simulator = Simulator::new(SimConfig::default()).expect("simulator");
        let traceparents: Arc<Mutex<Vec<String>>> = Arc::default();
        let router = simulator.router().layer(axum::middleware::from_fn_with_state(
            traceparents.clone(),
            remember,
        ));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let url = format!("http://{}", listener.local_addr().expect("addr"));
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, router).await;
        });
        Self {
            url,
            traceparents,
            task,
        }
    }

    fn seen(&self) -> Vec<String> {
        self.traceparents.lock().expect("lock").clone()
    }
}

impl Drop for Sim {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn random_hex(bytes: usize) -> String {
    (0..bytes)
        .map(|_| format!("{:02x}", rand::random::<u8>()))
        .collect()
}

/// Posts an invoice with a `traceparent`; returns the document id and the response's
/// `traceparent`.
async fn post_traced(r: &Ready, traceparent: &str) -> (String, String) {
    let (status, headers, body) = send_with_headers(
        r.req(Method::POST, "/v1/documents")
            .header("Idempotency-Key", uuid::Uuid::now_v7().to_string())
            .header("traceparent", traceparent)
            .json(&r.invoice(&format!("otel-{}", uuid::Uuid::now_v7()))),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    let echoed = headers
        .get("traceparent")
        .expect("the response names its trace")
        .to_str()
        .expect("ascii")
        .to_owned();
    (id(&body), echoed)
}

async fn wait_accepted(r: &Ready, doc: &str) {
    let status = r
        .settle(&[doc.to_owned()], Duration::from_secs(60))
        .await
        .remove(0);
    assert_eq!(status["status"], "accepted", "not accepted: {status}");
}

fn attribute<'a>(span: &'a Value, key: &str) -> Option<&'a Value> {
    span["attributes"]
        .as_array()?
        .iter()
        .find(|a| a["key"] == key)
        .map(|a| &a["value"])
}

#[tokio::test]
async fn a_request_its_jobs_and_the_sifen_call_are_one_trace_exported_over_otlp() {
    install_telemetry();
    let collector = Collector::start().await;
    let sim = Sim::start().await;
    let app = TestApp::spawn_with(|c| {
        c.otlp_endpoint = Some(collector.url.clone());
        c.rate_limit_per_key = 100_000;
    })
    .await;
    let r = app.ready_at("otel", &sim.url).await;
    // A webhook endpoint: its deliveries join the trace of the events that raised them.
    let inbox = crate::webhooks::Inbox::default();
    let (port, _receiver) = crate::webhooks::start_receiver(inbox.clone(), 0).await;
    let (status, body) = send(
        app.as_key(Method::POST, "/v1/webhooks", &r.key, &r.tenant)
            .json(&json!({"url": format!("http://127.0.0.1:{port}/hook"), "events": ["document.accepted"]})),
    )
    .await;
    assert_eq!(status, 201, "{body}");

    let (trace_id, caller_span) = (random_hex(16), random_hex(8));
    logs().watch(&trace_id);
    let (doc, echoed) = post_traced(&r, &format!("00-{trace_id}-{caller_span}-01")).await;
    assert!(echoed.starts_with(&format!("00-{trace_id}-")), "{echoed}");
    assert!(echoed.ends_with("-01"), "{echoed}");
    let request_span = echoed[36..52].to_owned();
    assert_ne!(request_span, caller_span, "the request is a span of its own");
    wait_accepted(&r, &doc).await;

    // Spans arrive in batches (at most a second after they end).
    let deadline = Instant::now() + Duration::from_secs(20);
    let (request, prepare, next, soap) = loop {
        let spans = collector.spans_of(&trace_id);
        let named = |name: &str| spans.iter().find(|s| s["name"] == name).cloned();
        let request = named("POST /v1/documents");
        let prepare = spans
            .iter()
            .find(|s| s["name"] == "sifen.prepare" && s["parentSpanId"] == request_span.as_str())
            .cloned();
        // The prepare job sends the document and records SIFEN's verdict, whose job (the KuDE)
        // continues the trace under it.
        let next = prepare.as_ref().and_then(|p| {
            spans
                .iter()
                .find(|s| s["name"] == "printing.kude" && s["parentSpanId"] == p["spanId"])
                .cloned()
        });
        let soap = spans
            .iter()
            .find(|s| s["name"] == "SIFEN siRecepDE" || s["name"] == "SIFEN siRecepLoteDE")
            .cloned();
        if let (Some(a), Some(b), Some(c), Some(d)) = (&request, &prepare, &next, &soap) {
            break (a.clone(), b.clone(), c.clone(), d.clone());
        }
        assert!(
            Instant::now() < deadline,
            "incomplete trace {trace_id}: {:#}",
            Value::Array(spans)
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };

    // The request continues the caller's trace: a server span under the caller's span.
    assert_eq!(request["spanId"], request_span.as_str());
    assert_eq!(request["parentSpanId"], caller_span.as_str());
    assert_eq!(request["kind"], 2, "server");
    assert!(attribute(&request, "request_id").is_some(), "{request}");
    assert_eq!(
        attribute(&request, "http.response.status_code"),
        Some(&json!({"intValue": "201"}))
    );
    // The jobs: consumer spans, each under the span that queued it.
    assert_eq!(prepare["kind"], 5, "consumer");
    assert_eq!(next["kind"], 5);
    assert_eq!(
        attribute(&next, "job.kind"),
        Some(&json!({"stringValue": next["name"]}))
    );
    // The SIFEN call: a client span under the prepare job, with SIFEN's code.
    assert_eq!(soap["kind"], 3, "client");
    assert_eq!(soap["parentSpanId"], prepare["spanId"], "{soap}");
    let jobs: Vec<Value> = collector
        .spans_of(&trace_id)
        .into_iter()
        .filter(|s| s["kind"] == 5)
        .map(|s| s["spanId"].clone())
        .collect();
    assert!(jobs.contains(&soap["parentSpanId"]), "{soap}");
    assert_eq!(
        attribute(&soap, "sifen.code"),
        Some(&json!({"stringValue": "0260"}))
    );
    for span in [&request, &prepare, &next, &soap] {
        let start: u128 = span["startTimeUnixNano"]
            .as_str()
            .expect("start")
            .parse()
            .expect("nanos");
        let end: u128 = span["endTimeUnixNano"]
            .as_str()
            .expect("end")
            .parse()
            .expect("nanos");
        assert!(start > 0 && end >= start, "{span}");
    }

    // SIFEN (here the simulator) was told the trace, naming the client span as the parent.
    let soap_span = soap["spanId"].as_str().expect("span id");
    assert!(
        sim.seen().contains(&format!("00-{trace_id}-{soap_span}-01")),
        "{:?}",
        sim.seen()
    );
    // The webhook the acceptance raised was delivered in the same trace, under the job span that
    // recorded the acceptance (the fan-out subscription carries the event's trace context).
    let deadline = Instant::now() + Duration::from_secs(20);
    let deliver = loop {
        let spans = collector.spans_of(&trace_id);
        if let Some(deliver) = spans.iter().find(|s| s["name"] == "webhook.deliver") {
            let parent = deliver["parentSpanId"].clone();
            assert!(
                spans.iter().any(|s| s["kind"] == 5 && s["spanId"] == parent),
                "{deliver}"
            );
            break deliver.clone();
        }
        assert!(
            Instant::now() < deadline,
            "no webhook delivery in trace {trace_id}: {:?}",
            inbox.all()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert_eq!(deliver["kind"], 5, "consumer");
    assert_eq!(inbox.all().len(), 1, "{:?}", inbox.all());
    // The JSON log lines of the request name the trace next to the request id.
    let lines = logs().naming(&trace_id);
    assert!(
        lines
            .iter()
            .any(|l| l.contains(&format!("\"trace_id\":\"{trace_id}\"")) && l.contains("\"request_id\"")),
        "{lines:?}"
    );
    app.stop().await;
}

#[tokio::test]
async fn without_an_otlp_endpoint_nothing_is_exported_and_the_trace_still_propagates() {
    install_telemetry();
    let collector = Collector::start().await;
    let sim = Sim::start().await;
    let app = TestApp::spawn_with(|c| c.rate_limit_per_key = 100_000).await;
    assert_eq!(app.service().addr.ip().to_string(), "127.0.0.1");
    let r = app.ready_at("quiet", &sim.url).await;

    let trace_id = random_hex(16);
    let (doc, echoed) = post_traced(&r, &format!("00-{trace_id}-{}-01", random_hex(8))).await;
    assert!(echoed.starts_with(&format!("00-{trace_id}-")), "{echoed}");
    wait_accepted(&r, &doc).await;
    // The trace reached SIFEN through the jobs all the same.
    assert!(
        sim.seen().iter().any(|t| t.contains(&trace_id)),
        "{:?}",
        sim.seen()
    );
    // A request without a traceparent starts a trace of its own.
    let response = app.get("/health").await;
    let fresh = response.headers()["traceparent"]
        .to_str()
        .expect("ascii")
        .to_owned();
    assert!(!fresh.contains(&trace_id) && fresh.len() == 55, "{fresh}");

    tokio::time::sleep(kuatia_infrastructure::telemetry::otlp::FLUSH_INTERVAL * 2).await;
    assert!(collector.spans().is_empty(), "{:?}", collector.spans());
    app.stop().await;
}

/// The value of one series in a Prometheus exposition (0 when absent).
fn series(text: &str, name_and_labels: &str) -> f64 {
    text.lines()
        .find_map(|l| l.strip_prefix(name_and_labels)?.trim().parse().ok())
        .unwrap_or(0.0)
}

#[tokio::test]
async fn a_lot_result_counts_sifen_s_code_for_each_document() {
    // Documents whose `sifen.prepare` jobs wait for the same numbering turn go out as one lot.
    // Six posted at once: the first may have its turn alone (sent through siRecepDE, which SIFEN
    // takes half a second to answer), the ones claimed meanwhile share the next turn and its lot.
    let f = kuatia_tests::Simulated::new(
        SimConfig {
            latency_ms: 500,
            ..SimConfig::default()
        },
        |c| {
            c.metrics_bearer_token = Some(Secret::new("m3trics-token"));
            c.sifen_lot_window_ms = 1_000;
            c.workers = 8;
        },
    )
    .await;
    let scrape = || async {
        let response = f.app.get_with_bearer("/metrics", "m3trics-token").await;
        assert_eq!(response.status(), 200);
        response.text().await.expect("text")
    };
    let per_document = "kuatia_sifen_responses_total{operation=\"result_lote\",code=\"0260\"}";
    let lot_done = "kuatia_sifen_responses_total{operation=\"result_lote\",code=\"0362\"}";
    let received = "kuatia_sifen_responses_total{operation=\"recep_lote\",code=\"0300\"}";
    let before = scrape().await;

    let docs = post_together((0..6).map(|i| {
        f.req(Method::POST, "/v1/documents")
            .header("Idempotency-Key", format!("otel-lot-{i}"))
            .json(&f.invoice(&format!("otel-lot-{i}")))
    }))
    .await;
    let settled = f.settle(&docs, Duration::from_secs(60)).await;
    assert!(settled.iter().all(|s| s["status"] == "accepted"), "{settled:?}");

    let after = scrape().await;
    assert!(
        series(&after, per_document) - series(&before, per_document) >= 2.0,
        "one 0260 per document of the lot:\n{after}"
    );
    assert!(series(&after, lot_done) > series(&before, lot_done), "{after}");
    assert!(series(&after, received) > series(&before, received), "{after}");
    crate::api::promtool_accepts(&after);
    f.app.stop().await;
}

/// Fails with a retry on its first attempt, then for good (the job has two attempts).
struct Flaky;

#[async_trait::async_trait]
impl kuatia_application::worker::JobHandler for Flaky {
    fn kind(&self) -> &'static str {
        "otel.flaky"
    }

    fn backoff(&self) -> kuatia_application::jobs::Backoff {
        kuatia_application::jobs::Backoff {
            base: Duration::from_millis(10),
            factor: 1.0,
            max: Duration::from_millis(10),
            jitter: 0.0,
        }
    }

    async fn run(
        &self,
        job: &kuatia_application::jobs::Job,
    ) -> Result<(), kuatia_application::worker::JobFailure> {
        match job.payload["succeed"].as_bool() {
            Some(true) => Ok(()),
            _ => Err(kuatia_application::worker::JobFailure::Retry(
                "SIFEN is down".into(),
            )),
        }
    }
}

#[tokio::test]
async fn job_attempts_are_counted_by_kind_and_outcome_with_their_run_time() {
    use kuatia_application::jobs::{JobState, NewJob};
    use kuatia_application::worker::{WorkerConfig, WorkerPool};
    let prometheus = kuatia_api::metrics::handle();
    let db = kuatia_tests::TestDb::new().await;
    let queue = db.open().await.jobs();
    let before = prometheus.render();
    let mut failing = NewJob::new(
        "otel.flaky",
        format!("otel-flaky-{}", uuid::Uuid::now_v7()),
        kuatia_domain::tenancy::TenantId::SYSTEM,
        json!({"succeed": false}),
    );
    failing.max_attempts = 2;
    let passing = NewJob::new(
        "otel.flaky",
        format!("otel-flaky-{}", uuid::Uuid::now_v7()),
        kuatia_domain::tenancy::TenantId::SYSTEM,
        json!({"succeed": true}),
    );
    for job in [&failing, &passing] {
        queue.enqueue(job).await.expect("enqueue");
    }
    let shutdown = tokio_util::sync::CancellationToken::new();
    let pool = WorkerPool::new(
        queue.clone(),
        WorkerConfig {
            workers: 1,
            poll_interval: Duration::from_millis(10),
            ..WorkerConfig::default()
        },
    )
    .with_handler(Arc::new(Flaky))
    .spawn(shutdown.clone());
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let dead = queue.get_by_key(&failing.idempotency_key).await.expect("get");
        let done = queue.get_by_key(&passing.idempotency_key).await.expect("get");
        if dead.is_some_and(|j| j.state == JobState::Dead)
            && done.is_some_and(|j| j.state == JobState::Succeeded)
        {
            break;
        }
        assert!(Instant::now() < deadline, "the jobs did not finish");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    shutdown.cancel();
    pool.await.expect("pool");
    let after = prometheus.render();
    for (outcome, n) in [("succeeded", 1.0), ("retry", 1.0), ("dead", 1.0)] {
        let name = format!("kuatia_job_attempts_total{{kind=\"otel.flaky\",outcome=\"{outcome}\"}}");
        assert_eq!(
            series(&after, &name) - series(&before, &name),
            n,
            "{name}:\n{after}"
        );
    }
    let runs = "kuatia_job_duration_seconds_count{kind=\"otel.flaky\"}";
    assert_eq!(series(&after, runs) - series(&before, runs), 3.0, "{after}");
}

#[tokio::test]
async fn methods_a_client_makes_up_share_one_metrics_label_and_never_grow_the_scrape() {
    // A client may send any token as the method; each used to become a label value of the
    // request metrics (4 000 one-kilobyte methods made /metrics 69 MB).
    let app = TestApp::spawn_with(|c| c.metrics_bearer_token = Some(Secret::new("m3trics-token"))).await;
    let client = reqwest::Client::new();
    for n in 0..50 {
        let method =
            Method::from_bytes(format!("FLOOD{n}{}", "X".repeat(1_000)).as_bytes()).expect("a method token");
        let response = client
            .request(method, format!("{}/v1/documents", app.base))
            .send()
            .await
            .expect("send");
        assert!(response.status().is_client_error(), "{}", response.status());
    }
    let response = app.get_with_bearer("/metrics", "m3trics-token").await;
    assert_eq!(response.status(), 200);
    let text = response.text().await.expect("text");
    assert!(!text.contains("FLOOD"), "a made-up method became a label");
    assert!(
        text.lines()
            .any(|l| l.starts_with("http_requests_total{") && l.contains("method=\"other\"")),
        "made-up methods counted as other"
    );
    app.stop().await;
}
