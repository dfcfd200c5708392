//! The simulator's memory and its decisions: which CDCs are approved (each exactly once), lots
//! and their results, events, inutilised ranges, counters.
//!
//! Everything here is synchronous and takes the current time as an argument; the HTTP layer
//! holds the lock only around these calls. Lots are processed lazily: a lot whose processing
//! time has passed is settled, in lot order, before any read or write that could see it.

use super::SimConfig;
use super::checks::{self, Code, DeFacts};
use super::respond::{self, EventAnswer, Outcome};
use crate::sifen_soap::messages::{MAX_EVENTS, MAX_LOT_DOCUMENTS, is_cdc_shaped};
use crate::sifen_soap::xml::{self, Element};
use base64::Engine;
use chrono::{DateTime, Duration, NaiveDateTime, Utc};
use kuatia_domain::check_digit::modulo11;
use std::collections::{BTreeMap, BTreeSet};
use std::io::Read;

const APPROVED: &str = "Aprobado";
const APPROVED_OBS: &str = "Aprobado con observación";
const REJECTED: &str = "Rechazado";

/// Largest uncompressed lot file read (a zip bomb stops here).
const MAX_LOT_BYTES: u64 = 20 * 1024 * 1024;

/// A DE SIFEN holds.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct StoredDe {
    /// "Aprobado", "Aprobado con observación" or "Rechazado" (the last outcome).
    pub status: String,
    /// `dProtAut`, when approved.
    pub protocol: Option<String>,
    /// When it was approved.
    pub approved_at: Option<DateTime<Utc>>,
    /// `iTiDE`.
    pub doc_type: String,
    /// `dRucEm`.
    pub ruc: String,
    /// The `rDE` as received (approved DEs only).
    pub rde: String,
    /// `gResProc` of the last outcome.
    pub results: Vec<Code>,
    /// Events registered on it (`rGesEve` as received).
    pub events: Vec<String>,
    /// Whether a cancellation was registered.
    pub cancelled: bool,
    /// The RUC of the TLS client certificate it came with (`80069563-1`), when there was one.
    #[serde(default)]
    pub transmitter: Option<String>,
}

impl StoredDe {
    fn is_approved(&self) -> bool {
        self.status == APPROVED || self.status == APPROVED_OBS
    }
}

/// A lot.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct Lot {
    /// When it arrived.
    pub received_at: DateTime<Utc>,
    /// When its processing ends.
    pub ready_at: DateTime<Utc>,
    /// The `rDE`s as received.
    pub documents: Vec<String>,
    /// Their CDCs (`DE@Id`, possibly empty when unreadable).
    pub cdcs: Vec<String>,
    /// DEs of more than one type: the whole lot ends in 0363.
    pub mixed_types: bool,
    /// Per-DE outcomes, once processed.
    pub results: Option<Vec<Outcome>>,
    /// The RUC of the TLS client certificate it came with, when there was one.
    #[serde(default)]
    pub transmitter: Option<String>,
}

/// An inutilised range.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Inutilized {
    /// `dNumTim`.
    pub timbrado: String,
    /// `dEst`.
    pub establishment: String,
    /// `dPunExp`.
    pub point: String,
    /// `iTiDE`.
    pub doc_type: String,
    /// `dNumIn`.
    pub from: u32,
    /// `dNumFin`.
    pub to: u32,
}

/// What the simulator has done, for tests and operators (`GET /sim/stats`).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(default)]
pub struct Counters {
    /// Requests per service (siRecepDE, …).
    pub requests: BTreeMap<String, u64>,
    /// DEs approved (with or without observation).
    pub approved: u64,
    /// DEs approved with observation.
    pub approved_with_observation: u64,
    /// DEs rejected (duplicates included).
    pub rejected: u64,
    /// DEs rejected as duplicates (1001).
    pub duplicates: u64,
    /// CDCs sent again (siRecepDE, or inside a lot) after SIFEN approved them, counted as the
    /// request arrives whatever then happens to it: SIFEN may block an issuer for it, and
    /// kuatia must keep it at 0 whatever SIFEN answers.
    pub resent_after_approval: u64,
    /// CDCs sent while a lot holding them was still processing (counted likewise).
    pub sent_while_in_lot: u64,
    /// Lots received (0300).
    pub lots_received: u64,
    /// Lots refused (0301).
    pub lots_refused: u64,
    /// Events registered (0600).
    pub events_registered: u64,
    /// Events rejected.
    pub events_rejected: u64,
    /// Faults applied, by token.
    pub faults: BTreeMap<String, u64>,
    /// Answers withheld (`drop` and `timeout`).
    pub withheld: u64,
    /// TLS handshakes refused or abandoned (no client certificate when one is required, one
    /// the client CA did not sign, a plain-HTTP client…).
    pub handshakes_refused: u64,
    /// DEs approved that came with a TLS client certificate naming another RUC than their
    /// issuer (SIFEN has no code for it; recorded, not refused).
    pub foreign_transmissions: u64,
    /// Autoimpresor number reports received on `POST /autoimpresor` (the reporting endpoint
    /// demo mode's autoimpresor channel names).
    pub autoimpresor_reports: u64,
}

