//! SIFEN's answers table (`domain/src/sifen/answers.rs`) against the authority and in the
//! pipeline, black-box: the table lists every code the Manual gives each web service, the docs
//! publish it as the code has it, and every row that can come before a resend or a verdict is
//! driven through the simulator (fault injection by operation and code) on a real service: an
//! approved CDC is never sent again, and no status comes from an answer the table does not read
//! as a verdict.

use crate::sifen_lots::post_together;
use kuatia_domain::sifen::answers::{self, Meaning, Operation};
use kuatia_infrastructure::sifen_sim::SimConfig;
use kuatia_tests::Simulated;
use kuatia_tests::send;
use reqwest::Method;
use serde_json::{Value, json};
use std::collections::BTreeSet;
use std::time::Duration;

fn repo() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The operation each part of §12.2–12.3 speaks of (`None`: §12.2, every service).
fn section(line: &str) -> Option<Option<Option<Operation>>> {
    let heading = line.trim_start();
    let of = |prefix: &str| heading.starts_with(prefix);
    Some(if of("12.2.1.") {
        Some(None)
    } else if of("12.3.1.") {
        Some(Some(Operation::RecepDe))
    } else if of("12.3.2.") {
        Some(Some(Operation::RecepLoteDe))
    } else if of("12.3.3.") {
        Some(Some(Operation::ResultLoteDe))
    } else if of("12.3.4.") {
        Some(Some(Operation::ConsDe))
    } else if of("12.3.5.") {
        Some(Some(Operation::ConsRuc))
    } else if of("12.3.6.") {
        Some(Some(Operation::RecepEvento))
    } else {
        return None;
    })
}

/// The answer codes §12.2–12.3 of the Manual's text lists, with the operation whose section
/// lists them (`None` for §12.2's, which every service answers): each is a line of its own
/// holding four digits, as the extraction writes a table cell.
fn manual_codes(text: &str) -> Vec<(Option<Operation>, String)> {
    let mut current: Option<Option<Operation>> = None;
    let mut codes = Vec::new();
    for line in text.lines() {
        if let Some(s) = section(line) {
            current = s;
            continue;
        }
        if line.trim_start().starts_with("12.4.") {
            break;
        }
        let cell = line.trim();
        if let Some(op) = current
            && cell.len() == 4
            && cell.bytes().all(|b| b.is_ascii_digit())
        {
            codes.push((op, cell.to_owned()));
        }
    }
    codes
}

#[test]
fn the_answers_table_reads_every_code_the_manual_gives_each_web_service() {
    let excerpt =
        std::fs::read_to_string(repo().join("vendor/sifen/manual/manual-tecnico-v150-p147-159.txt"))
            .expect("the vendored pages of the Manual");
    // The vendored pages are the Manual's own, when the Manual is beside the repository.
    let whole = repo().join("../shared/sifen/manual/manual-tecnico-v150.txt");
    if let Ok(manual) = std::fs::read_to_string(&whole) {
        assert!(
            manual.contains(&excerpt),
            "the vendored pages differ from {}",
            whole.display()
        );
    }
    let codes = manual_codes(&excerpt);
    // Every section of §12.2–12.3 was read (a change of the extraction would show here).
    let read: BTreeSet<String> = codes.iter().map(|(_, c)| c.clone()).collect();
    for expected in [
        "0001", "0007", "0100", "0141", "0160", "0161", "0183", "0200", "0260", "0270",
    ] {
        assert!(
            read.contains(expected),
            "{expected} not read from the Manual: {read:?}"
        );
    }
    for expected in [
        "0300", "0301", "0340", "0361", "0362", "0380", "0420", "0421", "0500", "0502", "0600",
    ] {
        assert!(
            read.contains(expected),
            "{expected} not read from the Manual: {read:?}"
        );
    }
    for (op, code) in &codes {
        let operations: Vec<Operation> = op.map_or_else(|| Operation::ALL.to_vec(), |o| vec![o]);
        for o in operations {
            assert!(
                answers::row(o, code).is_some(),
                "{o} {code}: the Manual lists it, the answers table has no row for it"
            );
        }
    }
}

