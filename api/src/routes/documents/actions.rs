//! What can be asked of a stored document: an immediate retry, a cancellation, an inutilización.
//! Each calls its use case in `kuatia_application::documents` and maps the outcome to HTTP.

use super::*;
use kuatia_application::documents::{HandDeliveryRequest, VoidOutcome, VoidRequest};
use kuatia_application::process::delivery::EmailByHandError;
use kuatia_domain::document::aggregate::{DeliveryTarget, DocumentError, FiscalEventKind, HandChannel};

/// Needed by `POST /v1/documents/{id}/retry`.
pub const RETRY_DOCUMENT: Permission = Permission::IssueDocuments;

/// Makes the next attempt of a document in `retrying` immediate: 202 with its
/// status; 409 in any other status.
#[utoipa::path(
    post,
    path = "/v1/documents/{id}/retry",
    tag = "documents",
    security(("api_key" = []), ("session" = [])),
    params(("id" = Uuid, Path, description = "The document"), ("X-Tenant-Id" = Uuid, Header, description = "The caller's tenant")),
    responses(
        (status = 202, description = "A resend job is queued (the CDC is queried first)", body = DocumentView),
        (status = 403, description = "Role not allowed", body = ErrorBody),
        (status = 404, description = "No such document", body = ErrorBody),
        (status = 409, description = "The document is not in `retrying`", body = ErrorBody)
    )
)]
pub async fn retry_document(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<Uuid>,
) -> Result<Response, ApiError> {
    caller.require(RETRY_DOCUMENT)?;
    let row = visible(&state, &caller, id).await?;
    let clock = state.intake.clock.as_ref();
    match documents::retry_now(&state.store, clock, caller.tenant, id, caller.metadata()).await {
        Ok(()) => {}
        Err(DocumentsError::Refused(_) | DocumentsError::Conflict) => {
            return Err(ApiError::new(
                ErrorCode::ConflictError,
                format!(
                    "only a document in `retrying` can be retried; this one is `{}`",
                    row.status
                ),
            ));
        }
        Err(DocumentsError::NotFound) => return Err(ApiError::not_found("no such document")),
        Err(DocumentsError::Store(e)) => return Err(e.into()),
    }
    let view = visible(&state, &caller, id).await?;
    Ok((StatusCode::ACCEPTED, axum::Json(DocumentView::from(view))).into_response())
}

/// Needed by `POST /v1/documents/{id}/cancel` and `/inutilize`.
pub const VOID_DOCUMENT: Permission = Permission::IssueDocuments;

/// How long `POST /cancel` and `/inutilize` wait for SIFEN's answer before answering 202.
const FISCAL_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

/// The fiscal reason body.
#[derive(Debug, Deserialize, ToSchema)]
pub struct FiscalReason {
    /// Why. SIFEN's `mOtEve` takes 5 to 500 characters once trimmed; a shorter or longer
    /// reason is refused with 400 `validation_error`.
    pub reason: String,
}

fn parse_reason(body: &[u8]) -> Result<String, ApiError> {
    let parsed: FiscalReason = serde_json::from_slice(body)
        .map_err(|e| ApiError::validation(format!("the body is `{{\"reason\": string}}`: {e}")))?;
    if parsed.reason.trim().is_empty() {
        return Err(ApiError::validation("`reason` must not be empty"));
    }
    Ok(parsed.reason)
}

