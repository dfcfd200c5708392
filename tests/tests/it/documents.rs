//! Document intake and reading, black-box: the real
//! service over HTTP on a fresh database.

use chrono::{DateTime, Duration, SecondsFormat, Utc};
use kuatia_domain::document::canonical::sample_invoice;
use kuatia_domain::ruc::Ruc;
use kuatia_tests::{RUC, Ready, TestApp, add_company_at, error_code, hours_ago, id, in_paraguay, send};
use reqwest::Method;
use serde_json::{Value, json};

const OTHER_RUC: &str = "80013884-8";
const BUYER_RUC: &str = "80013884-8";
/// An electronic invoice's CDC (the validation module's example).
const INVOICE_CDC: &str = "01800695631001001000000122025011511234567899";

/// `(field, code)` of a list of issues.
fn pairs(issues: &Value) -> Vec<(String, String)> {
    issues
        .as_array()
        .unwrap_or_else(|| panic!("not an issue list: {issues}"))
        .iter()
        .map(|e| {
            (
                e["field"].as_str().unwrap_or_default().to_owned(),
                e["code"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect()
}

fn pair(field: &str, code: &str) -> (String, String) {
    (field.to_owned(), code.to_owned())
}

/// The issue at `field` in a list.
fn issue_at<'a>(issues: &'a Value, field: &str) -> &'a Value {
    issues
        .as_array()
        .and_then(|a| a.iter().find(|i| i["field"] == field))
        .unwrap_or_else(|| panic!("no issue at {field} in {issues}"))
}

async fn add_company(app: &TestApp, tenant: &str, key: &str, ruc: &str) -> (String, String, String) {
    add_company_at(app, tenant, key, ruc, "http://127.0.0.1:8082").await
}

/// [`TestApp::ready_at`] with the channel pointing at port 8082 of this machine.
async fn ready(app: &TestApp, slug: &str) -> Ready {
    app.ready_at(slug, "http://127.0.0.1:8082").await
}

struct Fx {
    app: TestApp,
    r: Ready,
}

/// A POST /v1/documents answer.
struct Posted {
    status: u16,
    body: Value,
    replayed: Option<String>,
}

impl Fx {
    async fn new() -> Self {
        Self::with(|_| {}).await
    }

    async fn with(adjust: impl FnOnce(&mut kuatia_infrastructure::config::Config)) -> Self {
        // No job workers: these tests look at intake, and a document must stay `queued`.
        let app = TestApp::spawn_with(|c| {
            c.workers = 0;
            adjust(c);
        })
        .await;
        let r = ready(&app, "acme").await;
        Self { app, r }
    }

    fn req(&self, method: Method, path: &str) -> reqwest::RequestBuilder {
        self.r.req(method, path)
    }

    fn req_as(&self, key: &str, method: Method, path: &str) -> reqwest::RequestBuilder {
        self.app.as_key(method, path, key, &self.r.tenant)
    }

    /// The sample invoice for this company, issued `hours` ago.
    fn invoice(&self, external_id: &str, hours: i64) -> Value {
        let mut doc = sample_invoice();
        doc["company_id"] = json!(self.r.company);
        doc["external_id"] = json!(external_id);
        doc["issue_datetime"] = json!(hours_ago(hours));
        doc
    }

    async fn post_raw(&self, key: &str, idem: &str, body: Vec<u8>) -> Posted {
        let response = self
            .req_as(key, Method::POST, "/v1/documents")
            .header("Idempotency-Key", idem)
            .header("Content-Type", "application/json")
            .body(body)
            .send()
            .await
            .expect("send");
        let status = response.status().as_u16();
        let replayed = response
            .headers()
            .get("idempotent-replayed")
            .map(|v| v.to_str().expect("ascii").to_owned());
        let body = response.json().await.unwrap_or(Value::Null);
        Posted {
            status,
            body,
            replayed,
        }
    }

    async fn post(&self, idem: &str, body: &Value) -> Posted {
        self.post_raw(&self.r.key, idem, body.to_string().into_bytes())
            .await
    }

    /// Posts and expects 201 with `status`; returns the id.
    async fn create(&self, body: &Value, status: &str) -> String {
        let posted = self.post(&uuid::Uuid::now_v7().to_string(), body).await;
        assert_eq!(posted.status, 201, "{}", posted.body);
        assert_eq!(posted.body["status"], status, "{}", posted.body);
        id(&posted.body)
    }

    async fn validate(&self, body: &Value) -> (u16, Value) {
        send(self.req(Method::POST, "/v1/documents/validate").json(body)).await
    }

    async fn list_as(&self, key: &str, query: &str) -> (u16, Value) {
        send(self.req_as(key, Method::GET, &format!("/v1/documents{query}"))).await
    }

    /// The ids a listing answers (one page), asserting 200.
    async fn ids(&self, query: &str) -> Vec<String> {
        self.ids_as(&self.r.key, query).await
    }

    async fn ids_as(&self, key: &str, query: &str) -> Vec<String> {
        let (status, body) = self.list_as(key, query).await;
        assert_eq!(status, 200, "{query}: {body}");
        body["documents"]
            .as_array()
            .unwrap_or_else(|| panic!("documents in {body}"))
            .iter()
            .map(id)
            .collect()
    }

    /// Issues an API key of `role` (optionally scoped to a company); returns (key, key id).
    async fn key(&self, role: &str, company: Option<&str>) -> (String, String) {
        self.r.api_key(role, company).await
    }

    async fn owner_key_id(&self) -> String {
        let (status, current) = send(self.req(Method::GET, "/v1/api-keys/current")).await;
        assert_eq!(status, 200, "{current}");
        id(&current)
    }

    async fn stop(self) {
        self.app.stop().await;
    }

    /// The company's sifen channel as listed.
    async fn sifen_channel(&self) -> Value {
        self.r.sifen_channel().await
    }
}

// ---------------------------------------------------------------------------------------------
// 2. Refusals
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn malformed_json_is_refused_with_its_code_and_nothing_is_stored() {
    let f = Fx::new().await;
    let posted = f.post_raw(&f.r.key, "k-malformed", b"{not json".to_vec()).await;
    error_code(posted.status, &posted.body, 400, "validation_error");
    let errors = &posted.body["details"]["errors"];
    assert_eq!(errors[0]["code"], "malformed_json", "{}", posted.body);
    assert_eq!(errors[0]["field"], "$", "{}", posted.body);

    // validate says the same, without routing
    let (status, v) = send(
        f.req(Method::POST, "/v1/documents/validate")
            .header("Content-Type", "application/json")
            .body("{not json"),
    )
    .await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["valid"], false, "{v}");
    assert_eq!(pairs(&v["errors"]), vec![pair("$", "malformed_json")]);
    assert_eq!(v["routing"], Value::Null, "{v}");

    let (status, list) = f.list_as(&f.r.key, "").await;
    assert_eq!(status, 200, "{list}");
    assert_eq!(list["documents"], json!([]), "{list}");
    assert_eq!(list["next_cursor"], Value::Null, "{list}");

    // The key was never used: the corrected body goes through under it.
    let posted = f.post("k-malformed", &f.invoice("ERP-1", 1)).await;
    assert_eq!(
        (posted.status, posted.body["status"].as_str()),
        (201, Some("queued")),
        "{}",
        posted.body
    );
    f.stop().await;
}

#[tokio::test]
async fn structural_problems_are_400_with_their_code_at_their_field() {
    let f = Fx::new().await;

    let mut factura = f.invoice("ERP-1", 1);
    factura["type"] = json!("factura");
    let posted = f.post("k1", &factura).await;
    error_code(posted.status, &posted.body, 400, "validation_error");
    assert_eq!(
        pairs(&posted.body["details"]["errors"]),
        vec![pair("type", "invalid_enum")],
        "{}",
        posted.body
    );

    let mut seven = f.invoice("ERP-2", 1);
    seven["items"][0]["tax_rate"] = json!(7);
    let posted = f.post("k2", &seven).await;
    error_code(posted.status, &posted.body, 400, "validation_error");
    assert_eq!(
        pairs(&posted.body["details"]["errors"]),
        vec![pair("items[0].tax_rate", "invalid_tax_rate")],
        "{}",
        posted.body
    );

    let mut usd = f.invoice("ERP-3", 1);
    usd["currency"] = json!("USD");
    let posted = f.post("k3", &usd).await;
    error_code(posted.status, &posted.body, 400, "validation_error");
    assert_eq!(
        pairs(&posted.body["details"]["errors"]),
        vec![pair("currency", "unsupported_currency")],
        "{}",
        posted.body
    );

    // validate lists them too
    for (doc, expected) in [
        (&factura, pair("type", "invalid_enum")),
        (&seven, pair("items[0].tax_rate", "invalid_tax_rate")),
        (&usd, pair("currency", "unsupported_currency")),
    ] {
        let (status, v) = f.validate(doc).await;
        assert_eq!(status, 200, "{v}");
        assert_eq!(v["valid"], false, "{v}");
        assert_eq!(pairs(&v["errors"]), vec![expected], "{v}");
    }

    assert_eq!(f.ids("").await, Vec::<String>::new(), "nothing stored");
    f.stop().await;
}

/// Issue 26, item 4: the body is checked against the published JSON Schema first, so every
/// missing, unknown and mistyped field is named in one answer, at its path, and intake,
/// validation and the sandbox give the same answer.
#[tokio::test]
async fn every_structural_problem_comes_back_at_once_from_intake_validate_and_the_sandbox() {
    let f = Fx::new().await;

    let posted = f.post("k-empty", &json!({})).await;
    error_code(posted.status, &posted.body, 400, "validation_error");
    assert_eq!(
        pairs(&posted.body["details"]["errors"]),
        [
            "currency",
            "external_id",
            "issue_datetime",
            "items",
            "payment_terms",
            "seller",
            "totals",
            "type"
        ]
        .map(|field| pair(field, "required")),
        "{}",
        posted.body
    );

    let mut doc = f.invoice("ERP-1", 1);
    doc["items"][0]["quantity"] = json!("1");
    doc["items"][1]["tax_ratee"] = json!(5);
    doc["buyer"]["colour"] = json!("red");
    doc["totals"]
        .as_object_mut()
        .expect("totals")
        .remove("grand_total");
    let expected = vec![
        pair("buyer.colour", "unknown_field"),
        pair("items[0].quantity", "invalid_type"),
        pair("items[1].tax_ratee", "unknown_field"),
        pair("totals.grand_total", "required"),
    ];
    let posted = f.post("k-many", &doc).await;
    error_code(posted.status, &posted.body, 400, "validation_error");
    let errors = &posted.body["details"]["errors"];
    assert_eq!(pairs(errors), expected, "{}", posted.body);
    assert!(
        issue_at(errors, "items[1].tax_ratee")["message"]
            .as_str()
            .is_some_and(|m| m.contains("`tax_rate`")),
        "an unknown field's message lists the fields there are: {errors}"
    );

    let (status, v) = f.validate(&doc).await;
    assert_eq!((status, &v["valid"]), (200, &json!(false)), "{v}");
    assert_eq!(&v["errors"], errors, "validate answers what intake answers");

    let (status, preview) = send(
        f.app
            .client
            .post(format!("{}/v1/sandbox/preview", f.app.base))
            .json(&doc),
    )
    .await;
    assert_eq!(status, 400, "{preview}");
    assert_eq!(
        &preview["details"]["errors"], errors,
        "the sandbox answers what intake answers"
    );

    assert_eq!(f.ids("").await, Vec::<String>::new(), "nothing stored");
    f.stop().await;
}

/// Issue 26, item 5: a date-time without its offset is refused with the form it needs and an
/// example, not chrono's "premature end of input".
#[tokio::test]
async fn a_date_time_without_offset_is_refused_naming_the_form_with_an_example() {
    let f = Fx::new().await;
    let mut doc = f.invoice("ERP-1", 1);
    doc["issue_datetime"] = json!("2026-11-26T10:15:00");
    let posted = f.post("k-offset", &doc).await;
    error_code(posted.status, &posted.body, 400, "validation_error");
    let errors = &posted.body["details"]["errors"];
    assert_eq!(
        pairs(errors),
        vec![pair("issue_datetime", "invalid_format")],
        "{errors}"
    );
    let message = errors[0]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("no UTC offset") && message.contains("2026-11-26T10:15:00-03:00"),
        "{message}"
    );
    assert!(!message.contains("premature end of input"), "{message}");

    let mut doc = f.invoice("ERP-2", 1);
    doc["payment_terms"] = json!({"condition": "credit", "due_date": "2026-11-26T10:15:00-03:00"});
    let posted = f.post("k-date", &doc).await;
    let errors = &posted.body["details"]["errors"];
    assert_eq!(
        pairs(errors),
        vec![pair("payment_terms.due_date", "invalid_format")],
        "{errors}"
    );
    assert!(
        errors[0]["message"]
            .as_str()
            .is_some_and(|m| m.contains("2026-11-26") && m.contains("YYYY-MM-DD")),
        "{errors}"
    );
    f.stop().await;
}

