//! The sandbox preview (docs/sandbox.md), black-box: each
//! mode's answer, its signed XML against the XSD and xmlsec1, its PDFs through `pdfinfo`, the
//! errors, the rate limit, the OpenAPI examples, the company's configuration with credentials,
//! and that a hundred previews leave every table, number series and artifact as they were.
//!
//! Needs xmllint (libxml2-utils), xmlsec1 and pdfinfo/pdftotext (poppler-utils).

use kuatia_domain::document::canonical::sample_invoice;
use kuatia_domain::sifen::cdc::Cdc;
use kuatia_domain::sifen::facts::TEST_ISSUER_NAME;
use kuatia_infrastructure::sifen_sim::{self, SimConfig};
use kuatia_tests::{Ready, hours_ago, id, send};
use kuatia_tests::{ScratchDir, TestApp, TestDb};
use reqwest::Method;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

const PATH: &str = "/v1/sandbox/preview";

/// A service whose limits stay out of the way.
async fn app() -> TestApp {
    TestApp::spawn_with(|c| {
        c.rate_limit_per_ip = 100_000;
        c.rate_limit_per_key = 100_000;
    })
    .await
}

/// An anonymous preview: no body at all for `None`.
async fn preview(app: &TestApp, body: Option<&Value>) -> (u16, Value) {
    let request = app.client.post(format!("{}{PATH}", app.base));
    send(match body {
        Some(body) => request.json(body),
        None => request,
    })
    .await
}

/// A preview with an API key, in its tenant.
async fn preview_as(app: &TestApp, r: &Ready, key: &str, body: &Value) -> (u16, Value) {
    send(app.as_key(Method::POST, PATH, key, &r.tenant).json(body)).await
}

fn tool(name: &str, args: &[&str]) -> (bool, String) {
    let out = std::process::Command::new(name)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("`{name}` is needed (libxml2-utils, xmlsec1, poppler-utils): {e}"));
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

fn arg(path: &Path) -> &str {
    path.to_str().expect("utf-8 path")
}

/// The artifact of `kind` in a preview.
fn artifact<'a>(body: &'a Value, kind: &str) -> &'a Value {
    body["artifacts"]
        .as_array()
        .and_then(|a| a.iter().find(|x| x["type"] == kind))
        .unwrap_or_else(|| panic!("no {kind} artifact in {}", body["artifacts"]))
}

fn pdf_bytes(artifact: &Value) -> Vec<u8> {
    use base64::Engine;
    assert_eq!(artifact["content_type"], "application/pdf", "{artifact}");
    assert!(artifact.get("body").is_none(), "a PDF comes as body_base64");
    base64::engine::general_purpose::STANDARD
        .decode(artifact["body_base64"].as_str().expect("body_base64"))
        .expect("base64")
}

/// `pdfinfo` opens it (at least one page) and `pdftotext` finds the watermark; returns its text.
fn check_pdf(dir: &Path, name: &str, pdf: &[u8]) -> String {
    assert!(pdf.starts_with(b"%PDF-"), "{name} is not a PDF");
    let file = dir.join(name);
    std::fs::write(&file, pdf).expect("write the PDF");
    let (ok, info) = tool("pdfinfo", &[arg(&file)]);
    assert!(ok, "pdfinfo {name}: {info}");
    let pages: u32 = info
        .lines()
        .find_map(|l| l.strip_prefix("Pages:"))
        .and_then(|p| p.trim().parse().ok())
        .unwrap_or_else(|| panic!("no page count in {info}"));
    assert!(pages >= 1, "{info}");
    let words = |args: &[&str]| {
        let (ok, text) = tool("pdftotext", args);
        assert!(ok, "pdftotext {name}: {text}");
        text.split_whitespace().collect::<Vec<_>>().join(" ")
    };
    // The watermark is diagonal: in content order (`-raw`) its words stay together.
    let raw = words(&["-raw", arg(&file), "-"]);
    assert!(raw.contains("SIN VALOR FISCAL"), "{name} has no watermark: {raw}");
    words(&[arg(&file), "-"])
}

