//! The HTTP contract of the foundation: health, readiness, metrics, OpenAPI, docs, the error
//! model, request ids, body limits, graceful shutdown.

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::routing::{get, post};
use kuatia_api::extract::Json;
use kuatia_infrastructure::config::Secret;
use kuatia_tests::TestApp;
use serde_json::{Value, json};
use std::time::Duration;
use tower_http::catch_panic::CatchPanicLayer;

fn assert_error_shape(body: &Value, code: &str) -> String {
    assert_eq!(body["code"], code, "{body}");
    assert!(body["message"].as_str().is_some_and(|m| !m.is_empty()), "{body}");
    let id = body["request_id"].as_str().expect("request_id").to_owned();
    assert!(!id.is_empty());
    id
}

#[tokio::test]
async fn health_answers_status_and_version() {
    let app = TestApp::spawn().await;
    let response = app.get("/health").await;
    assert_eq!(response.status(), 200);
    assert_eq!(
        response.json::<Value>().await.expect("json"),
        json!({"status": "ok", "version": "0.1.0"})
    );
    app.stop().await;
}

#[tokio::test]
async fn ready_checks_the_database_and_answers_503_when_it_is_gone() {
    let app = TestApp::spawn().await;
    assert_eq!(app.get("/ready").await.status(), 200);
    app.service().database.close().await;
    let response = app.get("/ready").await;
    assert_eq!(response.status(), 503);
    let body: Value = response.json().await.expect("json");
    assert_error_shape(&body, "readiness_check_failed");
}