/// The schema intake checks against is published, standalone, and is the OpenAPI document's.
#[tokio::test]
async fn the_canonical_document_schema_is_published_as_the_openapi_component() {
    let app = TestApp::spawn().await;
    let (status, schema) = send(
        app.client
            .get(format!("{}/v1/schemas/canonical-document", app.base)),
    )
    .await;
    assert_eq!(status, 200, "{schema}");
    assert_eq!(schema["$schema"], "https://json-schema.org/draft/2020-12/schema");
    let (_, openapi) = send(app.client.get(format!("{}/openapi.json", app.base))).await;
    let component = &openapi["components"]["schemas"]["CanonicalDocument"];
    assert_eq!(
        schema["properties"].as_object().map(|p| p.len()),
        component["properties"].as_object().map(|p| p.len())
    );
    assert_eq!(schema["required"], component["required"]);
    assert_eq!(schema["additionalProperties"], json!(false));
    assert!(schema["$defs"]["Item"].is_object(), "{schema}");
    assert!(!schema.to_string().contains("#/components/"), "standalone");
    app.stop().await;
}

#[tokio::test]
async fn missing_or_empty_idempotency_key_is_400() {
    let f = Fx::new().await;
    let (status, err) = send(f.req(Method::POST, "/v1/documents").json(&f.invoice("ERP-1", 1))).await;
    error_code(status, &err, 400, "validation_error");
    assert_eq!(
        pairs(&err["details"]["errors"]),
        vec![pair("Idempotency-Key", "required")],
        "{err}"
    );
    let posted = f.post("   ", &f.invoice("ERP-1", 1)).await;
    error_code(posted.status, &posted.body, 400, "validation_error");
    let long = "k".repeat(256);
    let posted = f.post(&long, &f.invoice("ERP-1", 1)).await;
    error_code(posted.status, &posted.body, 400, "validation_error");
    assert_eq!(f.ids("").await, Vec::<String>::new());
    f.stop().await;
}

#[tokio::test]
async fn a_business_error_is_stored_as_validation_failed_with_the_expected_value() {
    let f = Fx::new().await;
    let mut doc = f.invoice("ERP-ARITH", 1);
    doc["items"][1]["tax_amount"] = json!(2621);

    let (status, v) = f.validate(&doc).await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["valid"], false, "{v}");
    assert_eq!(
        pairs(&v["errors"]),
        vec![pair("items[1].tax_amount", "amount_mismatch")],
        "{v}"
    );
    assert_eq!(v["routing"]["company_id"], f.r.company.as_str(), "{v}");

    let posted = f.post("k-arith", &doc).await;
    assert_eq!(posted.status, 201, "{}", posted.body);
    assert_eq!(posted.body["status"], "validation_failed", "{}", posted.body);
    assert_eq!(posted.body["external_id"], "ERP-ARITH");
    assert_eq!(
        pairs(&posted.body["errors"]),
        vec![pair("items[1].tax_amount", "amount_mismatch")],
        "{}",
        posted.body
    );
    let message = issue_at(&posted.body["errors"], "items[1].tax_amount")["message"]
        .as_str()
        .expect("message")
        .to_owned();
    assert!(message.contains("expected 2619"), "{message}");
    assert!(message.contains("2621"), "{message}");

    // One guaraní off is accepted.
    let mut off_by_one = f.invoice("ERP-ONE", 1);
    off_by_one["items"][1]["tax_amount"] = json!(2620);
    let (_, v) = f.validate(&off_by_one).await;
    assert_eq!(v["valid"], true, "{v}");

    let doc_id = id(&posted.body);
    let (status, st) = send(f.req(Method::GET, &format!("/v1/documents/{doc_id}/status"))).await;
    assert_eq!(status, 200, "{st}");
    assert_eq!(st["status"], "validation_failed");
    assert_eq!(st["errors"], posted.body["errors"]);

    // A credit note without its associated document.
    let mut note = f.invoice("ERP-NC", 1);
    note["type"] = json!("credit_note");
    note["reason"] = json!(2);
    let posted = f.post("k-note", &note).await;
    assert_eq!(posted.status, 201, "{}", posted.body);
    assert_eq!(posted.body["status"], "validation_failed", "{}", posted.body);
    assert_eq!(
        pairs(&posted.body["errors"]),
        vec![pair("associated_document", "conditionally_required")],
        "{}",
        posted.body
    );
    f.stop().await;
}

#[tokio::test]
async fn the_created_answer_is_exactly_what_the_status_endpoint_then_shows() {
    // The 201 body is built without reading the document back; it must equal the stored row.
    let f = Fx::new().await;
    let mut failing = f.invoice("ERP-EQ-FAIL", 1);
    failing["items"][1]["tax_amount"] = json!(2621);
    for (idem, doc, status) in [
        ("k-eq-ok", f.invoice("ERP-EQ-OK", 1), "queued"),
        ("k-eq-fail", failing, "validation_failed"),
    ] {
        let posted = f.post(idem, &doc).await;
        assert_eq!(posted.status, 201, "{}", posted.body);
        assert_eq!(posted.body["status"], status, "{}", posted.body);
        let doc_id = id(&posted.body);
        let (code, stored) = send(f.req(Method::GET, &format!("/v1/documents/{doc_id}/status"))).await;
        assert_eq!(code, 200, "{stored}");
        assert_eq!(stored, posted.body, "POST answer and stored status differ");
        let replay = f.post(idem, &doc).await;
        assert_eq!(replay.body, posted.body, "the replay answers the same body");
    }
    f.stop().await;
}

#[tokio::test]
async fn intake_sees_a_configuration_change_made_after_its_last_read() {
    // Intake keeps each company's configuration per process while its version stays put; a
    // change must reach the very next request.
    let f = Fx::new().await;
    f.create(&f.invoice("ERP-CACHE-1", 1), "queued").await;
    let (status, second) = send(f.req(Method::POST, "/v1/branches").json(&json!({
        "company_id": f.r.company, "code": "002", "name": "Sucursal"
    })))
    .await;
    assert_eq!(status, 201, "{second}");
    let (status, point) = send(
        f.req(Method::POST, "/v1/issuance-points")
            .json(&json!({"branch_id": id(&second), "code": "001"})),
    )
    .await;
    assert_eq!(status, 201, "{point}");
    let posted = f.post("k-cache-2", &f.invoice("ERP-CACHE-2", 1)).await;
    error_code(posted.status, &posted.body, 400, "configuration_error");
    assert_eq!(
        pairs(&posted.body["details"]["errors"]),
        vec![pair("branch_id", "ambiguous_default")],
        "{}",
        posted.body
    );
    f.stop().await;
}

