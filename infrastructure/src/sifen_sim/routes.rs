//! The HTTP side: the routes (the six SOAP services on SIFEN's paths, the autoimpresor stand-in
//! and `/sim/*`), and what happens to a SOAP request before it is answered: the fault it draws,
//! the CDCs it carries noted, the client certificate's RUC required.

use axum::Extension;
use axum::Router;
use axum::body::Bytes;
use axum::extract::{ConnectInfo, DefaultBodyLimit, State as AxumState};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use chrono::Utc;
use serde::Deserialize;
use std::time::Duration;

use super::services::{carried_cdcs, coded_answer};
use super::{Code, FAULT_HEADER, FaultAction, FaultSpec, Simulator, TlsPeer, checks, lock, respond};
use crate::sifen_soap::{Service, codes};

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

impl Simulator {
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