/// The statistics document.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(default)]
pub struct SimStats {
    /// How many times each CDC was approved. SIFEN approves a CDC once; anything above 1 here
    /// would be a simulator bug, and tests assert it.
    pub approvals: BTreeMap<String, u32>,
    /// How many times each CDC was sent again after its approval (`totals.resent_after_approval`
    /// in all).
    pub resent_after_approval: BTreeMap<String, u32>,
    /// Counters.
    pub totals: Counters,
    /// DEs held (approved or last rejected).
    pub documents: usize,
    /// Lots still processing.
    pub lots_processing: usize,
    /// For each approved DE that came over TLS with a client certificate, that certificate's
    /// RUC (CDC → `80069563-1`).
    pub transmitters: BTreeMap<String, String>,
}

/// All the simulator remembers. Serialised as a whole to the state file.
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
#[serde(default)]
pub struct State {
    /// DEs by CDC.
    pub documents: BTreeMap<String, StoredDe>,
    /// Approvals per CDC.
    pub approvals: BTreeMap<String, u32>,
    /// Sends after approval per CDC.
    pub resent: BTreeMap<String, u32>,
    /// Lots by number.
    pub lots: BTreeMap<u64, Lot>,
    /// Inutilised ranges.
    pub inutilized: Vec<Inutilized>,
    /// Taxpayers seen as issuers (RUC → name).
    pub taxpayers: BTreeMap<String, String>,
    /// The numbering of every approved DE (`RUC|type|timbrado|establishment|point|number|series`),
    /// for rule 1002.
    pub numbers: BTreeSet<String>,
    /// Last `dProtAut` given.
    pub last_protocol: u64,
    /// Last lot number given.
    pub last_lot: u64,
    /// Counters.
    pub counters: Counters,
}

fn code(c: &str, m: &str) -> Code {
    Code::new(c, m)
}

fn rejected(cdc: &str, why: Code) -> Outcome {
    Outcome {
        cdc: cdc.to_owned(),
        status: REJECTED.to_owned(),
        protocol: None,
        digest_value: None,
        results: vec![why],
    }
}

fn paraguay_time(text: &str) -> Option<DateTime<Utc>> {
    let naive = NaiveDateTime::parse_from_str(text.trim(), "%Y-%m-%dT%H:%M:%S").ok()?;
    naive
        .and_local_timezone(kuatia_domain::local_time::offset())
        .single()
        .map(|t| t.with_timezone(&Utc))
}

fn number_of(f: &DeFacts) -> kuatia_sifen_rules::NumberKey {
    kuatia_sifen_rules::NumberKey {
        doc_type: f.doc_type.clone(),
        timbrado: f.timbrado.clone(),
        establishment: f.establishment.clone(),
        point: f.point.clone(),
        number: f.number.clone(),
        series: f.series.clone(),
    }
}

fn number_key(ruc: &str, k: &kuatia_sifen_rules::NumberKey) -> String {
    format!(
        "{ruc}|{}|{}|{}|{}|{}|{}",
        k.doc_type.trim_start_matches('0'),
        k.timbrado,
        k.establishment,
        k.point,
        k.number,
        k.series.as_deref().unwrap_or_default()
    )
}

/// What SIFEN holds, as the rule engine reads it: the DEs approved here, the taxpayers
/// configured and seen, the timbrados configured.
struct SimRegistry<'a> {
    state: &'a State,
    config: &'a SimConfig,
}

impl kuatia_sifen_rules::Registry for SimRegistry<'_> {
    fn approved(&self, cdc: &str) -> Option<kuatia_sifen_rules::Approved> {
        let de = self.state.documents.get(cdc).filter(|d| d.is_approved())?;
        Some(kuatia_sifen_rules::Approved {
            rde: de.rde.clone(),
            cancelled: de.cancelled,
        })
    }

    fn approved_with_number(&self, ruc: &str, key: &kuatia_sifen_rules::NumberKey) -> bool {
        self.state.numbers.contains(&number_key(ruc, key))
    }

    fn taxpayer(&self, ruc: &str) -> Option<kuatia_sifen_rules::Taxpayer> {
        let configured = self
            .config
            .taxpayers
            .iter()
            .find(|t| t.ruc.split('-').next() == Some(ruc))
            .map(|t| t.name.clone());
        configured
            .or_else(|| self.state.taxpayers.get(ruc).cloned())
            .map(|name| kuatia_sifen_rules::Taxpayer {
                name,
                state: "ACT".to_owned(),
            })
    }

    fn knows_every_taxpayer(&self) -> bool {
        self.config.whole_registry
    }

    fn credit_notes_of(&self, cdc: &str) -> Vec<kuatia_sifen_rules::Approved> {
        // The approved Notas de Crédito whose text names the CDC; the rule reads which of them
        // refer to it.
        self.state
            .documents
            .values()
            .filter(|d| d.is_approved() && d.doc_type.trim_start_matches('0') == "5" && d.rde.contains(cdc))
            .map(|d| kuatia_sifen_rules::Approved {
                rde: d.rde.clone(),
                cancelled: d.cancelled,
            })
            .collect()
    }

    fn timbrado(&self, ruc: &str, number: &str) -> Option<kuatia_sifen_rules::Timbrado> {
        self.config
            .timbrados
            .iter()
            .find(|t| t.ruc.split('-').next() == Some(ruc) && t.number == number)
            .map(|t| kuatia_sifen_rules::Timbrado {
                start: t.start,
                end: t.end,
            })
    }
}