#[tokio::test]
async fn an_ambiguous_default_branch_is_a_configuration_error_and_nothing_is_stored() {
    let f = Fx::new().await;
    let (status, second) = send(f.req(Method::POST, "/v1/branches").json(&json!({
        "company_id": f.r.company, "code": "002", "name": "Sucursal"
    })))
    .await;
    assert_eq!(status, 201, "{second}");
    let (status, point) = send(
        f.req(Method::POST, "/v1/issuance-points")
            .json(&json!({"branch_id": id(&second), "code": "001"})),
    )
    .await;
    assert_eq!(status, 201, "{point}");

    let doc = f.invoice("ERP-AMB", 1);
    let posted = f.post("k-amb", &doc).await;
    error_code(posted.status, &posted.body, 400, "configuration_error");
    assert_eq!(
        pairs(&posted.body["details"]["errors"]),
        vec![pair("branch_id", "ambiguous_default")],
        "{}",
        posted.body
    );
    let (status, v) = f.validate(&doc).await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["valid"], false);
    assert_eq!(
        pairs(&v["errors"]),
        vec![pair("branch_id", "ambiguous_default")],
        "{v}"
    );
    assert_eq!(f.ids("").await, Vec::<String>::new(), "nothing stored");

    // Naming the branch routes it (and the key, never claimed, still works).
    let mut named = doc.clone();
    named["branch_id"] = json!(f.r.branch);
    let posted = f.post("k-amb", &named).await;
    assert_eq!(posted.status, 201, "{}", posted.body);
    assert_eq!(posted.body["branch_id"], f.r.branch.as_str());
    assert_eq!(posted.body["issuance_point_id"], f.r.point.as_str());

    // Marking the first branch the default (PATCH) routes the next document there at once.
    let (status, marked) = send(
        f.req(Method::PATCH, &format!("/v1/branches/{}", f.r.branch))
            .json(&json!({"is_default": true})),
    )
    .await;
    assert_eq!(status, 200, "{marked}");
    let mut unnamed = doc.clone();
    unnamed["external_id"] = json!("ERP-AMB-2");
    let posted = f.post("k-amb-2", &unnamed).await;
    assert_eq!(posted.status, 201, "{}", posted.body);
    assert_eq!(posted.body["branch_id"], f.r.branch.as_str());
    f.stop().await;
}

#[tokio::test]
async fn an_oversized_body_is_413_and_a_wrong_content_type_415_on_both_endpoints() {
    let f = Fx::with(|c| c.max_body_bytes = 4096).await;
    let mut big = f.invoice("ERP-BIG", 1);
    big["metadata"] = json!({"note": "x".repeat(5000)});
    let body = big.to_string();
    assert!(body.len() > 4096);
    for path in ["/v1/documents", "/v1/documents/validate"] {
        let (status, err) = send(
            f.req(Method::POST, path)
                .header("Idempotency-Key", "k-big")
                .header("Content-Type", "application/json")
                .body(body.clone()),
        )
        .await;
        error_code(status, &err, 413, "validation_error");

        let (status, err) = send(
            f.req(Method::POST, path)
                .header("Idempotency-Key", "k-text")
                .header("Content-Type", "text/plain")
                .body(f.invoice("ERP-TXT", 1).to_string()),
        )
        .await;
        error_code(status, &err, 415, "validation_error");

        let (status, err) = send(
            f.req(Method::POST, path)
                .header("Idempotency-Key", "k-none")
                .body(f.invoice("ERP-TXT", 1).to_string()),
        )
        .await;
        error_code(status, &err, 415, "validation_error");
    }
    assert_eq!(f.ids("").await, Vec::<String>::new());
    // A small document still goes through.
    let posted = f.post("k-small", &f.invoice("ERP-SMALL", 1)).await;
    assert_eq!(posted.status, 201, "{}", posted.body);
    f.stop().await;
}

// ---------------------------------------------------------------------------------------------
// 3. Idempotency
// ---------------------------------------------------------------------------------------------

/// The same JSON with the keys of every object in reverse order and other whitespace.
fn reordered(value: &Value) -> String {
    match value {
        Value::Object(object) => {
            let mut keys: Vec<&String> = object.keys().collect();
            keys.sort();
            keys.reverse();
            let fields: Vec<String> = keys
                .into_iter()
                .map(|k| format!("\n  {} :  {}", json!(k), reordered(&object[k])))
                .collect();
            format!("{{{}\n}}", fields.join(" ,"))
        }
        Value::Array(items) => format!(
            "[ {} ]",
            items.iter().map(reordered).collect::<Vec<_>>().join(" , ")
        ),
        other => other.to_string(),
    }
}

