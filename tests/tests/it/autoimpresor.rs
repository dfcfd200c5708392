//! The autoimpresor channel end to end, black-box: documents posted over HTTP are numbered from
//! the channel's authorised range, refused outside it, rendered and accepted, and every printed
//! or voided number is reported to the channel's endpoint (a real HTTP server of the test).

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use chrono::{Duration as Days, Utc};
use kuatia_tests::{Ready, TestApp, hours_ago, id, post_together, send};
use reqwest::Method;
use serde_json::{Value, json};
use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

pub(crate) const API_KEY: &str = "autoimpresor-api-key-1a2b3c";

/// What the reporting endpoint received.
#[derive(Debug, Clone)]
pub(crate) struct Received {
    pub(crate) authorization: Option<String>,
    pub(crate) idempotency_key: Option<String>,
    pub(crate) body: Value,
    pub(crate) answered: u16,
}

/// The channel's reporting endpoint: records every request; answers 500 to the first
/// `fail_first` of them, 200 after.
#[derive(Clone, Default)]
pub(crate) struct Endpoint {
    pub(crate) received: Arc<Mutex<Vec<Received>>>,
    fail_first: Arc<Mutex<usize>>,
}

async fn receive(State(e): State<Endpoint>, headers: HeaderMap, body: axum::body::Bytes) -> StatusCode {
    let text = |n: &str| headers.get(n).and_then(|v| v.to_str().ok()).map(str::to_owned);
    let status = {
        let mut fail = e.fail_first.lock().expect("lock");
        if *fail > 0 {
            *fail -= 1;
            StatusCode::INTERNAL_SERVER_ERROR
        } else {
            StatusCode::OK
        }
    };
    e.received.lock().expect("lock").push(Received {
        authorization: text("authorization"),
        idempotency_key: text("idempotency-key"),
        body: serde_json::from_slice(&body).unwrap_or(Value::Null),
        answered: status.as_u16(),
    });
    status
}

impl Endpoint {
    /// Starts the endpoint on a free port; returns it and its URL.
    pub(crate) async fn start(fail_first: usize) -> (Self, String) {
        let endpoint = Self {
            received: Arc::default(),
            fail_first: Arc::new(Mutex::new(fail_first)),
        };
        let router = axum::Router::new()
            .route("/reports", axum::routing::post(receive))
            .with_state(endpoint.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let url = format!("http://{}/reports", listener.local_addr().expect("addr"));
        tokio::spawn(async move {
            let _ = axum::serve(listener, router).await;
        });
        (endpoint, url)
    }

    pub(crate) fn received(&self) -> Vec<Received> {
        self.received.lock().expect("lock").clone()
    }
}

/// A service whose tenant's company has an autoimpresor channel reporting to [`Endpoint`]; it
/// reads as its tenant (`f.status(…)`, `f.until(…)`).
pub(crate) struct Fx {
    pub(crate) app: TestApp,
    pub(crate) r: Ready,
    pub(crate) endpoint: Endpoint,
}

impl std::ops::Deref for Fx {
    type Target = Ready;
    fn deref(&self) -> &Ready {
        &self.r
    }
}

impl Fx {
    /// A tenant with a company whose autoimpresor channel prints `range` and reports to a test
    /// endpoint (failing its first `fail_first` requests); valid from `valid` days ago to
    /// `valid` days ahead.
    pub(crate) async fn new(slug: &str, range: (u64, u64), valid: i64, fail_first: usize) -> Self {
        Self::with_workers(slug, range, valid, fail_first, 4).await
    }

