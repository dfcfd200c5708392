//! SIFEN's web services end to end: `SifenClient` against the simulator over real HTTP,
//! including every injected fault and the reconciliation of an
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
                // Minimal DEs: these tests are about the transport, lots and the memory; the rules
                // of §12.4 on whole DEs are sifen_rules.rs's.
                check_rules: false,
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

    // Reconcile by CDC before resending: SIFEN did approve it.
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

// ---------------------------------------------------------------------------------------------
// HTTPS with client certificates, and the schema.

mod over_tls {
    use super::*;
    use kuatia_domain::channel::SifenEnvironment;
    use kuatia_domain::sifen::qr::{Csc, QrData, QrReceiver, qr_url};
    use kuatia_infrastructure::selfsigned::SelfSigned;
    use kuatia_infrastructure::sifen::sign::{SigningKey, append_qr, sign_de};
    use kuatia_infrastructure::sifen_sim::{ClientAuth, ServerCertificate};
    use kuatia_infrastructure::sifen_soap::client::ClientIdentity;

    /// A company's certificate: the signing key and the TLS client identity, from one
    /// self-signed certificate (RUC in the subject serialNumber, clientAuth), as the vault
    /// hands them out.
    struct Company {
        key: SigningKey,
        identity: ClientIdentity,
        cert_pem: Vec<u8>,
    }

    fn company(ruc: Option<&str>) -> Company {
        let spec = SelfSigned {
            ruc: ruc.map(str::to_owned),
            ..SelfSigned::for_ruc("DEMO S.A.", "80069563-1", 30)
        };
        let (key, cert) = spec.generate().expect("certificate");
        let key_pem = key.private_key_to_pem_pkcs8().expect("key PEM");
        let cert_pem = cert.to_pem().expect("certificate PEM");
        Company {
            key: SigningKey::new(key, &cert).expect("signing key"),
            identity: ClientIdentity::from_key_and_chain(&key_pem, &cert_pem),
            cert_pem,
        }
    }