#[tokio::test]
async fn the_same_key_and_body_replays_and_another_body_conflicts() {
    let f = Fx::new().await;
    let doc = f.invoice("ERP-IDEM", 1);
    let first = f.post("idem-1", &doc).await;
    assert_eq!(first.status, 201, "{}", first.body);
    assert_eq!(first.body["status"], "queued");
    assert_eq!(first.replayed, None, "the first answer is not a replay");
    for field in [
        "id",
        "external_id",
        "status",
        "channel",
        "company_id",
        "branch_id",
        "issuance_point_id",
        "cdc",
        "number",
        "created_at",
        "errors",
        "warnings",
        "links",
    ] {
        assert!(first.body.get(field).is_some(), "{field} missing: {}", first.body);
    }
    let first_id = id(&first.body);
    assert_eq!(first.body["external_id"], "ERP-IDEM");
    assert_eq!(first.body["channel"], "sifen");
    assert_eq!(first.body["company_id"], f.r.company.as_str());
    assert_eq!(first.body["branch_id"], f.r.branch.as_str());
    assert_eq!(first.body["issuance_point_id"], f.r.point.as_str());
    assert_eq!(first.body["grand_total"], json!(165000));
    assert_eq!(
        first.body["links"],
        json!({"self": format!("/v1/documents/{first_id}"),
               "status": format!("/v1/documents/{first_id}/status"),
               "timeline": format!("/v1/documents/{first_id}/timeline")})
    );

    let again = f.post("idem-1", &doc).await;
    assert_eq!(again.status, 201, "{}", again.body);
    assert_eq!(again.replayed.as_deref(), Some("true"));
    assert_eq!(id(&again.body), id(&first.body));
    assert_eq!(again.body, first.body, "the original response");

    let text = reordered(&doc);
    assert_ne!(text, doc.to_string());
    let shuffled = f.post_raw(&f.r.key, "idem-1", text.into_bytes()).await;
    assert_eq!(shuffled.status, 201, "{}", shuffled.body);
    assert_eq!(shuffled.replayed.as_deref(), Some("true"));
    assert_eq!(id(&shuffled.body), id(&first.body));

    let mut other = doc.clone();
    other["external_id"] = json!("ERP-OTHER");
    let conflict = f.post("idem-1", &other).await;
    error_code(conflict.status, &conflict.body, 409, "validation_error");

    // Another key with the same body would be a second fiscal document for the same sale: its
    // external_id names the first, which is live (issue 26).
    let second = f.post("idem-2", &doc).await;
    error_code(second.status, &second.body, 409, "conflict_error");
    assert_eq!(
        second.body["details"]["existing_document_id"],
        id(&first.body).as_str()
    );

    let ids = f.ids("").await;
    assert_eq!(ids, vec![id(&first.body)]);

    // Keys are per tenant: another tenant's "idem-1" is its own.
    let other = ready(&f.app, "other").await;
    let mut theirs = sample_invoice();
    theirs["company_id"] = json!(other.company);
    theirs["issue_datetime"] = doc["issue_datetime"].clone();
    let posted = f.post_raw(&other.key, "idem-1", Vec::new()).await;
    assert_eq!(
        posted.status, 403,
        "our tenant header with their key: {}",
        posted.body
    );
    let (status, body) = send(
        f.app
            .as_key(Method::POST, "/v1/documents", &other.key, &other.tenant)
            .header("Idempotency-Key", "idem-1")
            .json(&theirs),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    assert_ne!(id(&body), first_id);
    assert_eq!(f.ids("").await, ids, "ours unchanged");
    f.stop().await;
}

#[tokio::test]
async fn fifty_concurrent_requests_with_one_key_make_one_document() {
    let f = Fx::new().await;
    let body = f.invoice("ERP-RACE", 1).to_string();
    let url = format!("{}/v1/documents", f.app.base);
    let mut handles = Vec::new();
    for _ in 0..50 {
        let client = f.app.client.clone();
        let (url, body, key, tenant) = (url.clone(), body.clone(), f.r.key.clone(), f.r.tenant.clone());
        handles.push(tokio::spawn(async move {
            let response = client
                .post(url)
                .bearer_auth(key)
                .header("X-Tenant-Id", tenant)
                .header("Idempotency-Key", "race-key")
                .header("Content-Type", "application/json")
                .body(body)
                .send()
                .await
                .expect("send");
            let status = response.status().as_u16();
            (status, response.json::<Value>().await.unwrap_or(Value::Null))
        }));
    }
    let mut ids = Vec::new();
    for handle in handles {
        let (status, body) = handle.await.expect("join");
        assert_eq!(status, 201, "{body}");
        ids.push(id(&body));
    }
    ids.dedup();
    assert_eq!(ids.len(), 1, "one and the same id: {ids:?}");
    assert_eq!(f.ids("").await, ids, "exactly one document");
    f.stop().await;
}

// ---------------------------------------------------------------------------------------------
// 4. Listing
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn every_list_filter_returns_exactly_the_expected_documents() {
    let f = Fx::new().await;
    let second_buyer = Ruc::from_number("80004464").expect("ruc");
    let second_buyer = format!("{}-{}", second_buyer.number(), second_buyer.check_digit());

    let d1 = f.create(&f.invoice("A-1", 40), "queued").await;
    let mut doc2 = f.invoice("A-2", 30);
    doc2["buyer"]["ruc"] = json!(second_buyer);
    let d2 = f.create(&doc2, "queued").await;
    let mut doc3 = f.invoice("A-3", 20);
    doc3["totals"]["grand_total"] = json!(165002);
    let d3 = f.create(&doc3, "validation_failed").await;
    let mut doc4 = f.invoice("A-4", 10);
    doc4.as_object_mut().expect("object").remove("buyer");
    let d4 = f.create(&doc4, "queued").await;
    let d5 = f.create(&f.invoice("A-5", 5), "queued").await;
    let all = vec![d5.clone(), d4.clone(), d3.clone(), d2.clone(), d1.clone()];

    assert_eq!(f.ids("").await, all, "newest first");
    assert_eq!(f.ids("?external_id=A-2").await, vec![d2.clone()]);
    assert_eq!(f.ids("?external_id=A-9").await, Vec::<String>::new());
    assert_eq!(f.ids("?status=validation_failed").await, vec![d3.clone()]);
    assert_eq!(
        f.ids("?status=queued").await,
        vec![d5.clone(), d4.clone(), d2.clone(), d1.clone()]
    );
    assert_eq!(f.ids("?status=rejected").await, Vec::<String>::new());
    assert_eq!(f.ids("?channel=sifen").await, all);
    assert_eq!(f.ids("?channel=autoimpresor").await, Vec::<String>::new());
    assert_eq!(f.ids(&format!("?company_id={}", f.r.company)).await, all);
    assert_eq!(
        f.ids(&format!("?company_id={}", uuid::Uuid::now_v7())).await,
        Vec::<String>::new()
    );
    let with_buyer = vec![d5.clone(), d3.clone(), d1.clone()];
    assert_eq!(f.ids(&format!("?ruc={BUYER_RUC}")).await, with_buyer, "with DV");
    assert_eq!(f.ids("?ruc=80013884").await, with_buyer, "without DV");
    assert_eq!(f.ids(&format!("?ruc={second_buyer}")).await, vec![d2.clone()]);
    assert_eq!(f.ids("?ruc=80004464").await, vec![d2.clone()]);
    assert_eq!(f.ids("?ruc=1234567").await, Vec::<String>::new());

    // date_from inclusive, date_to exclusive, on issue_datetime (any offset).
    let (_, list) = f.list_as(&f.r.key, "").await;
    let issue_of = |doc_id: &str| -> DateTime<Utc> {
        let doc = list["documents"]
            .as_array()
            .expect("documents")
            .iter()
            .find(|d| d["id"] == doc_id)
            .expect("listed");
        doc["issue_datetime"]
            .as_str()
            .expect("issue_datetime")
            .parse()
            .expect("date-time")
    };
    let (t2, t4) = (issue_of(&d2), issue_of(&d4));
    let enc = |t: DateTime<Utc>| in_paraguay(t).replace('+', "%2B");
    assert_eq!(
        f.ids(&format!("?date_from={}&date_to={}", enc(t2), enc(t4)))
            .await,
        vec![d3.clone(), d2.clone()]
    );
    assert_eq!(
        f.ids(&format!("?date_from={}", enc(t4))).await,
        vec![d5.clone(), d4.clone()]
    );
    assert_eq!(f.ids(&format!("?date_to={}", enc(t2))).await, vec![d1.clone()]);
    let utc = t2.to_rfc3339_opts(SecondsFormat::Secs, true);
    assert_eq!(
        f.ids(&format!(
            "?date_from={utc}&date_to={}",
            enc(t2 + Duration::seconds(1))
        ))
        .await,
        vec![d2.clone()],
        "the same instant in UTC"
    );
    // combined filters
    assert_eq!(
        f.ids("?ruc=80013884&status=queued&limit=1").await,
        vec![d5.clone()]
    );

    // cdc: well-formed matches nothing yet (no document transformed); malformed is 400.
    let (status, list) = f.list_as(&f.r.key, &format!("?cdc={INVOICE_CDC}")).await;
    assert_eq!(status, 200, "{list}");
    assert_eq!(list["documents"], json!([]));
    for bad in [
        "?cdc=123",
        "?cdc=0180069563100100100000012202501151123456789X",
        "?cdc=018006956310010010000001220250115112345678999",
        "?limit=0",
        "?limit=101",
        "?limit=-1",
        "?limit=ten",
        "?date_from=2026-03-01",
        "?date_to=yesterday",
        "?status=pending",
        "?channel=email",
        "?company_id=acme",
        "?ruc=ABC",
        "?cursor=nope",
    ] {
        let (status, err) = f.list_as(&f.r.key, bad).await;
        error_code(status, &err, 400, "validation_error");
        assert!(err["message"].is_string(), "{bad}: {err}");
    }
    assert_eq!(f.ids("?limit=100").await, all);
    assert_eq!(f.ids("?limit=1").await, vec![d5.clone()]);

    // Paging by 2 walks everything newest first, without skipping or repeating.
    let mut walked = Vec::new();
    let mut cursor: Option<String> = None;
    let mut pages = 0;
    loop {
        let query = match &cursor {
            Some(c) => format!("?limit=2&cursor={c}"),
            None => "?limit=2".to_owned(),
        };
        let (status, page) = f.list_as(&f.r.key, &query).await;
        assert_eq!(status, 200, "{page}");
        pages += 1;
        let ids: Vec<String> = page["documents"]
            .as_array()
            .expect("documents")
            .iter()
            .map(id)
            .collect();
        assert!(ids.len() <= 2);
        walked.extend(ids);
        match page["next_cursor"].as_str() {
            Some(c) => cursor = Some(c.to_owned()),
            None => {
                assert_eq!(page["next_cursor"], Value::Null, "{page}");
                break;
            }
        }
        assert!(pages < 10, "paging does not end");
    }
    assert_eq!(walked, all);
    assert_eq!(pages, 3);
    // An exact last page has no cursor.
    let (_, page) = f.list_as(&f.r.key, "?status=queued&limit=2").await;
    let c = page["next_cursor"].as_str().expect("cursor").to_owned();
    let (_, page) = f
        .list_as(&f.r.key, &format!("?status=queued&limit=2&cursor={c}"))
        .await;
    assert_eq!(page["documents"].as_array().map(Vec::len), Some(2), "{page}");
    assert_eq!(page["next_cursor"], Value::Null, "{page}");
    f.stop().await;
}

#[tokio::test]
async fn a_company_scoped_key_sees_only_its_company() {
    let f = Fx::new().await;
    let (other, _, _) = add_company(&f.app, &f.r.tenant, &f.r.key, OTHER_RUC).await;
    let mine = f.create(&f.invoice("MINE", 1), "queued").await;
    let mut theirs_doc = sample_invoice();
    theirs_doc["company_id"] = json!(other);
    theirs_doc["external_id"] = json!("THEIRS");
    theirs_doc["issue_datetime"] = json!(hours_ago(1));
    theirs_doc["seller"]["ruc"] = json!(OTHER_RUC);
    theirs_doc["buyer"]["ruc"] = json!(RUC);
    let theirs = f.create(&theirs_doc, "queued").await;
    assert_eq!(f.ids("").await, vec![theirs.clone(), mine.clone()]);
    assert_eq!(f.ids(&format!("?company_id={other}")).await, vec![theirs.clone()]);

    // A company-scoped issuer needs no company_id, and cannot name another company.
    let (issuer, _) = f.key("issuer", Some(&f.r.company)).await;
    let mut implicit = f.invoice("IMPLICIT", 1);
    implicit.as_object_mut().expect("object").remove("company_id");
    let posted = f
        .post_raw(&issuer, "scoped-1", implicit.to_string().into_bytes())
        .await;
    assert_eq!(posted.status, 201, "{}", posted.body);
    assert_eq!(posted.body["company_id"], f.r.company.as_str());
    let mine2 = id(&posted.body);
    let posted = f
        .post_raw(&issuer, "scoped-2", theirs_doc.to_string().into_bytes())
        .await;
    error_code(posted.status, &posted.body, 404, "not_found");
    // The owner's key without company_id cannot be routed.
    let posted = f.post("unscoped", &implicit).await;
    error_code(posted.status, &posted.body, 400, "configuration_error");
    assert_eq!(
        pairs(&posted.body["details"]["errors"]),
        vec![pair("company_id", "missing_configuration")]
    );
    assert_eq!(f.ids("").await, vec![mine2.clone(), theirs.clone(), mine.clone()]);

    let (scoped, _) = f.key("viewer", Some(&f.r.company)).await;
    assert_eq!(f.ids_as(&scoped, "").await, vec![mine2.clone(), mine.clone()]);
    assert_eq!(
        f.ids_as(&scoped, &format!("?company_id={}", f.r.company)).await,
        vec![mine2.clone(), mine.clone()]
    );
    let (status, err) = f.list_as(&scoped, &format!("?company_id={other}")).await;
    error_code(status, &err, 404, "not_found");
    for path in ["", "/status"] {
        let (status, err) =
            send(f.req_as(&scoped, Method::GET, &format!("/v1/documents/{theirs}{path}"))).await;
        error_code(status, &err, 404, "not_found");
        let (status, ok) = send(f.req_as(&scoped, Method::GET, &format!("/v1/documents/{mine}{path}"))).await;
        assert_eq!(status, 200, "{ok}");
    }
    f.stop().await;
}

// ---------------------------------------------------------------------------------------------
// 5. Timeline and access
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn the_timeline_records_intake_immutably_for_roles_with_audit_access() {
    let f = Fx::new().await;
    let body = f.invoice("ERP-TL", 1);
    let posted = f.post("tl-1", &body).await;
    assert_eq!(posted.status, 201, "{}", posted.body);
    let doc = id(&posted.body);
    let owner_id = f.owner_key_id().await;
    let path = format!("/v1/documents/{doc}/timeline");

    let (status, timeline) = send(f.req(Method::GET, &path)).await;
    assert_eq!(status, 200, "{timeline}");
    let entries = timeline.as_array().expect("entries");
    let types: Vec<&str> = entries
        .iter()
        .map(|e| e["type"].as_str().expect("type"))
        .collect();
    assert_eq!(
        types,
        ["DocumentReceived", "DocumentValidated", "DocumentQueued"],
        "{timeline}"
    );
    let statuses: Vec<&str> = entries
        .iter()
        .map(|e| e["status"].as_str().expect("status"))
        .collect();
    assert_eq!(statuses, ["received", "validated", "queued"], "{timeline}");
    // The actor resolved to the key's name; the chain links shown so an auditor can follow them.
    assert!(
        entries.iter().all(|e| e["actor"]["type"] == "api_key"
            && e["actor"]["id"] == owner_id.as_str()
            && e["actor"]["name"] == "bootstrap"),
        "{owner_id}: {timeline}"
    );
    assert!(entries[0]["prev_hash"].is_null(), "{timeline}");
    assert!(
        entries.windows(2).all(
            |w| w[1]["prev_hash"] == w[0]["hash"] && w[0]["hash"].as_str().is_some_and(|h| h.len() == 64)
        ),
        "{timeline}"
    );
    let positions: Vec<i64> = entries
        .iter()
        .map(|e| e["position"].as_i64().expect("position"))
        .collect();
    assert!(positions.windows(2).all(|w| w[0] < w[1]), "{positions:?}");
    let versions: Vec<i64> = entries
        .iter()
        .map(|e| e["version"].as_i64().expect("version"))
        .collect();
    assert!(versions.windows(2).all(|w| w[0] < w[1]), "{versions:?}");
    assert!(entries.iter().all(|e| e["at"].is_string()));

    // The log answers the same events for the document, and for its company.
    let (status, log) = send(f.req(Method::GET, &format!("/v1/events?document={doc}"))).await;
    assert_eq!(status, 200, "{log}");
    let log_types: Vec<&str> = log["events"]
        .as_array()
        .expect("events")
        .iter()
        .filter_map(|e| e["type"].as_str())
        .collect();
    assert_eq!(log_types, types, "{log}");
    let (_, of_company) = send(f.req(
        Method::GET,
        &format!("/v1/events?company={}&type=DocumentQueued", f.r.company),
    ))
    .await;
    assert_eq!(
        of_company["events"].as_array().map(Vec::len),
        Some(1),
        "{of_company}"
    );
    // The company of an event is read through the read models: a rebuild changes no answer.
    let company_log = format!("/v1/events?company={}", f.r.company);
    let (_, before) = send(f.req(Method::GET, &company_log)).await;
    assert!(before.to_string().contains(&doc), "{before}");
    let store = f.app.service().database.store();
    let no_progress = |_: i64, _: i64| {};
    for projection in kuatia_projections::registry::all() {
        if projection.kind() != kuatia_application::event_store::ProjectionKind::SideEffect {
            kuatia_projections::runtime::rebuild(&store, projection.as_ref(), &no_progress)
                .await
                .expect("rebuild");
        }
    }
    let (_, after) = send(f.req(Method::GET, &company_log)).await;
    assert_eq!(
        after["events"], before["events"],
        "the same events after a rebuild"
    );

    // Reading again, and after other documents were created, changes nothing.
    f.create(&f.invoice("ERP-TL-2", 2), "queued").await;
    let (status, again) = send(f.req(Method::GET, &path)).await;
    assert_eq!(status, 200);
    assert_eq!(again, timeline, "a timeline never changes");
    // A replay of the creating request adds nothing either.
    let replay = f.post("tl-1", &body).await;
    assert_eq!((replay.status, replay.replayed.as_deref()), (201, Some("true")));
    assert_eq!(id(&replay.body), doc);
    let (_, after_replay) = send(f.req(Method::GET, &path)).await;
    assert_eq!(after_replay, timeline);

    // The detail carries it for the owner.
    let (status, detail) = send(f.req(Method::GET, &format!("/v1/documents/{doc}"))).await;
    assert_eq!(status, 200, "{detail}");
    assert_eq!(detail["summary"]["id"], doc.as_str());
    assert_eq!(detail["summary"]["status"], "queued");
    assert_eq!(detail["artifacts"], json!([]));
    assert_eq!(detail["timeline"], timeline);

    // A viewer and an issuer read the document but not its timeline.
    for role in ["viewer", "issuer"] {
        let (key, _) = f.key(role, None).await;
        let (status, err) = send(f.req_as(&key, Method::GET, &path)).await;
        error_code(status, &err, 403, "permission_error");
        let (status, detail) = send(f.req_as(&key, Method::GET, &format!("/v1/documents/{doc}"))).await;
        assert_eq!(status, 200, "{detail}");
        assert_eq!(detail["summary"]["id"], doc.as_str());
        assert!(
            detail.as_object().expect("object").contains_key("timeline"),
            "{detail}"
        );
        assert_eq!(detail["timeline"], Value::Null, "{role}: {detail}");
        let (status, st) = send(f.req_as(&key, Method::GET, &format!("/v1/documents/{doc}/status"))).await;
        assert_eq!((status, st["status"].as_str()), (200, Some("queued")), "{st}");
    }
    // An auditor and an admin read it.
    for role in ["auditor", "admin"] {
        let (key, _) = f.key(role, None).await;
        let (status, read) = send(f.req_as(&key, Method::GET, &path)).await;
        assert_eq!(status, 200, "{read}");
        assert_eq!(read, timeline);
        let (status, detail) = send(f.req_as(&key, Method::GET, &format!("/v1/documents/{doc}"))).await;
        assert_eq!(status, 200, "{detail}");
        assert_eq!(detail["timeline"], timeline);
    }
    // An auditor cannot issue.
    let (auditor, _) = f.key("auditor", None).await;
    let posted = f
        .post_raw(
            &auditor,
            "tl-aud",
            f.invoice("ERP-AUD", 1).to_string().into_bytes(),
        )
        .await;
    error_code(posted.status, &posted.body, 403, "permission_error");
    f.stop().await;
}

#[tokio::test]
async fn a_validation_failure_has_its_own_timeline() {
    let f = Fx::new().await;
    let mut doc = f.invoice("ERP-BAD", 1);
    doc["totals"]["grand_total"] = json!(165002);
    let bad = f.create(&doc, "validation_failed").await;
    let (status, timeline) = send(f.req(Method::GET, &format!("/v1/documents/{bad}/timeline"))).await;
    assert_eq!(status, 200, "{timeline}");
    let entries = timeline.as_array().expect("entries");
    let got: Vec<(&str, &str)> = entries
        .iter()
        .map(|e| {
            (
                e["type"].as_str().expect("type"),
                e["status"].as_str().expect("status"),
            )
        })
        .collect();
    assert_eq!(
        got,
        [
            ("DocumentReceived", "received"),
            ("DocumentValidationFailed", "validation_failed")
        ],
        "{timeline}"
    );
    f.stop().await;
}

#[tokio::test]
async fn another_tenant_reaches_no_document_route() {
    let f = Fx::new().await;
    let doc = f.create(&f.invoice("ERP-T", 1), "queued").await;
    let other = ready(&f.app, "other").await;
    let theirs_list = {
        let (status, list) = send(
            f.app
                .as_key(Method::GET, "/v1/documents", &other.key, &other.tenant),
        )
        .await;
        assert_eq!(status, 200, "{list}");
        list
    };
    assert_eq!(theirs_list["documents"], json!([]), "{theirs_list}");
    for path in ["", "/status", "/timeline"] {
        let url = format!("/v1/documents/{doc}{path}");
        // Their key in their tenant: no such document.
        let (status, err) = send(f.app.as_key(Method::GET, &url, &other.key, &other.tenant)).await;
        error_code(status, &err, 404, "not_found");
        // Their key with our tenant header: refused.
        let (status, err) = send(f.app.as_key(Method::GET, &url, &other.key, &f.r.tenant)).await;
        error_code(status, &err, 403, "permission_error");
    }
    let (status, err) = send(
        f.app
            .as_key(Method::GET, "/v1/documents", &other.key, &f.r.tenant),
    )
    .await;
    error_code(status, &err, 403, "permission_error");
    // Their key cannot route to our company.
    let posted = f
        .post_raw(&other.key, "x", f.invoice("ERP-X", 1).to_string().into_bytes())
        .await;
    assert_eq!(posted.status, 403, "wrong tenant header: {}", posted.body);
    let (status, err) = send(
        f.app
            .as_key(Method::POST, "/v1/documents", &other.key, &other.tenant)
            .header("Idempotency-Key", "x")
            .json(&f.invoice("ERP-X", 1)),
    )
    .await;
    error_code(status, &err, 400, "configuration_error");
    assert_eq!(
        pairs(&err["details"]["errors"]),
        vec![pair("company_id", "unknown_reference")]
    );
    // Unknown document.
    let ghost = uuid::Uuid::now_v7();
    let (status, err) = send(f.req(Method::GET, &format!("/v1/documents/{ghost}"))).await;
    error_code(status, &err, 404, "not_found");
    assert_eq!(f.ids("").await, vec![doc]);
    f.stop().await;
}

// ---------------------------------------------------------------------------------------------
// 1. Every document type
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn a_valid_document_of_each_type_is_validated_and_received() {
    let f = Fx::new().await;
    let today = Utc::now().date_naive();
    let (status, auto) = send(f.req(Method::POST, "/v1/emission-channels").json(&json!({
        "company_id": f.r.company,
        "channel": "autoimpresor",
        "credentials": {"endpoint": "https://reportes.example.com.py", "api_key": "autoimpresor-api-key-1a2b3c"},
        "autoimpresor": {
            "authorization": "AUT-2026-001",
            "declared_software": "kuatia",
            "timbrado": "87654321",
            "valid_from": (today - Duration::days(30)).to_string(),
            "valid_to": (today + Duration::days(335)).to_string(),
            "branch_id": f.r.branch,
            "issuance_point_id": f.r.point,
            "range_start": 1,
            "range_end": 500,
        },
    })))
    .await;
    assert_eq!(status, 201, "{auto}");

    // A remisión on sifen needs the channel's legal notice (dInfoFisc).
    let sifen = f.sifen_channel().await;
    let (status, patched) = send(
        f.req(Method::PATCH, &format!("/v1/emission-channels/{}", id(&sifen)))
            .json(&json!({"sifen": {"remision_notice": "Texto legal de prueba (RG 41/2014)"}})),
    )
    .await;
    assert_eq!(status, 200, "{patched}");

    let invoice = f.invoice("T-invoice", 1);
    let note = |kind: &str| {
        let mut d = f.invoice(&format!("T-{kind}"), 1);
        d["type"] = json!(kind);
        d["reason"] = json!(2);
        d["associated_document"] = json!({"cdc": INVOICE_CDC});
        d
    };
    let mut remision = f.invoice("T-remision", 1);
    remision["type"] = json!("remision");
    remision["reason"] = json!(1);
    remision["transport"] = json!({
        "kind": "own", "distance_km": 12, "invoice_date": &hours_ago(1)[..10],
        "vehicle": {"type": "Camión", "brand": "Scania", "plate": "ABC123"},
        "carrier": {"name": "Transportes SA", "ruc": "80013884-8", "address": "Ruta 1",
                    "driver_document": "1234567", "driver_name": "Pedro Gómez", "driver_address": "Luque"}
    });
    remision["buyer"]["address"] = json!("Av. Mariscal López");
    remision["buyer"]["house_number"] = json!("1234");
    remision["buyer"]["department_code"] = json!(1);
    remision["buyer"]["city_code"] = json!(1);
    let mut autofactura = f.invoice("T-autofactura", 1);
    autofactura["type"] = json!("autofactura");
    autofactura["seller"] = json!({"legal_name": "Juan Benítez", "document_type": "ci",
        "document_number": "1234567", "address": "Compañía Potrero", "house_number": "0",
        "department_code": 11, "city_code": 3383, "city_name": "CIUDAD DEL ESTE"});
    autofactura.as_object_mut().expect("object").remove("buyer");
    autofactura["items"] = json!([{"description": "Mandioca (kg)", "quantity": 100, "unit_price": 3000,
        "tax_rate": 0, "tax_amount": 0, "total_amount": 300000, "unit": 83}]);
    autofactura["totals"] = json!({"subtotal": 300000, "tax_total": 0, "grand_total": 300000});
    autofactura["payment_terms"] = json!({"condition": "cash", "method": "cash"});
    autofactura["associated_document"] = json!({"constancia_type": 1,
        "constancia_number": "12345678901", "constancia_control": "AB12-CD3"});
    let mut receipt = f.invoice("T-receipt", 1);
    receipt["type"] = json!("receipt");
    receipt["channel"] = json!("autoimpresor");
    // The autoimpresor printable shows no department or city: codes SET's table would not
    // agree on (city 6 is Aguará, in Concepción) are no obstacle there.
    receipt["buyer"]["address"] = json!("Avda. San Blas");
    receipt["buyer"]["house_number"] = json!("120");
    receipt["buyer"]["department_code"] = json!(11);
    receipt["buyer"]["city_code"] = json!(6);

    let cases = [
        ("invoice", invoice, "sifen"),
        ("credit_note", note("credit_note"), "sifen"),
        ("debit_note", note("debit_note"), "sifen"),
        ("remision", remision, "sifen"),
        ("autofactura", autofactura, "sifen"),
        ("receipt", receipt.clone(), "autoimpresor"),
    ];
    for (kind, doc, channel) in &cases {
        let (status, v) = f.validate(doc).await;
        assert_eq!(status, 200, "{kind}: {v}");
        assert_eq!(v["valid"], true, "{kind}: {v}");
        assert_eq!(v["errors"], json!([]), "{kind}: {v}");
        assert_eq!(v["routing"]["channel"], *channel, "{kind}: {v}");
        assert_eq!(v["routing"]["company_id"], f.r.company.as_str(), "{kind}: {v}");
        assert_eq!(v["routing"]["branch_id"], f.r.branch.as_str(), "{kind}: {v}");
        assert_eq!(
            v["routing"]["issuance_point_id"],
            f.r.point.as_str(),
            "{kind}: {v}"
        );

        let posted = f.post(&format!("type-{kind}"), doc).await;
        assert_eq!(posted.status, 201, "{kind}: {}", posted.body);
        assert_eq!(posted.body["status"], "queued", "{kind}: {}", posted.body);
        assert_eq!(posted.body["type"], *kind, "{}", posted.body);
        assert_eq!(posted.body["channel"], *channel, "{}", posted.body);
        assert_eq!(posted.body["external_id"], format!("T-{kind}"));
        assert_eq!(posted.body["company_id"], f.r.company.as_str());
        assert_eq!(posted.body["errors"], json!([]));
    }
    // A receipt on the sifen channel is a business error, and there its buyer's place is checked.
    let mut on_sifen = receipt;
    on_sifen["channel"] = json!("sifen");
    let (_, v) = f.validate(&on_sifen).await;
    assert_eq!(v["valid"], false, "{v}");
    assert_eq!(
        pairs(&v["errors"]),
        vec![
            pair("type", "unsupported_document_type"),
            pair("buyer.department_code", "city_department_mismatch")
        ]
    );

    assert_eq!(f.ids("?channel=autoimpresor").await.len(), 1);
    assert_eq!(f.ids("?channel=sifen").await.len(), 5);
    f.stop().await;
}

#[tokio::test]
async fn a_remision_needs_its_notice_and_sifen_places_must_agree_with_sets_table() {
    let f = Fx::new().await;
    let mut remision = f.invoice("NRE-1", 1);
    remision["type"] = json!("remision");
    remision["reason"] = json!(1);
    remision["transport"] = json!({
        "kind": "own", "distance_km": 12, "invoice_date": &hours_ago(1)[..10],
        "vehicle": {"type": "Camión", "brand": "Scania", "plate": "ABC123"},
        "carrier": {"name": "Transportes SA", "ruc": "80013884-8", "address": "Ruta 1",
                    "driver_document": "1234567", "driver_name": "Pedro Gómez", "driver_address": "Luque"}
    });
    remision["buyer"]["address"] = json!("Av. Mariscal López");
    remision["buyer"]["house_number"] = json!("1234");
    remision["buyer"]["department_code"] = json!(11);
    remision["buyer"]["city_code"] = json!(6);

    // Both at once: the channel has no remisión notice (configuration, checked first) ...
    let (status, v) = f.validate(&remision).await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["valid"], false, "{v}");
    assert_eq!(
        pairs(&v["errors"]),
        vec![pair(
            "configuration.sifen.remision_notice",
            "configuration_not_ready"
        )]
    );
    assert_eq!(v["routing"]["channel"], "sifen", "{v}");
    let posted = f.post("nre-1", &remision).await;
    error_code(posted.status, &posted.body, 400, "configuration_error");
    assert_eq!(
        pairs(&posted.body["details"]["errors"]),
        vec![pair(
            "configuration.sifen.remision_notice",
            "configuration_not_ready"
        )]
    );

    // ... and, once it has one, a delivery place SET's table disagrees with: city 6 is Aguará,
    // in Concepción (2), not in Alto Paraná (11). A business error: stored validation_failed.
    let sifen = f.sifen_channel().await;
    let (status, patched) = send(
        f.req(Method::PATCH, &format!("/v1/emission-channels/{}", id(&sifen)))
            .json(&json!({"sifen": {"remision_notice": "Texto legal de prueba (RG 41/2014)"}})),
    )
    .await;
    assert_eq!(status, 200, "{patched}");
    assert_eq!(
        patched["sifen"]["remision_notice"],
        "Texto legal de prueba (RG 41/2014)"
    );
    let (_, v) = f.validate(&remision).await;
    assert_eq!(v["valid"], false, "{v}");
    assert_eq!(
        pairs(&v["errors"]),
        vec![pair("buyer.department_code", "city_department_mismatch")]
    );
    assert!(
        issue_at(&v["errors"], "buyer.department_code")["message"]
            .as_str()
            .is_some_and(|m| m.contains("department 2 CONCEPCION")),
        "{v}"
    );
    f.create(&remision, "validation_failed").await;

    // Luque's name for Aguará's code: the message names the table's.
    let mut misnamed = f.invoice("FE-MISNAMED", 1);
    misnamed["buyer"]["address"] = json!("Ruta 2");
    misnamed["buyer"]["house_number"] = json!("0");
    misnamed["buyer"]["department_code"] = json!(2);
    misnamed["buyer"]["city_code"] = json!(6);
    misnamed["buyer"]["city_name"] = json!("LUQUE");
    let posted = f.post("fe-misnamed", &misnamed).await;
    assert_eq!(posted.status, 201, "{}", posted.body);
    assert_eq!(posted.body["status"], "validation_failed");
    assert_eq!(
        pairs(&posted.body["errors"]),
        vec![pair("buyer.city_name", "city_name_mismatch")]
    );
    assert!(
        issue_at(&posted.body["errors"], "buyer.city_name")["message"]
            .as_str()
            .is_some_and(|m| m.contains("\"AGUARA\"")),
        "{}",
        posted.body
    );

    // Luque where it is, with or without its name: received.
    let mut luque = misnamed.clone();
    luque["external_id"] = json!("FE-LUQUE");
    luque["buyer"]["department_code"] = json!(12);
    luque["buyer"]["city_code"] = json!(5946);
    f.create(&luque, "queued").await;
    luque["external_id"] = json!("FE-LUQUE-UNNAMED");
    luque["buyer"].as_object_mut().expect("buyer").remove("city_name");
    f.create(&luque, "queued").await;
    assert_eq!(f.ids("").await.len(), 4);
    f.stop().await;
}

