//! Test support for kuatia's black-box and conformance tests.
//!
//! [`TestDb`] gives every test a fresh database: a SQLite file in a temporary folder by default,
//! or, when `KUATIA_TEST_POSTGRES_URL` names a PostgreSQL server's admin database
//! (`postgres://postgres@127.0.0.1:5432/postgres`), a new database on it, dropped afterwards.
//! [`TestApp`] starts the real service (the composition root, port 0) on such a database and
//! talks HTTP to it; [`Ready`] is a tenant on it ready to issue, with what tests do with its
//! documents. The tests themselves live in `tests/it/`.

pub mod browser;
pub mod http;
pub mod ledger;
pub mod ready;
pub mod simulated;

pub use http::{b64, error_code, hours_ago, id, in_paraguay, post_together, send, send_with_headers};
pub use ready::{CSC, PASSWORD, RUC, Ready, add_company_at, sifen_channel_body, upload_certificate};
pub use simulated::Simulated;

use kuatia_application::upcast::UpcasterChain;
use kuatia_infrastructure::config::{Config, LogFormat, Secret};
use kuatia_infrastructure::store::{Database, DatabaseOptions};
use sqlx::Connection;
use std::path::PathBuf;
use std::sync::Arc;

/// Environment variable naming the PostgreSQL admin URL; unset or empty means SQLite.
pub const POSTGRES_ENV: &str = "KUATIA_TEST_POSTGRES_URL";

/// The master key of test services (base64 of 32 bytes).
pub const TEST_MASTER_KEY: &str = "a3VhdGlhLXRlc3QtbWFzdGVyLWtleS0zMi1ieXRlcyE=";

/// A fresh, empty database for one test.
pub struct TestDb {
    /// URL the service connects with.
    pub url: String,
    postgres: Option<(String, String)>,
    dir: Option<PathBuf>,
}

fn with_database(admin_url: &str, name: &str) -> String {
    let (base, query) = admin_url
        .split_once('?')
        .map_or((admin_url, None), |(b, q)| (b, Some(q)));
    let scheme_end = base.find("://").map_or(0, |i| i + 3);
    let path_start = base[scheme_end..]
        .find('/')
        .map_or(base.len(), |i| scheme_end + i);
    let mut url = format!("{}/{}", &base[..path_start], name);
    if let Some(q) = query {
        url.push('?');
        url.push_str(q);
    }
    url
}

impl TestDb {
    /// Creates the database: on PostgreSQL when `KUATIA_TEST_POSTGRES_URL` is set, else SQLite.
    pub async fn new() -> Self {
        Self::on(&Backend::from_env())
            .await
            .expect("create the test database")
    }

    /// Whether this is PostgreSQL.
    pub fn is_postgres(&self) -> bool {
        self.postgres.is_some()
    }

    /// Opens the store with the service's inline projections and no upcasters.
    pub async fn open(&self) -> Database {
        self.open_with(Arc::new(UpcasterChain::new())).await
    }

    /// Opens the store with the service's inline projections and the given upcasters.
    pub async fn open_with(&self, upcasters: Arc<UpcasterChain>) -> Database {
        self.open_custom(kuatia_projections::registry::inline(), upcasters)
            .await
    }

    /// Opens the store with the given inline projections and upcasters.
    pub async fn open_custom(
        &self,
        inline: Vec<Arc<dyn kuatia_application::projection::Projection>>,
        upcasters: Arc<UpcasterChain>,
    ) -> Database {
        let options = DatabaseOptions {
            max_connections: 32,
            ..DatabaseOptions::new(self.url.clone())
        };
        Database::connect(&options, inline, upcasters)
            .await
            .expect("open the store")
    }

    /// A connection as the database owner (PostgreSQL superuser in CI; for SQLite, the file),
    /// for tests that play an attacker or inspect tables directly.
    pub async fn owner_pg(&self) -> Option<sqlx::PgConnection> {
        let (_, _) = self.postgres.as_ref()?;
        Some(
            sqlx::PgConnection::connect(&self.url)
                .await
                .expect("owner connection"),
        )
    }

    /// A direct SQLite connection to the file.
    pub async fn owner_sqlite(&self) -> Option<sqlx::SqliteConnection> {
        self.dir.as_ref()?;
        Some(
            sqlx::SqliteConnection::connect(&self.url)
                .await
                .expect("sqlite connection"),
        )
    }

