//! SIFEN lots (BRIEF §6.2, GMP items 2–5): first attempts that wait at the same time go to SIFEN
//! together as one siRecepLoteDE, and a `sifen.lot` job polls siResultLoteDE for their verdicts.
//!
//! - [`Batcher`]: a `sifen.submit` job whose first attempt is on record joins the open batch of
//!   its issuer, document type, endpoint and certificate when other submissions are running in
//!   this process; alone, it sends at once through siRecepDE. A batch closes after the window,
//!   at 50 documents, or as soon as every submission running in this process waits in a batch
//!   (no one else could join before a worker is free), and goes out as lots of at most 50
//!   documents and about 900 KB.
//!   A batch of one is sent alone. Every document's attempt is recorded before its lot leaves.
//! - SIFEN's 0300 gives the lot number: the `sifen.lot` job is queued first (keyed by the lot,
//!   due one poll interval later), then each document records the lot number. A lot SIFEN did not take (0301, a transport failure) is an
//!   operational failure of each of its documents: the retry schedule applies, and the retry
//!   reconciles by CDC before anything is sent again.
//! - [`SifenLot`]: polls the lot; while it is processing (0361) the job comes back after the
//!   poll interval (GMP: at least 10 minutes against SIFEN). Done (0362): each document records
//!   its own verdict, with the lot's answer as its `channel_response`. A lot SIFEN no longer
//!   knows (0360, 0364 after 48 h) or refused whole (0363): each of its undecided documents
//!   records an operational failure, and its retry asks SIFEN for the CDC before resending.
//!
//! After a crash the documents' `sifen.submit` jobs run again: the attempt is on record, so they
//! reconcile first (siConsDE, then siResultLoteDE by CDC — GMP item 3) and never resend a CDC
//! while a lot holding it is still processing.

use super::{JobFailure, Outcome, Pipeline, TenantId, outcome_commands, retry};
use async_trait::async_trait;
use chrono::Utc;
use kuatia_application::documents;
use kuatia_application::jobs::{Backoff, Job, NewJob};
use kuatia_application::worker::JobHandler;
use kuatia_domain::document::aggregate::{DocumentCommand, DocumentStatus};
use kuatia_infrastructure::sifen_soap::Delivery;
use kuatia_infrastructure::sifen_soap::client::SifenClient;
use kuatia_infrastructure::sifen_soap::messages::{LotDocument, LotQuery, LotState, MAX_LOT_DOCUMENTS};
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::oneshot;
use uuid::Uuid;

/// Job kind: poll a lot and record its documents' verdicts.
pub const SIFEN_LOT: &str = "sifen.lot";

/// A lot's documents, uncompressed, stay under this (GMP p.6: the message ≤ 1000 KB).
const MAX_LOT_XML_BYTES: usize = 900 * 1024;

/// When lots are used and how they are polled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LotSettings {
    /// How long a first attempt waits for others to share its lot; zero: never lots.
    pub window: Duration,
    /// From sending to the first poll, and between polls (GMP: ≥ 10 min).
    pub poll: Duration,
}

impl Default for LotSettings {
    fn default() -> Self {
        Self {
            window: Duration::from_millis(200),
            poll: Duration::from_secs(600),
        }
    }
}

/// What documents share a lot: one issuer, one type (0301/0363 otherwise), one endpoint and
/// one certificate (the TLS identity the lot goes out with), one tenant.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(super) struct LotKey {
    pub tenant: TenantId,
    pub endpoint: String,
    pub certificate_id: Uuid,
    pub ruc: String,
    pub doc_type: u8,
}

/// How a document's first attempt went out.
pub(super) enum Batched {
    /// No one shared its window: the caller sends it alone (siRecepDE).
    Alone,
    /// In lot `number` (0300); SIFEN's answer is `raw`.
    Lot { number: String, raw: String },
    /// The lot did not reach SIFEN's queue: an operational failure.
    NotReceived { reason: String, raw: Option<String> },
}

struct Waiting {
    document_id: Uuid,
    xml: Arc<str>,
    reply: oneshot::Sender<Batched>,
}

/// An open batch: the client it goes out with and who waits in it.
struct OpenBatch {
    client: SifenClient,
    waiting: Vec<Waiting>,
}

