//! The SIFEN pipeline end to end, black-box: documents posted over HTTP to a service whose sifen
//! channel points at the SIFEN simulator (in-process, real HTTP and SOAP), on each backend.

use kuatia_domain::sifen::cdc::Cdc;
use kuatia_infrastructure::sifen_sim::SimConfig;
use kuatia_tests::{Simulated, TestApp, hours_ago, id, post_together, send};
use reqwest::Method;
use serde_json::{Value, json};
use std::collections::BTreeSet;
use std::time::Duration;

fn tool(name: &str, args: &[&str]) -> (bool, String) {
    let out = std::process::Command::new(name)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("`{name}` is needed (Debian: libxml2-utils / xmlsec1): {e}"));
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

#[tokio::test]
async fn an_invoice_is_numbered_signed_sent_and_accepted_and_its_xml_verifies() {
    let f = Simulated::new(
        SimConfig {
            require_signature: true,
            ..SimConfig::default()
        },
        |_| {},
    )
    .await;
    let doc = f.post(&f.invoice("PIPE-1")).await;
    let status = f
        .settle(std::slice::from_ref(&doc), Duration::from_secs(20))
        .await;
    assert_eq!(status[0]["status"], "accepted", "{}", status[0]);
    assert_eq!(status[0]["number"], "001-001-0000001", "{}", status[0]);
    let cdc = status[0]["cdc"].as_str().expect("cdc").to_owned();
    Cdc::parse(&cdc).expect("a CDC with a right check digit");

    // The KuDE is rendered after the acceptance: wait for its artifact, the last event.
    let kude = |e: &Value| e["type"] == "ArtifactRecorded" && e["data"]["ArtifactRecorded"]["kind"] == "kude";
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let timeline = loop {
        let timeline = f.timeline(&doc).await;
        if timeline.iter().any(kude) || std::time::Instant::now() > deadline {
            break timeline;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let types: Vec<&str> = timeline.iter().filter_map(|e| e["type"].as_str()).collect();
    assert_eq!(
        types,
        vec![
            "DocumentReceived",
            "DocumentValidated",
            "DocumentQueued",
            "DocumentTransformStarted",
            "DocumentTransformed",
            "ArtifactRecorded",
            "ArtifactRecorded",
            "DocumentSigned",
            "DocumentSubmitted",
            "ArtifactRecorded",
            "DocumentAccepted",
            "ArtifactRecorded",
        ]
    );
    // Transformed, then the normalized payload and the signed XML, in the same append.
    let kinds: Vec<&str> = timeline[5..7]
        .iter()
        .filter_map(|e| e["data"]["ArtifactRecorded"]["kind"].as_str())
        .collect();
    assert_eq!(kinds, ["normalized_payload", "signed_xml"]);
    assert!(kude(&timeline[11]), "{:?}", timeline[11]);
    // The service kept the document folded in its store's cache as its events went by
    // (`kuatia_application::aggregate_cache`): it holds what folding every event gives.
    {
        use cqrs_es::EventStore;
        use kuatia_domain::document::aggregate::{Document, stream_id};
        let tenant = kuatia_domain::tenancy::TenantId::from_uuid(f.r.tenant.parse().expect("tenant"));
        let store = f.app.service().database.store();
        let stream = stream_id(tenant, doc.parse().expect("id"));
        let aggregates =
            kuatia_application::aggregate::AggregateStore::<Document>::new(store.clone(), tenant);
        let mut folded = Document::default();
        for envelope in aggregates.load_events(&stream).await.expect("events") {
            cqrs_es::Aggregate::apply(&mut folded, envelope.payload);
        }
        let cached = store
            .aggregate_cache()
            .and_then(|c| c.get::<Document>(tenant, &stream));
        assert!(
            cached == Some((12, folded)),
            "the cached document differs from its events"
        );
    }
    // The first attempt is on record with the signature, in the same append (one transaction:
    // one time, consecutive positions), and the job sends it without an append of its own.
    let (signed, submitted) = (&timeline[7], &timeline[8]);
    assert_eq!(
        submitted["data"]["DocumentSubmitted"]["attempt"], 1,
        "{submitted}"
    );
    assert_eq!(signed["at"], submitted["at"], "{signed} {submitted}");
    assert_eq!(
        submitted["position"].as_i64(),
        signed["position"].as_i64().map(|p| p + 1),
        "{signed} {submitted}"
    );
    let accepted = &timeline[10]["data"]["DocumentAccepted"];
    assert_eq!(accepted["code"], "0260", "{accepted}");
    assert_eq!(timeline[10]["actor"]["type"], "system");
    assert_eq!(timeline[10]["actor"]["id"], "sifen");

    // The stored bytes: the XSD accepts them, xmlsec1 verifies the signature, a tampered copy
    // fails, and the QR carries the CDC.
    let xml = f.signed_xml(&timeline);
    assert!(xml.contains(&format!("<DE Id=\"{cdc}\">")));
    assert!(xml.contains(&format!("Id={cdc}&amp;")), "the QR names the CDC");
    let dir = std::env::temp_dir().join(format!("kuatia-pipeline-{}", uuid::Uuid::now_v7()));
    std::fs::create_dir_all(&dir).expect("dir");
    let file = dir.join("signed.xml");
    std::fs::write(&file, &xml).expect("write");
    let schema = kuatia_tests::sifen_xsd_dir().join("siRecepDE_v150.xsd");
    let (valid, out) = tool(
        "xmllint",
        &[
            "--noout",
            "--nonet",
            "--schema",
            schema.to_str().expect("path"),
            file.to_str().expect("path"),
        ],
    );
    assert!(valid, "{out}");
    let (verified, out) = tool(
        "xmlsec1",
        &[
            "--verify",
            "--insecure",
            "--id-attr:Id",
            "DE",
            file.to_str().expect("path"),
        ],
    );
    assert!(verified, "{out}");
    let tampered = dir.join("tampered.xml");
    std::fs::write(&tampered, xml.replacen("<dTotGralOpe>", "<dTotGralOpe>1", 1)).expect("write");
    let (verified, _) = tool(
        "xmlsec1",
        &[
            "--verify",
            "--insecure",
            "--id-attr:Id",
            "DE",
            tampered.to_str().expect("path"),
        ],
    );
    assert!(!verified, "a tampered document must not verify");
    let _ = std::fs::remove_dir_all(dir);

    let stats = f.stats().await;
    assert_eq!(stats["approvals"][&cdc], 1, "{stats}");
    // Sent once, without asking SIFEN for the CDC first (nothing can have been sent before).
    assert_eq!(stats["totals"]["requests"]["siRecepDE"], 1, "{stats}");
    assert!(stats["totals"]["requests"].get("siConsDE").is_none(), "{stats}");
    // Its acceptance queued the KuDE and nothing else: no delivery plan (it asks for no delivery;
    // a document that does gets one: the delivery tests in webhooks.rs) and no webhook job (the
    // `webhook_fanout` subscription reads the events, and this tenant has no endpoint).
    let kinds = kuatia_tests::snapshot(
        &f.app.service().database,
        "SELECT kind FROM jobs WHERE kind IN ('printing.kude', 'webhook.fanout', 'webhook.deliver', \
           'delivery.plan') ORDER BY kind",
    )
    .await;
    assert_eq!(kinds, vec![vec![Some("printing.kude".to_owned())]]);

    // The detail explains SIFEN's answer in plain words.
    let (status, detail) = send(f.req(Method::GET, &format!("/v1/documents/{doc}"))).await;
    assert_eq!(status, 200, "{detail}");
    assert_eq!(detail["sifen"]["code"], "0260", "{detail}");
    assert!(detail["sifen"]["protocol"].is_string(), "{detail}");
    assert!(
        detail["sifen"]["meaning"]
            .as_str()
            .unwrap_or_default()
            .contains("approved"),
        "{detail}"
    );
    assert_eq!(detail["sifen"]["class"], "approved", "{detail}");
    f.app.stop().await;
}

#[tokio::test]
async fn a_credit_note_referencing_an_accepted_invoice_is_accepted_in_its_own_series() {
    let f = Simulated::new(SimConfig::default(), |_| {}).await;
    let invoice = f.post(&f.invoice("NC-BASE")).await;
    let settled = f
        .settle(std::slice::from_ref(&invoice), Duration::from_secs(20))
        .await;
    assert_eq!(settled[0]["status"], "accepted", "{}", settled[0]);
    let invoice_cdc = settled[0]["cdc"].as_str().expect("cdc").to_owned();

    let mut note = f.invoice("NC-1");
    note["type"] = json!("credit_note");
    note["reason"] = json!(2);
    note["associated_document"] = json!({"cdc": invoice_cdc});
    let note = f.post(&note).await;
    let settled = f
        .settle(std::slice::from_ref(&note), Duration::from_secs(20))
        .await;
    assert_eq!(settled[0]["status"], "accepted", "{}", settled[0]);
    // Its own series (type 5): number 1 again, and a CDC of type 05.
    assert_eq!(settled[0]["number"], "001-001-0000001", "{}", settled[0]);
    let cdc = settled[0]["cdc"].as_str().expect("cdc");
    assert!(cdc.starts_with("05"), "{cdc}");
    let timeline = f.timeline(&note).await;
    let xml = f.signed_xml(&timeline);
    assert!(xml.contains("<iTiDE>5</iTiDE>"), "a credit note");
    assert!(
        xml.contains(&format!("<dCdCDERef>{invoice_cdc}</dCdCDERef>")),
        "it names the invoice"
    );

    // A debit note as the contract's canonical document has it, without `reason`: motive 1.
    let mut debit = f.invoice("ND-1");
    debit["type"] = json!("debit_note");
    debit["associated_document"] = json!({"cdc": invoice_cdc});
    let debit = f.post(&debit).await;
    let settled = f
        .settle(std::slice::from_ref(&debit), Duration::from_secs(20))
        .await;
    assert_eq!(settled[0]["status"], "accepted", "{}", settled[0]);
    let xml = f.signed_xml(&f.timeline(&debit).await);
    assert!(
        xml.contains("<iMotEmi>1</iMotEmi><dDesMotEmi>Devolución y Ajuste de precios</dDesMotEmi>"),
        "the default motive: {xml}"
    );
    f.app.stop().await;
}

#[tokio::test]
async fn concurrent_documents_get_consecutive_numbers_without_gaps_or_repeats() {
    let f = Simulated::new(SimConfig::default(), |c| c.workers = 4).await;
    // Posted at once, as concurrent clients would.
    let docs = post_together((0..30).map(|n| {
        f.req(Method::POST, "/v1/documents")
            .header("Idempotency-Key", format!("seq-{n}"))
            .json(&f.invoice(&format!("SEQ-{n}")))
    }))
    .await;
    let status = f.settle(&docs, Duration::from_secs(60)).await;
    let numbers: BTreeSet<String> = status
        .iter()
        .map(|s| {
            assert_eq!(s["status"], "accepted", "{s}");
            s["number"].as_str().expect("number").to_owned()
        })
        .collect();
    let expected: BTreeSet<String> = (1..=30).map(|n| format!("001-001-{n:07}")).collect();
    assert_eq!(numbers, expected);
    let stats = f.stats().await;
    let approvals = stats["approvals"].as_object().expect("approvals");
    assert_eq!(approvals.len(), 30, "{stats}");
    assert!(
        approvals.values().all(|n| n == 1),
        "each CDC approved once: {stats}"
    );
    f.app.stop().await;
}

#[tokio::test]
async fn documents_waiting_together_share_numbering_turns_and_commit_in_number_order() {
    // Thirty documents queue while no worker runs; then eight workers take them up at once, and
    // the prepare jobs that wait for their series at the same time share a turn.
    let f = Simulated::new(SimConfig::default(), |c| c.workers = 0).await;
    let mut docs = Vec::new();
    for n in 0..30 {
        docs.push(f.post(&f.invoice(&format!("TURN-{n}"))).await);
    }
    let f = f.restart(|c| c.workers = 8).await;
    let status = f.settle(&docs, Duration::from_secs(60)).await;
    // (number, the turn's time, the position of the numbering event) per document.
    let mut numbered = Vec::new();
    for (doc, s) in docs.iter().zip(&status) {
        assert_eq!(s["status"], "accepted", "{s}");
        let timeline = f.timeline(doc).await;
        let transformed = timeline
            .iter()
            .find(|e| e["type"] == "DocumentTransformed")
            .expect("a DocumentTransformed event");
        numbered.push((
            s["number"].as_str().expect("number").to_owned(),
            transformed["data"]["DocumentTransformed"]["at"]
                .as_str()
                .expect("at")
                .to_owned(),
            transformed["position"].as_i64().expect("position"),
        ));
    }
    numbered.sort();
    let numbers: Vec<&str> = numbered.iter().map(|(n, _, _)| n.as_str()).collect();
    let expected: Vec<String> = (1..=30).map(|n| format!("001-001-{n:07}")).collect();
    assert_eq!(numbers, expected, "consecutive, no gap, no repeat");
    assert!(
        numbered.windows(2).all(|w| w[0].2 < w[1].2),
        "numbers are committed in number order: {numbered:?}"
    );
    let mut turns: std::collections::BTreeMap<&str, Vec<usize>> = Default::default();
    for (i, (_, at, _)) in numbered.iter().enumerate() {
        turns.entry(at.as_str()).or_default().push(i);
    }
    assert!(
        turns.len() < 30 && turns.values().any(|t| t.len() > 1),
        "documents waiting together share a turn: {turns:?}"
    );
    assert!(
        turns.values().all(|t| t.windows(2).all(|w| w[1] == w[0] + 1)),
        "a turn numbers its documents consecutively: {turns:?}"
    );
    // The read model the grouped appends wrote (PostgreSQL: the steps of many documents in a few
    // statements) equals a rebuild that applies the same events one by one.
    let TestApp { service, db, .. } = f.app;
    service.expect("running").stop().await.expect("clean stop");
    let database = db.open().await;
    let written = crate::documents::read_model(&database).await;
    assert_eq!(
        crate::documents::rebuilt_read_model(&database).await,
        written,
        "written == rebuilt"
    );
}

#[tokio::test]
async fn a_channel_change_reaches_the_next_document_of_the_running_pipeline() {
    // The pipeline keeps each company's setup by its configuration version: a change made after
    // a document was signed must reach the next one, on the same running instance.
    let f = Simulated::new(SimConfig::default(), |c| c.workers = 2).await;
    let series_of = |timeline: &[Value]| {
        timeline
            .iter()
            .find(|e| e["type"] == "DocumentTransformed")
            .and_then(|e| e["data"]["DocumentTransformed"]["series"].as_str())
            .expect("a numbered document")
            .to_owned()
    };
    let first = f.post(&f.invoice("SETUP-1")).await;
    f.settle(std::slice::from_ref(&first), Duration::from_secs(30))
        .await;
    let first_series = series_of(&f.timeline(&first).await);
    assert!(first_series.contains(":12345678:"), "{first_series}");
    assert!(
        f.signed_xml(&f.timeline(&first).await)
            .contains("<dNumTim>12345678</dNumTim>"),
        "the first document carries the first timbrado"
    );

    let (status, list) = send(f.req(Method::GET, "/v1/emission-channels")).await;
    assert_eq!(status, 200, "{list}");
    let channel = list
        .as_array()
        .into_iter()
        .flatten()
        .find(|c| c["channel"] == "sifen")
        .and_then(|c| c["id"].as_str())
        .expect("the sifen channel")
        .to_owned();
    let (status, patched) = send(
        f.req(Method::PATCH, &format!("/v1/emission-channels/{channel}"))
            .json(&json!({"sifen": {"timbrado": "11112222"}})),
    )
    .await;
    assert_eq!(status, 200, "{patched}");

    let second = f.post(&f.invoice("SETUP-2")).await;
    f.settle(std::slice::from_ref(&second), Duration::from_secs(30))
        .await;
    let timeline = f.timeline(&second).await;
    let second_series = series_of(&timeline);
    assert!(second_series.contains(":11112222:"), "{second_series}");
    assert!(
        f.signed_xml(&timeline).contains("<dNumTim>11112222</dNumTim>"),
        "the next document carries the new timbrado"
    );
    f.app.stop().await;
}

#[tokio::test]
async fn with_answers_dropped_and_servers_failing_every_document_is_accepted_once() {
    // 30 % of answers withheld (processed, never answered) and 20 % HTML 500s: the pipeline
    // retries, asks SIFEN for the CDC before resending, and never gets a CDC approved twice.
    let f = Simulated::new(
        SimConfig {
            drop_rate: 0.3,
            error_rate: 0.2,
            hang_ms: 5_000,
            seed: Some(7),
            ..SimConfig::default()
        },
        |c| {
            c.sifen_read_timeout_ms = 300;
            c.sifen_retry_scale = 0.0003;
        },
    )
    .await;
    let mut docs = Vec::new();
    for n in 0..500 {
        docs.push(f.post(&f.invoice(&format!("FAULT-{n}"))).await);
    }
    let status = f.settle(&docs, Duration::from_secs(300)).await;
    for s in &status {
        assert_eq!(s["status"], "accepted", "{s}");
    }
    let stats = f.stats().await;
    let approvals = stats["approvals"].as_object().expect("approvals");
    assert_eq!(approvals.len(), 500, "{stats}");
    assert!(
        approvals.values().all(|n| n == 1),
        "each CDC approved once: {stats}"
    );
    assert!(
        stats["totals"]["withheld"].as_u64().unwrap_or(0) > 0,
        "answers were dropped: {stats}"
    );
    // A document whose answer was dropped shows the retry in its timeline.
    let mut retried = 0;
    for doc in &docs {
        let timeline = f.timeline(doc).await;
        if timeline.iter().any(|e| e["type"] == "DocumentRetryScheduled") {
            retried += 1;
        }
    }
    assert!(retried > 0, "some documents went through retrying");
    f.app.stop().await;
}

#[tokio::test]
async fn a_sifen_that_cannot_be_reached_is_explained_in_the_detail_with_the_retry_schedule() {
    // Issue 26 item 6: "not sent" had `meaning` and `action` null.
    let f = Simulated::new(SimConfig::default(), |_| {}).await;
    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port");
    let channel = f.sifen_channel().await;
    let (status, patched) = send(
        f.req(Method::PATCH, &format!("/v1/emission-channels/{}", id(&channel)))
            .json(&json!({"credentials": {"endpoint": format!("http://{closed}")}})),
    )
    .await;
    assert_eq!(status, 200, "{patched}");
    let doc = f.post(&f.invoice("UNREACHABLE-1")).await;
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        if f.status(&doc).await["status"] == "retrying" {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "not retrying");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let (_, detail) = send(f.req(Method::GET, &format!("/v1/documents/{doc}"))).await;
    let sifen = &detail["sifen"];
    assert!(sifen["code"].is_null(), "{detail}");
    assert!(
        sifen["message"]
            .as_str()
            .is_some_and(|m| m.starts_with("not sent (refused): ")),
        "{detail}"
    );
    assert!(
        sifen["meaning"]
            .as_str()
            .is_some_and(|m| m.starts_with("SIFEN could not be reached")),
        "{detail}"
    );
    let action = sifen["action"].as_str().unwrap_or_default();
    assert!(
        action.contains("30 s, 2 min, 10 min, 30 min, 1 h, then every 2 h")
            && action.contains("Nothing to do unless"),
        "{detail}"
    );
    assert_eq!(sifen["class"], "operational", "{detail}");
    f.app.stop().await;
}

#[tokio::test]
async fn a_manual_retry_makes_the_next_attempt_immediate_and_is_refused_outside_retrying() {
    // SIFEN answers 0161 (unavailable) until the faults are cleared; the automatic retry would
    // wait 30 s.
    let f = Simulated::new(SimConfig::default(), |_| {}).await;
    let doc = f.retrying(&f.invoice("RETRY-1")).await;
    let timeline = f.timeline(&doc).await;
    let scheduled = &timeline.last().expect("last")["data"]["DocumentRetryScheduled"];
    assert!(
        scheduled["reason"].as_str().unwrap_or_default().contains("0161"),
        "{scheduled}"
    );
    let (_, detail) = send(f.req(Method::GET, &format!("/v1/documents/{doc}"))).await;
    assert_eq!(detail["sifen"]["code"], "0161", "{detail}");
    assert!(
        detail["sifen"]["action"]
            .as_str()
            .unwrap_or_default()
            .contains("retries"),
        "{detail}"
    );

    let cleared = reqwest::Client::new()
        .delete(format!("{}/sim/faults", f.sim.base_url()))
        .send()
        .await
        .expect("clear");
    assert!(cleared.status().is_success());
    let (status, body) = send(f.req(Method::POST, &format!("/v1/documents/{doc}/retry"))).await;
    assert_eq!(status, 202, "{body}");
    let settled = f
        .settle(std::slice::from_ref(&doc), Duration::from_secs(10))
        .await;
    assert_eq!(settled[0]["status"], "accepted", "{}", settled[0]);
    let types: Vec<String> = f
        .timeline(&doc)
        .await
        .iter()
        .filter_map(|e| e["type"].as_str().map(str::to_owned))
        .collect();
    assert!(types.contains(&"DocumentRetryRequested".to_owned()), "{types:?}");

    // Accepted now: a retry is a conflict.
    let (status, body) = send(f.req(Method::POST, &format!("/v1/documents/{doc}/retry"))).await;
    assert_eq!(status, 409, "{body}");
    assert_eq!(body["code"], "conflict_error", "{body}");
    let (status, _) = send(f.req(
        Method::POST,
        &format!("/v1/documents/{}/retry", uuid::Uuid::now_v7()),
    ))
    .await;
    assert_eq!(status, 404);
    f.app.stop().await;
}

fn types(timeline: &[Value]) -> Vec<String> {
    timeline
        .iter()
        .filter_map(|e| e["type"].as_str().map(str::to_owned))
        .collect()
}

#[tokio::test]
async fn an_accepted_invoice_is_cancelled_through_sifen_inside_the_window() {
    let f = Simulated::new(
        SimConfig {
            require_signature: true,
            ..SimConfig::default()
        },
        |_| {},
    )
    .await;
    let doc = f.post(&f.invoice("CANCEL-1")).await;
    let settled = f
        .settle(std::slice::from_ref(&doc), Duration::from_secs(20))
        .await;
    assert_eq!(settled[0]["status"], "accepted", "{}", settled[0]);

    // SIFEN refuses to inutilise an approved number (4065): 409 with SIFEN's code, and the
    // document stays accepted, with the refusal in its timeline.
    let (status, body) = f.void(&doc, "inutilize", "Numero no utilizado").await;
    assert_eq!(status, 409, "{body}");
    assert_eq!(body["code"], "conflict_error", "{body}");
    assert_eq!(body["details"]["sifen_code"], "4065", "{body}");
    assert_eq!(f.status(&doc).await["status"], "accepted");
    assert!(types(&f.timeline(&doc).await).contains(&"DocumentInutilizationRefused".to_owned()));
    assert_eq!(f.stats().await["totals"]["events_rejected"], 1);

    // A reason SIFEN would refuse (mOtEve has 5 to 500 characters) never leaves.
    let (status, body) = f.void(&doc, "cancel", "err").await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["code"], "validation_error", "{body}");
    let (status, body) = send(
        f.req(Method::POST, &format!("/v1/documents/{doc}/cancel"))
            .json(&json!({})),
    )
    .await;
    assert_eq!(status, 400, "{body}");

    let (status, body) = f.void(&doc, "cancel", "Error en la emision del documento").await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["status"], "cancelled", "{body}");
    assert_eq!(f.status(&doc).await["status"], "cancelled");

    let timeline = f.timeline(&doc).await;
    let names = types(&timeline);
    let requested = names
        .iter()
        .position(|t| t == "DocumentCancellationRequested")
        .unwrap_or_else(|| panic!("{names:?}"));
    // The verdict follows the request (the KuDE's artifact, rendered at background priority,
    // may land anywhere after the acceptance).
    let at = names
        .iter()
        .rposition(|t| t == "DocumentCancelled")
        .unwrap_or_else(|| panic!("{names:?}"));
    assert!(requested < at, "{names:?}");
    let cancelled = &timeline[at]["data"]["DocumentCancelled"];
    assert_eq!(cancelled["fiscal"], true, "{cancelled}");
    assert_eq!(cancelled["code"], "0600", "{cancelled}");
    assert!(cancelled["protocol"].is_string(), "{cancelled}");
    assert_eq!(cancelled["reason"], "Error en la emision del documento");
    assert_eq!(timeline[at]["actor"]["id"], "sifen");
    // SIFEN's answer is stored as a channel_response artifact next to the verdict.
    let response = &timeline[at - 1];
    assert_eq!(response["type"], "ArtifactRecorded", "{names:?}");
    assert_eq!(
        response["data"]["ArtifactRecorded"]["kind"], "channel_response",
        "{response}"
    );

    let stats = f.stats().await;
    assert_eq!(stats["totals"]["events_registered"], 1, "{stats}");
    assert_eq!(f.event_requests().await, 2, "{stats}");

    // Again: the effect holds already, nothing is sent (repeating a step is harmless).
    let (status, body) = f.void(&doc, "cancel", "Error en la emision del documento").await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["status"], "cancelled", "{body}");
    assert_eq!(f.event_requests().await, 2);
    // A cancelled document is not inutilised: a conflict, and SIFEN is not asked.
    let (status, body) = f.void(&doc, "inutilize", "Numero no utilizado").await;
    assert_eq!(status, 409, "{body}");
    assert_eq!(body["code"], "conflict_error", "{body}");
    assert_eq!(f.event_requests().await, 2);
    let (status, _) = f
        .void(&uuid::Uuid::now_v7().to_string(), "cancel", "Error de emision")
        .await;
    assert_eq!(status, 404);
    f.app.stop().await;
}