impl State {
    /// The statistics.
    pub fn stats(&self) -> SimStats {
        SimStats {
            approvals: self.approvals.clone(),
            resent_after_approval: self.resent.clone(),
            totals: self.counters.clone(),
            documents: self.documents.len(),
            lots_processing: self.lots.values().filter(|l| l.results.is_none()).count(),
            transmitters: self
                .documents
                .iter()
                .filter(|(_, d)| d.is_approved())
                .filter_map(|(cdc, d)| Some((cdc.clone(), d.transmitter.clone()?)))
                .collect(),
        }
    }

    fn next_protocol(&mut self) -> String {
        // dProtAut: up to 10 digits; start where real ones look like real ones.
        self.last_protocol = self.last_protocol.max(1_000_000_000) + 1;
        self.last_protocol.to_string()
    }

    fn is_inutilized(&self, f: &DeFacts) -> bool {
        let Ok(n) = f.number.parse::<u32>() else {
            return false;
        };
        self.inutilized.iter().any(|r| {
            r.doc_type == f.doc_type
                && r.establishment == f.establishment
                && r.point == f.point
                && (f.timbrado.is_empty() || r.timbrado == f.timbrado)
                && (r.from..=r.to).contains(&n)
        })
    }

    /// Notes the CDCs a siRecepDE or siRecepLoteDE request carries, as it arrives and before
    /// anything else happens to it (a fault, a refusal): one SIFEN approved already is a CDC
    /// sent again after its approval, one a lot still processing holds is sent while its verdict
    /// is pending.
    pub fn note_sent(&mut self, cdcs: &[String], config: &SimConfig, now: DateTime<Utc>) {
        if cdcs.is_empty() {
            return;
        }
        self.settle(config, now);
        let pending: BTreeSet<String> = self.pending_cdcs().into_iter().map(str::to_owned).collect();
        for cdc in cdcs {
            if self.documents.get(cdc).is_some_and(StoredDe::is_approved) {
                self.counters.resent_after_approval += 1;
                *self.resent.entry(cdc.clone()).or_default() += 1;
                tracing::warn!(%cdc, "the SIFEN simulator received a CDC it had approved already");
            } else if pending.contains(cdc) {
                self.counters.sent_while_in_lot += 1;
            }
        }
    }

    /// [`State::process_de_from`] without a TLS client certificate.
    #[cfg(test)]
    pub fn process_de(&mut self, rde: &str, config: &SimConfig, now: DateTime<Utc>) -> Outcome {
        self.process_de_from(rde, None, config, now)
    }

    /// Judges one `rDE` and records the outcome: the heart of siRecepDE and of lot processing.
    /// `transmitter` is the RUC of the TLS client certificate it came with (`80069563-1`),
    /// recorded with the approval.
    pub fn process_de_from(
        &mut self,
        rde: &str,
        transmitter: Option<&str>,
        config: &SimConfig,
        now: DateTime<Utc>,
    ) -> Outcome {
        let rde = xml::strip_prolog(rde);
        let facts = match checks::check_de(rde, config, now) {
            Ok(facts) => facts,
            Err(why) => {
                self.counters.rejected += 1;
                let cdc = xml::parse(rde)
                    .ok()
                    .and_then(|root| checks::peek(&root).0)
                    .unwrap_or_default();
                self.record_rejection(&cdc, &why);
                return rejected(&cdc, why);
            }
        };
        if self.documents.get(&facts.cdc).is_some_and(StoredDe::is_approved) {
            self.counters.rejected += 1;
            self.counters.duplicates += 1;
            return rejected(&facts.cdc, code("1001", "CDC duplicado"));
        }
        if self.is_inutilized(&facts) {
            self.counters.rejected += 1;
            let why = code("1109", "Número de documento ha sido inutilizado anteriormente");
            self.record_rejection(&facts.cdc, &why);
            return rejected(&facts.cdc, why);
        }
        // The rules of MT §12.4, from the Manual's table (infrastructure/sifen-rules).
        if config.check_rules {
            let registry = SimRegistry { state: self, config };
            let rule_facts = kuatia_sifen_rules::Facts {
                now: kuatia_domain::local_time::paraguay(now),
                production: false,
                registry: &registry,
            };
            let verdict = kuatia_sifen_rules::evaluate(rde, &rule_facts);
            if let Ok(kuatia_sifen_rules::Verdict {
                rejection: Some(finding),
                ..
            }) = verdict
            {
                tracing::info!(
                    cdc = %facts.cdc,
                    code = %finding.code,
                    detail = %finding.detail,
                    "the SIFEN simulator rejected a DE by a rule of MT §12.4"
                );
                self.counters.rejected += 1;
                let why = Code::new(&finding.code, finding.message);
                self.record_rejection(&facts.cdc, &why);
                return rejected(&facts.cdc, why);
            }
        }
        let protocol = self.next_protocol();
        let mut results = vec![code("0260", "Autorización del DE satisfactoria")];
        let status = if facts.late {
            results.push(code("1005", "Transmisión extemporánea del DE"));
            self.counters.approved_with_observation += 1;
            APPROVED_OBS
        } else {
            APPROVED
        };
        self.counters.approved += 1;
        let issuer = format!("{}-{}", facts.ruc, facts.ruc_dv);
        if let Some(transmitter) = transmitter
            && transmitter != issuer
        {
            self.counters.foreign_transmissions += 1;
            tracing::info!(
                cdc = %facts.cdc,
                %issuer,
                %transmitter,
                "the SIFEN simulator approved a DE sent with another taxpayer's TLS certificate"
            );
        }
        *self.approvals.entry(facts.cdc.clone()).or_default() += 1;
        self.numbers.insert(number_key(&facts.ruc, &number_of(&facts)));
        if let Some(name) = &facts.issuer_name {
            self.taxpayers.insert(facts.ruc.clone(), name.clone());
        }
        self.documents.insert(
            facts.cdc.clone(),
            StoredDe {
                status: status.to_owned(),
                protocol: Some(protocol.clone()),
                approved_at: Some(now),
                doc_type: facts.doc_type.clone(),
                ruc: facts.ruc.clone(),
                rde: rde.to_owned(),
                results: results.clone(),
                events: Vec::new(),
                cancelled: false,
                transmitter: transmitter.map(str::to_owned),
            },
        );
        Outcome {
            cdc: facts.cdc,
            status: status.to_owned(),
            protocol: Some(protocol),
            digest_value: facts.digest_value,
            results,
        }
    }

