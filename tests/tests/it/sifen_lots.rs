//! SIFEN lots, black-box: documents numbered in the same turn (posted at the same time) go to
//! the simulator as one siRecepLoteDE, the `sifen.lot` job polls siResultLoteDE (through 0361 "processing") and each
//! document records its own verdict; a lot SIFEN did not queue, or whose answer was lost, is
//! reconciled by CDC and never has a CDC sent again while a lot holding it is processing.

use kuatia_infrastructure::sifen_sim::SimConfig;
use kuatia_tests::Simulated;
use reqwest::Method;
use serde_json::{Value, json};
use std::time::Duration;

/// Posts `n` invoices at once, as concurrent clients would; returns their ids.
pub(crate) async fn post_together(f: &Simulated, prefix: &str, n: usize) -> Vec<String> {
    kuatia_tests::post_together((0..n).map(|i| {
        f.req(Method::POST, "/v1/documents")
            .header("Idempotency-Key", format!("{prefix}-{i}"))
            .json(&f.invoice(&format!("{prefix}-{i}")))
    }))
    .await
}

/// The lot ids a document's timeline recorded on its submissions.
fn lots_of(timeline: &[Value]) -> Vec<Value> {
    timeline
        .iter()
        .filter(|e| e["type"] == "DocumentSubmitted")
        .map(|e| e["data"]["DocumentSubmitted"]["lot_id"].clone())
        .collect()
}

async fn fault(f: &Simulated, fault: &str, service: &str) {
    let response = reqwest::Client::new()
        .post(format!("{}/sim/faults", f.sim.base_url()))
        .json(&json!({"fault": fault, "times": 1, "service": service}))
        .send()
        .await
        .expect("queue a fault");
    assert!(response.status().is_success(), "{response:?}");
}

/// Every CDC approved exactly once, none refused as a duplicate, nothing rejected.
fn approved_once(stats: &Value, documents: usize) {
    let approvals = stats["approvals"].as_object().expect("approvals");
    assert_eq!(approvals.len(), documents, "{stats}");
    assert!(
        approvals.values().all(|n| n == 1),
        "each CDC approved once: {stats}"
    );
    assert_eq!(stats["totals"]["duplicates"], 0, "no CDC sent twice: {stats}");
    assert_eq!(stats["totals"]["rejected"], 0, "{stats}");
}

fn lots_config(c: &mut kuatia_infrastructure::config::Config) {
    c.workers = 16;
    c.sifen_lot_window_ms = 400;
    c.sifen_retry_scale = 0.0003;
}

#[tokio::test]
async fn documents_submitted_together_share_a_lot_that_is_polled_until_done() {
    let f = Simulated::new(SimConfig::default(), lots_config).await;
    let docs = post_together(&f, "LOT", 24).await;
    let status = f.settle(&docs, Duration::from_secs(90)).await;
    for s in &status {
        assert_eq!(s["status"], "accepted", "{s}");
    }
    let stats = f.stats().await;
    approved_once(&stats, 24);
    let totals = &stats["totals"];
    assert!(totals["lots_received"].as_u64().unwrap_or(0) >= 1, "{stats}");
    // The simulator processes a lot in 2 s and the pipeline polls every 250 ms: it heard 0361
    // before 0362.
    assert!(
        totals["requests"]["siResultLoteDE"].as_u64().unwrap_or(0)
            > totals["lots_received"].as_u64().unwrap_or(0),
        "polled while processing: {stats}"
    );
    // A document of a lot: submitted (attempt on record), then the lot number, then accepted, with
    // the lot's reception and result answers as channel responses.
    let mut in_lots = 0;
    for doc in &docs {
        let timeline = f.timeline(doc).await;
        let lots = lots_of(&timeline);
        if lots.last().is_some_and(Value::is_string) {
            in_lots += 1;
            assert_eq!(
                lots.len(),
                2,
                "recorded before sending, then with its lot: {timeline:?}"
            );
            assert!(lots[0].is_null());
            let responses = timeline
                .iter()
                .filter(|e| {
                    e["type"] == "ArtifactRecorded"
                        && e["data"]["ArtifactRecorded"]["kind"] == "channel_response"
                })
                .count();
            assert_eq!(responses, 2, "{timeline:?}");
            let accepted = timeline
                .iter()
                .find(|e| e["type"] == "DocumentAccepted")
                .expect("accepted");
            assert_eq!(accepted["data"]["DocumentAccepted"]["code"], "0260", "{accepted}");
        }
    }
    assert!(in_lots >= 2, "most documents went in lots, {in_lots} did");
    f.app.stop().await;
}

