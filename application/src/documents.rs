//! Documents: the use cases behind `POST /v1/documents`, a manual retry, a cancellation or
//! inutilización (which waits a bounded time for SIFEN's answer), and the commands the channels
//! send. Each is a command on the document's stream (`domain::document::aggregate`).

use chrono::{DateTime, Utc};
use kuatia_domain::channel::ChannelKind;
use kuatia_domain::document::aggregate::{
    self, DeliveryTarget, Document, DocumentCommand, DocumentError, DocumentEvent, DocumentState,
    DocumentStatus, FiscalEventKind, HandChannel, HandDelivery, PublicLink,
};
use kuatia_domain::document::canonical::CanonicalDocument;
use kuatia_domain::document::issues::Issue;
use kuatia_domain::document::routing::Routing;
use kuatia_domain::tenancy::TenantId;
use std::sync::Arc;
use uuid::Uuid;

use crate::aggregate::{CommandExecutor, ExecuteError, JobPolicy};
use crate::event_store::{EventMetadata, SharedStore, StoreError, StreamRef};
use crate::jobs::NewJob;
use crate::process::ports::Clock;
use crate::webhooks::DELIVERY_PLAN;

/// Why a document command did not happen.
#[derive(Debug, thiserror::Error)]
pub enum DocumentsError {
    /// The aggregate refused (an invalid transition maps to 409).
    #[error(transparent)]
    Refused(DocumentError),
    /// No such document.
    #[error("no such document")]
    NotFound,
    /// A concurrent command won.
    #[error("a concurrent change won; retry")]
    Conflict,
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

fn from_execute(err: ExecuteError<DocumentError>) -> DocumentsError {
    match err {
        ExecuteError::Rejected(DocumentError::NotFound) | ExecuteError::NotFound => DocumentsError::NotFound,
        ExecuteError::Rejected(e) => DocumentsError::Refused(e),
        ExecuteError::Conflict(_) => DocumentsError::Conflict,
        ExecuteError::Store(e) => DocumentsError::Store(e),
    }
}

/// Job kind: number, build, sign and store a queued SIFEN document, and send its first attempt
/// (with the documents numbered in the same turn).
pub const SIFEN_PREPARE: &str = "sifen.prepare";
/// Job kind: send a SIFEN document again after an operational failure or a manual retry
/// (reconciling first).
pub const SIFEN_SUBMIT: &str = "sifen.submit";
/// Job kind: send a requested SIFEN event (cancelación, inutilización) and record SIFEN's answer.
pub const SIFEN_EVENT: &str = "sifen.event";
/// Job kind: number a queued autoimpresor document from its channel's range (or refuse it), then
/// render and store its printable.
pub const AUTOIMPRESOR_ISSUE: &str = "autoimpresor.issue";
/// Job kind: report an issued or voided autoimpresor number to the channel's endpoint.
pub const AUTOIMPRESOR_REPORT: &str = "autoimpresor.report";
/// Job kind: render and record the KuDE of an accepted SIFEN document.
pub const KUDE_RENDER: &str = "printing.kude";
/// Job kind: render a new version of a document's printable (`POST /regenerate-pdf`).
pub const PRINTABLE_REGENERATE: &str = "printing.regenerate";

/// The document's outbox: the jobs its new events call for, committed with them.
/// - queued for `sifen` → [`SIFEN_PREPARE`] (which also sends the first attempt);
/// - a retry scheduled → [`SIFEN_SUBMIT`] at its time; a manual retry → [`SIFEN_SUBMIT`] now;
/// - a cancelación or inutilización requested → [`SIFEN_EVENT`] now (the aggregate requests
///   these only for `sifen` documents);
/// - queued for `autoimpresor` → [`AUTOIMPRESOR_ISSUE`]; rendered (accepted) or voided
///   (`DocumentInvalidated` without fiscal effect, which only an autoimpresor void is) →
///   [`AUTOIMPRESOR_REPORT`] with `report` `issued` or `voided`.
/// - accepted (only `sifen` documents are accepted by SIFEN's answer) → [`KUDE_RENDER`];
/// - a new printable requested → [`PRINTABLE_REGENERATE`].
/// - accepted (either channel), when the document has delivery settings → [`DELIVERY_PLAN`]
///   (customer and issuer delivery).
///
/// Webhooks are not queued here: the `webhook_fanout` subscription reads the webhook-raising
/// events from the stream (`kuatia_projections::webhook_fanout`).
///
/// Job keys name the event that caused them, so a replayed command never queues a job twice.
pub fn job_policy() -> Arc<JobPolicy<Document>> {
    Arc::new(
        |stream: &StreamRef, document: &Document, events: &[DocumentEvent]| {
            let Some(document_id) = aggregate::document_of(&stream.stream_id) else {
                return Vec::new();
            };
            let payload = serde_json::json!({ "document_id": document_id });
            let job = |kind: &str, key: String, run_at: Option<DateTime<Utc>>| {
                let mut job = NewJob::new(kind, key, stream.tenant_id, payload.clone());
                job.run_at = run_at;
                job.max_attempts = 1_000;
                job
            };
            let sifen = events.iter().any(|e| {
            matches!(e, DocumentEvent::DocumentReceived { routing, .. } if routing.channel == ChannelKind::Sifen)
        });
            let autoimpresor = events.iter().any(|e| {
            matches!(e, DocumentEvent::DocumentReceived { routing, .. } if routing.channel == ChannelKind::Autoimpresor)
        });
            let report = |what: &str| {
                let mut job = NewJob::new(
                    AUTOIMPRESOR_REPORT,
                    format!("{AUTOIMPRESOR_REPORT}:{document_id}:{what}"),
                    stream.tenant_id,
                    serde_json::json!({ "document_id": document_id, "report": what }),
                );
                job.max_attempts = 1_000;
                job
            };
            let mut jobs = Vec::new();
            for event in events {
                match event {
                    DocumentEvent::DocumentQueued { .. } if sifen => {
                        jobs.push(job(SIFEN_PREPARE, format!("{SIFEN_PREPARE}:{document_id}"), None));
                    }
                    DocumentEvent::DocumentQueued { .. } if autoimpresor => {
                        jobs.push(job(
                            AUTOIMPRESOR_ISSUE,
                            format!("{AUTOIMPRESOR_ISSUE}:{document_id}"),
                            None,
                        ));
                    }
                    DocumentEvent::DocumentRendered { .. } => jobs.push(report("issued")),
                    DocumentEvent::DocumentInvalidated { fiscal: false, .. } => jobs.push(report("voided")),
                    DocumentEvent::DocumentRetryScheduled { next_attempt_at, .. } => jobs.push(job(
                        SIFEN_SUBMIT,
                        format!(
                            "{SIFEN_SUBMIT}:{document_id}:retry:{}",
                            next_attempt_at.timestamp_micros()
                        ),
                        Some(*next_attempt_at),
                    )),
                    DocumentEvent::DocumentRetryRequested { at } => jobs.push(job(
                        SIFEN_SUBMIT,
                        format!("{SIFEN_SUBMIT}:{document_id}:manual:{}", at.timestamp_micros()),
                        None,
                    )),
                    DocumentEvent::DocumentCancellationRequested { at, .. } => jobs.push(job(
                        SIFEN_EVENT,
                        format!(
                            "{SIFEN_EVENT}:{document_id}:cancellation:{}",
                            at.timestamp_micros()
                        ),
                        None,
                    )),
                    DocumentEvent::DocumentInutilizationRequested { at, .. } => jobs.push(job(
                        SIFEN_EVENT,
                        format!(
                            "{SIFEN_EVENT}:{document_id}:inutilization:{}",
                            at.timestamp_micros()
                        ),
                        None,
                    )),
                    DocumentEvent::DocumentAccepted { .. } => jobs.push(job(
                        KUDE_RENDER,
                        format!("{KUDE_RENDER}:{document_id}:accepted"),
                        None,
                    )),
                    DocumentEvent::PdfRegenerationRequested { at, .. } => jobs.push(job(
                        PRINTABLE_REGENERATE,
                        format!("{PRINTABLE_REGENERATE}:{document_id}:{}", at.timestamp_micros()),
                        None,
                    )),
                    _ => {}
                }
                // Customer and issuer delivery once the document is accepted, when
                // it asks for any (most documents do not: no job to claim and find nothing to do).
                if matches!(
                    event,
                    DocumentEvent::DocumentAccepted { .. } | DocumentEvent::DocumentRendered { .. }
                ) && document.state().is_some_and(|s| s.document.delivery.is_some())
                {
                    jobs.push(job(DELIVERY_PLAN, format!("{DELIVERY_PLAN}:{document_id}"), None));
                }
            }
            jobs
        },
    )
}

/// The executor every document command goes through (with the outbox policy).
pub fn executor(store: &SharedStore) -> CommandExecutor<Document> {
    CommandExecutor::<Document>::new(store.clone(), ()).with_jobs(job_policy())
}

/// How often [`command`] decides again after another writer appended to the document first.
const CONFLICT_ATTEMPTS: usize = 5;

/// Runs one command on a document, as [`commands`] does.
pub async fn command(
    store: &SharedStore,
    tenant: TenantId,
    document_id: Uuid,
    command: DocumentCommand,
    metadata: EventMetadata,
) -> Result<(), DocumentsError> {
    commands(store, tenant, document_id, vec![command], metadata).await
}

/// Runs commands on a document, all in one append or none. When another writer (a job
/// recording an artifact or a delivery, say) appended between the load and the append, the
/// commands are decided again on the newer state, a few times, before
/// [`DocumentsError::Conflict`] is given up to the caller.
pub async fn commands(
    store: &SharedStore,
    tenant: TenantId,
    document_id: Uuid,
    commands: Vec<DocumentCommand>,
    metadata: EventMetadata,
) -> Result<(), DocumentsError> {
    let stream = aggregate::stream_id(tenant, document_id);
    let mut attempt = 1;
    loop {
        let result = executor(store)
            .execute_all(tenant, &stream, commands.clone(), metadata.clone())
            .await
            .map(|_| ())
            .map_err(from_execute);
        match result {
            Err(DocumentsError::Conflict) if attempt < CONFLICT_ATTEMPTS => attempt += 1,
            other => return other,
        }
    }
}

/// Runs each document's commands, as [`commands`] does for one, and commits them in the order
/// given, queued together (`CommandExecutor::execute_each`): documents numbered from one series
/// append their numbers in order, usually in one transaction. A document another writer changed
/// meanwhile answers [`DocumentsError::Conflict`] (not decided again: the caller knows whether
/// that is worth it). The commands run in the span given with them (the jobs they queue carry
/// its trace). Each document comes back as its commands left it.
pub async fn commands_each(
    store: &SharedStore,
    tenant: TenantId,
    work: Vec<(Uuid, Vec<DocumentCommand>, tracing::Span)>,
    metadata: EventMetadata,
) -> Vec<Result<Option<DocumentState>, DocumentsError>> {
    let work = work
        .into_iter()
        .map(|(id, commands, span)| (aggregate::stream_id(tenant, id), commands, span))
        .collect();
    executor(store)
        .execute_each(tenant, work, metadata)
        .await
        .into_iter()
        .map(|result| {
            result
                .map(|(_, document)| document.into_state())
                .map_err(from_execute)
        })
        .collect()
}

/// What intake decided about a document.
#[derive(Debug)]
pub struct Intake {
    /// The id (from the idempotency claim).
    pub document_id: Uuid,
    /// Where it goes.
    pub routing: Routing,
    /// The document.
    pub document: CanonicalDocument,
    /// Blocking issues.
    pub errors: Vec<Issue>,
    /// Warnings.
    pub warnings: Vec<Issue>,
}

/// A document intake stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stored {
    /// When the store recorded its events.
    pub recorded_at: DateTime<Utc>,
    /// Its stream version afterwards.
    pub version: u64,
    /// Its status afterwards (`queued`, or `validation_failed`).
    pub status: DocumentStatus,
}