    fn record_rejection(&mut self, cdc: &str, why: &Code) {
        if !is_cdc_shaped(cdc) || self.documents.get(cdc).is_some_and(StoredDe::is_approved) {
            return;
        }
        self.documents.insert(
            cdc.to_owned(),
            StoredDe {
                status: REJECTED.to_owned(),
                protocol: None,
                approved_at: None,
                doc_type: cdc[..2].trim_start_matches('0').to_owned(),
                ruc: cdc[2..10].trim_start_matches('0').to_owned(),
                rde: String::new(),
                results: vec![why.clone()],
                events: Vec::new(),
                cancelled: false,
                transmitter: None,
            },
        );
    }

    /// Processes every lot whose time has come, in lot order.
    pub fn settle(&mut self, config: &SimConfig, now: DateTime<Utc>) {
        let due: Vec<u64> = self
            .lots
            .iter()
            .filter(|(_, l)| l.results.is_none() && l.ready_at <= now)
            .map(|(n, _)| *n)
            .collect();
        for number in due {
            let Some(lot) = self.lots.get(&number) else {
                continue;
            };
            let (mixed, documents, transmitter) =
                (lot.mixed_types, lot.documents.clone(), lot.transmitter.clone());
            let results = if mixed {
                Vec::new()
            } else {
                documents
                    .iter()
                    .map(|d| self.process_de_from(d, transmitter.as_deref(), config, now))
                    .collect()
            };
            if let Some(lot) = self.lots.get_mut(&number) {
                lot.results = Some(results);
            }
        }
    }

    fn pending_cdcs(&self) -> BTreeSet<&str> {
        self.lots
            .values()
            .filter(|l| l.results.is_none())
            .flat_map(|l| l.cdcs.iter().map(String::as_str))
            .collect()
    }

    /// [`State::receive_lot_from`] without a TLS client certificate.
    #[cfg(test)]
    pub fn receive_lot(&mut self, xde: &str, config: &SimConfig, now: DateTime<Utc>) -> (Code, Option<u64>) {
        self.receive_lot_from(xde, None, config, now)
    }

    /// siRecepLoteDE: checks the lot and queues it. Returns the code and the lot number.
    /// `transmitter` is the RUC of the TLS client certificate it came with.
    pub fn receive_lot_from(
        &mut self,
        xde: &str,
        transmitter: Option<&str>,
        config: &SimConfig,
        now: DateTime<Utc>,
    ) -> (Code, Option<u64>) {
        self.settle(config, now);
        match self.read_lot(xde) {
            Ok((documents, cdcs, mixed_types)) => {
                self.last_lot = self.last_lot.max(100_000_000_000) + 1;
                let number = self.last_lot;
                self.lots.insert(
                    number,
                    Lot {
                        received_at: now,
                        ready_at: now
                            + Duration::milliseconds(
                                i64::try_from(config.lot_processing_ms).unwrap_or(i64::MAX),
                            ),
                        documents,
                        cdcs,
                        mixed_types,
                        results: None,
                        transmitter: transmitter.map(str::to_owned),
                    },
                );
                self.counters.lots_received += 1;
                self.settle(config, now);
                (code("0300", "Lote recibido con éxito"), Some(number))
            }
            Err(why) => {
                self.counters.lots_refused += 1;
                (
                    code("0301", &format!("Lote no encolado para procesamiento: [{why}]")),
                    None,
                )
            }
        }
    }

    fn read_lot(&self, xde: &str) -> Result<(Vec<String>, Vec<String>, bool), String> {
        let text = lot_text(xde)?;
        let root = xml::parse(&text).map_err(|e| format!("XML malformado: {e}"))?;
        if root.local() != "rLoteDE" {
            return Err(format!("se esperaba rLoteDE, no {}", root.qname));
        }
        if root.children.iter().any(|c| c.local() != "rDE") {
            return Err("rLoteDE solo puede contener rDE".into());
        }
        let n = root.children.len();
        if n == 0 || n > MAX_LOT_DOCUMENTS {
            return Err(format!("un lote lleva de 1 a {MAX_LOT_DOCUMENTS} DE, no {n}"));
        }
        let pending = self.pending_cdcs();
        let mut documents = Vec::with_capacity(n);
        let mut cdcs = Vec::with_capacity(n);
        let mut types = BTreeSet::new();
        let mut rucs = BTreeSet::new();
        for rde in &root.children {
            let (cdc, doc_type, ruc) = checks::peek(rde);
            let cdc = cdc.unwrap_or_default();
            if !cdc.is_empty() && cdcs.contains(&cdc) {
                return Err(format!("CDC {cdc} repetido en el lote"));
            }
            if pending.contains(cdc.as_str()) {
                return Err(format!("CDC {cdc} en otro lote en procesamiento"));
            }
            types.insert(doc_type.unwrap_or_default());
            rucs.insert(ruc.unwrap_or_default());
            documents.push(text[rde.outer.clone()].to_owned());
            cdcs.push(cdc);
        }
        if rucs.len() > 1 {
            return Err("DE de más de un emisor".into());
        }
        Ok((documents, cdcs, types.len() > 1))
    }

