//! Configuration: environment variables, optionally a `kuatia.toml`, with defaults that run the
//! embedded SQLite setup.
//!
//! Precedence: defaults < `kuatia.toml` (path in `KUATIA_CONFIG`, else `./kuatia.toml` when it
//! exists) < environment. Names are those of `docs/configuration.md` (the contract's
//! `DATABASE_URL` and `METRICS_BEARER_TOKEN`, otherwise `KUATIA_*`). Secrets are wrapped in
//! [`Secret`], whose `Debug` and `Display` print `[redacted]`, so that logging the configuration
//! never leaks them.

use crate::telemetry::otlp::ExportSettings;
use figment::Figment;
use figment::providers::{Env, Format, Toml};
use serde::Deserialize;
use std::net::SocketAddr;
use std::path::PathBuf;

/// A value that must never reach a log line.
#[derive(Clone, Deserialize, PartialEq)]
#[serde(transparent)]
pub struct Secret(String);

impl Secret {
    /// Wraps a value.
    pub fn new(value: impl Into<String>) -> Self {
        Self(value.into())
    }

    /// The value, for the one place that needs it.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("[redacted]")
    }
}

impl std::fmt::Display for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("[redacted]")
    }
}

/// Log line format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    /// One JSON object per line (default).
    Json,
    /// Human-readable, for a terminal.
    Pretty,
}

