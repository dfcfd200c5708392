//! SIFEN's rules (Manual Técnico v150 §12.4) end to end (issue 25): what intake refuses up front
//! with its own issue codes, what the simulator's independent rule engine
//! (`infrastructure/sifen-rules`) rejects with the rule's code, and — the proof on volume — a
//! thousand generated documents of every type that pass intake, the pipeline and that engine.

use crate::sifen_xml::{arb_document, autofactura, invoice, note, remision};
use kuatia_infrastructure::sifen_sim::{self, SimConfig};
use kuatia_tests::TestApp;
use kuatia_tests::{Ready, hours_ago, id, send};
use proptest::strategy::{Strategy, ValueTree};
use proptest::test_runner::{Config as ProptestConfig, RngAlgorithm, TestRng, TestRunner};
use reqwest::Method;
use serde_json::{Value, json};
use std::collections::BTreeSet;
use std::time::Duration;

const OTHER_RUC_INVOICE_CDC: &str = "01800138848001001123456412018121817819792239";

/// A document of the fixtures, made the tenant's and dated an hour ago.
fn ours(mut value: Value, r: &Ready) -> Value {
    value["company_id"] = json!(r.company);
    let issued = hours_ago(1);
    if let Some(transport) = value.get_mut("transport").and_then(Value::as_object_mut) {
        transport.remove("start_date");
        transport.remove("end_date");
        if transport.contains_key("invoice_date") {
            // The future invoice's date: the remisión's own day in Paraguay (rules 2604, 2605).
            transport.insert("invoice_date".into(), json!(issued[..10]));
        }
    }
    value["issue_datetime"] = json!(issued);
    // Due dates after the issue date.
    let today: chrono::NaiveDate = issued[..10].parse().expect("a date");
    let terms = &mut value["payment_terms"];
    if terms.get("due_date").is_some() {
        terms["due_date"] = json!((today + chrono::TimeDelta::days(30)).to_string());
    }
    if let Some(installments) = terms.get_mut("installments").and_then(Value::as_array_mut) {
        for (i, installment) in installments.iter_mut().enumerate() {
            installment["due_date"] =
                json!((today + chrono::TimeDelta::days(30 * (i as i64 + 1))).to_string());
        }
    }
    value
}

/// A tenant ready to issue every type on SIFEN: the remisión's legal notice set.
async fn ready_for_every_type(app: &TestApp, slug: &str, endpoint: &str) -> Ready {
    let r = app.ready_at(slug, endpoint).await;
    let (status, channels) = send(r.req(
        Method::GET,
        &format!("/v1/emission-channels?company_id={}", r.company),
    ))
    .await;
    assert_eq!(status, 200, "{channels}");
    let channel = channels
        .as_array()
        .and_then(|a| a.iter().find(|c| c["channel"] == "sifen"))
        .cloned()
        .expect("a sifen channel");
    let (status, patched) = send(
        r.req(Method::PATCH, &format!("/v1/emission-channels/{}", id(&channel)))
            .json(&json!({"sifen": {"remision_notice": "Traslado conforme a la RG 41/2014"}})),
    )
    .await;
    assert_eq!(status, 200, "{patched}");
    r
}

type Mutation = fn(&mut Value);

