//! A tenant ready to issue on SIFEN, and what tests do with its documents: post them, read their
//! status and timeline, and wait for a status or an artifact.

use crate::TestApp;
use crate::http::{b64, hours_ago, id, send};
use kuatia_domain::document::canonical::sample_invoice;
use kuatia_infrastructure::selfsigned::SelfSigned;
use reqwest::Method;
use serde_json::{Value, json};
use std::time::{Duration, Instant};

/// The RUC of the SET's test emitter, the companies' RUC unless a test says otherwise.
pub const RUC: &str = "80069563-1";
/// The password of the test certificates' PKCS#12 files.
pub const PASSWORD: &str = "pfx pass 1234";
/// The CSC of the test sifen channels.
pub const CSC: &str = "ABCD0000000000000000000000000000";

/// A tenant ready to issue on SIFEN: a company (with its certificate), branch 001 with point 001
/// and a default sifen channel with CSC; and a client to the service that holds it.
pub struct Ready {
    /// The tenant's id.
    pub tenant: String,
    /// The tenant's owner key.
    pub key: String,
    /// The company's id.
    pub company: String,
    /// Branch 001's id.
    pub branch: String,
    /// Issuance point 001's id.
    pub point: String,
    client: reqwest::Client,
    base: String,
}

/// A company with branch, point, certificate and a sifen channel sending to `endpoint`; returns
/// the ids of the company, the branch and the point.
pub async fn add_company_at(
    app: &TestApp,
    tenant: &str,
    key: &str,
    ruc: &str,
    endpoint: &str,
) -> (String, String, String) {
    let req = |m: Method, p: &str| app.as_key(m, p, key, tenant);
    let (status, company) = send(req(Method::POST, "/v1/companies").json(&TestApp::company_body(ruc))).await;
    assert_eq!(status, 201, "{company}");
    let company = id(&company);
    let (status, branch) = send(
        req(Method::POST, "/v1/branches")
            .json(&json!({"company_id": company, "code": "001", "name": "Casa central"})),
    )
    .await;
    assert_eq!(status, 201, "{branch}");
    let (status, point) = send(
        req(Method::POST, "/v1/issuance-points").json(&json!({"branch_id": id(&branch), "code": "001"})),
    )
    .await;
    assert_eq!(status, 201, "{point}");
    let certificate = upload_certificate(req, &company, ruc, 365, None).await;
    let (status, channel) = send(
        req(Method::POST, "/v1/emission-channels").json(&sifen_channel_body(
            &company,
            endpoint,
            &id(&certificate),
        )),
    )
    .await;
    assert_eq!(status, 201, "{channel}");
    (company, id(&branch), id(&point))
}

/// Uploads a fresh certificate of `ruc` (PFX with [`PASSWORD`]) valid for `days` from now, for
/// `company`, through `req` (any caller's requests), labelled `label`; asserts 201 and returns
/// the answer.
pub async fn upload_certificate(
    req: impl Fn(Method, &str) -> reqwest::RequestBuilder,
    company: &str,
    ruc: &str,
    days: i64,
    label: Option<&str>,
) -> Value {
    let pfx = SelfSigned::for_ruc("DE GENERACION ELECTRONICA S.A.", ruc, days)
        .pfx(PASSWORD)
        .expect("pfx");
    let mut body = json!({"company_id": company, "pfx_base64": b64(&pfx), "password": PASSWORD});
    if let Some(label) = label {
        body["label"] = json!(label);
    }
    let (status, certificate) = send(req(Method::POST, "/v1/certificates").json(&body)).await;
    assert_eq!(status, 201, "{certificate}");
    certificate
}

/// The body of a default sifen channel of `company` sending to `endpoint`, signing with
/// `certificate`, with the test timbrado and [`CSC`].
pub fn sifen_channel_body(company: &str, endpoint: &str, certificate: &str) -> Value {
    json!({
        "company_id": company,
        "channel": "sifen",
        "is_default": true,
        "credentials": {"endpoint": endpoint, "client_id": "client-1", "client_secret": "s3cret-value"},
        "sifen": {"environment": "test", "timbrado": "12345678", "timbrado_valid_from": "2024-01-01",
                  "csc_id": "0001", "csc": CSC, "certificate_id": certificate},
    })
}