#[tokio::test]
async fn a_turn_gathers_only_the_jobs_on_their_way_not_for_the_whole_window() {
    // A window far longer than the test may take: lots still go out, because a numbering turn
    // waits only until the `sifen.prepare` jobs already started have joined it.
    let f = Simulated::new(SimConfig::default(), |c| {
        lots_config(c);
        c.sifen_lot_window_ms = 120_000;
    })
    .await;
    let docs = post_together(&f, "EARLY", 12).await;
    let status = f.settle(&docs, Duration::from_secs(45)).await;
    let mut in_lots = 0;
    for (doc, s) in docs.iter().zip(&status) {
        assert_eq!(s["status"], "accepted", "{s}");
        if lots_of(&f.timeline(doc).await)
            .last()
            .is_some_and(Value::is_string)
        {
            in_lots += 1;
        }
    }
    assert!(in_lots >= 2, "documents went in lots, {in_lots} did");
    approved_once(&f.stats().await, 12);
    f.app.stop().await;
}

#[tokio::test]
async fn a_document_submitted_alone_goes_at_once_without_a_lot() {
    let f = Simulated::new(SimConfig::default(), lots_config).await;
    let doc = f.post(&f.invoice("ALONE")).await;
    let status = f
        .settle(std::slice::from_ref(&doc), Duration::from_secs(30))
        .await;
    assert_eq!(status[0]["status"], "accepted", "{}", status[0]);
    let timeline = f.timeline(&doc).await;
    assert_eq!(lots_of(&timeline), vec![Value::Null], "{timeline:?}");
    let stats = f.stats().await;
    assert_eq!(stats["totals"]["lots_received"], 0, "{stats}");
    f.app.stop().await;
}

#[tokio::test]
async fn a_lot_sifen_did_not_queue_is_retried_and_every_document_accepted_once() {
    let f = Simulated::new(SimConfig::default(), lots_config).await;
    fault(&f, "0301", "siRecepLoteDE").await;
    let docs = post_together(&f, "NOTQ", 12).await;
    let status = f.settle(&docs, Duration::from_secs(90)).await;
    for s in &status {
        assert_eq!(s["status"], "accepted", "{s}");
    }
    let stats = f.stats().await;
    assert_eq!(stats["totals"]["lots_refused"], 1, "{stats}");
    approved_once(&stats, 12);
    // The refused lot's documents recorded SIFEN's 0301 as an operational failure.
    let mut refused = 0;
    for doc in &docs {
        let timeline = f.timeline(doc).await;
        if timeline
            .iter()
            .any(|e| e["type"] == "DocumentRetryScheduled" && e.to_string().contains("0301"))
        {
            refused += 1;
        }
    }
    assert!(refused >= 2, "{refused} documents saw the 0301");
    f.app.stop().await;
}

#[tokio::test]
async fn a_lost_lot_answer_is_reconciled_without_sending_a_cdc_again_while_its_lot_processes() {
    let f = Simulated::new(SimConfig::default(), |c| {
        lots_config(c);
        c.sifen_read_timeout_ms = 500;
    })
    .await;
    // The lot is received and queued, but its answer (the lot number) never arrives.
    fault(&f, "drop", "siRecepLoteDE").await;
    let docs = post_together(&f, "LOST", 12).await;
    let status = f.settle(&docs, Duration::from_secs(90)).await;
    for s in &status {
        assert_eq!(s["status"], "accepted", "{s}");
    }
    let stats = f.stats().await;
    assert_eq!(stats["totals"]["withheld"], 1, "{stats}");
    approved_once(&stats, 12);
    // The retries asked for the lot by CDC (GMP item 3) and waited while it processed.
    assert!(
        stats["totals"]["requests"]["siResultLoteDE"]
            .as_u64()
            .unwrap_or(0)
            >= 1,
        "{stats}"
    );
    let waited = {
        let mut n = 0;
        for doc in &docs {
            if f.timeline(doc).await.iter().any(|e| {
                e["type"] == "DocumentRetryScheduled" && e.to_string().contains("still processing a lot")
            }) {
                n += 1;
            }
        }
        n
    };
    assert!(waited >= 1, "a retry found its lot still processing");
    f.app.stop().await;
}

#[tokio::test]
async fn a_lost_poll_answer_after_many_polls_is_asked_again_after_the_poll_interval() {
    // The lot takes 8 s: the pipeline hears "processing" again and again, then one poll fails.
    // The next poll comes one interval (250 ms) later, not after a backoff grown with every
    // earlier poll (minutes by then, an hour at most).
    let sim = SimConfig {
        lot_processing_ms: 8_000,
        ..SimConfig::default()
    };
    let f = Simulated::new(sim, lots_config).await;
    let docs = post_together(&f, "POLL", 8).await;
    tokio::time::sleep(Duration::from_millis(6_000)).await;
    fault(&f, "http500", "siResultLoteDE").await;
    let status = f.settle(&docs, Duration::from_secs(20)).await;
    for s in &status {
        assert_eq!(s["status"], "accepted", "{s}");
    }
    let stats = f.stats().await;
    approved_once(&stats, 8);
    let totals = &stats["totals"];
    assert!(
        totals["lots_received"].as_u64().unwrap_or(0) >= 1,
        "the documents went in a lot: {stats}"
    );
    assert_eq!(totals["faults"]["http500"], 1, "a poll failed: {stats}");
    f.app.stop().await;
}