    fn between<'a>(xml: &'a str, open: &str, close: &str) -> &'a str {
        let start = xml.find(open).expect(open) + open.len();
        let len = xml[start..].find(close).expect(close);
        &xml[start..start + len]
    }

    /// An invoice that validates against siRecepDE_v150.xsd (the XMLGEN vector of
    /// `shared/sifen/vectors/generated`), numbered `number` and dated now, changed by `edit`
    /// before signing, signed by `key` with its QR (generic test CSC 0001): what the service
    /// sends. Returns the CDC and the signed rDE.
    fn schema_valid_de(number: u32, key: &SigningKey, edit: impl Fn(String) -> String) -> (String, String) {
        const VECTOR_CDC: &str = "01800695631001001000000122025011511234567899";
        let vector = std::fs::read_to_string(kuatia_tests::sifen_reference(
            "vectors/generated/fe-xmlgen-unsigned.xml",
        ))
        .expect("the XMLGEN vector (shared/sifen or vendor/sifen)");
        let local = kuatia_domain::local_time::paraguay(Utc::now());
        let stamp = local.format("%Y-%m-%dT%H:%M:%S").to_string();
        let base = format!(
            "01800695631001001{number:07}2{}1123456789",
            local.format("%Y%m%d")
        );
        let cdc = format!("{base}{}", modulo11(&base));
        let unsigned = vector[vector.find("<rDE").expect("rDE")..].trim_end();
        let signed_at = between(unsigned, "<dFecFirma>", "</dFecFirma>").to_owned();
        let unsigned = unsigned
            .replace(VECTOR_CDC, &cdc)
            .replace(
                &format!("<dDVId>{}</dDVId>", &VECTOR_CDC[43..]),
                &format!("<dDVId>{}</dDVId>", &cdc[43..]),
            )
            .replace(
                "<dNumDoc>0000001</dNumDoc>",
                &format!("<dNumDoc>{number:07}</dNumDoc>"),
            )
            .replace("2025-01-15T10:00:00", &stamp)
            .replace(&signed_at, &stamp);
        let unsigned = edit(unsigned);
        let mut signed = sign_de(&unsigned, key).expect("signed");
        let url = qr_url(
            &QrData {
                environment: SifenEnvironment::Test,
                cdc: &cdc,
                emitted_at: between(&unsigned, "<dFeEmiDE>", "</dFeEmiDE>"),
                receiver: QrReceiver::Ruc(between(&unsigned, "<dRucRec>", "</dRucRec>")),
                total: between(&unsigned, "<dTotGralOpe>", "</dTotGralOpe>"),
                total_iva: between(&unsigned, "<dTotIVA>", "</dTotIVA>"),
                items: unsigned.matches("<gCamItem>").count(),
                digest_value: &signed.digest_value,
            },
            &Csc {
                id: "0001",
                secret: "ABCD0000000000000000000000000000",
            },
        )
        .expect("QR");
        append_qr(&mut signed.xml, &url).expect("QR appended");
        (cdc, signed.xml)
    }

    fn quick() -> SoapClientConfig {
        SoapClientConfig {
            connect_timeout_ms: 5_000,
            read_timeout_ms: 5_000,
            total_timeout_ms: 10_000,
            ..SoapClientConfig::default()
        }
    }

    fn with_xsd() -> SimConfig {
        SimConfig {
            xsd_dir: Some(kuatia_tests::sifen_xsd_dir()),
            require_signature: true,
            ..SimConfig::default()
        }
    }

    /// A simulator over HTTPS with a fresh self-signed server certificate (its PEM returned,
    /// for the clients to trust).
    async fn https_sim(config: SimConfig, client_auth: ClientAuth) -> (RunningSimulator, Vec<u8>) {
        let server = ServerCertificate::self_signed(&["127.0.0.1", "localhost"]).expect("server certificate");
        let tls = server.tls(client_auth).expect("TLS");
        let sim = sifen_sim::start_tls("127.0.0.1:0", config, tls)
            .await
            .expect("simulator");
        assert!(sim.base_url().starts_with("https://"), "{}", sim.base_url());
        (sim, server.cert_pem)
    }

    #[tokio::test]
    async fn a_signed_de_goes_over_mutual_tls_is_approved_and_its_transmitter_recorded() {
        let (sim, server_pem) = https_sim(with_xsd(), ClientAuth::Required).await;
        let demo = company(Some("80069563-1"));
        // The server certificate is trusted through the configuration, as the service does
        // (KUATIA_SIFEN_EXTRA_ROOTS_FILE).
        let roots = std::env::temp_dir().join(format!("kuatia-sim-root-{}.pem", uuid::Uuid::now_v7()));
        std::fs::write(&roots, &server_pem).expect("write the root");
        let config = SoapClientConfig {
            extra_roots_file: Some(roots.clone()),
            ..quick()
        };
        let client = SifenClient::new(&sim.base_url(), &config, Some(&demo.identity), None).expect("client");

        let (cdc, xml) = schema_valid_de(1, &demo.key, |x| x);
        let answer = client.send_de(1, &xml).await.expect("answer").result;
        assert_eq!(answer.code(), Some("0260"), "{answer:?}");
        assert_eq!(answer.status, DocumentStatus::Approved);
        let query = client.query_de(2, &cdc).await.expect("answer").result;
        assert!(query.is_found(), "{query:?}");

        // A lot over the same connection settings: its transmitter is recorded too.
        let (lot_cdc, lot_xml) = schema_valid_de(2, &demo.key, |x| x);
        let lot = client.send_lot(3, &[&lot_xml]).await.expect("answer").result;
        let number = lot.lot_number.expect("dProtConsLote");
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let result = client
                .lot_result(4, &LotQuery::Number(number.clone()))
                .await
                .expect("answer")
                .result;
            if result.state() == LotState::Done {
                assert_eq!(result.documents[0].status, DocumentStatus::Approved, "{result:?}");
                break;
            }
            assert!(Instant::now() < deadline, "the lot never finished");
            tokio::time::sleep(Duration::from_millis(200)).await;
        }

        let stats = sim.simulator.stats();
        assert_eq!(
            stats.transmitters.get(&cdc).map(String::as_str),
            Some("80069563-1")
        );
        assert_eq!(
            stats.transmitters.get(&lot_cdc).map(String::as_str),
            Some("80069563-1")
        );
        assert_eq!(stats.totals.foreign_transmissions, 0);
        assert_eq!(stats.totals.handshakes_refused, 0);
        std::fs::remove_file(&roots).expect("remove the root");
    }

    #[tokio::test]
    async fn without_a_client_certificate_the_handshake_is_refused_and_nothing_was_sent() {
        let (sim, server_pem) = https_sim(with_xsd(), ClientAuth::Required).await;
        let demo = company(Some("80069563-1"));
        let (cdc, xml) = schema_valid_de(1, &demo.key, |x| x);

        let anonymous = SifenClient::new(&sim.base_url(), &quick(), None, Some(&server_pem)).expect("client");
        let err = anonymous.send_de(1, &xml).await.unwrap_err();
        assert!(matches!(err, SoapError::NotSent { .. }), "{err:?}");
        assert_eq!(err.delivery(), Delivery::NotSent);

        // Nor does a client that does not trust the simulator's certificate get through.
        let distrustful =
            SifenClient::new(&sim.base_url(), &quick(), Some(&demo.identity), None).expect("client");
        let err = distrustful.send_de(2, &xml).await.unwrap_err();
        assert_eq!(err.delivery(), Delivery::NotSent, "{err:?}");

        // The server counts a refused handshake once its side of it ends, maybe just after the
        // client's.
        let deadline = Instant::now() + Duration::from_secs(5);
        while sim.simulator.stats().totals.handshakes_refused < 2 {
            assert!(Instant::now() < deadline, "{:?}", sim.simulator.stats().totals);
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert!(sim.simulator.stats().totals.requests.is_empty());

        // The same DE with the certificate: it was never received, so it is approved now.
        let client = SifenClient::new(&sim.base_url(), &quick(), Some(&demo.identity), Some(&server_pem))
            .expect("client");
        let answer = client.send_de(3, &xml).await.expect("answer").result;
        assert_eq!(answer.code(), Some("0260"), "{answer:?}");
        assert_eq!(sim.simulator.stats().approvals.get(&cdc), Some(&1));
    }

    #[tokio::test]
    async fn a_client_certificate_the_client_ca_did_not_sign_is_refused() {
        let demo = company(Some("80069563-1"));
        // The CA is the company's own self-signed certificate: only it is accepted.
        let (sim, server_pem) =
            https_sim(with_xsd(), ClientAuth::RequiredFromCa(demo.cert_pem.clone())).await;
        let (_, xml) = schema_valid_de(1, &demo.key, |x| x);

        let impostor = company(Some("80069563-1"));
        let client = SifenClient::new(
            &sim.base_url(),
            &quick(),
            Some(&impostor.identity),
            Some(&server_pem),
        )
        .expect("client");
        let err = client.send_de(1, &xml).await.unwrap_err();
        assert!(matches!(err, SoapError::NotSent { .. }), "{err:?}");
        assert!(sim.simulator.stats().totals.requests.is_empty());

        let client = SifenClient::new(&sim.base_url(), &quick(), Some(&demo.identity), Some(&server_pem))
            .expect("client");
        let answer = client.send_de(2, &xml).await.expect("answer").result;
        assert_eq!(answer.code(), Some("0260"), "{answer:?}");
    }

    #[tokio::test]
    async fn the_client_certificate_must_name_a_ruc_and_one_not_the_issuers_is_recorded() {
        let (sim, server_pem) = https_sim(with_xsd(), ClientAuth::Required).await;
        let demo = company(Some("80069563-1"));
        let (cdc, xml) = schema_valid_de(1, &demo.key, |x| x);

        let nameless = company(None);
        let client = SifenClient::new(
            &sim.base_url(),
            &quick(),
            Some(&nameless.identity),
            Some(&server_pem),
        )
        .expect("client");
        let answer = client.send_de(1, &xml).await.expect("answer").result;
        assert_eq!(answer.code(), Some("0007"), "{answer:?}");
        assert_eq!(answer.status, DocumentStatus::Rejected);

        // Another taxpayer's certificate transmits the DE: approved (SIFEN has no code for it)
        // and recorded.
        let other = company(Some("80013884-8"));
        let client = SifenClient::new(
            &sim.base_url(),
            &quick(),
            Some(&other.identity),
            Some(&server_pem),
        )
        .expect("client");
        let answer = client.send_de(2, &xml).await.expect("answer").result;
        assert_eq!(answer.code(), Some("0260"), "{answer:?}");
        let stats = sim.simulator.stats();
        assert_eq!(
            stats.transmitters.get(&cdc).map(String::as_str),
            Some("80013884-8")
        );
        assert_eq!(stats.totals.foreign_transmissions, 1);
    }

    #[tokio::test]
    async fn a_de_that_breaks_the_schema_is_answered_0160_before_any_other_rule() {
        let demo = company(Some("80069563-1"));
        // dDesTipEmi is mandatory in the schema, and one rule of the Manual reads it (1051, its
        // description): with it removed (and the DE signed and its QR computed after), the schema
        // objects first, and without the schema that rule does.
        let remove = |x: String| x.replacen("<dDesTipEmi>Normal</dDesTipEmi>", "", 1);
        let (cdc, broken) = schema_valid_de(1, &demo.key, remove);

        let lenient = sifen_sim::start("127.0.0.1:0", SimConfig::default())
            .await
            .expect("simulator");
        let client = SifenClient::new(&lenient.base_url(), &quick(), None, None).expect("client");
        let answer = client.send_de(1, &broken).await.expect("answer").result;
        assert_eq!(answer.code(), Some("1051"), "only that rule objects: {answer:?}");

        let strict = sifen_sim::start("127.0.0.1:0", with_xsd())
            .await
            .expect("simulator");
        let client = SifenClient::new(&strict.base_url(), &quick(), None, None).expect("client");
        let answer = client.send_de(1, &broken).await.expect("answer");
        assert_eq!(answer.result.code(), Some("0160"), "{:?}", answer.result);
        assert_eq!(answer.result.status, DocumentStatus::Rejected);
        let message = &answer.result.results[0].message;
        assert!(
            message.starts_with("XML malformado: [") && message.contains("dDesTipEmi"),
            "{message}"
        );
        assert!(strict.simulator.stats().approvals.is_empty());

        // In a lot the same DE ends rejected with the same code.
        let lot = client.send_lot(2, &[&broken]).await.expect("answer").result;
        let number = lot.lot_number.expect("dProtConsLote");
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let result = client
                .lot_result(3, &LotQuery::Number(number.clone()))
                .await
                .expect("answer")
                .result;
            if result.state() == LotState::Done {
                assert_eq!(result.documents[0].cdc, cdc);
                assert_eq!(result.documents[0].results[0].code, "0160", "{result:?}");
                break;
            }
            assert!(Instant::now() < deadline, "the lot never finished");
            tokio::time::sleep(Duration::from_millis(200)).await;
        }

        // The whole document validates: approved by the strict simulator.
        let (_, valid) = schema_valid_de(2, &demo.key, |x| x);
        let answer = client.send_de(4, &valid).await.expect("answer").result;
        assert_eq!(answer.code(), Some("0260"), "{answer:?}");

        // An event group is validated against siRecepEvento_v150.xsd: an unsigned one fails.
        let answer = client
            .send_events(5, &[&cancel_event(1, &cdc)])
            .await
            .expect("answer")
            .result;
        assert_eq!(answer.events[0].results[0].code, "0160", "{answer:?}");
    }
}