#[tokio::test]
async fn metrics_are_disabled_without_a_token_and_guarded_with_one() {
    let app = TestApp::spawn().await;
    let response = app.get("/metrics").await;
    assert_eq!(response.status(), 404);
    assert_error_shape(&response.json().await.expect("json"), "not_found");
    app.stop().await;

    // A company with a certificate valid for 365 days, issuing to a SIFEN simulator.
    let f = kuatia_tests::Simulated::new(kuatia_infrastructure::sifen_sim::SimConfig::default(), |c| {
        c.metrics_bearer_token = Some(Secret::new("m3trics-token"));
    })
    .await;
    let app = &f.app;
    for token in [None, Some("wrong")] {
        let response = match token {
            None => app.get("/metrics").await,
            Some(t) => app.get_with_bearer("/metrics", t).await,
        };
        assert_eq!(response.status(), 401);
        assert_eq!(response.headers()["www-authenticate"], "Bearer realm=\"metrics\"");
        assert_error_shape(&response.json().await.expect("json"), "authentication_error");
    }
    app.service()
        .database
        .jobs()
        .enqueue(&kuatia_application::jobs::NewJob::new(
            "metrics.probe",
            "probe-1",
            kuatia_domain::tenancy::TenantId::SYSTEM,
            json!({}),
        ))
        .await
        .expect("enqueue");
    app.get("/health").await;
    // One document through the pipeline: jobs run, SIFEN answers.
    let doc = f.post(&f.invoice("metrics-1")).await;
    let settled = f
        .settle(std::slice::from_ref(&doc), Duration::from_secs(60))
        .await;
    assert_eq!(settled[0]["status"], "accepted", "{}", settled[0]);
    let response = app.get_with_bearer("/metrics", "m3trics-token").await;
    assert_eq!(response.status(), 200);
    assert!(
        response.headers()["content-type"]
            .to_str()
            .expect("ascii")
            .starts_with("text/plain")
    );
    let text = response.text().await.expect("text");
    for needle in [
        "# TYPE http_requests_total counter",
        "http_requests_total{method=\"GET\",route=\"/health\",status=\"200\"}",
        "# TYPE http_request_duration_seconds histogram",
        "http_request_duration_seconds_bucket{method=\"GET\",route=\"/health\",le=\"0.005\"}",
        "kuatia_jobs{kind=\"metrics.probe\",state=\"pending\"} 1",
        "kuatia_jobs{kind=\"metrics.probe\",state=\"dead\"} 0",
        "kuatia_jobs_failed{kind=\"metrics.probe\"} 0",
        "kuatia_subscription_lag_events{subscription=\"event_type_counts\"}",
        "kuatia_events_head_position",
        // Pipeline stages, read from the documents read model.
        "# TYPE kuatia_documents gauge",
        // (At least this test's document: the gauges are the process's, and another test's scrape
        // may set them between this scrape's read and its rendering.)
        "kuatia_documents{status=\"accepted\"} ",
        "kuatia_documents{status=\"queued\"} ",
        // Job attempts and run times, recorded by the worker.
        "# TYPE kuatia_job_attempts_total counter",
        "kuatia_job_attempts_total{kind=\"sifen.prepare\",outcome=\"succeeded\"}",
        "# TYPE kuatia_job_duration_seconds histogram",
        "kuatia_job_duration_seconds_bucket{kind=\"sifen.prepare\",le=\"0.01\"}",
        // SIFEN's answer by operation and code, and the call's latency, from the SOAP client.
        "# TYPE kuatia_sifen_responses_total counter",
        "kuatia_sifen_responses_total{operation=\"recep_de\",code=\"0260\"}",
        "# TYPE kuatia_sifen_request_duration_seconds histogram",
        "kuatia_sifen_request_duration_seconds_bucket{operation=\"recep_de\",le=\"0.05\"}",
    ] {
        assert!(text.contains(needle), "missing {needle} in\n{text}");
    }
    let accepted = text.lines().find_map(|l| {
        l.strip_prefix("kuatia_documents{status=\"accepted\"} ")?
            .parse::<f64>()
            .ok()
    });
    assert!(accepted.is_some_and(|n| n >= 1.0), "{accepted:?}");
    // This tenant's certificate (other tests' services scrape into the same process-wide gauges).
    let tenant = format!("tenant_id=\"{}\"", f.r.tenant);
    let days: Vec<f64> = text
        .lines()
        .filter(|l| l.starts_with("kuatia_certificate_expiry_seconds{") && l.contains(&tenant))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .map(|seconds| seconds / 86_400.0)
        .collect();
    assert_eq!(days.len(), 1, "one certificate, one series:\n{text}");
    assert!((363.0..=366.0).contains(&days[0]), "days to expiry: {}", days[0]);
    promtool_accepts(&text);
    f.app.stop().await;
}