/// Stores a received document (`validated` or `validation_failed`) and queues a valid one for its
/// channel, in one append that reads nothing first. `Ok(None)`: a document with this id exists already (an idempotent retry found it).
pub async fn receive(
    store: &SharedStore,
    tenant: TenantId,
    intake: Intake,
    metadata: EventMetadata,
    at: DateTime<Utc>,
) -> Result<Option<Stored>, DocumentsError> {
    let valid = intake.errors.is_empty();
    let document_id = intake.document_id;
    let mut commands = vec![DocumentCommand::Receive {
        document_id,
        routing: intake.routing,
        document: Box::new(intake.document),
        errors: intake.errors,
        warnings: intake.warnings,
        at,
    }];
    if valid {
        commands.push(DocumentCommand::Queue { at });
    }
    // One append: received, validated (or validation_failed) and queued commit together.
    let received = executor(store)
        .execute_new(
            tenant,
            &aggregate::stream_id(tenant, document_id),
            commands,
            metadata,
        )
        .await
        .map(|committed| Stored {
            recorded_at: committed.recorded_at.unwrap_or(at),
            version: committed.stream_version,
            status: if valid {
                DocumentStatus::Queued
            } else {
                DocumentStatus::ValidationFailed
            },
        })
        .map_err(from_execute);
    match received {
        Ok(stored) => Ok(Some(stored)),
        Err(DocumentsError::Refused(DocumentError::AlreadyExists) | DocumentsError::Conflict) => Ok(None),
        Err(e) => Err(e),
    }
}

