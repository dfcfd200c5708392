//! SIFEN's web services end to end: `SifenClient` against the simulator over real HTTP
//! (BRIEF §6, DECISIONS §9), including every injected fault and the reconciliation of an
//! answer that never came.

use chrono::{DateTime, Utc};
use kuatia_domain::check_digit::modulo11;
use kuatia_infrastructure::sifen_sim::{self, FAULT_HEADER, RunningSimulator, SimConfig, SimStats};
use kuatia_infrastructure::sifen_soap::messages::{self, LotQuery};
use kuatia_infrastructure::sifen_soap::{
    Delivery, DocumentStatus, LotState, SIFEN_NS, Service, SifenClient, SoapClientConfig, SoapError,
};
use std::time::{Duration, Instant};

/// A well-formed, unsigned rDE whose CDC agrees with its fields, dated now (Paraguay time).
fn rde(number: u32, now: DateTime<Utc>) -> (String, String) {
    let local = kuatia_domain::local_time::paraguay(now);
    let stamp = local.format("%Y-%m-%dT%H:%M:%S");
    let base = format!(
        "01800695631001001{number:07}2{}1987654321",
        local.format("%Y%m%d")
    );
    let cdc = format!("{base}{}", modulo11(&base));
    let dv = &cdc[43..];
    let xml = format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<rDE xmlns=\"{SIFEN_NS}\" xmlns:xsi=\"http://www.w3.org/2001/XMLSchema-instance\" xsi:schemaLocation=\"{SIFEN_NS} siRecepDE_v150.xsd\"><dVerFor>150</dVerFor><DE Id=\"{cdc}\"><dDVId>{dv}</dDVId><dFecFirma>{stamp}</dFecFirma><dSisFact>1</dSisFact><gOpeDE><iTipEmi>1</iTipEmi><dDesTipEmi>Normal</dDesTipEmi><dCodSeg>987654321</dCodSeg></gOpeDE><gTimb><iTiDE>1</iTiDE><dDesTiDE>Factura electrónica</dDesTiDE><dNumTim>12558946</dNumTim><dEst>001</dEst><dPunExp>001</dPunExp><dNumDoc>{number:07}</dNumDoc><dFeIniT>2022-08-25</dFeIniT></gTimb><gDatGralOpe><dFeEmiDE>{stamp}</dFeEmiDE><gEmis><dRucEm>80069563</dRucEm><dDVEmi>1</dDVEmi><iTipCont>2</iTipCont><dNomEmi>DE generado en ambiente de prueba - sin valor comercial ni fiscal</dNomEmi></gEmis></gDatGralOpe></DE></rDE>"
    );
    (cdc, xml)
}

fn cancel_event(id: u32, cdc: &str) -> String {
    let stamp = kuatia_domain::local_time::paraguay(Utc::now()).format("%Y-%m-%dT%H:%M:%S");
    format!(
        "<rGesEve><rEve Id=\"{id}\"><dFecFirma>{stamp}</dFecFirma><dVerFor>150</dVerFor><gGroupTiEvt><rGeVeCan><Id>{cdc}</Id><mOtEve>Error en la emision del documento</mOtEve></rGeVeCan></gGroupTiEvt></rEve></rGesEve>"
    )
}

struct Sifen {
    sim: RunningSimulator,
    client: SifenClient,
    http: reqwest::Client,
}

impl Sifen {
    async fn start(lot_processing_ms: u64) -> Self {
        let sim = sifen_sim::start(
            "127.0.0.1:0",
            SimConfig {
                lot_processing_ms,
                hang_ms: 5_000,
                ..SimConfig::default()
            },
        )
        .await
        .expect("simulator");
        let config = SoapClientConfig {
            connect_timeout_ms: 2_000,
            read_timeout_ms: 800,
            total_timeout_ms: 5_000,
            ..SoapClientConfig::default()
        };
        let client = SifenClient::new(&sim.base_url(), &config, None, None).expect("client");
        Self {
            sim,
            client,
            http: reqwest::Client::new(),
        }
    }

    /// Queues a fault through the simulator's HTTP admin endpoint.
    async fn fault(&self, fault: &str, service: Service) {
        let response = self
            .http
            .post(format!("{}/sim/faults", self.sim.base_url()))
            .json(&serde_json::json!({"fault": fault, "times": 1, "service": service.name()}))
            .send()
            .await
            .expect("queue fault");
        assert_eq!(response.status().as_u16(), 204);
    }

    async fn stats(&self) -> SimStats {
        self.http
            .get(format!("{}/sim/stats", self.sim.base_url()))
            .send()
            .await
            .expect("stats")
            .json()
            .await
            .expect("stats JSON")
    }

