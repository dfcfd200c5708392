//! Artifacts and their presigned downloads, black-box over
//! HTTP, with the SIFEN documents' signed XML and SIFEN answers as the stored files; and the
//! artifact store on a real S3-compatible server (moto), started by the test.

use kuatia_api::routes::artifacts::UrlSigner;
use kuatia_application::artifacts::{ArtifactError, ArtifactStore, sha256_hex};
use kuatia_domain::document::canonical::sample_invoice;
use kuatia_infrastructure::artifacts::{ArtifactLocation, ObjectArtifacts, S3Settings};
use kuatia_infrastructure::config::{Config, Secret};
use kuatia_infrastructure::sifen_sim::SimConfig;
use kuatia_tests::{Simulated, id, send};
use object_store::path::Path as ObjectPath;
use object_store::{ObjectStoreExt, PutPayload};
use reqwest::Method;
use serde_json::{Value, json};
use std::time::Duration;

const URL_KEY: &str = "test-artifact-url-key";

/// A service whose tenant's sifen channel sends to the simulator, with presigned URLs.
async fn served(slug: &str, adjust: impl FnOnce(&mut Config)) -> Simulated {
    Simulated::named(slug, SimConfig::default(), |c| {
        c.artifact_url_key = Some(Secret::new(URL_KEY));
        adjust(c);
    })
    .await
}

