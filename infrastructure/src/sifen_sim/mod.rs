//! The SIFEN simulator: SIFEN's six web services on SIFEN's paths, speaking the
//! same SOAP 1.2, applying the checks SIFEN makes that need no registry data, answering with
//! SIFEN's codes, and keeping what it approved so that siConsDE and duplicate detection answer
//! as SIFEN would. Faults can be injected to exercise retries and reconciliation.
//!
//! Start reading at [`Simulator`]; [`serve`] runs one on a listener, [`start`] spawns one for
//! tests ([`start_tls`] over HTTPS). The checks are in `checks.rs` (schema, CDC, signature, QR,
//! dates) and, for every other rule of the Manual's §12.4, in the crate `kuatia-sifen-rules`
//! (written from the Manual alone; `state.rs` gives it what SIFEN holds: the DEs approved here,
//! the taxpayers and timbrados configured), the schema validation in `xsd.rs`, the memory and the rules of lots and events in `state.rs`, the answers' XML in
//! `respond.rs`, the fault syntax in `faults.rs`, HTTPS and client certificates in `tls.rs`.
//!
//! Transport: plain HTTP by default; HTTPS (TLS 1.2, like SIFEN) with a [`SimTls`]: a server
//! certificate (`--tls-cert`/`--tls-key`, or [`ServerCertificate::self_signed`] in tests) and
//! client certificates asked for and accepted whatever they are ([`ClientAuth::Optional`]),
//! required but self-signed welcome (`--require-client-cert`, [`ClientAuth::Required`]), or
//! required and verified against a CA (`--client-ca`, [`ClientAuth::RequiredFromCa`]). A
//! refused certificate ends the handshake (counted in `handshakes_refused`). When certificates
//! are required, one without a RUC (serialNumber `RUC80069563-1`, read like the signer's) is
//! answered with 0007 (MT §12.2.1, AA07). The RUC of the client certificate is recorded with
//! each approval (`transmitters` in the stats); one that is not the issuer's is counted
//! (`foreign_transmissions`) but not refused, since SIFEN has no code for it.
//!
//! Schema: with [`SimConfig::xsd_dir`] (`--xsd-dir`, `SIFEN_XSD_DIR`) each `rDE` is validated
//! against `siRecepDE_v150.xsd` and each event group against `siRecepEvento_v150.xsd` with
//! xmllint before any other rule but the namespace and prefix ones; a failure is 0160
//! "XML malformado: [<xmllint's complaint>]", as SIFEN answers schema failures today.
//!
//! Besides the SOAP endpoints it serves, for tests and operators:
//! - `GET /sim/stats`: [`SimStats`] as JSON (approvals per CDC, counters).
//! - `POST /sim/faults` `{"fault": "drop", "times": 1, "service": "siRecepDE"}`: queue a fault
//!   for the next matching requests (`service` optional); `DELETE /sim/faults` clears the queue.
//! - `POST /sim/reset`: forget everything (documents, lots, counters, queued faults).
//!
//! What it does not do yet: chains and revocation of the signing certificate (self-signed
//! certificates are accepted; the signer's RUC is checked), revocation and the validity dates
//! of TLS client certificates outside `--client-ca` (codes 0002–0006), the 1000 KB message
//! limits (0200, 0270), the registry data SIFEN holds and it does not (a timbrado's authorised
//! establishments, a RUC's activities and authorisations, 0183; docs/sifen-rules.md says which
//! rules of §12.4 that leaves out).

mod checks;
mod dsig;
mod faults;
mod respond;
mod state;
mod tls;
mod xsd;

pub use checks::Code;
pub use faults::{FAULT_HEADER, FaultAction, FaultSpec, RandomFault};
pub use state::{Counters, SimStats};
pub use tls::{ClientAuth, ServerCertificate, SimTls, TlsListener, TlsPeer};

use crate::sifen_soap::xml::{self, Element};
use crate::sifen_soap::{Service, codes};
use axum::Extension;
use axum::Router;
use axum::body::Bytes;
use axum::extract::{ConnectInfo, DefaultBodyLimit, State as AxumState};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use chrono::Utc;
use rand::{Rng, SeedableRng};
use serde::{Deserialize, Serialize};
use state::State;
use std::collections::VecDeque;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::str::FromStr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

/// A CSC the simulator accepts for QR hashes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CscEntry {
    /// Only for this RUC (`80069563` or `80069563-1`); `None` for any issuer.
    #[serde(default)]
    pub ruc: Option<String>,
    /// `IdCSC` (`0001`).
    pub id: String,
    /// The 32-character secret.
    pub csc: String,
}

impl FromStr for CscEntry {
    type Err = String;