    /// Every CDC the simulator approved, approved exactly once.
    async fn assert_each_cdc_approved_once(&self) {
        let stats = self.stats().await;
        assert!(stats.approvals.values().all(|n| *n == 1), "{:?}", stats.approvals);
    }
}

#[tokio::test]
async fn a_de_is_approved_once_and_a_second_sending_is_a_duplicate() {
    let sifen = Sifen::start(200).await;
    let (cdc, xml) = rde(1, Utc::now());

    let first = sifen.client.send_de(1, &xml).await.expect("answer").result;
    assert_eq!(first.status, DocumentStatus::Approved);
    assert_eq!(first.code(), Some("0260"));
    assert_eq!(first.cdc.as_deref(), Some(cdc.as_str()));
    let protocol = first.authorization.clone().expect("dProtAut");

    let again = sifen.client.send_de(2, &xml).await.expect("answer");
    assert_eq!(again.result.status, DocumentStatus::Rejected);
    assert_eq!(again.result.code(), Some("1001"));
    assert!(again.result.is_duplicate());
    assert!(again.raw.contains("CDC duplicado"));

    let query = sifen.client.query_de(3, &cdc).await.expect("answer").result;
    assert!(query.is_found(), "{query:?}");
    let container = query.container.expect("xContenDE");
    assert_eq!(container.cdc.as_deref(), Some(cdc.as_str()));
    assert_eq!(container.authorization.as_deref(), Some(protocol.as_str()));
    assert!(container.xml.contains(messages_rde(&xml)));

    let unknown = rde(2, Utc::now()).0;
    let query = sifen.client.query_de(4, &unknown).await.expect("answer").result;
    assert_eq!(query.code, "0420");
    assert!(!query.is_found());

    let ruc = sifen
        .client
        .query_ruc(5, "80069563-1")
        .await
        .expect("answer")
        .result;
    assert_eq!(ruc.code, "0502");
    assert_eq!(ruc.taxpayer.expect("xContRUC").ruc, "80069563");

    let stats = sifen.stats().await;
    assert_eq!(stats.approvals.get(&cdc), Some(&1));
    assert_eq!((stats.totals.approved, stats.totals.duplicates), (1, 1));
}

/// The rDE without its XML declaration: what goes into envelopes and containers.
fn messages_rde(xml: &str) -> &str {
    let start = xml.find("<rDE").expect("rDE");
    &xml[start..]
}

#[tokio::test]
async fn a_lot_of_three_is_processed_and_each_document_has_its_result() {
    let sifen = Sifen::start(400).await;
    let now = Utc::now();
    let docs: Vec<(String, String)> = (10..13).map(|n| rde(n, now)).collect();
    let rdes: Vec<&str> = docs.iter().map(|(_, x)| x.as_str()).collect();

    let received = sifen.client.send_lot(1, &rdes).await.expect("answer").result;
    assert!(received.is_received(), "{received:?}");
    let number = received.lot_number.expect("dProtConsLote");

    let first = sifen
        .client
        .lot_result(2, &LotQuery::Number(number.clone()))
        .await
        .expect("answer")
        .result;
    assert_eq!(first.state(), LotState::Processing);

    let deadline = Instant::now() + Duration::from_secs(5);
    let done = loop {
        tokio::time::sleep(Duration::from_millis(150)).await;
        let result = sifen
            .client
            .lot_result(3, &LotQuery::Number(number.clone()))
            .await
            .expect("answer")
            .result;
        if result.state() == LotState::Done {
            break result;
        }
        assert!(Instant::now() < deadline, "the lot never finished: {result:?}");
    };
    assert_eq!(
        done.documents.iter().map(|d| d.cdc.as_str()).collect::<Vec<_>>(),
        docs.iter().map(|(c, _)| c.as_str()).collect::<Vec<_>>()
    );
    for d in &done.documents {
        assert_eq!(d.status, DocumentStatus::Approved);
        assert_eq!(d.results[0].code, "0260");
        assert!(d.authorization.is_some());
    }

    // The lot can also be found by one of its CDCs (GMP: when the reception answer was lost).
    let by_cdc = sifen
        .client
        .lot_result(4, &LotQuery::Cdc(docs[1].0.clone()))
        .await
        .expect("answer")
        .result;
    assert_eq!(by_cdc.state(), LotState::Done);

    // A DE of a finished lot sent again, alone, is a duplicate.
    let again = sifen.client.send_de(5, &docs[0].1).await.expect("answer").result;
    assert_eq!(again.code(), Some("1001"));
    sifen.assert_each_cdc_approved_once().await;
    assert_eq!(sifen.stats().await.approvals.len(), 3);
}