/// The signed XML validates against siRecepDE_v150.xsd and its signature verifies.
fn check_xml(dir: &Path, xml: &str) {
    let file = dir.join("signed.xml");
    std::fs::write(&file, xml).expect("write the XML");
    let schema = kuatia_tests::sifen_xsd_dir().join("siRecepDE_v150.xsd");
    let (valid, out) = tool(
        "xmllint",
        &["--noout", "--nonet", "--schema", arg(&schema), arg(&file)],
    );
    assert!(valid, "xmllint: {out}");
    let (verified, out) = tool(
        "xmlsec1",
        &["--verify", "--insecure", "--id-attr:Id", "DE", arg(&file)],
    );
    assert!(verified, "xmlsec1: {out}");
}

/// The text of the first `<tag>` of an XML.
fn leaf<'a>(xml: &'a str, tag: &str) -> &'a str {
    let open = format!("<{tag}>");
    let start = xml.find(&open).unwrap_or_else(|| panic!("no {tag}")) + open.len();
    let end = xml[start..].find('<').expect("end") + start;
    &xml[start..end]
}

/// The preview's shape, common to every mode.
fn check_shape(body: &Value, mode: &str, channel: &str, configuration: &str) {
    assert_eq!(body["mode"], mode, "{body}");
    assert_eq!(body["channel"], channel, "{body}");
    assert_eq!(body["fiscal_impact"], false, "{body}");
    assert_eq!(body["persistence"], "none", "{body}");
    let routing = &body["routing"];
    assert_eq!(routing["channel"], channel, "{routing}");
    assert_eq!(routing["configuration"], configuration, "{routing}");
    let number = routing["number"].as_str().expect("number");
    let (prefix, digits) = number.split_at(8);
    assert_eq!(prefix, "999-999-", "{number}");
    assert!(
        digits.len() == 7 && digits.starts_with('9') && digits.bytes().all(|b| b.is_ascii_digit()),
        "{number}"
    );
    assert!(body["document"]["external_id"].is_string(), "{body}");
    assert_eq!(body["document"]["channel"], channel, "{body}");
    assert!(body["response"].is_object(), "{body}");
    assert!(body["warnings"].is_array(), "{body}");
    for artifact in body["artifacts"].as_array().expect("artifacts") {
        assert!(
            artifact["type"].is_string() && artifact["content_type"].is_string(),
            "{artifact}"
        );
        assert!(
            artifact["body"].is_string() ^ artifact["body_base64"].is_string(),
            "{artifact}"
        );
    }
}

