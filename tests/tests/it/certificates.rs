//! Certificates and emission channels, black-box.

use chrono::{Duration, Utc};
use kuatia_infrastructure::selfsigned::SelfSigned;
use kuatia_tests::{
    CSC, PASSWORD, RUC, TestApp, b64, error_code, id, legacy_pfx, multipart_form, pkcs12_info, send,
};
use reqwest::Method;
use serde_json::{Value, json};

const OTHER_RUC: &str = "80013884-8";
const NEW_CSC: &str = "EFGH0000000000000000000000000000";
const CLIENT_SECRET: &str = "client-secret-value-9f8e7d";
const API_KEY: &str = "autoimpresor-api-key-1a2b3c";

/// The fields a certificate view has, and no other.
const CERTIFICATE_FIELDS: [&str; 12] = [
    "company_id",
    "created_at",
    "fingerprint_sha256",
    "id",
    "issuer",
    "label",
    "not_after",
    "not_before",
    "ruc",
    "serial_number",
    "status",
    "subject",
];

/// The `field`s of `details.errors`.
fn error_fields(body: &Value) -> Vec<(String, String)> {
    body["details"]["errors"]
        .as_array()
        .map(|errors| {
            errors
                .iter()
                .map(|e| {
                    (
                        e["field"].as_str().unwrap_or_default().to_owned(),
                        e["code"].as_str().unwrap_or_default().to_owned(),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

/// A tenant (owner key) with one company.
struct Fixture {
    app: TestApp,
    tenant: String,
    key: String,
    company: String,
}

impl Fixture {
    async fn new() -> Self {
        let app = TestApp::spawn().await;
        let (tenant, key) = app.tenant("acme").await;
        let mut fixture = Self {
            app,
            tenant,
            key,
            company: String::new(),
        };
        fixture.company = fixture.add_company(RUC).await;
        fixture
    }

    fn req(&self, method: Method, path: &str) -> reqwest::RequestBuilder {
        self.app.as_key(method, path, &self.key, &self.tenant)
    }

    async fn add_company(&self, ruc: &str) -> String {
        let (status, body) = send(
            self.req(Method::POST, "/v1/companies")
                .json(&TestApp::company_body(ruc)),
        )
        .await;
        assert_eq!(status, 201, "{body}");
        id(&body)
    }

    async fn upload(&self, company: &str, pfx: &[u8], password: &str) -> (u16, Value) {
        send(self.req(Method::POST, "/v1/certificates").json(&json!({
            "company_id": company,
            "pfx_base64": b64(pfx),
            "password": password,
        })))
        .await
    }

    /// Uploads a certificate made from `spec` and returns its view.
    async fn certificate(&self, company: &str, spec: &SelfSigned) -> Value {
        let pfx = spec.pfx(PASSWORD).expect("pfx");
        let (status, body) = self.upload(company, &pfx, PASSWORD).await;
        assert_eq!(status, 201, "{body}");
        body
    }

    async fn validate(&self, certificate: &str) -> (u16, Value) {
        send(self.req(Method::POST, &format!("/v1/certificates/{certificate}/validate"))).await
    }

    async fn branch_and_point(&self, company: &str) -> (String, String) {
        let (status, branch) = send(
            self.req(Method::POST, "/v1/branches")
                .json(&json!({"company_id": company, "code": "001", "name": "Casa central"})),
        )
        .await;
        assert_eq!(status, 201, "{branch}");
        let (status, point) = send(
            self.req(Method::POST, "/v1/issuance-points")
                .json(&json!({"branch_id": id(&branch), "code": "001"})),
        )
        .await;
        assert_eq!(status, 201, "{point}");
        (id(&branch), id(&point))
    }

    async fn create_channel(&self, body: &Value) -> (u16, Value) {
        send(self.req(Method::POST, "/v1/emission-channels").json(body)).await
    }

    async fn readiness(&self, company: &str) -> Vec<Value> {
        let (status, body) = send(self.req(
            Method::GET,
            &format!("/v1/emission-channels/readiness?company_id={company}"),
        ))
        .await;
        assert_eq!(status, 200, "{body}");
        body["channels"].as_array().expect("channels").clone()
    }

    async fn events(&self) -> Vec<Value> {
        let (status, body) = send(self.req(Method::GET, "/v1/events?limit=1000")).await;
        assert_eq!(status, 200, "{body}");
        body["events"].as_array().expect("events").clone()
    }
}

fn good_spec(ruc: &str) -> SelfSigned {
    SelfSigned::for_ruc("DE GENERACION ELECTRONICA S.A.", ruc, 365)
}

fn sifen_body(company: &str, certificate: &str, csc: Option<&str>) -> Value {
    let mut sifen = json!({
        "environment": "test",
        "timbrado": "12345678",
        "timbrado_valid_from": "2024-01-01",
        "csc_id": "0001",
        "certificate_id": certificate,
    });
    if let Some(csc) = csc {
        sifen["csc"] = json!(csc);
    }
    json!({
        "company_id": company,
        "channel": "sifen",
        "is_default": true,
        "credentials": {
            "endpoint": "http://127.0.0.1:8082",
            "client_id": "client-1",
            "client_secret": CLIENT_SECRET,
        },
        "sifen": sifen,
    })
}

fn autoimpresor_body(company: &str, branch: &str, point: &str) -> Value {
    let today = Utc::now().date_naive();
    json!({
        "company_id": company,
        "channel": "autoimpresor",
        "credentials": {"endpoint": "https://reportes.example.com.py", "api_key": API_KEY},
        "autoimpresor": {
            "authorization": "AUT-2026-001",
            "declared_software": "kuatia",
            "timbrado": "87654321",
            "valid_from": (today - Duration::days(30)).to_string(),
            "valid_to": (today + Duration::days(335)).to_string(),
            "branch_id": branch,
            "issuance_point_id": point,
            "range_start": 1,
            "range_end": 500,
        },
    })
}

fn check_names(checks: &Value) -> Vec<&str> {
    checks
        .as_array()
        .expect("checks")
        .iter()
        .map(|c| c["name"].as_str().expect("name"))
        .collect()
}

fn failing_checks(checks: &Value) -> Vec<&str> {
    checks
        .as_array()
        .expect("checks")
        .iter()
        .filter(|c| c["ok"] != json!(true))
        .map(|c| c["name"].as_str().expect("name"))
        .collect()
}

fn check<'a>(checks: &'a Value, name: &str) -> &'a Value {
    checks
        .as_array()
        .expect("checks")
        .iter()
        .find(|c| c["name"] == name)
        .unwrap_or_else(|| panic!("no check {name} in {checks}"))
}

/// Every value of `key` anywhere in `value`.
fn find_all<'a>(value: &'a Value, key: &str, out: &mut Vec<&'a Value>) {
    match value {
        Value::Object(map) => {
            for (k, v) in map {
                if k == key {
                    out.push(v);
                }
                find_all(v, key, out);
            }
        }
        Value::Array(items) => items.iter().for_each(|v| find_all(v, key, out)),
        _ => {}
    }
}

/// Asserts `text` carries none of the secrets given or any key material.
fn assert_no_secrets(text: &str, secrets: &[&str]) {
    assert!(!text.contains("PRIVATE KEY"), "key material leaked: {text}");
    for secret in secrets {
        assert!(!text.contains(secret), "a secret leaked ({secret}): {text}");
    }
}

#[tokio::test]
async fn a_modern_pfx_is_accepted_as_json_and_as_multipart_and_listed_without_secrets() {
    let f = Fixture::new().await;
    let json_pfx = good_spec(RUC).pfx(PASSWORD).expect("pfx");
    let (status, created) = send(f.req(Method::POST, "/v1/certificates").json(&json!({
        "company_id": f.company,
        "pfx_base64": b64(&json_pfx),
        "password": PASSWORD,
        "label": "firma 2026",
    })))
    .await;
    assert_eq!(status, 201, "{created}");
    assert_eq!(created["company_id"], json!(f.company));
    assert_eq!(created["label"], "firma 2026");
    assert_eq!(created["ruc"], RUC);
    assert_eq!(created["status"], "valid");
    assert!(
        created["subject"]
            .as_str()
            .expect("subject")
            .contains("RUC80069563-1"),
        "{created}"
    );
    let fingerprint = created["fingerprint_sha256"].as_str().expect("fingerprint");
    assert!(
        fingerprint.len() == 64 && fingerprint.bytes().all(|b| b.is_ascii_hexdigit()),
        "{created}"
    );

    // The same shape as a multipart upload, the file as raw bytes.
    let multipart_pfx = good_spec(RUC).pfx(PASSWORD).expect("pfx");
    let (content_type, body) = multipart_form(&[
        ("company_id", None, f.company.as_bytes()),
        ("password", None, PASSWORD.as_bytes()),
        ("label", None, "firma multipart".as_bytes()),
        ("pfx", Some("firma.pfx"), &multipart_pfx),
    ]);
    let (status, uploaded) = send(
        f.req(Method::POST, "/v1/certificates")
            .header("Content-Type", content_type)
            .body(body),
    )
    .await;
    assert_eq!(status, 201, "{uploaded}");
    assert_eq!(uploaded["label"], "firma multipart");
    assert_eq!(uploaded["ruc"], RUC);
    assert_ne!(uploaded["fingerprint_sha256"], created["fingerprint_sha256"]);

    // A multipart upload with a wrong password is refused like a JSON one.
    let (content_type, body) = multipart_form(&[
        ("company_id", None, f.company.as_bytes()),
        ("password", None, b"not the password"),
        ("pfx", Some("firma.pfx"), &multipart_pfx),
    ]);
    let (status, err) = send(
        f.req(Method::POST, "/v1/certificates")
            .header("Content-Type", content_type)
            .body(body),
    )
    .await;
    error_code(status, &err, 400, "certificate_error");

    let response = f.req(Method::GET, "/v1/certificates").send().await.expect("list");
    assert_eq!(response.status().as_u16(), 200);
    let text = response.text().await.expect("text");
    assert_no_secrets(
        &text,
        &[PASSWORD, &b64(&json_pfx)[..60], &b64(&multipart_pfx)[..60]],
    );
    let list: Value = serde_json::from_str(&text).expect("json");
    let list = list.as_array().expect("array");
    assert_eq!(list.len(), 2, "{text}");
    for item in list {
        let mut keys: Vec<&str> = item
            .as_object()
            .expect("object")
            .keys()
            .map(String::as_str)
            .collect();
        keys.sort_unstable();
        assert_eq!(keys, CERTIFICATE_FIELDS, "only what the certificate says: {item}");
    }
    let mut ids: Vec<String> = list.iter().map(id).collect();
    ids.sort();
    let mut expected = vec![id(&created), id(&uploaded)];
    expected.sort();
    assert_eq!(ids, expected);
    f.app.stop().await;
}

#[tokio::test]
async fn a_legacy_rc2_pfx_is_accepted() {
    let f = Fixture::new().await;
    let legacy = legacy_pfx(&good_spec(RUC), PASSWORD);
    let info = pkcs12_info(&legacy, PASSWORD);
    assert!(info.contains("RC2"), "the file really is legacy: {info}");
    let (status, created) = f.upload(&f.company, &legacy, PASSWORD).await;
    assert_eq!(status, 201, "{created}");
    assert_eq!(
        (created["ruc"].as_str(), created["status"].as_str()),
        (Some(RUC), Some("valid"))
    );
    let (status, validation) = f.validate(&id(&created)).await;
    assert_eq!(status, 200, "{validation}");
    assert_eq!(validation["valid"], true, "{validation}");
    // The same legacy file with the wrong password is a certificate error, not a crash.
    let (status, err) = f.upload(&f.company, &legacy, "wrong").await;
    error_code(status, &err, 400, "certificate_error");
    f.app.stop().await;
}

#[tokio::test]
async fn a_pfx_that_asks_for_too_much_key_derivation_is_refused_before_any_is_done() {
    use kuatia_tests::hostile_pfx;
    let f = Fixture::new().await;
    for (what, pfx, names) in [
        // ~6 700 safes of 1M PBKDF2 iterations fit in 1 MiB: 17 CPU-minutes. Each is refused at
        // the first derivation over the cap, and many small ones by their count or their sum.
        (
            "one safe of 1M iterations",
            hostile_pfx::many_safes(1, 1_000_000),
            "600000",
        ),
        ("1 000 safes", hostile_pfx::many_safes(1_000, 2_048), "safes"),
        (
            "7 safes of 500 000",
            hostile_pfx::many_safes(7, 500_000),
            "2000000",
        ),
        // scrypt N=2^20, r=8: 1 GiB of memory per upload.
        ("scrypt of 1 GiB", hostile_pfx::scrypt_safe(1 << 20, 8, 1), "MiB"),
        ("a MAC of 10M iterations", hostile_pfx::mac(10_000_000), "MAC"),
    ] {
        let (status, err) = f.upload(&f.company, &pfx, "any password").await;
        assert_eq!(
            (status, err["code"].as_str()),
            (400, Some("validation_error")),
            "{what}: {err}"
        );
        let error = &err["details"]["errors"][0];
        assert_eq!(
            (error["field"].as_str(), error["code"].as_str()),
            (Some("pfx_base64"), Some("pfx_work_limit")),
            "{what}: {err}"
        );
        let message = error["message"].as_str().unwrap_or_default();
        assert!(message.contains(names), "{what}: {message}");
    }
    f.app.stop().await;
}

#[test]
fn the_work_counter_sees_inside_encrypted_safes_of_legacy_and_current_files() {
    use kuatia_infrastructure::pfx_work::{Limits, check};
    // OpenSSL 3's default: PBES2 (PBKDF2-SHA256, AES-256) for the certificates' safe and the key,
    // a SHA-256 MAC; 2 048 iterations each.
    let current = good_spec(RUC).pfx(PASSWORD).expect("pfx");
    let work = check(&current, PASSWORD, Limits::default()).expect("within the limits");
    assert_eq!(
        (work.derivations, work.iterations, work.safes, work.bags),
        (3, 3 * 2_048, 2, 2),
        "{work:?}: the certificate bag inside the AES safe is seen"
    );
    // The legacy file: the certificate in an RC2-40 safe, the key under 3DES; the key bag and the
    // certificate bag are both seen (the RC2 safe was decrypted to count what it holds).
    let legacy = legacy_pfx(&good_spec(RUC), PASSWORD);
    let work = check(&legacy, PASSWORD, Limits::default()).expect("within the limits");
    assert_eq!((work.derivations, work.safes, work.bags), (3, 2, 2), "{work:?}");
    // Tighter limits refuse the very same file.
    let tight = Limits {
        derivations: 2,
        ..Limits::default()
    };
    assert!(check(&current, PASSWORD, tight).is_err());
}

#[tokio::test]
async fn wrong_passwords_garbage_duplicates_and_unknown_companies_are_refused() {
    let f = Fixture::new().await;
    let pfx = good_spec(RUC).pfx(PASSWORD).expect("pfx");

    let (status, err) = f.upload(&f.company, &pfx, "not the password").await;
    error_code(status, &err, 400, "certificate_error");
    assert!(
        !err.to_string().contains("not the password"),
        "the password is never echoed: {err}"
    );

    let (status, err) = f
        .upload(&f.company, b"this is not a PKCS#12 file at all", PASSWORD)
        .await;
    error_code(status, &err, 400, "certificate_error");

    let (status, err) = send(f.req(Method::POST, "/v1/certificates").json(&json!({
        "company_id": f.company,
        "pfx_base64": "%%% not base64 %%%",
        "password": PASSWORD,
    })))
    .await;
    error_code(status, &err, 400, "validation_error");
    assert_eq!(
        error_fields(&err),
        vec![("pfx_base64".into(), "invalid_base64".into())]
    );

    let (status, err) = send(f.req(Method::POST, "/v1/certificates").json(&json!({
        "company_id": f.company,
        "pfx_base64": b64(&pfx),
    })))
    .await;
    error_code(status, &err, 400, "validation_error");
    assert_eq!(error_fields(&err), vec![("password".into(), "required".into())]);

    let (status, first) = f.upload(&f.company, &pfx, PASSWORD).await;
    assert_eq!(status, 201, "{first}");
    let (status, err) = f.upload(&f.company, &pfx, PASSWORD).await;
    error_code(status, &err, 409, "conflict_error");

    let ghost = uuid::Uuid::now_v7().to_string();
    let (status, err) = f.upload(&ghost, &pfx, PASSWORD).await;
    error_code(status, &err, 404, "not_found");

    let (status, list) = send(f.req(Method::GET, "/v1/certificates")).await;
    assert_eq!(status, 200);
    assert_eq!(
        list.as_array().map(Vec::len),
        Some(1),
        "refused uploads store nothing: {list}"
    );
    f.app.stop().await;
}

#[tokio::test]
async fn validation_is_green_for_a_good_certificate_and_names_the_failing_check() {
    let f = Fixture::new().await;
    let good = f.certificate(&f.company, &good_spec(RUC)).await;
    let (status, v) = f.validate(&id(&good)).await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["valid"], true, "{v}");
    assert_eq!(
        check_names(&v["checks"]),
        vec![
            "key_matches_certificate",
            "validity_period",
            "rsa_key_size",
            "ruc_matches_company",
            "client_auth_usage"
        ]
    );
    assert!(failing_checks(&v["checks"]).is_empty(), "{v}");
    // The chain, said apart: a self-signed certificate is its own root.
    let (status, chain) = send(f.req(Method::GET, &format!("/v1/certificates/{}/chain", id(&good)))).await;
    assert_eq!(status, 200, "{chain}");
    assert_eq!(
        (
            chain["check"]["name"].as_str(),
            chain["check"]["ok"].as_bool(),
            chain["self_signed"].as_bool(),
            chain["reaches_root"].as_bool(),
            chain["issuers"].as_array().map(Vec::len)
        ),
        (Some("chain"), Some(true), Some(true), Some(true), Some(0)),
        "{chain}"
    );
    assert!(
        chain["check"]["message"]
            .as_str()
            .is_some_and(|m| m.starts_with("self-signed")),
        "{chain}"
    );
    // Its schema is its own: a document's chain is another `ChainView`, and utoipa keeps one of
    // two components of the same name (the answer then broke its documented schema).
    let doc: Value = f.app.get("/openapi.json").await.json().await.expect("openapi");
    let schemas = &doc["components"]["schemas"];
    assert!(
        schemas["CertificateChainView"]["properties"]["check"].is_object(),
        "{}",
        schemas["CertificateChainView"]
    );
    assert!(
        schemas["ChainView"]["properties"]["verified"].is_object(),
        "{}",
        schemas["ChainView"]
    );
    let days = v["expires_in_days"].as_i64().expect("days");
    assert!((363..=365).contains(&days), "{v}");

    let mut small = good_spec(RUC);
    small.bits = 1024;
    let mut no_client_auth = good_spec(RUC);
    no_client_auth.client_auth = false;
    let other_ruc = good_spec(OTHER_RUC);
    let mut expired = good_spec(RUC);
    expired.not_before = Utc::now() - Duration::days(400);
    expired.not_after = Utc::now() - Duration::days(2);
    let cases = [
        (small, "rsa_key_size", "invalid"),
        (no_client_auth, "client_auth_usage", "invalid"),
        (other_ruc, "ruc_matches_company", "invalid"),
        (expired, "validity_period", "expired"),
    ];
    for (spec, failing, status_name) in cases {
        let created = f.certificate(&f.company, &spec).await;
        assert_eq!(created["status"], status_name, "{failing}: {created}");
        let (status, v) = f.validate(&id(&created)).await;
        assert_eq!(status, 200, "{v}");
        assert_eq!(v["valid"], false, "{failing}: {v}");
        assert_eq!(failing_checks(&v["checks"]), vec![failing], "{v}");
        let message = check(&v["checks"], failing)["message"].as_str().expect("message");
        match failing {
            "rsa_key_size" => assert!(message.contains("1024"), "{message}"),
            "ruc_matches_company" => {
                assert!(message.contains(OTHER_RUC) && message.contains(RUC), "{message}");
            }
            "validity_period" => {
                assert!(message.contains("expired"), "{message}");
                assert!(v["expires_in_days"].as_i64().expect("days") < 0, "{v}");
            }
            _ => assert!(message.contains("clientAuth"), "{message}"),
        }
    }

    let ghost = uuid::Uuid::now_v7();
    let (status, err) = f.validate(&ghost.to_string()).await;
    error_code(status, &err, 404, "not_found");
    f.app.stop().await;
}

#[tokio::test]
async fn sifen_and_autoimpresor_channels_are_created_and_listed_without_their_secrets() {
    let f = Fixture::new().await;
    let certificate = id(&f.certificate(&f.company, &good_spec(RUC)).await);
    let (branch, point) = f.branch_and_point(&f.company).await;

    let response = f
        .req(Method::POST, "/v1/emission-channels")
        .json(&sifen_body(&f.company, &certificate, Some(CSC)))
        .send()
        .await
        .expect("send");
    assert_eq!(response.status().as_u16(), 201);
    let text = response.text().await.expect("text");
    assert_no_secrets(&text, &[CSC, CLIENT_SECRET]);
    let sifen: Value = serde_json::from_str(&text).expect("json");
    assert_eq!(sifen["channel"], "sifen");
    assert_eq!(sifen["company_id"], json!(f.company));
    assert_eq!(sifen["is_default"], true);
    assert_eq!(sifen["credentials"]["endpoint"], "http://127.0.0.1:8082");
    assert_eq!(sifen["credentials"]["client_id"], "client-1");
    assert_eq!(sifen["credentials"]["secret_configured"], true);
    assert_eq!(sifen["sifen"]["csc_configured"], true);
    assert_eq!(sifen["sifen"]["csc_id"], "0001");
    assert_eq!(sifen["sifen"]["timbrado"], "12345678");
    assert_eq!(sifen["sifen"]["certificate_id"], json!(certificate));
    assert!(sifen["sifen"].get("csc").is_none(), "{sifen}");

    let (status, auto) = f
        .create_channel(&autoimpresor_body(&f.company, &branch, &point))
        .await;
    assert_eq!(status, 201, "{auto}");
    assert_eq!(auto["channel"], "autoimpresor");
    assert_eq!(auto["is_default"], false);
    assert_eq!(auto["credentials"]["secret_configured"], true);
    assert_eq!(auto["autoimpresor"]["branch_id"], json!(branch));
    assert_eq!(auto["autoimpresor"]["issuance_point_id"], json!(point));
    assert_eq!(auto["autoimpresor"]["next_number"], 1, "defaults to range_start");
    assert!(auto["sifen"].is_null(), "{auto}");
    assert_no_secrets(&auto.to_string(), &[API_KEY]);

    // An autoimpresor channel whose point belongs to no branch of the company is refused.
    let wrong_point = autoimpresor_body(&f.company, &branch, &uuid::Uuid::now_v7().to_string());
    let (status, err) = f.create_channel(&wrong_point).await;
    error_code(status, &err, 400, "validation_error");
    assert_eq!(
        error_fields(&err),
        vec![(
            "autoimpresor.issuance_point_id".into(),
            "unknown_reference".into()
        )]
    );

    let response = f
        .req(
            Method::GET,
            &format!("/v1/emission-channels?company_id={}", f.company),
        )
        .send()
        .await
        .expect("send");
    assert_eq!(response.status().as_u16(), 200);
    let text = response.text().await.expect("text");
    assert_no_secrets(&text, &[CSC, CLIENT_SECRET, API_KEY]);
    let list: Value = serde_json::from_str(&text).expect("json");
    let kinds: Vec<&str> = list
        .as_array()
        .expect("array")
        .iter()
        .map(|c| c["channel"].as_str().expect("channel"))
        .collect();
    assert_eq!(kinds, vec!["sifen", "autoimpresor"], "oldest first: {list}");
    f.app.stop().await;
}

#[tokio::test]
async fn a_sifen_channel_needs_its_csc_and_a_certificate_of_its_own_company() {
    let f = Fixture::new().await;
    let certificate = id(&f.certificate(&f.company, &good_spec(RUC)).await);
    let other_company = f.add_company(OTHER_RUC).await;
    let foreign = id(&f.certificate(&other_company, &good_spec(OTHER_RUC)).await);

    let (status, err) = f
        .create_channel(&sifen_body(&f.company, &certificate, None))
        .await;
    error_code(status, &err, 400, "validation_error");
    assert_eq!(error_fields(&err), vec![("sifen.csc".into(), "required".into())]);

    let (status, err) = f
        .create_channel(&sifen_body(&f.company, &certificate, Some("ABCD")))
        .await;
    error_code(status, &err, 400, "validation_error");
    assert_eq!(
        error_fields(&err),
        vec![("sifen.csc".into(), "invalid_csc".into())]
    );
    assert_no_secrets(&err.to_string(), &[CLIENT_SECRET]);

    let (status, err) = f
        .create_channel(&sifen_body(&f.company, &foreign, Some(CSC)))
        .await;
    error_code(status, &err, 400, "validation_error");
    assert_eq!(
        error_fields(&err),
        vec![("sifen.certificate_id".into(), "unknown_reference".into())]
    );

    let mut no_sifen = sifen_body(&f.company, &certificate, Some(CSC));
    no_sifen.as_object_mut().expect("object").remove("sifen");
    let (status, err) = f.create_channel(&no_sifen).await;
    error_code(status, &err, 400, "validation_error");
    assert_eq!(error_fields(&err), vec![("sifen".into(), "required".into())]);

    // A secret under the other kind's key is refused, not silently dropped.
    let mut wrong_key = sifen_body(&f.company, &certificate, Some(CSC));
    wrong_key["credentials"]["api_key"] = json!("an api key for sifen");
    let (status, err) = f.create_channel(&wrong_key).await;
    error_code(status, &err, 400, "validation_error");
    assert_eq!(
        error_fields(&err),
        vec![("credentials.api_key".into(), "not_allowed".into())]
    );
    assert_no_secrets(&err.to_string(), &["an api key for sifen"]);

    let (status, list) = send(f.req(Method::GET, "/v1/emission-channels")).await;
    assert_eq!((status, list), (200, json!([])), "nothing refused is stored");
    f.app.stop().await;
}

#[tokio::test]
async fn patching_the_csc_keeps_every_other_field_and_the_events_show_only_a_new_secret_id() {
    let f = Fixture::new().await;
    let pfx = good_spec(RUC).pfx(PASSWORD).expect("pfx");
    let (status, cert) = f.upload(&f.company, &pfx, PASSWORD).await;
    assert_eq!(status, 201, "{cert}");
    let (branch, point) = f.branch_and_point(&f.company).await;
    let (status, created) = f
        .create_channel(&sifen_body(&f.company, &id(&cert), Some(CSC)))
        .await;
    assert_eq!(status, 201, "{created}");
    let (status, auto) = f
        .create_channel(&autoimpresor_body(&f.company, &branch, &point))
        .await;
    assert_eq!(status, 201, "{auto}");
    let path = format!("/v1/emission-channels/{}", id(&created));

    let (status, patched) = send(
        f.req(Method::PATCH, &path)
            .json(&json!({"sifen": {"csc": NEW_CSC}})),
    )
    .await;
    assert_eq!(status, 200, "{patched}");
    for pointer in [
        "/id",
        "/company_id",
        "/channel",
        "/is_default",
        "/credentials",
        "/sifen",
        "/created_at",
    ] {
        assert_eq!(
            patched.pointer(pointer),
            created.pointer(pointer),
            "{pointer} kept"
        );
    }
    assert_eq!(
        patched["credentials"]["secret_configured"], true,
        "the client secret is kept"
    );

    let (status, patched) = send(
        f.req(Method::PATCH, &path)
            .json(&json!({"sifen": {"timbrado": "11112222"}})),
    )
    .await;
    assert_eq!(status, 200, "{patched}");
    assert_eq!(patched["sifen"]["timbrado"], "11112222");
    assert_eq!(patched["sifen"]["csc_id"], "0001");
    assert_eq!(patched["sifen"]["csc_configured"], true);

    for fixed in [
        json!({"company_id": f.company}),
        json!({"channel": "autoimpresor"}),
    ] {
        let (status, err) = send(f.req(Method::PATCH, &path).json(&fixed)).await;
        error_code(status, &err, 400, "validation_error");
        let field = fixed
            .as_object()
            .expect("object")
            .keys()
            .next()
            .expect("key")
            .clone();
        assert_eq!(error_fields(&err), vec![(field, "immutable".into())]);
    }
    let (status, err) = send(
        f.req(Method::PATCH, &path)
            .json(&json!({"sifen": {"csc": "short"}})),
    )
    .await;
    error_code(status, &err, 400, "validation_error");
    assert_eq!(
        error_fields(&err),
        vec![("sifen.csc".into(), "invalid_csc".into())]
    );
    let ghost = format!("/v1/emission-channels/{}", uuid::Uuid::now_v7());
    let (status, err) = send(f.req(Method::PATCH, &ghost).json(&json!({"is_default": false}))).await;
    error_code(status, &err, 404, "not_found");

    let events = f.events().await;
    let text = serde_json::to_string(&events).expect("json");
    assert_no_secrets(
        &text,
        &[CSC, NEW_CSC, CLIENT_SECRET, API_KEY, PASSWORD, &b64(&pfx)[..60]],
    );
    assert!(
        !text.contains("BEGIN CERTIFICATE"),
        "no key or chain material: {text}"
    );
    let of_type = |kind: &str| -> Vec<&Value> { events.iter().filter(|e| e["type"] == kind).collect() };
    assert_eq!(of_type("CertificateAdded").len(), 1, "{text}");
    let sifen_events: Vec<&Value> = of_type("EmissionChannelConfigured")
        .into_iter()
        .filter(|e| e["data"].to_string().contains(&id(&created)))
        .collect();
    assert_eq!(
        sifen_events.len(),
        3,
        "create, CSC change, timbrado change: {text}"
    );
    let csc_ids: Vec<String> = sifen_events
        .iter()
        .map(|e| {
            let mut found = Vec::new();
            find_all(&e["data"], "csc_secret_id", &mut found);
            assert_eq!(found.len(), 1, "{e}");
            found[0].as_str().expect("csc_secret_id").to_owned()
        })
        .collect();
    let nil = uuid::Uuid::nil().to_string();
    assert!(csc_ids.iter().all(|c| *c != nil), "{csc_ids:?}");
    assert_ne!(csc_ids[0], csc_ids[1], "a new CSC is a new secret id");
    assert_eq!(csc_ids[1], csc_ids[2], "a change that names no CSC keeps it");
    let all_configured = of_type("EmissionChannelConfigured");
    assert_eq!(all_configured.len(), 4, "{text}");
    f.app.stop().await;
}

#[tokio::test]
async fn readiness_names_what_is_missing_until_a_channel_is_complete() {
    let f = Fixture::new().await;
    let readiness = f.readiness(&f.company).await;
    assert_eq!(readiness.len(), 2, "{readiness:?}");
    for (entry, kind) in readiness.iter().zip(["sifen", "autoimpresor"]) {
        assert_eq!(entry["channel"], kind);
        assert_eq!(entry["channel_id"], Value::Null);
        assert_eq!(entry["company_id"], json!(f.company));
        assert_eq!(entry["ready"], false);
        assert_eq!(failing_checks(&entry["checks"]), vec!["channel"]);
    }

    let certificate = id(&f.certificate(&f.company, &good_spec(RUC)).await);
    let (status, channel) = f
        .create_channel(&sifen_body(&f.company, &certificate, Some(CSC)))
        .await;
    assert_eq!(status, 201, "{channel}");
    let sifen = |r: &[Value]| -> Value { r.iter().find(|c| c["channel"] == "sifen").expect("sifen").clone() };
    let entry = sifen(&f.readiness(&f.company).await);
    assert_eq!(entry["channel_id"], json!(id(&channel)));
    assert_eq!(entry["ready"], false);
    assert_eq!(failing_checks(&entry["checks"]), vec!["branch", "issuance_point"]);
    assert!(
        check(&entry["checks"], "branch")["message"]
            .as_str()
            .expect("message")
            .contains("no branch"),
        "{entry}"
    );

    let (status, branch) = send(f.req(Method::POST, "/v1/branches").json(&json!({
        "company_id": f.company, "code": "001", "name": "Casa central"
    })))
    .await;
    assert_eq!(status, 201, "{branch}");
    let entry = sifen(&f.readiness(&f.company).await);
    assert_eq!(failing_checks(&entry["checks"]), vec!["issuance_point"]);
    assert!(
        check(&entry["checks"], "issuance_point")["message"]
            .as_str()
            .expect("message")
            .contains("no issuance point"),
        "{entry}"
    );

    let (status, point) = send(
        f.req(Method::POST, "/v1/issuance-points")
            .json(&json!({"branch_id": id(&branch), "code": "001"})),
    )
    .await;
    assert_eq!(status, 201, "{point}");
    let readiness = f.readiness(&f.company).await;
    let entry = sifen(&readiness);
    assert_eq!(entry["ready"], true, "{entry}");
    assert_eq!(
        check_names(&entry["checks"]),
        vec![
            "company",
            "branch",
            "issuance_point",
            "timbrado",
            "certificate",
            "csc"
        ]
    );
    assert!(failing_checks(&entry["checks"]).is_empty(), "{entry}");
    let auto = readiness
        .iter()
        .find(|c| c["channel"] == "autoimpresor")
        .expect("autoimpresor");
    assert_eq!(
        (&auto["channel_id"], &auto["ready"]),
        (&Value::Null, &json!(false))
    );

    // Swapping in an expired certificate turns the certificate check red, naming why.
    let mut expired = good_spec(RUC);
    expired.not_before = Utc::now() - Duration::days(400);
    expired.not_after = Utc::now() - Duration::days(2);
    let expired = id(&f.certificate(&f.company, &expired).await);
    let (status, patched) = send(
        f.req(Method::PATCH, &format!("/v1/emission-channels/{}", id(&channel)))
            .json(&json!({"sifen": {"certificate_id": expired}})),
    )
    .await;
    assert_eq!(status, 200, "{patched}");
    let entry = sifen(&f.readiness(&f.company).await);
    assert_eq!(failing_checks(&entry["checks"]), vec!["certificate"]);
    assert!(
        check(&entry["checks"], "certificate")["message"]
            .as_str()
            .expect("message")
            .contains("expired"),
        "{entry}"
    );

    // A complete autoimpresor channel is ready too.
    let (status, auto) = f
        .create_channel(&autoimpresor_body(&f.company, &id(&branch), &id(&point)))
        .await;
    assert_eq!(status, 201, "{auto}");
    let readiness = f.readiness(&f.company).await;
    let auto = readiness
        .iter()
        .find(|c| c["channel"] == "autoimpresor")
        .expect("autoimpresor");
    assert_eq!(auto["ready"], true, "{auto}");
    assert_eq!(
        check_names(&auto["checks"]),
        vec![
            "company",
            "branch",
            "issuance_point",
            "timbrado",
            "numbering_range",
            "print_settings"
        ]
    );

    let ghost = uuid::Uuid::now_v7();
    let (status, err) = send(f.req(
        Method::GET,
        &format!("/v1/emission-channels/readiness?company_id={ghost}"),
    ))
    .await;
    error_code(status, &err, 404, "not_found");
    f.app.stop().await;
}

#[tokio::test]
async fn a_company_scoped_key_sees_and_writes_only_its_company() {
    let f = Fixture::new().await;
    let other = f.add_company(OTHER_RUC).await;
    let mine_cert = id(&f.certificate(&f.company, &good_spec(RUC)).await);
    let other_cert = id(&f.certificate(&other, &good_spec(OTHER_RUC)).await);
    let (status, mine_channel) = f
        .create_channel(&sifen_body(&f.company, &mine_cert, Some(CSC)))
        .await;
    assert_eq!(status, 201, "{mine_channel}");
    let (status, other_channel) = f
        .create_channel(&sifen_body(&other, &other_cert, Some(CSC)))
        .await;
    assert_eq!(status, 201, "{other_channel}");

    let (status, scoped) = send(f.req(Method::POST, "/v1/api-keys").json(&json!({
        "name": "company scoped", "role": "admin", "company_id": f.company
    })))
    .await;
    assert_eq!(status, 201, "{scoped}");
    let scoped = scoped["key"].as_str().expect("key").to_owned();
    let as_scoped = |method: Method, path: &str| f.app.as_key(method, path, &scoped, &f.tenant);

    let (status, list) = send(as_scoped(Method::GET, "/v1/certificates")).await;
    assert_eq!(status, 200, "{list}");
    let ids: Vec<String> = list.as_array().expect("array").iter().map(id).collect();
    assert_eq!(ids, vec![mine_cert.clone()]);
    let (status, _) = send(as_scoped(
        Method::POST,
        &format!("/v1/certificates/{mine_cert}/validate"),
    ))
    .await;
    assert_eq!(status, 200);
    let (status, err) = send(as_scoped(
        Method::POST,
        &format!("/v1/certificates/{other_cert}/validate"),
    ))
    .await;
    error_code(status, &err, 404, "not_found");

    let (status, list) = send(as_scoped(Method::GET, "/v1/emission-channels")).await;
    assert_eq!(status, 200, "{list}");
    let ids: Vec<String> = list.as_array().expect("array").iter().map(id).collect();
    assert_eq!(ids, vec![id(&mine_channel)]);
    let (status, err) = send(as_scoped(
        Method::GET,
        &format!("/v1/emission-channels?company_id={other}"),
    ))
    .await;
    error_code(status, &err, 404, "not_found");
    let (status, err) = send(
        as_scoped(
            Method::PATCH,
            &format!("/v1/emission-channels/{}", id(&other_channel)),
        )
        .json(&json!({"sifen": {"csc": NEW_CSC}})),
    )
    .await;
    error_code(status, &err, 404, "not_found");

    let (status, readiness) = send(as_scoped(Method::GET, "/v1/emission-channels/readiness")).await;
    assert_eq!(status, 200, "{readiness}");
    let channels = readiness["channels"].as_array().expect("channels");
    assert!(!channels.is_empty());
    assert!(
        channels.iter().all(|c| c["company_id"] == json!(f.company)),
        "{readiness}"
    );
    let (status, err) = send(as_scoped(
        Method::GET,
        &format!("/v1/emission-channels/readiness?company_id={other}"),
    ))
    .await;
    error_code(status, &err, 404, "not_found");

    // Writes: the other company is out of reach; the key's own company is implied.
    let pfx = good_spec(OTHER_RUC).pfx(PASSWORD).expect("pfx");
    let (status, err) = send(as_scoped(Method::POST, "/v1/certificates").json(&json!({
        "company_id": other, "pfx_base64": b64(&pfx), "password": PASSWORD
    })))
    .await;
    error_code(status, &err, 404, "not_found");
    let (status, err) = send(as_scoped(Method::POST, "/v1/emission-channels").json(&sifen_body(
        &other,
        &other_cert,
        Some(CSC),
    )))
    .await;
    error_code(status, &err, 404, "not_found");
    let pfx = good_spec(RUC).pfx(PASSWORD).expect("pfx");
    let (status, implied) = send(as_scoped(Method::POST, "/v1/certificates").json(&json!({
        "pfx_base64": b64(&pfx), "password": PASSWORD
    })))
    .await;
    assert_eq!(status, 201, "{implied}");
    assert_eq!(implied["company_id"], json!(f.company));

    let (status, all) = send(f.req(Method::GET, "/v1/certificates")).await;
    assert_eq!(status, 200);
    assert_eq!(
        all.as_array().map(Vec::len),
        Some(3),
        "the tenant's key sees both: {all}"
    );
    f.app.stop().await;
}

#[tokio::test]
async fn another_tenant_cannot_reach_the_certificates_or_channels() {
    let f = Fixture::new().await;
    let certificate = id(&f.certificate(&f.company, &good_spec(RUC)).await);
    let (status, channel) = f
        .create_channel(&sifen_body(&f.company, &certificate, Some(CSC)))
        .await;
    assert_eq!(status, 201, "{channel}");
    let (intruder_tenant, intruder) = f.app.tenant("globex").await;

    // With the first tenant's id in the header: 403.
    let as_foreign = |method: Method, path: &str| f.app.as_key(method, path, &intruder, &f.tenant);
    for (method, path) in [
        (Method::GET, "/v1/certificates".to_owned()),
        (Method::GET, "/v1/emission-channels".to_owned()),
        (Method::GET, "/v1/emission-channels/readiness".to_owned()),
        (Method::POST, format!("/v1/certificates/{certificate}/validate")),
    ] {
        let (status, err) = send(as_foreign(method, &path)).await;
        error_code(status, &err, 403, "permission_error");
    }
    let (status, err) = send(
        as_foreign(Method::PATCH, &format!("/v1/emission-channels/{}", id(&channel)))
            .json(&json!({"sifen": {"csc": NEW_CSC}})),
    )
    .await;
    error_code(status, &err, 403, "permission_error");

    // With its own tenant: nothing of the first tenant exists.
    let as_own = |method: Method, path: &str| f.app.as_key(method, path, &intruder, &intruder_tenant);
    let (status, list) = send(as_own(Method::GET, "/v1/certificates")).await;
    assert_eq!((status, list), (200, json!([])));
    let (status, list) = send(as_own(Method::GET, "/v1/emission-channels")).await;
    assert_eq!((status, list), (200, json!([])));
    let (status, err) = send(as_own(
        Method::POST,
        &format!("/v1/certificates/{certificate}/validate"),
    ))
    .await;
    error_code(status, &err, 404, "not_found");
    let (status, err) = send(
        as_own(Method::PATCH, &format!("/v1/emission-channels/{}", id(&channel)))
            .json(&json!({"sifen": {"csc": NEW_CSC}})),
    )
    .await;
    error_code(status, &err, 404, "not_found");
    let (status, err) = send(as_own(
        Method::GET,
        &format!("/v1/emission-channels/readiness?company_id={}", f.company),
    ))
    .await;
    error_code(status, &err, 404, "not_found");
    let pfx = good_spec(RUC).pfx(PASSWORD).expect("pfx");
    let (status, err) = send(as_own(Method::POST, "/v1/certificates").json(&json!({
        "company_id": f.company, "pfx_base64": b64(&pfx), "password": PASSWORD
    })))
    .await;
    error_code(status, &err, 404, "not_found");
    let (status, err) = send(as_own(Method::POST, "/v1/emission-channels").json(&sifen_body(
        &f.company,
        &certificate,
        Some(CSC),
    )))
    .await;
    error_code(status, &err, 404, "not_found");

    // The first tenant's channel is unchanged.
    let (status, list) = send(f.req(Method::GET, "/v1/emission-channels")).await;
    assert_eq!(status, 200);
    assert_eq!(list[0]["updated_at"], channel["updated_at"], "{list}");
    f.app.stop().await;
}

#[tokio::test]
async fn a_viewer_reads_the_configuration_but_cannot_change_it() {
    let f = Fixture::new().await;
    let certificate = id(&f.certificate(&f.company, &good_spec(RUC)).await);
    let (status, channel) = f
        .create_channel(&sifen_body(&f.company, &certificate, Some(CSC)))
        .await;
    assert_eq!(status, 201, "{channel}");
    let (status, viewer) = send(
        f.req(Method::POST, "/v1/api-keys")
            .json(&json!({"name": "v", "role": "viewer"})),
    )
    .await;
    assert_eq!(status, 201, "{viewer}");
    let viewer = viewer["key"].as_str().expect("key").to_owned();
    let as_viewer = |method: Method, path: &str| f.app.as_key(method, path, &viewer, &f.tenant);

    let pfx = good_spec(RUC).pfx(PASSWORD).expect("pfx");
    let (status, err) = send(as_viewer(Method::POST, "/v1/certificates").json(&json!({
        "company_id": f.company, "pfx_base64": b64(&pfx), "password": PASSWORD
    })))
    .await;
    error_code(status, &err, 403, "permission_error");
    let (content_type, body) = multipart_form(&[
        ("company_id", None, f.company.as_bytes()),
        ("password", None, PASSWORD.as_bytes()),
        ("pfx", Some("firma.pfx"), &pfx),
    ]);
    let (status, err) = send(
        as_viewer(Method::POST, "/v1/certificates")
            .header("Content-Type", content_type)
            .body(body),
    )
    .await;
    error_code(status, &err, 403, "permission_error");
    let (status, err) = send(as_viewer(Method::POST, "/v1/emission-channels").json(&sifen_body(
        &f.company,
        &certificate,
        Some(CSC),
    )))
    .await;
    error_code(status, &err, 403, "permission_error");
    let (status, err) = send(
        as_viewer(Method::PATCH, &format!("/v1/emission-channels/{}", id(&channel)))
            .json(&json!({"sifen": {"csc": NEW_CSC}})),
    )
    .await;
    error_code(status, &err, 403, "permission_error");

    let (status, list) = send(as_viewer(Method::GET, "/v1/certificates")).await;
    assert_eq!((status, list.as_array().map(Vec::len)), (200, Some(1)));
    let (status, v) = send(as_viewer(
        Method::POST,
        &format!("/v1/certificates/{certificate}/validate"),
    ))
    .await;
    assert_eq!((status, &v["valid"]), (200, &json!(true)), "{v}");
    let (status, list) = send(as_viewer(Method::GET, "/v1/emission-channels")).await;
    assert_eq!((status, list.as_array().map(Vec::len)), (200, Some(1)));
    let (status, _) = send(as_viewer(Method::GET, "/v1/emission-channels/readiness")).await;
    assert_eq!(status, 200);
    f.app.stop().await;
}