    /// `RUC:ID:CSC` (the CLI's `--csc`) or `ID:CSC` for any issuer.
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let parts: Vec<&str> = text.trim().split(':').collect();
        let (ruc, id, csc) = match parts.as_slice() {
            [ruc, id, csc] => (Some((*ruc).to_owned()), *id, *csc),
            [id, csc] => (None, *id, *csc),
            _ => return Err(format!("expected RUC:ID:CSC or ID:CSC, not {text:?}")),
        };
        if id.is_empty() || !id.bytes().all(|b| b.is_ascii_digit()) || csc.is_empty() {
            return Err(format!("expected RUC:ID:CSC or ID:CSC, not {text:?}"));
        }
        Ok(Self {
            ruc,
            id: id.to_owned(),
            csc: csc.to_owned(),
        })
    }
}

/// A taxpayer siConsRUC knows (besides the issuers it has seen).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SimTaxpayer {
    /// `80069563` (a `-DV` suffix is ignored).
    pub ruc: String,
    /// `dRazCons`.
    pub name: String,
}

/// A timbrado SIFEN has on file (the rules on the timbrado's dates and numbers read it).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SimTimbrado {
    /// The issuer (`80069563`; a `-DV` suffix is ignored).
    pub ruc: String,
    /// `dNumTim`.
    pub number: String,
    /// `dFeIniT`.
    pub start: chrono::NaiveDate,
    /// The last day it is valid, when it has one.
    #[serde(default)]
    pub end: Option<chrono::NaiveDate>,
}

impl FromStr for SimTimbrado {
    type Err = String;

    /// `RUC:NUMBER:START[:END]` (the CLI's `--timbrado`), dates as `2024-01-31`.
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let bad = || format!("expected RUC:NUMBER:START[:END] (dates as 2024-01-31), not {text:?}");
        let parts: Vec<&str> = text.trim().split(':').collect();
        let date = |d: &str| chrono::NaiveDate::parse_from_str(d, "%Y-%m-%d").map_err(|_| bad());
        let (ruc, number, start, end) = match parts.as_slice() {
            [ruc, number, start] => (*ruc, *number, date(start)?, None),
            [ruc, number, start, end] => (*ruc, *number, date(start)?, Some(date(end)?)),
            _ => return Err(bad()),
        };
        if ruc.is_empty() || number.len() != 8 || !number.bytes().all(|b| b.is_ascii_digit()) {
            return Err(bad());
        }
        Ok(Self {
            ruc: ruc.to_owned(),
            number: number.to_owned(),
            start,
            end,
        })
    }
}

/// The generic test CSCs SIFEN's test environment accepts.
pub fn generic_test_cscs() -> Vec<CscEntry> {
    vec![
        CscEntry {
            ruc: None,
            id: "0001".into(),
            csc: "ABCD0000000000000000000000000000".into(),
        },
        CscEntry {
            ruc: None,
            id: "0002".into(),
            csc: "EFGH0000000000000000000000000000".into(),
        },
    ]
}

/// How the simulator behaves. Every field has a default (`SimConfig::default()` is what demo
/// mode runs); durations are milliseconds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct SimConfig {
    /// How long a lot stays "en procesamiento" (0361) before its results are there.
    pub lot_processing_ms: u64,
    /// Delay added to every SOAP answer.
    pub latency_ms: u64,
    /// Probability (0–1) that a request is processed and its answer withheld (`drop`).
    pub drop_rate: f64,
    /// Probability (0–1) of an HTML HTTP 500 instead of processing (`http500`).
    pub error_rate: f64,
    /// Probability (0–1) of SIFEN's 0161 "server unavailable" instead of processing.
    pub unavailable_rate: f64,
    /// How long a withheld answer keeps the connection open before it is closed with a 504
    /// (clients time out well before).
    pub hang_ms: u64,
    /// Seed of the random faults, for reproducible runs.
    pub seed: Option<u64>,
    /// CSCs accepted for QR hashes; the generic test ones by default.
    pub cscs: Vec<CscEntry>,
    /// Taxpayers siConsRUC answers for, besides the issuers seen.
    pub taxpayers: Vec<SimTaxpayer>,
    /// The taxpayers listed (with the issuers seen) are every taxpayer there is: the rules on
    /// inexistent RUCs (1250, 1306, 1603, 2303) apply. Off by default: SIFEN's registry is not
    /// the simulator's, and a RUC it does not hold is then not judged.
    pub whole_registry: bool,
    /// Timbrados on file; the rules on a timbrado are applied only to those listed.
    pub timbrados: Vec<SimTimbrado>,
    /// Apply the rules of MT §12.4 (`kuatia-sifen-rules`) to every DE; off only for tests of
    /// the transport that send hand-made minimal DEs.
    pub check_rules: bool,
    /// Refuse DEs and events without a Signature. Off by default so that unsigned DEs from
    /// early development pass; SIFEN itself requires it.
    pub require_signature: bool,
    /// Verify the signatures' cryptography (digest and RSA) when a Signature is present.
    pub verify_signature: bool,
    /// Check `dCarQR` (data and hash) when present.
    pub check_qr: bool,
    /// Check the signing and emission dates against the clock (1004, 1005, 1150, 1151).
    pub check_dates: bool,
    /// Whether siRecepDE (sync) is enabled; when not, DEs are refused with 1264.
    pub sync_enabled: bool,
    /// Keep the state in this JSON file (read at start, rewritten after each change).
    pub state_file: Option<PathBuf>,
    /// Validate each `rDE` and event group against SIFEN's v150 schemas in this folder
    /// (`siRecepDE_v150.xsd`, `siRecepEvento_v150.xsd`) with xmllint; off when `None`.
    pub xsd_dir: Option<PathBuf>,
    /// Faults drawn at random per operation, written `OPERATION:FAULT:RATE`
    /// (`siConsDE:0161:0.05`, `*:0162:0.01`; [`RandomFault`]), before the rates above.
    pub faults: Vec<String>,
}