/// A SIFEN preview: shape, SIFEN's approval, the XML (XSD, signature, test literal, reserved
/// number, CDC) and the KuDE.
fn check_sifen(body: &Value, mode: &str, configuration: &str) -> String {
    check_shape(body, mode, "sifen", configuration);
    let kinds: Vec<&str> = body["artifacts"]
        .as_array()
        .expect("artifacts")
        .iter()
        .filter_map(|a| a["type"].as_str())
        .collect();
    assert_eq!(kinds, ["signed_xml", "kude", "channel_response"], "{body}");
    let response = &body["response"];
    assert_eq!(response["status"], "Aprobado", "{response}");
    assert_eq!(response["code"], "0260", "{response}");
    assert_eq!(response["approved"], true, "{response}");
    let cdc = response["cdc"].as_str().expect("cdc");
    Cdc::parse(cdc).expect("a CDC with a right check digit");

    let signed = artifact(body, "signed_xml");
    assert_eq!(signed["content_type"], "application/xml");
    let xml = signed["body"]
        .as_str()
        .expect("the signed XML as text")
        .to_owned();
    assert!(
        xml.contains(&format!("<DE Id=\"{cdc}\">")),
        "the XML is the answered CDC's"
    );
    assert_eq!(leaf(&xml, "dNomEmi"), TEST_ISSUER_NAME);
    assert_eq!(leaf(&xml, "dEst"), "999");
    assert_eq!(leaf(&xml, "dPunExp"), "999");
    let number = body["routing"]["number"].as_str().expect("number");
    assert_eq!(leaf(&xml, "dNumDoc"), &number[8..]);
    assert!(
        xml.contains("consultas-test/qr?"),
        "the QR points at the test consultation"
    );
    let answer = artifact(body, "channel_response");
    assert_eq!(answer["content_type"], "application/xml");
    assert!(
        answer["body"].as_str().is_some_and(|a| a.contains("0260")),
        "{answer}"
    );

    let dir = ScratchDir::new();
    check_xml(&dir.0, &xml);
    let text = check_pdf(&dir.0, "kude.pdf", &pdf_bytes(artifact(body, "kude")));
    let grouped: Vec<String> = cdc
        .as_bytes()
        .chunks(4)
        .map(|c| String::from_utf8_lossy(c).into_owned())
        .collect();
    assert!(
        text.contains(&grouped.join(" ")),
        "the KuDE shows the CDC: {text}"
    );
    xml
}

#[tokio::test]
async fn an_empty_body_previews_the_sample_invoice_through_the_simulator_in_process() {
    let app = app().await;
    let (status, body) = preview(&app, None).await;
    assert_eq!(status, 200, "{body}");
    check_sifen(&body, "demo_simulated", "sandbox");
    assert_eq!(body["response"]["endpoint"], "in-process simulator");
    assert_eq!(body["document"]["external_id"], "ERP-0001");
    assert_eq!(body["routing"]["company_id"], Value::Null);
    // The same with `{}` and an explicit mode.
    let (status, again) = preview(&app, Some(&json!({"mode": "demo_simulated"}))).await;
    assert_eq!(status, 200, "{again}");
    assert_ne!(
        again["response"]["cdc"], body["response"]["cdc"],
        "every preview has its own number and security code"
    );
    app.stop().await;
}

#[tokio::test]
async fn demo_simulated_previews_a_callers_document_with_its_seller_as_the_issuer() {
    let app = app().await;
    let mut doc = sample_invoice();
    doc["issue_datetime"] = json!(hours_ago(2));
    doc["external_id"] = json!("MY-ERP-77");
    doc["seller"] =
        json!({"ruc": "80013884-8", "legal_name": "MI EMPRESA S.A.", "email": "ventas@miempresa.com.py"});
    let (status, body) = preview(&app, Some(&doc)).await;
    assert_eq!(status, 200, "{body}");
    let xml = check_sifen(&body, "demo_simulated", "sandbox");
    assert_eq!(leaf(&xml, "dRucEm"), "80013884");
    assert_eq!(leaf(&xml, "dEmailE"), "ventas@miempresa.com.py");
    assert_eq!(body["document"]["external_id"], "MY-ERP-77");
    assert_eq!(body["document"]["seller"]["legal_name"], "MI EMPRESA S.A.");
    app.stop().await;
}

#[tokio::test]
async fn sifen_dev_sends_the_signed_de_over_soap_to_a_simulator_of_its_own() {
    let app = app().await;
    let (status, body) = preview(&app, Some(&json!({"mode": "sifen_dev"}))).await;
    assert_eq!(status, 200, "{body}");
    check_sifen(&body, "sifen_dev", "sandbox");
    let endpoint = body["response"]["endpoint"].as_str().expect("endpoint");
    assert!(
        endpoint.starts_with("http://127.0.0.1:") && endpoint.ends_with("/de/ws/sync/recibe.wsdl"),
        "{endpoint}"
    );
    assert_eq!(body["response"]["http_status"], 200);
    app.stop().await;
}

