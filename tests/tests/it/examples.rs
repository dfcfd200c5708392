//! `examples/`: the canonical documents the README's first hour posts, one of each type and
//! channel. Every file there is valid against today's intake as it is (only its `issue_datetime`
//! set to now, as the README does, and the company named, as an owner key must), is stored
//! `queued` with no issue, and ends `accepted` (by the SIFEN simulator, or printed on the
//! autoimpresor channel). A file added to the folder is checked here without a change to the test.

use chrono::{Duration, Utc};
use kuatia_infrastructure::sifen_sim::SimConfig;
use kuatia_tests::Simulated;
use kuatia_tests::{hours_ago, id, send};
use reqwest::Method;
use serde_json::{Value, json};
use std::collections::BTreeSet;

fn examples() -> Vec<(String, Value)> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|entry| entry.expect("an entry").path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "json"))
        .collect();
    files.sort();
    files
        .into_iter()
        .map(|path| {
            let name = path.file_name().expect("name").to_string_lossy().into_owned();
            let text = std::fs::read_to_string(&path).expect("readable");
            let doc = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{name}: {e}"));
            (name, doc)
        })
        .collect()
}

#[tokio::test]
async fn every_example_document_is_valid_as_written_and_accepted() {
    let f = Simulated::new(
        SimConfig {
            require_signature: true,
            ..SimConfig::default()
        },
        |_| {},
    )
    .await;
    // The setup of the README's first hour: the remisión's notice on the sifen channel, and an
    // autoimpresor channel on the same issuance point.
    let sifen = f.sifen_channel().await;
    let (status, patched) = send(
        f.req(Method::PATCH, &format!("/v1/emission-channels/{}", id(&sifen)))
            .json(&json!({"sifen": {"remision_notice": "Traslado conforme a la RG N° 41/2014 (texto de prueba)"}})),
    )
    .await;
    assert_eq!(status, 200, "{patched}");
    let today = Utc::now().date_naive();
    let (status, auto) = send(f.req(Method::POST, "/v1/emission-channels").json(&json!({
        "company_id": f.r.company,
        "channel": "autoimpresor",
        "credentials": {"endpoint": "https://reportes.example.com.py", "api_key": "clave-de-reportes"},
        "autoimpresor": {
            "authorization": "AUT-2026-001", "declared_software": "kuatia", "timbrado": "87654321",
            "valid_from": (today - Duration::days(30)).to_string(),
            "valid_to": (today + Duration::days(365)).to_string(),
            "branch_id": f.r.branch, "issuance_point_id": f.r.point,
            "range_start": 1, "range_end": 5000,
        },
    })))
    .await;
    assert_eq!(status, 201, "{auto}");

    let examples = examples();
    let mut covered = BTreeSet::new();
    let mut posted = Vec::new();
    for (name, mut doc) in examples {
        doc["issue_datetime"] = json!(hours_ago(0));
        doc["company_id"] = json!(f.r.company);
        let (status, checked) = send(f.req(Method::POST, "/v1/documents/validate").json(&doc)).await;
        assert_eq!(status, 200, "{name}: {checked}");
        assert_eq!(
            (&checked["valid"], &checked["errors"], &checked["warnings"]),
            (&json!(true), &json!([]), &json!([])),
            "{name}: {checked}"
        );
        let (status, stored) = send(
            f.req(Method::POST, "/v1/documents")
                .header("Idempotency-Key", format!("example-{name}"))
                .json(&doc),
        )
        .await;
        assert_eq!(status, 201, "{name}: {stored}");
        assert_eq!(
            (&stored["status"], &stored["errors"], &stored["warnings"]),
            (&json!("queued"), &json!([]), &json!([])),
            "{name}: {stored}"
        );
        let channel = stored["channel"].as_str().expect("channel").to_owned();
        let doc_type = stored["type"].as_str().expect("type").to_owned();
        covered.insert((doc_type, channel));
        posted.push((name, id(&stored)));
    }
    let ids: Vec<String> = posted.iter().map(|(_, doc)| doc.clone()).collect();
    let settled = f.settle(&ids, std::time::Duration::from_secs(30)).await;
    for ((name, _), status) in posted.iter().zip(&settled) {
        assert_eq!(status["status"], "accepted", "{name}: {status}");
    }

    // One of each type and channel, as the README says.
    let expected: BTreeSet<(String, String)> = [
        ("invoice", "sifen"),
        ("credit_note", "sifen"),
        ("debit_note", "sifen"),
        ("remision", "sifen"),
        ("autofactura", "sifen"),
        ("invoice", "autoimpresor"),
        ("receipt", "autoimpresor"),
    ]
    .into_iter()
    .map(|(t, c)| (t.to_owned(), c.to_owned()))
    .collect();
    assert_eq!(covered, expected);
    f.app.stop().await;
}
