//! Answering a request as SIFEN's services do: reading the SOAP envelope, handing each service's
//! payload to the state, and the answer of a service that carries one code.

use axum::http::StatusCode;
use chrono::Utc;

use super::{Code, Simulator, checks, lock, respond, state, xsd};
use crate::sifen_soap::xml::{self, Element};
use crate::sifen_soap::{Service, codes};

/// An answer in the shape of `service` carrying one code (0160, 0161, 1264, 0301 …).
pub(super) fn coded_answer(service: Service, code: &Code) -> String {
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
pub(super) fn carried_cdcs(service: Service, body: &[u8]) -> Vec<String> {
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
    /// Reads a request and answers it (processing and recording what it must). `transmitter`
    /// is the RUC of the TLS client certificate, when there is one.
    pub(super) fn answer(
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