impl Default for SimConfig {
    fn default() -> Self {
        Self {
            lot_processing_ms: 2_000,
            latency_ms: 0,
            drop_rate: 0.0,
            error_rate: 0.0,
            unavailable_rate: 0.0,
            hang_ms: 300_000,
            seed: None,
            cscs: generic_test_cscs(),
            taxpayers: Vec::new(),
            whole_registry: false,
            timbrados: Vec::new(),
            check_rules: true,
            require_signature: false,
            verify_signature: true,
            check_qr: true,
            check_dates: true,
            sync_enabled: true,
            state_file: None,
            xsd_dir: None,
            faults: Vec::new(),
        }
    }
}

/// What can stop the simulator from starting.
#[derive(Debug, thiserror::Error)]
pub enum SimError {
    /// The state file cannot be read or is not the simulator's.
    #[error("the simulator state file {path}: {reason}")]
    StateFile {
        /// The file.
        path: String,
        /// Why.
        reason: String,
    },
    /// A rate outside 0–1.
    #[error("invalid simulator configuration: {0}")]
    Config(String),
    /// Binding or serving failed.
    #[error("the simulator's listener: {0}")]
    Io(#[from] std::io::Error),
    /// The TLS configuration (certificates, keys) is unusable.
    #[error("the simulator's TLS: {0}")]
    Tls(String),
}

struct Queued {
    spec: FaultSpec,
    remaining: u32,
    service: Option<Service>,
}

struct Inner {
    config: SimConfig,
    /// `config.faults`, read.
    random: Vec<(Option<Service>, FaultSpec, f64)>,
    state: Mutex<State>,
    queue: Mutex<VecDeque<Queued>>,
    rng: Mutex<rand::rngs::StdRng>,
    closing: tokio::sync::watch::Sender<bool>,
}

/// A simulator: its configuration and memory. Cheap to clone (shared).
#[derive(Clone)]
pub struct Simulator {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Simulator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Simulator")
            .field("config", &self.inner.config)
            .finish_non_exhaustive()
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic while holding the lock cannot leave the state half-written in a way that matters
    // more than stopping the simulator would.
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn soap_response(status: StatusCode, xml: String) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "application/soap+xml; charset=utf-8")],
        xml,
    )
        .into_response()
}

fn html_response(status: StatusCode, title: &str) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "text/html; charset=utf-8")],
        format!("<html><head><title>{title}</title></head><body><h1>{title}</h1></body></html>"),
    )
        .into_response()
}

/// An answer in the shape of `service` carrying one code (0160, 0161, 1264, 0301 …).
fn coded_answer(service: Service, code: &Code) -> String {
    let now = Utc::now();
    match service {
        Service::RecepDe => respond::recep_de(
            now,
            &respond::Outcome {
                cdc: String::new(),
                status: if code.code == codes::DE_APPROVED {
                    "Aprobado"
                } else {
                    "Rechazado"
                }
                .into(),
                protocol: None,
                digest_value: None,
                results: vec![code.clone()],
            },
        ),
        Service::RecepLoteDe => respond::recep_lote(now, code, None, 0),
        Service::ResultLoteDe => respond::result_lote(now, code, &[]),
        Service::ConsDe => respond::cons_de(now, code, None),
        Service::ConsRuc => respond::cons_ruc(code, None),
        Service::RecepEvento => respond::recep_evento(
            now,
            &[respond::EventAnswer {
                id: "0".into(),
                status: if code.code == codes::EVENT_REGISTERED {
                    "Aprobado"
                } else {
                    "Rechazado"
                }
                .into(),
                protocol: None,
                results: vec![code.clone()],
            }],
        ),
    }
}

/// The CDCs a siRecepDE or siRecepLoteDE request carries (none for another operation or a body
/// that cannot be read).
fn carried_cdcs(service: Service, body: &[u8]) -> Vec<String> {
    let Some(root) = std::str::from_utf8(body).ok().and_then(|t| xml::parse(t).ok()) else {
        return Vec::new();
    };
    let payload = root.child("Body").and_then(|b| b.children.first());
    match service {
        Service::RecepDe => payload
            .and_then(|p| p.child("xDE"))
            .and_then(|x| x.children.first())
            .and_then(|rde| checks::peek(rde).0)
            .into_iter()
            .collect(),
        Service::RecepLoteDe => payload
            .and_then(|p| p.child_text("xDE"))
            .map(state::lot_cdcs)
            .unwrap_or_default(),
        _ => Vec::new(),
    }
}