impl TestApp {
    /// A new tenant `slug` whose company ([`RUC`]) sends to `endpoint`.
    pub async fn ready_at(&self, slug: &str, endpoint: &str) -> Ready {
        let (tenant, key) = self.tenant(slug).await;
        let (company, branch, point) = add_company_at(self, &tenant, &key, RUC, endpoint).await;
        Ready {
            tenant,
            key,
            company,
            branch,
            point,
            client: self.client.clone(),
            base: self.base.clone(),
        }
    }
}

impl Ready {
    /// The same tenant on `app`, for when the service it was made on restarted (on another port).
    pub fn on(self, app: &TestApp) -> Self {
        Self {
            client: app.client.clone(),
            base: app.base.clone(),
            ..self
        }
    }

    /// A request with the owner key and the tenant header.
    pub fn req(&self, method: Method, path: &str) -> reqwest::RequestBuilder {
        self.client
            .request(method, format!("{}{path}", self.base))
            .bearer_auth(&self.key)
            .header("X-Tenant-Id", &self.tenant)
    }

    /// The sample invoice for this company, issued an hour ago.
    pub fn invoice(&self, external_id: &str) -> Value {
        let mut doc = sample_invoice();
        doc["company_id"] = json!(self.company);
        doc["external_id"] = json!(external_id);
        doc["issue_datetime"] = json!(hours_ago(1));
        doc
    }

    /// `POST /v1/documents` with a fresh Idempotency-Key; asserts 201 and returns the body.
    pub async fn post(&self, doc: &Value) -> Value {
        let (status, body) = send(
            self.req(Method::POST, "/v1/documents")
                .header("Idempotency-Key", uuid::Uuid::now_v7().to_string())
                .json(doc),
        )
        .await;
        assert_eq!(status, 201, "{body}");
        body
    }

    /// A document's status body, asserting 200.
    pub async fn status(&self, doc: &str) -> Value {
        let (status, body) = send(self.req(Method::GET, &format!("/v1/documents/{doc}/status"))).await;
        assert_eq!(status, 200, "{body}");
        body
    }

    /// A document's timeline, asserting 200.
    pub async fn timeline(&self, doc: &str) -> Vec<Value> {
        let (status, body) = send(self.req(Method::GET, &format!("/v1/documents/{doc}/timeline"))).await;
        assert_eq!(status, 200, "{body}");
        body.as_array().cloned().unwrap_or_default()
    }