/// Every setting of the service.
#[derive(Clone, Deserialize)]
#[serde(default)]
pub struct Config {
    /// `DATABASE_URL`: `postgres://…` or `sqlite://path`. Default `sqlite://./data/kuatia.db`.
    pub database_url: Secret,
    /// `KUATIA_DATA_DIR`: artifacts and generated keys. Default `./data`.
    pub data_dir: PathBuf,
    /// `KUATIA_LISTEN`: the invoicing API. Default `127.0.0.1:8080`.
    pub listen: SocketAddr,
    // --- Taxpayer lookup service (issue 9; docs/lookup.md) ---
    /// `KUATIA_LOOKUP_ENABLED`: whether `serve` also runs the lookup service. Default true.
    #[serde(deserialize_with = "flag")]
    pub lookup_enabled: bool,
    /// `KUATIA_LOOKUP_LISTEN`: the lookup API. Default `127.0.0.1:8081`.
    pub lookup_listen: SocketAddr,
    /// `KUATIA_LOOKUP_QUOTA_ANONYMOUS`: requests per month per client IP without a key. Default 300.
    pub lookup_quota_anonymous: u64,
    /// `KUATIA_LOOKUP_QUOTA_DEV`: requests per month of a `dev` key. Default 1 000.
    pub lookup_quota_dev: u64,
    /// `KUATIA_LOOKUP_QUOTA_STARTER`: requests per month of a `starter` key. Default 20 000.
    pub lookup_quota_starter: u64,
    /// `KUATIA_LOOKUP_QUOTA_BUSINESS`: requests per month of a `business` key. Default 250 000.
    pub lookup_quota_business: u64,
    /// `KUATIA_LOOKUP_REFRESH_SECS`: how often an instance checks for a newly imported registry.
    /// Default 5.
    pub lookup_refresh_secs: u64,
    /// `KUATIA_LOOKUP_KEY_CACHE_SECS`: how long an instance remembers a lookup key (a revocation
    /// takes effect within it). Default 10.
    pub lookup_key_cache_secs: u64,
    /// `KUATIA_LOOKUP_CACHE_ENTRIES`: recent name-search answers an instance keeps (per half of
    /// its two-part cache; about 250 bytes each); 0 turns the cache off. Default 20 000.
    pub lookup_cache_entries: usize,
    // --- end of the lookup settings ---
    /// `METRICS_BEARER_TOKEN`: enables `/metrics` behind this bearer token; unset answers 404.
    pub metrics_bearer_token: Option<Secret>,
    /// `KUATIA_OTLP_ENDPOINT`: an OpenTelemetry collector's OTLP/HTTP base URL
    /// (`http://127.0.0.1:4318`); finished spans are posted as JSON to `<endpoint>/v1/traces`
    /// (or to the endpoint itself when it ends in `/v1/traces`). kuatia's own name for the
    /// collector; the OpenTelemetry variables below are read too ([`Config::trace_export`]).
    /// Unset or empty: no trace is exported (trace contexts still propagate). Default unset.
    pub otlp_endpoint: Option<String>,
    /// `OTEL_EXPORTER_OTLP_ENDPOINT`: the collector's OTLP/HTTP base URL; traces go to
    /// `<base>/v1/traces`. Default unset.
    pub otel_exporter_otlp_endpoint: Option<String>,
    /// `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`: the traces URL itself, used as it is. Default unset.
    pub otel_exporter_otlp_traces_endpoint: Option<String>,
    /// `OTEL_EXPORTER_OTLP_HEADERS`: `key=value,…` (values percent-encoded) sent with every
    /// export, typically the collector's credentials. Default unset.
    pub otel_exporter_otlp_headers: Option<Secret>,
    /// `OTEL_EXPORTER_OTLP_TRACES_HEADERS`: the same for traces only; a key here replaces the
    /// same key of `OTEL_EXPORTER_OTLP_HEADERS`. Default unset.
    pub otel_exporter_otlp_traces_headers: Option<Secret>,
    /// `OTEL_SERVICE_NAME`: the exported spans' `service.name`. Default `kuatia`.
    #[serde(deserialize_with = "optional_text")]
    pub otel_service_name: Option<String>,
    /// `OTEL_TRACES_SAMPLER`: which traces are exported ([`crate::telemetry::otlp::Sampler`]).
    /// Default `parentbased_always_on`.
    pub otel_traces_sampler: Option<String>,
    /// `OTEL_TRACES_SAMPLER_ARG`: the ratio of the `traceidratio` samplers. Default 1.
    #[serde(deserialize_with = "optional_text")]
    pub otel_traces_sampler_arg: Option<String>,
    /// `KUATIA_MAX_BODY_BYTES`: largest request body. Default 1 MiB.
    pub max_body_bytes: usize,
    /// `KUATIA_DB_ROLE`: PostgreSQL role the service switches to; empty to stay the login user.
    /// Default `kuatia_app` (created by the migrations; it cannot UPDATE or DELETE events).
    pub db_role: String,
    /// `KUATIA_DB_MAX_CONNECTIONS`: pool size. Default 16.
    pub db_max_connections: u32,
    /// `KUATIA_WORKERS`: concurrent job workers in this instance. Default 256: a `sifen.prepare`
    /// job holds its worker while it waits for its numbering turn and while its turn signs,
    /// records and sends, so the workers bound how many documents are in the pipeline at once
    /// (and share a turn and a lot); an idle worker costs nothing (one idle worker per pool
    /// polls), and a waiting one only a task. KuDE renders have their own pool, one per core.
    pub workers: usize,
    /// `KUATIA_SHUTDOWN_GRACE_SECS`: how long in-flight requests and jobs may finish after SIGTERM.
    /// Default 20.
    pub shutdown_grace_secs: u64,
    /// `KUATIA_LOG_FORMAT`: `json` (default) or `pretty`. Levels come from `RUST_LOG`.
    pub log_format: LogFormat,
    /// `KUATIA_PUBLIC_SIGNUP`: whether anyone may `POST /v1/tenants`. Default true.
    #[serde(deserialize_with = "flag")]
    pub public_signup: bool,
    /// `KUATIA_INSECURE_COOKIES`: drop the `Secure` flag of the session cookie (plain-HTTP
    /// development only). Default false.
    #[serde(deserialize_with = "flag")]
    pub insecure_cookies: bool,
    /// `KUATIA_RATE_LIMIT_PER_KEY`: requests per minute per API key (or console user). Default 600.
    pub rate_limit_per_key: u32,
    /// `KUATIA_RATE_LIMIT_PER_IP`: requests per minute per IP on unauthenticated endpoints.
    /// Default 60.
    pub rate_limit_per_ip: u32,
    /// `KUATIA_HEADER_READ_TIMEOUT_SECS`: how long a request's headers may take to arrive (also
    /// on an idle keep-alive connection); then the connection is closed. Default 10.
    pub header_read_timeout_secs: u64,
    /// `KUATIA_BODY_READ_TIMEOUT_SECS`: how long a request's body may take to arrive whole;
    /// then 408. Default 30.
    pub body_read_timeout_secs: u64,
    /// `KUATIA_MAX_CONNECTIONS`: connections each listener serves at once; more wait in the
    /// listen backlog. Default 1024.
    pub max_connections: usize,
    /// `KUATIA_RATE_LIMIT_PER_TENANT`: requests per minute of a whole tenant, all its keys and
    /// users together (minting more keys does not multiply the per-key limit). Default 3000.
    pub rate_limit_per_tenant: u32,
    /// `KUATIA_MASTER_KEY`: base64 of 32 bytes; seals certificate keys, CSCs and channel
    /// credentials (AES-256-GCM). Required outside demo mode; demo mode generates one into
    /// `<data_dir>/master.key`.
    pub master_key: Option<Secret>,
    /// `KUATIA_MASTER_KEY_PREVIOUS`: earlier master keys (base64, comma-separated) that still
    /// open secrets sealed under them, during a rotation (`kuatia secrets rotate` re-seals those
    /// under `KUATIA_MASTER_KEY`). Empty by default.
    pub master_key_previous: Option<Secret>,
    /// `KUATIA_DEMO`: seed a demo tenant at first start. Default: on when `DATABASE_URL` is not
    /// set at all (the embedded default database), off otherwise — also when it is set to the
    /// default's own text.
    #[serde(deserialize_with = "optional_flag")]
    pub demo: Option<bool>,
    /// Whether `DATABASE_URL` (or `database_url` in the file) was given, whatever its text
    /// (read by [`Config::from_figment`]; a configuration built in code gives its URL itself).
    #[serde(skip)]
    pub database_url_given: bool,
    /// `KUATIA_SIFEN_SIM_LISTEN`: where the built-in SIFEN simulator listens in demo mode (the
    /// demo `sifen` channel points there). Default `127.0.0.1:8082`.
    pub sifen_sim_listen: SocketAddr,
    /// `KUATIA_SIFEN_CONNECT_TIMEOUT_MS`: connecting to SIFEN. Default 15 000.
    pub sifen_connect_timeout_ms: u64,
    /// `KUATIA_SIFEN_READ_TIMEOUT_MS`: waiting for SIFEN's answer once sent (past it the outcome
    /// is unknown and the CDC is queried before any resend). Default 45 000.
    pub sifen_read_timeout_ms: u64,
    /// `KUATIA_SIFEN_RETRY_SCALE`: multiplies the SIFEN retry schedule (30 s, 2 min,
    /// …); 1 in production, smaller in tests and simulations. Default 1.
    pub sifen_retry_scale: f64,
    /// `KUATIA_SIFEN_EXTRA_ROOTS_FILE`: a PEM file of root certificates the SIFEN client trusts
    /// besides the system's (a simulator's self-signed certificate). Default unset.
    pub sifen_extra_roots_file: Option<PathBuf>,
    /// `KUATIA_SIFEN_LOT_WINDOW_MS`: the documents of one numbering turn go out as one
    /// siRecepLoteDE lot (up to 50); a turn waits at most this long for the `sifen.prepare` jobs
    /// already running to join it. A turn of one goes at once through siRecepDE. 0: never lots.
    /// Default 200.
    pub sifen_lot_window_ms: u64,
    /// `KUATIA_SIFEN_LOT_POLL_MS`: from sending a lot to its first poll, and between polls. Default 600 000 (SIFEN's guide: at least 10
    /// minutes), 1 000 in demo mode (the built-in simulator processes a lot in 2 s).
    pub sifen_lot_poll_ms: Option<u64>,
    /// `KUATIA_SANDBOX_SIFEN_URL`: where sandbox previews in `sifen_dev` mode are sent (a SIFEN
    /// test environment's base URL, `https://sifen-test.set.gov.py`, or a simulator's). Unset: a
    /// SIFEN simulator started for each preview, which keeps nothing.
    pub sandbox_sifen_url: Option<String>,
    /// `KUATIA_ARTIFACTS_URL`: where artifacts are stored: unset → `<data_dir>/artifacts`; a
    /// directory (or `file:///dir`); `s3://bucket[/prefix]` for S3-compatible storage.
    pub artifacts_url: Option<String>,
    /// `KUATIA_ARTIFACTS_S3_ENDPOINT`: endpoint of an S3-compatible server; unset for AWS.
    pub artifacts_s3_endpoint: Option<String>,
    /// `KUATIA_ARTIFACTS_S3_REGION`: the bucket's region. Default `us-east-1`.
    pub artifacts_s3_region: String,
    /// `KUATIA_ARTIFACTS_S3_ACCESS_KEY_ID`: access key id; unset: the AWS environment's.
    pub artifacts_s3_access_key_id: Option<String>,
    /// `KUATIA_ARTIFACTS_S3_SECRET_ACCESS_KEY`: the secret access key.
    pub artifacts_s3_secret_access_key: Option<Secret>,
    /// `KUATIA_ARTIFACTS_S3_ALLOW_HTTP`: allow a plain `http://` endpoint. Default false.
    #[serde(deserialize_with = "flag")]
    pub artifacts_s3_allow_http: bool,
    /// `KUATIA_ARTIFACT_URL_KEY`: the key that signs artifact download URLs (HMAC-SHA256); unset:
    /// derived from the master key. Every instance behind one address needs the same.
    pub artifact_url_key: Option<Secret>,
    /// `KUATIA_ARTIFACT_URL_TTL_SECS`: how long a download URL is valid. Default 900 (the
    /// contract's 15 minutes).
    pub artifact_url_ttl_secs: u64,
    /// `KUATIA_PUBLIC_LINK_DAYS`: how long a document's public link (`/p/{token}`, the KuDE for
    /// its customer) works. Default 90; 1 to 3650.
    pub public_link_days: u32,
    /// `KUATIA_JOB_RETENTION_DAYS`: succeeded jobs older than this are removed hourly (their
    /// documents' events keep what they did). Default 30; 0 keeps them forever.
    pub job_retention_days: u32,
    // --- Webhooks and delivery to customers and issuers (issue 7; docs/webhooks.md) ---
    /// `KUATIA_DELIVERY_RETRY_SCALE`: multiplies the retry schedule of webhook deliveries and
    /// customer/issuer deliveries (1 min, 5 min, 30 min, 2 h, 6 h, 12 h, 24 h); 1 in production,
    /// smaller in tests. Default 1.
    pub delivery_retry_scale: f64,
    /// `KUATIA_PRIVATE_DESTINATIONS`: comma-separated addresses or CIDR ranges that tenants'
    /// outgoing requests (webhooks, SIFEN endpoints, autoimpresor reports) may reach although
    /// they are private or otherwise special-purpose (a SIFEN simulator on a private network).
    /// Unset: loopback (`127.0.0.0/8,::1`) in demo mode, none otherwise; empty: none.
    pub private_destinations: Option<String>,
    /// `KUATIA_PFX_WORKERS`: PFX uploads opened at once (each on its own thread; key derivation
    /// is CPU-bound). Default 2.
    pub pfx_workers: usize,
    /// `KUATIA_PFX_QUEUE`: PFX uploads that may wait for a worker; beyond, 429 with
    /// `Retry-After`. Default 8.
    pub pfx_queue: usize,
    /// `KUATIA_SMTP_URL`: the mail server for customer and issuer email, as
    /// `smtps://user:pass@host:465` (TLS), `smtp://user:pass@host:587?tls=required` (STARTTLS)
    /// or `smtp://host:25` (no TLS; a local relay or a test server). Unset: email deliveries
    /// fail with a configuration message.
    pub smtp_url: Option<Secret>,
    /// `KUATIA_SMTP_FROM`: the sender address. Default `kuatia <no-reply@localhost>`.
    pub smtp_from: String,
    /// `KUATIA_WHATSAPP_BASE_URL`: the WhatsApp Cloud API. Default `https://graph.facebook.com/v21.0`.
    pub whatsapp_base_url: String,
    /// `KUATIA_WHATSAPP_TOKEN`: its access token. Unset: WhatsApp deliveries fail with a
    /// configuration message.
    pub whatsapp_token: Option<Secret>,
    /// `KUATIA_WHATSAPP_PHONE_NUMBER_ID`: the sending business phone number's id.
    pub whatsapp_phone_number_id: Option<String>,
    /// `KUATIA_TELEGRAM_BASE_URL`: the Telegram Bot API. Default `https://api.telegram.org`.
    pub telegram_base_url: String,
    /// `KUATIA_TELEGRAM_BOT_TOKEN`: the bot's token. Unset: Telegram deliveries fail with a
    /// configuration message.
    pub telegram_bot_token: Option<Secret>,
    /// `KUATIA_PRINTABLE_WAIT_SECS`: how long a customer delivery waits for the KuDE or printable
    /// to be rendered before it sends what exists (and says so in the timeline). Default 300.
    pub printable_wait_secs: u64,
    /// `KUATIA_CERTIFICATE_SCAN_SECS`: how often certificates are checked for the
    /// `certificate.expiring` webhook (30, 7 and 1 days before their end). Default 3600.
    pub certificate_scan_secs: u64,
    // --- end of the delivery settings ---
}