fn malformed(detail: &str) -> Code {
    Code::new(codes::MALFORMED, format!("XML malformado: [{detail}]"))
}

impl Simulator {
    /// A simulator; reads the state file when there is one.
    pub fn new(config: SimConfig) -> Result<Self, SimError> {
        for (name, rate) in [
            ("drop_rate", config.drop_rate),
            ("error_rate", config.error_rate),
            ("unavailable_rate", config.unavailable_rate),
        ] {
            if !(0.0..=1.0).contains(&rate) {
                return Err(SimError::Config(format!(
                    "{name} must be between 0 and 1, not {rate}"
                )));
            }
        }
        if let Some(dir) = &config.xsd_dir {
            xsd::check_setup(dir)?;
        }
        let mut random = Vec::new();
        for text in &config.faults {
            let fault: RandomFault = text.parse().map_err(SimError::Config)?;
            let service = fault.service.as_deref().and_then(|name| {
                Service::ALL
                    .into_iter()
                    .find(|s| s.name().eq_ignore_ascii_case(name))
            });
            random.push((service, fault.spec, fault.rate));
        }
        let state = match &config.state_file {
            Some(path) => match std::fs::read(path) {
                Ok(bytes) => serde_json::from_slice(&bytes).map_err(|e| SimError::StateFile {
                    path: path.display().to_string(),
                    reason: e.to_string(),
                })?,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => State::default(),
                Err(e) => {
                    return Err(SimError::StateFile {
                        path: path.display().to_string(),
                        reason: e.to_string(),
                    });
                }
            },
            None => State::default(),
        };
        let seed = config.seed.unwrap_or_else(rand::random);
        Ok(Self {
            inner: Arc::new(Inner {
                state: Mutex::new(state),
                queue: Mutex::new(VecDeque::new()),
                rng: Mutex::new(rand::rngs::StdRng::seed_from_u64(seed)),
                closing: tokio::sync::watch::Sender::new(false),
                random,
                config,
            }),
        })
    }

    /// The configuration.
    pub fn config(&self) -> &SimConfig {
        &self.inner.config
    }

    /// Approvals per CDC and counters.
    pub fn stats(&self) -> SimStats {
        lock(&self.inner.state).stats()
    }

    /// Forgets every document, lot, counter and queued fault.
    pub fn reset(&self) {
        let mut state = lock(&self.inner.state);
        *state = State::default();
        self.persist(&state);
        lock(&self.inner.queue).clear();
    }

    /// Queues a fault for the next `times` requests to `service` (any service when `None`).
    pub fn inject(&self, spec: FaultSpec, times: u32, service: Option<Service>) {
        if times > 0 && !spec.is_none() {
            lock(&self.inner.queue).push_back(Queued {
                spec,
                remaining: times,
                service,
            });
        }
    }

    /// Empties the fault queue.
    pub fn clear_faults(&self) {
        lock(&self.inner.queue).clear();
    }

    /// Ends every withheld answer now (they close with a 504); used at shutdown.
    pub fn close(&self) {
        self.inner.closing.send_replace(true);
    }

    /// The HTTP routes: the six SOAP services on SIFEN's paths and `/sim/*`.
    pub fn router(&self) -> Router {
        let mut router = Router::new();
        for service in Service::ALL {
            router = router.route(
                service.path(),
                post(
                    move |AxumState(sim): AxumState<Simulator>,
                          peer: Option<Extension<ConnectInfo<TlsPeer>>>,
                          headers: HeaderMap,
                          body: Bytes| async move {
                        let peer = peer.map(|Extension(ConnectInfo(peer))| peer);
                        sim.soap(service, &headers, body, peer.as_ref()).await
                    },
                ),
            );
        }
        router
            .route(
                "/",
                get(|| async {
                    "kuatia SIFEN simulator: POST SOAP 1.2 to SIFEN's /de/ws/… paths; POST /autoimpresor (reports); GET /sim/stats\n"
                }),
            )
            // Stands in for an autoimpresor reporting endpoint (demo mode's channel reports
            // here): any JSON object is taken, counted and answered 200.
            .route(
                "/autoimpresor",
                post(
                    |AxumState(sim): AxumState<Simulator>, body: Bytes| async move {
                        if serde_json::from_slice::<serde_json::Map<String, serde_json::Value>>(&body).is_err() {
                            return (StatusCode::BAD_REQUEST, "a report is a JSON object\n");
                        }
                        let mut state = lock(&sim.inner.state);
                        state.counters.autoimpresor_reports += 1;
                        sim.persist(&state);
                        (StatusCode::OK, "{\"received\":true}\n")
                    },
                ),
            )
            .route(
                "/sim/stats",
                get(|AxumState(sim): AxumState<Simulator>| async move { axum::Json(sim.stats()) }),
            )
            .route(
                "/sim/reset",
                post(|AxumState(sim): AxumState<Simulator>| async move {
                    sim.reset();
                    StatusCode::NO_CONTENT
                }),
            )
            .route(
                "/sim/faults",
                post(queue_fault).delete(|AxumState(sim): AxumState<Simulator>| async move {
                    sim.clear_faults();
                    StatusCode::NO_CONTENT
                }),
            )
            // A lot may be up to 10 000 KB (MT §12.3.2).
            .layer(DefaultBodyLimit::max(12 * 1024 * 1024))
            .with_state(self.clone())
    }