    /// A service configuration on this database, listening on port 0.
    pub fn config(&self) -> Config {
        Config {
            database_url: Secret::new(self.url.clone()),
            listen: "127.0.0.1:0".parse().expect("address"),
            data_dir: self.dir.clone().unwrap_or_else(std::env::temp_dir),
            log_format: LogFormat::Json,
            shutdown_grace_secs: 5,
            master_key: Some(Secret::new(TEST_MASTER_KEY)),
            // The lookup service binds its own port; the tests that need it turn it on.
            lookup_enabled: false,
            // Lots are polled as soon as the simulator has processed them (2 s), not after
            // SIFEN's 10 minutes.
            sifen_lot_poll_ms: Some(250),
            ..Config::default()
        }
    }
}

impl Drop for TestDb {
    fn drop(&mut self) {
        if let Some(dir) = self.dir.take() {
            let _ = std::fs::remove_dir_all(dir);
        }
        if let Some((admin, name)) = self.postgres.take() {
            // Drop runs inside the test's runtime, which cannot block on itself: use a thread.
            let _ = std::thread::spawn(move || {
                let Ok(rt) = tokio::runtime::Builder::new_current_thread().enable_all().build() else {
                    return;
                };
                rt.block_on(async move {
                    if let Ok(mut conn) = sqlx::PgConnection::connect(&admin).await {
                        let _ = sqlx::query(sqlx::AssertSqlSafe(format!(
                            "DROP DATABASE IF EXISTS {name} WITH (FORCE)"
                        )))
                        .execute(&mut conn)
                        .await;
                    }
                });
            })
            .join();
        }
    }
}

/// Every row of a table, each column cast to text, in the given order: a backend-neutral
/// snapshot for comparing read models.
pub async fn snapshot(db: &Database, sql: &'static str) -> Vec<Vec<Option<String>>> {
    use sqlx::Row;
    match db {
        Database::Postgres(s) => sqlx::query(sql)
            .fetch_all(s.pool())
            .await
            .expect("snapshot query")
            .iter()
            .map(|r| {
                (0..r.len())
                    .map(|i| r.try_get::<Option<String>, _>(i).expect("text column"))
                    .collect()
            })
            .collect(),
        Database::Sqlite(s) => sqlx::query(sql)
            .fetch_all(s.pool())
            .await
            .expect("snapshot query")
            .iter()
            .map(|r| {
                (0..r.len())
                    .map(|i| r.try_get::<Option<String>, _>(i).expect("text column"))
                    .collect()
            })
            .collect(),
    }
}

/// Runs one statement on the service's own pool (as the application role on PostgreSQL).
pub async fn execute(db: &Database, sql: &'static str) -> Result<u64, sqlx::Error> {
    match db {
        Database::Postgres(s) => sqlx::query(sql)
            .execute(s.pool())
            .await
            .map(|r| r.rows_affected()),
        Database::Sqlite(s) => sqlx::query(sql)
            .execute(s.pool())
            .await
            .map(|r| r.rows_affected()),
    }
}

/// A projection applied event by event: its own `apply` on each event of a batch (the trait's
/// default `apply_all`), every stream read (the default `stream_types`). The reference a
/// projection's batch path and stream filter are held to: rebuild with this, then with the
/// projection itself, and compare the rows ([`table_rows`]).
pub struct EventByEvent<'a>(pub &'a dyn kuatia_application::projection::Projection);

#[async_trait::async_trait]
impl kuatia_application::projection::Projection for EventByEvent<'_> {
    fn name(&self) -> &'static str {
        self.0.name()
    }

    fn kind(&self) -> kuatia_application::event_store::ProjectionKind {
        self.0.kind()
    }

    fn tables(&self) -> &'static [&'static str] {
        self.0.tables()
    }

    async fn apply(
        &self,
        tx: &mut dyn kuatia_application::projection::SqlTx,
        event: &kuatia_application::event_store::RecordedEvent,
    ) -> Result<(), kuatia_application::event_store::StoreError> {
        self.0.apply(tx, event).await
    }
}