    /// siResultLoteDE, by lot number or by a CDC of the lot.
    pub fn lot_result(
        &mut self,
        number: Option<&str>,
        cdc: Option<&str>,
        config: &SimConfig,
        now: DateTime<Utc>,
    ) -> (Code, Vec<Outcome>) {
        self.settle(config, now);
        let found = match (number, cdc) {
            (Some(n), _) => n.trim().parse::<u64>().ok().filter(|n| self.lots.contains_key(n)),
            (None, Some(c)) => self
                .lots
                .iter()
                .rev()
                .find(|(_, l)| l.cdcs.iter().any(|x| x == c.trim()))
                .map(|(n, _)| *n),
            (None, None) => None,
        };
        let Some((n, lot)) = found.and_then(|n| self.lots.get(&n).map(|l| (n, l))) else {
            return (code("0360", "Lote inexistente"), Vec::new());
        };
        if now - lot.received_at > Duration::hours(48) {
            return (code("0364", "Consulta extemporánea de Lote"), Vec::new());
        }
        match &lot.results {
            None => (code("0361", &format!("Lote {n} en procesamiento")), Vec::new()),
            Some(_) if lot.mixed_types => (code("0363", "Lotes con tipos distintos de DE"), Vec::new()),
            Some(results) => (
                code("0362", &format!("Procesamiento de lote {n} concluido")),
                results.clone(),
            ),
        }
    }

    /// siConsDE: the container of an approved DE, or 0420.
    pub fn query_de(&mut self, cdc: &str, config: &SimConfig, now: DateTime<Utc>) -> (Code, Option<String>) {
        self.settle(config, now);
        match self.documents.get(cdc.trim()) {
            Some(d) if d.is_approved() => (
                code("0422", "CDC encontrado"),
                Some(respond::container(
                    &d.rde,
                    d.protocol.as_deref().unwrap_or_default(),
                    &d.events,
                )),
            ),
            _ => (
                code("0420", "Documento No Existe en SIFEN o ha sido Rechazado"),
                None,
            ),
        }
    }

    /// siConsRUC: taxpayers the simulator has seen issue, and those configured.
    pub fn query_ruc(&self, ruc: &str, config: &SimConfig) -> (Code, Option<(String, String)>) {
        let number = ruc.trim();
        let known = config
            .taxpayers
            .iter()
            .find(|t| t.ruc.split('-').next() == Some(number))
            .map(|t| t.name.clone())
            .or_else(|| self.taxpayers.get(number).cloned());
        match known {
            Some(name) => (
                code("0502", "Éxito en la consulta"),
                Some((number.to_owned(), name)),
            ),
            None => (code("0500", "RUC inexistente"), None),
        }
    }

    /// siRecepEvento: judges and registers each `rGesEve` of the group.
    pub fn receive_events(
        &mut self,
        root: &Element,
        group: &Element,
        text: &str,
        config: &SimConfig,
        now: DateTime<Utc>,
    ) -> Vec<EventAnswer> {
        self.settle(config, now);
        let events: Vec<&Element> = group.children_named("rGesEve").collect();
        if events.is_empty() || events.len() > MAX_EVENTS {
            self.counters.events_rejected += 1;
            return vec![EventAnswer {
                id: "0".into(),
                status: REJECTED.into(),
                protocol: None,
                results: vec![code(
                    "0160",
                    "XML malformado: [gGroupGesEve lleva de 1 a 15 rGesEve]",
                )],
            }];
        }
        events
            .into_iter()
            .map(|ges| {
                let raw = text[ges.outer.clone()].to_owned();
                let id = ges
                    .child("rEve")
                    .and_then(|e| e.attr("Id"))
                    .filter(|id| !id.is_empty() && id.len() <= 10 && id.bytes().all(|b| b.is_ascii_digit()))
                    .unwrap_or("0")
                    .to_owned();
                match self.event(root, text, ges, raw, config, now) {
                    Ok(()) => {
                        self.counters.events_registered += 1;
                        EventAnswer {
                            id,
                            status: APPROVED.into(),
                            protocol: Some(self.next_protocol()),
                            results: vec![code("0600", "Evento registrado correctamente")],
                        }
                    }
                    Err(why) => {
                        self.counters.events_rejected += 1;
                        EventAnswer {
                            id,
                            status: REJECTED.into(),
                            protocol: None,
                            results: vec![why],
                        }
                    }
                }
            })
            .collect()
    }