/// The open batches of this process.
#[derive(Default)]
pub(super) struct Batcher {
    open: Mutex<HashMap<LotKey, OpenBatch>>,
    /// `sifen.submit` jobs running now in this process.
    running: AtomicUsize,
}

/// Counts a running `sifen.submit` job while it lives; when it ends, batches that everyone still
/// running waits in close at once (no one else can join them).
pub(super) struct Running<'a>(&'a Pipeline);

impl Drop for Running<'_> {
    fn drop(&mut self) {
        self.0.batcher.running.fetch_sub(1, Ordering::AcqRel);
        self.0.close_if_everyone_waits();
    }
}

impl Batcher {
    /// Whether a first attempt should wait for company: others are submitting now, or a batch of
    /// its kind is open.
    fn has_company(&self, key: &LotKey) -> bool {
        self.running.load(Ordering::Acquire) > 1
            || self
                .open
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .contains_key(key)
    }
}

impl Pipeline {
    /// Marks a `sifen.submit` job as running.
    pub(super) fn submitting(&self) -> Running<'_> {
        self.batcher.running.fetch_add(1, Ordering::AcqRel);
        Running(self)
    }

    /// Closes every open batch when every running submission waits in one: waiting out the
    /// window then would only hold the workers (no one else can join until one is free).
    fn close_if_everyone_waits(&self) {
        let closed: Vec<(LotKey, OpenBatch)> = {
            let mut open = self
                .batcher
                .open
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            let waiting: usize = open.values().map(|b| b.waiting.len()).sum();
            if open.is_empty() || self.batcher.running.load(Ordering::Acquire) > waiting {
                return;
            }
            open.drain().collect()
        };
        for (key, batch) in closed {
            let pipeline = self.clone();
            tokio::spawn(async move { pipeline.flush(key, batch.client, batch.waiting).await });
        }
    }

    /// Sends a recorded first attempt, in a lot when others wait with it. A batch closes after
    /// the window, at 50 documents, or as soon as every running submission waits in a batch.
    pub(super) async fn batch(
        &self,
        key: LotKey,
        client: SifenClient,
        document_id: Uuid,
        xml: &str,
    ) -> Batched {
        if self.lots.window.is_zero() || !self.batcher.has_company(&key) {
            return Batched::Alone;
        }
        let (reply, answer) = oneshot::channel();
        let waiting = Waiting {
            document_id,
            xml: Arc::from(xml),
            reply,
        };
        let (opened, full) = {
            let mut open = self
                .batcher
                .open
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            let batch = open.entry(key.clone()).or_insert_with(|| OpenBatch {
                client,
                waiting: Vec::new(),
            });
            batch.waiting.push(waiting);
            let opened = batch.waiting.len() == 1;
            let full = batch.waiting.len() >= MAX_LOT_DOCUMENTS;
            (opened, full.then(|| open.remove(&key)).flatten())
        };
        if let Some(batch) = full {
            let pipeline = self.clone();
            tokio::spawn(async move { pipeline.flush(key, batch.client, batch.waiting).await });
        } else {
            if opened {
                let pipeline = self.clone();
                tokio::spawn(async move {
                    tokio::time::sleep(pipeline.lots.window).await;
                    let batch = pipeline
                        .batcher
                        .open
                        .lock()
                        .unwrap_or_else(std::sync::PoisonError::into_inner)
                        .remove(&key);
                    if let Some(batch) = batch {
                        pipeline.flush(key, batch.client, batch.waiting).await;
                    }
                });
            }
            self.close_if_everyone_waits();
        }
        // The flusher always answers; a dropped sender (a panic) means nothing was sent.
        answer.await.unwrap_or(Batched::Alone)
    }

    /// Sends a closed batch as lots; each waiting job hears how its document went.
    async fn flush(&self, key: LotKey, client: SifenClient, batch: Vec<Waiting>) {
        for lot in split(batch) {
            if lot.len() == 1 {
                for w in lot {
                    let _ = w.reply.send(Batched::Alone);
                }
                continue;
            }
            let outcome = self.send_lot(&key, &client, &lot).await;
            for w in lot {
                let _ = w.reply.send(match &outcome {
                    Batched::Alone => Batched::Alone,
                    Batched::Lot { number, raw } => Batched::Lot {
                        number: number.clone(),
                        raw: raw.clone(),
                    },
                    Batched::NotReceived { reason, raw } => Batched::NotReceived {
                        reason: reason.clone(),
                        raw: raw.clone(),
                    },
                });
            }
        }
    }

    async fn send_lot(&self, key: &LotKey, client: &SifenClient, lot: &[Waiting]) -> Batched {
        let xmls: Vec<&str> = lot.iter().map(|w| &*w.xml).collect();
        let d_id = u64::try_from(Utc::now().timestamp_millis()).unwrap_or(1);
        match client.send_lot(d_id, &xmls).await {
            Ok(answer) if answer.result.is_received() => {
                let number = answer.result.lot_number.clone().unwrap_or_default();
                let mut job = NewJob::new(
                    SIFEN_LOT,
                    format!("{SIFEN_LOT}:{}:{}:{number}", key.tenant, key.certificate_id),
                    key.tenant,
                    serde_json::json!({
                        "lot": number,
                        "document_ids": lot.iter().map(|w| w.document_id).collect::<Vec<_>>(),
                    }),
                );
                job.max_attempts = 1_000;
                job.run_at =
                    Some(Utc::now() + chrono::Duration::from_std(self.lots.poll).unwrap_or_default());
                match &self.jobs {
                    Some(jobs) => match jobs.enqueue(&job).await {
                        Ok(_) => Batched::Lot {
                            number,
                            raw: answer.raw,
                        },
                        // Sent but not polled: the documents' retries reconcile by CDC.
                        Err(e) => Batched::NotReceived {
                            reason: format!("lot {number} sent, but its poll could not be queued: {e}"),
                            raw: Some(answer.raw),
                        },
                    },
                    None => Batched::NotReceived {
                        reason: format!("lot {number} sent, but this pipeline cannot poll lots"),
                        raw: Some(answer.raw),
                    },
                }
            }
            Ok(answer) => Batched::NotReceived {
                reason: format!(
                    "SIFEN {}: {} (the lot was not queued)",
                    answer.result.code, answer.result.message
                ),
                raw: Some(answer.raw),
            },
            Err(e) => {
                let what = match e.delivery() {
                    Delivery::NotSent => "lot not sent",
                    Delivery::Unknown => "lot outcome unknown",
                };
                Batched::NotReceived {
                    reason: format!("{what}: {e}"),
                    raw: None,
                }
            }
        }
    }
}