/// `promtool check metrics` (from Debian's prometheus package, installed by .ci/run) must accept
/// the exposition. On a developer machine without it the check is skipped with a note; in CI
/// (`CI=true`) its absence fails the test.
pub(crate) fn promtool_accepts(text: &str) {
    use std::io::Write;
    let child = std::process::Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn();
    let mut child = match child {
        Ok(child) => child,
        Err(_) if std::env::var("CI").as_deref() != Ok("true") => {
            eprintln!("promtool not installed: skipping the promtool lint (CI installs it)");
            return;
        }
        Err(err) => panic!("promtool is required in CI: {err}"),
    };
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(text.as_bytes())
        .expect("write");
    let output = child.wait_with_output().expect("promtool");
    assert!(
        output.status.success(),
        "promtool rejected /metrics:\n{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

#[tokio::test]
async fn the_openapi_document_is_3_1_with_every_route_and_error_code() {
    let app = TestApp::spawn().await;
    let doc: Value = app.get("/openapi.json").await.json().await.expect("json");
    assert!(doc["openapi"].as_str().expect("version").starts_with("3.1"));
    assert_eq!(doc["info"]["version"], "0.1.0");
    for path in ["/health", "/ready", "/metrics"] {
        assert!(doc["paths"][path]["get"].is_object(), "{path} is documented");
    }
    assert_eq!(
        doc["paths"]["/metrics"]["get"]["security"][0]["metrics_token"],
        json!([])
    );
    let codes: Vec<&str> = doc["components"]["schemas"]["ErrorCode"]["enum"]
        .as_array()
        .expect("ErrorCode enum")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    for (code, _, _) in kuatia_api::error::ERROR_TABLE {
        assert!(
            codes.contains(&code.as_str()),
            "{} missing from the ErrorCode schema",
            code.as_str()
        );
    }
    let issue_codes: Vec<&str> = doc["components"]["schemas"]["IssueCode"]["enum"]
        .as_array()
        .expect("IssueCode enum")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    use kuatia_domain::document::issues::{CATALOGUE, CONFIGURATION_CODES};
    for code in CATALOGUE
        .iter()
        .map(|(c, _, _)| *c)
        .chain(CONFIGURATION_CODES.iter().map(|(c, _)| *c))
    {
        assert!(
            issue_codes.contains(&code),
            "issue code {code} missing from the OpenAPI document"
        );
    }
    let required = &doc["components"]["schemas"]["ErrorBody"]["required"];
    for field in ["code", "message", "request_id"] {
        assert!(
            required.as_array().expect("required").iter().any(|f| f == field),
            "{field}"
        );
    }
    app.stop().await;
}

#[tokio::test]
async fn the_api_reference_page_is_served_with_its_own_assets() {
    let app = TestApp::spawn().await;
    let page = app.get("/docs/").await;
    assert_eq!(page.status(), 200);
    let html = page.text().await.expect("html");
    assert!(html.contains("swagger-ui"), "{html}");
    assert!(
        !html.contains("https://"),
        "the page must not load anything from the internet"
    );
    let config = app
        .get("/docs/swagger-initializer.js")
        .await
        .text()
        .await
        .expect("js");
    assert!(config.contains("/openapi.json"), "{config}");
    let bundle = app.get("/docs/swagger-ui-bundle.js").await;
    assert_eq!(bundle.status(), 200);
    assert!(
        bundle.bytes().await.expect("bundle").len() > 100_000,
        "the vendored bundle is served"
    );
    app.stop().await;
}

#[tokio::test]
async fn unknown_paths_and_methods_get_the_error_body_with_the_request_id() {
    let app = TestApp::spawn().await;
    let response = app.get("/v1/nothing-here").await;
    assert_eq!(response.status(), 404);
    let header = response.headers()["x-request-id"]
        .to_str()
        .expect("ascii")
        .to_owned();
    let id = assert_error_shape(&response.json().await.expect("json"), "not_found");
    assert_eq!(id, header);

    let response = app
        .client
        .post(format!("{}/health", app.base))
        .send()
        .await
        .expect("post");
    assert_eq!(response.status(), 405);
    assert!(response.headers().contains_key("allow"));
    assert_error_shape(&response.json().await.expect("json"), "not_found");

    let response = app
        .client
        .get(format!("{}/nowhere", app.base))
        .header("X-Request-Id", "caller-chosen-id-42")
        .send()
        .await
        .expect("get");
    assert_eq!(response.headers()["x-request-id"], "caller-chosen-id-42");
    assert_eq!(
        assert_error_shape(&response.json().await.expect("json"), "not_found"),
        "caller-chosen-id-42"
    );
    app.stop().await;
}

async fn boom() -> &'static str {
    panic!("secret internal detail")
}

/// The real extractor and middleware on a probe route (the foundation has no JSON endpoint yet;
/// later endpoints use the same two pieces).
fn probe_router() -> Router {
    Router::new()
        .route("/echo", post(|Json(v): Json<Value>| async move { axum::Json(v) }))
        .route("/boom", get(boom))
        .layer(DefaultBodyLimit::max(1024))
        .layer(CatchPanicLayer::custom(kuatia_api::middleware::panic_response))
        .layer(axum::middleware::from_fn(kuatia_api::middleware::request_context))
}

async fn serve_probe() -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move { axum::serve(listener, probe_router()).await });
    format!("http://{addr}")
}