    fn persist(&self, state: &State) {
        let Some(path) = &self.inner.config.state_file else {
            return;
        };
        let write = || -> std::io::Result<()> {
            let tmp = path.with_extension("tmp");
            std::fs::write(&tmp, serde_json::to_vec(state).map_err(std::io::Error::other)?)?;
            std::fs::rename(&tmp, path)
        };
        if let Err(e) = write() {
            tracing::warn!(path = %path.display(), error = %e, "the SIFEN simulator could not save its state");
        }
    }

    fn next_fault(&self, service: Service, header: FaultSpec) -> FaultSpec {
        let queued = {
            let mut queue = lock(&self.inner.queue);
            let found = queue
                .iter_mut()
                .position(|q| q.service.is_none_or(|s| s == service));
            match found {
                Some(i) => {
                    let spec = queue[i].spec;
                    queue[i].remaining -= 1;
                    if queue[i].remaining == 0 {
                        queue.remove(i);
                    }
                    spec
                }
                None => FaultSpec::default(),
            }
        };
        let config = &self.inner.config;
        let random = {
            let mut rng = lock(&self.inner.rng);
            let per_operation = self
                .inner
                .random
                .iter()
                .filter(|(s, _, _)| s.is_none_or(|s| s == service))
                .find(|(_, _, rate)| rng.random::<f64>() < *rate)
                .and_then(|(_, spec, _)| spec.action);
            let roll: f64 = rng.random();
            let action = if per_operation.is_some() {
                per_operation
            } else if roll < config.drop_rate {
                Some(FaultAction::Drop)
            } else if roll < config.drop_rate + config.error_rate {
                Some(FaultAction::Http500)
            } else if roll < config.drop_rate + config.error_rate + config.unavailable_rate {
                Some(FaultAction::Unavailable)
            } else {
                None
            };
            FaultSpec {
                latency: (config.latency_ms > 0).then(|| Duration::from_millis(config.latency_ms)),
                action,
            }
        };
        header.or(queued).or(random)
    }

    async fn withhold(&self) -> Response {
        lock(&self.inner.state).counters.withheld += 1;
        let mut closing = self.inner.closing.subscribe();
        if !*closing.borrow_and_update() {
            tokio::select! {
                () = tokio::time::sleep(Duration::from_millis(self.inner.config.hang_ms)) => {}
                _ = closing.changed() => {}
            }
        }
        html_response(StatusCode::GATEWAY_TIMEOUT, "504 Gateway Timeout")
    }