/// The database used when `DATABASE_URL` is not set.
pub const DEFAULT_DATABASE_URL: &str = "sqlite://./data/kuatia.db";

impl Default for Config {
    fn default() -> Self {
        Self {
            database_url: Secret::new(DEFAULT_DATABASE_URL),
            data_dir: PathBuf::from("./data"),
            listen: SocketAddr::from(([127, 0, 0, 1], 8080)),
            lookup_enabled: true,
            lookup_listen: SocketAddr::from(([127, 0, 0, 1], 8081)),
            lookup_quota_anonymous: 300,
            lookup_quota_dev: 1_000,
            lookup_quota_starter: 20_000,
            lookup_quota_business: 250_000,
            lookup_refresh_secs: 5,
            lookup_key_cache_secs: 10,
            lookup_cache_entries: 20_000,
            metrics_bearer_token: None,
            otlp_endpoint: None,
            otel_exporter_otlp_endpoint: None,
            otel_exporter_otlp_traces_endpoint: None,
            otel_exporter_otlp_headers: None,
            otel_exporter_otlp_traces_headers: None,
            otel_service_name: None,
            otel_traces_sampler: None,
            otel_traces_sampler_arg: None,
            max_body_bytes: 1024 * 1024,
            db_role: "kuatia_app".to_owned(),
            db_max_connections: 16,
            workers: 256,
            shutdown_grace_secs: 20,
            log_format: LogFormat::Json,
            public_signup: true,
            insecure_cookies: false,
            rate_limit_per_key: 600,
            rate_limit_per_ip: 60,
            rate_limit_per_tenant: 3_000,
            header_read_timeout_secs: 10,
            body_read_timeout_secs: 30,
            max_connections: 1_024,
            master_key: None,
            master_key_previous: None,
            demo: None,
            database_url_given: false,
            sifen_sim_listen: SocketAddr::from(([127, 0, 0, 1], 8082)),
            sifen_connect_timeout_ms: 15_000,
            sifen_read_timeout_ms: 45_000,
            sifen_retry_scale: 1.0,
            sifen_extra_roots_file: None,
            sifen_lot_window_ms: 200,
            sifen_lot_poll_ms: None,
            sandbox_sifen_url: None,
            artifacts_url: None,
            artifacts_s3_endpoint: None,
            artifacts_s3_region: "us-east-1".to_owned(),
            artifacts_s3_access_key_id: None,
            artifacts_s3_secret_access_key: None,
            artifacts_s3_allow_http: false,
            artifact_url_key: None,
            artifact_url_ttl_secs: 900,
            public_link_days: 90,
            job_retention_days: 30,
            delivery_retry_scale: 1.0,
            private_destinations: None,
            pfx_workers: 2,
            pfx_queue: 8,
            smtp_url: None,
            smtp_from: "kuatia <no-reply@localhost>".into(),
            whatsapp_base_url: "https://graph.facebook.com/v21.0".into(),
            whatsapp_token: None,
            whatsapp_phone_number_id: None,
            telegram_base_url: "https://api.telegram.org".into(),
            telegram_bot_token: None,
            printable_wait_secs: 300,
            certificate_scan_secs: 3600,
        }
    }
}

