//! Tests of the simulator: its configuration, its state file and requests that are not SOAP.

use super::*;
use crate::sifen_soap::messages;
use axum::http::StatusCode;
use chrono::Utc;

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