    async fn soap(
        &self,
        service: Service,
        headers: &HeaderMap,
        body: Bytes,
        peer: Option<&TlsPeer>,
    ) -> Response {
        let header = match headers
            .get(FAULT_HEADER)
            .map(|v| v.to_str().map(str::parse::<FaultSpec>))
        {
            None => FaultSpec::default(),
            Some(Ok(Ok(spec))) => spec,
            Some(_) => {
                return (
                    StatusCode::BAD_REQUEST,
                    format!("unreadable {FAULT_HEADER} header"),
                )
                    .into_response();
            }
        };
        let fault = self.next_fault(service, header);
        // The CDCs it carries are noted before any fault or check (a CDC sent again after its
        // approval counts however it is then answered).
        // Off the async workers: reading a lot unzips it, and noting settles the lots due.
        if matches!(service, Service::RecepDe | Service::RecepLoteDe) {
            let (sim, body) = (self.clone(), body.clone());
            let noted = tokio::task::spawn_blocking(move || {
                let carried = carried_cdcs(service, &body);
                let mut state = lock(&sim.inner.state);
                state.note_sent(&carried, &sim.inner.config, Utc::now());
                sim.persist(&state);
            })
            .await;
            if let Err(e) = noted {
                tracing::error!(error = %e, "the SIFEN simulator failed while noting a request");
            }
        }
        {
            let mut state = lock(&self.inner.state);
            *state
                .counters
                .requests
                .entry(service.name().to_owned())
                .or_default() += 1;
            if let Some(action) = fault.action {
                *state.counters.faults.entry(action.token()).or_default() += 1;
            }
        }
        if let Some(latency) = fault.latency {
            tokio::time::sleep(latency).await;
        }
        match fault.action {
            Some(FaultAction::Http500) => {
                return html_response(StatusCode::INTERNAL_SERVER_ERROR, "500 Internal Server Error");
            }
            Some(FaultAction::SoapFault) => {
                return soap_response(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    respond::fault(false, "Servidor de procesamiento momentáneamente sin respuesta"),
                );
            }
            Some(FaultAction::Unavailable) => {
                let code = Code::new(
                    codes::SERVER_UNAVAILABLE,
                    "Servidor de procesamiento momentáneamente sin respuesta",
                );
                return soap_response(StatusCode::OK, coded_answer(service, &code));
            }
            Some(FaultAction::Timeout) => return self.withhold().await,
            Some(FaultAction::Answer(code)) => {
                let code = format!("{code:04}");
                let message =
                    kuatia_domain::sifen::answers::any_row(&code).map_or("Respuesta simulada", |r| r.sifen);
                return soap_response(StatusCode::OK, coded_answer(service, &Code::new(&code, message)));
            }
            _ => {}
        }
        // The client certificate's RUC (MT §12.2.1): required to be there when client
        // certificates are (AA07), recorded with what it sends.
        let transmitter = peer.and_then(|p| {
            p.certificate
                .as_deref()
                .and_then(|der| checks::certificate_ruc(der).ok().flatten())
        });
        if peer.is_some_and(|p| p.client_auth_required) && transmitter.is_none() {
            let code = Code::new(
                "0007",
                "No existe la extensión del RUC del emisor en el certificado",
            );
            return soap_response(StatusCode::OK, coded_answer(service, &code));
        }
        // Judging a DE runs xmllint and verifies RSA signatures: off the async workers.
        let sim = self.clone();
        let lot_not_queued = fault.action == Some(FaultAction::LotNotQueued);
        let answered = tokio::task::spawn_blocking(move || {
            sim.answer(service, &body, lot_not_queued, transmitter.as_deref())
        })
        .await;
        let (status, xml) = match answered {
            Ok(answer) => answer,
            Err(e) => {
                tracing::error!(error = %e, "the SIFEN simulator failed while answering");
                return html_response(StatusCode::INTERNAL_SERVER_ERROR, "500 Internal Server Error");
            }
        };
        if fault.action == Some(FaultAction::Drop) {
            return self.withhold().await;
        }
        soap_response(status, xml)
    }

    /// Reads a request and answers it (processing and recording what it must). `transmitter`
    /// is the RUC of the TLS client certificate, when there is one.
    fn answer(
        &self,
        service: Service,
        body: &[u8],
        lot_not_queued: bool,
        transmitter: Option<&str>,
    ) -> (StatusCode, String) {
        let now = Utc::now();
        let Ok(text) = std::str::from_utf8(body) else {
            return (
                StatusCode::BAD_REQUEST,
                respond::fault(true, "XML malformado: codificación distinta de UTF-8"),
            );
        };
        let root = match xml::parse(text) {
            Ok(root) if root.local() == "Envelope" => root,
            Ok(_) => {
                return (
                    StatusCode::BAD_REQUEST,
                    respond::fault(true, "XML malformado: se esperaba un Envelope SOAP"),
                );
            }
            Err(e) => {
                return (
                    StatusCode::BAD_REQUEST,
                    respond::fault(true, &format!("XML malformado: {e}")),
                );
            }
        };
        let payload = root.child("Body").and_then(|b| b.children.first());
        let Some(payload) = payload.filter(|p| p.local() == service.request_root()) else {
            let detail = format!("se esperaba {}", service.request_root());
            return (StatusCode::OK, coded_answer(service, &malformed(&detail)));
        };
        let config = &self.inner.config;
        let xml = match service {
            Service::RecepDe => {
                let Some(rde) = payload.child("xDE").and_then(|x| x.children.first()) else {
                    return (StatusCode::OK, coded_answer(service, &malformed("xDE sin rDE")));
                };
                if !config.sync_enabled {
                    let code = Code::new(
                        "1264",
                        "RUC del emisor no está habilitado para utilizar este tipo de servicio",
                    );
                    return (StatusCode::OK, coded_answer(service, &code));
                }
                let mut state = lock(&self.inner.state);
                let outcome = state.process_de_from(&text[rde.outer.clone()], transmitter, config, now);
                self.persist(&state);
                respond::recep_de(now, &outcome)
            }
            Service::RecepLoteDe => {
                if lot_not_queued {
                    lock(&self.inner.state).counters.lots_refused += 1;
                    let code = Code::new(codes::LOT_NOT_QUEUED, "Lote no encolado para procesamiento");
                    return (StatusCode::OK, coded_answer(service, &code));
                }
                let xde = payload.child_text("xDE").unwrap_or_default();
                let mut state = lock(&self.inner.state);
                let (code, lot) = state.receive_lot_from(xde, transmitter, config, now);
                self.persist(&state);
                let lot = lot.map(|n| n.to_string());
                respond::recep_lote(
                    now,
                    &code,
                    lot.as_deref(),
                    config.lot_processing_ms.div_ceil(1000),
                )
            }
            Service::ResultLoteDe => {
                let mut state = lock(&self.inner.state);
                let (code, documents) = state.lot_result(
                    payload.child_text("dProtConsLote"),
                    payload.child_text("dCDC"),
                    config,
                    now,
                );
                self.persist(&state);
                respond::result_lote(now, &code, &documents)
            }
            Service::ConsDe => {
                let cdc = payload.child_text("dCDC").unwrap_or_default();
                let mut state = lock(&self.inner.state);
                let (code, container) = state.query_de(cdc, config, now);
                self.persist(&state);
                respond::cons_de(now, &code, container.as_deref())
            }
            Service::ConsRuc => {
                let ruc = payload.child_text("dRUCCons").unwrap_or_default();
                let (code, taxpayer) = lock(&self.inner.state).query_ruc(ruc, config);
                respond::cons_ruc(&code, taxpayer.as_ref().map(|(r, n)| (r.as_str(), n.as_str())))
            }
            Service::RecepEvento => {
                let group: Option<&Element> = payload.child("dEvReg").and_then(|d| d.child("gGroupGesEve"));
                let Some(group) = group else {
                    return (
                        StatusCode::OK,
                        coded_answer(service, &malformed("falta dEvReg/gGroupGesEve")),
                    );
                };
                if let Some(dir) = &config.xsd_dir
                    && let Err(code) = xsd::validate(dir, xsd::EVENT_SCHEMA, &text[group.outer.clone()])
                {
                    lock(&self.inner.state).counters.events_rejected += 1;
                    return (StatusCode::OK, coded_answer(service, &code));
                }
                let mut state = lock(&self.inner.state);
                let answers = state.receive_events(&root, group, text, config, now);
                self.persist(&state);
                respond::recep_evento(now, &answers)
            }
        };
        (StatusCode::OK, xml)
    }
}