/// Makes the next attempt of a document in `retrying` immediate (`DocumentRetryRequested`: a
/// resend job that asks SIFEN for the CDC first). Any other status is refused by the aggregate.
pub async fn retry_now(
    store: &SharedStore,
    clock: &dyn Clock,
    tenant: TenantId,
    document_id: Uuid,
    metadata: EventMetadata,
) -> Result<(), DocumentsError> {
    let at = clock.now();
    command(
        store,
        tenant,
        document_id,
        DocumentCommand::RetryNow { at },
        metadata,
    )
    .await
}

/// What a cancellation or inutilización came to within the wait of [`void`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum VoidOutcome {
    /// The document is `cancelled` (or `invalidated`): at once for a local cancellation or an
    /// autoimpresor void, after SIFEN's approval of the event otherwise.
    Done,
    /// Requested; SIFEN has not answered within the wait. The job keeps trying; asking again
    /// waits for the same request.
    Pending,
    /// SIFEN refused the event; the document's status did not change.
    Refused {
        /// SIFEN's code (`dCodRes`).
        code: String,
        /// SIFEN's message (`dMsgRes`).
        message: String,
    },
}

/// A cancellation or inutilización asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VoidRequest {
    /// The document.
    pub document_id: Uuid,
    /// Cancellation or inutilización.
    pub kind: FiscalEventKind,
    /// Why (SIFEN's `mOtEve`: 5 to 500 characters once trimmed, checked by the aggregate).
    pub reason: String,
}