/// Every row of a table, each as one line of text, sorted: the table's whole content, to compare
/// two states of it.
pub async fn table_rows(db: &Database, table: &str) -> Vec<String> {
    use sqlx::{AssertSqlSafe, Row, ValueRef};
    match db {
        Database::Postgres(s) => sqlx::query_scalar::<_, String>(AssertSqlSafe(format!(
            "SELECT CAST(row_to_json(t) AS TEXT) FROM {table} AS t ORDER BY 1"
        )))
        .fetch_all(s.pool())
        .await
        .expect("table rows"),
        Database::Sqlite(s) => {
            let rows = sqlx::query(AssertSqlSafe(format!("SELECT * FROM {table}")))
                .fetch_all(s.pool())
                .await
                .expect("table rows");
            let mut lines: Vec<String> = rows
                .iter()
                .map(|row| {
                    (0..row.len())
                        .map(|i| {
                            if row.try_get_raw(i).expect("column").is_null() {
                                "NULL".to_owned()
                            } else if let Ok(text) = row.try_get::<String, _>(i) {
                                format!("{text:?}")
                            } else if let Ok(int) = row.try_get::<i64, _>(i) {
                                int.to_string()
                            } else if let Ok(real) = row.try_get::<f64, _>(i) {
                                real.to_string()
                            } else {
                                format!("{:?}", row.try_get::<Vec<u8>, _>(i).expect("a blob"))
                            }
                        })
                        .collect::<Vec<_>>()
                        .join("|")
                })
                .collect();
            lines.sort();
            lines
        }
    }
}

/// The real service, started on a fresh database.
pub struct TestApp {
    /// `http://127.0.0.1:PORT`.
    pub base: String,
    /// HTTP client.
    pub client: reqwest::Client,
    /// The running service.
    pub service: Option<kuatia_api::compose::Service>,
    /// Its database (dropped after the service).
    pub db: TestDb,
}

impl TestApp {
    /// Starts the service with the default test configuration.
    pub async fn spawn() -> Self {
        Self::spawn_with(|_| {}).await
    }

    /// Starts the service after adjusting its configuration.
    pub async fn spawn_with(adjust: impl FnOnce(&mut Config)) -> Self {
        Self::spawn_on(TestDb::new().await, adjust)
            .await
            .expect("start the service")
    }

    /// The running service.
    pub fn service(&self) -> &kuatia_api::compose::Service {
        self.service.as_ref().expect("running")
    }

    /// `GET path`.
    pub async fn get(&self, path: &str) -> reqwest::Response {
        self.client
            .get(format!("{}{path}", self.base))
            .send()
            .await
            .expect("request")
    }

    /// `GET path` with a bearer token.
    pub async fn get_with_bearer(&self, path: &str, token: &str) -> reqwest::Response {
        self.client
            .get(format!("{}{path}", self.base))
            .bearer_auth(token)
            .send()
            .await
            .expect("request")
    }

    /// A request with an API key and a tenant header.
    pub fn as_key(
        &self,
        method: reqwest::Method,
        path: &str,
        key: &str,
        tenant: &str,
    ) -> reqwest::RequestBuilder {
        self.client
            .request(method, format!("{}{path}", self.base))
            .bearer_auth(key)
            .header("X-Tenant-Id", tenant)
    }

    /// `POST /v1/tenants`; returns (status, body).
    pub async fn create_tenant(&self, slug: &str) -> (u16, serde_json::Value) {
        let response = self
            .client
            .post(format!("{}/v1/tenants", self.base))
            .json(&serde_json::json!({"slug": slug, "name": format!("{slug} S.A.")}))
            .send()
            .await
            .expect("request");
        let status = response.status().as_u16();
        (status, response.json().await.expect("json body"))
    }

    /// Creates a tenant and returns (tenant id, owner key).
    pub async fn tenant(&self, slug: &str) -> (String, String) {
        let (status, body) = self.create_tenant(slug).await;
        assert_eq!(status, 201, "{body}");
        (
            body["id"].as_str().expect("id").to_owned(),
            body["bootstrap_api_key"].as_str().expect("key").to_owned(),
        )
    }

    /// A complete company body with the given RUC (the SET's test emitter by default).
    pub fn company_body(ruc: &str) -> serde_json::Value {
        serde_json::json!({
            "ruc": ruc,
            "legal_name": "DE GENERACION ELECTRONICA S.A.",
            "taxpayer_type": "legal_entity",
            "tax_regime_code": 8,
            "address": "Avda. Mcal. López",
            "house_number": "1234",
            "department_code": 1,
            "department_name": "CAPITAL",
            "city_code": 1,
            "city_name": "ASUNCION (DISTRITO)",
            "phone": "021 000 000",
            "email": "facturas@example.com.py",
            "economic_activities": [{"code": "62010", "description": "Programación informática"}]
        })
    }