#[tokio::test]
async fn malformed_json_wrong_content_type_and_oversized_bodies_get_our_error_body() {
    let base = serve_probe().await;
    let client = reqwest::Client::new();
    let send = |body: &'static str, content_type: &'static str| {
        client
            .post(format!("{base}/echo"))
            .header("content-type", content_type)
            .body(body)
            .send()
    };
    let ok = send("{\"a\":1}", "application/json").await.expect("send");
    assert_eq!(ok.status(), 200);

    let bad = send("{\"a\":", "application/json").await.expect("send");
    assert_eq!(bad.status(), 400);
    let body: Value = bad.json().await.expect("json body, not axum's text");
    assert_error_shape(&body, "validation_error");
    assert!(
        body["message"]
            .as_str()
            .expect("message")
            .contains("malformed JSON"),
        "{body}"
    );

    let wrong_type = send("{}", "text/plain").await.expect("send");
    assert_eq!(wrong_type.status(), 415);
    assert_error_shape(&wrong_type.json().await.expect("json"), "validation_error");

    let big = "x".repeat(4096);
    let too_big = client
        .post(format!("{base}/echo"))
        .header("content-type", "application/json")
        .body(format!("\"{big}\""))
        .send()
        .await
        .expect("send");
    assert_eq!(too_big.status(), 413);
    assert_error_shape(&too_big.json().await.expect("json"), "validation_error");
}

#[tokio::test]
async fn a_panicking_handler_answers_500_without_internals() {
    let base = serve_probe().await;
    let response = reqwest::get(format!("{base}/boom")).await.expect("send");
    assert_eq!(response.status(), 500);
    let body: Value = response.json().await.expect("json");
    assert_error_shape(&body, "internal_error");
    assert!(!body.to_string().contains("secret internal detail"));
}

#[tokio::test]
async fn shutdown_lets_in_flight_requests_finish_and_stops_accepting() {
    let app = TestApp::spawn().await;
    // Hold every pooled connection so that /ready waits inside its handler.
    let held = match &app.service().database {
        kuatia_infrastructure::store::Database::Postgres(s) => {
            let mut held = Vec::new();
            while let Ok(Ok(conn)) =
                tokio::time::timeout(Duration::from_millis(200), s.pool().acquire()).await
            {
                held.push(conn);
            }
            (held, Vec::new())
        }
        kuatia_infrastructure::store::Database::Sqlite(s) => {
            let mut held = Vec::new();
            while let Ok(Ok(conn)) =
                tokio::time::timeout(Duration::from_millis(200), s.pool().acquire()).await
            {
                held.push(conn);
            }
            (Vec::new(), held)
        }
    };
    let in_flight = {
        let client = app.client.clone();
        let url = format!("{}/ready", app.base);
        tokio::spawn(async move { client.get(url).send().await })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        !in_flight.is_finished(),
        "the request is waiting for a database connection"
    );
    app.service().begin_shutdown();
    tokio::time::sleep(Duration::from_millis(200)).await;
    drop(held);
    let response = in_flight
        .await
        .expect("task")
        .expect("the in-flight request completed");
    assert_eq!(response.status(), 200);
    let refused = reqwest::Client::new()
        .get(format!("{}/health", app.base))
        .timeout(Duration::from_secs(2))
        .send()
        .await;
    assert!(refused.is_err(), "no new connections after shutdown began");
}

/// What an error answer must be: 4xx, documented for the operation, in the contract's shape.
async fn documented_refusal(operation: &Value, what: &str, response: reqwest::Response) -> u16 {
    let status = response.status().as_u16();
    assert!((400..500).contains(&status), "{what}: HTTP {status}");
    assert!(
        operation["responses"][status.to_string()].is_object(),
        "{what}: {status} is not documented"
    );
    let body: Value = response.json().await.unwrap_or(Value::Null);
    for field in ["code", "message", "request_id"] {
        assert!(body[field].is_string(), "{what}: no {field} in {body}");
    }
    status
}