#[tokio::test]
async fn an_idempotency_key_is_remembered_for_24_hours_then_free_and_purged() {
    use kuatia_application::idempotency::{self, Claim};
    use kuatia_domain::tenancy::TenantId;
    let db = kuatia_tests::TestDb::new().await;
    let database = db.open().await;
    let store = database.store();
    let tenant = TenantId::from_uuid(uuid::Uuid::now_v7());
    let now = Utc::now();
    let first = idempotency::claim(&store, tenant, "k", "h1", now)
        .await
        .expect("claim");
    let Claim::Claimed { document_id } = first else {
        panic!("the first request claims: {first:?}");
    };
    // Within the window: the same body waits for the first request while no document exists
    // (its owner is still at work, or died), and another body is a mismatch.
    let later = now + Duration::hours(23);
    assert!(matches!(
        idempotency::claim(&store, tenant, "k", "h1", later).await.expect("claim"),
        Claim::InFlight { document_id: waiting, .. } if waiting == document_id
    ));
    assert_eq!(
        idempotency::claim(&store, tenant, "k", "h2", later)
            .await
            .expect("claim"),
        Claim::Mismatch
    );
    // A row written by an earlier version with its answer replays that answer.
    kuatia_tests::execute(
        &database,
        "UPDATE idempotency_keys SET response = '{\"id\": \"stored answer\"}'",
    )
    .await
    .expect("an answer stored the old way");
    assert_eq!(
        idempotency::claim(&store, tenant, "k", "h1", later)
            .await
            .expect("claim"),
        Claim::Replay {
            response: json!({"id": "stored answer"})
        }
    );
    // After 24 hours the key is free again, whatever the body.
    let after = now + Duration::hours(24) + Duration::seconds(1);
    assert!(matches!(
        idempotency::claim(&store, tenant, "k", "h2", after).await.expect("claim"),
        Claim::Claimed { document_id: fresh } if fresh != document_id
    ));
    // And the purge removes what expired.
    idempotency::claim(&store, tenant, "other", "h", now)
        .await
        .expect("claim");
    let removed = idempotency::purge_expired(&store, after).await.expect("purge");
    assert_eq!(removed, 1, "only the expired key is purged");
    database.close().await;
}