/// An invoice taken to `accepted` through the simulator, with its KuDE rendered.
async fn accepted_invoice(f: &Simulated) -> String {
    let posted = f.invoice("ART-1");
    let (status, created) = send(
        f.req(Method::POST, "/v1/documents")
            .header("Idempotency-Key", "art-1")
            .json(&posted),
    )
    .await;
    assert_eq!(status, 201, "{created}");
    let doc = id(&created);
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    f.wait_status(&doc, "accepted", Duration::from_secs(60)).await;
    // The KuDE job records its artifact after acceptance: wait for it, so that two reads of
    // the artifacts (the listing, the detail) see the same ones.
    loop {
        if artifacts(f, &doc).await.iter().any(|a| a["type"] == "kude") {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "no KuDE recorded for {doc}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // The same request again answers what intake answered, although the document moved on.
    let response = f
        .req(Method::POST, "/v1/documents")
        .header("Idempotency-Key", "art-1")
        .json(&posted)
        .send()
        .await
        .expect("repeat");
    assert_eq!(response.status(), 201);
    assert_eq!(response.headers()["idempotent-replayed"], "true");
    let replayed: Value = response.json().await.expect("json");
    assert_eq!(replayed, created, "the original answer");
    assert_eq!(replayed["status"], "queued");
    doc
}

async fn artifacts(f: &Simulated, doc: &str) -> Vec<Value> {
    let (status, body) = send(f.req(Method::GET, &format!("/v1/documents/{doc}/artifacts"))).await;
    assert_eq!(status, 200, "{body}");
    body.as_array().cloned().expect("a list")
}

async fn get(f: &Simulated, url: &str) -> reqwest::Response {
    let url = if url.starts_with('/') {
        format!("{}{url}", f.app.base)
    } else {
        url.to_owned()
    };
    f.app.client.get(url).send().await.expect("download")
}

async fn forbidden(response: reqwest::Response) {
    assert_eq!(response.status(), 403);
    let body: Value = response.json().await.expect("json error body");
    assert_eq!(body["code"], "permission_error", "{body}");
    assert!(body["request_id"].is_string(), "{body}");
    assert!(body["message"].is_string(), "{body}");
}

#[tokio::test]
async fn a_presigned_url_downloads_the_exact_stored_bytes_and_a_changed_one_is_403() {
    let f = served("art-dl", |_| {}).await;
    let doc = accepted_invoice(&f).await;
    let listed = artifacts(&f, &doc).await;
    let kinds: Vec<&str> = listed.iter().filter_map(|a| a["type"].as_str()).collect();
    assert!(kinds.contains(&"signed_xml"), "{kinds:?}");
    assert!(kinds.contains(&"channel_response"), "{kinds:?}");
    let before = chrono::Utc::now();
    for a in &listed {
        for field in [
            "id",
            "type",
            "content_type",
            "size",
            "sha256",
            "created_at",
            "download_url",
            "expires_at",
        ] {
            assert!(!a[field].is_null(), "{field} in {a}");
        }
        let expires_at: chrono::DateTime<chrono::Utc> =
            a["expires_at"].as_str().expect("time").parse().expect("rfc3339");
        let lifetime = (expires_at - before).num_seconds();
        assert!((895..=901).contains(&lifetime), "15 minutes: {lifetime}");
    }
    let xml = listed
        .iter()
        .find(|a| a["type"] == "signed_xml")
        .expect("signed xml")
        .clone();
    let url = xml["download_url"].as_str().expect("url").to_owned();
    assert!(url.starts_with(&f.app.base), "absolute: {url}");

    // The exact bytes, with their type and a file name.
    let response = get(&f, &url).await;
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["content-type"], "application/xml");
    let (_, status) = send(f.req(Method::GET, &format!("/v1/documents/{doc}/status"))).await;
    let cdc = status["cdc"].as_str().expect("cdc");
    assert_eq!(
        response.headers()["content-disposition"],
        format!("attachment; filename=\"{cdc}-signed-xml-v1.xml\"").as_str()
    );
    let bytes = response.bytes().await.expect("bytes");
    assert_eq!(sha256_hex(&bytes), xml["sha256"].as_str().expect("sha"));
    assert_eq!(bytes.len() as u64, xml["size"].as_u64().expect("size"));
    let stored = f
        .app
        .db
        .config()
        .data_dir
        .join("artifacts")
        .join(&xml["sha256"].as_str().expect("sha")[..2])
        .join(xml["sha256"].as_str().expect("sha"));
    assert_eq!(std::fs::read(stored).expect("stored"), bytes.to_vec());

    // Any change to the URL: 403 in the contract's error shape.
    let parsed = reqwest::Url::parse(&url).expect("url");
    let query: std::collections::HashMap<String, String> = parsed.query_pairs().into_owned().collect();
    let expires: i64 = query["expires"].parse().expect("expires");
    let signature = &query["signature"];
    let path = parsed.path();
    let flipped = {
        let mut s = signature.clone();
        let last = s.pop().expect("hex");
        s.push(if last == '0' { '1' } else { '0' });
        s
    };
    for bad in [
        format!("{path}?expires={}&signature={signature}", expires + 1),
        format!("{path}?expires={}&signature={signature}", expires - 1),
        format!("{path}?expires={expires}&signature={flipped}"),
        format!("{path}?expires={expires}&signature={}", &signature[..10]),
        format!("{path}?expires={expires}&signature=not-hex"),
        format!("{path}?expires={expires}"),
        format!("{path}?signature={signature}"),
        format!("{path}?expires=soon&signature={signature}"),
        format!("{path}?expires={expires}&expires={expires}&signature={signature}"),
        format!(
            "{}?expires={expires}&signature={signature}",
            path.replace(xml["id"].as_str().expect("id"), "not-a-uuid")
        ),
        path.to_owned(),
    ] {
        forbidden(get(&f, &bad).await).await;
    }
    // The signature binds the artifact: another artifact's id with this signature is refused.
    let other = listed
        .iter()
        .find(|a| a["type"] == "channel_response")
        .expect("answer");
    let swapped = path.replace(xml["id"].as_str().expect("id"), other["id"].as_str().expect("id"));
    forbidden(get(&f, &format!("{swapped}?expires={expires}&signature={signature}")).await).await;

    // The detail lists the same artifacts.
    let (status, detail) = send(f.req(Method::GET, &format!("/v1/documents/{doc}"))).await;
    assert_eq!(status, 200, "{detail}");
    let strip = |list: &[Value]| -> Vec<(String, String, String)> {
        let mut v: Vec<_> = list
            .iter()
            .map(|a| {
                (
                    a["id"].as_str().unwrap_or_default().to_owned(),
                    a["type"].as_str().unwrap_or_default().to_owned(),
                    a["sha256"].as_str().unwrap_or_default().to_owned(),
                )
            })
            .collect();
        v.sort();
        v
    };
    let in_detail = detail["artifacts"].as_array().cloned().expect("artifacts");
    assert_eq!(strip(&in_detail), strip(&listed));
    assert!(
        in_detail.iter().all(|a| a["download_url"].is_string()),
        "{detail}"
    );
    f.app.stop().await;
}

/// The normalized payload is one of the artifact kinds: the canonical document
/// as kuatia keeps it, defaults applied, recorded once when the document is prepared.
#[tokio::test]
async fn the_normalized_payload_is_the_canonical_document_as_kept_with_its_defaults() {
    let f = served("art-norm", |_| {}).await;
    let doc = accepted_invoice(&f).await;
    let listed = artifacts(&f, &doc).await;
    let payloads: Vec<&Value> = listed
        .iter()
        .filter(|a| a["type"] == "normalized_payload")
        .collect();
    assert_eq!(payloads.len(), 1, "{listed:?}");
    let response = get(&f, payloads[0]["download_url"].as_str().expect("url")).await;
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["content-type"], "application/json");
    let bytes = response.bytes().await.expect("bytes");
    assert_eq!(sha256_hex(&bytes), payloads[0]["sha256"].as_str().expect("sha"));
    let payload: Value = serde_json::from_slice(&bytes).expect("JSON");
    assert_eq!(payload["external_id"], "ART-1");
    assert_eq!(payload["company_id"], json!(f.r.company));
    // What the integrator left out is there with its default: PYG, a sale.
    assert_eq!(payload["currency"], "PYG", "{payload}");
    assert_eq!(
        payload["items"].as_array().map(Vec::len),
        sample_invoice()["items"].as_array().map(Vec::len)
    );
    f.app.stop().await;
}

