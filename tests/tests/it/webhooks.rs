//! Webhooks and customer delivery, black-box (issue 7): the real service with its
//! SIFEN channel on the simulator, a real HTTP receiver on a local port, a real SMTP server, and
//! every signature checked by `tests/scripts/verify_webhook.py` (Python + `openssl dgst`), which
//! shares no code with ours.

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use kuatia_infrastructure::sifen_sim::SimConfig;
use kuatia_tests::{ScratchDir, Simulated, TestApp, id, send, upload_certificate};
use reqwest::Method;
use serde_json::{Value, json};
use std::sync::atomic::{AtomicU16, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

/// One request the receiver got.
#[derive(Debug, Clone)]
pub(crate) struct Received {
    pub(crate) id: String,
    pub(crate) event: String,
    pub(crate) signature: String,
    pub(crate) body: String,
}

#[derive(Clone, Default)]
pub(crate) struct Inbox {
    got: Arc<Mutex<Vec<Received>>>,
    /// What to answer (0: 200).
    answer: Arc<AtomicU16>,
}

impl Inbox {
    /// Answers `status` from now on (0: 200).
    pub(crate) fn answer(&self, status: u16) {
        self.answer.store(status, Ordering::SeqCst);
    }

    pub(crate) fn all(&self) -> Vec<Received> {
        self.got.lock().expect("inbox").clone()
    }
}

async fn receive(State(inbox): State<Inbox>, headers: HeaderMap, body: String) -> StatusCode {
    let header = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_owned()
    };
    inbox.got.lock().expect("inbox").push(Received {
        id: header("x-webhook-id"),
        event: header("x-webhook-event"),
        signature: header("x-webhook-signature"),
        body,
    });
    match inbox.answer.load(Ordering::SeqCst) {
        0 => StatusCode::OK,
        code => StatusCode::from_u16(code).unwrap_or(StatusCode::OK),
    }
}

/// A receiver on `port` (0: any); returns its port and the task serving it.
pub(crate) async fn start_receiver(inbox: Inbox, port: u16) -> (u16, tokio::task::JoinHandle<()>) {
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", port))
        .await
        .expect("bind the receiver");
    let port = listener.local_addr().expect("addr").port();
    let app = axum::Router::new()
        .route("/hook", axum::routing::post(receive))
        .with_state(inbox);
    let task = tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    (port, task)
}

/// A port nothing listens on (yet).
pub(crate) async fn free_port() -> u16 {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    listener.local_addr().expect("addr").port()
}