/// The `documents` projection's tables as text, for comparing builds.
#[derive(Debug, PartialEq)]
pub(crate) struct ReadModel {
    pub documents: Vec<Vec<Option<String>>>,
    pub artifacts: Vec<Vec<Option<String>>>,
    /// `document_counts`: tenant, day, company, status, n.
    pub counts: Vec<Vec<Option<String>>>,
}

/// The documents read model after rebuilding it event by event.
pub(crate) async fn rebuilt_read_model(db: &kuatia_infrastructure::store::Database) -> ReadModel {
    kuatia_projections::runtime::rebuild(&db.store(), &kuatia_projections::documents::Documents, &|_, _| {})
        .await
        .expect("rebuild");
    read_model(db).await
}

/// The `documents` read model (documents, their artifacts, the counts), having checked that the
/// counts the database's triggers keep are the documents counted here: per tenant, Paraguay day
/// of `issue_datetime` (the domain's calendar, not the migration's SQL), company and status.
pub(crate) async fn read_model(db: &kuatia_infrastructure::store::Database) -> ReadModel {
    let documents = kuatia_tests::snapshot(
        db,
        "SELECT CAST(id AS TEXT), CAST(tenant_id AS TEXT), CAST(company_id AS TEXT), CAST(branch_id AS TEXT), \
           CAST(issuance_point_id AS TEXT), channel, CAST(channel_id AS TEXT), doc_type, external_id, status, cdc, \
           number, buyer_ruc, CAST(issue_datetime AS TEXT), grand_total, CAST(errors AS TEXT), \
           CAST(warnings AS TEXT), CAST(state AS TEXT), stream_id, CAST(version AS TEXT), CAST(created_at AS TEXT), \
           CAST(updated_at AS TEXT), buyer_search FROM documents ORDER BY id",
    )
    .await;
    let artifacts = kuatia_tests::snapshot(
        db,
        "SELECT CAST(id AS TEXT), CAST(tenant_id AS TEXT), CAST(document_id AS TEXT), kind, \
           CAST(version AS TEXT), content_type, sha256, CAST(size AS TEXT), CAST(created_at AS TEXT) \
           FROM document_artifacts ORDER BY id",
    )
    .await;
    let counts = kuatia_tests::snapshot(
        db,
        "SELECT CAST(tenant_id AS TEXT), CAST(day AS TEXT), CAST(company_id AS TEXT), status, CAST(n AS TEXT) \
           FROM document_counts ORDER BY 1, 2, 3, 4",
    )
    .await;
    let mut expected: std::collections::BTreeMap<[String; 4], u64> = Default::default();
    for row in &documents {
        let text = |i: usize| row[i].clone().expect("not null");
        let issued = text(13);
        // PostgreSQL writes `2026-11-27 02:30:00+00`, SQLite `2026-11-27T02:30:00.000000Z`.
        let issued = DateTime::parse_from_rfc3339(&issued)
            .or_else(|_| DateTime::parse_from_str(&issued, "%Y-%m-%d %H:%M:%S%.f%#z"))
            .unwrap_or_else(|e| panic!("issue_datetime {issued}: {e}"))
            .with_timezone(&Utc);
        let day = kuatia_domain::local_time::paraguay_today(issued).to_string();
        *expected.entry([text(1), day, text(2), text(9)]).or_default() += 1;
    }
    let kept: std::collections::BTreeMap<[String; 4], u64> = counts
        .iter()
        .map(|r| {
            let text = |i: usize| r[i].clone().expect("not null");
            ([text(0), text(1), text(2), text(3)], text(4).parse().expect("n"))
        })
        .collect();
    assert_eq!(kept, expected, "document_counts == the documents counted");
    // The names index holds each named document's tenant and names, and nothing else.
    let names = kuatia_tests::snapshot(
        db,
        "SELECT CAST(document_id AS TEXT), CAST(tenant_id AS TEXT), buyer_search FROM document_names ORDER BY 1",
    )
    .await;
    let named: Vec<_> = documents
        .iter()
        .filter(|row| row[22].is_some())
        .map(|row| vec![row[0].clone(), row[1].clone(), row[22].clone()])
        .collect();
    assert_eq!(names, named, "document_names == the documents' names");
    ReadModel {
        documents,
        artifacts,
        counts,
    }
}