/// Records a cancel or inutilize request and waits for its outcome (see [`cancel_document`]).
async fn void_document(
    state: &AppState,
    caller: &Caller,
    id: Uuid,
    body: &[u8],
    kind: FiscalEventKind,
) -> Result<Response, ApiError> {
    caller.require(VOID_DOCUMENT)?;
    let row = visible(state, caller, id).await?;
    let request = VoidRequest {
        document_id: id,
        kind,
        reason: parse_reason(body)?,
    };
    let verb = match kind {
        FiscalEventKind::Cancellation => "cancelled",
        FiscalEventKind::Inutilization => "inutilised",
    };
    let conflict = |message: String| ApiError::new(ErrorCode::ConflictError, message);
    let clock = state.intake.clock.as_ref();
    let outcome = documents::void(
        &state.store,
        clock,
        caller.tenant,
        request,
        caller.metadata(),
        FISCAL_WAIT,
    )
    .await;
    let status = match outcome {
        Ok(VoidOutcome::Done) => StatusCode::OK,
        Ok(VoidOutcome::Pending) => StatusCode::ACCEPTED,
        Ok(VoidOutcome::Refused { code, message }) => {
            return Err(conflict(format!("SIFEN refused the {kind}: {code} {message}"))
                .with_details(json!({"sifen_code": code, "sifen_message": message})));
        }
        Err(DocumentsError::Refused(DocumentError::ReasonLength { chars })) => {
            return Err(ApiError::validation(format!(
                "`reason` must have 5 to 500 characters once trimmed (SIFEN `mOtEve`); it has {chars}"
            ))
            .with_details(json!({"field": "reason"})));
        }
        Err(DocumentsError::Refused(DocumentError::CancellationWindowClosed { deadline })) => {
            return Err(conflict(format!(
                "the cancellation window closed at {deadline} (48 h for invoices and \
                 autofacturas, 168 h for other documents, from SIFEN's approval); SIFEN was not \
                 contacted"
            ))
            .with_details(json!({"deadline": deadline})));
        }
        Err(DocumentsError::Refused(DocumentError::FiscalEventPending(other))) => {
            return Err(conflict(format!(
                "a SIFEN {other} of this document is still waiting for its answer"
            )));
        }
        Err(DocumentsError::Refused(_)) => {
            return Err(conflict(format!(
                "a document in `{}` cannot be {verb}",
                row.status
            )));
        }
        Err(DocumentsError::Conflict) => {
            return Err(conflict(
                "the document changed meanwhile; read it and try again".into(),
            ));
        }
        Err(DocumentsError::NotFound) => return Err(ApiError::not_found("no such document")),
        Err(DocumentsError::Store(e)) => return Err(e.into()),
    };
    let view = visible(state, caller, id).await?;
    Ok((status, axum::Json(DocumentView::from(view))).into_response())
}

/// Cancels a document.
///
/// A document not yet submitted to SIFEN (`received` … `signing`, or an autoimpresor one in
/// `rendering`) is cancelled locally at once, with no fiscal effect. An `accepted` SIFEN document
/// is cancelled through SIFEN's cancelación event, inside the window (48 h for invoices and
/// autofacturas, 168 h for the rest, from SIFEN's approval), checked here first: outside it the
/// answer is 409 and SIFEN is not contacted.
///
/// The answer is synchronous within a bound: the request is recorded (the document's timeline
/// shows `DocumentCancellationRequested`), a job sends the event, and the call waits up to 10 s
/// for SIFEN's answer. **200** with the document in `cancelled`; **409** `conflict_error` when
/// SIFEN refused, with SIFEN's code and message in `details` (`sifen_code`, `sifen_message`; the
/// document stays `accepted`); **202** with the document still `accepted` when SIFEN has not
/// answered within the wait — the job keeps trying, and the document's status or timeline tells
/// the outcome (calling again is harmless: it waits for the same request). Cancelling a cancelled
/// document answers 200 again.
#[utoipa::path(
    post,
    path = "/v1/documents/{id}/cancel",
    tag = "documents",
    security(("api_key" = []), ("session" = [])),
    params(("id" = Uuid, Path, description = "The document"), ("X-Tenant-Id" = Uuid, Header, description = "The caller's tenant")),
    request_body = FiscalReason,
    responses(
        (status = 200, description = "Cancelled (status `cancelled`)", body = DocumentView),
        (status = 202, description = "Requested; SIFEN's answer is still pending after the wait", body = DocumentView),
        (status = 400, description = "No reason, or one outside 5 to 500 characters", body = ErrorBody),
        (status = 403, description = "Role not allowed", body = ErrorBody),
        (status = 404, description = "No such document", body = ErrorBody),
        (status = 409, description = "Not cancellable in its status, outside the window, another SIFEN event pending, or refused by SIFEN (`details.sifen_code`)", body = ErrorBody)
    )
)]
pub async fn cancel_document(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<Uuid>,
    JsonBytes(body): JsonBytes,
) -> Result<Response, ApiError> {
    void_document(&state, &caller, id, &body, FiscalEventKind::Cancellation).await
}