#[tokio::test]
async fn an_expired_url_is_403_and_the_same_url_unexpired_downloads() {
    let f = served("art-exp", |_| {}).await;
    let doc = accepted_invoice(&f).await;
    let xml = artifacts(&f, &doc)
        .await
        .into_iter()
        .find(|a| a["type"] == "signed_xml")
        .expect("signed xml");
    let (doc_id, art_id) = (
        doc.parse::<uuid::Uuid>().expect("uuid"),
        xml["id"]
            .as_str()
            .expect("id")
            .parse::<uuid::Uuid>()
            .expect("uuid"),
    );
    // Signed with the server's key through the code path the service uses.
    let signer = UrlSigner::new(URL_KEY.as_bytes().to_vec(), 900);
    let now = chrono::Utc::now().timestamp();
    let fresh = get(&f, &signer.path(doc_id, art_id, now + 60)).await;
    assert_eq!(fresh.status(), 200, "a URL the test signs is the service's own");
    forbidden(get(&f, &signer.path(doc_id, art_id, now - 1)).await).await;
    forbidden(get(&f, &signer.path(doc_id, art_id, 0)).await).await;
    // A URL signed under another key is refused.
    let stranger = UrlSigner::new(b"another key".to_vec(), 900);
    forbidden(get(&f, &stranger.path(doc_id, art_id, now + 60)).await).await;
    f.app.stop().await;
}

#[tokio::test]
async fn a_short_lifetime_makes_a_listed_url_expire() {
    let f = served("art-ttl", |c| c.artifact_url_ttl_secs = 1).await;
    let doc = accepted_invoice(&f).await;
    let url = artifacts(&f, &doc).await[0]["download_url"]
        .as_str()
        .expect("url")
        .to_owned();
    assert_eq!(get(&f, &url).await.status(), 200);
    tokio::time::sleep(Duration::from_millis(2100)).await;
    forbidden(get(&f, &url).await).await;
    f.app.stop().await;
}