#[tokio::test]
async fn the_read_model_written_at_intake_equals_a_rebuild_event_by_event() {
    // Intake writes a batch of new documents with a few statements (PostgreSQL); a rebuild
    // applies the same events one by one. Both must leave the same rows.
    let f = Fx::new().await;
    let mut posts = tokio::task::JoinSet::new();
    for n in 0..24 {
        // Issued 1, 13 and 25 hours ago: over two of Paraguay's days, whatever the hour.
        let mut doc = f.invoice(&format!("ERP-RB-{n}"), 1 + 12 * (n % 3));
        if n % 4 == 0 {
            doc["items"][1]["tax_amount"] = json!(2621); // validation_failed, with its error
        }
        if n % 5 == 0 {
            doc["buyer"] =
                json!({"legal_name": "Ana Gómez", "document_type": "ci", "document_number": "4321"});
        }
        posts.spawn(send(
            f.req(Method::POST, "/v1/documents")
                .header("Idempotency-Key", format!("rb-{n}"))
                .json(&doc),
        ));
    }
    let posted = posts.join_all().await;
    assert!(posted.iter().all(|(status, _)| *status == 201), "{posted:?}");
    assert!(
        posted
            .iter()
            .any(|(_, body)| body["status"] == "validation_failed")
    );
    assert!(posted.iter().any(|(_, body)| body["status"] == "queued"));

    let database = f.app.db.open().await;
    let at_intake = read_model(&database).await;
    assert_eq!(at_intake.documents.len(), 24, "one row per document");
    assert!(at_intake.artifacts.is_empty(), "no artifact at intake");
    assert!(
        at_intake.counts.len() >= 4,
        "two days, two statuses: {:?}",
        at_intake.counts
    );
    assert_eq!(
        rebuilt_read_model(&database).await,
        at_intake,
        "intake == rebuild"
    );
    f.app.stop().await;
}