#[tokio::test]
async fn every_tenant_route_documents_and_answers_its_refusals_in_the_error_shape() {
    let app = TestApp::spawn().await;
    let (tenant, key) = app.tenant("refusals").await;
    let doc: Value = app.get("/openapi.json").await.json().await.expect("json");
    let mut checked = 0;
    for (path, item) in doc["paths"].as_object().expect("paths") {
        for (method, operation) in item.as_object().expect("item") {
            let takes_tenant = operation["parameters"].as_array().is_some_and(|ps| {
                ps.iter()
                    .any(|p| p["in"] == "header" && p["name"].as_str() == Some("X-Tenant-Id"))
            });
            if !takes_tenant {
                continue;
            }
            // Every path parameter a UUID that names nothing.
            let url: String = path
                .split('/')
                .map(|part| {
                    if part.starts_with('{') {
                        uuid::Uuid::now_v7().to_string()
                    } else {
                        part.to_owned()
                    }
                })
                .collect::<Vec<_>>()
                .join("/");
            let method = reqwest::Method::from_bytes(method.to_uppercase().as_bytes()).expect("method");
            let what = format!("{method} {path}");
            // Without X-Tenant-Id: 400.
            let response = app
                .client
                .request(method.clone(), format!("{}{url}", app.base))
                .bearer_auth(&key)
                .send()
                .await
                .expect("send");
            assert_eq!(
                documented_refusal(operation, &format!("{what} without X-Tenant-Id"), response).await,
                400,
                "{what}"
            );
            // An id that is not a UUID: 400, saying the path is not valid.
            if path.contains('{') && !path.ends_with("/download") {
                let bad: String = url
                    .split('/')
                    .map(|part| {
                        if part.parse::<uuid::Uuid>().is_ok() {
                            "not-a-uuid"
                        } else {
                            part
                        }
                    })
                    .collect::<Vec<_>>()
                    .join("/");
                let response = app
                    .as_key(method.clone(), &bad, &key, &tenant)
                    .json(&json!({}))
                    .send()
                    .await
                    .expect("send");
                let message = response.headers().get("content-type").cloned();
                let body_status = response.status().as_u16();
                let body: Value = response.json().await.unwrap_or(Value::Null);
                assert_eq!(body_status, 400, "{what} with a bad id: {body} ({message:?})");
                assert!(
                    body["message"]
                        .as_str()
                        .is_some_and(|m| m.contains("path is not valid")),
                    "{what}: {body}"
                );
            }
            // With a body that is not JSON: refused (415, or 400 where another type is also taken).
            if operation["requestBody"].is_object() {
                let response = app
                    .as_key(method.clone(), &url, &key, &tenant)
                    .header("Content-Type", "text/plain")
                    .body("not json")
                    .send()
                    .await
                    .expect("send");
                documented_refusal(operation, &format!("{what} with a text body"), response).await;
            }
            checked += 1;
        }
    }
    assert!(checked > 30, "walked {checked} tenant operations");
    app.stop().await;
}