impl std::fmt::Debug for Config {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Config")
            .field(
                "database_url",
                &crate::store::redact_url(self.database_url.expose()),
            )
            .field("data_dir", &self.data_dir)
            .field("listen", &self.listen)
            .field("lookup_enabled", &self.lookup_enabled)
            .field("lookup_listen", &self.lookup_listen)
            .field("lookup_quota_anonymous", &self.lookup_quota_anonymous)
            .field("lookup_quota_dev", &self.lookup_quota_dev)
            .field("lookup_quota_starter", &self.lookup_quota_starter)
            .field("lookup_quota_business", &self.lookup_quota_business)
            .field("lookup_refresh_secs", &self.lookup_refresh_secs)
            .field("lookup_key_cache_secs", &self.lookup_key_cache_secs)
            .field("lookup_cache_entries", &self.lookup_cache_entries)
            .field("metrics_bearer_token", &self.metrics_bearer_token)
            .field("otlp_endpoint", &self.otlp_endpoint)
            .field("otel_exporter_otlp_endpoint", &self.otel_exporter_otlp_endpoint)
            .field(
                "otel_exporter_otlp_traces_endpoint",
                &self.otel_exporter_otlp_traces_endpoint,
            )
            .field("otel_exporter_otlp_headers", &self.otel_exporter_otlp_headers)
            .field(
                "otel_exporter_otlp_traces_headers",
                &self.otel_exporter_otlp_traces_headers,
            )
            .field("otel_service_name", &self.otel_service_name)
            .field("otel_traces_sampler", &self.otel_traces_sampler)
            .field("otel_traces_sampler_arg", &self.otel_traces_sampler_arg)
            .field("max_body_bytes", &self.max_body_bytes)
            .field("db_role", &self.db_role)
            .field("db_max_connections", &self.db_max_connections)
            .field("workers", &self.workers)
            .field("shutdown_grace_secs", &self.shutdown_grace_secs)
            .field("log_format", &self.log_format)
            .field("public_signup", &self.public_signup)
            .field("insecure_cookies", &self.insecure_cookies)
            .field("rate_limit_per_key", &self.rate_limit_per_key)
            .field("rate_limit_per_ip", &self.rate_limit_per_ip)
            .field("rate_limit_per_tenant", &self.rate_limit_per_tenant)
            .field("header_read_timeout_secs", &self.header_read_timeout_secs)
            .field("body_read_timeout_secs", &self.body_read_timeout_secs)
            .field("max_connections", &self.max_connections)
            .field("master_key", &self.master_key)
            .field("master_key_previous", &self.master_key_previous)
            .field("demo", &self.demo)
            .field("sifen_sim_listen", &self.sifen_sim_listen)
            .field("sifen_connect_timeout_ms", &self.sifen_connect_timeout_ms)
            .field("sifen_read_timeout_ms", &self.sifen_read_timeout_ms)
            .field("sifen_retry_scale", &self.sifen_retry_scale)
            .field("sifen_extra_roots_file", &self.sifen_extra_roots_file)
            .field("sifen_lot_window_ms", &self.sifen_lot_window_ms)
            .field("sifen_lot_poll_ms", &self.sifen_lot_poll_ms)
            .field("sandbox_sifen_url", &self.sandbox_sifen_url)
            .field("artifacts_url", &self.artifacts_url)
            .field("artifacts_s3_endpoint", &self.artifacts_s3_endpoint)
            .field("artifacts_s3_region", &self.artifacts_s3_region)
            .field("artifacts_s3_access_key_id", &self.artifacts_s3_access_key_id)
            .field(
                "artifacts_s3_secret_access_key",
                &self.artifacts_s3_secret_access_key,
            )
            .field("artifacts_s3_allow_http", &self.artifacts_s3_allow_http)
            .field("artifact_url_key", &self.artifact_url_key)
            .field("artifact_url_ttl_secs", &self.artifact_url_ttl_secs)
            .field("public_link_days", &self.public_link_days)
            .field("job_retention_days", &self.job_retention_days)
            .field("delivery_retry_scale", &self.delivery_retry_scale)
            .field("private_destinations", &self.private_destinations)
            .field("pfx_workers", &self.pfx_workers)
            .field("pfx_queue", &self.pfx_queue)
            .field("smtp_url", &self.smtp_url)
            .field("smtp_from", &self.smtp_from)
            .field("whatsapp_base_url", &self.whatsapp_base_url)
            .field("whatsapp_token", &self.whatsapp_token)
            .field("whatsapp_phone_number_id", &self.whatsapp_phone_number_id)
            .field("telegram_base_url", &self.telegram_base_url)
            .field("telegram_bot_token", &self.telegram_bot_token)
            .field("printable_wait_secs", &self.printable_wait_secs)
            .field("certificate_scan_secs", &self.certificate_scan_secs)
            .finish()
    }
}

