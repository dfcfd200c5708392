//! `sifen.submit`: every later attempt, reconciled with SIFEN first (siConsDE, then the lots),
//! and how an answer becomes the document's events.

use super::*;

/// `sifen.submit`.
#[derive(Debug)]
pub struct Submit(pub(super) Pipeline);

#[async_trait]
impl JobHandler for Submit {
    fn kind(&self) -> &'static str {
        SIFEN_SUBMIT
    }

    // Only for failures around SIFEN's answer (the store, a lost race): SIFEN's own failures
    // are recorded and follow the retry schedule instead.
    fn backoff(&self) -> Backoff {
        backoff_from_ms(500)
    }

    async fn run(&self, job: &Job) -> Result<(), JobFailure> {
        let p = &self.0;
        let (tenant, id, state) = p.document(job).await?;
        let now = p.ports.clock.now();
        match state.status {
            DocumentStatus::Submitting => p.resend(tenant, id, state).await,
            DocumentStatus::Retrying => {
                let due = state.retry_requested || state.next_attempt_at.is_none_or(|t| t <= now);
                if !due {
                    // An early job (a manual retry already ran the attempt); the scheduled one
                    // comes at its time.
                    return Ok(());
                }
                match p
                    .run(tenant, id, vec![DocumentCommand::ResumeSubmission { at: now }])
                    .await
                {
                    Ok(()) | Err(DocumentsError::Conflict) => {}
                    Err(e) => return Err(retry(e)),
                }
                match p.load(tenant, id).await? {
                    Some(s) if s.status == DocumentStatus::Submitting => p.resend(tenant, id, s).await,
                    _ => Ok(()),
                }
            }
            // Decided already, or not ours to send.
            _ => Ok(()),
        }
    }
}

impl Pipeline {
    /// Sends a `submitting` document again, alone (siRecepDE). Any earlier attempt may have been
    /// approved unheard, or sit in a lot SIFEN is still processing (GMP items 2, 3 and 5): SIFEN
    /// is asked for the CDC first, and the answer recorded instead of sending when it has one.
    /// Otherwise the next attempt goes on record before the stored signed bytes leave.
    pub(super) async fn resend(
        &self,
        tenant: TenantId,
        id: Uuid,
        mut state: DocumentState,
    ) -> Result<(), JobFailure> {
        let now = self.ports.clock.now();
        let cdc = state
            .cdc
            .clone()
            .ok_or_else(|| JobFailure::Permanent(format!("document {id} has no CDC")))?;
        let setup = self.setup(tenant, &state).await?;
        let client = self.client(&setup)?;
        let d_id = u64::try_from(now.timestamp_millis()).unwrap_or(1);
        if state.attempts > 0
            && let Some((outcome, raw)) = reconcile(&*client, &*self.ports.clock, d_id, &cdc).await
        {
            return record(self, tenant, id, &state, outcome, raw).await;
        }
        let xml = self.signed_xml(&state).await?;
        let attempt = state.attempts + 1;
        match self
            .run(
                tenant,
                id,
                vec![DocumentCommand::RecordSubmitted {
                    attempt,
                    lot_id: None,
                    at: now,
                }],
            )
            .await
        {
            Ok(()) => {}
            Err(DocumentsError::Conflict) => return Err(retry("the document changed meanwhile")),
            Err(e) => return Err(retry(e)),
        }
        state.attempts = attempt;
        let (outcome, raw) = send_alone(&*client, &*self.ports.clock, d_id + 2, &cdc, &xml).await;
        record(self, tenant, id, &state, outcome, raw).await
    }

    /// The document's signed XML, from the artifact store.
    async fn signed_xml(&self, state: &DocumentState) -> Result<String, JobFailure> {
        let bytes = super::super::signed_xml(self.ports.artifacts.as_ref(), state).await?;
        String::from_utf8(bytes).map_err(|_| JobFailure::Permanent("the signed XML is not UTF-8".into()))
    }
}

/// Before any attempt after the first: what SIFEN already holds for the CDC, read with the
/// answers table. `None` only when SIFEN said it holds no approval of the CDC (siConsDE 0420,
/// known absent) **and** that no lot holding it is processing (siResultLoteDE by CDC: 0360,
/// 0363, 0364): then the CDC may be sent. Otherwise `Some` outcome is recorded instead of
/// sending: approved (0422), the CDC's verdict in a finished lot, or an operational failure —
/// a lot still processing, or any answer that settles nothing (no answer, 0161/0162, a 5xx, a
/// body we cannot read, a code the table does not list), asked again on the retry schedule.
async fn reconcile(
    client: &dyn SifenGateway,
    clock: &dyn Clock,
    d_id: u64,
    cdc: &str,
) -> Option<(Outcome, Option<String>)> {
    let answer = match asking(|| client.query_de(d_id, cdc), |a| a.result.meaning()).await {
        Ok(answer) => answer,
        Err(e) => {
            let reason = format!(
                "asking SIFEN for the CDC before sending it again: {}",
                transport_failure(&e)
            );
            return Some((Outcome::Failed(reason), None));
        }
    };
    let r = &answer.result;
    match r.meaning() {
        Meaning::Approved => {
            let outcome = Outcome::Accepted {
                code: r.code.clone(),
                message: r.message.clone(),
                protocol: r.container.as_ref().and_then(|c| c.authorization.clone()),
            };
            return Some((outcome, Some(answer.raw)));
        }
        Meaning::Absent => {}
        Meaning::Rejected | Meaning::Processing | Meaning::Operational => {
            let reason = format!(
                "SIFEN {}: {} (asked for the CDC before sending it again; nothing is sent until SIFEN \
                 says whether it holds it)",
                r.code, r.message
            );
            return Some((Outcome::Failed(reason), Some(answer.raw)));
        }
    }
    // Known absent: a lot holding it may still be processing, or have decided it (GMP item 3:
    // the lot is found by one of its CDCs).
    let query = LotQuery::Cdc(cdc.to_owned());
    let answer = match asking(|| client.lot_result(d_id + 1, &query), |a| a.result.meaning()).await {
        Ok(answer) => answer,
        Err(e) => {
            let reason = format!(
                "asking SIFEN for the lot of the CDC before sending it again: {}",
                transport_failure(&e)
            );
            return Some((Outcome::Failed(reason), None));
        }
    };
    let r = &answer.result;
    match r.meaning() {
        // No lot holds it, its lot was refused whole, or is older than 48 h: send.
        Meaning::Absent => None,
        Meaning::Approved => {
            let outcome = match r.documents.iter().find(|d| d.cdc == cdc) {
                Some(found) => lots::lot_outcome(client, clock, cdc, found).await,
                None => Outcome::Failed(format!(
                    "SIFEN {}: {} (the lot holding the CDC does not list it; asked again later)",
                    r.code, r.message
                )),
            };
            Some((outcome, Some(answer.raw)))
        }
        Meaning::Processing => Some((
            Outcome::Failed(format!(
                "SIFEN {}: {} (SIFEN is still processing a lot holding this CDC)",
                r.code, r.message
            )),
            Some(answer.raw),
        )),
        Meaning::Rejected | Meaning::Operational => Some((
            Outcome::Failed(format!(
                "SIFEN {}: {} (asked for the lot of the CDC before sending it again; nothing is sent \
                 until SIFEN answers)",
                r.code, r.message
            )),
            Some(answer.raw),
        )),
    }
}