    fn event(
        &mut self,
        root: &Element,
        text: &str,
        ges: &Element,
        raw: String,
        config: &SimConfig,
        now: DateTime<Utc>,
    ) -> Result<(), Code> {
        let eve = ges
            .child("rEve")
            .ok_or_else(|| code("0160", "XML malformado: [falta rEve]"))?;
        let signed_at = eve.child_text("dFecFirma").and_then(paraguay_time).unwrap_or(now);
        if config.check_dates && signed_at > now + Duration::minutes(10) {
            return Err(code("4008", "Fecha de firma digital del evento inválida"));
        }
        let signer = match ges.child("Signature") {
            Some(sig) => {
                if config.verify_signature {
                    super::dsig::verify(text, root, sig)?;
                }
                Some(signer_ruc(sig).ok_or_else(|| code("0120", "Certificado inválido"))?)
            }
            None if config.require_signature => {
                return Err(code("0160", "XML malformado: [falta Signature]"));
            }
            None => None,
        };
        let kind = eve
            .child("gGroupTiEvt")
            .and_then(|g| g.children.first())
            .ok_or_else(|| code("0160", "XML malformado: [falta gGroupTiEvt]"))?;
        if kind.local() == "rGeVeInu" {
            return self.inutilize(kind);
        }
        // Every other event names a DE by CDC.
        let cdc = kind.child_text("Id").unwrap_or_default().to_owned();
        if !is_cdc_shaped(&cdc) || modulo11(&cdc[..43]).to_string() != cdc[43..] {
            return Err(code("4001", "CDC inválido"));
        }
        let doc = self
            .documents
            .get_mut(&cdc)
            .filter(|d| d.is_approved())
            .ok_or_else(|| code("4002", "CDC no existente en el SIFEN"))?;
        if kind.local() == "rGeVeCan" {
            if doc.cancelled {
                return Err(code("4003", "CDC ya se encuentra con el mismo evento solicitado"));
            }
            if let Some(signer) = &signer
                && signer.split('-').next() != Some(doc.ruc.as_str())
            {
                return Err(code("4006", "Firmador no autorizado para realizar evento"));
            }
            let approved_at = doc.approved_at.unwrap_or(now);
            if doc.doc_type == "1" && signed_at - approved_at > Duration::hours(48) {
                return Err(code(
                    "4009",
                    "Plazo de solicitud de cancelación de una FE extemporáneo",
                ));
            }
            if doc.doc_type != "1" && signed_at - approved_at > Duration::hours(168) {
                return Err(code(
                    "4010",
                    "Plazo de solicitud de cancelación distinto a una FE es extemporáneo",
                ));
            }
            doc.cancelled = true;
        }
        doc.events.push(raw);
        Ok(())
    }

    fn inutilize(&mut self, inu: &Element) -> Result<(), Code> {
        let text = |n: &str| inu.child_text(n).unwrap_or_default().to_owned();
        let number = |n: &str| text(n).parse::<u32>().ok();
        let (Some(from), Some(to)) = (number("dNumIn"), number("dNumFin")) else {
            return Err(code("0160", "XML malformado: [dNumIn/dNumFin]"));
        };
        // The manual wants the end above the start (4068); a single number (from = to) is what
        // an issuer voids most often, and is accepted.
        if to < from {
            return Err(code("4068", "Número final de rango es inválido"));
        }
        if to - from >= 1000 {
            return Err(code("4067", "Cantidad de números en el rango es inválida"));
        }
        let range = Inutilized {
            timbrado: text("dNumTim"),
            establishment: text("dEst"),
            point: text("dPunExp"),
            doc_type: text("iTiDE").trim_start_matches('0').to_owned(),
            from,
            to,
        };
        let used = self.documents.iter().any(|(cdc, d)| {
            d.is_approved()
                && d.doc_type == range.doc_type
                && cdc.get(11..14) == Some(range.establishment.as_str())
                && cdc.get(14..17) == Some(range.point.as_str())
                && cdc
                    .get(17..24)
                    .and_then(|n| n.parse::<u32>().ok())
                    .is_some_and(|n| (from..=to).contains(&n))
        });
        if used {
            return Err(code("4065", "Existe DTE en el rango informado"));
        }
        let overlaps = self.inutilized.iter().any(|r| {
            r.timbrado == range.timbrado
                && r.establishment == range.establishment
                && r.point == range.point
                && r.doc_type == range.doc_type
                && r.from <= to
                && from <= r.to
        });
        if overlaps {
            return Err(code("4066", "Existe número inutilizado en el rango solicitado"));
        }
        self.inutilized.push(range);
        Ok(())
    }
}

/// The XML of a lot (`xDE`: base64 of a zip holding one file).
fn lot_text(xde: &str) -> Result<String, String> {
    let compact: String = xde.split_whitespace().collect();
    let zip = base64::engine::general_purpose::STANDARD
        .decode(compact)
        .map_err(|_| "xDE no es base64".to_owned())?;
    let mut archive =
        zip::ZipArchive::new(std::io::Cursor::new(zip)).map_err(|_| "xDE no es un archivo zip".to_owned())?;
    if archive.len() != 1 {
        return Err("el zip debe contener un único archivo".into());
    }
    let entry = archive.by_index(0).map_err(|_| "zip ilegible".to_owned())?;
    let mut text = String::new();
    entry
        .take(MAX_LOT_BYTES)
        .read_to_string(&mut text)
        .map_err(|_| "el lote no es un XML UTF-8 legible".to_owned())?;
    Ok(text)
}