/// Lots of at most 50 documents and about 900 KB, in arrival order.
fn split(batch: Vec<Waiting>) -> Vec<Vec<Waiting>> {
    let mut lots: Vec<Vec<Waiting>> = Vec::new();
    let mut bytes = 0;
    for w in batch {
        let fits = lots
            .last()
            .is_some_and(|l| l.len() < MAX_LOT_DOCUMENTS && bytes + w.xml.len() <= MAX_LOT_XML_BYTES);
        if !fits {
            lots.push(Vec::new());
            bytes = 0;
        }
        bytes += w.xml.len();
        if let Some(lot) = lots.last_mut() {
            lot.push(w);
        }
    }
    lots
}

/// A document's verdict in a finished lot.
pub(super) async fn lot_outcome(client: &SifenClient, cdc: &str, found: Option<&LotDocument>) -> Outcome {
    let Some(doc) = found else {
        return Outcome::Failed("the lot's result does not list this CDC".into());
    };
    let code = doc.results.first().map(|r| r.code.clone()).unwrap_or_default();
    let message = doc.results.first().map(|r| r.message.clone()).unwrap_or_default();
    let duplicate = doc
        .results
        .iter()
        .any(|r| r.code == kuatia_infrastructure::sifen_soap::codes::DUPLICATE_CDC || r.code == "1002");
    super::verdict(
        client,
        cdc,
        &doc.status,
        code,
        message,
        doc.authorization.clone(),
        duplicate,
    )
    .await
}

/// `sifen.lot`.
#[derive(Debug)]
pub struct SifenLot(pub(super) Pipeline);

#[async_trait]
impl JobHandler for SifenLot {
    fn kind(&self) -> &'static str {
        SIFEN_LOT
    }

    fn backoff(&self) -> Backoff {
        super::backoff_from_ms(1_000)
    }

    /// A poll that fails comes back after the poll interval, like one that heard "processing":
    /// the job's attempts count every earlier poll, so the exponential backoff of other jobs
    /// would leave a lot polled many times unpolled for up to an hour after one lost answer.
    async fn run(&self, job: &Job) -> Result<(), JobFailure> {
        match self.poll(job).await {
            Err(JobFailure::Retry(message)) => Err(JobFailure::RetryAfter(message, self.0.lots.poll)),
            other => other,
        }
    }
}