#[tokio::test]
async fn sifen_dev_sends_to_the_configured_sifen_test_endpoint() {
    let sim = kuatia_infrastructure::sifen_sim::start("127.0.0.1:0", Default::default())
        .await
        .expect("simulator");
    let url = sim.base_url();
    let app = TestApp::spawn_with(|c| {
        c.rate_limit_per_ip = 100_000;
        c.sandbox_sifen_url = Some(url.clone());
    })
    .await;
    let (status, body) = preview(&app, Some(&json!({"mode": "sifen_dev"}))).await;
    assert_eq!(status, 200, "{body}");
    check_sifen(&body, "sifen_dev", "sandbox");
    let endpoint = body["response"]["endpoint"].as_str().expect("endpoint");
    assert_eq!(endpoint, format!("{url}/de/ws/sync/recibe.wsdl"));
    // The configured endpoint judged it: the simulator holds its approval.
    let stats = sim.simulator.stats();
    assert_eq!(stats.approvals.len(), 1, "{stats:?}");
    app.stop().await;
}

#[tokio::test]
async fn autoimpresor_test_returns_the_printable_pdf_with_the_watermark() {
    let app = app().await;
    let mut doc = sample_invoice();
    doc["mode"] = json!("autoimpresor_test");
    doc["type"] = json!("receipt");
    let (status, body) = preview(&app, Some(&doc)).await;
    assert_eq!(status, 200, "{body}");
    check_shape(&body, "autoimpresor_test", "autoimpresor", "sandbox");
    let kinds: Vec<&str> = body["artifacts"]
        .as_array()
        .expect("artifacts")
        .iter()
        .filter_map(|a| a["type"].as_str())
        .collect();
    assert_eq!(kinds, ["printable_pdf"], "{body}");
    assert_eq!(body["response"]["status"], "printed", "{body}");
    assert_eq!(body["response"]["reported"], false, "{body}");
    let number = body["routing"]["number"].as_str().expect("number").to_owned();
    let dir = ScratchDir::new();
    let text = check_pdf(
        &dir.0,
        "printable.pdf",
        &pdf_bytes(artifact(&body, "printable_pdf")),
    );
    assert!(text.contains(&number), "the printable shows {number}: {text}");
    assert!(text.contains("80069563-1"), "{text}");

    // A document naming the autoimpresor channel needs no mode.
    let mut doc = sample_invoice();
    doc["channel"] = json!("autoimpresor");
    let (status, body) = preview(&app, Some(&doc)).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["mode"], "autoimpresor_test");
    app.stop().await;
}