    /// [`Fx::new`] with `workers` job workers (0: an API-only instance that numbers nothing).
    pub(crate) async fn with_workers(
        slug: &str,
        range: (u64, u64),
        valid: i64,
        fail_first: usize,
        workers: usize,
    ) -> Self {
        let (endpoint, url) = Endpoint::start(fail_first).await;
        let app = TestApp::spawn_with(|c| {
            c.rate_limit_per_key = 1_000_000;
            c.workers = workers;
        })
        .await;
        // The sifen channel (the company's default) never gets these documents.
        let r = app.ready_at(slug, "http://127.0.0.1:9").await;
        let today = Utc::now().date_naive();
        let (status, channel) = send(
            app.as_key(Method::POST, "/v1/emission-channels", &r.key, &r.tenant)
                .json(&json!({
                    "company_id": r.company,
                    "channel": "autoimpresor",
                    "credentials": {"endpoint": url, "api_key": API_KEY},
                    "autoimpresor": {
                        "authorization": "AUT-2026-001",
                        "declared_software": "kuatia",
                        "timbrado": "87654321",
                        "valid_from": (today - Days::days(valid)).to_string(),
                        "valid_to": (today + Days::days(valid)).to_string(),
                        "branch_id": r.branch,
                        "issuance_point_id": r.point,
                        "range_start": range.0,
                        "range_end": range.1,
                    },
                })),
        )
        .await;
        assert_eq!(status, 201, "{channel}");
        Self { app, r, endpoint }
    }

    pub(crate) fn receipt(&self, external_id: &str) -> Value {
        let mut doc = self.invoice(external_id);
        doc["channel"] = json!("autoimpresor");
        doc
    }

