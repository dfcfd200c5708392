//! `sifen.event`: a document's pending cancelación or inutilización, signed and sent through
//! siRecepEvento, SIFEN's verdict recorded.

use super::*;

/// `sifen.event`.
#[derive(Debug)]
pub struct SifenEvent(pub(super) Pipeline);

/// Builds and signs the pending event of a document (CPU work: run off the runtime).
fn build_and_sign_event(
    state: &DocumentState,
    kind: FiscalEventKind,
    reason: &str,
    key: &dyn SigningKey,
    event_id: u64,
    now: DateTime<Utc>,
) -> Result<String, JobFailure> {
    let permanent = |what: String| JobFailure::Permanent(format!("document {}: {what}", state.document_id));
    let event_kind = match kind {
        FiscalEventKind::Cancellation => EventKind::Cancellation {
            cdc: state
                .cdc
                .as_deref()
                .ok_or_else(|| permanent("a cancelación needs a CDC".into()))?,
        },
        FiscalEventKind::Inutilization => {
            let number = state
                .number
                .as_ref()
                .ok_or_else(|| permanent("an inutilización needs a number".into()))?;
            let n: u32 = number
                .number
                .parse()
                .map_err(|_| permanent(format!("the number {:?} is not numeric", number.number)))?;
            EventKind::Inutilization {
                timbrado: &number.timbrado,
                establishment: &number.establishment,
                point: &number.point,
                from: n,
                to: n,
                doc_type: state
                    .doc_type()
                    .sifen_code()
                    .ok_or_else(|| permanent("not a SIFEN document type".into()))?,
            }
        }
    };
    let unsigned = sifen_event::build_event(&EventInput {
        id: event_id,
        signed_at: kuatia_domain::local_time::paraguay(now),
        reason,
        kind: event_kind,
    })
    .map_err(|e| permanent(format!("the event cannot be built: {e}")))?;
    key.sign_event(&unsigned)
        .map_err(|e| permanent(format!("signing the event: {e}")))
}

#[async_trait]
impl JobHandler for SifenEvent {
    fn kind(&self) -> &'static str {
        SIFEN_EVENT
    }

    fn backoff(&self) -> Backoff {
        backoff_from_ms(500)
    }

    async fn run(&self, job: &Job) -> Result<(), JobFailure> {
        let p = &self.0;
        let (tenant, id, state) = p.document(job).await?;
        // Answered already (a repeated job), or nothing asked.
        let Some(pending) = state.pending.clone() else {
            return Ok(());
        };
        let setup = p.setup(tenant, &state).await?;
        let client = p.client(&setup)?;
        let now = p.ports.clock.now();
        let d_id = u64::try_from(now.timestamp_millis()).unwrap_or(1);
        let event_id = u64::try_from(now.timestamp())
            .unwrap_or(1)
            .clamp(1, sifen_event::MAX_EVENT_ID);
        let signed = {
            let (state, key, reason) = (state.clone(), setup.key.clone(), pending.reason.clone());
            tokio::task::spawn_blocking(move || {
                build_and_sign_event(&state, pending.kind, &reason, &*key, event_id, now)
            })
            .await
            .map_err(|e| retry(format!("the signing task: {e}")))??
        };
        let answer = client
            .send_events(d_id, &[signed.as_str()])
            .await
            .map_err(|e| retry(format!("sending the {}: {e}", pending.kind)))?;
        let Some(outcome) = answer.result.events.first() else {
            return Err(retry(format!(
                "SIFEN answered the {} with no event result",
                pending.kind
            )));
        };
        let (code, message) = outcome
            .results
            .first()
            .map(|r| (r.code.clone(), r.message.clone()))
            .unwrap_or_default();
        // The answers table decides: 0600 and "already registered" (4003, 4066) register; a
        // rejection needs "Rechazado" and a rejecting code; anything else is asked again.
        let registered = match outcome.meaning() {
            Meaning::Approved => true,
            Meaning::Rejected => false,
            Meaning::Absent | Meaning::Processing | Meaning::Operational => {
                return Err(retry(format!("SIFEN {code}: {message}")));
            }
        };
        let at = p.ports.clock.now();
        let verdict = match (pending.kind, registered) {
            (FiscalEventKind::Cancellation, true) => DocumentCommand::RecordCancelled {
                code,
                message,
                protocol: outcome.authorization.clone(),
                at,
            },
            (FiscalEventKind::Cancellation, false) => {
                DocumentCommand::RecordCancellationRefused { code, message, at }
            }
            (FiscalEventKind::Inutilization, true) => DocumentCommand::RecordInutilized {
                code,
                message,
                protocol: outcome.authorization.clone(),
                at,
            },
            (FiscalEventKind::Inutilization, false) => {
                DocumentCommand::RecordInutilizationRefused { code, message, at }
            }
        };
        let response = p.store_response(&answer.raw).await?;
        let commands = vec![response_artifact(&state, &response, at), verdict];
        match p.run(tenant, id, commands).await {
            Ok(()) => Ok(()),
            Err(DocumentsError::Conflict) => Err(retry("the document changed meanwhile")),
            Err(e) => Err(retry(e)),
        }
    }
}