/// Reads an on/off setting the way operators write it: `true`/`false`, `1`/`0`, `yes`/`no`,
/// `on`/`off` (the environment gives `KUATIA_DEMO=1` as a number).
fn flag<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<bool, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Raw {
        Bool(bool),
        Int(i64),
        Text(String),
    }
    match Raw::deserialize(deserializer)? {
        Raw::Bool(b) => Ok(b),
        Raw::Int(1) => Ok(true),
        Raw::Int(0) => Ok(false),
        Raw::Text(t) => match t.trim().to_ascii_lowercase().as_str() {
            "1" | "true" | "yes" | "on" => Ok(true),
            "0" | "false" | "no" | "off" | "" => Ok(false),
            other => Err(serde::de::Error::custom(format!(
                "expected true/false, 1/0, yes/no or on/off, found {other:?}"
            ))),
        },
        Raw::Int(n) => Err(serde::de::Error::custom(format!("expected 1 or 0, found {n}"))),
    }
}

fn optional_flag<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<Option<bool>, D::Error> {
    flag(deserializer).map(Some)
}

/// Reads a setting that is text even when it looks like a number (the environment gives
/// `OTEL_TRACES_SAMPLER_ARG=0.25` as one).
fn optional_text<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<Option<String>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Raw {
        Text(String),
        Int(i64),
        Float(f64),
    }
    Ok(Some(match Raw::deserialize(deserializer)? {
        Raw::Text(t) => t,
        Raw::Int(n) => n.to_string(),
        Raw::Float(f) => f.to_string(),
    }))
}

impl Config {
    /// Where artifacts are stored (`KUATIA_ARTIFACTS_URL` and the `KUATIA_ARTIFACTS_S3_*`
    /// settings).
    pub fn artifact_location(&self) -> Result<crate::artifacts::ArtifactLocation, ConfigError> {
        let s3 = crate::artifacts::S3Settings {
            bucket: String::new(),
            prefix: String::new(),
            endpoint: self
                .artifacts_s3_endpoint
                .clone()
                .filter(|e| !e.trim().is_empty()),
            region: self.artifacts_s3_region.clone(),
            access_key_id: self.artifacts_s3_access_key_id.clone(),
            secret_access_key: self
                .artifacts_s3_secret_access_key
                .as_ref()
                .map(|s| s.expose().to_owned()),
            allow_http: self.artifacts_s3_allow_http,
        };
        crate::artifacts::ArtifactLocation::parse(
            self.artifacts_url.as_deref(),
            self.data_dir.join("artifacts"),
            s3,
        )
        .map_err(ConfigError)
    }

    /// Whether demo mode is on: `KUATIA_DEMO` if set, else whether the database is the embedded
    /// default because `DATABASE_URL` was not given: naming the default's path
    /// explicitly is a real database, never seeded with a demo tenant.
    pub fn demo_mode(&self) -> bool {
        self.demo
            .unwrap_or(!self.database_url_given && self.database_url.expose() == DEFAULT_DATABASE_URL)
    }