#[derive(Deserialize)]
struct FaultRequest {
    fault: String,
    #[serde(default = "one")]
    times: u32,
    #[serde(default)]
    service: Option<String>,
}

fn one() -> u32 {
    1
}

async fn queue_fault(AxumState(sim): AxumState<Simulator>, body: Bytes) -> Response {
    let request: FaultRequest = match serde_json::from_slice(&body) {
        Ok(r) => r,
        Err(e) => {
            return (
                StatusCode::BAD_REQUEST,
                format!("expected {{\"fault\", \"times\", \"service\"}}: {e}"),
            )
                .into_response();
        }
    };
    let spec = match request.fault.parse::<FaultSpec>() {
        Ok(spec) => spec,
        Err(e) => return (StatusCode::BAD_REQUEST, e).into_response(),
    };
    let service = match request.service {
        None => None,
        Some(name) => match Service::ALL
            .into_iter()
            .find(|s| s.name().eq_ignore_ascii_case(&name))
        {
            Some(s) => Some(s),
            None => return (StatusCode::BAD_REQUEST, format!("unknown service {name:?}")).into_response(),
        },
    };
    sim.inject(spec, request.times, service);
    StatusCode::NO_CONTENT.into_response()
}

/// Serves a simulator on `listener` until `shutdown` completes; withheld answers end at
/// shutdown instead of holding it up.
pub async fn serve_with_shutdown(
    listener: tokio::net::TcpListener,
    simulator: Simulator,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let closer = simulator.clone();
    let shutdown = async move {
        shutdown.await;
        closer.close();
    };
    axum::serve(listener, simulator.router())
        .with_graceful_shutdown(shutdown)
        .await
}

/// [`serve_with_shutdown`] over HTTPS: each connection on `listener` is TLS-terminated with
/// `tls` first, and its client certificate reaches the checks.
pub async fn serve_tls_with_shutdown(
    listener: tokio::net::TcpListener,
    simulator: Simulator,
    tls: SimTls,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let closer = simulator.clone();
    let shutdown = async move {
        shutdown.await;
        closer.close();
    };
    let listener = TlsListener::new(listener, &tls, &simulator)?;
    axum::serve(
        listener,
        simulator
            .router()
            .into_make_service_with_connect_info::<TlsPeer>(),
    )
    .with_graceful_shutdown(shutdown)
    .await
}

/// Serves a simulator with `config` on `listener`, forever.
pub async fn serve(listener: tokio::net::TcpListener, config: SimConfig) -> Result<(), SimError> {
    let simulator = Simulator::new(config)?;
    serve_with_shutdown(listener, simulator, std::future::pending()).await?;
    Ok(())
}

/// A simulator running on a background task (tests, demo mode). Dropping it stops it.
#[derive(Debug)]
pub struct RunningSimulator {
    /// Where it listens.
    pub addr: SocketAddr,
    /// Its handle, for stats and fault injection in-process.
    pub simulator: Simulator,
    task: tokio::task::JoinHandle<()>,
    scheme: &'static str,
}

impl RunningSimulator {
    /// `http://ADDR` (`https://ADDR` from [`start_tls`]), the base URL to give `SifenClient`.
    pub fn base_url(&self) -> String {
        format!("{}://{}", self.scheme, self.addr)
    }
}