/// Records a cancellation or inutilización request, then waits up to `wait` for its outcome,
/// reading the document's own stream (not a projection, which may lag). The aggregate refuses
/// what cannot be voided ([`DocumentsError::Refused`]: its status, the cancellation window, another
/// SIFEN event pending, a reason outside 5 to 500 characters).
pub async fn void(
    store: &SharedStore,
    clock: &dyn Clock,
    tenant: TenantId,
    request: VoidRequest,
    metadata: EventMetadata,
    wait: std::time::Duration,
) -> Result<VoidOutcome, DocumentsError> {
    let VoidRequest {
        document_id,
        kind,
        reason,
    } = request;
    let at = clock.now();
    let (request, done) = match kind {
        FiscalEventKind::Cancellation => (DocumentCommand::Cancel { reason, at }, DocumentStatus::Cancelled),
        FiscalEventKind::Inutilization => (
            DocumentCommand::Inutilize { reason, at },
            DocumentStatus::Invalidated,
        ),
    };
    command(store, tenant, document_id, request, metadata).await?;
    let deadline = std::time::Instant::now() + wait;
    let mut pause = std::time::Duration::from_millis(25);
    loop {
        let Some(document) = state_of(store, tenant, document_id).await? else {
            return Err(DocumentsError::NotFound);
        };
        if document.status == done {
            return Ok(VoidOutcome::Done);
        }
        if document.pending.is_none() {
            // Answered, and not as asked: SIFEN's refusal.
            let (code, message) = document
                .last_refusal
                .filter(|r| r.kind == kind)
                .map(|r| (r.code, r.message))
                .unwrap_or_default();
            return Ok(VoidOutcome::Refused { code, message });
        }
        if std::time::Instant::now() >= deadline {
            return Ok(VoidOutcome::Pending);
        }
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(std::time::Duration::from_millis(250));
    }
}