#[tokio::test]
async fn another_tenant_cannot_list_a_documents_artifacts() {
    let f = served("art-owner", |_| {}).await;
    let doc = accepted_invoice(&f).await;
    let (other_tenant, other_key) = f.app.tenant("art-other").await;
    for path in [
        format!("/v1/documents/{doc}/artifacts"),
        format!("/v1/documents/{doc}"),
    ] {
        let (status, body) = send(f.app.as_key(Method::GET, &path, &other_key, &other_tenant)).await;
        assert_eq!(status, 404, "{path}: {body}");
        assert_eq!(body["code"], "not_found");
        // Its own key with the first tenant's id is refused too.
        let (status, _) = send(f.app.as_key(Method::GET, &path, &other_key, &f.r.tenant)).await;
        assert!(matches!(status, 401 | 403), "{path}: {status}");
    }
    // Without credentials: 401.
    let response = f
        .app
        .client
        .get(format!("{}/v1/documents/{doc}/artifacts", f.app.base))
        .send()
        .await
        .expect("request");
    assert_eq!(response.status(), 401);
    f.app.stop().await;
}

// ---------------------------------------------------------------------------------------------
// S3-compatible storage
// ---------------------------------------------------------------------------------------------

/// A moto S3 server on a free port, stopped on drop.
struct Moto {
    child: std::process::Child,
    endpoint: String,
}