#[tokio::test]
async fn each_fault_mode_gives_the_typed_error_or_the_code_expected() {
    let sifen = Sifen::start(200).await;
    let now = Utc::now();

    sifen.fault("http500", Service::RecepDe).await;
    let err = sifen.client.send_de(1, &rde(20, now).1).await.unwrap_err();
    assert!(matches!(err, SoapError::NotSoap { status: 500, .. }), "{err:?}");
    assert_eq!(err.delivery(), Delivery::Unknown);

    sifen.fault("fault", Service::ConsDe).await;
    let err = sifen.client.query_de(2, &rde(20, now).0).await.unwrap_err();
    assert!(matches!(err, SoapError::Fault { status: 500, .. }), "{err:?}");

    sifen.fault("0161", Service::RecepDe).await;
    let answer = sifen
        .client
        .send_de(3, &rde(21, now).1)
        .await
        .expect("answer")
        .result;
    assert_eq!(answer.code(), Some("0161"));
    assert_eq!(answer.status, DocumentStatus::Rejected);

    sifen.fault("0301", Service::RecepLoteDe).await;
    let lot = sifen
        .client
        .send_lot(4, &[&rde(22, now).1])
        .await
        .expect("answer")
        .result;
    assert_eq!(lot.code, "0301");
    assert!(!lot.is_received());

    // A timeout: nothing processed, no answer. The client cannot know; SIFEN knows nothing.
    let (cdc, xml) = rde(23, now);
    sifen.fault("timeout", Service::RecepDe).await;
    let err = sifen.client.send_de(5, &xml).await.unwrap_err();
    assert!(
        matches!(err, SoapError::OutcomeUnknown { timeout: true, .. }),
        "{err:?}"
    );
    assert_eq!(err.delivery(), Delivery::Unknown);
    let query = sifen.client.query_de(6, &cdc).await.expect("answer").result;
    assert_eq!(query.code, "0420");

    // Latency within the client's read timeout is only slower.
    sifen.fault("latency=300ms", Service::RecepDe).await;
    let started = Instant::now();
    let answer = sifen.client.send_de(7, &xml).await.expect("answer").result;
    assert!(started.elapsed() >= Duration::from_millis(300));
    assert_eq!(answer.code(), Some("0260"));

    // Nothing was approved by the faults that process nothing.
    let stats = sifen.stats().await;
    assert_eq!(stats.approvals.keys().collect::<Vec<_>>(), [&cdc]);
    for token in ["http500", "fault", "0161", "0301", "timeout"] {
        assert_eq!(stats.totals.faults.get(token), Some(&1), "{token}");
    }
    sifen.assert_each_cdc_approved_once().await;
}

#[tokio::test]
async fn a_dropped_answer_is_an_unknown_outcome_that_sicons_de_reconciles() {
    let sifen = Sifen::start(200).await;
    let (cdc, xml) = rde(30, Utc::now());

    sifen.fault("drop", Service::RecepDe).await;
    let err = sifen.client.send_de(1, &xml).await.unwrap_err();
    assert!(matches!(err, SoapError::OutcomeUnknown { .. }), "{err:?}");
    assert_eq!(err.delivery(), Delivery::Unknown);

    // Reconcile by CDC before resending (BRIEF §6.4): SIFEN did approve it.
    let query = sifen.client.query_de(2, &cdc).await.expect("answer").result;
    assert!(query.is_found(), "{query:?}");
    let container = query.container.expect("xContenDE");
    assert!(container.authorization.is_some());

    // Resending anyway is answered as a duplicate, and the CDC stays approved once.
    let again = sifen.client.send_de(3, &xml).await.expect("answer").result;
    assert!(again.is_duplicate());
    let stats = sifen.stats().await;
    assert_eq!(stats.approvals.get(&cdc), Some(&1));
    assert_eq!(stats.totals.withheld, 1);

    // A dropped lot reception: the lot exists and can be found by one of its CDCs.
    let (lot_cdc, lot_xml) = rde(31, Utc::now());
    sifen.fault("drop", Service::RecepLoteDe).await;
    let err = sifen.client.send_lot(4, &[&lot_xml]).await.unwrap_err();
    assert_eq!(err.delivery(), Delivery::Unknown);
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let result = sifen
            .client
            .lot_result(5, &LotQuery::Cdc(lot_cdc.clone()))
            .await
            .expect("answer")
            .result;
        if result.state() == LotState::Done {
            assert_eq!(result.documents[0].cdc, lot_cdc);
            assert!(result.documents[0].status.is_approved());
            break;
        }
        assert_eq!(result.state(), LotState::Processing);
        assert!(Instant::now() < deadline);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    sifen.assert_each_cdc_approved_once().await;
}