    /// The allow-list of private destinations: the setting, or loopback in demo mode (a trial
    /// on one's own machine, with the simulator and receivers on localhost).
    pub fn private_destinations(&self) -> String {
        match &self.private_destinations {
            Some(list) => list.clone(),
            None if self.demo_mode() => "127.0.0.0/8,::1".to_owned(),
            None => String::new(),
        }
    }
}

/// A configuration that cannot be used.
#[derive(Debug, thiserror::Error)]
#[error("invalid configuration: {0}")]
pub struct ConfigError(String);

/// Environment variables read outside the `KUATIA_` prefix, with the field each sets.
const UNPREFIXED: [(&str, &str); 9] = [
    ("DATABASE_URL", "database_url"),
    ("METRICS_BEARER_TOKEN", "metrics_bearer_token"),
    // OpenTelemetry's own names, which operators already set for every service.
    ("OTEL_EXPORTER_OTLP_ENDPOINT", "otel_exporter_otlp_endpoint"),
    (
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
        "otel_exporter_otlp_traces_endpoint",
    ),
    ("OTEL_EXPORTER_OTLP_HEADERS", "otel_exporter_otlp_headers"),
    (
        "OTEL_EXPORTER_OTLP_TRACES_HEADERS",
        "otel_exporter_otlp_traces_headers",
    ),
    ("OTEL_SERVICE_NAME", "otel_service_name"),
    ("OTEL_TRACES_SAMPLER", "otel_traces_sampler"),
    ("OTEL_TRACES_SAMPLER_ARG", "otel_traces_sampler_arg"),
];

impl Config {
    /// Reads defaults, the TOML file and the process environment.
    pub fn load() -> Result<Self, ConfigError> {
        Self::from_figment(Self::figment(
            std::env::var_os("KUATIA_CONFIG").map(PathBuf::from),
        ))
    }

    /// The layered sources (exposed for tests, which use `figment::Jail`).
    pub fn figment(file: Option<PathBuf>) -> Figment {
        let file = file.unwrap_or_else(|| PathBuf::from("kuatia.toml"));
        Figment::new()
            .merge(Toml::file(file))
            .merge(Env::prefixed("KUATIA_").ignore(&["CONFIG"]))
            .merge(Env::raw().only(&UNPREFIXED.map(|(var, _)| var)).map(|key| {
                let key = key.as_str().to_ascii_uppercase();
                UNPREFIXED
                    .iter()
                    .find(|(var, _)| *var == key)
                    .map_or(key.to_ascii_lowercase(), |(_, field)| (*field).to_owned())
                    .into()
            }))
    }

    /// Extracts and checks a configuration.
    pub fn from_figment(figment: Figment) -> Result<Self, ConfigError> {
        let mut config: Config = figment.extract().map_err(|e| ConfigError(e.to_string()))?;
        config.database_url_given = figment.find_value("database_url").is_ok();
        if config
            .metrics_bearer_token
            .as_ref()
            .is_some_and(|t| t.expose().is_empty())
        {
            config.metrics_bearer_token = None;
        }
        if config.otlp_endpoint.as_ref().is_some_and(|e| e.trim().is_empty()) {
            config.otlp_endpoint = None;
        }
        config.trace_export()?;
        if config.max_body_bytes < 1024 {
            return Err(ConfigError("KUATIA_MAX_BODY_BYTES must be at least 1024".into()));
        }
        if config.db_max_connections < 2 {
            return Err(ConfigError("KUATIA_DB_MAX_CONNECTIONS must be at least 2".into()));
        }
        if config.job_retention_days > 36_500 {
            return Err(ConfigError(
                "KUATIA_JOB_RETENTION_DAYS must be 0 (keep) to 36500 (days a succeeded job is kept)".into(),
            ));
        }
        if !(1..=3650).contains(&config.public_link_days) {
            return Err(ConfigError(
                "KUATIA_PUBLIC_LINK_DAYS must be 1 to 3650 (days a document's public link works)".into(),
            ));
        }
        Ok(config)
    }

    /// Where and how traces are exported, from the OpenTelemetry variables and kuatia's alias;
    /// `None` when no endpoint is set. The traces URL is, the first one set:
    /// `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` as it is, `KUATIA_OTLP_ENDPOINT` (a base URL, or the
    /// traces URL when it ends in `/v1/traces`), `OTEL_EXPORTER_OTLP_ENDPOINT` plus `/v1/traces`.
    /// Headers, sampler and service name are checked even when nothing is exported, so that a
    /// mistake shows at start.
    pub fn trace_export(&self) -> Result<Option<ExportSettings>, ConfigError> {
        use crate::telemetry::otlp;
        let set = |value: &Option<String>| {
            value
                .as_deref()
                .map(str::trim)
                .filter(|v| !v.is_empty())
                .map(str::to_owned)
        };
        let secret = |value: &Option<Secret>| value.as_ref().map(|s| s.expose().to_owned());
        let headers = |name: &str, value: Option<String>| {
            otlp::parse_headers(value.as_deref().unwrap_or_default())
                .map_err(|e| ConfigError(format!("{name}: {e}")))
        };
        let mut all = headers(
            "OTEL_EXPORTER_OTLP_HEADERS",
            secret(&self.otel_exporter_otlp_headers),
        )?;
        for (key, value) in headers(
            "OTEL_EXPORTER_OTLP_TRACES_HEADERS",
            secret(&self.otel_exporter_otlp_traces_headers),
        )? {
            all.retain(|(k, _)| !k.eq_ignore_ascii_case(&key));
            all.push((key, value));
        }
        let sampler = otlp::Sampler::parse(
            self.otel_traces_sampler.as_deref(),
            self.otel_traces_sampler_arg.as_deref(),
        )
        .map_err(|e| ConfigError(e.to_string()))?;
        let service_name = set(&self.otel_service_name).unwrap_or_else(|| "kuatia".to_owned());
        let url = if let Some(url) = set(&self.otel_exporter_otlp_traces_endpoint) {
            otlp::exact_traces_url(&url)
                .map_err(|e| ConfigError(format!("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: {e}")))?
        } else if let Some(endpoint) = set(&self.otlp_endpoint) {
            otlp::traces_url(&endpoint).map_err(|e| ConfigError(format!("KUATIA_OTLP_ENDPOINT: {e}")))?
        } else if let Some(base) = set(&self.otel_exporter_otlp_endpoint) {
            otlp::base_traces_url(&base)
                .map_err(|e| ConfigError(format!("OTEL_EXPORTER_OTLP_ENDPOINT: {e}")))?
        } else {
            return Ok(None);
        };
        Ok(Some(ExportSettings {
            url,
            headers: all,
            service_name,
            sampler,
        }))
    }