impl Drop for RunningSimulator {
    fn drop(&mut self) {
        self.simulator.close();
        self.task.abort();
    }
}

/// Binds `addr` (`127.0.0.1:0` for a free port) and serves a simulator there on a background
/// task.
pub async fn start(addr: &str, config: SimConfig) -> Result<RunningSimulator, SimError> {
    let simulator = Simulator::new(config)?;
    let listener = tokio::net::TcpListener::bind(addr).await?;
    let addr = listener.local_addr()?;
    let router = simulator.router();
    let task = tokio::spawn(async move {
        if let Err(e) = axum::serve(listener, router).await {
            tracing::error!(error = %e, "the SIFEN simulator stopped");
        }
    });
    Ok(RunningSimulator {
        addr,
        simulator,
        task,
        scheme: "http",
    })
}

/// [`start`] over HTTPS with `tls` (e.g. [`ServerCertificate::self_signed`]`(&["127.0.0.1"])`
/// and its [`ServerCertificate::tls`]); [`RunningSimulator::base_url`] is then `https://ADDR`.
pub async fn start_tls(addr: &str, config: SimConfig, tls: SimTls) -> Result<RunningSimulator, SimError> {
    let simulator = Simulator::new(config)?;
    let listener = tokio::net::TcpListener::bind(addr).await?;
    let addr = listener.local_addr()?;
    let listener = TlsListener::new(listener, &tls, &simulator)?;
    let service = simulator
        .router()
        .into_make_service_with_connect_info::<TlsPeer>();
    let task = tokio::spawn(async move {
        if let Err(e) = axum::serve(listener, service).await {
            tracing::error!(error = %e, "the SIFEN simulator stopped");
        }
    });
    Ok(RunningSimulator {
        addr,
        simulator,
        task,
        scheme: "https",
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sifen_soap::messages;

    #[test]
    fn csc_options_read_as_the_cli_writes_them() {
        assert_eq!(
            "80069563-1:0003:XYZ".parse::<CscEntry>().unwrap(),
            CscEntry {
                ruc: Some("80069563-1".into()),
                id: "0003".into(),
                csc: "XYZ".into()
            }
        );
        assert_eq!("0001:ABC".parse::<CscEntry>().unwrap().ruc, None);
        assert!("x".parse::<CscEntry>().is_err());
        assert!("a:b:c:d".parse::<CscEntry>().is_err());
    }

    #[test]
    fn rates_outside_zero_to_one_are_refused() {
        let bad = SimConfig {
            drop_rate: 1.5,
            ..SimConfig::default()
        };
        assert!(matches!(Simulator::new(bad), Err(SimError::Config(_))));
    }

    #[test]
    fn the_configuration_reads_from_json_with_defaults() {
        let c: SimConfig =
            serde_json::from_str(r#"{"drop_rate": 0.1, "cscs": [{"id": "0003", "csc": "X"}]}"#).unwrap();
        assert_eq!(c.drop_rate, 0.1);
        assert_eq!(c.lot_processing_ms, SimConfig::default().lot_processing_ms);
        assert_eq!(c.cscs.len(), 1);
    }

    #[test]
    fn the_state_survives_a_restart_through_the_state_file() {
        let dir = std::env::temp_dir().join(format!("kuatia-sim-{}", uuid::Uuid::now_v7()));
        std::fs::create_dir_all(&dir).unwrap();
        let config = SimConfig {
            state_file: Some(dir.join("state.json")),
            // A minimal DE: the memory is what this test is about, not the rules of §12.4.
            check_rules: false,
            ..SimConfig::default()
        };
        let (cdc, rde) = checks::tests::rde(1, 1, Utc::now());
        let sim = Simulator::new(config.clone()).unwrap();
        let request = messages::recep_de(1, &rde).unwrap();
        let (_, answer) = sim.answer(Service::RecepDe, request.as_bytes(), false, None);
        assert!(answer.contains("0260"), "{answer}");
        drop(sim);
        let again = Simulator::new(config).unwrap();
        assert_eq!(again.stats().approvals.get(&cdc), Some(&1));
        let (_, answer) = again.answer(Service::RecepDe, request.as_bytes(), false, None);
        assert!(answer.contains("1001"), "{answer}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn requests_that_are_not_soap_get_a_fault_and_wrong_payloads_a_0160() {
        let sim = Simulator::new(SimConfig::default()).unwrap();
        let (status, answer) = sim.answer(Service::ConsDe, b"<html/>", false, None);
        assert_eq!(status, StatusCode::BAD_REQUEST);
        assert!(matches!(
            messages::parse_cons_de(400, answer.as_bytes()),
            Err(crate::sifen_soap::SoapError::Fault { .. })
        ));
        let wrong = messages::cons_ruc(1, "80069563").unwrap();
        let (_, answer) = sim.answer(Service::ConsDe, wrong.as_bytes(), false, None);
        assert_eq!(
            messages::parse_cons_de(200, answer.as_bytes()).unwrap().code,
            "0160"
        );
    }
}