    /// Posts with a fresh Idempotency-Key; asserts 201, `queued` and the autoimpresor channel,
    /// returns the id.
    pub(crate) async fn post(&self, doc: &Value) -> String {
        let body = self.r.post(doc).await;
        assert_eq!(body["status"], "queued", "{body}");
        assert_eq!(body["channel"], "autoimpresor", "{body}");
        id(&body)
    }
}

pub(crate) fn types(timeline: &[Value]) -> Vec<String> {
    timeline
        .iter()
        .map(|e| e["type"].as_str().unwrap_or_default().to_owned())
        .collect()
}

fn numbered(s: &Value) -> bool {
    s["number"].is_string() && matches!(s["status"].as_str(), Some("rendering" | "accepted"))
}

#[tokio::test]
async fn two_hundred_concurrent_documents_get_two_hundred_consecutive_numbers_and_the_201st_is_refused() {
    let f = Fx::new("auto-range", (1, 200), 30, 0).await;
    let docs = post_together((0..200).map(|n| {
        f.req(Method::POST, "/v1/documents")
            .header("Idempotency-Key", format!("auto-{n}"))
            .json(&f.receipt(&format!("AUTO-{n}")))
    }))
    .await;
    let all = f.until(&docs, Duration::from_secs(180), numbered).await;
    let numbers: Vec<String> = all
        .iter()
        .map(|s| s["number"].as_str().expect("number").to_owned())
        .collect();
    let distinct: BTreeSet<&String> = numbers.iter().collect();
    assert_eq!(distinct.len(), 200, "200 distinct numbers");
    let expected: BTreeSet<String> = (1..=200).map(|n| format!("001-001-{n:07}")).collect();
    assert_eq!(
        distinct.into_iter().cloned().collect::<BTreeSet<_>>(),
        expected,
        "exactly 1..=200, no gap"
    );

    // The 201st: the range is used up, so intake refuses it as a configuration error and
    // stores nothing.
    let (status, body) = send(
        f.req(Method::POST, "/v1/documents")
            .header("Idempotency-Key", "auto-201")
            .json(&f.receipt("AUTO-201")),
    )
    .await;
    assert_eq!(
        (status, body["code"].as_str()),
        (400, Some("configuration_error")),
        "{body}"
    );
    let errors = body["details"]["errors"].as_array().cloned().unwrap_or_default();
    assert_eq!(errors.len(), 1, "{body}");
    assert_eq!(errors[0]["field"], "configuration.autoimpresor", "{body}");
    assert!(
        errors[0]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("exhausted"),
        "{body}"
    );
    let (status, listed) = send(f.req(Method::GET, "/v1/documents?external_id=AUTO-201")).await;
    assert_eq!(status, 200, "{listed}");
    assert_eq!(listed["documents"].as_array().map(Vec::len), Some(0), "{listed}");

    // The 90 % warning: once, on the 180th number.
    assert_eq!(f.count_events("NumberingRangeNearlyExhausted").await, 1);
    let at_mark = all
        .iter()
        .zip(&docs)
        .find(|(s, _)| s["number"] == "001-001-0000180")
        .map(|(_, d)| d.clone())
        .expect("the 180th");
    let timeline = f.timeline(&at_mark).await;
    let warning = timeline
        .iter()
        .find(|e| e["type"] == "NumberingRangeNearlyExhausted")
        .unwrap_or_else(|| panic!("the warning in {:?}", types(&timeline)));
    assert_eq!(warning["data"]["NumberingRangeNearlyExhausted"]["used"], 180);
    assert_eq!(warning["data"]["NumberingRangeNearlyExhausted"]["size"], 200);
    f.app.stop().await;
}

/// Readiness counts an autoimpresor range by its series (not by the number the channel was
/// configured with): how much is used, a warning from 90 %, and a range used up is not ready.
/// The console's home says when a range is nearly used.
#[tokio::test]
async fn readiness_and_the_console_say_how_much_of_a_range_is_used_and_warn_from_ninety_per_cent() {
    let f = Fx::new("auto-left", (1, 10), 30, 0).await;
    let numbering = |f: &Fx| {
        let request = f.req(Method::GET, "/v1/emission-channels/readiness");
        async move {
            let (status, body) = send(request).await;
            assert_eq!(status, 200, "{body}");
            body["channels"]
                .as_array()
                .and_then(|c| c.iter().find(|c| c["channel"] == "autoimpresor"))
                .cloned()
                .unwrap_or_else(|| panic!("an autoimpresor channel in {body}"))
        }
    };
    let fresh = numbering(&f).await;
    assert_eq!(fresh["numbering"]["left"], 10, "{fresh}");
    assert_eq!(fresh["numbering"]["nearly_exhausted"], false, "{fresh}");

    let nine: Vec<String> = {
        let mut ids = Vec::new();
        for n in 0..9 {
            ids.push(f.post(&f.receipt(&format!("LEFT-{n}"))).await);
        }
        ids
    };
    f.until(&nine, Duration::from_secs(120), numbered).await;
    let nearly = numbering(&f).await;
    assert_eq!(nearly["numbering"]["next_number"], 10, "{nearly}");
    assert_eq!(nearly["numbering"]["left"], 1, "{nearly}");
    assert_eq!(nearly["numbering"]["used_percent"], 90, "{nearly}");
    assert_eq!(nearly["numbering"]["nearly_exhausted"], true, "{nearly}");
    assert_eq!(nearly["ready"], true, "one number left: {nearly}");

    crate::identity::join(&f.app, &f.r.tenant, &f.r.key, "caja@example.com.py", "owner").await;
    let mut v = crate::console::Visitor::new(&f.app.base);
    v.log_in("caja@example.com.py", "a long enough secret").await;
    let home = v.get("/console").await;
    assert!(
        home.body.contains(
            "Rango de numeración del timbrado 87654321 casi agotado: 90 % usado; números restantes: 1."
        ),
        "{}",
        home.body
    );

    let last = f.post(&f.receipt("LEFT-9")).await;
    f.until(&[last], Duration::from_secs(60), numbered).await;
    let used_up = numbering(&f).await;
    assert_eq!(used_up["numbering"]["left"], 0, "{used_up}");
    assert_eq!(used_up["numbering"]["used_percent"], 100, "{used_up}");
    assert_eq!(used_up["ready"], false, "a range used up cannot issue: {used_up}");
    let check = used_up["checks"]
        .as_array()
        .and_then(|c| c.iter().find(|c| c["name"] == "numbering_range"))
        .cloned()
        .unwrap_or_default();
    assert_eq!(check["ok"], false, "{used_up}");
    f.app.stop().await;
}

#[tokio::test]
async fn a_document_issued_outside_the_validity_dates_is_refused_with_a_configuration_error() {
    let f = Fx::new("auto-validity", (1, 50), 10, 0).await;
    // Valid from 10 days ago: a document issued 20 days ago passes intake (today is inside the
    // validity) but cannot be printed on this timbrado.
    let mut early = f.receipt("EARLY");
    early["issue_datetime"] = json!(hours_ago(20 * 24));
    let early = f.post(&early).await;
    let ok = f.post(&f.receipt("ON-TIME")).await;
    let refused = f
        .until(std::slice::from_ref(&early), Duration::from_secs(30), |s| {
            s["status"] == "failed_terminal"
        })
        .await;
    assert_eq!(refused[0]["number"], Value::Null);
    assert_eq!(
        refused[0]["errors"][0]["code"], "configuration_error",
        "{}",
        refused[0]
    );
    assert!(
        refused[0]["errors"][0]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("issue date"),
        "{}",
        refused[0]
    );
    // The refused document used no number: the next one gets 1.
    let numbered = f
        .until(std::slice::from_ref(&ok), Duration::from_secs(30), numbered)
        .await;
    assert_eq!(numbered[0]["number"], "001-001-0000001");
    // It has no number to void.
    let (status, body) = send(
        f.req(Method::POST, &format!("/v1/documents/{early}/inutilize"))
            .json(&json!({"reason": "no fue impreso"})),
    )
    .await;
    assert_eq!(status, 409, "{body}");
    f.app.stop().await;
}

#[tokio::test]
async fn a_printed_number_is_accepted_and_reported_and_a_voided_one_too_after_a_500() {
    // The endpoint fails its first request: the report is retried.
    let f = Fx::new("auto-report", (1, 50), 30, 1).await;
    let doc = f.post(&f.receipt("REPORTED")).await;
    let accepted = f
        .until(std::slice::from_ref(&doc), Duration::from_secs(60), |s| {
            s["status"] == "accepted"
        })
        .await;
    assert_eq!(accepted[0]["number"], "001-001-0000001");
    let timeline = f.timeline(&doc).await;
    let kinds = types(&timeline);
    for expected in [
        "DocumentQueued",
        "DocumentRenderingStarted",
        "ArtifactRecorded",
        "DocumentRendered",
    ] {
        assert!(kinds.iter().any(|k| k == expected), "{expected} in {kinds:?}");
    }
    let statuses: Vec<&str> = timeline.iter().filter_map(|e| e["status"].as_str()).collect();
    assert!(statuses.contains(&"rendering"), "{statuses:?}");

    // Reported: a 500 first, then 200; the report is recorded on the document.
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while !types(&f.timeline(&doc).await)
        .iter()
        .any(|t| t == "NumberReported")
    {
        assert!(
            std::time::Instant::now() < deadline,
            "no report recorded: {:?}",
            f.endpoint.received()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let received = f.endpoint.received();
    assert_eq!(
        received.iter().map(|r| r.answered).collect::<Vec<_>>(),
        vec![500, 200],
        "{received:?}"
    );
    let report = &received[1];
    assert_eq!(
        report.authorization.as_deref(),
        Some(&*format!("Bearer {API_KEY}"))
    );
    assert_eq!(report.idempotency_key.as_deref(), Some(&*format!("{doc}:issued")));
    assert_eq!(report.body, received[0].body, "a retry sends the same report");
    let body = &report.body;
    assert_eq!(body["event"], "issued");
    assert_eq!(body["document_id"], doc.as_str());
    assert_eq!(body["external_id"], "REPORTED");
    assert_eq!(body["authorization"], "AUT-2026-001");
    assert_eq!(body["timbrado"], "87654321");
    assert_eq!(body["establishment"], "001");
    assert_eq!(body["issuance_point"], "001");
    assert_eq!(body["number"], "0000001");
    assert_eq!(body["formatted_number"], "001-001-0000001");
    assert_eq!(body["issuer_ruc"], "80069563-1");
    assert!(
        body["printable_sha256"].as_str().is_some_and(|s| s.len() == 64),
        "{body}"
    );

    // The printable PDF is an artifact, downloadable through its presigned URL.
    let (status, artifacts) = send(f.req(Method::GET, &format!("/v1/documents/{doc}/artifacts"))).await;
    assert_eq!(status, 200, "{artifacts}");
    let pdf = artifacts
        .as_array()
        .and_then(|a| a.iter().find(|x| x["type"] == "printable_pdf"))
        .cloned()
        .unwrap_or_else(|| panic!("a printable in {artifacts}"));
    assert_eq!(pdf["sha256"], body["printable_sha256"]);
    let response = f
        .app
        .client
        .get(pdf["download_url"].as_str().expect("url"))
        .send()
        .await
        .expect("download");
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["content-type"], "application/pdf");
    assert_eq!(
        response.headers()["content-disposition"],
        "attachment; filename=\"001-001-0000001-printable-pdf-v1.pdf\""
    );
    let bytes = response.bytes().await.expect("bytes");
    assert!(bytes.starts_with(b"%PDF"), "a PDF");

    // Voided: reported as such.
    let (status, body) = send(
        f.req(Method::POST, &format!("/v1/documents/{doc}/inutilize"))
            .json(&json!({"reason": "papel dañado en la impresora"})),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let voided: Vec<Received> = f
            .endpoint
            .received()
            .into_iter()
            .filter(|r| r.body["event"] == "voided")
            .collect();
        if let Some(v) = voided.iter().find(|r| r.answered == 200) {
            assert_eq!(v.body["number"], "0000001");
            assert_eq!(v.body["void_reason"], "papel dañado en la impresora");
            assert_eq!(v.idempotency_key.as_deref(), Some(&*format!("{doc}:voided")));
            break;
        }
        assert!(std::time::Instant::now() < deadline, "no void report");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let reported = f
            .timeline(&doc)
            .await
            .iter()
            .filter(|e| e["type"] == "NumberReported")
            .count();
        if reported == 2 {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{reported} reports recorded"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    f.app.stop().await;
}

#[tokio::test]
async fn documents_queued_before_the_range_ran_out_are_refused_by_the_channel_without_a_number() {
    // An API-only instance queues four documents for a range of three: none is numbered yet, so
    // intake cannot know; the instance that numbers them refuses the one left over.
    let f = Fx::with_workers("auto-race", (1, 3), 30, 0, 0).await;
    let mut docs = Vec::new();
    for n in 0..4 {
        docs.push(f.post(&f.receipt(&format!("RACE-{n}"))).await);
    }
    let worker = f.app.second_instance(|c| c.workers = 2).await;
    let all = f
        .until(&docs, Duration::from_secs(120), |s| {
            matches!(s["status"].as_str(), Some("accepted" | "failed_terminal"))
        })
        .await;
    let accepted: BTreeSet<String> = all
        .iter()
        .filter(|s| s["status"] == "accepted")
        .map(|s| s["number"].as_str().expect("number").to_owned())
        .collect();
    let expected: BTreeSet<String> = (1..=3).map(|n| format!("001-001-{n:07}")).collect();
    assert_eq!(accepted, expected, "{all:?}");
    let refused: Vec<&Value> = all.iter().filter(|s| s["status"] == "failed_terminal").collect();
    assert_eq!(refused.len(), 1, "{all:?}");
    assert_eq!(refused[0]["number"], Value::Null, "{}", refused[0]);
    let late = &docs[all
        .iter()
        .position(|s| s["status"] == "failed_terminal")
        .expect("the refused")];
    let (status, detail) = send(f.req(Method::GET, &format!("/v1/documents/{late}"))).await;
    assert_eq!(status, 200, "{detail}");
    let errors = detail["summary"]["errors"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert_eq!(errors.len(), 1, "{detail}");
    assert_eq!(errors[0]["code"], "configuration_error", "{detail}");
    assert!(
        errors[0]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("exhausted"),
        "{detail}"
    );
    let timeline = f.timeline(late).await;
    let refusal = timeline
        .iter()
        .find(|e| e["type"] == "DocumentIssuanceRefused")
        .unwrap_or_else(|| panic!("a refusal in {timeline:?}"));
    assert_eq!(refusal["status"], "failed_terminal");
    assert_eq!(
        refusal["data"]["DocumentIssuanceRefused"]["code"],
        "configuration_error"
    );
    worker.stop().await.expect("stop the numbering instance");
    f.app.stop().await;
}

#[tokio::test]
async fn two_instances_numbering_one_range_never_repeat_or_skip_a_number() {
    let f = Fx::new("auto-two", (1, 60), 30, 0).await;
    // A second instance on the same database: its workers draw from the same series, with their
    // own in-process locks, so only the number series projection keeps them apart.
    let second = f
        .app
        .second_instance(|c| {
            c.rate_limit_per_key = 1_000_000;
            c.workers = 4;
        })
        .await;
    let bases = [f.app.base.clone(), format!("http://{}", second.addr)];
    let docs = post_together((0..60).map(|n| {
        f.app
            .client
            .post(format!("{}/v1/documents", bases[n % 2]))
            .bearer_auth(&f.r.key)
            .header("X-Tenant-Id", &f.r.tenant)
            .header("Idempotency-Key", format!("two-{n}"))
            .json(&f.receipt(&format!("TWO-{n}")))
    }))
    .await;
    let all = f.until(&docs, Duration::from_secs(120), numbered).await;
    let numbers: BTreeSet<String> = all
        .iter()
        .map(|s| s["number"].as_str().expect("number").to_owned())
        .collect();
    let expected: BTreeSet<String> = (1..=60).map(|n| format!("001-001-{n:07}")).collect();
    assert_eq!(numbers, expected, "60 distinct numbers, 1..=60");
    second.stop().await.expect("stop the second instance");
    f.app.stop().await;
}

#[tokio::test]
async fn a_report_endpoint_that_redirects_is_not_followed_and_gets_no_api_key_elsewhere() {
    // The reporting client followed redirects as GETs, with the channel's API key in
    // Authorization, to wherever the Location pointed.
    let (target, target_url) = Endpoint::start(0).await;
    let location = target_url.clone();
    let redirector = axum::Router::new().route(
        "/reports",
        axum::routing::post(move || {
            let location = location.clone();
            async move {
                (
                    StatusCode::TEMPORARY_REDIRECT,
                    [(axum::http::header::LOCATION, location)],
                )
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let redirecting_url = format!("http://{}/reports", listener.local_addr().expect("addr"));
    tokio::spawn(async move {
        let _ = axum::serve(listener, redirector).await;
    });
    let f = Fx::new("redirected", (1, 10), 30, 0).await;
    // Point the channel at the redirecting endpoint.
    let (status, channels) = send(f.req(Method::GET, "/v1/emission-channels")).await;
    assert_eq!(status, 200, "{channels}");
    let channel = channels
        .as_array()
        .expect("channels")
        .iter()
        .find(|c| c["channel"] == "autoimpresor")
        .expect("the autoimpresor channel")["id"]
        .as_str()
        .expect("id")
        .to_owned();
    let (status, patched) = send(
        f.req(Method::PATCH, &format!("/v1/emission-channels/{channel}"))
            .json(&json!({"credentials": {"endpoint": redirecting_url, "api_key": API_KEY}})),
    )
    .await;
    assert_eq!(status, 200, "{patched}");
    let doc = f.post(&f.receipt("REDIRECTED-1")).await;
    f.until(std::slice::from_ref(&doc), Duration::from_secs(20), |s| {
        s["status"] == "accepted"
    })
    .await;
    // Reports are attempted (and fail on the 307); nothing reaches the redirect's target.
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(target.received().is_empty(), "{:?}", target.received());
    assert!(f.endpoint.received().is_empty());
    f.app.stop().await;
}