/// Issue 26: the same `external_id` of a company and type under a new Idempotency-Key issued a
/// second fiscal document. Now it is refused while the first is live, with its id; a document
/// that ended without effect (here `validation_failed`) frees the `external_id` for the
/// corrected resend; another type may use it; two racing requests make one document.
#[tokio::test]
async fn an_external_id_names_one_live_document_of_its_company_and_type() {
    let f = Fx::new().await;
    let invoice = f.invoice("ORDER-77", 1);
    let first = f.post("order-77-a", &invoice).await;
    assert_eq!(
        (first.status, first.body["status"].as_str()),
        (201, Some("queued")),
        "{}",
        first.body
    );
    let first_id = id(&first.body);

    // A new key, the same external_id: 409 naming the live document, and nothing stored.
    let again = f.post("order-77-b", &invoice).await;
    error_code(again.status, &again.body, 409, "conflict_error");
    assert_eq!(
        again.body["details"]["existing_document_id"],
        first_id.as_str(),
        "{}",
        again.body
    );
    assert!(
        again.body["message"]
            .as_str()
            .is_some_and(|m| m.contains("ORDER-77")),
        "{}",
        again.body
    );
    assert_eq!(f.ids("?external_id=ORDER-77").await, vec![first_id.clone()]);
    // The same key and body still answers the first request again.
    let replay = f.post("order-77-a", &invoice).await;
    assert_eq!((replay.status, replay.replayed.as_deref()), (201, Some("true")));
    assert_eq!(id(&replay.body), first_id);
    // The refused key was given back: with a new external_id it creates a document.
    let mut other = invoice.clone();
    other["external_id"] = json!("ORDER-78");
    assert_eq!(f.post("order-77-b", &other).await.status, 201);

    // Another type of the same company may use the same external_id.
    let mut note = f.invoice("ORDER-77", 1);
    note["type"] = json!("credit_note");
    note["associated_document"] = json!({"cdc": INVOICE_CDC});
    assert_eq!(f.post("order-77-nc", &note).await.status, 201);

    // A document that failed validation does not block its corrected resend.
    let mut wrong = f.invoice("ORDER-90", 1);
    wrong["items"][0]["quantity"] = json!(0);
    let failed = f.post("order-90-a", &wrong).await;
    assert_eq!(failed.body["status"], "validation_failed", "{}", failed.body);
    let corrected = f.post("order-90-b", &f.invoice("ORDER-90", 1)).await;
    assert_eq!(
        (corrected.status, corrected.body["status"].as_str()),
        (201, Some("queued")),
        "{}",
        corrected.body
    );
    // ... which is live now: the failed one's key answers what it answered, a third key is refused.
    assert_eq!(f.post("order-90-c", &f.invoice("ORDER-90", 1)).await.status, 409);

    // Racing requests with one external_id and different keys: one document.
    let racing = f.invoice("ORDER-RACE", 1);
    let (a, b, c, d, e, g) = tokio::join!(
        f.post("race-0", &racing),
        f.post("race-1", &racing),
        f.post("race-2", &racing),
        f.post("race-3", &racing),
        f.post("race-4", &racing),
        f.post("race-5", &racing),
    );
    let statuses: Vec<u16> = [a, b, c, d, e, g].iter().map(|a| a.status).collect();
    assert_eq!(statuses.iter().filter(|s| **s == 201).count(), 1, "{statuses:?}");
    assert_eq!(statuses.iter().filter(|s| **s == 409).count(), 5, "{statuses:?}");
    assert_eq!(f.ids("?external_id=ORDER-RACE").await.len(), 1);
    f.stop().await;
}

/// The filtered list as CSV for a spreadsheet: every matching document, with the same
/// filters, read back by an independent CSV reader (Python's `csv`); a cell that a spreadsheet
/// would run as a formula stays text; `limit`/`cursor` and a bad filter are 400.
#[tokio::test]
async fn the_document_list_exports_as_csv_with_its_filters_and_no_formula_runs() {
    let f = Fx::new().await;
    let mut ids = Vec::new();
    for n in 0..3 {
        ids.push(f.create(&f.invoice(&format!("CSV-{n}"), 1), "queued").await);
    }
    let formula = f
        .create(&f.invoice("=HYPERLINK(\"http://x\",\"a, b\")", 2), "queued")
        .await;
    let mut broken = f.invoice("CSV-BAD", 1);
    broken["items"][1]["tax_amount"] = json!(2621);
    let failed = f.create(&broken, "validation_failed").await;

    let export = |query: &str| {
        let request = f.req(Method::GET, &format!("/v1/documents/export{query}"));
        async move {
            let response = request.send().await.expect("export");
            let status = response.status().as_u16();
            let headers = response.headers().clone();
            (status, headers, response.text().await.expect("text"))
        }
    };
    let read_csv = |text: &str| -> Vec<Vec<String>> {
        let mut child = std::process::Command::new("python3")
            .args([
                "-c",
                "import csv, json, sys; print(json.dumps(list(csv.reader(sys.stdin))))",
            ])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("python3");
        use std::io::Write as _;
        child
            .stdin
            .take()
            .expect("stdin")
            .write_all(text.as_bytes())
            .expect("written");
        let out = child.wait_with_output().expect("read");
        serde_json::from_slice(&out.stdout).expect("rows")
    };

    let (status, headers, text) = export("").await;
    assert_eq!(status, 200, "{text}");
    assert_eq!(headers["content-type"], "text/csv; charset=utf-8");
    assert!(
        headers["content-disposition"]
            .to_str()
            .is_ok_and(|d| d.starts_with("attachment; filename=\"documentos-")),
        "{headers:?}"
    );
    let rows = read_csv(&text);
    assert_eq!(rows[0][0], "id");
    assert_eq!(rows[0].len(), 12);
    assert_eq!(rows.len(), 6, "a header and the five documents: {rows:?}");
    let by_id = |id: &str| {
        rows.iter()
            .find(|r| r[0] == id)
            .cloned()
            .unwrap_or_else(|| panic!("{id} in {rows:?}"))
    };
    assert_eq!(
        by_id(&formula)[9],
        "'=HYPERLINK(\"http://x\",\"a, b\")",
        "text, not a formula"
    );
    assert_eq!(by_id(&ids[0])[7], "165000");
    assert_eq!(by_id(&ids[0])[4], "queued");
    assert_eq!(by_id(&failed)[4], "validation_failed");

    let (status, _, text) = export("?status=validation_failed").await;
    assert_eq!(status, 200, "{text}");
    let rows = read_csv(&text);
    assert_eq!(rows.len(), 2, "{rows:?}");
    assert_eq!(rows[1][0], failed);

    for bad in ["?limit=10", "?cursor=x", "?status=lost", "?colour=red"] {
        let request = f.req(Method::GET, &format!("/v1/documents/export{bad}"));
        let (status, body) = send(request).await;
        error_code(status, &body, 400, "validation_error");
    }
    f.stop().await;
}

/// The list's search box: a part of the buyer's name with accents and case aside, the buyer's
/// RUC with or without its check digit, the external id exactly; it combines with the filters,
/// and a search of no or too many characters is 400. Names with LIKE's own characters (`%`, `_`)
/// are matched as written.
#[tokio::test]
async fn the_document_list_searches_buyer_names_rucs_and_ids() {
    let f = Fx::new().await;
    let with_buyer = |external_id: &str, buyer: Value| {
        let mut doc = f.invoice(external_id, 1);
        doc["buyer"] = buyer;
        doc
    };
    let gomez = f
        .create(
            &with_buyer(
                "S-1",
                json!({"legal_name": "Ana GÓMEZ Ñandutí", "document_type": "ci", "document_number": "4321"}),
            ),
            "queued",
        )
        .await;
    let cliente = f.create(&f.invoice("S-2", 1), "queued").await; // CLIENTE S.A., RUC 80013884-8
    let percent = f
        .create(
            &with_buyer(
                "S-3",
                json!({"legal_name": "100% Algodón_SRL", "document_type": "ci", "document_number": "77"}),
            ),
            "queued",
        )
        .await;
    let fx = &f;
    let search = |q: &str| {
        let query = format!("?q={}", urlencode(q));
        async move { fx.ids(&query).await }
    };
    assert_eq!(search("gomez").await, std::slice::from_ref(&gomez));
    assert_eq!(search("ñANDUTI").await, std::slice::from_ref(&gomez));
    assert_eq!(search("ana gómez").await, std::slice::from_ref(&gomez));
    assert_eq!(search("80013884-8").await, std::slice::from_ref(&cliente));
    assert_eq!(search("80013884").await, std::slice::from_ref(&cliente));
    assert_eq!(search("80.013.884-8").await, std::slice::from_ref(&cliente));
    assert_eq!(search("S-2").await, std::slice::from_ref(&cliente));
    assert_eq!(search("100%").await, std::slice::from_ref(&percent));
    assert_eq!(search("n_s").await, std::slice::from_ref(&percent));
    assert!(search("%").await.len() == 1, "a % is a %, not a wildcard");
    assert!(search("nadie").await.is_empty());
    // A reference found is the answer: an external id that is also a part of a name.
    let reference = f.create(&f.invoice("ANA", 1), "queued").await;
    assert_eq!(search("ana").await, std::slice::from_ref(&gomez), "ids are exact");
    assert_eq!(search("ANA").await, std::slice::from_ref(&reference));
    assert!(f.ids("?q=gomez&status=validation_failed").await.is_empty());
    for bad in ["?q=", "?q=%20%20"] {
        let (status, body) = send(f.req(Method::GET, &format!("/v1/documents{bad}"))).await;
        error_code(status, &body, 400, "validation_error");
    }
    let long = "x".repeat(101);
    let (status, body) = send(f.req(Method::GET, &format!("/v1/documents?q={long}"))).await;
    error_code(status, &body, 400, "validation_error");
    f.stop().await;
}

/// `text` for a query string.
fn urlencode(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' => (b as char).to_string(),
            other => format!("%{other:02X}"),
        })
        .collect()
}