#[tokio::test]
async fn a_nul_character_in_any_json_body_is_a_clear_400_on_every_backend() {
    // PostgreSQL's text cannot hold U+0000 (SQLite took it): refused before anything is stored,
    // naming the field.
    let app = TestApp::spawn().await;
    let (tenant, key) = app.tenant("nul-bytes").await;
    let mut doc = kuatia_domain::document::canonical::sample_invoice();
    doc["external_id"] = serde_json::json!("INV\u{0}1");
    let response = app
        .as_key(reqwest::Method::POST, "/v1/documents", &key, &tenant)
        .header("Idempotency-Key", "nul-1")
        .json(&doc)
        .send()
        .await
        .expect("post");
    assert_eq!(response.status(), 400);
    let body: serde_json::Value = response.json().await.expect("json");
    assert_eq!(body["code"], "validation_error", "{body}");
    assert_eq!(body["details"]["errors"][0]["field"], "external_id", "{body}");
    assert_eq!(
        body["details"]["errors"][0]["code"], "invalid_character",
        "{body}"
    );

    let mut company = TestApp::company_body("80069563-1");
    company["legal_name"] = serde_json::json!("ACME\u{0}");
    let response = app
        .as_key(reqwest::Method::POST, "/v1/companies", &key, &tenant)
        .json(&company)
        .send()
        .await
        .expect("post");
    assert_eq!(response.status(), 400);
    let body: serde_json::Value = response.json().await.expect("json");
    assert_eq!(body["details"]["errors"][0]["field"], "legal_name", "{body}");
    // Nothing was stored.
    let response = app
        .as_key(reqwest::Method::GET, "/v1/documents", &key, &tenant)
        .send()
        .await
        .expect("list");
    let list: serde_json::Value = response.json().await.expect("json");
    assert_eq!(list["documents"].as_array().map(Vec::len), Some(0), "{list}");
    app.stop().await;
}

/// Reads from `stream` until the server closes it or `within` passes; returns what came and
/// whether it was closed.
async fn read_until_closed(stream: &mut tokio::net::TcpStream, within: Duration) -> (String, bool) {
    use tokio::io::AsyncReadExt;
    let mut got = Vec::new();
    let deadline = tokio::time::Instant::now() + within;
    loop {
        let mut buf = [0u8; 4096];
        match tokio::time::timeout_at(deadline, stream.read(&mut buf)).await {
            Ok(Ok(0)) | Ok(Err(_)) => return (String::from_utf8_lossy(&got).into_owned(), true),
            Ok(Ok(n)) => got.extend_from_slice(&buf[..n]),
            Err(_) => return (String::from_utf8_lossy(&got).into_owned(), false),
        }
    }
}

#[tokio::test]
async fn a_client_that_never_finishes_its_headers_is_cut_off() {
    // Half-sent headers kept a connection open for 150 s and more.
    use tokio::io::AsyncWriteExt;
    let app = TestApp::spawn_with(|c| c.header_read_timeout_secs = 1).await;
    let addr = app.base.trim_start_matches("http://").to_owned();
    let mut slow = tokio::net::TcpStream::connect(&addr).await.expect("connect");
    slow.write_all(b"GET /health HTTP/1.1\r\nHost: kuatia\r\nX-Slow: ")
        .await
        .expect("write");
    let started = std::time::Instant::now();
    let (_, closed) = read_until_closed(&mut slow, Duration::from_secs(8)).await;
    assert!(closed, "the connection is still open after 8 s");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    // An idle connection that never sends a request is cut too.
    let mut idle = tokio::net::TcpStream::connect(&addr).await.expect("connect");
    let (_, closed) = read_until_closed(&mut idle, Duration::from_secs(8)).await;
    assert!(closed, "an idle connection is still open after 8 s");
    // Whole requests are served as before.
    assert_eq!(app.get("/health").await.status(), 200);
    app.stop().await;
}

#[tokio::test]
async fn a_body_that_never_arrives_whole_is_answered_408() {
    use tokio::io::AsyncWriteExt;
    let app = TestApp::spawn_with(|c| c.body_read_timeout_secs = 1).await;
    let (tenant, key) = app.tenant("slow-body").await;
    let addr = app.base.trim_start_matches("http://").to_owned();
    let mut slow = tokio::net::TcpStream::connect(&addr).await.expect("connect");
    let head = format!(
        "POST /v1/companies HTTP/1.1\r\nHost: kuatia\r\nAuthorization: Bearer {key}\r\nX-Tenant-Id: {tenant}\r\n\
         Content-Type: application/json\r\nContent-Length: 5000\r\n\r\n{{\"ruc\": \"8006"
    );
    slow.write_all(head.as_bytes()).await.expect("write");
    let started = std::time::Instant::now();
    let (answer, _) = read_until_closed(&mut slow, Duration::from_secs(8)).await;
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    assert!(answer.contains("validation_error"), "{answer}");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    app.stop().await;
}