#[tokio::test]
async fn a_cancellation_outside_the_window_is_refused_without_asking_sifen() {
    // The service's clock cannot be moved, so the document's approval is made old: SIFEN
    // answers 0161 until the document is `retrying`, and the test then records, through the
    // document's own commands, an approval 49 hours ago (what a reconciliation by CDC would
    // record for a document SIFEN approved long ago).
    let f = Simulated::new(SimConfig::default(), |_| {}).await;
    let doc = f.retrying(&f.invoice("LATE-1")).await;

    // A document still with SIFEN is neither cancelled locally nor through SIFEN.
    let (status, body) = f.void(&doc, "cancel", "Error en la emision").await;
    assert_eq!(status, 409, "{body}");

    let approved_at = chrono::Utc::now() - chrono::Duration::hours(49);
    f.record_approval(&doc, approved_at).await;
    assert_eq!(f.status(&doc).await["status"], "accepted");

    let (status, body) = f.void(&doc, "cancel", "Error en la emision").await;
    assert_eq!(status, 409, "{body}");
    assert_eq!(body["code"], "conflict_error", "{body}");
    assert!(
        body["message"].as_str().unwrap_or_default().contains("window"),
        "{body}"
    );
    let closed: chrono::DateTime<chrono::Utc> =
        serde_json::from_value(body["details"]["deadline"].clone()).expect("deadline");
    assert_eq!(closed, approved_at + chrono::Duration::hours(48));
    assert_eq!(f.event_requests().await, 0, "SIFEN was not contacted");
    assert!(!types(&f.timeline(&doc).await).contains(&"DocumentCancellationRequested".to_owned()));
    assert_eq!(f.status(&doc).await["status"], "accepted");
    f.app.stop().await;
}

