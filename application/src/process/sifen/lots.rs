//! SIFEN lots (siRecepLoteDE, siResultLoteDE; SET's good-practice guide, GMP, items 2–5): the first attempts of a numbering turn (one series:
//! one issuer, one type) go to SIFEN together as one siRecepLoteDE, and a `sifen.lot` job polls
//! siResultLoteDE for their verdicts.
//!
//! - A turn of several documents is sent as lots of at most 50 documents and about 900 KB
//!   ([`split`]); a turn of one goes alone (siRecepDE). A turn's leader gathers the `sifen.prepare`
//!   jobs already on their way for at most the window (`LotSettings::window`), so documents
//!   claimed together share a turn and a lot; a zero window never uses lots.
//!   Every document's first attempt is on record (the turn's append) before its lot leaves.
//! - SIFEN's 0300 gives the lot number: the `sifen.lot` job is queued first (keyed by the lot,
//!   due one poll interval later), then the turn records each document's lot number with the
//!   answer, together. A lot SIFEN did not take (0301, a transport failure) is an operational
//!   failure of each of its documents: the retry schedule applies, and the retry reconciles by
//!   CDC before anything is sent again.
//! - [`SifenLot`]: polls the lot and reads the answer with SIFEN's answers table; while it is
//!   processing (0361), or the answer settles nothing (0161, an unlisted code, no answer), the
//!   job comes back after the poll interval (GMP: at least 10 minutes against SIFEN) and no
//!   document is touched. Done (0362): each document records its own entry's verdict (read as
//!   siRecepDE's answer), with the lot's answer as its `channel_response`. A lot SIFEN no longer
//!   knows (0360, 0364 after 48 h) or refused whole (0363): each of its undecided documents
//!   records an operational failure, and its retry asks SIFEN for the CDC before resending.
//!
//! After a crash the documents' `sifen.prepare` jobs run again: the attempt is on record, so they
//! reconcile first (siConsDE, then siResultLoteDE by CDC — GMP item 3) and never resend a CDC
//! while a lot holding it is still processing.

use super::{Heard, JobFailure, Outcome, Pipeline, Setup, TenantId, outcome_commands, retry};
use crate::documents;
use crate::jobs::{Backoff, Job, NewJob};
use crate::process::ports::{Clock, SifenGateway};
use crate::worker::JobHandler;
use async_trait::async_trait;
use kuatia_domain::document::aggregate::{DocumentState, DocumentStatus};
use kuatia_domain::sifen::answers::Meaning;
use kuatia_domain::sifen::exchange::{LotDocument, LotQuery, MAX_LOT_DOCUMENTS};
use std::sync::Arc;
use std::time::Duration;
use uuid::Uuid;

/// Job kind: poll a lot and record its documents' verdicts.
pub const SIFEN_LOT: &str = "sifen.lot";

/// A lot's documents, uncompressed, stay under this (GMP p.6: the message ≤ 1000 KB).
const MAX_LOT_XML_BYTES: usize = 900 * 1024;

/// When lots are used and how they are polled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LotSettings {
    /// How long a numbering turn waits at most for the `sifen.prepare` jobs already on their way
    /// to join it (and its lot); zero: never lots.
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

impl LotKey {
    /// A document's lot: its setup's endpoint, certificate and issuer, its type.
    pub(super) fn of(tenant: TenantId, setup: &Setup, state: &DocumentState) -> Self {
        Self {
            tenant,
            endpoint: setup.endpoint.clone(),
            certificate_id: setup.certificate_id,
            ruc: setup.issuer.ruc.to_string(),
            doc_type: state.document.doc_type.sifen_code().unwrap_or_default(),
        }
    }
}

impl Pipeline {
    /// Sends recorded first attempts (document id, signed XML) as one lot. Received (0300): the
    /// lot's poll is queued, then each document hears the lot number. Otherwise each hears an
    /// operational failure.
    pub(super) async fn send_lot(
        &self,
        key: &LotKey,
        client: &dyn SifenGateway,
        lot: &[(Uuid, &str)],
    ) -> Heard {
        let xmls: Vec<&str> = lot.iter().map(|(_, xml)| *xml).collect();
        let d_id = u64::try_from(self.ports.clock.now().timestamp_millis()).unwrap_or(1);
        let failed =
            |reason: String, raw: Option<String>| Heard::Answer(Outcome::Failed(reason), raw.map(Arc::from));
        match client.send_lot(d_id, &xmls).await {
            Ok(answer) if answer.result.is_received() => {
                let number = answer.result.lot_number.clone().unwrap_or_default();
                let mut job = NewJob::new(
                    SIFEN_LOT,
                    format!("{SIFEN_LOT}:{}:{}:{number}", key.tenant, key.certificate_id),
                    key.tenant,
                    serde_json::json!({
                        "lot": number,
                        "document_ids": lot.iter().map(|(id, _)| *id).collect::<Vec<_>>(),
                    }),
                );
                job.max_attempts = 1_000;
                job.run_at = Some(
                    self.ports.clock.now() + chrono::Duration::from_std(self.lots.poll).unwrap_or_default(),
                );
                match &self.jobs {
                    Some(jobs) => match jobs.enqueue(&job).await {
                        Ok(_) => Heard::InLot {
                            number,
                            raw: Arc::from(answer.raw),
                        },
                        // Sent but not polled: the documents' retries reconcile by CDC.
                        Err(e) => failed(
                            format!("lot {number} sent, but its poll could not be queued: {e}"),
                            Some(answer.raw),
                        ),
                    },
                    None => failed(
                        format!("lot {number} sent, but this pipeline cannot poll lots"),
                        Some(answer.raw),
                    ),
                }
            }
            Ok(answer) => failed(
                format!(
                    "SIFEN {}: {} (the lot was not queued)",
                    answer.result.code, answer.result.message
                ),
                Some(answer.raw),
            ),
            Err(e) => failed(format!("lot {}", super::transport_failure(&e)), None),
        }
    }
}