/// A document's state, read from its stream (through the aggregate cache).
pub async fn state_of(
    store: &SharedStore,
    tenant: TenantId,
    document_id: Uuid,
) -> Result<Option<DocumentState>, StoreError> {
    let loaded = crate::aggregate::AggregateStore::<Document>::new(store.clone(), tenant)
        .load(&aggregate::stream_id(tenant, document_id))
        .await?;
    Ok(loaded.aggregate().state().cloned())
}

/// SIFEN's last word on a document: its answer, or why the last attempt got none.
#[derive(Debug, Clone)]
pub struct LastWord {
    /// SIFEN's code (`0260`, `0160`, …); `None` when the last attempt got no answer.
    pub code: Option<String>,
    /// SIFEN's message, or what went wrong reaching it.
    pub message: String,
    /// `dProtAut`, when approved.
    pub protocol: Option<String>,
    /// What the code (or the failure) means in plain words, and what to do.
    pub explained: Option<kuatia_domain::sifen::codes::Explanation>,
}

/// SIFEN's last word on a document, from its own stream; `None` before any attempt.
pub async fn last_word(
    store: &SharedStore,
    tenant: TenantId,
    document_id: Uuid,
) -> Result<Option<LastWord>, StoreError> {
    Ok(state_of(store, tenant, document_id)
        .await?
        .as_ref()
        .and_then(last_word_of))
}

/// SIFEN's last word on a document in this state; `None` before any attempt.
pub fn last_word_of(document: &DocumentState) -> Option<LastWord> {
    let (code, message, protocol) = match (&document.answer, &document.last_failure) {
        (Some(answer), _) => (
            Some(answer.code.clone()),
            answer.message.clone(),
            answer.protocol.clone(),
        ),
        (None, Some(failure)) => {
            // "SIFEN 0161: …" when SIFEN answered with an operational code.
            let code = failure
                .strip_prefix("SIFEN ")
                .and_then(|rest| rest.get(..4))
                .filter(|c| c.bytes().all(|b| b.is_ascii_digit()))
                .map(str::to_owned);
            (code, failure.clone(), None)
        }
        (None, None) => return None,
    };
    let explained = match code.as_deref() {
        Some(code) => kuatia_domain::sifen::codes::explain(code),
        // SIFEN was not reached, or its answer did not come.
        None => kuatia_domain::sifen::codes::explain_failure(&message),
    };
    Some(LastWord {
        code,
        message,
        protocol,
        explained,
    })
}