#[tokio::test]
async fn a_rejected_document_is_inutilised_through_sifen() {
    // A simulator whose synchronous service is disabled for the issuer rejects every DE with
    // 1264: a definitive rejection, whose number never became a document.
    let f = Simulated::new(
        SimConfig {
            sync_enabled: false,
            require_signature: true,
            ..SimConfig::default()
        },
        |_| {},
    )
    .await;
    let doc = f.post(&f.invoice("INU-1")).await;
    let settled = f
        .settle(std::slice::from_ref(&doc), Duration::from_secs(20))
        .await;
    assert_eq!(settled[0]["status"], "rejected", "{}", settled[0]);
    assert_eq!(settled[0]["number"], "001-001-0000001", "{}", settled[0]);

    // A rejected document has nothing to cancel.
    let (status, body) = f.void(&doc, "cancel", "Error en la emision").await;
    assert_eq!(status, 409, "{body}");
    assert_eq!(f.event_requests().await, 0);

    let (status, body) = f.void(&doc, "inutilize", "Documento rechazado por SIFEN").await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["status"], "invalidated", "{body}");
    let timeline = f.timeline(&doc).await;
    let names = types(&timeline);
    assert!(
        names.contains(&"DocumentInutilizationRequested".to_owned()),
        "{names:?}"
    );
    assert_eq!(
        names.last().map(String::as_str),
        Some("DocumentInvalidated"),
        "{names:?}"
    );
    let invalidated = &timeline.last().expect("last")["data"]["DocumentInvalidated"];
    assert_eq!(invalidated["fiscal"], true, "{invalidated}");
    assert_eq!(invalidated["code"], "0600", "{invalidated}");
    let stats = f.stats().await;
    assert_eq!(stats["totals"]["events_registered"], 1, "{stats}");

    f.app.stop().await;
}