/// Lots of at most 50 documents and about 900 KB (by `size`, a document's XML bytes), in order.
pub(super) fn split<T>(documents: &[T], size: impl Fn(&T) -> usize) -> Vec<&[T]> {
    let mut lots = Vec::new();
    let (mut start, mut bytes) = (0, 0);
    for (i, document) in documents.iter().enumerate() {
        let fits = i > start && i - start < MAX_LOT_DOCUMENTS && bytes + size(document) <= MAX_LOT_XML_BYTES;
        if !fits && i > start {
            lots.push(&documents[start..i]);
            (start, bytes) = (i, 0);
        }
        bytes += size(document);
    }
    if start < documents.len() {
        lots.push(&documents[start..]);
    }
    lots
}

/// A document's verdict in a finished lot: its entry read with the answers table (an
/// approval held from before confirmed with siConsDE, as siRecepDE's).
pub(super) async fn lot_outcome(
    client: &dyn SifenGateway,
    clock: &dyn Clock,
    cdc: &str,
    entry: &LotDocument,
) -> Outcome {
    let message = entry
        .results
        .first()
        .map(|r| r.message.clone())
        .unwrap_or_default();
    let heard = super::Verdict {
        meaning: entry.meaning(),
        approved_before: entry.approved_before(),
        code: entry.code().to_owned(),
        message,
        authorization: entry.authorization.clone(),
    };
    super::verdict(client, clock, cdc, heard).await
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
        // The documents still waiting for this lot's verdict (cached states that wait need no
        // read: their verdicts' appends expect the version seen).
        let waits = |state: &DocumentState| state.status == DocumentStatus::Submitting && state.cdc.is_some();
        let mut waiting = Vec::new();
        for id in ids {
            if let Some(state) = p.load_to_act(tenant, id, waits).await?
                && waits(&state)
            {
                waiting.push((id, state));
            }
        }
        let Some((_, first)) = waiting.first() else {
            return Ok(());
        };
        let setup = p.setup(tenant, first).await?;
        let client = p.client(&setup)?;
        let d_id = u64::try_from(p.ports.clock.now().timestamp_millis()).unwrap_or(1);
        let answer = client
            .lot_result(d_id, &LotQuery::Number(number.clone()))
            .await
            .map_err(|e| retry(format!("polling lot {number}: {e}")))?;
        // The answers table decides: processing, or an answer that settles nothing (0161, a code
        // it does not list), polls again later and touches no document; concluded (0362) gives
        // each document its entry's verdict; no lot processing (0360, 0363, 0364) makes each an
        // operational failure whose retry asks SIFEN for its CDC before anything is sent.
        let meaning = answer.result.meaning();
        match meaning {
            Meaning::Approved | Meaning::Absent => {}
            Meaning::Processing => {
                return Err(JobFailure::RetryAfter(
                    format!("lot {number} is still processing (SIFEN {})", answer.result.code),
                    p.lots.poll,
                ));
            }
            Meaning::Rejected | Meaning::Operational => {
                return Err(JobFailure::RetryAfter(
                    format!(
                        "polling lot {number}: SIFEN {} {} settles nothing; asking again later",
                        answer.result.code, answer.result.message
                    ),
                    p.lots.poll,
                ));
            }
        }
        // Every document's verdict, recorded together (one group commit, usually one
        // transaction) instead of one append after another; the lot's answer stored once.
        let response = p.store_response(&answer.raw).await?;
        let mut work = Vec::with_capacity(waiting.len());
        for (id, state_of) in waiting {
            let cdc = state_of.cdc.clone().unwrap_or_default();
            let found = answer.result.documents.iter().find(|d| d.cdc == cdc);
            let outcome = match (meaning, found) {
                (Meaning::Approved, Some(entry)) => lot_outcome(&*client, &*p.ports.clock, &cdc, entry).await,
                (Meaning::Approved, None) => Outcome::Failed(format!(
                    "SIFEN {}: the concluded lot {number} does not list this CDC",
                    answer.result.code
                )),
                _ => Outcome::Failed(format!(
                    "SIFEN {}: {} (lot {number})",
                    answer.result.code, answer.result.message
                )),
            };
            let commands = outcome_commands(p, &state_of, outcome, Some(&response));
            work.push((id, commands, tracing::Span::current()));
        }
        // A document another writer changed meanwhile: the job polls again, and the documents
        // recorded now are no longer waiting.
        for result in
            documents::commands_each(&p.ports.store, tenant, work, super::metadata(super::ACTOR)).await
        {
            result.map_err(retry)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lots_hold_at_most_fifty_documents_and_900_kb() {
        let sizes = |documents: &[usize]| -> Vec<usize> {
            split(documents, |b| *b).iter().map(|l| l.len()).collect()
        };
        assert_eq!(sizes(&[10; 120]), vec![50, 50, 20]);
        assert_eq!(sizes(&[400 * 1024; 5]), vec![2, 2, 1]);
        // A document over the limit alone still goes (alone in its lot).
        assert_eq!(sizes(&[10, 1000 * 1024, 10]), vec![1, 1, 1]);
        assert_eq!(sizes(&[10]), vec![1]);
        assert!(sizes(&[]).is_empty());
    }
}