/// Each rule intake claims (`kuatia_sifen_rules::INTAKE`): a document of the fixtures broken in
/// that one way, the field and the issue code intake answers.
fn broken_at_intake() -> Vec<(&'static str, &'static str, &'static str, Value, Mutation)> {
    vec![
        (
            "1150",
            "issue_datetime_too_old",
            "issue_datetime",
            invoice(),
            |d| {
                d["issue_datetime"] = json!(hours_ago(24 * 31));
            },
        ),
        (
            "1151",
            "issue_datetime_in_future",
            "issue_datetime",
            invoice(),
            |d| {
                d["issue_datetime"] = json!(hours_ago(-24 * 6));
            },
        ),
        ("1309", "invalid_check_digit", "buyer.ruc", invoice(), |d| {
            d["buyer"]["ruc"] = json!("80013884-9");
        }),
        ("1321", "anonymous_total_limit", "buyer", invoice(), |d| {
            d["buyer"] = json!({"operation_type": "anonymous"});
            d["items"] = json!([{"description": "Tractor", "quantity": 1, "unit_price": 66000000,
                "tax_rate": 10, "tax_amount": 6000000, "total_amount": 66000000}]);
            d["totals"] = json!({"subtotal": 60000000, "tax_total": 6000000, "grand_total": 66000000});
        }),
        (
            "1316",
            "autofactura_buyer_not_issuer",
            "buyer.ruc",
            autofactura(),
            |d| {
                d["buyer"] =
                    json!({"ruc": "80013884-8", "legal_name": "CLIENTE S.A.", "operation_type": "b2b"});
            },
        ),
        (
            "1600",
            "conditionally_required",
            "payment_terms.card",
            invoice(),
            |d| {
                d["payment_terms"] = json!({"condition": "cash", "method": "card"});
            },
        ),
        (
            "1650",
            "conditionally_required",
            "payment_terms.check",
            invoice(),
            |d| {
                d["payment_terms"] = json!({"condition": "cash", "method": "check"});
            },
        ),
        (
            "2400",
            "conditionally_required",
            "associated_document",
            note("credit_note"),
            |d| {
                d.as_object_mut().expect("object").remove("associated_document");
            },
        ),
        (
            "2402",
            "invalid_check_digit",
            "associated_document.cdc",
            note("credit_note"),
            |d| {
                let cdc = d["associated_document"]["cdc"].as_str().expect("cdc").to_owned();
                let last = (cdc.as_bytes()[43] - b'0' + 1) % 10;
                d["associated_document"]["cdc"] = json!(format!("{}{last}", &cdc[..43]));
            },
        ),
        (
            "2403",
            "associated_document_other_issuer",
            "associated_document.cdc",
            note("debit_note"),
            |d| {
                d["associated_document"]["cdc"] = json!(OTHER_RUC_INVOICE_CDC);
            },
        ),
        (
            "2414",
            "associated_document_not_invoice",
            "associated_document.cdc",
            note("credit_note"),
            |d| {
                d["associated_document"]["cdc"] = json!(crate::sifen_xml::remision_cdc());
            },
        ),
        ("2100", "conditionally_required", "transport", remision(), |d| {
            d.as_object_mut().expect("object").remove("transport");
        }),
        (
            "1318",
            "conditionally_required",
            "buyer.address",
            remision(),
            |d| {
                d["buyer"].as_object_mut().expect("object").remove("address");
            },
        ),
        (
            "2605",
            "conditionally_required",
            "transport.invoice_date",
            remision(),
            |d| {
                d["transport"]
                    .as_object_mut()
                    .expect("object")
                    .remove("invoice_date");
            },
        ),
        (
            "2606",
            "remision_buyer_not_issuer",
            "buyer.ruc",
            remision(),
            |d| {
                d["reason"] = json!(7);
            },
        ),
        // Found by intake's building of the DE.
        (
            "2604",
            "invalid_for_sifen",
            "transport.invoice_date",
            remision(),
            |d| {
                let issued: chrono::NaiveDate = d["transport"]["invoice_date"]
                    .as_str()
                    .expect("date")
                    .parse()
                    .expect("date");
                d["transport"]["invoice_date"] = json!((issued + chrono::Months::new(1)).to_string());
            },
        ),
        ("2413", "invalid_for_sifen", "transaction_type", invoice(), |d| {
            d["transaction_type"] = json!(12);
        }),
        (
            "2440",
            "invalid_for_sifen",
            "associated_document.timbrado",
            note("credit_note"),
            |d| {
                // The company's own electronic timbrado (kuatia_tests::add_company_at).
                d["associated_document"] = json!({"timbrado": "12345678", "establishment": "001", "point": "001",
                "number": "0000123", "issue_date": "2025-05-30"});
            },
        ),
    ]
}