/// Inutilises a document's number.
///
/// Allowed for a SIFEN document in `accepted`, `rejected` or `failed_terminal` (a SIFEN number
/// that never became a valid document is what the inutilización event is for; SIFEN itself
/// refuses an approved number, 4065), and for an accepted autoimpresor document, whose printed
/// number is voided at once.
///
/// Synchronous within a bound, like `POST /cancel`: the request is recorded
/// (`DocumentInutilizationRequested`), a job sends SIFEN's inutilización for that one number
/// (timbrado, establishment, point, type), and the call waits up to 10 s. **200** with the
/// document in `invalidated`; **409** `conflict_error` when SIFEN refused, with `details`
/// `sifen_code` and `sifen_message` (the status does not change); **202** with the unchanged
/// document when SIFEN has not answered within the wait.
#[utoipa::path(
    post,
    path = "/v1/documents/{id}/inutilize",
    tag = "documents",
    security(("api_key" = []), ("session" = [])),
    params(("id" = Uuid, Path, description = "The document"), ("X-Tenant-Id" = Uuid, Header, description = "The caller's tenant")),
    request_body = FiscalReason,
    responses(
        (status = 200, description = "Inutilised (status `invalidated`)", body = DocumentView),
        (status = 202, description = "Requested; SIFEN's answer is still pending after the wait", body = DocumentView),
        (status = 400, description = "No reason, or one outside 5 to 500 characters", body = ErrorBody),
        (status = 403, description = "Role not allowed", body = ErrorBody),
        (status = 404, description = "No such document", body = ErrorBody),
        (status = 409, description = "Not in accepted, rejected or failed_terminal, another SIFEN event pending, or refused by SIFEN (`details.sifen_code`)", body = ErrorBody)
    )
)]
pub async fn inutilize_document(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<Uuid>,
    JsonBytes(body): JsonBytes,
) -> Result<Response, ApiError> {
    void_document(&state, &caller, id, &body, FiscalEventKind::Inutilization).await
}

/// Needed by `POST /v1/documents/{id}/deliveries`.
pub const DELIVER_BY_HAND: Permission = Permission::IssueDocuments;

/// A delivery made by hand.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct HandDeliveryBody {
    /// For whom: `customer` (the default) or `issuer` (the issuer's own copy).
    #[serde(default)]
    pub target: Option<DeliveryTarget>,
    /// How: `printed`, `email`, `whatsapp`, `in_person` or `other`.
    pub channel: HandChannel,
    /// To whom, as the issuer writes it: a name, an address, a phone (at most 200 characters).
    #[serde(default)]
    pub recipient: Option<String>,
    /// A note (at most 500 characters).
    #[serde(default)]
    pub note: Option<String>,
    /// `true` with channel `email`: the service emails the document (its KuDE or printable PDF
    /// and its signed XML) to `recipient`, one address, through the configured mail server now,
    /// and records the delivery only once the server took it (`sent` holds its answer). Default
    /// `false`: only record a delivery the issuer made elsewhere.
    #[serde(default)]
    pub send: bool,
}

/// A delivery made by hand, as recorded.
#[derive(Debug, Serialize, ToSchema)]
pub struct HandDeliveryView {
    /// The document.
    pub document_id: Uuid,
    /// For whom.
    pub target: DeliveryTarget,
    /// How.
    pub channel: HandChannel,
    /// To whom (trimmed; null when not given).
    pub recipient: Option<String>,
    /// The note (trimmed; null when not given).
    pub note: Option<String>,
    /// The mail server's answer when the service emailed the document (`send`); null otherwise.
    pub sent: Option<String>,
    /// The deliveries it settled: those of `target` that waited for the issuer's hand (`manual`
    /// mode), now `sent`. Empty when none waited.
    pub settled: Vec<Uuid>,
    /// When it was recorded.
    pub recorded_at: chrono::DateTime<Utc>,
}