/// The CDCs of a lot's DEs (none when it cannot be read).
pub fn lot_cdcs(xde: &str) -> Vec<String> {
    let Ok(text) = lot_text(xde) else {
        return Vec::new();
    };
    let Ok(root) = xml::parse(&text) else {
        return Vec::new();
    };
    root.children
        .iter()
        .filter_map(|rde| checks::peek(rde).0)
        .collect()
}

fn signer_ruc(signature: &Element) -> Option<String> {
    use x509_parser::prelude::{FromDer, X509Certificate};
    let b64: String = signature
        .child("KeyInfo")?
        .child("X509Data")?
        .child_text("X509Certificate")?
        .split_whitespace()
        .collect();
    let der = base64::engine::general_purpose::STANDARD.decode(b64).ok()?;
    let (_, cert) = X509Certificate::from_der(&der).ok()?;
    cert.subject()
        .iter_by_oid(&x509_parser::oid_registry::OID_X509_SERIALNUMBER)
        .filter_map(|a| a.as_str().ok())
        .find_map(|v| v.trim().strip_prefix("RUC").map(|n| n.trim().to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sifen_sim::checks::tests::rde;
    use crate::sifen_soap::messages;

    /// The memory's rules on minimal DEs: the rules of §12.4 are off (they have their tests,
    /// and `the_rules_of_the_manual_judge_every_de` below).
    fn config() -> SimConfig {
        SimConfig {
            lot_processing_ms: 1_000,
            check_rules: false,
            ..SimConfig::default()
        }
    }

    /// With the rules of §12.4 on (the default): a DE as XMLGEN writes it passes; a minimal one
    /// is rejected with the first rule it breaks, in the Manual's order, and its message; a DE
    /// numbered like one approved (same type, timbrado, establishment, point, number) under
    /// another CDC is 1002.
    #[test]
    fn the_rules_of_the_manual_judge_every_de() {
        let now = Utc::now();
        let rules = SimConfig {
            check_dates: false,
            verify_signature: false,
            check_qr: false,
            ..SimConfig::default()
        };
        let mut s = State::default();
        let fe = include_str!("fixtures/fe-signed-selfsigned-qr.xml");
        let approved = s.process_de(fe, &rules, now);
        assert_eq!(approved.results[0].code, "0260", "{approved:?}");

        let (_, minimal) = rde(1, 1, now);
        let rejected = s.process_de(&minimal, &rules, now);
        assert_eq!(rejected.status, "Rechazado");
        let row = kuatia_sifen_rules::table()
            .iter()
            .find(|r| r.code == rejected.results[0].code)
            .expect("a rule of the table");
        assert_eq!(rejected.results[0].message, row.message);
        assert_eq!(s.counters.rejected, 1);

        // The same numbering under another security code, hence another CDC.
        let old_cdc = "01800695631001001000000122025011511234567899";
        let base = format!("{}987654321", &old_cdc[..34]);
        let new_cdc = format!("{base}{}", modulo11(&base));
        let renumbered = fe
            .replace(old_cdc, &new_cdc)
            .replace("<dDVId>9</dDVId>", &format!("<dDVId>{}</dDVId>", &new_cdc[43..]))
            .replace("<dCodSeg>123456789</dCodSeg>", "<dCodSeg>987654321</dCodSeg>");
        let twin = s.process_de(&renumbered, &rules, now);
        assert_eq!(
            (twin.results[0].code.as_str(), twin.cdc.as_str()),
            ("1002", new_cdc.as_str()),
            "{twin:?}"
        );
    }

    fn lot_b64(rdes: &[&str]) -> String {
        let zip = messages::lot_zip(rdes, "lote.xml").unwrap();
        base64::engine::general_purpose::STANDARD.encode(zip)
    }

    #[test]
    fn a_cdc_is_approved_once_and_then_answered_as_a_duplicate() {
        let now = Utc::now();
        let mut s = State::default();
        let (cdc, x) = rde(1, 1, now);
        let first = s.process_de(&x, &config(), now);
        assert_eq!(
            (first.status.as_str(), first.results[0].code.as_str()),
            ("Aprobado", "0260")
        );
        assert_eq!(first.protocol.as_deref().map(str::len), Some(10));
        let again = s.process_de(&x, &config(), now);
        assert_eq!(
            (again.status.as_str(), again.results[0].code.as_str()),
            ("Rechazado", "1001")
        );
        assert_eq!(s.approvals[&cdc], 1);
        let (c, container) = s.query_de(&cdc, &config(), now);
        assert_eq!(c.code, "0422");
        assert!(container.unwrap().contains(&x));
        assert_eq!(
            s.query_de(&cdc.replace("0000001", "0000002"), &config(), now)
                .0
                .code,
            "0420"
        );
    }

    #[test]
    fn a_lot_is_processing_until_its_time_then_answers_per_document() {
        let now = Utc::now();
        let mut s = State::default();
        let (a, xa) = rde(1, 1, now);
        let (b, xb) = rde(2, 1, now);
        let (code, number) = s.receive_lot(&lot_b64(&[&xa, &xb]), &config(), now);
        assert_eq!(code.code, "0300");
        let n = number.unwrap().to_string();
        assert_eq!(s.lot_result(Some(&n), None, &config(), now).0.code, "0361");
        // The same CDC again while the lot is processing: refused without queuing.
        let (c, _) = s.receive_lot(&lot_b64(&[&xa]), &config(), now);
        assert_eq!(c.code, "0301");
        let later = now + Duration::seconds(2);
        let (c, docs) = s.lot_result(Some(&n), None, &config(), later);
        assert_eq!(c.code, "0362");
        assert_eq!(
            docs.iter().map(|d| d.cdc.as_str()).collect::<Vec<_>>(),
            [a.as_str(), b.as_str()]
        );
        assert!(docs.iter().all(|d| d.status == "Aprobado"));
        assert_eq!(s.lot_result(None, Some(&b), &config(), later).0.code, "0362");
        assert_eq!(s.lot_result(Some("999"), None, &config(), later).0.code, "0360");
        assert_eq!(
            s.lot_result(Some(&n), None, &config(), now + Duration::hours(49))
                .0
                .code,
            "0364"
        );
    }

    #[test]
    fn lots_breaking_the_rules_are_refused_or_end_in_0363() {
        let now = Utc::now();
        let mut s = State::default();
        let (_, xa) = rde(1, 1, now);
        let (_, xn) = rde(2, 5, now);
        for bad in [
            "***",
            &base64::engine::general_purpose::STANDARD.encode(b"not a zip"),
            &lot_b64(&[&xa, &xa]),
        ] {
            assert_eq!(s.receive_lot(bad, &config(), now).0.code, "0301", "{bad}");
        }
        let (_, xb) = rde(3, 1, now);
        let other_issuer = xb.replace("<dRucEm>80069563</dRucEm>", "<dRucEm>80013884</dRucEm>");
        assert_eq!(
            s.receive_lot(&lot_b64(&[&xa, &other_issuer]), &config(), now)
                .0
                .code,
            "0301"
        );
        let (c, n) = s.receive_lot(&lot_b64(&[&xa, &xn]), &config(), now);
        assert_eq!(c.code, "0300");
        let n = n.unwrap().to_string();
        assert_eq!(
            s.lot_result(Some(&n), None, &config(), now + Duration::seconds(2))
                .0
                .code,
            "0363"
        );
        assert!(s.approvals.is_empty());
    }

    #[test]
    fn cancellation_and_inutilization_follow_the_event_rules() {
        let now = Utc::now();
        let mut s = State::default();
        let (cdc, x) = rde(5, 1, now);
        s.process_de(&x, &config(), now);
        let group = |inner: &str| {
            format!(
                "<gGroupGesEve xmlns=\"{}\">{inner}</gGroupGesEve>",
                crate::sifen_soap::SIFEN_NS
            )
        };
        let cancel = |id: &str, cdc: &str| {
            format!(
                "<rGesEve><rEve Id=\"{id}\"><dVerFor>150</dVerFor><gGroupTiEvt><rGeVeCan><Id>{cdc}</Id><mOtEve>Error en la emision</mOtEve></rGeVeCan></gGroupTiEvt></rEve></rGesEve>"
            )
        };
        let run = |s: &mut State, text: &str, at| {
            let tree = xml::parse(text).unwrap();
            s.receive_events(&tree, &tree, text, &config(), at)
                .into_iter()
                .map(|a| a.results[0].code.clone())
                .collect::<Vec<_>>()
        };
        let unknown = cdc.replace("0000005", "0000006");
        let unknown = format!("{}{}", &unknown[..43], modulo11(&unknown[..43]));
        let bad_dv = format!("{}{}", &cdc[..43], (modulo11(&cdc[..43]) + 1) % 10);
        let text = group(&format!(
            "{}{}{}{}",
            cancel("1", &cdc),
            cancel("2", &cdc),
            cancel("3", &unknown),
            cancel("4", &bad_dv)
        ));
        assert_eq!(run(&mut s, &text, now), ["0600", "4003", "4002", "4001"]);
        assert!(s.documents[&cdc].cancelled);
        let (_, container) = s.query_de(&cdc, &config(), now);
        assert!(container.unwrap().contains("rGeVeCan"));

        let (late, xl) = rde(7, 1, now);
        s.process_de(&xl, &config(), now);
        assert_eq!(
            run(&mut s, &group(&cancel("1", &late)), now + Duration::hours(49)),
            ["4009"]
        );

        let inu = |from: &str, to: &str| {
            format!(
                "<rGesEve><rEve Id=\"9\"><gGroupTiEvt><rGeVeInu><dNumTim>12558946</dNumTim><dEst>001</dEst><dPunExp>001</dPunExp><dNumIn>{from}</dNumIn><dNumFin>{to}</dNumFin><iTiDE>1</iTiDE><mOtEve>Salto de numeracion</mOtEve></rGeVeInu></gGroupTiEvt></rEve></rGesEve>"
            )
        };
        assert_eq!(run(&mut s, &group(&inu("0000005", "0000005")), now), ["4065"]);
        assert_eq!(run(&mut s, &group(&inu("0000020", "0000010")), now), ["4068"]);
        assert_eq!(run(&mut s, &group(&inu("0000010", "0001010")), now), ["4067"]);
        assert_eq!(run(&mut s, &group(&inu("0000010", "0000012")), now), ["0600"]);
        assert_eq!(run(&mut s, &group(&inu("0000012", "0000013")), now), ["4066"]);
        let (_, x11) = rde(11, 1, now);
        assert_eq!(s.process_de(&x11, &config(), now).results[0].code, "1109");
    }
}