    /// Stops the service gracefully.
    pub async fn stop(mut self) {
        if let Some(service) = self.service.take() {
            service.stop().await.expect("clean stop");
        }
    }
}

/// A scratch folder under the system's temporary folder, removed when dropped.
pub struct ScratchDir(pub PathBuf);

impl ScratchDir {
    /// Creates it.
    pub fn new() -> Self {
        let dir = std::env::temp_dir().join(format!("kuatia-scratch-{}", uuid::Uuid::now_v7().simple()));
        std::fs::create_dir_all(&dir).expect("create the scratch folder");
        Self(dir)
    }
}

impl Default for ScratchDir {
    fn default() -> Self {
        Self::new()
    }
}

impl Drop for ScratchDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A legacy PKCS#12 file (RC2-40 for the certificate, 3DES for the key, SHA-1 MAC) of a fresh
/// key and certificate made from `spec`, written by the `openssl` command line (`-legacy`).
pub fn legacy_pfx(spec: &kuatia_infrastructure::selfsigned::SelfSigned, password: &str) -> Vec<u8> {
    let (key, cert) = spec.generate().expect("generate a key and certificate");
    let dir = ScratchDir::new();
    let key_path = dir.0.join("k.pem");
    let cert_path = dir.0.join("c.pem");
    let out = dir.0.join("legacy.pfx");
    std::fs::write(&key_path, key.private_key_to_pem_pkcs8().expect("key PEM")).expect("write the key");
    std::fs::write(&cert_path, cert.to_pem().expect("cert PEM")).expect("write the certificate");
    let status = std::process::Command::new("openssl")
        .args(["pkcs12", "-export", "-legacy", "-inkey"])
        .arg(&key_path)
        .arg("-in")
        .arg(&cert_path)
        .arg("-passout")
        .arg(format!("pass:{password}"))
        .arg("-out")
        .arg(&out)
        .output()
        .expect("run openssl");
    assert!(
        status.status.success(),
        "openssl pkcs12 -export -legacy failed: {}",
        String::from_utf8_lossy(&status.stderr)
    );
    std::fs::read(&out).expect("read the legacy PFX")
}

/// What `openssl pkcs12 -info -noout -legacy` says of a PKCS#12 file (stdout and stderr).
pub fn pkcs12_info(pfx: &[u8], password: &str) -> String {
    let dir = ScratchDir::new();
    let path = dir.0.join("file.pfx");
    std::fs::write(&path, pfx).expect("write the PFX");
    let output = std::process::Command::new("openssl")
        .args(["pkcs12", "-info", "-noout", "-legacy", "-passin"])
        .arg(format!("pass:{password}"))
        .arg("-in")
        .arg(&path)
        .output()
        .expect("run openssl");
    assert!(
        output.status.success(),
        "openssl pkcs12 -info failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

/// A `multipart/form-data` body: `(name, filename, bytes)` per part (a filename makes it a file
/// part). Returns the `Content-Type` header value and the body.
pub fn multipart_form(parts: &[(&str, Option<&str>, &[u8])]) -> (String, Vec<u8>) {
    let boundary = format!("kuatia-boundary-{}", uuid::Uuid::now_v7().simple());
    let mut body = Vec::new();
    for (name, filename, bytes) in parts {
        body.extend_from_slice(format!("--{boundary}\r\n").as_bytes());
        match filename {
            Some(file) => body.extend_from_slice(
                format!(
                    "Content-Disposition: form-data; name=\"{name}\"; filename=\"{file}\"\r\n\
                     Content-Type: application/x-pkcs12\r\n\r\n"
                )
                .as_bytes(),
            ),
            None => body.extend_from_slice(
                format!("Content-Disposition: form-data; name=\"{name}\"\r\n\r\n").as_bytes(),
            ),
        }
        body.extend_from_slice(bytes);
        body.extend_from_slice(b"\r\n");
    }
    body.extend_from_slice(format!("--{boundary}--\r\n").as_bytes());
    (format!("multipart/form-data; boundary={boundary}"), body)
}

/// The database a [`TestDb`] is made on, chosen by the caller rather than read from
/// `KUATIA_TEST_POSTGRES_URL`: a benchmark runs both backends in one process, and setting an
/// environment variable is `unsafe` in edition 2024 (which the workspace forbids).
#[derive(Debug, Clone)]
pub enum Backend {
    /// A SQLite file in a temporary folder.
    Sqlite,
    /// A new database on the PostgreSQL server whose admin URL this is.
    Postgres(String),
}

impl Backend {
    /// PostgreSQL when `KUATIA_TEST_POSTGRES_URL` is set (and not empty), else SQLite.
    pub fn from_env() -> Self {
        match std::env::var(POSTGRES_ENV) {
            Ok(admin) if !admin.is_empty() => Self::Postgres(admin),
            _ => Self::Sqlite,
        }
    }

    /// `sqlite` or `postgres`.
    pub fn name(&self) -> &'static str {
        match self {
            Self::Sqlite => "sqlite",
            Self::Postgres(_) => "postgres",
        }
    }
}

impl TestDb {
    /// Creates a fresh database on `backend` (dropped, or its folder removed, with the value).
    pub async fn on(backend: &Backend) -> Result<Self, sqlx::Error> {
        match backend {
            Backend::Postgres(admin) => {
                let name = format!("kuatia_test_{}", uuid::Uuid::now_v7().simple());
                let mut conn = sqlx::PgConnection::connect(admin).await?;
                sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}")))
                    .execute(&mut conn)
                    .await?;
                let _ = conn.close().await;
                Ok(Self {
                    url: with_database(admin, &name),
                    postgres: Some((admin.clone(), name)),
                    dir: None,
                })
            }
            Backend::Sqlite => {
                let dir = std::env::temp_dir().join(format!("kuatia-test-{}", uuid::Uuid::now_v7().simple()));
                std::fs::create_dir_all(&dir).map_err(sqlx::Error::Io)?;
                Ok(Self {
                    url: format!("sqlite://{}/kuatia.db", dir.display()),
                    postgres: None,
                    dir: Some(dir),
                })
            }
        }
    }
}