/// Records a delivery the issuer made by hand.
///
/// A document whose `delivery` asks for `manual` mode waits for the issuer: the console (or an
/// ERP) records here how it was delivered. The record is a `DeliveredByHand` event on the
/// document's timeline (with the caller as its actor); the deliveries of `target` that waited are
/// `sent` from now on, and the document leaves `GET /v1/documents?delivery=pending_manual`. Any
/// accepted document can record one (a copy handed over again is recorded again); a document in
/// any other status is 409.
///
/// With `"send": true` (channel `email`) the service itself emails the document to `recipient`
/// through its mail server, the same message as an automatic delivery, and records the delivery
/// (with the server's answer in `sent`) only once the server took it.
#[utoipa::path(
    post,
    path = "/v1/documents/{id}/deliveries",
    tag = "documents",
    security(("api_key" = []), ("session" = [])),
    params(("id" = Uuid, Path, description = "The document"), ("X-Tenant-Id" = Uuid, Header, description = "The caller's tenant")),
    request_body = HandDeliveryBody,
    responses(
        (status = 201, description = "Recorded", body = HandDeliveryView),
        (status = 400, description = "A malformed body, an unknown channel, a recipient or note over its limit; with `send`, a channel other than `email`, a recipient that is not one address, or one the mail server refused for good", body = ErrorBody),
        (status = 403, description = "Role not allowed", body = ErrorBody),
        (status = 404, description = "No such document", body = ErrorBody),
        (status = 409, description = "The document is not `accepted`; with `send`, no mail server is configured or the printable is not rendered yet", body = ErrorBody),
        (status = 500, description = "With `send`, the document's files could not be read", body = ErrorBody),
        (status = 502, description = "With `send`, the mail server did not take the message (nothing recorded; try again)", body = ErrorBody)
    )
)]
pub async fn deliver_by_hand(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<Uuid>,
    JsonBytes(body): JsonBytes,
) -> Result<Response, ApiError> {
    caller.require(DELIVER_BY_HAND)?;
    let row = visible(&state, &caller, id).await?;
    let body: HandDeliveryBody = serde_json::from_slice(&body).map_err(|e| {
        ApiError::validation(format!(
            "the body is {{\"channel\": printed|email|whatsapp|in_person|other, \"target\"?: \
             customer|issuer, \"recipient\"?: string, \"note\"?: string, \"send\"?: bool}}: {e}"
        ))
    })?;
    if body.send && body.channel != HandChannel::Email {
        return Err(ApiError::invalid_field(
            "send",
            "invalid",
            "only a delivery by `email` is sent by the service",
        ));
    }
    let request = HandDeliveryRequest {
        document_id: id,
        target: body.target.unwrap_or(DeliveryTarget::Customer),
        channel: body.channel,
        recipient: body.recipient,
        note: body.note,
        sent: None,
    };
    let recorded = if body.send {
        state
            .deliveries
            .email_by_hand(caller.tenant, request, caller.metadata())
            .await
            .map_err(|e| emailing_refused(e, &row.status))?
    } else {
        let clock = state.intake.clock.as_ref();
        documents::deliver_by_hand(&state.store, clock, caller.tenant, request, caller.metadata())
            .await
            .map_err(|e| hand_delivery_refused(e, &row.status))?
    };
    let view = HandDeliveryView {
        document_id: id,
        target: recorded.target,
        channel: recorded.channel,
        recipient: recorded.recipient,
        note: recorded.note,
        sent: recorded.sent,
        settled: recorded.settled,
        recorded_at: recorded.at,
    };
    Ok((StatusCode::CREATED, axum::Json(view)).into_response())
}

/// What refusing to record a delivery by hand answers.
fn hand_delivery_refused(e: DocumentsError, status: &str) -> ApiError {
    match e {
        DocumentsError::Refused(DocumentError::TooLong { field, max, chars }) => ApiError::invalid_field(
            field,
            "too_long",
            format!("at most {max} characters; this one has {chars}"),
        ),
        DocumentsError::Refused(_) => ApiError::new(
            ErrorCode::ConflictError,
            format!("only an accepted document is delivered; this one is `{status}`"),
        ),
        DocumentsError::Conflict => ApiError::new(
            ErrorCode::ConflictError,
            "the document changed meanwhile; read it and try again",
        ),
        DocumentsError::NotFound => ApiError::not_found("no such document"),
        DocumentsError::Store(e) => e.into(),
    }
}

/// What refusing to email a document for the issuer answers (nothing was sent or recorded).
fn emailing_refused(e: EmailByHandError, status: &str) -> ApiError {
    match e {
        EmailByHandError::NotConfigured(why) => ApiError::new(
            ErrorCode::ConflictError,
            format!("the service cannot send email: {why}; record a delivery made elsewhere without `send`"),
        ),
        EmailByHandError::NotAnAddress => ApiError::invalid_field(
            "recipient",
            "invalid",
            "one email address, such as cliente@example.com.py",
        ),
        EmailByHandError::NotRendered(kind) => ApiError::new(
            ErrorCode::ConflictError,
            format!("the document's {kind} is not rendered yet; try again in a moment"),
        ),
        EmailByHandError::NotSent(not_sent) if not_sent.permanent => ApiError::invalid_field(
            "recipient",
            "refused",
            format!("the mail server refused the message: {}", not_sent.reason),
        ),
        EmailByHandError::NotSent(not_sent) => ApiError::new(
            ErrorCode::UpstreamError,
            format!("the mail server did not take the message: {}", not_sent.reason),
        ),
        EmailByHandError::Files(why) => {
            tracing::error!(error = %why, "reading a document's files to email them");
            ApiError::new(ErrorCode::InternalError, "the document's files could not be read")
        }
        EmailByHandError::Document(e) => hand_delivery_refused(e, status),
    }
}