/// A delivery the issuer made by hand, as the console or an ERP records it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HandDeliveryRequest {
    /// The document.
    pub document_id: Uuid,
    /// For whom (the customer, or the issuer's own copy).
    pub target: DeliveryTarget,
    /// How.
    pub channel: HandChannel,
    /// To whom, as the issuer writes it (at most 200 characters).
    pub recipient: Option<String>,
    /// A note (at most 500 characters).
    pub note: Option<String>,
    /// The mail server's answer, when the service emailed the document itself
    /// ([`crate::process::delivery::Deliveries::email_by_hand`]); never from a caller's body.
    pub sent: Option<String>,
}

/// Records a delivery made by hand (`DeliveredByHand`, on the document's timeline with its
/// actor): the deliveries of its target waiting for the issuer's hand are `sent` from now on.
/// The aggregate refuses a document that is not `accepted` ([`DocumentsError::Refused`] with
/// `InvalidTransition`) and a recipient or note over its limit (`TooLong`). Returns what was
/// recorded.
pub async fn deliver_by_hand(
    store: &SharedStore,
    clock: &dyn Clock,
    tenant: TenantId,
    request: HandDeliveryRequest,
    metadata: EventMetadata,
) -> Result<HandDelivery, DocumentsError> {
    let at = clock.now();
    let HandDeliveryRequest {
        document_id,
        target,
        channel,
        recipient,
        note,
        sent,
    } = request;
    let command = DocumentCommand::DeliverByHand {
        target,
        channel,
        recipient,
        note,
        sent,
        at,
    };
    self::command(store, tenant, document_id, command, metadata).await?;
    let document = state_of(store, tenant, document_id)
        .await?
        .ok_or(DocumentsError::NotFound)?;
    document
        .hand_deliveries
        .into_iter()
        .rev()
        .find(|d| d.at == at && d.target == target && d.channel == channel)
        .ok_or(DocumentsError::Conflict)
}

/// A public link made: its record, and the token of its URL (shown once; only its SHA-256 is
/// kept).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewPublicLink {
    /// The link.
    pub link: PublicLink,
    /// The token (`/p/{token}`), 43 base62 characters (about 256 bits).
    pub token: String,
}

/// Makes a long-lived, unguessable link to an accepted document's printable (its KuDE, or its
/// autoimpresor PDF) for its customer, valid for `lifetime` (`PublicLinkCreated` on its
/// timeline). A document in any other status is refused (`InvalidTransition`).
pub async fn create_public_link(
    store: &SharedStore,
    clock: &dyn Clock,
    tenant: TenantId,
    document_id: Uuid,
    lifetime: chrono::Duration,
    metadata: EventMetadata,
) -> Result<NewPublicLink, DocumentsError> {
    let at = clock.now();
    let token = crate::access::random_base62(43);
    let link_id = Uuid::now_v7();
    let command = DocumentCommand::CreatePublicLink {
        link_id,
        token_sha256: crate::access::sha256_hex(&token),
        expires_at: at + lifetime,
        at,
    };
    self::command(store, tenant, document_id, command, metadata).await?;
    let link = public_links(store, tenant, document_id)
        .await?
        .into_iter()
        .find(|l| l.link_id == link_id)
        .ok_or(DocumentsError::Conflict)?;
    Ok(NewPublicLink { link, token })
}

/// Revokes a public link: it stops working at once (`PublicLinkRevoked`; revoking it again is
/// nothing new). An unknown link is `NoSuchLink`.
pub async fn revoke_public_link(
    store: &SharedStore,
    clock: &dyn Clock,
    tenant: TenantId,
    document_id: Uuid,
    link_id: Uuid,
    metadata: EventMetadata,
) -> Result<(), DocumentsError> {
    let at = clock.now();
    let command = DocumentCommand::RevokePublicLink { link_id, at };
    self::command(store, tenant, document_id, command, metadata).await
}

/// A document's public links, in the order made (revoked and expired ones too).
pub async fn public_links(
    store: &SharedStore,
    tenant: TenantId,
    document_id: Uuid,
) -> Result<Vec<PublicLink>, StoreError> {
    Ok(state_of(store, tenant, document_id)
        .await?
        .map(|d| d.public_links)
        .unwrap_or_default())
}