/// Checks a delivery's signature with the independent verifier, against each secret given.
pub(crate) fn verify(received: &Received, secrets: &[&str]) -> bool {
    let dir = ScratchDir::new();
    let body = dir.0.join("body.json");
    std::fs::write(&body, &received.body).expect("write body");
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/verify_webhook.py");
    let out = std::process::Command::new("python3")
        .arg(script)
        .arg(&body)
        .arg(&received.signature)
        .args(secrets)
        .output()
        .expect("python3 is needed for the independent signature check");
    if !out.status.success() {
        eprintln!(
            "verifier: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    out.status.success()
}

/// A service whose tenant's sifen channel sends to the simulator, with deliveries retried fast.
async fn served(adjust: impl FnOnce(&mut kuatia_infrastructure::config::Config)) -> Simulated {
    Simulated::named("hooks", SimConfig::default(), |c| {
        // 1 min → 60 ms, 5 min → 300 ms, 30 min → 1.8 s, 2 h → 7.2 s, …
        c.delivery_retry_scale = 0.001;
        adjust(c);
    })
    .await
}

async fn create_endpoint(f: &Simulated, url: &str, events: Value) -> (String, String) {
    let (status, body) = send(
        f.req(Method::POST, "/v1/webhooks")
            .json(&json!({"url": url, "events": events, "description": "ERP"})),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    (id(&body), body["secret"].as_str().expect("secret").to_owned())
}

/// Posts this company's invoice `external_id`, changed by `extra`; returns the id.
async fn post(f: &Simulated, external_id: &str, extra: impl FnOnce(&mut Value)) -> String {
    let mut doc = f.invoice(external_id);
    extra(&mut doc);
    id(&f.r.post(&doc).await)
}

async fn accepted(f: &Simulated, doc: &str) {
    f.wait_status(doc, "accepted", Duration::from_secs(30)).await;
}

async fn deliveries(f: &Simulated, endpoint: &str, query: &str) -> (u16, Value) {
    send(f.req(Method::GET, &format!("/v1/webhooks/{endpoint}/deliveries{query}"))).await
}

/// Waits until the endpoint has `n` deliveries, all delivered.
async fn all_delivered(f: &Simulated, endpoint: &str, n: usize, within: Duration) -> Vec<Value> {
    let deadline = std::time::Instant::now() + within;
    loop {
        let (status, body) = deliveries(f, endpoint, "?limit=100").await;
        assert_eq!(status, 200, "{body}");
        let rows = body.as_array().cloned().unwrap_or_default();
        if rows.len() == n && rows.iter().all(|d| d["status"] == "delivered") {
            return rows;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "not all {n} deliveries delivered after {within:?}: {body}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn webhooks_survive_a_receiver_outage_in_order_signed_and_replayable() {
    let f = served(|_| {}).await;
    // The receiver is down (nothing listens on its port) when the events happen.
    let port = free_port().await;
    let url = format!("http://127.0.0.1:{port}/hook");
    let (endpoint, secret) = create_endpoint(&f, &url, json!(["*"])).await;
    assert!(secret.starts_with("whsec_"), "{secret}");

    let docs = [
        post(&f, "HOOK-1", |_| {}).await,
        post(&f, "HOOK-2", |_| {}).await,
        post(&f, "HOOK-3", |_| {}).await,
    ];
    for doc in &docs {
        accepted(&f, doc).await;
    }
    // A second event of one document: cancelled after accepted.
    let (status, body) = send(
        f.req(Method::POST, &format!("/v1/documents/{}/cancel", docs[0]))
            .json(&json!({"reason": "Error en la emision del documento"})),
    )
    .await;
    assert_eq!(status, 200, "{body}");

    // Attempts fail and are rescheduled while the receiver is down.
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    let outage_delivery = loop {
        let (_, body) = deliveries(&f, &endpoint, "?status=retrying").await;
        let retrying = body.as_array().cloned().unwrap_or_default();
        if retrying.len() >= 3 {
            let d = &retrying[0];
            assert!(d["attempts"].as_u64() >= Some(1), "{d}");
            assert!(d["last_error"].is_string(), "{d}");
            assert!(d["next_attempt_at"].is_string(), "{d}");
            break d["id"].as_str().expect("id").to_owned();
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no retrying deliveries: {body}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    tokio::time::sleep(Duration::from_millis(1500)).await;

    // The receiver comes up: everything arrives, none lost.
    let inbox = Inbox::default();
    let (_, _server) = start_receiver(inbox.clone(), port).await;
    let delivered = all_delivered(&f, &endpoint, 4, Duration::from_secs(60)).await;
    let got = inbox.all();
    let mut types: Vec<&str> = delivered
        .iter()
        .map(|d| d["event_type"].as_str().unwrap_or(""))
        .collect();
    types.sort_unstable();
    assert_eq!(
        types,
        vec![
            "document.accepted",
            "document.accepted",
            "document.accepted",
            "document.cancelled"
        ]
    );
    for d in &delivered {
        assert!(
            got.iter().any(|r| r.id == d["event_id"]),
            "{d} never reached the receiver"
        );
    }
    // Every request is signed with the endpoint's secret (checked independently), carries the
    // contract's fields, and its headers agree with its body.
    for r in &got {
        assert!(verify(r, &[&secret]), "bad signature on {r:?}");
        let body: Value = serde_json::from_str(&r.body).expect("json body");
        assert_eq!(body["id"], r.id.as_str());
        assert_eq!(body["type"], r.event.as_str());
        for field in [
            "document_id",
            "external_id",
            "status",
            "tenant_id",
            "company_id",
            "cdc",
        ] {
            assert!(body[field].is_string(), "{field} missing in {body}");
        }
    }
    // In order per document: the first document's `accepted` arrived before its `cancelled`.
    let of_first: Vec<String> = got
        .iter()
        .filter_map(|r| {
            let body: Value = serde_json::from_str(&r.body).ok()?;
            (body["document_id"] == docs[0].as_str()).then(|| body["type"].as_str().unwrap_or("").to_owned())
        })
        .collect();
    let first_cancelled = of_first
        .iter()
        .position(|t| t == "document.cancelled")
        .expect("cancelled");
    assert!(
        of_first[..first_cancelled]
            .iter()
            .any(|t| t == "document.accepted"),
        "{of_first:?}"
    );
    let cancelled: Value = serde_json::from_str(
        &got.iter()
            .find(|r| r.event == "document.cancelled")
            .expect("cancelled")
            .body,
    )
    .expect("json");
    assert_eq!(cancelled["status"], "cancelled");
    assert_eq!(cancelled["external_id"], "HOOK-1");

    // Replay re-sends the stored delivery: the same event id and the very same body.
    let target = &delivered[0];
    let before = inbox.all().len();
    let (status, body) = send(
        f.req(Method::POST, &format!("/v1/webhooks/{endpoint}/replay"))
            .json(&json!({"delivery_id": target["id"]})),
    )
    .await;
    assert_eq!(status, 202, "{body}");
    assert_eq!(body["event_id"], target["event_id"]);
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while inbox.all().len() == before {
        assert!(std::time::Instant::now() < deadline, "the replay never arrived");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let all = inbox.all();
    let replayed = all.last().expect("replayed");
    assert_eq!(replayed.id, target["event_id"].as_str().expect("event id"));
    let original = all.iter().find(|r| r.id == replayed.id).expect("original");
    assert_eq!(original.body, replayed.body);
    assert!(verify(replayed, &[&secret]));
    all_delivered(&f, &endpoint, 4, Duration::from_secs(10)).await;

    // A delivery's page: the body it sends and every attempt, the outage's included.
    let detail = |delivery: String| {
        let f = &f;
        let endpoint = &endpoint;
        async move {
            let (status, detail) = send(f.req(
                Method::GET,
                &format!("/v1/webhooks/{endpoint}/deliveries/{delivery}"),
            ))
            .await;
            assert_eq!(status, 200, "{detail}");
            detail
        }
    };
    let round = |detail: &Value, replay: u64| -> Vec<Value> {
        let history = detail["history"].as_array().cloned().unwrap_or_default();
        let round: Vec<Value> = history.into_iter().filter(|a| a["replay"] == replay).collect();
        for (n, a) in round.iter().enumerate() {
            assert_eq!(a["attempt"], n as u64 + 1, "numbered from 1: {detail}");
        }
        round
    };
    let outage = detail(outage_delivery).await;
    let first = round(&outage, 0);
    assert!(
        first.len() >= 2,
        "the outage's attempts and the delivery: {outage}"
    );
    let (last, failed) = first.split_last().expect("attempts");
    assert_eq!(
        (&last["status"], &last["status_code"]),
        (&json!("delivered"), &json!(200)),
        "{outage}"
    );
    for a in failed {
        assert_eq!(a["status"], "retrying", "{outage}");
        assert!(
            a["status_code"].is_null() && a["error"].is_string(),
            "no receiver: {a}"
        );
    }
    let replayed_detail = detail(target["id"].as_str().expect("id").to_owned()).await;
    assert_eq!(replayed_detail["event_id"], target["event_id"]);
    assert_eq!(replayed_detail["replays"], 1, "{replayed_detail}");
    assert_eq!(
        replayed_detail["payload"],
        serde_json::from_str::<Value>(&original.body).expect("json"),
        "the payload is what was sent"
    );
    assert_eq!(
        round(&replayed_detail, 0).last().map(|a| a["status"].clone()),
        Some(json!("delivered"))
    );
    let again = round(&replayed_detail, 1);
    assert_eq!(again.len(), 1, "{replayed_detail}");
    assert_eq!(again[0]["status"], "delivered", "{replayed_detail}");
    // Another endpoint's id, or an id of nothing, is 404.
    for path in [
        format!("/v1/webhooks/{endpoint}/deliveries/{}", uuid::Uuid::now_v7()),
        format!(
            "/v1/webhooks/{}/deliveries/{}",
            uuid::Uuid::now_v7(),
            target["id"].as_str().expect("id")
        ),
    ] {
        let (status, body) = send(f.req(Method::GET, &path)).await;
        assert_eq!(status, 404, "{path}: {body}");
    }

    // The listing's filters and limits.
    let (status, body) = deliveries(&f, &endpoint, "?status=delivered&limit=2").await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body.as_array().map(Vec::len), Some(2));
    for bad in ["?limit=0", "?limit=101", "?status=lost"] {
        let (status, body) = deliveries(&f, &endpoint, bad).await;
        assert_eq!(status, 400, "{bad}: {body}");
        assert_eq!(body["code"], "validation_error");
    }
    f.app.stop().await;
}

#[tokio::test]
async fn endpoints_are_managed_tested_rotated_and_deleted() {
    let f = served(|c| {
        c.metrics_bearer_token = Some(kuatia_infrastructure::config::Secret::new("scrape"));
    })
    .await;
    let inbox = Inbox::default();
    let (port, _server) = start_receiver(inbox.clone(), 0).await;
    let url = format!("http://127.0.0.1:{port}/hook");
    let (endpoint, secret) =
        create_endpoint(&f, &url, json!(["document.accepted", "document.rejected"])).await;

    // Unknown events and bad URLs are refused.
    for (body, code) in [
        (
            json!({"url": url, "events": ["document.exploded"]}),
            "unknown_event",
        ),
        (json!({"url": url, "events": []}), "required"),
        (
            json!({"url": "ftp://example.com", "events": ["*"]}),
            "invalid_url",
        ),
    ] {
        let (status, answer) = send(f.req(Method::POST, "/v1/webhooks").json(&body)).await;
        assert_eq!(status, 400, "{answer}");
        assert_eq!(answer["details"]["errors"][0]["code"], code, "{answer}");
    }

    // The listing shows no secret.
    let (status, list) = send(f.req(Method::GET, "/v1/webhooks")).await;
    assert_eq!(status, 200, "{list}");
    assert_eq!(list.as_array().map(Vec::len), Some(1));
    assert!(list[0].get("secret").is_none(), "{list}");
    assert_eq!(list[0]["active"], true);

    // test: a signed webhook.test now, answered with the receiver's status.
    let (status, body) = send(f.req(Method::POST, &format!("/v1/webhooks/{endpoint}/test"))).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["delivered"], true, "{body}");
    assert_eq!(body["status_code"], 200, "{body}");
    let test = inbox.all().last().cloned().expect("the test arrived");
    assert_eq!(test.event, "webhook.test");
    assert!(verify(&test, &[&secret]));
    inbox.answer.store(500, Ordering::SeqCst);
    let (_, body) = send(f.req(Method::POST, &format!("/v1/webhooks/{endpoint}/test"))).await;
    assert_eq!(body["delivered"], false, "{body}");
    assert_eq!(body["status_code"], 500, "{body}");
    assert_eq!(body["delivery"]["status"], "failed", "{body}");
    inbox.answer.store(0, Ordering::SeqCst);

    // rotate-secret: a new secret, and both sign for 24 h.
    let (status, rotated) =
        send(f.req(Method::POST, &format!("/v1/webhooks/{endpoint}/rotate-secret"))).await;
    assert_eq!(status, 200, "{rotated}");
    let new_secret = rotated["secret"].as_str().expect("secret").to_owned();
    assert_ne!(new_secret, secret);
    assert!(rotated["previous_secret_expires_at"].is_string(), "{rotated}");
    send(f.req(Method::POST, &format!("/v1/webhooks/{endpoint}/test"))).await;
    let test = inbox.all().last().cloned().expect("the test arrived");
    assert_eq!(test.signature.matches("v1=").count(), 2, "{}", test.signature);
    assert!(verify(&test, &[&new_secret, &secret]));

    // PATCH changes what it names.
    let (status, patched) = send(
        f.req(Method::PATCH, &format!("/v1/webhooks/{endpoint}"))
            .json(&json!({"events": ["*"], "description": "ERP prod"})),
    )
    .await;
    assert_eq!(status, 200, "{patched}");
    assert_eq!(patched["events"], json!(["*"]));
    assert_eq!(patched["url"], url.as_str());

    // Only subscribed events: an endpoint for `document.rejected` gets no `accepted`.
    let (rejected_only, _) = create_endpoint(&f, &url, json!(["document.rejected"])).await;
    let doc = post(&f, "HOOK-SUB", |_| {}).await;
    accepted(&f, &doc).await;
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        let (_, rows) = deliveries(&f, &endpoint, "?status=delivered").await;
        if rows
            .as_array()
            .is_some_and(|r| r.iter().any(|d| d["event_type"] == "document.accepted"))
        {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no accepted delivery: {rows}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let (_, none) = deliveries(&f, &rejected_only, "").await;
    assert_eq!(none, json!([]));

    // Metrics: deliveries by status, attempts, latency.
    let metrics = f
        .app
        .get_with_bearer("/metrics", "scrape")
        .await
        .text()
        .await
        .expect("metrics");
    for line in [
        "kuatia_webhook_deliveries{status=\"delivered\"}",
        "kuatia_webhook_deliveries{status=\"failed\"} 1",
        "kuatia_webhook_attempts_total",
        "kuatia_webhook_delivery_seconds_bucket",
    ] {
        assert!(metrics.contains(line), "{line} not in /metrics");
    }

    // deactivate, then delete (logical: gone from the listing, 404 afterwards).
    let (status, body) = send(f.req(Method::POST, &format!("/v1/webhooks/{endpoint}/deactivate"))).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["active"], false);
    let (status, _) = send(f.req(Method::DELETE, &format!("/v1/webhooks/{endpoint}"))).await;
    assert_eq!(status, 200);
    let (_, list) = send(f.req(Method::GET, "/v1/webhooks")).await;
    assert_eq!(list.as_array().map(Vec::len), Some(1), "{list}");
    let (status, body) = send(f.req(Method::POST, &format!("/v1/webhooks/{endpoint}/test"))).await;
    assert_eq!(status, 404, "{body}");
    assert_eq!(body["code"], "not_found");

    // A viewer reads but may not manage.
    let (status, body) = send(
        f.req(Method::POST, "/v1/api-keys")
            .json(&json!({"name": "ro", "role": "viewer"})),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    let viewer = body["key"].as_str().expect("key").to_owned();
    let as_viewer = |m: Method, p: &str| f.app.as_key(m, p, &viewer, &f.r.tenant);
    assert_eq!(send(as_viewer(Method::GET, "/v1/webhooks")).await.0, 200);
    let (status, body) =
        send(as_viewer(Method::POST, "/v1/webhooks").json(&json!({"url": url, "events": ["*"]}))).await;
    assert_eq!(status, 403, "{body}");
    f.app.stop().await;
}

#[tokio::test]
async fn production_tenants_need_https_urls_that_do_not_lead_to_private_addresses() {
    let app = TestApp::spawn_with(|c| c.private_destinations = Some(String::new())).await;
    let (status, body) = send(
        app.client
            .post(format!("{}/v1/tenants", app.base))
            .json(&json!({"slug": "prod-hooks", "name": "Prod", "environment": "production"})),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    let tenant = id(&body);
    let key = body["bootstrap_api_key"].as_str().expect("key").to_owned();
    for (url, code) in [
        ("http://example.com/hook", "https_required"),
        ("https://127.0.0.1/hook", "url_not_allowed"),
        ("https://10.0.0.8/hook", "url_not_allowed"),
        ("https://169.254.169.254/latest", "url_not_allowed"),
        ("https://[::1]/hook", "url_not_allowed"),
        ("https://localhost/hook", "url_not_allowed"),
        // IPv6 forms that embed a special IPv4 address, and other special-purpose ranges.
        ("https://[::127.0.0.1]/hook", "url_not_allowed"),
        ("https://[::ffff:169.254.169.254]/latest", "url_not_allowed"),
        ("https://[2002:7f00:1::1]/hook", "url_not_allowed"),
        ("https://[2001::1]/hook", "url_not_allowed"),
        ("https://[64:ff9b::a00:8]/hook", "url_not_allowed"),
        ("https://198.18.0.1/hook", "url_not_allowed"),
        ("https://[fec0::1]/hook", "url_not_allowed"),
    ] {
        let (status, body) = send(
            app.as_key(Method::POST, "/v1/webhooks", &key, &tenant)
                .json(&json!({"url": url, "events": ["*"]})),
        )
        .await;
        assert_eq!(status, 400, "{url}: {body}");
        assert_eq!(body["details"]["errors"][0]["code"], code, "{url}: {body}");
    }
    app.stop().await;
}

/// A minimal SMTP server (RFC 5321: EHLO/HELO, MAIL, RCPT, DATA, QUIT) that stores each message.
/// Messages the SMTP server got: (recipients, raw message).
pub(crate) type Mailbox = Arc<Mutex<Vec<(Vec<String>, String)>>>;

pub(crate) async fn start_smtp() -> (u16, Mailbox) {
    start_smtp_refusing(None).await
}

/// [`start_smtp`], answering `RCPT` for `refused` with a permanent refusal (550, no such user).
pub(crate) async fn start_smtp_refusing(refused: Option<&'static str>) -> (u16, Mailbox) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind smtp");
    let port = listener.local_addr().expect("addr").port();
    let messages: Mailbox = Arc::default();
    let store = messages.clone();
    tokio::spawn(async move {
        while let Ok((socket, _)) = listener.accept().await {
            let store = store.clone();
            tokio::spawn(async move {
                let (read, mut write) = socket.into_split();
                let mut lines = BufReader::new(read);
                let _ = write.write_all(b"220 sink ESMTP\r\n").await;
                let mut rcpt = Vec::new();
                let mut line = String::new();
                loop {
                    line.clear();
                    if lines.read_line(&mut line).await.unwrap_or(0) == 0 {
                        return;
                    }
                    let upper = line.to_ascii_uppercase();
                    let reply: &[u8] = if upper.starts_with("EHLO") {
                        b"250-sink\r\n250 8BITMIME\r\n"
                    } else if upper.starts_with("HELO")
                        || upper.starts_with("MAIL")
                        || upper.starts_with("RSET")
                    {
                        b"250 OK\r\n"
                    } else if upper.starts_with("RCPT") {
                        let to = line.trim_end();
                        let to = to[to.find('<').map_or(0, |i| i + 1)..].trim_end_matches('>');
                        if refused == Some(to) {
                            b"550 5.1.1 no such user here\r\n"
                        } else {
                            rcpt.push(to.to_owned());
                            b"250 OK\r\n"
                        }
                    } else if upper.starts_with("DATA") {
                        let _ = write.write_all(b"354 go ahead\r\n").await;
                        let mut data = String::new();
                        loop {
                            line.clear();
                            if lines.read_line(&mut line).await.unwrap_or(0) == 0 {
                                return;
                            }
                            if line == ".\r\n" {
                                break;
                            }
                            data.push_str(line.strip_prefix('.').unwrap_or(&line));
                        }
                        store
                            .lock()
                            .expect("smtp")
                            .push((std::mem::take(&mut rcpt), data));
                        b"250 queued as sink-1\r\n"
                    } else if upper.starts_with("QUIT") {
                        let _ = write.write_all(b"221 bye\r\n").await;
                        return;
                    } else {
                        b"250 OK\r\n"
                    };
                    let _ = write.write_all(reply).await;
                }
            });
        }
    });
    (port, messages)
}

pub(crate) fn summary(raw: &str) -> Value {
    let dir = ScratchDir::new();
    let path = dir.0.join("message.eml");
    std::fs::write(&path, raw).expect("write message");
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/mime_summary.py");
    let out = std::process::Command::new("python3")
        .arg(script)
        .arg(&path)
        .output()
        .expect("python3");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).expect("summary json")
}

#[tokio::test]
async fn an_accepted_invoice_is_emailed_to_the_customer_with_its_signed_xml_and_kude() {
    let (smtp_port, mail) = start_smtp().await;
    let f = served(|c| {
        c.smtp_url = Some(kuatia_infrastructure::config::Secret::new(format!(
            "smtp://127.0.0.1:{smtp_port}"
        )));
        c.smtp_from = "Facturas <facturas@example.com.py>".into();
        c.printable_wait_secs = 20;
    })
    .await;
    let doc = post(&f, "MAIL-1", |d| {
        d["delivery"] = json!({
            "customer": {"mode": "automatic", "channels": ["email"], "email": "cliente@example.com"},
            "issuer": {"mode": "manual", "channels": ["email"], "emails": ["contabilidad@example.com.py"]}
        });
    })
    .await;
    accepted(&f, &doc).await;
    let deadline = std::time::Instant::now() + Duration::from_secs(40);
    let (rcpt, raw) = loop {
        if let Some(m) = mail.lock().expect("mail").first().cloned() {
            break m;
        }
        assert!(std::time::Instant::now() < deadline, "no email arrived");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(rcpt, vec!["cliente@example.com".to_owned()]);
    let s = summary(&raw);
    assert_eq!(s["to"], "cliente@example.com", "{s}");
    assert!(
        s["subject"]
            .as_str()
            .is_some_and(|t| t.starts_with("Documento electrónico 001-001-")),
        "{s}"
    );

    // The attachments are the document's stored artifacts, byte for byte.
    // The send is recorded after the server's answer: wait for the record.
    let sent = |timeline: &[Value]| {
        timeline.iter().any(|e| {
            let d = &e["data"]["DeliveryRecorded"];
            d["target"] == "customer" && d["status"] == "sent"
        })
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let timeline = loop {
        let timeline = f.timeline(&doc).await;
        if sent(&timeline) || std::time::Instant::now() > deadline {
            break timeline;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let artifact = |kind: &str| {
        timeline
            .iter()
            .filter(|e| e["type"] == "ArtifactRecorded" && e["data"]["ArtifactRecorded"]["kind"] == kind)
            .filter_map(|e| e["data"]["ArtifactRecorded"]["sha256"].as_str())
            .next_back()
            .map(str::to_owned)
    };
    let attachments = s["attachments"].as_array().cloned().unwrap_or_default();
    let xml = attachments
        .iter()
        .find(|a| a["filename"].as_str().is_some_and(|n| n.ends_with(".xml")))
        .unwrap_or_else(|| panic!("no XML attachment: {s}"));
    assert_eq!(xml["sha256"].as_str(), artifact("signed_xml").as_deref(), "{s}");
    // The delivery waited for the KuDE (rendered after the acceptance) and attached it.
    let kude = artifact("kude").unwrap_or_else(|| panic!("no KuDE was rendered: {timeline:?}"));
    let pdf = attachments
        .iter()
        .find(|a| a["content_type"] == "application/pdf")
        .unwrap_or_else(|| panic!("no PDF attachment: {s}"));
    assert_eq!(pdf["sha256"].as_str(), Some(kude.as_str()), "{s}");
    assert!(
        pdf["filename"].as_str().is_some_and(|n| n.ends_with(".pdf")),
        "{s}"
    );
    assert_eq!(attachments.len(), 2, "{s}");

    // Each attempt is a timeline event: the customer's email sent, the issuer's manual one
    // pending for the console.
    let deliveries: Vec<&Value> = timeline
        .iter()
        .filter(|e| e["type"] == "DeliveryRecorded")
        .map(|e| &e["data"]["DeliveryRecorded"])
        .collect();
    assert!(
        deliveries
            .iter()
            .any(|d| d["target"] == "customer" && d["channel"] == "email" && d["status"] == "sent"),
        "{deliveries:?}"
    );
    assert!(
        deliveries
            .iter()
            .any(|d| d["target"] == "issuer" && d["status"] == "pending"),
        "{deliveries:?}"
    );
    f.app.stop().await;
}

#[tokio::test]
async fn a_delivery_that_keeps_failing_ends_failed_and_raises_document_delivery_failed() {
    // No SMTP server: every email attempt fails; the scaled schedule runs out in about a minute
    // (60 ms … 86 s × 0.001), so scale it down further.
    let port = free_port().await;
    let f = served(|c| {
        c.smtp_url = Some(kuatia_infrastructure::config::Secret::new(format!(
            "smtp://127.0.0.1:{port}"
        )));
        c.delivery_retry_scale = 0.00002;
        c.printable_wait_secs = 0;
    })
    .await;
    let inbox = Inbox::default();
    let (hook_port, _server) = start_receiver(inbox.clone(), 0).await;
    let (endpoint, secret) = create_endpoint(
        &f,
        &format!("http://127.0.0.1:{hook_port}/hook"),
        json!(["document.delivery_failed"]),
    )
    .await;
    let doc = post(&f, "MAIL-FAIL", |d| {
        d["delivery"] =
            json!({"customer": {"mode": "automatic", "channels": ["email"], "email": "x@example.com"}});
    })
    .await;
    accepted(&f, &doc).await;
    let rows = all_delivered(&f, &endpoint, 1, Duration::from_secs(60)).await;
    assert_eq!(rows[0]["event_type"], "document.delivery_failed");
    let got = inbox.all();
    assert!(verify(&got[0], &[&secret]));
    let body: Value = serde_json::from_str(&got[0].body).expect("json");
    assert_eq!(body["data"]["status"], "failed", "{body}");
    assert_eq!(body["data"]["attempt"], 8, "{body}");
    let attempts = f
        .timeline(&doc)
        .await
        .iter()
        .filter(|e| e["type"] == "DeliveryRecorded")
        .count();
    assert_eq!(attempts, 8, "one timeline event per attempt");
    f.app.stop().await;
}

/// What the messaging doubles got: (path, authorization, fields, files as (name, type, sha256)).
type Calls = Arc<Mutex<Vec<(String, String, Value, Vec<(String, String, String)>)>>>;

async fn record_call(
    calls: &Calls,
    path: String,
    headers: &HeaderMap,
    mut multipart: Option<axum::extract::Multipart>,
    json_body: Option<Value>,
) {
    let mut fields = json_body.unwrap_or_else(|| json!({}));
    let mut files = Vec::new();
    if let Some(m) = multipart.as_mut() {
        while let Ok(Some(field)) = m.next_field().await {
            let name = field.name().unwrap_or_default().to_owned();
            let file = field.file_name().map(str::to_owned);
            let kind = field.content_type().unwrap_or_default().to_owned();
            let bytes = field.bytes().await.unwrap_or_default();
            match file {
                Some(file) => files.push((file, kind, kuatia_application::artifacts::sha256_hex(&bytes))),
                None => fields[name] = json!(String::from_utf8_lossy(&bytes)),
            }
        }
    }
    let auth = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    calls.lock().expect("calls").push((path, auth, fields, files));
}

/// A double of the Telegram Bot API's `sendDocument` and of the WhatsApp Cloud API's `media`
/// and `messages`, on one port each.
async fn start_messaging(calls: Calls) -> (u16, u16) {
    use axum::extract::{Multipart, Path};
    let telegram =
        axum::Router::new()
            .route(
                "/{bot}/sendDocument",
                axum::routing::post(
                    |State(calls): State<Calls>,
                     Path(bot): Path<String>,
                     headers: HeaderMap,
                     m: Multipart| async move {
                        record_call(&calls, format!("/{bot}/sendDocument"), &headers, Some(m), None).await;
                        let n = calls.lock().expect("calls").len();
                        axum::Json(json!({"ok": true, "result": {"message_id": n}}))
                    },
                ),
            )
            .with_state(calls.clone());
    let whatsapp =
        axum::Router::new()
            .route(
                "/{phone}/media",
                axum::routing::post(
                    |State(calls): State<Calls>,
                     Path(phone): Path<String>,
                     headers: HeaderMap,
                     m: Multipart| async move {
                        record_call(&calls, format!("/{phone}/media"), &headers, Some(m), None).await;
                        let n = calls.lock().expect("calls").len();
                        axum::Json(json!({"id": format!("media-{n}")}))
                    },
                ),
            )
            .route(
                "/{phone}/messages",
                axum::routing::post(
                    |State(calls): State<Calls>,
                     Path(phone): Path<String>,
                     headers: HeaderMap,
                     axum::Json(body): axum::Json<Value>| async move {
                        record_call(
                            &calls,
                            format!("/{phone}/messages"),
                            &headers,
                            None,
                            Some(body.clone()),
                        )
                        .await;
                        let n = calls.lock().expect("calls").len();
                        axum::Json(json!({
                            "messaging_product": "whatsapp",
                            "contacts": [{"input": body["to"], "wa_id": body["to"]}],
                            "messages": [{"id": format!("wamid.{n}")}]
                        }))
                    },
                ),
            )
            .with_state(calls);
    let mut ports = Vec::new();
    for app in [telegram, whatsapp] {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        ports.push(listener.local_addr().expect("addr").port());
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
    }
    (ports[0], ports[1])
}

#[tokio::test]
async fn an_accepted_invoice_reaches_the_customer_on_telegram_and_whatsapp() {
    let calls: Calls = Arc::default();
    let (telegram, whatsapp) = start_messaging(calls.clone()).await;
    let f = served(|c| {
        c.telegram_base_url = format!("http://127.0.0.1:{telegram}");
        c.telegram_bot_token = Some(kuatia_infrastructure::config::Secret::new("123:ABC"));
        c.whatsapp_base_url = format!("http://127.0.0.1:{whatsapp}");
        c.whatsapp_token = Some(kuatia_infrastructure::config::Secret::new("wa-token"));
        c.whatsapp_phone_number_id = Some("1077".into());
        c.printable_wait_secs = 20;
    })
    .await;
    let doc = post(&f, "CHAT-1", |d| {
        d["delivery"] = json!({"customer": {
            "mode": "automatic",
            "channels": ["telegram", "whatsapp"],
            "phone": "+595 981 123456",
            "telegram_chat_id": "4242"
        }});
    })
    .await;
    accepted(&f, &doc).await;
    let deadline = std::time::Instant::now() + Duration::from_secs(40);
    loop {
        let sent = f
            .timeline(&doc)
            .await
            .iter()
            .filter(|e| e["type"] == "DeliveryRecorded" && e["data"]["DeliveryRecorded"]["status"] == "sent")
            .count();
        if sent == 2 {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "not both sent: {:?}",
            calls.lock().expect("calls")
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let calls = calls.lock().expect("calls").clone();
    // Telegram: one sendDocument per file (KuDE and XML) to the chat, through the bot's path.
    let tg: Vec<_> = calls.iter().filter(|c| c.0.ends_with("/sendDocument")).collect();
    assert_eq!(tg.len(), 2, "{calls:?}");
    for c in &tg {
        assert_eq!(c.0, "/bot123:ABC/sendDocument");
        assert_eq!(c.2["chat_id"], "4242");
        assert_eq!(c.3.len(), 1);
    }
    let names: Vec<&str> = tg.iter().map(|c| c.3[0].0.as_str()).collect();
    assert!(
        names.iter().any(|n| n.ends_with(".pdf")) && names.iter().any(|n| n.ends_with(".xml")),
        "{names:?}"
    );
    // WhatsApp: each file uploaded with the bearer token, then sent as a document message.
    let media: Vec<_> = calls.iter().filter(|c| c.0 == "/1077/media").collect();
    let messages: Vec<_> = calls.iter().filter(|c| c.0 == "/1077/messages").collect();
    assert_eq!((media.len(), messages.len()), (2, 2), "{calls:?}");
    assert!(
        media
            .iter()
            .all(|c| c.1 == "Bearer wa-token" && c.2["messaging_product"] == "whatsapp")
    );
    for m in &messages {
        assert_eq!(m.1, "Bearer wa-token");
        assert_eq!(m.2["to"], "595981123456");
        assert_eq!(m.2["type"], "document");
        assert!(
            m.2["document"]["id"]
                .as_str()
                .is_some_and(|id| id.starts_with("media-")),
            "{m:?}"
        );
    }
    f.app.stop().await;
}

#[tokio::test]
async fn a_certificate_near_its_end_raises_certificate_expiring_once_per_threshold() {
    let f = served(|c| c.certificate_scan_secs = 1).await;
    let inbox = Inbox::default();
    let (port, _server) = start_receiver(inbox.clone(), 0).await;
    let (endpoint, secret) = create_endpoint(
        &f,
        &format!("http://127.0.0.1:{port}/hook"),
        json!(["certificate.expiring"]),
    )
    .await;
    // The company's signing certificate has a year left (no warning); this one has five days.
    let req = |m: Method, p: &str| f.req(m, p);
    let certificate = upload_certificate(req, &f.r.company, "80069563-1", 5, Some("renewal due")).await;
    let rows = all_delivered(&f, &endpoint, 1, Duration::from_secs(20)).await;
    assert_eq!(rows[0]["event_type"], "certificate.expiring");
    // Later scans (one a second) find the same warning already recorded.
    tokio::time::sleep(Duration::from_millis(2500)).await;
    all_delivered(&f, &endpoint, 1, Duration::from_secs(5)).await;
    let got = inbox.all();
    assert_eq!(got.len(), 1, "{got:?}");
    assert!(verify(&got[0], &[&secret]));
    let body: Value = serde_json::from_str(&got[0].body).expect("json");
    assert_eq!(body["type"], "certificate.expiring");
    assert_eq!(body["company_id"], f.r.company.as_str());
    assert_eq!(body["data"]["certificate_id"], certificate["id"]);
    assert_eq!(body["data"]["threshold_days"], 7, "{body}");
    assert_eq!(body["data"]["label"], "renewal due");
    f.app.stop().await;
}

#[tokio::test]
async fn a_production_tenant_s_sifen_endpoint_follows_the_destination_policy() {
    // A channel endpoint accepted loopback and private addresses on production tenants.
    let app = TestApp::spawn_with(|c| c.private_destinations = Some(String::new())).await;
    let (status, body) = send(
        app.client
            .post(format!("{}/v1/tenants", app.base))
            .json(&json!({"slug": "prod-channel", "name": "Prod", "environment": "production"})),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    let tenant = id(&body);
    let key = body["bootstrap_api_key"].as_str().expect("key").to_owned();
    let req = |m: Method, p: &str| app.as_key(m, p, &key, &tenant);
    let (status, company) =
        send(req(Method::POST, "/v1/companies").json(&TestApp::company_body("80069563-1"))).await;
    assert_eq!(status, 201, "{company}");
    let company = id(&company);
    let certificate = upload_certificate(req, &company, "80069563-1", 365, None).await;
    for (endpoint, code) in [
        ("http://sifen.set.gov.py", "https_required"),
        ("https://127.0.0.1:8082", "url_not_allowed"),
        ("https://169.254.169.254/latest", "url_not_allowed"),
        ("https://[::ffff:10.0.0.1]", "url_not_allowed"),
        ("https://localhost:8443", "url_not_allowed"),
    ] {
        let (status, body) = send(req(Method::POST, "/v1/emission-channels").json(
            &kuatia_tests::sifen_channel_body(&company, endpoint, &id(&certificate)),
        ))
        .await;
        assert_eq!(status, 400, "{endpoint}: {body}");
        let error = &body["details"]["errors"][0];
        assert_eq!(error["field"], "credentials.endpoint", "{endpoint}: {body}");
        assert_eq!(error["code"], code, "{endpoint}: {body}");
    }
    let (_, channels) = send(req(Method::GET, "/v1/emission-channels")).await;
    assert_eq!(
        channels.as_array().map(Vec::len).unwrap_or(0),
        0,
        "nothing stored: {channels}"
    );
    app.stop().await;
}

#[tokio::test]
async fn under_public_signup_demo_tenants_reach_private_addresses_only_through_the_allow_list() {
    // With public signup on, anyone's demo tenant pointed webhooks (and their test endpoint) at
    // loopback and private addresses: a port scanner of the service's own network.
    let inbox = Inbox::default();
    let (port, _receiver) = start_receiver(inbox.clone(), 0).await;
    let hook = format!("http://127.0.0.1:{port}/hook");
    for (allow, public_signup, allowed) in [
        ("", true, false),
        ("10.0.0.0/8", true, false),
        ("127.0.0.1", true, true),
        ("", false, true),
    ] {
        let app = TestApp::spawn_with(|c| {
            c.private_destinations = Some(allow.into());
            c.public_signup = public_signup;
        })
        .await;
        let (tenant, key) = if public_signup {
            app.tenant("demo-hooks").await
        } else {
            // Signup is off: the operator makes the tenant.
            let (tenant, key) = kuatia_application::access::create_tenant(
                &app.service().database.store(),
                kuatia_domain::tenancy::TenantSlug::parse("demo-hooks").expect("slug"),
                "Demo Hooks".into(),
                kuatia_domain::tenancy::Environment::Demo,
                Default::default(),
            )
            .await
            .expect("create the tenant");
            (tenant.as_uuid().to_string(), key.key)
        };
        let post = |url: &str| {
            app.as_key(Method::POST, "/v1/webhooks", &key, &tenant)
                .json(&json!({"url": url, "events": ["*"]}))
        };
        let (status, body) = send(post(&hook)).await;
        let case = format!("allow-list {allow:?}, public signup {public_signup}");
        if allowed {
            assert_eq!(status, 201, "{case}: {body}");
            let (status, tested) = send(app.as_key(
                Method::POST,
                &format!("/v1/webhooks/{}/test", id(&body)),
                &key,
                &tenant,
            ))
            .await;
            assert_eq!(
                (status, tested["delivered"].as_bool()),
                (200, Some(true)),
                "{case}: {tested}"
            );
        } else {
            assert_eq!(status, 400, "{case}: {body}");
            assert_eq!(
                body["details"]["errors"][0]["code"], "url_not_allowed",
                "{case}: {body}"
            );
            for url in [
                "http://localhost:9/hook",
                "http://169.254.169.254/latest",
                "http://[::ffff:127.0.0.1]:9/hook",
            ] {
                let (status, body) = send(post(url)).await;
                assert_eq!(status, 400, "{case}: {url}: {body}");
            }
            // The demo tenant's SIFEN endpoint follows the same policy.
            use kuatia_tests::CSC;
            let req = |m: Method, p: &str| app.as_key(m, p, &key, &tenant);
            let (status, company) =
                send(req(Method::POST, "/v1/companies").json(&TestApp::company_body("80069563-1"))).await;
            assert_eq!(status, 201, "{company}");
            let certificate = upload_certificate(req, &id(&company), "80069563-1", 365, None).await;
            let (status, body) = send(req(Method::POST, "/v1/emission-channels").json(&json!({
                "company_id": id(&company),
                "channel": "sifen",
                "is_default": true,
                "credentials": {"endpoint": "http://127.0.0.1:8082", "client_id": "client-1", "client_secret": "s3cret-value"},
                "sifen": {"environment": "test", "timbrado": "12345678", "timbrado_valid_from": "2024-01-01",
                          "csc_id": "0001", "csc": CSC, "certificate_id": id(&certificate)},
            })))
            .await;
            assert_eq!(status, 400, "{case}: {body}");
            assert_eq!(
                body["details"]["errors"][0]["code"], "url_not_allowed",
                "{case}: {body}"
            );
        }
        app.stop().await;
    }
}

#[tokio::test]
async fn the_webhook_test_tells_no_closed_port_from_a_silent_one() {
    // The test endpoint reported "Connection refused" for a closed port and a timeout for a
    // filtered one: a port scanner for anyone with a demo tenant.
    let f = served(|_| {}).await;
    let closed = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        listener.local_addr().expect("addr").port()
    };
    let silent = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let silent_port = silent.local_addr().expect("addr").port();
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((socket, _)) = silent.accept().await {
            held.push(socket);
        }
    });
    let mut errors = Vec::new();
    for port in [closed, silent_port] {
        let (status, created) = send(
            f.req(Method::POST, "/v1/webhooks")
                .json(&json!({"url": format!("http://127.0.0.1:{port}/hook"), "events": ["*"]})),
        )
        .await;
        assert_eq!(status, 201, "{created}");
        let endpoint = id(&created);
        let (status, body) = send(f.req(Method::POST, &format!("/v1/webhooks/{endpoint}/test"))).await;
        assert_eq!(status, 200, "{body}");
        assert_eq!(body["delivered"], false, "{body}");
        errors.push(body["error"].as_str().unwrap_or_default().to_owned());
    }
    assert_eq!(errors[0], errors[1], "{errors:?}");
    assert!(!errors[0].to_lowercase().contains("refused"), "{errors:?}");
    f.app.stop().await;
}