#[test]
fn the_event_xml_validates_against_the_xsd_and_its_signature_verifies() {
    // The bytes the `sifen.event` job sends: `domain::sifen::event::build_event` signed by
    // `sign_event` (the simulator with `require_signature` verified the real ones above).
    use kuatia_domain::sifen::event::{EventInput, EventKind, build_event};
    use kuatia_infrastructure::selfsigned::SelfSigned;
    use kuatia_infrastructure::sifen::sign::{SigningKey, sign_event};
    let (key, cert) = SelfSigned::for_ruc("DEMO S.A.", "80069563-1", 30)
        .generate()
        .expect("certificate");
    let key = SigningKey::new(key, &cert).expect("signing key");
    let signed_at = kuatia_domain::local_time::paraguay(chrono::Utc::now());
    let events = [
        EventInput {
            id: 1_763_900_000,
            signed_at,
            reason: "Error en la emision & <precio>",
            kind: EventKind::Cancellation {
                cdc: "01800695631001001000000122025011511234567899",
            },
        },
        EventInput {
            id: 2,
            signed_at,
            reason: "Documento rechazado por SIFEN",
            kind: EventKind::Inutilization {
                timbrado: "12558946",
                establishment: "001",
                point: "001",
                from: 7,
                to: 7,
                doc_type: 1,
            },
        },
    ];
    let dir = std::env::temp_dir().join(format!("kuatia-events-{}", uuid::Uuid::now_v7()));
    std::fs::create_dir_all(&dir).expect("dir");
    let schema = kuatia_tests::sifen_xsd_dir().join("siRecepEvento_v150.xsd");
    for (n, input) in events.iter().enumerate() {
        let signed = sign_event(&build_event(input).expect("build"), &key).expect("sign");
        let file = dir.join(format!("event-{n}.xml"));
        std::fs::write(&file, &signed).expect("write");
        let (valid, out) = tool(
            "xmllint",
            &[
                "--noout",
                "--nonet",
                "--schema",
                schema.to_str().expect("path"),
                file.to_str().expect("path"),
            ],
        );
        assert!(valid, "{out}\n{signed}");
        let (verified, out) = tool(
            "xmlsec1",
            &[
                "--verify",
                "--insecure",
                "--id-attr:Id",
                "rEve",
                file.to_str().expect("path"),
            ],
        );
        assert!(verified, "{out}\n{signed}");
        let tampered = dir.join(format!("tampered-{n}.xml"));
        std::fs::write(&tampered, signed.replacen("<mOtEve>", "<mOtEve>X", 1)).expect("write");
        let (verified, _) = tool(
            "xmlsec1",
            &[
                "--verify",
                "--insecure",
                "--id-attr:Id",
                "rEve",
                tampered.to_str().expect("path"),
            ],
        );
        assert!(!verified, "a tampered event must not verify");
    }
    let _ = std::fs::remove_dir_all(dir);
}