#[tokio::test]
async fn connections_past_the_cap_wait_until_one_closes() {
    let app = TestApp::spawn_with(|c| {
        c.max_connections = 2;
        c.header_read_timeout_secs = 60;
    })
    .await;
    let addr = app.base.trim_start_matches("http://").to_owned();
    let first = tokio::net::TcpStream::connect(&addr).await.expect("connect");
    let second = tokio::net::TcpStream::connect(&addr).await.expect("connect");
    let client = reqwest::Client::builder()
        .timeout(Duration::from_millis(800))
        .build()
        .expect("client");
    let waited = client.get(format!("{}/health", app.base)).send().await;
    assert!(waited.is_err(), "a third connection was served: {waited:?}");
    drop((first, second));
    let served = client
        .get(format!("{}/health", app.base))
        .send()
        .await
        .expect("served");
    assert_eq!(served.status(), 200);
    app.stop().await;
}

#[tokio::test]
async fn an_oversized_request_line_or_header_block_is_refused_in_the_error_shape() {
    // The HTTP layer answered 414 and 431 with empty bodies.
    let app = TestApp::spawn().await;
    let long = app
        .client
        .get(format!("{}/health?q={}", app.base, "a".repeat(9 * 1024)))
        .send()
        .await
        .expect("send");
    assert_eq!(long.status(), 414);
    let body: Value = long.json().await.expect("json");
    assert_error_shape(&body, "validation_error");
    assert!(
        body["message"].as_str().is_some_and(|m| m.contains("8192")),
        "{body}"
    );

    let mut many = app.client.get(format!("{}/health", app.base));
    for i in 0..120 {
        many = many.header(format!("x-filler-{i}"), "1");
    }
    let many = many.send().await.expect("send");
    assert_eq!(many.status(), 431);
    let body: Value = many.json().await.expect("json");
    assert_error_shape(&body, "validation_error");

    let big = app
        .client
        .get(format!("{}/health", app.base))
        .header("x-filler", "b".repeat(40 * 1024))
        .send()
        .await
        .expect("send");
    assert_eq!(big.status(), 431);
    let body: Value = big.json().await.expect("json");
    assert_error_shape(&body, "validation_error");
    app.stop().await;
}

#[tokio::test]
async fn every_list_route_refuses_a_parameter_it_does_not_know_naming_it() {
    // A misspelt filter (`?statuss=accepted`, `?delivery=…` before it exists) silently listed
    // everything; each list route now names the parameter it does not know.
    let app = TestApp::spawn().await;
    let (tenant, key) = app.tenant("unknown-params").await;
    let endpoint = uuid::Uuid::now_v7();
    for path in [
        "/v1/documents?statuss=accepted".to_owned(),
        "/v1/branches?statuss=x".to_owned(),
        "/v1/issuance-points?statuss=x".to_owned(),
        "/v1/emission-channels?statuss=x".to_owned(),
        "/v1/emission-channels/readiness?statuss=x".to_owned(),
        format!("/v1/print-settings?company_id={endpoint}&statuss=x"),
        "/v1/webhooks?statuss=x".to_owned(),
        format!("/v1/webhooks/{endpoint}/deliveries?statuss=x"),
        "/v1/api-keys?statuss=x".to_owned(),
        "/v1/events?statuss=x".to_owned(),
    ] {
        let response = app
            .as_key(reqwest::Method::GET, &path, &key, &tenant)
            .send()
            .await
            .expect("get");
        assert_eq!(response.status(), 400, "{path}");
        let body: Value = response.json().await.expect("json");
        assert_error_shape(&body, "validation_error");
        let error = &body["details"]["errors"][0];
        assert_eq!(
            (error["field"].as_str(), error["code"].as_str()),
            (Some("statuss"), Some("unknown_parameter")),
            "{path}: {body}"
        );
    }
}