impl Drop for Moto {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts `moto_server`, or says why not. In CI (`CI` set) its absence fails the test.
async fn moto() -> Option<Moto> {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("free port")
        .port();
    let child = std::process::Command::new("moto_server")
        .args(["-H", "127.0.0.1", "-p", &port.to_string()])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn();
    let child = match child {
        Ok(child) => child,
        Err(e) => {
            assert!(
                std::env::var_os("CI").is_none(),
                "moto_server is required in CI (pip install 'moto[server]'): {e}"
            );
            eprintln!(
                "NOTICE: skipping the S3 artifact store test: moto_server is not installed ({e}); pip install 'moto[server]'"
            );
            return None;
        }
    };
    let moto = Moto {
        child,
        endpoint: format!("http://127.0.0.1:{port}"),
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while reqwest::get(&moto.endpoint).await.is_err() {
        assert!(std::time::Instant::now() < deadline, "moto_server did not start");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    Some(moto)
}

fn s3(endpoint: &str, bucket: &str) -> S3Settings {
    S3Settings {
        bucket: bucket.to_owned(),
        prefix: "kuatia/artifacts".to_owned(),
        endpoint: Some(endpoint.to_owned()),
        region: "us-east-1".to_owned(),
        access_key_id: Some("testing".to_owned()),
        secret_access_key: Some("testing".to_owned()),
        allow_http: true,
    }
}

/// The bucket seen directly, without kuatia's store in between.
fn raw_bucket(endpoint: &str, bucket: &str) -> object_store::aws::AmazonS3 {
    object_store::aws::AmazonS3Builder::new()
        .with_bucket_name(bucket)
        .with_endpoint(endpoint)
        .with_region("us-east-1")
        .with_access_key_id("testing")
        .with_secret_access_key("testing")
        .with_allow_http(true)
        .with_virtual_hosted_style_request(false)
        .build()
        .expect("raw client")
}

async fn raw_get(store: &object_store::aws::AmazonS3, key: &ObjectPath) -> Vec<u8> {
    store
        .get(key)
        .await
        .expect("raw get")
        .bytes()
        .await
        .expect("bytes")
        .to_vec()
}

async fn make_bucket(endpoint: &str, bucket: &str) {
    let response = reqwest::Client::new()
        .put(format!("{endpoint}/{bucket}"))
        .send()
        .await
        .expect("create bucket");
    assert!(response.status().is_success(), "{}", response.status());
}

#[tokio::test]
async fn on_an_s3_compatible_server_artifacts_are_content_addressed_and_never_overwritten() {
    let Some(moto) = moto().await else { return };
    make_bucket(&moto.endpoint, "kuatia-unit").await;
    let store = ObjectArtifacts::s3(&s3(&moto.endpoint, "kuatia-unit")).expect("s3 store");
    let sha = store.put(b"<rDE>uno</rDE>").await.expect("put");
    assert_eq!(sha, sha256_hex(b"<rDE>uno</rDE>"));
    assert_eq!(
        store.get(&sha).await.expect("get").as_deref(),
        Some(&b"<rDE>uno</rDE>"[..])
    );
    assert_eq!(store.put(b"<rDE>uno</rDE>").await.expect("again"), sha);
    assert_eq!(store.get(&"0".repeat(64)).await.expect("absent"), None);
    // Stored under <prefix>/<aa>/<sha>; tampered bytes are refused, and a put of the same hash
    // does not overwrite them.
    let raw = raw_bucket(&moto.endpoint, "kuatia-unit");
    let key = ObjectPath::from(format!("kuatia/artifacts/{}/{sha}", &sha[..2]));
    assert_eq!(raw_get(&raw, &key).await, b"<rDE>uno</rDE>");
    raw.put(&key, PutPayload::from_static(b"tampered"))
        .await
        .expect("tamper");
    assert!(matches!(store.get(&sha).await, Err(ArtifactError::Corrupt(_))));
    store.put(b"<rDE>uno</rDE>").await.expect("no-op");
    assert_eq!(raw_get(&raw, &key).await, b"tampered");
    // Concurrent puts of one new object all succeed.
    let mut set = tokio::task::JoinSet::new();
    for _ in 0..8 {
        let store = store.clone();
        set.spawn(async move { store.put(b"<rDE>dos</rDE>").await });
    }
    while let Some(r) = set.join_next().await {
        r.expect("join").expect("put");
    }
}

#[tokio::test]
async fn the_service_stores_and_serves_artifacts_from_an_s3_bucket() {
    let Some(moto) = moto().await else { return };
    make_bucket(&moto.endpoint, "kuatia-app").await;
    let endpoint = moto.endpoint.clone();
    let f = served("art-s3", move |c| {
        c.artifacts_url = Some("s3://kuatia-app/docs".into());
        c.artifacts_s3_endpoint = Some(endpoint);
        c.artifacts_s3_access_key_id = Some("testing".into());
        c.artifacts_s3_secret_access_key = Some(Secret::new("testing"));
        c.artifacts_s3_allow_http = true;
    })
    .await;
    let doc = accepted_invoice(&f).await;
    let xml = artifacts(&f, &doc)
        .await
        .into_iter()
        .find(|a| a["type"] == "signed_xml")
        .expect("signed xml");
    let sha = xml["sha256"].as_str().expect("sha").to_owned();
    let bytes = get(&f, xml["download_url"].as_str().expect("url"))
        .await
        .bytes()
        .await
        .expect("bytes");
    assert_eq!(sha256_hex(&bytes), sha);
    // In the bucket, not in the data directory.
    let raw = raw_bucket(&moto.endpoint, "kuatia-app");
    let key = ObjectPath::from(format!("docs/{}/{sha}", &sha[..2]));
    assert_eq!(raw_get(&raw, &key).await, bytes.to_vec());
    assert!(
        !f.app
            .db
            .config()
            .data_dir
            .join("artifacts")
            .join(&sha[..2])
            .join(&sha)
            .exists()
    );
    assert!(matches!(
        ArtifactLocation::parse(Some("s3://kuatia-app/docs"), "x".into(), s3("e", "b")),
        Ok(ArtifactLocation::S3(_))
    ));
    f.app.stop().await;
}