// ---------------------------------------------------------------------------------------------
// What intake knows the pipeline will need: the remisión's notice and the names of cities.
// ---------------------------------------------------------------------------------------------

/// `(field, code)` of each issue of a list.
fn issue_pairs(issues: &Value) -> Vec<(String, String)> {
    issues
        .as_array()
        .unwrap_or_else(|| panic!("not an issue list: {issues}"))
        .iter()
        .map(|i| {
            (
                i["field"].as_str().unwrap_or_default().to_owned(),
                i["code"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect()
}

fn one(field: &str, code: &str) -> Vec<(String, String)> {
    vec![(field.to_owned(), code.to_owned())]
}

/// The legal text the test channel carries (a test value: kuatia ships no wording of its own).
const NOTICE: &str = "Traslado de mercaderías conforme a la RG N° 41/2014 (texto de prueba)";

#[tokio::test]
async fn a_remision_is_refused_at_intake_until_its_channel_has_the_notice_then_accepted_with_dinfofisc() {
    let f = Simulated::new(
        SimConfig {
            require_signature: true,
            ..SimConfig::default()
        },
        |_| {},
    )
    .await;
    let mut remision = f.remision("NRE-1");
    remision["transport"] = json!({
        "kind": "own", "distance_km": 12, "invoice_date": &hours_ago(1)[..10],
        "vehicle": {"type": "Camión", "brand": "Scania", "plate": "ABC123"},
        "carrier": {"name": "Transportes SA", "ruc": "80013884-8", "address": "Ruta 1",
                    "driver_document": "1234567", "driver_name": "Pedro Gómez",
                    "driver_address": "Luque"}
    });

    // Without the notice: a configuration issue, refused with 400 and nothing stored.
    let channel = f.sifen_channel().await;
    assert_eq!(channel["sifen"]["remision_notice"], Value::Null, "{channel}");
    let v = f.validate(&remision).await;
    assert_eq!(v["valid"], false, "{v}");
    assert_eq!(
        issue_pairs(&v["errors"]),
        one("configuration.sifen.remision_notice", "configuration_not_ready"),
        "{v}"
    );
    assert_eq!(v["routing"]["channel"], "sifen", "{v}");
    let (status, body) = f.try_post(&remision).await;
    assert_eq!(
        (status, body["code"].as_str()),
        (400, Some("configuration_error")),
        "{body}"
    );
    assert_eq!(
        issue_pairs(&body["details"]["errors"]),
        one("configuration.sifen.remision_notice", "configuration_not_ready")
    );
    assert!(
        body["message"]
            .as_str()
            .unwrap_or_default()
            .contains("RG 41/2014"),
        "{body}"
    );
    assert_eq!(f.document_count().await, 0, "nothing stored");
    // The channel still issues invoices.
    assert_eq!(f.validate(&f.invoice("FE-OK")).await["valid"], true);

    // A notice that dInfoFisc cannot carry is refused; a good one is kept across other changes.
    let patch = |body: Value| {
        f.req(Method::PATCH, &format!("/v1/emission-channels/{}", id(&channel)))
            .json(&body)
    };
    let (status, bad) = send(patch(json!({"sifen": {"remision_notice": "dos\nlíneas"}}))).await;
    assert_eq!(status, 400, "{bad}");
    assert!(bad.to_string().contains("sifen.remision_notice"), "{bad}");
    let (status, patched) = send(patch(json!({"sifen": {"remision_notice": NOTICE}}))).await;
    assert_eq!(status, 200, "{patched}");
    assert_eq!(patched["sifen"]["remision_notice"], NOTICE, "{patched}");
    let (status, patched) = send(patch(json!({"is_default": true}))).await;
    assert_eq!(status, 200, "{patched}");
    assert_eq!(
        patched["sifen"]["remision_notice"], NOTICE,
        "a PATCH that does not name it keeps it"
    );

    // With it: numbered in the remisión's series, signed, accepted, dInfoFisc in the XML.
    assert_eq!(f.validate(&remision).await["valid"], true);
    let doc = f.post(&remision).await;
    let xml = f.accepted_xml(&doc).await;
    assert!(xml.contains("<iTiDE>7</iTiDE>"), "a remisión");
    assert!(
        xml.contains(&format!("<dInfoFisc>{NOTICE}</dInfoFisc>")),
        "the channel's notice is dInfoFisc: {xml}"
    );
    let status = f.status(&doc).await;
    assert!(
        status["cdc"].as_str().is_some_and(|c| c.starts_with("07")),
        "{status}"
    );
    f.app.stop().await;
}

#[tokio::test]
async fn buyers_sellers_and_branches_are_placed_and_named_by_sets_geographic_table() {
    let f = Simulated::new(
        SimConfig {
            require_signature: true,
            ..SimConfig::default()
        },
        |_| {},
    )
    .await;
    let buyer_in = |external_id: &str, department: u16, city: u32, name: Option<&str>| {
        let mut doc = f.invoice(external_id);
        doc["buyer"]["address"] = json!("Avda. San Blas");
        doc["buyer"]["house_number"] = json!("120");
        doc["buyer"]["department_code"] = json!(department);
        doc["buyer"]["city_code"] = json!(city);
        if let Some(name) = name {
            doc["buyer"]["city_name"] = json!(name);
        }
        doc
    };

    // Department 11 with city 6 (Aguará, in Concepción), named Luque: what once went out. A
    // business error at each field, stored validation_failed and never sent.
    let wrong = buyer_in("FE-CITY-0", 11, 6, Some("LUQUE"));
    let v = f.validate(&wrong).await;
    assert_eq!(v["valid"], false, "{v}");
    assert_eq!(
        issue_pairs(&v["errors"]),
        one("buyer.department_code", "city_department_mismatch"),
        "{v}"
    );
    let (status, body) = f.try_post(&wrong).await;
    assert_eq!(
        (status, body["status"].as_str()),
        (201, Some("validation_failed")),
        "{body}"
    );
    let (status, body) = f.try_post(&buyer_in("FE-CITY-1", 2, 6, Some("LUQUE"))).await;
    assert_eq!(
        (status, body["status"].as_str()),
        (201, Some("validation_failed")),
        "{body}"
    );
    assert_eq!(
        issue_pairs(&body["errors"]),
        one("buyer.city_name", "city_name_mismatch")
    );

    // Luque, unnamed: SIFEN accepts the district and names SET's table writes.
    let doc = f.post(&buyer_in("FE-CITY-2", 12, 5946, None)).await;
    let xml = f.accepted_xml(&doc).await;
    assert!(
        xml.contains(
            "<cDepRec>12</cDepRec><dDesDepRec>CENTRAL</dDesDepRec><cDisRec>159</cDisRec>\
             <dDesDisRec>LUQUE</dDesDisRec><cCiuRec>5946</cCiuRec><dDesCiuRec>LUQUE</dDesCiuRec>"
        ),
        "{xml}"
    );
    assert!(
        xml.contains(
            "<cDepEmi>1</cDepEmi><dDesDepEmi>CAPITAL</dDesDepEmi><cDisEmi>1</cDisEmi>\
             <dDesDisEmi>ASUNCION (DISTRITO)</dDesDisEmi><cCiuEmi>1</cCiuEmi>"
        ),
        "the issuer's district, from its city: {xml}"
    );

    // A branch is placed by the table too: a wrong name is refused naming the right one, an
    // omitted one filled.
    let branch = |name: Option<&str>| {
        let mut body = json!({
            "company_id": f.r.company, "code": "002", "name": "Sucursal Este",
            "address": "Ruta 7", "house_number": "1", "department_code": 11, "city_code": 3383
        });
        if let Some(name) = name {
            body["city_name"] = json!(name);
        }
        body
    };
    let (status, refused) = send(
        f.req(Method::POST, "/v1/branches")
            .json(&branch(Some("C. DEL ESTE"))),
    )
    .await;
    assert_eq!(
        (status, refused["code"].as_str()),
        (400, Some("validation_error")),
        "{refused}"
    );
    assert_eq!(
        issue_pairs(&refused["details"]["errors"]),
        one("city_name", "city_name_mismatch")
    );
    assert!(
        refused["details"]["errors"][0]["message"]
            .as_str()
            .is_some_and(|m| m.contains("\"CIUDAD DEL ESTE\"")),
        "{refused}"
    );
    let (status, added) = send(f.req(Method::POST, "/v1/branches").json(&branch(None))).await;
    assert_eq!(status, 201, "{added}");
    assert_eq!(
        (added["city_name"].as_str(), added["department_name"].as_str()),
        (Some("CIUDAD DEL ESTE"), Some("ALTO PARANA"))
    );

    // An autofactura bought from a seller in Ciudad del Este (two branches now: name ours).
    let mut autofactura = f.invoice("AFE-CITY-1");
    autofactura["branch_id"] = json!(f.r.branch);
    autofactura["issuance_point_id"] = json!(f.r.point);
    autofactura["type"] = json!("autofactura");
    autofactura["seller"] = json!({"legal_name": "Juan Benítez", "document_type": "ci",
        "document_number": "1234567", "address": "Compañía Potrero", "house_number": "0",
        "department_code": 11, "city_code": 3383});
    autofactura.as_object_mut().expect("object").remove("buyer");
    autofactura["items"] = json!([{"description": "Mandioca (kg)", "quantity": 100, "unit_price": 3000,
        "tax_rate": 0, "tax_amount": 0, "total_amount": 300000, "unit": 83}]);
    autofactura["totals"] = json!({"subtotal": 300000, "tax_total": 0, "grand_total": 300000});
    autofactura["payment_terms"] = json!({"condition": "cash", "method": "cash"});
    autofactura["associated_document"] = json!({"constancia_type": 1,
        "constancia_number": "12345678901", "constancia_control": "AB12-CD3"});
    let doc = f.post(&autofactura).await;
    let xml = f.accepted_xml(&doc).await;
    assert!(xml.contains("<iTiDE>4</iTiDE>"), "an autofactura");
    assert!(
        xml.contains(
            "<cDisVen>145</cDisVen><dDesDisVen>CIUDAD DEL ESTE</dDesDisVen><cCiuVen>3383</cCiuVen>\
             <dDesCiuVen>CIUDAD DEL ESTE</dDesCiuVen>"
        ),
        "{xml}"
    );
    assert_eq!(f.document_count().await, 4);
    f.app.stop().await;
}

#[tokio::test]
async fn after_a_master_key_rotation_every_secret_opens_under_the_new_key_alone() {
    use kuatia_infrastructure::config::Secret;
    let new_key = "bmV3LW1hc3Rlci1rZXktb2Yta3VhdGlhLTMyLWJ5dGU=";
    let mut fx = Simulated::new(SimConfig::default(), |_| {}).await;
    let first = fx.post(&fx.invoice("ROTATE-1")).await;
    fx.settle(std::slice::from_ref(&first), Duration::from_secs(30))
        .await;
    let old_id = kuatia_application::vault::Sealer::key_id(
        &kuatia_api::compose::sealer(&fx.app.db.config()).expect("the old key"),
    )
    .to_owned();
    let sealed_before = sealed_under(&fx.app, &old_id).await;
    assert!(
        sealed_before >= 2,
        "the certificate and the CSC are sealed: {sealed_before}"
    );

    // Step 1 of a rotation: every instance runs with the new key and still holds the old one.
    let rotating = |c: &mut kuatia_infrastructure::config::Config| {
        c.master_key = Some(Secret::new(new_key));
        c.master_key_previous = Some(Secret::new(kuatia_tests::TEST_MASTER_KEY));
    };
    fx = fx.restart(rotating).await;
    let second = fx.post(&fx.invoice("ROTATE-2")).await;
    let settled = fx
        .settle(std::slice::from_ref(&second), Duration::from_secs(30))
        .await;
    assert_eq!(
        settled[0]["status"], "accepted",
        "signed with the certificate sealed under the old key"
    );

    // Step 2: re-seal (what `kuatia secrets rotate` runs), twice: the second finds nothing to do.
    let mut config = fx.app.db.config();
    rotating(&mut config);
    let sealer = kuatia_api::compose::sealer(&config).expect("both keys");
    let new_id = kuatia_application::vault::Sealer::key_id(&sealer).to_owned();
    let vault =
        kuatia_application::vault::Vault::new(fx.app.service().database.store(), std::sync::Arc::new(sealer));
    let report = vault.rotate(1).await.expect("rotation");
    assert!(report.failed.is_empty(), "{report:?}");
    assert_eq!(
        report.rotated.get(&old_id).copied(),
        Some(sealed_before as u64),
        "{report:?}"
    );
    assert_eq!(sealed_under(&fx.app, &old_id).await, 0);
    let again = vault.rotate(100).await.expect("second rotation");
    assert!(again.rotated.is_empty() && again.failed.is_empty(), "{again:?}");

    // Step 3: the old key is gone from the configuration; everything still opens.
    fx = fx.restart(|c| c.master_key = Some(Secret::new(new_key))).await;
    let third = fx.post(&fx.invoice("ROTATE-3")).await;
    let settled = fx
        .settle(std::slice::from_ref(&third), Duration::from_secs(30))
        .await;
    assert_eq!(
        settled[0]["status"], "accepted",
        "signed after the old key was dropped"
    );
    assert!(sealed_under(&fx.app, &new_id).await >= sealed_before);
}

#[tokio::test]
async fn a_master_key_that_does_not_open_the_secrets_is_reported_by_ready_fails_the_document_and_refuses_a_start()
 {
    use kuatia_application::projection::SqlValue;
    // Issue 26 item 1: a wrong key left documents `queued` with empty errors and `/ready` green.
    let f = Simulated::new(SimConfig::default(), |_| {}).await;
    let first = f.post(&f.invoice("KEY-1")).await;
    let settled = f
        .settle(std::slice::from_ref(&first), Duration::from_secs(30))
        .await;
    assert_eq!(settled[0]["status"], "accepted", "{}", settled[0]);
    let ready = f.app.get("/ready").await;
    assert_eq!(ready.status().as_u16(), 200);

    // Another instance re-sealed the CSC under a key this one was not given.
    let foreign = "00ddba11c0ffee00";
    let store = f.app.service().database.store();
    let changed = store
        .execute(
            "UPDATE sealed_secrets SET key_id = $1 WHERE kind = $2",
            &[SqlValue::Text(foreign.into()), SqlValue::Text("csc".into())],
        )
        .await
        .expect("update");
    assert_eq!(changed, 1);
    let ready = f.app.get("/ready").await;
    assert_eq!(ready.status().as_u16(), 503);
    let body: Value = ready.json().await.expect("error body");
    assert_eq!(body["code"], "readiness_check_failed", "{body}");
    let message = body["message"].as_str().unwrap_or_default();
    assert!(
        message.contains(&format!("1 under key {foreign}")) && message.contains("KUATIA_MASTER_KEY"),
        "names the key and what to set: {body}"
    );

    // A document that needs the CSC now fails visibly (the channel is changed so that the
    // setup is read again, not taken from the cache of the first document's).
    let channel = f.sifen_channel().await;
    let (status, patched) = send(
        f.req(Method::PATCH, &format!("/v1/emission-channels/{}", id(&channel)))
            .json(&json!({"sifen": {"remision_notice": NOTICE}})),
    )
    .await;
    assert_eq!(status, 200, "{patched}");
    let second = f.post(&f.invoice("KEY-2")).await;
    let settled = f
        .settle(std::slice::from_ref(&second), Duration::from_secs(30))
        .await;
    assert_eq!(settled[0]["status"], "failed_terminal", "{}", settled[0]);
    let (_, detail) = send(f.req(Method::GET, &format!("/v1/documents/{second}"))).await;
    let error = &detail["summary"]["errors"][0];
    assert_eq!(error["code"], "document_build_failed", "{detail}");
    assert!(
        error["message"]
            .as_str()
            .is_some_and(|m| m.starts_with("the CSC cannot be opened") && m.contains(foreign)),
        "{detail}"
    );

    // A start with a key that did not seal them is refused, naming the problem.
    let refused = f
        .app
        .restart(|c| {
            c.master_key = Some(kuatia_infrastructure::config::Secret::new(
                "bmV3LW1hc3Rlci1rZXktb2Yta3VhdGlhLTMyLWJ5dGU=",
            ));
        })
        .await;
    let error = format!("{:#}", refused.err().expect("the start is refused"));
    assert!(
        error.contains("does not open this database's sealed secrets") && error.contains(foreign),
        "{error}"
    );
}

/// Secrets sealed under the master key `key_id`.
async fn sealed_under(app: &TestApp, key_id: &str) -> i64 {
    use kuatia_application::projection::SqlValue;
    let rows = app
        .service()
        .database
        .store()
        .query(
            "SELECT COUNT(*) FROM sealed_secrets WHERE key_id = $1",
            &[SqlValue::Text(key_id.to_owned())],
        )
        .await
        .expect("count");
    rows[0][0].as_i64().expect("a count")
}

#[tokio::test]
async fn an_unanswered_reconciliation_question_is_asked_again_at_once_not_after_the_next_retry_step() {
    // The first send is processed but its answer lost; the retry must ask SIFEN for the CDC
    // before anything else, and the first two of those questions fail.
    let f = Simulated::new(
        SimConfig {
            hang_ms: 5_000,
            ..SimConfig::default()
        },
        |c| {
            c.sifen_read_timeout_ms = 300;
            c.sifen_retry_scale = 0.01;
        },
    )
    .await;
    let client = reqwest::Client::new();
    for (fault, service) in [("drop", "siRecepDE"), ("http500", "siConsDE")] {
        let times = if service == "siConsDE" { 2 } else { 1 };
        let injected = client
            .post(format!("{}/sim/faults", f.sim.base_url()))
            .json(&json!({"fault": fault, "times": times, "service": service}))
            .send()
            .await
            .expect("inject");
        assert!(injected.status().is_success(), "{fault} on {service}");
    }
    let doc = f.post(&f.invoice("RECONCILE-1")).await;
    let settled = f
        .settle(std::slice::from_ref(&doc), Duration::from_secs(30))
        .await;
    assert_eq!(settled[0]["status"], "accepted", "{}", settled[0]);
    let timeline = f.timeline(&doc).await;
    let types = types(&timeline);
    // One operational failure (the lost answer); the failed questions were asked again within
    // the same attempt instead of each scheduling a later one (30 s, then 2 min, …).
    assert_eq!(
        types.iter().filter(|t| *t == "DocumentRetryScheduled").count(),
        1,
        "{types:?}"
    );
    let stats = f.stats().await;
    assert_eq!(stats["totals"]["requests"]["siRecepDE"], 1, "sent once: {stats}");
    assert!(
        stats["totals"]["requests"]["siConsDE"].as_u64().unwrap_or(0) >= 3,
        "asked three times: {stats}"
    );
    f.app.stop().await;
}

#[tokio::test]
async fn a_document_whose_de_cannot_be_built_ends_failed_terminal_with_the_reason_and_a_webhook() {
    // A remisión the DE builder refused stayed `queued` with `errors: []` for ever (its job dead).
    let f = Simulated::new(SimConfig::default(), |_| {}).await;
    let channel = f.sifen_channel().await;
    let (status, patched) = send(
        f.req(Method::PATCH, &format!("/v1/emission-channels/{}", id(&channel)))
            .json(&json!({"sifen": {"remision_notice": NOTICE}})),
    )
    .await;
    assert_eq!(status, 200, "{patched}");
    let inbox = crate::webhooks::Inbox::default();
    let (port, _receiver) = crate::webhooks::start_receiver(inbox.clone(), 0).await;
    let (status, hook) = send(f.req(Method::POST, "/v1/webhooks").json(&json!({
        "url": format!("http://127.0.0.1:{port}/hook"), "events": ["document.failed"],
    })))
    .await;
    assert_eq!(status, 201, "{hook}");

    let mut remision = f.remision("NRE-STUCK");
    // Own transport without the vehicle the DE needs (E10/E8.2).
    remision["transport"] = json!({"kind": "own", "distance_km": 12, "invoice_date": &hours_ago(1)[..10]});
    // Intake builds the DE, so it refuses this document itself (issue 25 item 2) ...
    let (status, body) = f.try_post(&remision).await;
    assert_eq!(status, 201, "{body}");
    assert_eq!(body["status"], "validation_failed", "{body}");
    assert_eq!(body["errors"][0]["field"], "transport.vehicle", "{body}");
    // ... but one an earlier intake stored, before it built the DE, must not stay stuck either:
    // stored here as that intake stored it (validated, queued for the pipeline).
    remision["external_id"] = json!("NRE-STORED-EARLIER");
    let routing = f.validate(&remision).await["routing"].clone();
    let uuid = |v: &Value| v.as_str().expect("an id").parse::<uuid::Uuid>().expect("uuid");
    let routing = kuatia_domain::document::routing::Routing {
        company_id: uuid(&routing["company_id"]),
        branch_id: uuid(&routing["branch_id"]),
        issuance_point_id: uuid(&routing["issuance_point_id"]),
        channel: kuatia_domain::channel::ChannelKind::Sifen,
        channel_id: uuid(&channel["id"]),
    };
    let doc_id = uuid::Uuid::now_v7();
    kuatia_application::documents::receive(
        &f.app.service().database.store(),
        kuatia_domain::tenancy::TenantId::from_uuid(f.r.tenant.parse().expect("tenant id")),
        kuatia_application::documents::Intake {
            document_id: doc_id,
            routing,
            document: kuatia_domain::document::canonical::from_value(remision).expect("a canonical document"),
            errors: Vec::new(),
            warnings: Vec::new(),
        },
        kuatia_application::event_store::EventMetadata::default(),
        chrono::Utc::now(),
    )
    .await
    .expect("stored")
    .expect("new");
    let doc = doc_id.to_string();
    let settled = f
        .settle(std::slice::from_ref(&doc), Duration::from_secs(60))
        .await;
    let status = &settled[0];
    assert_eq!(status["status"], "failed_terminal", "{status}");
    let (_, detail) = send(f.req(Method::GET, &format!("/v1/documents/{doc}"))).await;
    let detail = &detail["summary"];
    let errors = detail["errors"].as_array().cloned().unwrap_or_default();
    assert_eq!(errors.len(), 1, "{detail}");
    assert_eq!(
        (errors[0]["field"].as_str(), errors[0]["code"].as_str()),
        (Some("sifen"), Some("document_build_failed")),
        "{detail}"
    );
    assert!(
        errors[0]["message"]
            .as_str()
            .is_some_and(|m| m.starts_with("the DE cannot be built") && m.contains("vehicle")),
        "the reason names what is missing: {detail}"
    );
    assert!(
        detail["cdc"].is_null() && detail["number"].is_null(),
        "no number drawn: {detail}"
    );
    let timeline = types(&f.timeline(&doc).await);
    assert!(
        timeline.contains(&"DocumentIssuanceRefused".to_owned()),
        "{timeline:?}"
    );
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let failed = loop {
        if let Some(got) = inbox.all().into_iter().find(|r| r.event == "document.failed") {
            break got;
        }
        assert!(std::time::Instant::now() < deadline, "no document.failed webhook");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let payload: Value = serde_json::from_str(&failed.body).expect("json");
    assert_eq!(payload["document_id"], doc.as_str(), "{payload}");
    assert_eq!(payload["status"], "failed_terminal", "{payload}");
    assert_eq!(payload["errors"][0]["code"], "document_build_failed", "{payload}");
    f.app.stop().await;
}