/// Every rule intake claims to check is refused by `POST /v1/documents/validate` with its issue
/// code at its field, on a document the same endpoint otherwise accepts.
#[tokio::test]
async fn each_rule_intake_checks_is_refused_there_with_its_issue_code() {
    let sim = sifen_sim::start("127.0.0.1:0", SimConfig::default())
        .await
        .expect("simulator");
    let app = TestApp::spawn_with(|c| c.rate_limit_per_key = 100_000).await;
    let r = ready_for_every_type(&app, "rules-intake", &sim.base_url()).await;
    let validate = |doc: Value| {
        let request = r.req(Method::POST, "/v1/documents/validate").json(&doc);
        async move { send(request).await }
    };
    let mut claimed: BTreeSet<(String, String)> = kuatia_sifen_rules::INTAKE
        .iter()
        .map(|(rule, issue)| ((*rule).to_owned(), (*issue).to_owned()))
        .collect();
    for (rule, issue, field, fixture, mutate) in broken_at_intake() {
        let valid = ours(fixture, &r);
        let (status, answer) = validate(valid.clone()).await;
        assert_eq!(
            (status, &answer["valid"]),
            (200, &json!(true)),
            "rule {rule}: the fixture {answer}"
        );
        let mut broken = valid;
        mutate(&mut broken);
        let (status, answer) = validate(broken).await;
        assert_eq!(status, 200, "{answer}");
        let errors = answer["errors"].as_array().cloned().unwrap_or_default();
        assert!(
            errors.iter().any(|e| e["code"] == issue && e["field"] == field),
            "rule {rule}: expected {issue} at {field}, got {answer}"
        );
        claimed.remove(&(rule.to_owned(), issue.to_owned()));
    }
    // 2417 needs one of the tenant's invoices SIFEN approved: a credit note for more than it.
    let (status, body) = send(
        r.req(Method::POST, "/v1/documents")
            .header("Idempotency-Key", "rules-invoice")
            .json(&ours(invoice(), &r)),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    let invoice_id = id(&body);
    wait_accepted(&r, &invoice_id).await;
    let mut credit = ours(note("credit_note"), &r);
    credit["associated_document"] = json!({"document_id": invoice_id});
    let (_, answer) = validate(credit.clone()).await;
    assert_eq!(answer["valid"], true, "within the invoice's total: {answer}");
    let total = credit["totals"]["grand_total"].as_i64().expect("a total");
    credit["items"][0]["unit_price"] =
        json!(credit["items"][0]["unit_price"].as_i64().expect("price") + 1_000_000);
    credit["items"][0]["total_amount"] =
        json!(credit["items"][0]["total_amount"].as_i64().expect("total") + 1_000_000);
    let tax = |t: i64, rate: i64| (t * rate + (100 + rate) / 2) / (100 + rate);
    let rate = credit["items"][0]["tax_rate"].as_i64().expect("rate");
    let old_tax = credit["items"][0]["tax_amount"].as_i64().expect("tax");
    let new_tax = tax(credit["items"][0]["total_amount"].as_i64().expect("total"), rate);
    credit["items"][0]["tax_amount"] = json!(new_tax);
    let tax_total = credit["totals"]["tax_total"].as_i64().expect("tax total") - old_tax + new_tax;
    credit["totals"] = json!({"subtotal": total + 1_000_000 - tax_total, "tax_total": tax_total,
                              "grand_total": total + 1_000_000});
    let (_, answer) = validate(credit).await;
    let errors = answer["errors"].as_array().cloned().unwrap_or_default();
    assert!(
        errors
            .iter()
            .any(|e| e["code"] == "credit_note_exceeds_invoice" && e["field"] == "totals.grand_total"),
        "rule 2417: {answer}"
    );
    claimed.remove(&("2417".to_owned(), "credit_note_exceeds_invoice".to_owned()));
    assert!(
        claimed.is_empty(),
        "INTAKE claims rules no test breaks: {claimed:?}"
    );
    app.stop().await;
}

/// Rule 2417 counts the earlier credit notes too ("actual o pre-existentes"): notes of one invoice
/// are taken while they add up to at most its total, and the next is refused saying how much is
/// left; a note that ended without fiscal effect (validation_failed) does not count.
#[tokio::test]
async fn the_credit_notes_of_an_invoice_add_up_to_at_most_its_total() {
    let sim = sifen_sim::start("127.0.0.1:0", SimConfig::default())
        .await
        .expect("simulator");
    let app = TestApp::spawn_with(|c| c.rate_limit_per_key = 100_000).await;
    let r = ready_for_every_type(&app, "rules-2417", &sim.base_url()).await;
    let post = |doc: Value, key: String| {
        let request = r
            .req(Method::POST, "/v1/documents")
            .header("Idempotency-Key", key)
            .json(&doc);
        async move { send(request).await }
    };
    let (status, body) = post(ours(invoice(), &r), "2417-invoice".into()).await;
    assert_eq!(status, 201, "{body}");
    let invoice_id = id(&body);
    wait_accepted(&r, &invoice_id).await;
    let invoice_total = body["grand_total"].as_i64().expect("the invoice's total");
    let mut credit = ours(note("credit_note"), &r);
    credit["associated_document"] = json!({"document_id": invoice_id});
    let note_total = credit["totals"]["grand_total"].as_i64().expect("a total");
    let fits = invoice_total / note_total;
    assert!((1..=20).contains(&fits), "{invoice_total} / {note_total}");
    // A note refused at intake holds nothing.
    let mut wrong = credit.clone();
    wrong["external_id"] = json!("NC-2417-WRONG");
    wrong["totals"]["tax_total"] = json!(1);
    let (status, body) = post(wrong, "2417-wrong".into()).await;
    assert_eq!(
        (status, body["status"].as_str()),
        (201, Some("validation_failed")),
        "{body}"
    );
    for n in 0..fits {
        let mut note = credit.clone();
        note["external_id"] = json!(format!("NC-2417-{n}"));
        let (status, body) = post(note, format!("2417-{n}")).await;
        assert_eq!(
            (status, body["status"].as_str()),
            (201, Some("queued")),
            "note {n}: {body}"
        );
    }
    let mut over = credit.clone();
    over["external_id"] = json!("NC-2417-OVER");
    let (status, body) = post(over, "2417-over".into()).await;
    assert_eq!(
        (status, body["status"].as_str()),
        (201, Some("validation_failed")),
        "{body}"
    );
    let error = &body["errors"][0];
    assert_eq!(
        (error["code"].as_str(), error["field"].as_str()),
        (Some("credit_note_exceeds_invoice"), Some("totals.grand_total")),
        "{body}"
    );
    let left = invoice_total - fits * note_total;
    assert!(
        error["message"].as_str().is_some_and(|m| m.contains(&format!(
            "already credit {} of its total {invoice_total}, so at most {left} is left",
            fits * note_total
        ))),
        "{body}"
    );
    app.stop().await;
}

/// A thousand generated documents of the five types (seeded), issued through intake and the
/// pipeline against the simulator with its whole rule engine and the XSD on: every one accepted.
/// Notes refer to invoices of the same run by `associated_document.document_id`.
#[tokio::test]
async fn a_thousand_generated_documents_pass_intake_the_pipeline_and_the_simulators_rules() {
    const COUNT: usize = 1_000;
    let sim = sifen_sim::start(
        "127.0.0.1:0",
        SimConfig {
            xsd_dir: Some(kuatia_tests::sifen_xsd_dir()),
            require_signature: true,
            lot_processing_ms: 50,
            ..SimConfig::default()
        },
    )
    .await
    .expect("simulator");
    let app = TestApp::spawn_with(|c| c.rate_limit_per_key = 1_000_000).await;
    let r = ready_for_every_type(&app, "rules-volume", &sim.base_url()).await;
    let mut runner = TestRunner::new_with_rng(
        ProptestConfig::default(),
        TestRng::from_seed(RngAlgorithm::ChaCha, &[25; 32]),
    );
    let strategy = arb_document();
    let mut generated: Vec<Value> = (0..COUNT)
        .map(|_| strategy.new_tree(&mut runner).expect("a document").current())
        .collect();
    // Invoices first, so that notes can refer to approved ones.
    generated.sort_by_key(|d| d["type"] != "invoice");
    let mut posted = Vec::new();
    let mut invoices: Vec<(String, i64)> = Vec::new();
    for (n, mut doc) in generated.into_iter().enumerate() {
        doc = ours(doc, &r);
        doc["external_id"] = json!(format!("VOL-{n}"));
        let kind = doc["type"].as_str().unwrap_or_default().to_owned();
        let total = doc["totals"]["grand_total"].as_i64().unwrap_or(i64::MAX);
        if kind == "credit_note" || kind == "debit_note" {
            // The credit notes of an invoice add up to at most its total (rule 2417): the
            // second number is what is left to credit.
            let candidates: Vec<usize> = (0..invoices.len())
                .filter(|&i| kind == "debit_note" || invoices[i].1 >= total)
                .collect();
            if candidates.is_empty() {
                continue;
            }
            let chosen = candidates[n % candidates.len()];
            if kind == "credit_note" {
                invoices[chosen].1 -= total;
            }
            let invoice = invoices[chosen].0.clone();
            wait_accepted(&r, &invoice).await;
            doc["associated_document"] = json!({"document_id": invoice});
        }
        let (status, body) = send(
            r.req(Method::POST, "/v1/documents")
                .header("Idempotency-Key", format!("vol-{n}"))
                .json(&doc),
        )
        .await;
        assert_eq!(status, 201, "{body}\n{doc:#}");
        assert_eq!(body["status"], "queued", "{body}\n{doc:#}");
        let document = id(&body);
        if kind == "invoice" && invoices.len() < 200 {
            invoices.push((document.clone(), total));
        }
        posted.push((document, doc));
    }
    assert!(posted.len() >= COUNT * 9 / 10, "{} posted", posted.len());
    let types: BTreeSet<String> = posted
        .iter()
        .filter_map(|(_, d)| d["type"].as_str().map(str::to_owned))
        .collect();
    assert_eq!(types.len(), 5, "{types:?}");
    for (document, doc) in &posted {
        let status = wait_final(&r, document).await;
        if status["status"] != "accepted" {
            panic!("{status}\nSIFEN said: {}\n{doc:#}", rejection(&r, document).await);
        }
    }
    app.stop().await;
}

/// Waits until the document is final (validation failures included); returns its status.
async fn wait_final(r: &Ready, document: &str) -> Value {
    let done = |s: &Value| {
        matches!(
            s["status"].as_str(),
            Some("accepted" | "rejected" | "failed_terminal" | "validation_failed")
        )
    };
    r.until(&[document.to_owned()], Duration::from_secs(300), done)
        .await
        .remove(0)
}

async fn wait_accepted(r: &Ready, document: &str) {
    let status = wait_final(r, document).await;
    if status["status"] != "accepted" {
        panic!("{status}\nSIFEN said: {}", rejection(r, document).await);
    }
}

/// The document's last `DocumentRejected` event, for a failure's message.
async fn rejection(r: &Ready, document: &str) -> Value {
    let (_, timeline) = send(r.req(Method::GET, &format!("/v1/documents/{document}/timeline"))).await;
    timeline
        .as_array()
        .and_then(|t| t.iter().rev().find(|e| e["type"] == "DocumentRejected"))
        .cloned()
        .unwrap_or(Value::Null)
}

/// The simulator's rule engine on DEs our own builder wrote: each fixture's DE is approved as
/// built, and the same DE broken in one place is rejected with the rule's code and the Manual's
/// message (unsigned DEs: the simulator accepts them unless told otherwise, so that a mutation
/// reaches the rules rather than the signature).
#[tokio::test]
async fn des_our_builder_wrote_broken_in_one_place_are_rejected_with_that_rules_code() {
    use crate::sifen_xml::{build, valid_document};
    use kuatia_domain::channel::SifenEnvironment;
    use kuatia_infrastructure::sifen::sign::{self, SigningKey};
    use kuatia_infrastructure::sifen_soap::{SifenClient, SoapClientConfig};
    let sim = sifen_sim::start(
        "127.0.0.1:0",
        SimConfig {
            // The fixtures are dated 2026-03-02; the dates are not what this test is about, nor
            // the signature (a mutation after signing changes the digest) and the QR.
            check_dates: false,
            verify_signature: false,
            check_qr: false,
            xsd_dir: Some(kuatia_tests::sifen_xsd_dir()),
            ..SimConfig::default()
        },
    )
    .await
    .expect("simulator");
    let client = SifenClient::new(&sim.base_url(), &SoapClientConfig::default(), None, None).expect("client");
    // Valid since before the fixtures' date (2026-03-02), as the signer's must be (rule 2450).
    let mut spec = kuatia_infrastructure::selfsigned::SelfSigned::for_ruc(
        "DE GENERACION ELECTRONICA S.A.",
        "80069563-1",
        30,
    );
    spec.not_before = "2026-01-01T00:00:00Z".parse().expect("a time");
    let (pkey, cert) = spec.generate().expect("certificate");
    let key = SigningKey::new(pkey, &cert).expect("signing key");
    let mut number = 0;
    let mut de_of = |value: Value| {
        number += 1;
        let built = build(&valid_document(value), SifenEnvironment::Test, number);
        let mut xml = sign::sign_de(&built.xml, &key).expect("signed").xml;
        let qr = format!(
            "https://ekuatia.set.gov.py/consultas-test/qr?nVersion=150&Id={}&cHashQR={}",
            built.cdc.as_str(),
            "0".repeat(64)
        );
        sign::append_qr(&mut xml, &qr).expect("QR");
        xml
    };
    let reason_7 = {
        let mut value = remision();
        value["reason"] = json!(7);
        value["buyer"]["ruc"] = json!("80069563-1");
        value
    };
    let fixtures = [
        ("invoice", de_of(invoice())),
        ("credit note", de_of(note("credit_note"))),
        ("debit note", de_of(note("debit_note"))),
        ("autofactura", de_of(autofactura())),
        ("remisión", de_of(remision())),
        ("remisión between premises", de_of(reason_7)),
    ];
    let mut id = 0;
    let xml = |name: &str| {
        fixtures
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, x)| x.clone())
            .expect("fixture")
    };
    // Each: the fixture, what is replaced by what, and the rule's code.
    let between = |text: &str, open: &str, close: &str| -> String {
        let start = text.find(open).expect("open tag") + open.len();
        let end = start + text[start..].find(close).expect("close tag");
        text[start..end].to_owned()
    };
    let invoice_xml = xml("invoice");
    let first_iva = between(&invoice_xml, "<dLiqIVAItem>", "</dLiqIVAItem>");
    let dsub10 = between(&invoice_xml, "<dSub10>", "</dSub10>");
    let cases: Vec<(&str, String, String, &str)> = vec![
        // D3: the receiver's city described by another name (1329).
        (
            "invoice",
            "<dDesCiuRec>ASUNCION (DISTRITO)</dDesCiuRec>".into(),
            "<dDesCiuRec>LUQUE</dDesCiuRec>".into(),
            "1329",
        ),
        // E8.2: an item's IVA that is not its base × rate (1913).
        (
            "invoice",
            format!("<dLiqIVAItem>{first_iva}</dLiqIVAItem>"),
            "<dLiqIVAItem>1</dLiqIVAItem>".into(),
            "1913",
        ),
        // F: the 10 % subtotal that is not the sum of its items (2359).
        (
            "invoice",
            format!("<dSub10>{dsub10}</dSub10>"),
            "<dSub10>1</dSub10>".into(),
            "2359",
        ),
        // E6: a sale's remisión without the future invoice's date (2605).
        (
            "remisión",
            format!(
                "<dFecEm>{}</dFecEm>",
                between(&xml("remisión"), "<dFecEm>", "</dFecEm>")
            ),
            String::new(),
            "2605",
        ),
        // E6: goods moved between the company's premises to someone else (2606).
        (
            "remisión between premises",
            "<dRucRec>80069563</dRucRec><dDVRec>1</dDVRec>".into(),
            "<dRucRec>80013884</dRucRec><dDVRec>8</dDVRec>".into(),
            "2606",
        ),
        // E10: the means of transport described as another (2104).
        (
            "remisión",
            "<dDesModTrans>Terrestre</dDesModTrans>".into(),
            "<dDesModTrans>Aéreo</dDesModTrans>".into(),
            "2104",
        ),
        // H: a note adjusting a remisión (2414).
        (
            "credit note",
            format!("<dCdCDERef>{}</dCdCDERef>", crate::sifen_xml::invoice_cdc()),
            format!("<dCdCDERef>{}</dCdCDERef>", crate::sifen_xml::remision_cdc()),
            "2414",
        ),
    ];
    let table = kuatia_sifen_rules::table();
    for (fixture, from, to, code) in cases {
        let original = xml(fixture);
        assert!(
            !from.is_empty() && original.contains(&from),
            "{fixture}: {from:?} is not in\n{original}"
        );
        let broken = original.replacen(&from, &to, 1);
        id += 1;
        let answer = client.send_de(id, &broken).await.expect("answer").result;
        let message = table
            .iter()
            .find(|r| r.code == code)
            .map(|r| r.message.clone())
            .expect("a rule of the table");
        assert_eq!(
            answer.code(),
            Some(code),
            "{fixture} with {to:?} for {from:?}: {answer:?}"
        );
        assert_eq!(answer.results[0].message, message, "{answer:?}");
    }
    // The same DEs unbroken, after (a rejected CDC may be sent again; an approved one may not).
    for (name, xml) in &fixtures {
        id += 1;
        let answer = client.send_de(id, xml).await.expect("answer").result;
        assert_eq!(answer.code(), Some("0260"), "the {name} as built: {answer:?}");
    }
}