impl TestApp {
    /// Starts the service on `db` after adjusting its configuration.
    pub async fn spawn_on(db: TestDb, adjust: impl FnOnce(&mut Config)) -> anyhow::Result<Self> {
        let mut config = db.config();
        // Tests poll statuses hard; the tenant's ceiling is tested where it is set.
        config.rate_limit_per_tenant = 10_000_000;
        // Receivers, simulators and reporting doubles listen on loopback; the destination
        // policy's own tests set their allow-list.
        config.private_destinations = Some("127.0.0.0/8,::1".into());
        adjust(&mut config);
        let service = kuatia_api::compose::start(config).await?;
        Ok(Self {
            base: format!("http://{}", service.addr),
            client: reqwest::Client::builder()
                .redirect(reqwest::redirect::Policy::limited(3))
                .build()?,
            service: Some(service),
            db,
        })
    }

    /// Stops the service and starts it again on the same database, as [`TestApp::spawn_on`].
    pub async fn restart(self, adjust: impl FnOnce(&mut Config)) -> anyhow::Result<Self> {
        let Self { service, db, .. } = self;
        service.expect("running").stop().await.expect("clean stop");
        Self::spawn_on(db, adjust).await
    }

    /// A second instance of the service on the same database, started from the database's
    /// plain configuration ([`TestDb::config`], without the test defaults) after `adjust`.
    pub async fn second_instance(&self, adjust: impl FnOnce(&mut Config)) -> kuatia_api::compose::Service {
        let mut config = self.db.config();
        adjust(&mut config);
        kuatia_api::compose::start(config).await.expect("second instance")
    }
}

/// A file or folder of the SIFEN reference material (`xsd/v150`, `vectors/generated/…`):
/// `../shared/sifen/<path>` beside the repository when it is there, else the vendored copy in
/// `vendor/sifen/<path>`.
pub fn sifen_reference(path: &str) -> std::path::PathBuf {
    let repo = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let shared = repo.join("../shared/sifen").join(path);
    if shared.exists() {
        shared
    } else {
        repo.join("vendor/sifen").join(path)
    }
}

/// The SIFEN v150 XSD folder: `SIFEN_XSD_DIR` when set, else [`sifen_reference`]`("xsd/v150")`.
pub fn sifen_xsd_dir() -> std::path::PathBuf {
    std::env::var_os("SIFEN_XSD_DIR").map_or_else(|| sifen_reference("xsd/v150"), std::path::PathBuf::from)
}