#[tokio::test]
async fn a_per_request_fault_header_is_honoured() {
    let sifen = Sifen::start(200).await;
    let (cdc, xml) = rde(40, Utc::now());
    let url = format!("{}{}", sifen.sim.base_url(), Service::ConsDe.path());
    let response = sifen
        .http
        .post(&url)
        .header(FAULT_HEADER, "latency=50ms,0161")
        .header("content-type", "application/xml; charset=utf-8")
        .body(messages::cons_de(1, &cdc).expect("request"))
        .send()
        .await
        .expect("send");
    let status = response.status().as_u16();
    let body = response.bytes().await.expect("body");
    let answer = messages::parse_cons_de(status, &body).expect("typed");
    assert_eq!(answer.code, "0161");

    let response = sifen
        .http
        .post(format!("{}{}", sifen.sim.base_url(), Service::RecepDe.path()))
        .header(FAULT_HEADER, "http500")
        .body(messages::recep_de(2, &xml).expect("request"))
        .send()
        .await
        .expect("send");
    assert_eq!(response.status().as_u16(), 500);
    assert!(sifen.stats().await.approvals.is_empty());
}

#[tokio::test]
async fn a_cancellation_event_is_registered_and_shows_in_the_container() {
    let sifen = Sifen::start(200).await;
    let (cdc, xml) = rde(50, Utc::now());
    assert_eq!(
        sifen.client.send_de(1, &xml).await.expect("answer").result.code(),
        Some("0260")
    );

    let unknown = rde(51, Utc::now()).0;
    let events = [
        cancel_event(1, &cdc),
        cancel_event(2, &cdc),
        cancel_event(3, &unknown),
    ];
    let events: Vec<&str> = events.iter().map(String::as_str).collect();
    let answer = sifen.client.send_events(2, &events).await.expect("answer").result;
    let codes: Vec<(&str, &str)> = answer
        .events
        .iter()
        .map(|e| (e.id.as_str(), e.results[0].code.as_str()))
        .collect();
    assert_eq!(codes, [("1", "0600"), ("2", "4003"), ("3", "4002")]);
    assert!(answer.events[0].status.is_approved());

    let query = sifen.client.query_de(3, &cdc).await.expect("answer").result;
    assert!(query.is_found());
    assert!(query.container.expect("xContenDE").cancelled);
}

#[tokio::test]
async fn a_closed_port_means_not_sent() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    drop(listener);
    let client = SifenClient::new(
        &format!("http://{addr}"),
        &SoapClientConfig::default(),
        None,
        None,
    )
    .expect("client");
    let err = client.send_de(1, &rde(60, Utc::now()).1).await.unwrap_err();
    assert!(matches!(err, SoapError::NotSent { .. }), "{err:?}");
    assert_eq!(err.delivery(), Delivery::NotSent);
}

#[tokio::test]
async fn a_de_signed_by_our_signer_verifies_and_its_signer_must_be_the_issuer() {
    use kuatia_infrastructure::selfsigned::SelfSigned;
    use kuatia_infrastructure::sifen::sign::{SigningKey, sign_de};
    let key_for = |ruc: &str| {
        let (key, cert) = SelfSigned::for_ruc("DEMO S.A.", ruc, 30)
            .generate()
            .expect("certificate");
        SigningKey::new(key, &cert).expect("signing key")
    };
    let sifen = Sifen::start(200).await;

    let (_, xml) = rde(70, Utc::now());
    let signed = sign_de(messages_rde(&xml), &key_for("80069563-1")).expect("signed");
    let answer = sifen.client.send_de(1, &signed.xml).await.expect("answer").result;
    assert_eq!(answer.code(), Some("0260"), "{answer:?}");
    assert_eq!(answer.digest_value.as_deref(), Some(signed.digest_value.as_str()));

    // Content changed after signing: the digest no longer matches.
    let (_, xml) = rde(71, Utc::now());
    let signed = sign_de(messages_rde(&xml), &key_for("80069563-1")).expect("signed");
    let tampered = signed
        .xml
        .replace("<dSisFact>1</dSisFact>", "<dSisFact>2</dSisFact>");
    let answer = sifen.client.send_de(2, &tampered).await.expect("answer").result;
    assert_eq!(answer.code(), Some("0141"), "{answer:?}");

    // Signed by another taxpayer's certificate.
    let other = sign_de(messages_rde(&xml), &key_for("80013884-8")).expect("signed");
    let answer = sifen.client.send_de(3, &other.xml).await.expect("answer").result;
    assert_eq!(answer.code(), Some("0142"), "{answer:?}");
    sifen.assert_each_cdc_approved_once().await;
}