    /// Whether the database is the embedded SQLite.
    pub fn is_sqlite(&self) -> bool {
        self.database_url.expose().starts_with("sqlite:")
    }
}

#[cfg(test)]
// figment's Jail API returns its large error type by value; that is its design, not ours.
#[allow(clippy::result_large_err)]
mod tests {
    use super::*;

    #[test]
    fn defaults_run_on_embedded_sqlite() {
        figment::Jail::expect_with(|_jail| {
            let config = Config::from_figment(Config::figment(None)).expect("defaults are valid");
            assert!(config.is_sqlite());
            assert_eq!(config.listen.to_string(), "127.0.0.1:8080");
            assert_eq!(config.max_body_bytes, 1024 * 1024);
            assert!(config.metrics_bearer_token.is_none());
            Ok(())
        });
    }

    #[test]
    fn environment_overrides_the_file_and_secrets_stay_out_of_debug() {
        figment::Jail::expect_with(|jail| {
            jail.create_file("kuatia.toml", "listen = \"0.0.0.0:9000\"\nworkers = 2\n")?;
            jail.set_env("DATABASE_URL", "postgres://app:hunter2@db/kuatia");
            jail.set_env("METRICS_BEARER_TOKEN", "metrics-secret-value");
            jail.set_env("KUATIA_WORKERS", "7");
            jail.set_env(
                "KUATIA_MASTER_KEY",
                "bWFzdGVyLWtleS1zZWNyZXQtdmFsdWUtMzItYnl0ZXM=",
            );
            let config = Config::from_figment(Config::figment(None)).expect("valid");
            assert_eq!(config.listen.to_string(), "0.0.0.0:9000");
            assert_eq!(config.workers, 7);
            assert_eq!(config.database_url.expose(), "postgres://app:hunter2@db/kuatia");
            let debug = format!("{config:?}");
            assert!(!debug.contains("hunter2"), "{debug}");
            assert!(!debug.contains("metrics-secret-value"), "{debug}");
            assert!(!debug.contains("bWFzdGVy"), "{debug}");
            assert!(debug.contains("[redacted]"));
            Ok(())
        });
    }

    #[test]
    fn on_off_settings_accept_the_usual_spellings() {
        for (value, expected) in [
            ("1", true),
            ("0", false),
            ("true", true),
            ("off", false),
            ("YES", true),
        ] {
            figment::Jail::expect_with(|jail| {
                jail.set_env("KUATIA_INSECURE_COOKIES", value);
                jail.set_env("KUATIA_PUBLIC_SIGNUP", if expected { "0" } else { "1" });
                let config = Config::from_figment(Config::figment(None)).expect("valid");
                assert_eq!(config.insecure_cookies, expected, "{value}");
                assert_eq!(config.public_signup, !expected, "{value}");
                Ok(())
            });
        }
        figment::Jail::expect_with(|jail| {
            jail.set_env("KUATIA_INSECURE_COOKIES", "maybe");
            assert!(Config::from_figment(Config::figment(None)).is_err());
            Ok(())
        });
    }

    #[test]
    fn a_public_link_lives_90_days_unless_set_between_1_and_3650() {
        figment::Jail::expect_with(|jail| {
            let days = || Config::from_figment(Config::figment(None)).map(|c| c.public_link_days);
            assert_eq!(days().expect("valid"), 90);
            jail.set_env("KUATIA_PUBLIC_LINK_DAYS", "7");
            assert_eq!(days().expect("valid"), 7);
            for refused in ["0", "3651", "-1", "soon"] {
                jail.set_env("KUATIA_PUBLIC_LINK_DAYS", refused);
                assert!(days().is_err(), "{refused}");
            }
            Ok(())
        });
    }

    #[test]
    fn demo_mode_follows_the_embedded_default_unless_set() {
        figment::Jail::expect_with(|jail| {
            assert!(
                Config::from_figment(Config::figment(None))
                    .expect("valid")
                    .demo_mode()
            );
            jail.set_env("DATABASE_URL", "postgres://postgres@127.0.0.1/kuatia");
            assert!(
                !Config::from_figment(Config::figment(None))
                    .expect("valid")
                    .demo_mode()
            );
            jail.set_env("KUATIA_DEMO", "1");
            assert!(
                Config::from_figment(Config::figment(None))
                    .expect("valid")
                    .demo_mode()
            );
            jail.set_env("DATABASE_URL", "sqlite://./data/kuatia.db");
            jail.set_env("KUATIA_DEMO", "0");
            assert!(
                !Config::from_figment(Config::figment(None))
                    .expect("valid")
                    .demo_mode()
            );
            Ok(())
        });
    }