#[test]
fn the_channel_docs_publish_the_answers_table_as_the_code_has_it() {
    let doc = std::fs::read_to_string(repo().join("docs/sifen-channel.md")).expect("docs/sifen-channel.md");
    let (begin, end) = ("<!-- answers table: begin -->\n", "<!-- answers table: end -->");
    let start = doc.find(begin).expect("the table's begin marker") + begin.len();
    let stop = doc.find(end).expect("the table's end marker");
    // `KUATIA_BLESS_DOCS=1` writes the table in (after a change of the table, to review in the
    // diff).
    if std::env::var_os("KUATIA_BLESS_DOCS").is_some() {
        let blessed = format!("{}{}{}", &doc[..start], answers::markdown(), &doc[stop..]);
        std::fs::write(repo().join("docs/sifen-channel.md"), blessed).expect("write the docs");
        return;
    }
    assert_eq!(
        &doc[start..stop],
        answers::markdown(),
        "docs/sifen-channel.md's answers table differs from domain/src/sifen/answers.rs: run this \
         test with KUATIA_BLESS_DOCS=1 and review the diff"
    );
}

// ---------------------------------------------------------------------------------------------
// The rows in the pipeline.

/// One row driven through the pipeline: faults queued on the simulator in order (operation,
/// fault, times), then one invoice posted alone, and what it must end as.
struct Case {
    what: String,
    faults: Vec<(&'static str, String, u32)>,
    status: &'static str,
    /// siRecepDE requests that carried the document.
    sends: u64,
    /// Operational failures recorded (`DocumentRetryScheduled`).
    retries: usize,
}

/// A queued fault's name: a code as four digits, or a transport fault.
fn code(n: u16) -> String {
    format!("{n:04}")
}

async fn queue(f: &Simulated, service: &str, fault: &str, times: u32) {
    let response = reqwest::Client::new()
        .post(format!("{}/sim/faults", f.sim.base_url()))
        .json(&json!({"fault": fault, "times": times, "service": service}))
        .send()
        .await
        .expect("queue a fault");
    assert!(
        response.status().is_success(),
        "{fault} on {service}: {response:?}"
    );
}

async fn clear(f: &Simulated) {
    let response = reqwest::Client::new()
        .delete(format!("{}/sim/faults", f.sim.base_url()))
        .send()
        .await
        .expect("clear the faults");
    assert!(response.status().is_success());
}

fn count(stats: &Value, pointer: &str) -> u64 {
    stats.pointer(pointer).and_then(Value::as_u64).unwrap_or(0)
}

fn types(timeline: &[Value]) -> Vec<String> {
    timeline
        .iter()
        .filter_map(|e| e["type"].as_str().map(str::to_owned))
        .collect()
}

/// A service whose SIFEN answers fast or not at all: a withheld answer costs the client 300 ms,
/// and the retry schedule is scaled down to milliseconds (30 s → 6 ms, 2 min → 24 ms).
async fn quick(adjust: impl FnOnce(&mut kuatia_infrastructure::config::Config)) -> Simulated {
    Simulated::new(
        SimConfig {
            hang_ms: 5_000,
            lot_processing_ms: 300,
            ..SimConfig::default()
        },
        |c| {
            c.sifen_read_timeout_ms = 300;
            c.sifen_retry_scale = 0.0002;
            adjust(c);
        },
    )
    .await
}

/// Runs the cases one after the other (each alone in flight, so the queued faults are its own)
/// and reports every one that went wrong at once.
async fn drive(f: &Simulated, cases: Vec<Case>) {
    let mut wrong = Vec::new();
    for (n, case) in cases.iter().enumerate() {
        clear(f).await;
        for (service, fault, times) in &case.faults {
            queue(f, service, fault, *times).await;
        }
        let before = f.stats().await;
        let doc = f.post(&f.invoice(&format!("ANSWER-{n}"))).await;
        let settled = f
            .settle(std::slice::from_ref(&doc), Duration::from_secs(60))
            .await;
        clear(f).await;
        let after = f.stats().await;
        let cdc = settled[0]["cdc"].as_str().unwrap_or_default().to_owned();
        let names = types(&f.timeline(&doc).await);
        let sends =
            count(&after, "/totals/requests/siRecepDE") - count(&before, "/totals/requests/siRecepDE");
        let retries = names.iter().filter(|t| *t == "DocumentRetryScheduled").count();
        let resent = after["resent_after_approval"].get(&cdc).is_some();
        let got = (
            settled[0]["status"].as_str().unwrap_or_default(),
            sends,
            retries,
            resent,
        );
        let want = (case.status, case.sends, case.retries, false);
        if got != want {
            wrong.push(format!(
                "{}: (status, siRecepDE sends, retries, sent after approval) = {got:?}, expected {want:?}; \
                 timeline {names:?}",
                case.what
            ));
        }
        if case.status != "rejected" {
            assert!(
                !names.contains(&"DocumentRejected".to_owned()),
                "{}: {names:?}",
                case.what
            );
        }
    }
    assert!(
        wrong.is_empty(),
        "{} of {} cases:\n{}",
        wrong.len(),
        cases.len(),
        wrong.join("\n")
    );
    assert_eq!(count(&f.stats().await, "/totals/resent_after_approval"), 0);
}

/// One code of each row of `operation` (its first), then a code no row holds.
fn codes_of(operation: Operation) -> Vec<(String, Meaning)> {
    let mut codes: Vec<(String, Meaning)> = answers::ROWS
        .iter()
        .filter(|r| r.operations.contains(&operation))
        .map(|r| (code(r.from), r.meaning))
        .collect();
    codes.push(("9999".into(), answers::meaning(operation, "9999")));
    codes
}

/// How many answers of a question to fault so that one attempt hears only the row's: an answer
/// that settles nothing is asked again at once, up to three times an attempt.
fn tries(meaning: Meaning) -> u32 {
    if meaning == Meaning::Operational { 3 } else { 1 }
}

/// The transport faults, each an operational failure (`drop` withholds a processed answer,
/// `timeout` an unprocessed one).
const TRANSPORT: [&str; 3] = ["http500", "fault", "timeout"];

#[tokio::test]
async fn every_answer_to_the_cdc_question_after_an_unheard_approval_sends_it_once() {
    // The first send is approved and its answer lost; the retry asks siConsDE, which answers
    // with the row's code (to every try of the attempt). Only "approved" settles it
    // there; anything else is asked again on the next attempt. Never resent.
    let f = quick(|_| {}).await;
    let mut cases = Vec::new();
    let mut faults: Vec<(String, Meaning)> = codes_of(Operation::ConsDe);
    faults.extend(TRANSPORT.iter().map(|t| ((*t).to_owned(), Meaning::Operational)));
    faults.push(("drop".into(), Meaning::Operational));
    for (fault, meaning) in faults {
        let retries = match meaning {
            Meaning::Approved => 1,
            // A lie about an approved CDC (0420): covered by the lot-question test, where it is
            // true.
            Meaning::Absent => continue,
            Meaning::Rejected | Meaning::Processing | Meaning::Operational => 2,
        };
        cases.push(Case {
            what: format!("siConsDE {fault} ({meaning:?})"),
            faults: vec![
                ("siRecepDE", "drop".into(), 1),
                ("siConsDE", fault, tries(meaning)),
            ],
            status: "accepted",
            sends: 1,
            retries,
        });
    }
    drive(&f, cases).await;
    f.app.stop().await;
}

#[tokio::test]
async fn every_answer_to_the_lot_question_lets_a_known_absent_cdc_go_only_when_no_lot_holds_it() {
    // The first send is never processed (no answer); the retry asks siConsDE (0420, known
    // absent), then siResultLoteDE for a lot holding the CDC, which answers with the row's code.
    // Only "no lot processing it" (0360, 0363, 0364) lets the CDC go at once; anything else
    // waits for the next attempt, which finds no lot and sends.
    let f = quick(|_| {}).await;
    let mut cases = Vec::new();
    let mut faults: Vec<(String, Meaning)> = codes_of(Operation::ResultLoteDe);
    faults.extend(TRANSPORT.iter().map(|t| ((*t).to_owned(), Meaning::Operational)));
    for (fault, meaning) in faults {
        cases.push(Case {
            what: format!("siResultLoteDE {fault} ({meaning:?})"),
            faults: vec![
                ("siRecepDE", "timeout".into(), 1),
                ("siResultLoteDE", fault, tries(meaning)),
            ],
            status: "accepted",
            sends: 2,
            retries: if meaning == Meaning::Absent { 1 } else { 2 },
        });
    }
    drive(&f, cases).await;
    f.app.stop().await;
}

#[tokio::test]
async fn every_answer_to_a_sent_document_decides_only_what_the_table_says() {
    // siRecepDE answers the first send with the row's code, processing nothing. A rejecting
    // row (with "Rechazado") rejects; 0260 ("Aprobado") approves; an approval from before
    // (1001/1002) is confirmed with siConsDE, which (truthfully) has no approval, so it is asked
    // again and sent once more; anything else is an operational failure.
    let f = quick(|_| {}).await;
    let mut cases = Vec::new();
    let mut faults: Vec<(String, Meaning)> = codes_of(Operation::RecepDe);
    faults.push(("0300".into(), answers::meaning(Operation::RecepDe, "0300")));
    faults.extend(TRANSPORT.iter().map(|t| ((*t).to_owned(), Meaning::Operational)));
    for (fault, meaning) in faults {
        let (status, sends, retries) = match meaning {
            Meaning::Approved if fault == "0260" => ("accepted", 1, 0),
            Meaning::Approved => ("accepted", 2, 1),
            Meaning::Rejected => ("rejected", 1, 0),
            Meaning::Absent | Meaning::Processing | Meaning::Operational => ("accepted", 2, 1),
        };
        cases.push(Case {
            what: format!("siRecepDE {fault} ({meaning:?})"),
            faults: vec![("siRecepDE", fault, 1)],
            status,
            sends,
            retries,
        });
    }
    // Processed and unanswered: the retry finds the approval.
    cases.push(Case {
        what: "siRecepDE drop".into(),
        faults: vec![("siRecepDE", "drop".into(), 1)],
        status: "accepted",
        sends: 1,
        retries: 1,
    });
    drive(&f, cases).await;
    f.app.stop().await;
}

#[tokio::test]
async fn regression_an_unavailable_cdc_question_is_not_taken_for_not_found() {
    // Issue 23's first reproduction: the siRecepDE answer dropped, then siConsDE answering 0161.
    // It was taken for "SIFEN has no record": the document was sent twice, SIFEN answered 1001,
    // and the confirmation (0161 again) recorded an approved document as rejected.
    let f = quick(|_| {}).await;
    drive(
        &f,
        vec![Case {
            what: "drop, then siConsDE 0161".into(),
            faults: vec![("siRecepDE", "drop".into(), 1), ("siConsDE", "0161".into(), 3)],
            status: "accepted",
            sends: 1,
            retries: 2,
        }],
    )
    .await;
    f.app.stop().await;
}

#[tokio::test]
async fn regression_a_duplicate_whose_confirmation_is_unavailable_is_never_recorded_rejected() {
    // Issue 23's second reproduction: SIFEN's 1001 is confirmed with siConsDE, and a 0161 there
    // became a rejection. Now it is asked again later; the CDC (never approved here) then goes
    // once more and is approved.
    let f = quick(|_| {}).await;
    drive(
        &f,
        vec![Case {
            what: "1001, then siConsDE 0161".into(),
            faults: vec![("siRecepDE", "1001".into(), 1), ("siConsDE", "0161".into(), 3)],
            status: "accepted",
            sends: 2,
            retries: 1,
        }],
    )
    .await;
    f.app.stop().await;
}

#[tokio::test]
async fn a_document_waiting_on_an_unavailable_sifen_explains_it_from_the_answers_table() {
    // siRecepDE unavailable on every try: the document is retrying, and its detail says what
    // 0161 means, what kuatia does and how kuatia classes it, from the same table.
    let f = quick(|c| c.sifen_retry_scale = 1.0).await;
    queue(&f, "siRecepDE", "0161", 1).await;
    let doc = f.post(&f.invoice("EXPLAINED-1")).await;
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        if f.status(&doc).await["status"] == "retrying" {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "{}", f.status(&doc).await);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let (status, detail) = send(f.req(Method::GET, &format!("/v1/documents/{doc}"))).await;
    assert_eq!(status, 200, "{detail}");
    let row = answers::row(Operation::RecepDe, "0161").expect("0161's row");
    assert_eq!(detail["sifen"]["code"], "0161", "{detail}");
    assert_eq!(detail["sifen"]["class"], "operational", "{detail}");
    assert_eq!(detail["sifen"]["meaning"], row.plain, "{detail}");
    assert_eq!(detail["sifen"]["action"], row.action, "{detail}");
    f.app.stop().await;
}

#[tokio::test]
async fn every_answer_to_a_lot_poll_touches_its_documents_only_as_the_table_says() {
    // Three documents sent as one lot; the first poll is answered with the row's code. Still
    // processing, or an answer that settles nothing: polled again, the documents untouched.
    // No lot processing (0360, 0363, 0364), or concluded without their entries: each becomes an
    // operational failure whose retry asks for its CDC, and none is sent again while the lot
    // still processes.
    let f = quick(|c| {
        c.workers = 16;
        c.sifen_lot_window_ms = 400;
        c.sifen_lot_poll_ms = Some(100);
    })
    .await;
    let mut faults: Vec<(String, Meaning)> = codes_of(Operation::ResultLoteDe);
    faults.push(("http500".into(), Meaning::Operational));
    let mut wrong = Vec::new();
    for (n, (fault, meaning)) in faults.into_iter().enumerate() {
        clear(&f).await;
        queue(&f, "siResultLoteDE", &fault, 1).await;
        let before = f.stats().await;
        let docs = post_together(&f, &format!("POLL-{n}"), 3).await;
        let settled = f.settle(&docs, Duration::from_secs(60)).await;
        clear(&f).await;
        let after = f.stats().await;
        for (doc, status) in docs.iter().zip(&settled) {
            let timeline = f.timeline(doc).await;
            let names = types(&timeline);
            let in_lot = timeline.iter().any(|e| {
                e["type"] == "DocumentSubmitted" && e["data"]["DocumentSubmitted"]["lot_id"].is_string()
            });
            let retried = names.iter().any(|t| t == "DocumentRetryScheduled");
            let expect_retry = matches!(meaning, Meaning::Absent | Meaning::Approved);
            if status["status"] != "accepted" || (in_lot && retried != expect_retry) {
                wrong.push(format!("poll {fault} ({meaning:?}): {status} {names:?}"));
            }
        }
        for counter in ["/totals/resent_after_approval", "/totals/sent_while_in_lot"] {
            if count(&after, counter) != count(&before, counter) {
                wrong.push(format!(
                    "poll {fault} ({meaning:?}): {counter} moved: {}",
                    after["totals"]
                ));
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    f.app.stop().await;
}

#[tokio::test]
async fn every_answer_to_a_cancellation_registers_refuses_or_asks_again_as_the_table_says() {
    // An accepted invoice is cancelled; siRecepEvento answers the first request with the row's
    // code. An approval (0600, or 4003 "already registered") cancels it; a rejection refuses
    // the cancellation and the document stays accepted; anything else is sent again, and the
    // next (true) answer registers it.
    let f = quick(|_| {}).await;
    let mut faults: Vec<(String, Meaning)> = codes_of(Operation::RecepEvento);
    faults.push(("http500".into(), Meaning::Operational));
    let mut wrong = Vec::new();
    for (n, (fault, meaning)) in faults.into_iter().enumerate() {
        let doc = f.post(&f.invoice(&format!("EVENT-{n}"))).await;
        let settled = f
            .settle(std::slice::from_ref(&doc), Duration::from_secs(30))
            .await;
        assert_eq!(settled[0]["status"], "accepted", "{}", settled[0]);
        clear(&f).await;
        queue(&f, "siRecepEvento", &fault, 1).await;
        let (status, body) = send(
            f.req(Method::POST, &format!("/v1/documents/{doc}/cancel"))
                .json(&json!({"reason": "Error en la emision del documento"})),
        )
        .await;
        assert!(matches!(status, 200 | 202 | 409), "{fault}: {status} {body}");
        let want = if meaning == Meaning::Rejected {
            "DocumentCancellationRefused"
        } else {
            "DocumentCancelled"
        };
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        let names = loop {
            let names = types(&f.timeline(&doc).await);
            if names.iter().any(|t| t == want) || std::time::Instant::now() > deadline {
                break names;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        };
        let cancelled = names.iter().any(|t| t == "DocumentCancelled");
        let refused = names.iter().any(|t| t == "DocumentCancellationRefused");
        if cancelled == (meaning == Meaning::Rejected) || refused != (meaning == Meaning::Rejected) {
            wrong.push(format!("siRecepEvento {fault} ({meaning:?}): {names:?}"));
        }
    }
    clear(&f).await;
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    f.app.stop().await;
}
