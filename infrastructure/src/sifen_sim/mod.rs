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
//! Here: the [`Simulator`], its memory and the faults it draws; beside it `config.rs` (what it is
//! configured with), `routes.rs` (the HTTP routes and the faults they apply), `services.rs`
//! (reading a request and answering it as each service does), `serve.rs` (serving and starting
//! one), `tests.rs`.
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
mod config;
mod dsig;
mod faults;
mod respond;
mod routes;
mod serve;
mod services;
mod state;
#[cfg(test)]
mod tests;
mod tls;
mod xsd;

pub use checks::Code;
pub use config::{CscEntry, SimConfig, SimTaxpayer, SimTimbrado, generic_test_cscs};
pub use faults::{FAULT_HEADER, FaultAction, FaultSpec, RandomFault};
pub use serve::{RunningSimulator, serve, serve_tls_with_shutdown, serve_with_shutdown, start, start_tls};
pub use state::{Counters, SimStats};
pub use tls::{ClientAuth, ServerCertificate, SimTls, TlsListener, TlsPeer};

use crate::sifen_soap::Service;
use rand::{Rng, SeedableRng};
use state::State;
use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

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
}