impl SifenLot {
    async fn poll(&self, job: &Job) -> Result<(), JobFailure> {
        let p = &self.0;
        let tenant = job.tenant_id;
        let number = job.payload["lot"]
            .as_str()
            .map(str::to_owned)
            .ok_or_else(|| JobFailure::Permanent(format!("job {} has no lot", job.id)))?;
        let ids: Vec<Uuid> = job.payload["document_ids"]
            .as_array()
            .map(|ids| ids.iter().filter_map(|v| v.as_str()?.parse().ok()).collect())
            .unwrap_or_default();
        // The documents still waiting for this lot's verdict.
        let mut waiting = Vec::new();
        for id in ids {
            if let Some(state) = p.load(tenant, id).await?
                && state.status == DocumentStatus::Submitting
                && state.cdc.is_some()
            {
                waiting.push((id, state));
            }
        }
        let Some((_, first)) = waiting.first() else {
            return Ok(());
        };
        let setup = p.setup(tenant, first).await?;
        let client = p.client(&setup)?;
        let d_id = u64::try_from(Utc::now().timestamp_millis()).unwrap_or(1);
        let answer = client
            .lot_result(d_id, &LotQuery::Number(number.clone()))
            .await
            .map_err(|e| retry(format!("polling lot {number}: {e}")))?;
        let state = answer.result.state();
        if state == LotState::Processing {
            return Err(JobFailure::RetryAfter(
                format!("lot {number} is still processing (SIFEN {})", answer.result.code),
                p.lots.poll,
            ));
        }
        // Every document's verdict, recorded together (one group commit, usually one
        // transaction) instead of one append after another.
        let mut work = Vec::with_capacity(waiting.len());
        for (id, state_of) in waiting {
            let cdc = state_of.cdc.clone().unwrap_or_default();
            let outcome = match &state {
                LotState::Done => {
                    let found = answer.result.documents.iter().find(|d| d.cdc == cdc);
                    lot_outcome(&client, &cdc, found).await
                }
                _ => Outcome::Failed(format!(
                    "lot {number}: SIFEN {} {}",
                    answer.result.code, answer.result.message
                )),
            };
            let commands = outcome_commands(p, &state_of, outcome, Some(&answer.raw)).await?;
            work.push((id, commands, tracing::Span::current()));
        }
        // A document another writer changed meanwhile: the job polls again, and the documents
        // recorded now are no longer waiting.
        for result in documents::commands_each(&p.store, tenant, work, super::metadata()).await {
            result.map_err(retry)?;
        }
        Ok(())
    }
}

/// Records that a document went out in lot `number` (with SIFEN's reception answer).
pub(super) async fn record_lot(
    p: &Pipeline,
    tenant: TenantId,
    id: Uuid,
    state: &kuatia_domain::document::aggregate::DocumentState,
    attempt: u32,
    number: String,
    raw: String,
) -> Result<(), JobFailure> {
    let now = Utc::now();
    let commands = vec![
        p.channel_response(state, &raw, now).await?,
        DocumentCommand::RecordSubmitted {
            attempt,
            lot_id: Some(number),
            at: now,
        },
    ];
    p.run(tenant, id, commands).await.map_err(retry)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn waiting(bytes: usize) -> Waiting {
        let (reply, _) = oneshot::channel();
        Waiting {
            document_id: Uuid::now_v7(),
            xml: Arc::from("x".repeat(bytes)),
            reply,
        }
    }

    #[test]
    fn lots_hold_at_most_fifty_documents_and_900_kb() {
        let sizes: Vec<usize> = split((0..120).map(|_| waiting(10)).collect())
            .iter()
            .map(Vec::len)
            .collect();
        assert_eq!(sizes, vec![50, 50, 20]);
        let sizes: Vec<usize> = split((0..5).map(|_| waiting(400 * 1024)).collect())
            .iter()
            .map(Vec::len)
            .collect();
        assert_eq!(sizes, vec![2, 2, 1]);
    }
}