/// `(status, code, [(field, code)])` of an error answer, which must carry a request id.
fn refusal(status: u16, body: &Value) -> (u16, String, Vec<(String, String)>) {
    assert!(
        body["request_id"].as_str().is_some_and(|r| !r.is_empty()),
        "{body}"
    );
    assert!(body["message"].as_str().is_some_and(|m| !m.is_empty()), "{body}");
    let issues = body["details"]["errors"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|i| {
                    (
                        i["field"].as_str().unwrap_or_default().to_owned(),
                        i["code"].as_str().unwrap_or_default().to_owned(),
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    (
        status,
        body["code"].as_str().unwrap_or_default().to_owned(),
        issues,
    )
}

fn issue(field: &str, code: &str) -> (String, String) {
    (field.to_owned(), code.to_owned())
}

#[tokio::test]
async fn client_mistakes_answer_400_with_every_issue_and_never_500() {
    let app = app().await;
    let raw = |body: &'static str, content_type: &'static str| {
        send(
            app.client
                .post(format!("{}{PATH}", app.base))
                .header("Content-Type", content_type)
                .body(body),
        )
    };
    let (status, body) = raw("{not json", "application/json").await;
    assert_eq!(
        refusal(status, &body),
        (400, "validation_error".into(), vec![issue("$", "malformed_json")])
    );
    let (status, body) = raw("[1, 2]", "application/json").await;
    assert_eq!(
        refusal(status, &body),
        (400, "validation_error".into(), vec![issue("$", "invalid_type")])
    );
    let (status, body) = raw(r#"{"mode": "production"}"#, "application/json").await;
    assert_eq!(
        refusal(status, &body),
        (
            400,
            "validation_error".into(),
            vec![issue("mode", "invalid_enum")]
        )
    );
    let (status, body) = raw(r#"{"mode": 7}"#, "application/json").await;
    assert_eq!(
        refusal(status, &body),
        (
            400,
            "validation_error".into(),
            vec![issue("mode", "invalid_type")]
        )
    );
    let (status, body) = raw(r#"{"mode": "sifen_dev"}"#, "text/plain").await;
    assert_eq!(refusal(status, &body).0, 415, "{body}");

    let mut doc = sample_invoice();
    doc["items"][0]["unit_price"] = json!("110000");
    let (status, body) = preview(&app, Some(&doc)).await;
    assert_eq!(
        refusal(status, &body),
        (
            400,
            "validation_error".into(),
            vec![issue("items[0].unit_price", "invalid_type")]
        )
    );

    // Business rules: every issue at once.
    let mut doc = sample_invoice();
    doc["issue_datetime"] = json!(hours_ago(24 * 40));
    doc["totals"]["grand_total"] = json!(999);
    let (status, body) = preview(&app, Some(&doc)).await;
    let (status, code, issues) = refusal(status, &body);
    assert_eq!((status, code.as_str()), (400, "validation_error"), "{body}");
    assert!(
        issues.contains(&issue("issue_datetime", "issue_datetime_too_old")),
        "{body}"
    );
    assert!(
        issues.contains(&issue("totals.grand_total", "amount_mismatch")),
        "{body}"
    );

    let mut doc = sample_invoice();
    doc["type"] = json!("receipt");
    doc["issue_datetime"] = json!(hours_ago(1));
    let (status, body) = preview(&app, Some(&doc)).await;
    assert_eq!(
        refusal(status, &body),
        (
            400,
            "validation_error".into(),
            vec![issue("type", "unsupported_document_type")]
        )
    );

    let mut doc = sample_invoice();
    doc["channel"] = json!("sifen");
    doc["mode"] = json!("autoimpresor_test");
    let (status, body) = preview(&app, Some(&doc)).await;
    assert_eq!(
        refusal(status, &body),
        (
            400,
            "validation_error".into(),
            vec![issue("channel", "not_allowed")]
        )
    );

    // Credentials that are sent are checked, never ignored.
    let (status, body) = send(
        app.client
            .post(format!("{}{PATH}", app.base))
            .bearer_auth("kt_test_not-a-key"),
    )
    .await;
    assert_eq!(refusal(status, &body).0, 401, "{body}");
    app.stop().await;
}

#[tokio::test]
async fn anonymous_previews_are_rate_limited_per_ip() {
    let app = TestApp::spawn_with(|c| c.rate_limit_per_ip = 2).await;
    for _ in 0..2 {
        let (status, body) = preview(&app, Some(&json!({"mode": "autoimpresor_test"}))).await;
        assert_eq!(status, 200, "{body}");
    }
    let response = app
        .client
        .post(format!("{}{PATH}", app.base))
        .send()
        .await
        .expect("send");
    assert_eq!(response.status().as_u16(), 429);
    assert!(response.headers().contains_key("retry-after"));
    let body: Value = response.json().await.expect("json");
    assert_eq!(body["code"], "rate_limit_error", "{body}");
    assert_eq!(body["details"]["bucket"], "requests_minute", "{body}");
    assert_eq!(body["details"]["limit"], 2, "{body}");
    app.stop().await;
}

#[tokio::test]
async fn the_openapi_document_has_the_sandbox_with_examples_that_run() {
    let app = app().await;
    let doc: Value = app.get("/openapi.json").await.json().await.expect("openapi");
    let operation = &doc["paths"][PATH]["post"];
    assert_eq!(operation["tags"], json!(["sandbox"]), "{operation}");
    assert!(
        operation["security"]
            .as_array()
            .is_some_and(|s| s.iter().any(|r| r == &json!({}))),
        "the preview needs no credentials: {}",
        operation["security"]
    );
    for status in ["200", "400", "429"] {
        assert!(operation["responses"][status].is_object(), "{status}");
    }
    let examples = operation["requestBody"]["content"]["application/json"]["examples"]
        .as_object()
        .expect("request examples");
    assert!(examples.len() >= 3, "{examples:?}");
    for (name, example) in examples {
        let (status, body) = preview(&app, Some(&example["value"])).await;
        assert_eq!(status, 200, "the example {name} must run: {body}");
        assert_eq!(body["fiscal_impact"], false);
    }
    let schemas = &doc["components"]["schemas"];
    for schema in [
        "SandboxPreviewResponse",
        "SandboxArtifact",
        "SandboxRouting",
        "SandboxMode",
        "SandboxPreviewRequest",
    ] {
        assert!(
            schemas[schema].is_object(),
            "{schema} missing from the components"
        );
    }
    app.stop().await;
}

#[tokio::test]
async fn with_credentials_the_preview_uses_the_companys_configuration_and_role() {
    let app = app().await;
    let r = app.ready_at("sandbox", "http://127.0.0.1:9").await;

    // An empty body previews the sample invoice as this company's.
    let (status, body) = preview_as(&app, &r, &r.key, &json!({})).await;
    assert_eq!(status, 200, "{body}");
    let xml = check_sifen(&body, "demo_simulated", "company");
    assert_eq!(body["routing"]["company_id"], r.company.as_str(), "{body}");
    assert_eq!(body["routing"]["branch_id"], r.branch.as_str(), "{body}");
    assert_eq!(body["routing"]["issuance_point_id"], r.point.as_str(), "{body}");
    assert_eq!(leaf(&xml, "dRucEm"), "80069563");
    assert_eq!(leaf(&xml, "dNumTim"), "12345678");
    assert_eq!(
        leaf(&xml, "dEst"),
        "999",
        "the reserved establishment, not the branch's 001"
    );

    // The company's own certificate signed it (not a throw-away one).
    let (status, certificates) = send(app.as_key(Method::GET, "/v1/certificates", &r.key, &r.tenant)).await;
    assert_eq!(status, 200, "{certificates}");
    let listed = certificates.to_string();
    assert!(listed.contains("DE GENERACION ELECTRONICA S.A."), "{listed}");
    assert!(xml.contains("<X509Certificate>"), "the certificate is embedded");

    // sifen_dev with the company's CSC.
    let (status, body) = preview_as(&app, &r, &r.key, &json!({"mode": "sifen_dev"})).await;
    assert_eq!(status, 200, "{body}");
    check_sifen(&body, "sifen_dev", "company");

    // No autoimpresor channel: the configuration cannot issue it.
    let (status, body) = preview_as(&app, &r, &r.key, &json!({"mode": "autoimpresor_test"})).await;
    let (status, code, _) = refusal(status, &body);
    assert_eq!((status, code.as_str()), (400, "configuration_error"), "{body}");

    // A viewer may not use the sandbox; another tenant's header is refused.
    let (status, viewer) = send(
        app.as_key(Method::POST, "/v1/api-keys", &r.key, &r.tenant)
            .json(&json!({"name": "viewer", "role": "viewer"})),
    )
    .await;
    assert_eq!(status, 201, "{viewer}");
    let viewer_key = viewer["key"].as_str().expect("key");
    let (status, body) = preview_as(&app, &r, viewer_key, &json!({})).await;
    assert_eq!(refusal(status, &body).1, "permission_error", "{body}");
    let (other_tenant, _) = app.tenant("other").await;
    let (status, body) = send(
        app.as_key(Method::POST, PATH, &r.key, &other_tenant)
            .json(&json!({})),
    )
    .await;
    assert_eq!(
        (status, body["code"].as_str()),
        (403, Some("permission_error")),
        "{body}"
    );

    // Nothing became a document.
    let (status, list) = send(app.as_key(Method::GET, "/v1/documents", &r.key, &r.tenant)).await;
    assert_eq!(status, 200, "{list}");
    assert_eq!(list["documents"].as_array().map(Vec::len), Some(0), "{list}");
    app.stop().await;
}

// ---------------------------------------------------------------------------------------------
// Nothing persisted.

/// Rows of every table of the database (the catalogue's list, not a hand-kept one).
async fn table_counts(db: &TestDb) -> BTreeMap<String, i64> {
    use sqlx::{AssertSqlSafe, Row};
    let mut counts = BTreeMap::new();
    if let Some(mut conn) = db.owner_pg().await {
        let tables: Vec<(String, String)> = sqlx::query(
            "SELECT table_schema, table_name FROM information_schema.tables \
             WHERE table_type = 'BASE TABLE' AND table_schema NOT IN ('pg_catalog', 'information_schema')",
        )
        .fetch_all(&mut conn)
        .await
        .expect("the catalogue")
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect();
        for (schema, table) in tables {
            let count: i64 = sqlx::query_scalar(AssertSqlSafe(format!(
                "SELECT COUNT(*) FROM \"{schema}\".\"{table}\""
            )))
            .fetch_one(&mut conn)
            .await
            .expect("count");
            counts.insert(format!("{schema}.{table}"), count);
        }
    } else {
        let mut conn = db.owner_sqlite().await.expect("sqlite");
        let tables: Vec<String> =
            sqlx::query_scalar("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")
                .fetch_all(&mut conn)
                .await
                .expect("the catalogue");
        for table in tables {
            let count: i64 = sqlx::query_scalar(AssertSqlSafe(format!("SELECT COUNT(*) FROM \"{table}\"")))
                .fetch_one(&mut conn)
                .await
                .expect("count");
            counts.insert(table, count);
        }
    }
    assert!(counts.len() > 10, "the catalogue lists the tables: {counts:?}");
    counts
}

/// Files under a folder, recursively.
fn files_under(dir: &Path) -> usize {
    std::fs::read_dir(dir).map_or(0, |entries| {
        entries
            .filter_map(Result::ok)
            .map(|e| {
                let path = e.path();
                if path.is_dir() { files_under(&path) } else { 1 }
            })
            .sum()
    })
}

/// Everything a preview could leave behind: every table's row count (but the rate limiter's
/// own counters, compared apart), every number series, the artifact files.
#[derive(Debug, PartialEq)]
struct Footprint {
    tables: BTreeMap<String, i64>,
    series: Vec<Vec<Option<String>>>,
    artifact_files: usize,
}

/// The table of the per-IP and per-key request counters: previews are counted like any request
/// (that is the rate limit), so its rows are checked apart.
fn is_rate_limit_table(name: &str) -> bool {
    name.ends_with("rate_limit_windows")
}

async fn footprint(app: &TestApp, artifacts: &Path) -> Footprint {
    let mut tables = table_counts(&app.db).await;
    tables.retain(|name, _| !is_rate_limit_table(name));
    let series = kuatia_tests::snapshot(
        &app.service().database,
        "SELECT CAST(tenant_id AS TEXT), series, CAST(next_number AS TEXT) FROM number_series ORDER BY 1, 2",
    )
    .await;
    Footprint {
        tables,
        series,
        artifact_files: files_under(artifacts),
    }
}

/// Waits until background work (the document's jobs, projections) has settled: the footprint
/// is the same twice a second apart.
async fn settled(app: &TestApp, artifacts: &Path) -> Footprint {
    let mut last = footprint(app, artifacts).await;
    for _ in 0..60 {
        tokio::time::sleep(Duration::from_millis(1000)).await;
        let now = footprint(app, artifacts).await;
        if now == last {
            return now;
        }
        last = now;
    }
    panic!("the service never settled: {last:?}");
}

#[tokio::test]
async fn a_hundred_previews_of_every_mode_leave_every_table_series_and_artifact_as_they_were() {
    let sim = sifen_sim::start("127.0.0.1:0", SimConfig::default())
        .await
        .expect("simulator");
    let store = ScratchDir::new();
    let artifacts: PathBuf = store.0.join("artifacts");
    let app = TestApp::spawn_with(|c| {
        c.rate_limit_per_ip = 100_000;
        c.rate_limit_per_key = 100_000;
        c.artifacts_url = Some(artifacts.display().to_string());
    })
    .await;
    // A tenant that has issued a real document: a number series, artifacts, events and jobs.
    let r = app.ready_at("persist", &sim.base_url()).await;
    let mut invoice = sample_invoice();
    invoice["company_id"] = json!(r.company);
    invoice["issue_datetime"] = json!(hours_ago(1));
    let document = id(&r.post(&invoice).await);
    r.wait_status(&document, "accepted", Duration::from_secs(60))
        .await;
    // Its KuDE is rendered in the background after the acceptance, later on a busy machine: the
    // footprint is taken once it is recorded.
    r.wait_recorded(&document, "kude", 1, Duration::from_secs(60))
        .await;
    let before = settled(&app, &artifacts).await;
    assert!(!before.series.is_empty(), "the issued document opened a series");
    assert!(before.artifact_files > 0, "the issued document stored artifacts");

    let sample = {
        let mut doc = sample_invoice();
        doc["mode"] = json!("autoimpresor_test");
        doc
    };
    let company_sample = {
        let mut doc = sample_invoice();
        doc["company_id"] = json!(r.company);
        doc["issue_datetime"] = json!(hours_ago(1));
        doc["external_id"] = json!("ERP-0001");
        doc
    };
    let mut modes = BTreeMap::<String, usize>::new();
    for i in 0..100 {
        let (status, body) = match i % 5 {
            0 => preview(&app, None).await,
            1 => preview(&app, Some(&json!({"mode": "sifen_dev"}))).await,
            2 => preview(&app, Some(&sample)).await,
            3 => preview_as(&app, &r, &r.key, &json!({})).await,
            // The very document issued above, previewed: its number is not taken again.
            _ => {
                let mut doc = company_sample.clone();
                doc["mode"] = json!("sifen_dev");
                preview_as(&app, &r, &r.key, &doc).await
            }
        };
        assert_eq!(status, 200, "preview {i}: {body}");
        assert_eq!(body["persistence"], "none");
        *modes
            .entry(format!("{} {}", body["mode"], body["routing"]["configuration"]))
            .or_default() += 1;
    }
    assert_eq!(modes.len(), 5, "{modes:?}");

    let after = settled(&app, &artifacts).await;
    assert_eq!(before, after, "a preview left something behind");
    // The only rows the previews may add are the rate limiter's counters of this minute (per
    // IP, key and tenant).
    let counters = kuatia_tests::snapshot(
        &app.service().database,
        "SELECT bucket_key FROM rate_limit_windows ORDER BY 1",
    )
    .await;
    for row in counters {
        let key = row[0].clone().unwrap_or_default();
        assert!(
            key.starts_with("ip:") || key.starts_with("api_key:") || key.starts_with("tenant:"),
            "unexpected counter {key}"
        );
    }
    // The simulator the company's channel points at saw only the real document.
    let stats: Value = reqwest::get(format!("{}/sim/stats", sim.base_url()))
        .await
        .expect("stats")
        .json()
        .await
        .expect("json");
    assert_eq!(
        stats["approvals"].as_object().map(serde_json::Map::len),
        Some(1),
        "{stats}"
    );
    app.stop().await;
}