    /// Issue 26: `DATABASE_URL` set to the default's own text is a real database (the README's
    /// "no demo tenant" first hour), not demo mode; so is `database_url` in the file.
    #[test]
    fn naming_the_default_database_is_not_demo_mode() {
        figment::Jail::expect_with(|jail| {
            jail.set_env("DATABASE_URL", DEFAULT_DATABASE_URL);
            let config = Config::from_figment(Config::figment(None)).expect("valid");
            assert_eq!(config.database_url.expose(), DEFAULT_DATABASE_URL);
            assert!(!config.demo_mode());
            jail.clear_env();
            jail.create_file(
                "kuatia.toml",
                &format!("database_url = \"{DEFAULT_DATABASE_URL}\""),
            )?;
            assert!(
                !Config::from_figment(Config::figment(None))
                    .expect("valid")
                    .demo_mode()
            );
            jail.set_env("KUATIA_DEMO", "1");
            assert!(
                Config::from_figment(Config::figment(None))
                    .expect("valid")
                    .demo_mode()
            );
            Ok(())
        });
    }

    #[test]
    fn trace_export_is_off_unless_an_otlp_endpoint_is_set() {
        figment::Jail::expect_with(|jail| {
            let config = Config::from_figment(Config::figment(None)).expect("valid");
            assert_eq!(config.otlp_endpoint, None);
            jail.set_env("KUATIA_OTLP_ENDPOINT", "");
            let config = Config::from_figment(Config::figment(None)).expect("valid");
            assert_eq!(config.otlp_endpoint, None);
            jail.set_env("KUATIA_OTLP_ENDPOINT", "http://127.0.0.1:4318");
            let config = Config::from_figment(Config::figment(None)).expect("valid");
            assert_eq!(config.otlp_endpoint.as_deref(), Some("http://127.0.0.1:4318"));
            jail.set_env("KUATIA_OTLP_ENDPOINT", "collector:4318");
            let err = Config::from_figment(Config::figment(None)).expect_err("no scheme");
            assert!(err.to_string().contains("KUATIA_OTLP_ENDPOINT"), "{err}");
            Ok(())
        });
    }

    #[test]
    fn the_opentelemetry_variables_set_the_export_and_kuatias_name_stays_an_alias() {
        use crate::telemetry::otlp::{RootSampler, Sampler};
        let export = || {
            Config::from_figment(Config::figment(None))
                .expect("valid")
                .trace_export()
                .expect("valid")
        };
        figment::Jail::expect_with(|jail| {
            assert_eq!(export(), None);
            // The base URL gets the traces path, always (the specification's rule).
            jail.set_env("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318/");
            let settings = export().expect("an endpoint is set");
            assert_eq!(settings.url, "http://collector:4318/v1/traces");
            assert_eq!(settings.service_name, "kuatia");
            assert_eq!(settings.sampler, Sampler::default());
            assert!(settings.headers.is_empty());
            // kuatia's own name wins over the generic one, the traces URL over both.
            jail.set_env("KUATIA_OTLP_ENDPOINT", "http://kuatia-collector:4318");
            assert_eq!(
                export().expect("set").url,
                "http://kuatia-collector:4318/v1/traces"
            );
            jail.set_env(
                "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
                "https://traces.example/otlp/spans",
            );
            assert_eq!(export().expect("set").url, "https://traces.example/otlp/spans");
            jail.set_env(
                "OTEL_EXPORTER_OTLP_HEADERS",
                "Authorization=Basic%20dXNlcjpwYXNz, x-scope=team-a ,,x-tenant=a",
            );
            jail.set_env("OTEL_EXPORTER_OTLP_TRACES_HEADERS", "X-Tenant=b");
            jail.set_env("OTEL_SERVICE_NAME", "kuatia-eu");
            jail.set_env("OTEL_TRACES_SAMPLER", "parentbased_traceidratio");
            jail.set_env("OTEL_TRACES_SAMPLER_ARG", "0.25");
            let config = Config::from_figment(Config::figment(None)).expect("valid");
            let debug = format!("{config:?}");
            assert!(!debug.contains("dXNlcjpwYXNz"), "headers are secret: {debug}");
            let settings = config.trace_export().expect("valid").expect("set");
            assert!(!format!("{settings:?}").contains("dXNlcjpwYXNz"));
            assert_eq!(
                settings.headers,
                vec![
                    ("Authorization".to_owned(), "Basic dXNlcjpwYXNz".to_owned()),
                    ("x-scope".to_owned(), "team-a".to_owned()),
                    ("X-Tenant".to_owned(), "b".to_owned()),
                ]
            );
            assert_eq!(settings.service_name, "kuatia-eu");
            assert_eq!(
                settings.sampler,
                Sampler {
                    root: RootSampler::TraceIdRatio(0.25),
                    parent_based: true
                }
            );
            // Mistakes are refused at start, naming the variable.
            for (var, value) in [
                ("OTEL_TRACES_SAMPLER", "jaeger_remote"),
                ("OTEL_TRACES_SAMPLER_ARG", "1.5"),
                ("OTEL_EXPORTER_OTLP_HEADERS", "Authorization"),
                ("OTEL_EXPORTER_OTLP_HEADERS", "bad key=1"),
                ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "collector:4318"),
            ] {
                let before = std::env::var(var).ok();
                jail.set_env(var, value);
                let err = Config::from_figment(Config::figment(None)).expect_err(value);
                assert!(err.to_string().contains(var), "{var}: {err}");
                jail.set_env(var, before.unwrap_or_default());
            }
            Ok(())
        });
    }

    #[test]
    fn a_value_of_the_wrong_type_is_a_clear_error() {
        figment::Jail::expect_with(|jail| {
            jail.set_env("KUATIA_WORKERS", "many");
            let err = Config::from_figment(Config::figment(None)).expect_err("invalid");
            assert!(err.to_string().to_lowercase().contains("workers"), "{err}");
            Ok(())
        });
    }
}
