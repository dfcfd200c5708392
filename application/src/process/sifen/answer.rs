//! SIFEN's answer to an attempt and how it becomes the document's events: the outcome, the raw
//! answer stored as a `channel_response` artifact, the verdict or the operational failure with
//! the next attempt's time. Prepare, submit and lots all record through here.

use super::*;

/// What SIFEN answered to a first attempt sent by its turn.
#[derive(Clone)]
pub(super) enum Heard {
    /// In lot `number` (0300); its raw answer.
    InLot { number: String, raw: Arc<str> },
    /// A verdict or an operational failure, with SIFEN's raw answer when there was one.
    Answer(Outcome, Option<Arc<str>>),
}

impl Heard {
    pub(super) fn raw(&self) -> Option<&Arc<str>> {
        match self {
            Heard::InLot { raw, .. } => Some(raw),
            Heard::Answer(_, raw) => raw.as_ref(),
        }
    }
}

/// SIFEN's answer to one attempt, as the document records it.
#[derive(Clone)]
pub(super) enum Outcome {
    Accepted {
        code: String,
        message: String,
        protocol: Option<String>,
    },
    Rejected {
        code: String,
        message: String,
    },
    Failed(String),
}

/// Sends one signed DE alone (siRecepDE): SIFEN's verdict, or the operational failure.
pub(super) async fn send_alone(
    client: &dyn SifenGateway,
    clock: &dyn Clock,
    d_id: u64,
    cdc: &str,
    xml: &str,
) -> (Outcome, Option<String>) {
    match client.send_de(d_id, xml).await {
        Ok(answer) => {
            let r = &answer.result;
            let code = r.code().unwrap_or_default().to_owned();
            let message = r.results.first().map(|r| r.message.clone()).unwrap_or_default();
            let heard = Verdict {
                meaning: r.meaning(),
                approved_before: r.is_duplicate(),
                code,
                message,
                authorization: r.authorization.clone(),
            };
            let outcome = verdict(client, clock, cdc, heard).await;
            (outcome, Some(answer.raw))
        }
        Err(e) => (Outcome::Failed(transport_failure(&e)), None),
    }
}

/// An exchange that failed on the wire, as the reason of an operational failure: the answers
/// table's transport outcome (`not sent (refused): …`), which the document detail explains.
pub(super) fn transport_failure(e: &SoapError) -> String {
    match e.transport() {
        Some(t) => t.reason(&e.to_string()),
        None => format!("not sent: {e}"),
    }
}

/// What SIFEN answered for one DE, as [`verdict`] reads it.
pub(super) struct Verdict {
    /// The answers table's reading of `dEstRes` and the code.
    pub(super) meaning: Meaning,
    /// 1001/1002: an approval held from before.
    pub(super) approved_before: bool,
    /// `dCodRes`.
    pub(super) code: String,
    /// `dMsgRes`.
    pub(super) message: String,
    /// `dProtAut`.
    pub(super) authorization: Option<String>,
}

/// SIFEN's verdict on one DE (siRecepDE's answer, or its entry in a finished lot), as the
/// answers table means it (`meaning`, from `dEstRes` and the code): approved, rejected, or an
/// operational failure. An approval held from before (`approved_before`: 1001/1002, a duplicate
/// of an approval whose answer we never heard) is confirmed with siConsDE, whose authorisation
/// is taken; until siConsDE answers "approved", it is an operational failure, never a rejection.
pub(super) async fn verdict(
    client: &dyn SifenGateway,
    clock: &dyn Clock,
    cdc: &str,
    heard: Verdict,
) -> Outcome {
    let Verdict {
        meaning,
        approved_before,
        code,
        message,
        authorization,
    } = heard;
    match meaning {
        Meaning::Approved if approved_before => {
            let d_id = u64::try_from(clock.now().timestamp_millis()).unwrap_or(1);
            match asking(|| client.query_de(d_id, cdc), |a| a.result.meaning()).await {
                Ok(found) if found.result.meaning() == Meaning::Approved => Outcome::Accepted {
                    code: found.result.code.clone(),
                    message: found.result.message.clone(),
                    protocol: found
                        .result
                        .container
                        .as_ref()
                        .and_then(|c| c.authorization.clone()),
                },
                Ok(other) => Outcome::Failed(format!(
                    "SIFEN {code}: {message} (an approval from before); siConsDE answered {} {}, so it is \
                     asked again later",
                    other.result.code, other.result.message
                )),
                Err(e) => Outcome::Failed(format!(
                    "SIFEN {code}: {message} (an approval from before); asking siConsDE for it: {}",
                    transport_failure(&e)
                )),
            }
        }
        Meaning::Approved => Outcome::Accepted {
            code,
            message,
            protocol: authorization,
        },
        Meaning::Rejected => Outcome::Rejected { code, message },
        Meaning::Absent | Meaning::Processing | Meaning::Operational => {
            Outcome::Failed(format!("SIFEN {code}: {message}"))
        }
    }
}