/// Hand-built PKCS#12 files that ask for more key-derivation work than an upload may cost
/// (RFC 7292 structures written in DER here, independently of the parser that reads them).
pub mod hostile_pfx {
    fn tlv(tag: u8, content: &[u8]) -> Vec<u8> {
        let mut out = vec![tag];
        let len = content.len();
        if len < 0x80 {
            out.push(len as u8);
        } else {
            let bytes: Vec<u8> = len.to_be_bytes().into_iter().skip_while(|b| *b == 0).collect();
            out.push(0x80 | bytes.len() as u8);
            out.extend(bytes);
        }
        out.extend_from_slice(content);
        out
    }

    fn seq(parts: &[Vec<u8>]) -> Vec<u8> {
        tlv(0x30, &parts.concat())
    }

    fn int(n: u64) -> Vec<u8> {
        let mut bytes: Vec<u8> = n.to_be_bytes().into_iter().skip_while(|b| *b == 0).collect();
        if bytes.first().is_none_or(|b| b & 0x80 != 0) {
            bytes.insert(0, 0);
        }
        tlv(0x02, &bytes)
    }

    fn oid(dotted: &str) -> Vec<u8> {
        let arcs: Vec<u64> = dotted.split('.').map(|a| a.parse().expect("arc")).collect();
        let mut body = Vec::new();
        for arc in std::iter::once(arcs[0] * 40 + arcs[1]).chain(arcs[2..].iter().copied()) {
            let mut chunk = vec![(arc & 0x7f) as u8];
            let mut rest = arc >> 7;
            while rest > 0 {
                chunk.insert(0, 0x80 | (rest & 0x7f) as u8);
                rest >>= 7;
            }
            body.extend(chunk);
        }
        tlv(0x06, &body)
    }

    fn octets(bytes: &[u8]) -> Vec<u8> {
        tlv(0x04, bytes)
    }

    const NULL: [u8; 2] = [0x05, 0x00];

    fn pbkdf2(iterations: u64) -> Vec<u8> {
        seq(&[
            oid("1.2.840.113549.1.5.12"),
            seq(&[
                octets(&[7; 8]),
                int(iterations),
                seq(&[oid("1.2.840.113549.2.9"), NULL.to_vec()]),
            ]),
        ])
    }

    fn scrypt(n: u64, r: u64, p: u64) -> Vec<u8> {
        seq(&[
            oid("1.3.6.1.4.1.11591.4.11"),
            seq(&[octets(&[7; 8]), int(n), int(r), int(p), int(32)]),
        ])
    }

    fn pbes2(kdf: Vec<u8>) -> Vec<u8> {
        seq(&[
            oid("1.2.840.113549.1.5.13"),
            seq(&[kdf, seq(&[oid("2.16.840.1.101.3.4.1.42"), octets(&[1; 16])])]),
        ])
    }

    /// An encrypted safe (ContentInfo of EncryptedData) with `algorithm` and 32 bytes of
    /// ciphertext that decrypt to nothing useful.
    fn encrypted_safe(algorithm: Vec<u8>) -> Vec<u8> {
        seq(&[
            oid("1.2.840.113549.1.7.6"),
            tlv(
                0xa0,
                &seq(&[
                    int(0),
                    seq(&[oid("1.2.840.113549.1.7.1"), algorithm, tlv(0x80, &[9; 32])]),
                ]),
            ),
        ])
    }

    fn pfx(safes: &[Vec<u8>], mac_iterations: Option<u64>) -> Vec<u8> {
        let auth_safe = seq(safes);
        let mut parts = vec![
            int(3),
            seq(&[oid("1.2.840.113549.1.7.1"), tlv(0xa0, &octets(&auth_safe))]),
        ];
        if let Some(iterations) = mac_iterations {
            parts.push(seq(&[
                seq(&[
                    seq(&[oid("2.16.840.1.101.3.4.2.1"), NULL.to_vec()]),
                    octets(&[0; 32]),
                ]),
                octets(&[3; 8]),
                int(iterations),
            ]));
        }
        seq(&parts)
    }

    /// `count` encrypted safes of `iterations` PBKDF2 iterations each.
    pub fn many_safes(count: usize, iterations: u64) -> Vec<u8> {
        pfx(&vec![encrypted_safe(pbes2(pbkdf2(iterations))); count], None)
    }

    /// One encrypted safe whose scrypt needs `128 × n × r` bytes.
    pub fn scrypt_safe(n: u64, r: u64, p: u64) -> Vec<u8> {
        pfx(&[encrypted_safe(pbes2(scrypt(n, r, p)))], None)
    }

    /// No safe, and a MAC of `iterations`.
    pub fn mac(iterations: u64) -> Vec<u8> {
        pfx(&[], Some(iterations))
    }
}