    /// Waits until `done` holds for every document's status body; returns the bodies.
    pub async fn until(
        &self,
        docs: &[String],
        within: Duration,
        done: impl Fn(&Value) -> bool,
    ) -> Vec<Value> {
        let deadline = Instant::now() + within;
        loop {
            let mut all = Vec::new();
            for doc in docs {
                all.push(self.status(doc).await);
            }
            let open: Vec<&Value> = all.iter().filter(|s| !done(s)).collect();
            if open.is_empty() {
                return all;
            }
            assert!(
                Instant::now() < deadline,
                "{} documents not there after {within:?}, e.g. {}",
                open.len(),
                open[0]
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// Waits until every document is final (accepted, rejected or failed for good); returns
    /// their status bodies.
    pub async fn settle(&self, docs: &[String], within: Duration) -> Vec<Value> {
        self.until(docs, within, |s| {
            matches!(
                s["status"].as_str(),
                Some("accepted" | "rejected" | "failed_terminal")
            )
        })
        .await
    }

    /// Waits until the document's status is `want`.
    pub async fn wait_status(&self, doc: &str, want: &str, within: Duration) {
        self.until(&[doc.to_owned()], within, |s| s["status"] == want)
            .await;
    }

    /// The artifacts of `kind` the document's timeline recorded so far: `(version, sha256)`.
    pub async fn recorded(&self, doc: &str, kind: &str) -> Vec<(u64, String)> {
        self.timeline(doc)
            .await
            .iter()
            .filter_map(|e| {
                let a = &e["data"]["ArtifactRecorded"];
                (e["type"] == "ArtifactRecorded" && a["kind"] == kind).then(|| {
                    (
                        a["version"].as_u64().expect("version"),
                        a["sha256"].as_str().expect("sha").to_owned(),
                    )
                })
            })
            .collect()
    }

    /// Waits until the document has `version` of its `kind` artifact; returns its sha256.
    pub async fn wait_recorded(&self, doc: &str, kind: &str, version: u64, within: Duration) -> String {
        let deadline = Instant::now() + within;
        loop {
            if let Some((_, sha)) = self
                .recorded(doc, kind)
                .await
                .into_iter()
                .find(|(v, _)| *v == version)
            {
                return sha;
            }
            if Instant::now() > deadline {
                let status = send(self.req(Method::GET, &format!("/v1/documents/{doc}/status"))).await;
                panic!("no {kind} v{version} for {doc} after {within:?}: {status:?}");
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// Counts the tenant's events of `event_type`.
    pub async fn count_events(&self, event_type: &str) -> usize {
        let (mut after, mut count) = (0_i64, 0);
        loop {
            let (status, page) =
                send(self.req(Method::GET, &format!("/v1/events?after={after}&limit=1000"))).await;
            assert_eq!(status, 200, "{page}");
            let events = page["events"].as_array().cloned().unwrap_or_default();
            if events.is_empty() {
                return count;
            }
            count += events.iter().filter(|e| e["type"] == event_type).count();
            after = page["next_after"].as_i64().expect("next_after");
        }
    }

    /// `POST /v1/documents` with a fresh Idempotency-Key, asserting nothing: (status, body).
    pub async fn try_post(&self, doc: &Value) -> (u16, Value) {
        send(
            self.req(Method::POST, "/v1/documents")
                .header("Idempotency-Key", uuid::Uuid::now_v7().to_string())
                .json(doc),
        )
        .await
    }

    /// `POST /v1/documents/validate`, asserting 200.
    pub async fn validate(&self, doc: &Value) -> Value {
        let (status, body) = send(self.req(Method::POST, "/v1/documents/validate").json(doc)).await;
        assert_eq!(status, 200, "{body}");
        body
    }

    /// How many documents the tenant has (`GET /v1/documents`, its first page).
    pub async fn document_count(&self) -> usize {
        let (status, body) = send(self.req(Method::GET, "/v1/documents")).await;
        assert_eq!(status, 200, "{body}");
        body["documents"].as_array().map_or(0, Vec::len)
    }

    /// `POST /v1/documents/{doc}/{action}` (`cancel`, `inutilize`) with a reason.
    pub async fn void(&self, doc: &str, action: &str, reason: &str) -> (u16, Value) {
        send(
            self.req(Method::POST, &format!("/v1/documents/{doc}/{action}"))
                .json(&json!({ "reason": reason })),
        )
        .await
    }

    /// A remisión (motive 1) of the sample's goods to an address in Asunción; its transport is
    /// the caller's.
    pub fn remision(&self, external_id: &str) -> Value {
        let mut remision = self.invoice(external_id);
        remision["type"] = json!("remision");
        remision["reason"] = json!(1);
        remision["buyer"]["address"] = json!("Av. Mariscal López");
        remision["buyer"]["house_number"] = json!("1234");
        remision["buyer"]["department_code"] = json!(1);
        remision["buyer"]["city_code"] = json!(1);
        remision
    }

    /// The company's sifen channel.
    pub async fn sifen_channel(&self) -> Value {
        let (status, body) = send(self.req(
            Method::GET,
            &format!("/v1/emission-channels?company_id={}", self.company),
        ))
        .await;
        assert_eq!(status, 200, "{body}");
        body.as_array()
            .and_then(|a| a.iter().find(|c| c["channel"] == "sifen"))
            .cloned()
            .unwrap_or_else(|| panic!("no sifen channel in {body}"))
    }

    /// The ids `GET /v1/documents{query}` lists (its first page), asserting 200.
    pub async fn ids(&self, query: &str) -> Vec<String> {
        let (status, body) = send(self.req(Method::GET, &format!("/v1/documents{query}"))).await;
        assert_eq!(status, 200, "{query}: {body}");
        body["documents"]
            .as_array()
            .unwrap_or_else(|| panic!("documents in {body}"))
            .iter()
            .map(id)
            .collect()
    }

    /// Issues an API key of `role` (optionally scoped to a company); returns (secret, key id).
    pub async fn api_key(&self, role: &str, company: Option<&str>) -> (String, String) {
        let mut body = json!({"name": format!("{role} key"), "role": role});
        if let Some(c) = company {
            body["company_id"] = json!(c);
        }
        let (status, created) = send(self.req(Method::POST, "/v1/api-keys").json(&body)).await;
        assert_eq!(status, 201, "{created}");
        let secret = created["key"]
            .as_str()
            .unwrap_or_else(|| panic!("no key secret in {created}"))
            .to_owned();
        (secret, id(&created))
    }
}