/// How many times a reconciliation question is asked in one attempt before the attempt counts as
/// an operational failure.
pub(super) const RECONCILE_TRIES: u32 = 3;

/// Asks a reconciliation question (siConsDE, siResultLoteDE: reads, safe to repeat) again at once
/// while its answer settles nothing — no answer, or one the answers table reads as an
/// operational failure (`meaning`: 0161, an HTTP 500, a code it does not list) — up to
/// [`RECONCILE_TRIES`] times, 200 ms apart, then 400 ms; the last answer is returned either way.
/// A retry needs every question answered before it may resend, and each unanswered one would
/// otherwise be recorded as an operational failure that moves the retry schedule a step further
/// (30 s, 2 min, 10 min, … 2 h): with SIFEN failing half its answers, a document would wait hours.
pub(super) async fn asking<T, F, Fut>(mut ask: F, meaning: impl Fn(&T) -> Meaning) -> Result<T, SoapError>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, SoapError>>,
{
    let mut tries = 0;
    loop {
        tries += 1;
        let answer = ask().await;
        let settled = answer.as_ref().is_ok_and(|a| meaning(a) != Meaning::Operational);
        if settled || tries >= RECONCILE_TRIES {
            return answer;
        }
        tokio::time::sleep(std::time::Duration::from_millis(200 * u64::from(tries))).await;
    }
}

/// SIFEN's raw answer, stored in the artifact store.
pub(super) struct Response {
    sha256: String,
    size: u64,
}

impl Pipeline {
    /// Stores SIFEN's raw answer (once, whatever number of documents it answers).
    pub(super) async fn store_response(&self, raw: &str) -> Result<Response, JobFailure> {
        let sha256 = self.ports.artifacts.put(raw.as_bytes()).await.map_err(retry)?;
        Ok(Response {
            sha256,
            size: raw.len() as u64,
        })
    }
}

/// Records a stored answer as the document's next `channel_response`.
pub(super) fn response_artifact(
    state: &DocumentState,
    response: &Response,
    at: DateTime<Utc>,
) -> DocumentCommand {
    DocumentCommand::RecordArtifact {
        artifact_id: Uuid::now_v7(),
        kind: ArtifactKind::ChannelResponse,
        content_type: "application/xml".into(),
        sha256: response.sha256.clone(),
        size: response.size,
        version: state.next_artifact_version(ArtifactKind::ChannelResponse),
        at,
    }
}

/// Records an attempt's outcome (and SIFEN's raw answer as a `channel_response` artifact).
pub(super) async fn record(
    p: &Pipeline,
    tenant: TenantId,
    id: Uuid,
    state: &DocumentState,
    outcome: Outcome,
    raw: Option<String>,
) -> Result<(), JobFailure> {
    let response = match raw {
        Some(raw) => Some(p.store_response(&raw).await?),
        None => None,
    };
    let commands = outcome_commands(p, state, outcome, response.as_ref());
    match p.run(tenant, id, commands).await {
        Ok(()) => Ok(()),
        Err(DocumentsError::Conflict) => Err(retry("the document changed meanwhile")),
        Err(e) => Err(retry(e)),
    }
}

/// What recording an attempt's outcome appends: SIFEN's raw answer (stored already) as a
/// `channel_response` artifact, then the verdict, or the operational failure with the next
/// attempt's time.
pub(super) fn outcome_commands(
    p: &Pipeline,
    state: &DocumentState,
    outcome: Outcome,
    response: Option<&Response>,
) -> Vec<DocumentCommand> {
    let now = p.ports.clock.now();
    let mut commands = Vec::new();
    if let Some(response) = response {
        commands.push(response_artifact(state, response, now));
    }
    commands.push(match outcome {
        Outcome::Accepted {
            code,
            message,
            protocol,
        } => DocumentCommand::RecordAccepted {
            code,
            message,
            protocol,
            approved_at: now,
            at: now,
        },
        Outcome::Rejected { code, message } => DocumentCommand::RecordRejected {
            code,
            message,
            at: now,
        },
        Outcome::Failed(reason) => {
            let horizon = state.signed_at.map_or(now, |s| s + SUBMISSION_HORIZON);
            if now >= horizon {
                DocumentCommand::GiveUp { reason, at: now }
            } else {
                let delay = retry_delay(state.failures + 1);
                let scaled =
                    TimeDelta::milliseconds((delay.num_milliseconds() as f64 * p.retry_scale) as i64);
                let next = (now + scaled).min(horizon);
                DocumentCommand::RecordOperationalFailure {
                    reason,
                    next_attempt_at: next,
                    at: now,
                }
            }
        }
    });
    commands
}
