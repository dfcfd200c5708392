//! The Document aggregate: the life of a sales document (DECISIONS §5), from its receipt to its
//! acceptance, rejection, cancellation or inutilización, as events on one stream per document,
//! `document:<tenant>:<document id>` ([`stream_id`]).
//!
//! The aggregate decides; it does no work. Transforming, signing and submitting to SIFEN,
//! rendering an autoimpresor printable, storing artifacts and delivering are done by process
//! managers (application layer) that react to these events through jobs and report back with the
//! `Record*` commands. Like the rest of the domain it has no clock: every command carries `at`,
//! the moment the fact is recorded; facts of a channel (`signed_at`, `approved_at`) come apart.
//!
//! Start reading at [`DocumentCommand`]; [`Document::decide`] holds every rule and
//! [`DocumentState`] is what later readers get.
//!
//! # State machine
//!
//! | from | command | to | event(s) |
//! |---|---|---|---|
//! | (no stream) | `Receive` without errors | validated | `DocumentReceived`, `DocumentValidated` |
//! | (no stream) | `Receive` with errors | validation_failed | `DocumentReceived`, `DocumentValidationFailed` |
//! | validated | `Queue` | queued | `DocumentQueued` |
//! | queued (sifen) | `StartTransform` | transforming | `DocumentTransformStarted` |
//! | transforming | `RecordTransformed` | signing | `DocumentTransformed` |
//! | signing | `RecordSigned` | submitting | `DocumentSigned` |
//! | submitting | `RecordSubmitted` | submitting | `DocumentSubmitted` |
//! | submitting | `RecordAccepted` | accepted | `DocumentAccepted` |
//! | submitting | `RecordRejected` | rejected | `DocumentRejected` |
//! | submitting | `RecordOperationalFailure` | retrying | `DocumentRetryScheduled` |
//! | retrying | `RetryNow` | retrying | `DocumentRetryRequested` |
//! | retrying | `ResumeSubmission` | submitting | `DocumentSubmissionResumed` |
//! | retrying, 60 h after signing | `GiveUp` | failed_terminal | `DocumentFailedTerminally` |
//! | queued (autoimpresor) | `StartRendering` | rendering | `DocumentRenderingStarted` |
//! | rendering | `RecordRendered` | accepted | `DocumentRendered` |
//! | queued, transforming | `RefuseIssuance` | failed_terminal | `DocumentIssuanceRefused` |
//! | numbered (autoimpresor) | `WarnNumberingRange` | unchanged | `NumberingRangeNearlyExhausted` |
//! | accepted or invalidated (autoimpresor) | `RecordNumberReported` | unchanged | `NumberReported` |
//! | received, validated, queued, transforming, signing, rendering | `Cancel` | cancelled | `DocumentCancelled` (`fiscal: false`) |
//! | accepted (sifen), inside the window | `Cancel` | accepted, cancellation pending | `DocumentCancellationRequested` |
//! | accepted, cancellation pending | `RecordCancelled` | cancelled | `DocumentCancelled` (`fiscal: true`) |
//! | accepted, cancellation pending | `RecordCancellationRefused` | accepted | `DocumentCancellationRefused` |
//! | accepted, rejected, failed_terminal (sifen) | `Inutilize` | unchanged, inutilización pending | `DocumentInutilizationRequested` |
//! | inutilización pending | `RecordInutilized` | invalidated | `DocumentInvalidated` (`fiscal: true`) |
//! | inutilización pending | `RecordInutilizationRefused` | unchanged | `DocumentInutilizationRefused` |
//! | accepted (autoimpresor) | `Inutilize` | invalidated | `DocumentInvalidated` (`fiscal: false`) |
//! | any | `RecordArtifact` | unchanged | `ArtifactRecorded` |
//! | any | `RecordDelivery` | unchanged | `DeliveryRecorded` |
//! | any, with a printable | `RequestPdfRegeneration` | unchanged | `PdfRegenerationRequested` |
//!
//! Anything else is refused with [`DocumentError::InvalidTransition`], which the API answers with
//! 409 `conflict_error`. A command whose effect already holds (a job run twice, a second click on
//! cancel) is no event rather than an error (STYLE: repeating a command is harmless): `Queue` in
//! `queued`, `RecordTransformed` with the recorded CDC in `signing`, `Cancel` in `cancelled` or
//! with a cancellation pending, and so on; each `Record*` compares what it carries with what was
//! recorded, and something different is refused.
//!
//! # Decisions where the contract leaves room
//!
//! - SIFEN events (cancelación, inutilización) take two steps: `Cancel` / `Inutilize` records the
//!   request *before* the channel calls SIFEN, and `RecordCancelled` / `RecordInutilized` (or
//!   `Record…Refused`) records SIFEN's answer. A crash between the call and the record leaves the
//!   request pending in the state, where a reconciler (or the caller repeating the request, which
//!   is no new event) finds it and asks SIFEN again. Rejected: one command carrying SIFEN's
//!   outcome, which after such a crash would leave an accepted document with no trace that a
//!   fiscal event went out. The status stays the contract's (`accepted` with a pending request);
//!   the pending request is [`DocumentState::pending`].
//! - The cancellation window is measured from SIFEN's approval time (`approved_at` of
//!   `RecordAccepted`, SIFEN's processing time, not the time kuatia recorded it) and is inclusive
//!   (SIFEN: "≤ 48 h"): a request at exactly 48 h is sent, one second later is refused. It is
//!   checked when the request is made; SIFEN's own verdict comes back as a refusal.
//! - Windows follow DECISIONS §5: 48 h for invoices *and autofacturas*, 168 h for the rest. BRIEF
//!   §7 (the manual) gives autofacturas 168 h; DECISIONS is binding and the stricter reading never
//!   sends a request SIFEN would refuse for lateness. One function, [`cancellation_window`].
//! - Local cancellation ("not yet submitted") is allowed in received, validated, queued,
//!   transforming, signing and rendering; not in submitting or retrying (SIFEN may hold the
//!   document), not in validation_failed (terminal). A number already drawn (signing, rendering)
//!   stays in the state, unused, so numbering can account for the gap.
//! - An accepted autoimpresor document is not cancelled: it is voided by `Inutilize` (DECISIONS:
//!   "the printed number is voided and reported"), in one step since no authority answers.
//! - `Inutilize` of an accepted SIFEN document is allowed, as the contract says; SIFEN refuses to
//!   inutilize an approved number (4065), which comes back as `DocumentInutilizationRefused`.
//! - `GiveUp` is refused before 60 h after signing ([`SUBMISSION_HORIZON`]): the deadline is a
//!   domain rule, so it lives here; the retry schedule itself is the process manager's. Retries
//!   (automatic or `RetryNow`) are not limited by the aggregate.
//! - A reason (cancel, inutilize) is trimmed and must have 5 to 500 characters (SIFEN `mOtEve`),
//!   for local cancellations too: one rule, and the reason goes into the timeline.
//! - `RecordSigned` and `RecordRendered` refer to an artifact recorded before (`RecordArtifact`),
//!   so a document cannot reach `submitting` before its signed XML is stored (ARCHITECTURE: the
//!   signed XML is persisted before the first send).
//! - Artifact versions are per kind and consecutive from 1 (the next must be exactly one more).
//! - `RecordSubmitted` counts attempts: the next attempt is `attempts + 1`; the same attempt may
//!   be recorded again to add the lot id SIFEN gave it (record before sending, then with the lot).

use chrono::{DateTime, TimeDelta, Utc};
use cqrs_es::event_sink::EventSink;
use cqrs_es::{Aggregate, DomainEvent};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::ops::RangeInclusive;
use uuid::Uuid;

use super::canonical::{CanonicalDocument, DeliveryChannel, DocumentType};
use super::issues::Issue;
use super::routing::Routing;
use crate::channel::ChannelKind;
use crate::check_digit::modulo11;
use crate::tenancy::TenantId;

/// The stream id of a document.
pub fn stream_id(tenant: TenantId, id: Uuid) -> String {
    format!("document:{tenant}:{id}")
}

/// How long after signing a document may stay unanswered before it is given up (DECISIONS §5:
/// automatic attempts "until 60 h after signing; then `failed_terminal`").
pub const SUBMISSION_HORIZON: TimeDelta = TimeDelta::hours(60);

/// Characters a cancellation or inutilización reason may have, once trimmed (SIFEN `mOtEve`).
pub const REASON_CHARS: RangeInclusive<usize> = 5..=500;

/// How long after SIFEN's approval an accepted document may be cancelled (DECISIONS §5: 48 h for
/// invoices and autofacturas, 168 h for the rest).
pub fn cancellation_window(doc_type: DocumentType) -> TimeDelta {
    match doc_type {
        DocumentType::Invoice | DocumentType::Autofactura => TimeDelta::hours(48),
        DocumentType::CreditNote
        | DocumentType::DebitNote
        | DocumentType::Remision
        | DocumentType::Receipt => TimeDelta::hours(168),
    }
}

// ---------------------------------------------------------------------------------------------
// Values
// ---------------------------------------------------------------------------------------------

/// The contract's document statuses (§2.7), exactly.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DocumentStatus {
    /// Stored; validation follows in the same command.
    Received,
    /// Local validation found errors (terminal).
    ValidationFailed,
    /// Passed local validation.
    Validated,
    /// Waiting for its channel.
    Queued,
    /// SIFEN: being numbered and turned into XML.
    Transforming,
    /// SIFEN: numbered, being signed.
    Signing,
    /// SIFEN: signed, being sent or waiting for SIFEN's answer.
    Submitting,
    /// Approved by SIFEN, or printed (autoimpresor).
    Accepted,
    /// Rejected by SIFEN.
    Rejected,
    /// SIFEN could not be reached or answered with an operational failure; a retry is scheduled.
    Retrying,
    /// Autoimpresor: numbered, the printable is being rendered.
    Rendering,
    /// Cancelled: through SIFEN's cancelación, or locally before submission.
    Cancelled,
    /// Inutilised: through SIFEN's inutilización, or an autoimpresor number voided.
    Invalidated,
    /// No answer from SIFEN within 60 h of signing.
    FailedTerminal,
}

impl DocumentStatus {
    /// Every status, in the contract's order.
    pub const ALL: [Self; 14] = [
        Self::Received,
        Self::ValidationFailed,
        Self::Validated,
        Self::Queued,
        Self::Transforming,
        Self::Signing,
        Self::Submitting,
        Self::Accepted,
        Self::Rejected,
        Self::Retrying,
        Self::Rendering,
        Self::Cancelled,
        Self::Invalidated,
        Self::FailedTerminal,
    ];

    /// The contract's name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Received => "received",
            Self::ValidationFailed => "validation_failed",
            Self::Validated => "validated",
            Self::Queued => "queued",
            Self::Transforming => "transforming",
            Self::Signing => "signing",
            Self::Submitting => "submitting",
            Self::Accepted => "accepted",
            Self::Rejected => "rejected",
            Self::Retrying => "retrying",
            Self::Rendering => "rendering",
            Self::Cancelled => "cancelled",
            Self::Invalidated => "invalidated",
            Self::FailedTerminal => "failed_terminal",
        }
    }

    /// Whether processing is over: the pipeline has nothing left to do, and only a person's
    /// cancel or inutilize can still change the status (accepted, rejected, failed_terminal), or
    /// nothing can ([`Self::is_terminal`]). Clients stop polling here.
    pub fn is_final(self) -> bool {
        matches!(
            self,
            Self::ValidationFailed
                | Self::Accepted
                | Self::Rejected
                | Self::FailedTerminal
                | Self::Cancelled
                | Self::Invalidated
        )
    }

    /// Whether no command can change the status any more.
    pub fn is_terminal(self) -> bool {
        matches!(self, Self::ValidationFailed | Self::Cancelled | Self::Invalidated)
    }
}

impl std::fmt::Display for DocumentStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A document's number: timbrado, establishment, point and the seven-digit number (SIFEN
/// `dNumTim`, `dEst`, `dPunExp`, `dNumDoc`; the same shape on autoimpresor printables).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DocumentNumber {
    /// Timbrado, 8 digits.
    pub timbrado: String,
    /// Establishment (branch code), `001`–`999`.
    pub establishment: String,
    /// Issuance point code, `001`–`999`.
    pub point: String,
    /// The number, 7 digits, `0000001`–`9999999`.
    pub number: String,
}

fn digits(text: &str, len: usize) -> bool {
    text.len() == len && text.bytes().all(|b| b.is_ascii_digit())
}

fn not_all_zero(text: &str) -> bool {
    text.bytes().any(|b| b != b'0')
}

fn malformed(field: &'static str, expected: &'static str) -> DocumentError {
    DocumentError::Malformed { field, expected }
}

impl DocumentNumber {
    /// Refuses a number that does not have SIFEN's shape.
    pub fn check(&self) -> Result<(), DocumentError> {
        if !digits(&self.timbrado, 8) {
            return Err(malformed("timbrado", "8 digits"));
        }
        if !digits(&self.establishment, 3) || !not_all_zero(&self.establishment) {
            return Err(malformed("establishment", "3 digits, 001 to 999"));
        }
        if !digits(&self.point, 3) || !not_all_zero(&self.point) {
            return Err(malformed("point", "3 digits, 001 to 999"));
        }
        if !digits(&self.number, 7) || !not_all_zero(&self.number) {
            return Err(malformed("number", "7 digits, 0000001 to 9999999"));
        }
        Ok(())
    }
}

impl std::fmt::Display for DocumentNumber {
    /// As printed: `001-001-0000001`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}-{}-{}", self.establishment, self.point, self.number)
    }
}

/// Refuses a CDC that is not the one of this document: SIFEN's shape (BRIEF §1.1), the type, the
/// establishment, point, number and security code in their places, and the check digit.
fn check_cdc(
    cdc: &str,
    doc_type: DocumentType,
    number: &DocumentNumber,
    security_code: &str,
) -> Result<(), DocumentError> {
    if !digits(security_code, 9) || !not_all_zero(security_code) {
        return Err(malformed("security_code", "9 digits, not all zero"));
    }
    let bytes = cdc.as_bytes();
    let shape = bytes.len() == 44
        && bytes
            .iter()
            .enumerate()
            .all(|(i, b)| b.is_ascii_digit() || (i == 9 && (b'A'..=b'D').contains(b)));
    if !shape {
        return Err(malformed("cdc", "44 characters of the pattern of SIFEN's tCDC"));
    }
    let Some(code) = doc_type.sifen_code() else {
        return Err(malformed("cdc", "a document type that SIFEN issues"));
    };
    if cdc[0..2] != format!("{code:02}") {
        return Err(malformed("cdc", "the document type (iTiDE) in positions 1-2"));
    }
    if cdc[11..14] != number.establishment || cdc[14..17] != number.point || cdc[17..24] != number.number {
        return Err(malformed(
            "cdc",
            "the establishment, point and number in positions 12-24",
        ));
    }
    if cdc[34..43] != *security_code {
        return Err(malformed("cdc", "the security code in positions 35-43"));
    }
    if bytes[43] - b'0' != modulo11(&cdc[..43]) {
        return Err(malformed("cdc", "its modulo-11 check digit last"));
    }
    Ok(())
}

fn check_sha256(field: &'static str, text: &str) -> Result<(), DocumentError> {
    if text.len() == 64
        && text
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    {
        Ok(())
    } else {
        Err(malformed(field, "64 lower-case hex digits"))
    }
}

/// Trims a reason and checks its length.
fn check_reason(reason: &str) -> Result<String, DocumentError> {
    let reason = reason.trim();
    let chars = reason.chars().count();
    if REASON_CHARS.contains(&chars) {
        Ok(reason.to_owned())
    } else {
        Err(DocumentError::ReasonLength { chars })
    }
}

/// Kinds of artifact (DECISIONS §8).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ArtifactKind {
    /// The KuDE, SIFEN's printable (PDF).
    Kude,
    /// The signed XML sent to SIFEN, byte for byte.
    SignedXml,
    /// The autoimpresor printable (PDF).
    PrintablePdf,
    /// The canonical document as stored (JSON).
    NormalizedPayload,
    /// A SIFEN answer (XML).
    ChannelResponse,
}

impl ArtifactKind {
    /// The contract's name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Kude => "kude",
            Self::SignedXml => "signed_xml",
            Self::PrintablePdf => "printable_pdf",
            Self::NormalizedPayload => "normalized_payload",
            Self::ChannelResponse => "channel_response",
        }
    }

    /// Whether it is a printable PDF (what `regenerate-pdf` renders again).
    pub fn is_printable(self) -> bool {
        matches!(self, Self::Kude | Self::PrintablePdf)
    }
}

impl std::fmt::Display for ArtifactKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A stored artifact of the document (the bytes are in the object store, content-addressed).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Artifact {
    /// Id.
    pub artifact_id: Uuid,
    /// Kind.
    pub kind: ArtifactKind,
    /// MIME type.
    pub content_type: String,
    /// Lower-case hex SHA-256 of the bytes.
    pub sha256: String,
    /// Size in bytes.
    pub size: u64,
    /// 1, 2, … per kind; old versions stay listed.
    pub version: u32,
    /// When it was recorded.
    pub created_at: DateTime<Utc>,
}

/// Who a delivery is for (contract §2.6).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DeliveryTarget {
    /// The buyer.
    Customer,
    /// The issuer.
    Issuer,
}

/// Where a delivery stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DeliveryStatus {
    /// To be done (by the console in `manual` mode, or a job).
    Pending,
    /// Handed over to the email server or messaging API.
    Sent,
    /// An attempt failed (webhook `document.delivery_failed`).
    Failed,
}

/// The last recorded attempt of one delivery.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeliveryState {
    /// For whom.
    pub target: DeliveryTarget,
    /// Through what.
    pub channel: DeliveryChannel,
    /// Outcome.
    pub status: DeliveryStatus,
    /// Attempt number.
    pub attempt: u32,
    /// Error or provider id.
    pub detail: Option<String>,
    /// When.
    pub at: DateTime<Utc>,
}

/// The two SIFEN events of the issuer that end a document.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FiscalEventKind {
    /// Cancelación (`rGeVeCan`).
    Cancellation,
    /// Inutilización (`rGeVeInu`).
    Inutilization,
}

impl FiscalEventKind {
    /// The name used in messages.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Cancellation => "cancellation",
            Self::Inutilization => "inutilization",
        }
    }
}

impl std::fmt::Display for FiscalEventKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An answer of SIFEN.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SifenAnswer {
    /// Result code (`0260`, `1001`, `0600`, …).
    pub code: String,
    /// Its message.
    pub message: String,
    /// Authorisation protocol (`dProtAut`), when SIFEN gave one.
    pub protocol: Option<String>,
}

/// A SIFEN event requested and not yet answered (or whose answer was not yet recorded).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PendingFiscalEvent {
    /// Which event.
    pub kind: FiscalEventKind,
    /// The reason (`mOtEve`) to send.
    pub reason: String,
    /// When it was requested.
    pub requested_at: DateTime<Utc>,
}

/// SIFEN's refusal of a requested event.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FiscalRefusal {
    /// Which event.
    pub kind: FiscalEventKind,
    /// SIFEN's code (for the 409's `details`).
    pub code: String,
    /// SIFEN's message.
    pub message: String,
    /// When it was recorded.
    pub at: DateTime<Utc>,
}

/// How a document ended, when it was cancelled or inutilised.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Voiding {
    /// Cancellation or inutilización.
    pub kind: FiscalEventKind,
    /// The reason given.
    pub reason: String,
    /// Whether SIFEN registered an event (false: local cancellation, autoimpresor void).
    pub fiscal: bool,
    /// SIFEN's answer, when fiscal.
    pub answer: Option<SifenAnswer>,
    /// When.
    pub at: DateTime<Utc>,
}

/// What the autoimpresor channel reports about a printed number.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NumberReport {
    /// The number was printed (the document was accepted).
    Issued,
    /// The printed number was voided (the document was invalidated).
    Voided,
}

impl NumberReport {
    /// The name in reports and job keys.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Issued => "issued",
            Self::Voided => "voided",
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Commands
// ---------------------------------------------------------------------------------------------

/// Commands. `at` is when the fact is recorded (the caller's clock).
#[derive(Debug, Clone, PartialEq)]
pub enum DocumentCommand {
    /// Stores a document with the outcome of its validation (only on an empty stream).
    Receive {
        /// The document's id (UUIDv7).
        document_id: Uuid,
        /// Resolved channel, branch and point.
        routing: Routing,
        /// The document as received.
        document: Box<CanonicalDocument>,
        /// Blocking issues; any makes the document `validation_failed`.
        errors: Vec<Issue>,
        /// Non-blocking issues.
        warnings: Vec<Issue>,
        /// When.
        at: DateTime<Utc>,
    },
    /// Hands a validated document to its channel.
    Queue {
        /// When.
        at: DateTime<Utc>,
    },
    /// SIFEN: the transform job starts (number and CDC are drawn next).
    StartTransform {
        /// When.
        at: DateTime<Utc>,
    },
    /// SIFEN: the document has its number, CDC and XML.
    RecordTransformed {
        /// The number series it was drawn from (company, timbrado, establishment, point, type):
        /// the number series projection refuses a number that is not the series' next.
        series: String,
        /// The number drawn from the series.
        number: DocumentNumber,
        /// The CDC (44 characters).
        cdc: String,
        /// `dCodSeg`, 9 digits, inside the CDC.
        security_code: String,
        /// SHA-256 of the unsigned XML (it is rebuilt from the state; the hash proves it is the
        /// same).
        xml_sha256: String,
        /// When.
        at: DateTime<Utc>,
    },
    /// SIFEN: the XML is signed and stored (recorded before with `RecordArtifact`).
    RecordSigned {
        /// The `signed_xml` artifact.
        signed_xml_artifact_id: Uuid,
        /// `dFecFirma`: the 60 h horizon counts from here.
        signed_at: DateTime<Utc>,
        /// When.
        at: DateTime<Utc>,
    },
    /// SIFEN: an attempt to send (sync or in a lot).
    RecordSubmitted {
        /// 1 for the first attempt, then one more each time.
        attempt: u32,
        /// The lot number (`dProtConsLote`) when sent in a lot and known.
        lot_id: Option<String>,
        /// When.
        at: DateTime<Utc>,
    },
    /// SIFEN approved the document.
    RecordAccepted {
        /// Result code (`0260`, or `0422` from a query by CDC).
        code: String,
        /// Its message.
        message: String,
        /// `dProtAut`.
        protocol: Option<String>,
        /// SIFEN's processing time (`dFecProc`): the cancellation window counts from here.
        approved_at: DateTime<Utc>,
        /// When.
        at: DateTime<Utc>,
    },
    /// SIFEN rejected the document.
    RecordRejected {
        /// Rejection code.
        code: String,
        /// Its message.
        message: String,
        /// When.
        at: DateTime<Utc>,
    },
    /// The send failed without a verdict (timeout, 5xx, 0161/0162, connection refused).
    RecordOperationalFailure {
        /// What happened.
        reason: String,
        /// When the next automatic attempt is due.
        next_attempt_at: DateTime<Utc>,
        /// When.
        at: DateTime<Utc>,
    },
    /// `POST /retry`: the next attempt becomes immediate (only in `retrying`).
    RetryNow {
        /// When.
        at: DateTime<Utc>,
    },
    /// The retry job starts the next attempt.
    ResumeSubmission {
        /// When.
        at: DateTime<Utc>,
    },
    /// Stops retrying (not before 60 h after signing).
    GiveUp {
        /// Why.
        reason: String,
        /// When.
        at: DateTime<Utc>,
    },
    /// Autoimpresor: the document has its printed number; the printable is rendered next.
    StartRendering {
        /// The number series it was drawn from (the channel's authorised range): the number
        /// series projection refuses a number that is not the series' next.
        series: String,
        /// The number drawn from the authorised range.
        number: DocumentNumber,
        /// When.
        at: DateTime<Utc>,
    },
    /// The document cannot be issued, and ends `failed_terminal` without a number: on an
    /// autoimpresor channel, outside its authorization (validity dates, exhausted range); on
    /// SIFEN, its DE could not be built or signed, or its channel's setup is unusable (the
    /// preparation job failed for good: no document stays queued for ever).
    RefuseIssuance {
        /// The error code (`configuration_error`, `document_build_failed`).
        code: String,
        /// What is wrong, for the timeline and the detail.
        message: String,
        /// The field or block the refusal is about (`None`: the channel, `autoimpresor`).
        field: Option<String>,
        /// When.
        at: DateTime<Utc>,
    },
    /// Autoimpresor: the number just drawn used up 90 % of the authorised range (recorded once
    /// per range, by the document that crosses the mark).
    WarnNumberingRange {
        /// The number series.
        series: String,
        /// Numbers used, this one included.
        used: u64,
        /// Numbers in the range.
        size: u64,
        /// When.
        at: DateTime<Utc>,
    },
    /// Autoimpresor: the channel's reporting endpoint acknowledged the report of this number.
    RecordNumberReported {
        /// What was reported.
        report: NumberReport,
        /// The endpoint's HTTP status.
        http_status: u16,
        /// When.
        at: DateTime<Utc>,
    },
    /// Autoimpresor: the printable is stored (recorded before with `RecordArtifact`).
    RecordRendered {
        /// The `printable_pdf` artifact.
        artifact_id: Uuid,
        /// When.
        at: DateTime<Utc>,
    },
    /// `POST /cancel`: locally before submission, or the request for SIFEN's cancelación.
    Cancel {
        /// Why (5 to 500 characters).
        reason: String,
        /// When.
        at: DateTime<Utc>,
    },
    /// SIFEN registered the cancelación.
    RecordCancelled {
        /// Result code (`0600`).
        code: String,
        /// Its message.
        message: String,
        /// `dProtAut` of the event.
        protocol: Option<String>,
        /// When.
        at: DateTime<Utc>,
    },
    /// SIFEN refused the cancelación (the document stays accepted).
    RecordCancellationRefused {
        /// SIFEN's code (4009, 4004, …).
        code: String,
        /// Its message.
        message: String,
        /// When.
        at: DateTime<Utc>,
    },
    /// `POST /inutilize`: the request for SIFEN's inutilización, or an autoimpresor void.
    Inutilize {
        /// Why (5 to 500 characters).
        reason: String,
        /// When.
        at: DateTime<Utc>,
    },
    /// SIFEN registered the inutilización.
    RecordInutilized {
        /// Result code.
        code: String,
        /// Its message.
        message: String,
        /// `dProtAut` of the event.
        protocol: Option<String>,
        /// When.
        at: DateTime<Utc>,
    },
    /// SIFEN refused the inutilización (the status does not change).
    RecordInutilizationRefused {
        /// SIFEN's code (4065, 4066, …).
        code: String,
        /// Its message.
        message: String,
        /// When.
        at: DateTime<Utc>,
    },
    /// An artifact was stored (any status).
    RecordArtifact {
        /// Id.
        artifact_id: Uuid,
        /// Kind.
        kind: ArtifactKind,
        /// MIME type.
        content_type: String,
        /// Lower-case hex SHA-256.
        sha256: String,
        /// Bytes.
        size: u64,
        /// The next version of this kind (1 for the first).
        version: u32,
        /// When.
        at: DateTime<Utc>,
    },
    /// A delivery to the customer or the issuer changed (any status).
    RecordDelivery {
        /// The delivery's id (one per target and channel).
        delivery_id: Uuid,
        /// For whom.
        target: DeliveryTarget,
        /// Through what.
        channel: DeliveryChannel,
        /// Outcome.
        status: DeliveryStatus,
        /// Attempt number.
        attempt: u32,
        /// Error or provider id.
        detail: Option<String>,
        /// When.
        at: DateTime<Utc>,
    },
    /// `POST /regenerate-pdf`: a new version of the printable.
    RequestPdfRegeneration {
        /// When.
        at: DateTime<Utc>,
    },
}

impl DocumentCommand {
    /// The command's name in refusals (`InvalidTransition { command }`).
    pub fn name(&self) -> &'static str {
        match self {
            Self::Receive { .. } => "receive",
            Self::Queue { .. } => "queue",
            Self::StartTransform { .. } => "start_transform",
            Self::RecordTransformed { .. } => "record_transformed",
            Self::RecordSigned { .. } => "record_signed",
            Self::RecordSubmitted { .. } => "record_submitted",
            Self::RecordAccepted { .. } => "record_accepted",
            Self::RecordRejected { .. } => "record_rejected",
            Self::RecordOperationalFailure { .. } => "record_operational_failure",
            Self::RetryNow { .. } => "retry",
            Self::ResumeSubmission { .. } => "resume_submission",
            Self::GiveUp { .. } => "give_up",
            Self::StartRendering { .. } => "start_rendering",
            Self::RefuseIssuance { .. } => "refuse_issuance",
            Self::WarnNumberingRange { .. } => "warn_numbering_range",
            Self::RecordNumberReported { .. } => "record_number_reported",
            Self::RecordRendered { .. } => "record_rendered",
            Self::Cancel { .. } => "cancel",
            Self::RecordCancelled { .. } => "record_cancelled",
            Self::RecordCancellationRefused { .. } => "record_cancellation_refused",
            Self::Inutilize { .. } => "inutilize",
            Self::RecordInutilized { .. } => "record_inutilized",
            Self::RecordInutilizationRefused { .. } => "record_inutilization_refused",
            Self::RecordArtifact { .. } => "record_artifact",
            Self::RecordDelivery { .. } => "record_delivery",
            Self::RequestPdfRegeneration { .. } => "regenerate_pdf",
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Events
// ---------------------------------------------------------------------------------------------

/// Events. Every one carries `at`, the moment it was recorded (the timeline's `at`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum DocumentEvent {
    /// The document was stored (status `received`; validation follows in the same commit).
    DocumentReceived {
        /// Id.
        document_id: Uuid,
        /// Channel, branch and point.
        routing: Routing,
        /// The document as received.
        document: Box<CanonicalDocument>,
        /// When.
        at: DateTime<Utc>,
    },
    /// Local validation passed (`validated`).
    DocumentValidated {
        /// Non-blocking issues.
        warnings: Vec<Issue>,
        /// When.
        at: DateTime<Utc>,
    },
    /// Local validation failed (`validation_failed`, terminal).
    DocumentValidationFailed {
        /// Blocking issues.
        errors: Vec<Issue>,
        /// Non-blocking issues.
        warnings: Vec<Issue>,
        /// When.
        at: DateTime<Utc>,
    },
    /// Handed to the channel (`queued`).
    DocumentQueued {
        /// When.
        at: DateTime<Utc>,
    },
    /// SIFEN: transformation started (`transforming`).
    DocumentTransformStarted {
        /// When.
        at: DateTime<Utc>,
    },
    /// SIFEN: numbered, with CDC and XML (`signing`).
    DocumentTransformed {
        /// The number series (company, timbrado, establishment, point, type).
        #[serde(default)]
        series: String,
        /// The number.
        number: DocumentNumber,
        /// The CDC.
        cdc: String,
        /// `dCodSeg`.
        security_code: String,
        /// SHA-256 of the unsigned XML.
        xml_sha256: String,
        /// When.
        at: DateTime<Utc>,
    },
    /// SIFEN: signed; the signed XML is stored (`submitting`).
    DocumentSigned {
        /// `dFecFirma`.
        signed_at: DateTime<Utc>,
        /// The `signed_xml` artifact.
        signed_xml_artifact_id: Uuid,
        /// Its SHA-256 (what every attempt sends, byte for byte).
        signed_xml_sha256: String,
        /// When.
        at: DateTime<Utc>,
    },
    /// SIFEN: an attempt to send (`submitting`).
    DocumentSubmitted {
        /// Attempt number, from 1.
        attempt: u32,
        /// Lot number, when sent in a lot and known.
        lot_id: Option<String>,
        /// When.
        at: DateTime<Utc>,
    },
    /// SIFEN approved (`accepted`; webhook `document.accepted`).
    DocumentAccepted {
        /// Result code.
        code: String,
        /// Its message.
        message: String,
        /// `dProtAut`.
        protocol: Option<String>,
        /// SIFEN's processing time.
        approved_at: DateTime<Utc>,
        /// When.
        at: DateTime<Utc>,
    },
    /// SIFEN rejected (`rejected`; webhook `document.rejected`).
    DocumentRejected {
        /// Rejection code.
        code: String,
        /// Its message.
        message: String,
        /// When.
        at: DateTime<Utc>,
    },
    /// An operational failure; a retry is scheduled (`retrying`; webhook `document.retrying`).
    DocumentRetryScheduled {
        /// What happened.
        reason: String,
        /// When the next attempt is due.
        next_attempt_at: DateTime<Utc>,
        /// When.
        at: DateTime<Utc>,
    },
    /// A manual retry: the next attempt is due now (`retrying`).
    DocumentRetryRequested {
        /// When (and when the next attempt is due).
        at: DateTime<Utc>,
    },
    /// The next attempt starts (`submitting`).
    DocumentSubmissionResumed {
        /// When.
        at: DateTime<Utc>,
    },
    /// Given up after 60 h without an answer (`failed_terminal`; webhook
    /// `document.failed_terminal`).
    DocumentFailedTerminally {
        /// Why.
        reason: String,
        /// When.
        at: DateTime<Utc>,
    },
    /// Autoimpresor: numbered, the printable is rendered next (`rendering`).
    DocumentRenderingStarted {
        /// The number series (the channel's authorised range).
        #[serde(default)]
        series: String,
        /// The printed number.
        number: DocumentNumber,
        /// When.
        at: DateTime<Utc>,
    },
    /// Autoimpresor: the printable is stored (`accepted`; webhook `document.accepted`).
    DocumentRendered {
        /// The `printable_pdf` artifact.
        printable_artifact_id: Uuid,
        /// Its SHA-256.
        printable_sha256: String,
        /// When (the autoimpresor's approval time).
        at: DateTime<Utc>,
    },
    /// SIFEN's cancelación is requested; the channel sends it next (status unchanged).
    DocumentCancellationRequested {
        /// The reason to send.
        reason: String,
        /// When.
        at: DateTime<Utc>,
    },
    /// SIFEN refused the cancelación (status unchanged, still `accepted`).
    DocumentCancellationRefused {
        /// SIFEN's code.
        code: String,
        /// Its message.
        message: String,
        /// When.
        at: DateTime<Utc>,
    },
    /// Cancelled (`cancelled`; webhook `document.cancelled`).
    DocumentCancelled {
        /// The reason.
        reason: String,
        /// Whether SIFEN registered a cancelación (false: cancelled locally, no fiscal effect).
        fiscal: bool,
        /// SIFEN's code, when fiscal.
        code: Option<String>,
        /// SIFEN's message, when fiscal.
        message: Option<String>,
        /// `dProtAut` of the event, when fiscal and given.
        protocol: Option<String>,
        /// When.
        at: DateTime<Utc>,
    },
    /// SIFEN's inutilización is requested; the channel sends it next (status unchanged).
    DocumentInutilizationRequested {
        /// The reason to send.
        reason: String,
        /// When.
        at: DateTime<Utc>,
    },
    /// SIFEN refused the inutilización (status unchanged).
    DocumentInutilizationRefused {
        /// SIFEN's code.
        code: String,
        /// Its message.
        message: String,
        /// When.
        at: DateTime<Utc>,
    },
    /// Inutilised (`invalidated`; webhook `document.invalidated`).
    DocumentInvalidated {
        /// The reason.
        reason: String,
        /// Whether SIFEN registered an inutilización (false: an autoimpresor number voided,
        /// reported by the autoimpresor channel from this event).
        fiscal: bool,
        /// SIFEN's code, when fiscal.
        code: Option<String>,
        /// SIFEN's message, when fiscal.
        message: Option<String>,
        /// `dProtAut` of the event, when fiscal and given.
        protocol: Option<String>,
        /// When.
        at: DateTime<Utc>,
    },
    /// An artifact was stored.
    ArtifactRecorded {
        /// Id.
        artifact_id: Uuid,
        /// Kind.
        kind: ArtifactKind,
        /// MIME type.
        content_type: String,
        /// SHA-256.
        sha256: String,
        /// Bytes.
        size: u64,
        /// Version of this kind.
        version: u32,
        /// When.
        at: DateTime<Utc>,
    },
    /// A delivery changed (webhook `document.delivery_failed` when `status` is failed).
    DeliveryRecorded {
        /// The delivery's id.
        delivery_id: Uuid,
        /// For whom.
        target: DeliveryTarget,
        /// Through what.
        channel: DeliveryChannel,
        /// Outcome.
        status: DeliveryStatus,
        /// Attempt number.
        attempt: u32,
        /// Error or provider id.
        detail: Option<String>,
        /// When.
        at: DateTime<Utc>,
    },
    /// The document cannot be issued (`failed_terminal`, no number drawn): an autoimpresor
    /// authorization that does not cover it, or a SIFEN DE that could not be built or signed
    /// (webhook `document.failed`).
    DocumentIssuanceRefused {
        /// The error code (`configuration_error`, `document_build_failed`).
        code: String,
        /// What is wrong.
        message: String,
        /// The field or block it is about; absent: the channel (`autoimpresor`, as recorded
        /// before SIFEN documents could be refused).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        field: Option<String>,
        /// When.
        at: DateTime<Utc>,
    },
    /// Autoimpresor: 90 % of the authorised range is used (status unchanged).
    NumberingRangeNearlyExhausted {
        /// The number series.
        series: String,
        /// Numbers used.
        used: u64,
        /// Numbers in the range.
        size: u64,
        /// When.
        at: DateTime<Utc>,
    },
    /// Autoimpresor: the number's issue or void was reported to the channel's endpoint (status
    /// unchanged).
    NumberReported {
        /// What was reported.
        report: NumberReport,
        /// The endpoint's HTTP status.
        http_status: u16,
        /// When.
        at: DateTime<Utc>,
    },
    /// A new version of the printable is requested.
    PdfRegenerationRequested {
        /// The printable to render again (`kude` or `printable_pdf`).
        kind: ArtifactKind,
        /// When.
        at: DateTime<Utc>,
    },
}

impl DocumentEvent {
    /// When the event was recorded.
    pub fn at(&self) -> DateTime<Utc> {
        match self {
            Self::DocumentReceived { at, .. }
            | Self::DocumentValidated { at, .. }
            | Self::DocumentValidationFailed { at, .. }
            | Self::DocumentQueued { at }
            | Self::DocumentTransformStarted { at }
            | Self::DocumentTransformed { at, .. }
            | Self::DocumentSigned { at, .. }
            | Self::DocumentSubmitted { at, .. }
            | Self::DocumentAccepted { at, .. }
            | Self::DocumentRejected { at, .. }
            | Self::DocumentRetryScheduled { at, .. }
            | Self::DocumentRetryRequested { at }
            | Self::DocumentSubmissionResumed { at }
            | Self::DocumentFailedTerminally { at, .. }
            | Self::DocumentRenderingStarted { at, .. }
            | Self::DocumentRendered { at, .. }
            | Self::DocumentCancellationRequested { at, .. }
            | Self::DocumentCancellationRefused { at, .. }
            | Self::DocumentCancelled { at, .. }
            | Self::DocumentInutilizationRequested { at, .. }
            | Self::DocumentInutilizationRefused { at, .. }
            | Self::DocumentInvalidated { at, .. }
            | Self::ArtifactRecorded { at, .. }
            | Self::DeliveryRecorded { at, .. }
            | Self::DocumentIssuanceRefused { at, .. }
            | Self::NumberingRangeNearlyExhausted { at, .. }
            | Self::NumberReported { at, .. }
            | Self::PdfRegenerationRequested { at, .. } => *at,
        }
    }

    /// The status the event moves the document to, or `None` when it leaves the status as it was
    /// (for webhooks, which fire on changes of status).
    pub fn resulting_status(&self) -> Option<DocumentStatus> {
        use DocumentStatus as S;
        match self {
            Self::DocumentReceived { .. } => Some(S::Received),
            Self::DocumentValidated { .. } => Some(S::Validated),
            Self::DocumentValidationFailed { .. } => Some(S::ValidationFailed),
            Self::DocumentQueued { .. } => Some(S::Queued),
            Self::DocumentTransformStarted { .. } => Some(S::Transforming),
            Self::DocumentTransformed { .. } => Some(S::Signing),
            Self::DocumentSigned { .. } | Self::DocumentSubmissionResumed { .. } => Some(S::Submitting),
            Self::DocumentAccepted { .. } | Self::DocumentRendered { .. } => Some(S::Accepted),
            Self::DocumentRejected { .. } => Some(S::Rejected),
            Self::DocumentRetryScheduled { .. } => Some(S::Retrying),
            Self::DocumentFailedTerminally { .. } | Self::DocumentIssuanceRefused { .. } => {
                Some(S::FailedTerminal)
            }
            Self::DocumentRenderingStarted { .. } => Some(S::Rendering),
            Self::DocumentCancelled { .. } => Some(S::Cancelled),
            Self::DocumentInvalidated { .. } => Some(S::Invalidated),
            Self::DocumentSubmitted { .. }
            | Self::DocumentRetryRequested { .. }
            | Self::DocumentCancellationRequested { .. }
            | Self::DocumentCancellationRefused { .. }
            | Self::DocumentInutilizationRequested { .. }
            | Self::DocumentInutilizationRefused { .. }
            | Self::ArtifactRecorded { .. }
            | Self::DeliveryRecorded { .. }
            | Self::NumberingRangeNearlyExhausted { .. }
            | Self::NumberReported { .. }
            | Self::PdfRegenerationRequested { .. } => None,
        }
    }
}

impl DomainEvent for DocumentEvent {
    fn event_type(&self) -> String {
        match self {
            Self::DocumentReceived { .. } => "DocumentReceived",
            Self::DocumentValidated { .. } => "DocumentValidated",
            Self::DocumentValidationFailed { .. } => "DocumentValidationFailed",
            Self::DocumentQueued { .. } => "DocumentQueued",
            Self::DocumentTransformStarted { .. } => "DocumentTransformStarted",
            Self::DocumentTransformed { .. } => "DocumentTransformed",
            Self::DocumentSigned { .. } => "DocumentSigned",
            Self::DocumentSubmitted { .. } => "DocumentSubmitted",
            Self::DocumentAccepted { .. } => "DocumentAccepted",
            Self::DocumentRejected { .. } => "DocumentRejected",
            Self::DocumentRetryScheduled { .. } => "DocumentRetryScheduled",
            Self::DocumentRetryRequested { .. } => "DocumentRetryRequested",
            Self::DocumentSubmissionResumed { .. } => "DocumentSubmissionResumed",
            Self::DocumentFailedTerminally { .. } => "DocumentFailedTerminally",
            Self::DocumentRenderingStarted { .. } => "DocumentRenderingStarted",
            Self::DocumentRendered { .. } => "DocumentRendered",
            Self::DocumentCancellationRequested { .. } => "DocumentCancellationRequested",
            Self::DocumentCancellationRefused { .. } => "DocumentCancellationRefused",
            Self::DocumentCancelled { .. } => "DocumentCancelled",
            Self::DocumentInutilizationRequested { .. } => "DocumentInutilizationRequested",
            Self::DocumentInutilizationRefused { .. } => "DocumentInutilizationRefused",
            Self::DocumentInvalidated { .. } => "DocumentInvalidated",
            Self::ArtifactRecorded { .. } => "ArtifactRecorded",
            Self::DeliveryRecorded { .. } => "DeliveryRecorded",
            Self::PdfRegenerationRequested { .. } => "PdfRegenerationRequested",
            Self::DocumentIssuanceRefused { .. } => "DocumentIssuanceRefused",
            Self::NumberingRangeNearlyExhausted { .. } => "NumberingRangeNearlyExhausted",
            Self::NumberReported { .. } => "NumberReported",
        }
        .to_owned()
    }

    fn event_version(&self) -> String {
        "1".to_owned()
    }
}

// ---------------------------------------------------------------------------------------------
// Errors
// ---------------------------------------------------------------------------------------------

/// Refusals. Meant to map to HTTP as: [`Self::NotFound`] 404, [`Self::ReasonLength`] 400
/// `validation_error`, every other one 409 `conflict_error` ([`Self::Malformed`] comes from a
/// channel's report, a bug there, never from a client).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DocumentError {
    /// No such document (a command other than `Receive` on an empty stream).
    #[error("no such document")]
    NotFound,
    /// `Receive` on a stream that has a document already.
    #[error("the document exists already")]
    AlreadyExists,
    /// The document's status (and channel, and pending SIFEN event) does not allow the command.
    #[error("{command} is not allowed in status {from}")]
    InvalidTransition {
        /// The status the document is in.
        from: DocumentStatus,
        /// The refused command ([`DocumentCommand::name`]).
        command: &'static str,
    },
    /// Another SIFEN event for this document is waiting for its answer.
    #[error("a SIFEN {0} of this document is still pending")]
    FiscalEventPending(FiscalEventKind),
    /// An accepted document can no longer be cancelled through SIFEN.
    #[error("the cancellation window closed at {deadline}")]
    CancellationWindowClosed {
        /// The last moment a cancellation could be requested.
        deadline: DateTime<Utc>,
    },
    /// A reason must have 5 to 500 characters.
    #[error("a reason has 5 to 500 characters, this one has {chars}")]
    ReasonLength {
        /// Characters of the trimmed reason.
        chars: usize,
    },
    /// Giving up before the 60 h horizon.
    #[error("retries continue until {not_before}")]
    GiveUpTooEarly {
        /// From when giving up is allowed.
        not_before: DateTime<Utc>,
    },
    /// An attempt number that is not the next one (nor the current one again).
    #[error("attempt {got} recorded where attempt {expected} was next")]
    AttemptOutOfOrder {
        /// The next attempt number.
        expected: u32,
        /// The one given.
        got: u32,
    },
    /// An artifact version that is not the next one of its kind.
    #[error("the next {kind} version is {expected}, not {got}")]
    ArtifactVersion {
        /// Kind.
        kind: ArtifactKind,
        /// The next version.
        expected: u32,
        /// The one given.
        got: u32,
    },
    /// The artifact a command refers to was not recorded (or is of another kind).
    #[error("no {kind} artifact {artifact_id} was recorded")]
    UnknownArtifact {
        /// The id given.
        artifact_id: Uuid,
        /// The kind required.
        kind: ArtifactKind,
    },
    /// `regenerate-pdf` on a document without a printable.
    #[error("the document has no printable to regenerate")]
    NoPrintable,
    /// A value a channel reported does not have its shape.
    #[error("malformed {field}: expected {expected}")]
    Malformed {
        /// Which value.
        field: &'static str,
        /// What it should be.
        expected: &'static str,
    },
}

// ---------------------------------------------------------------------------------------------
// State
// ---------------------------------------------------------------------------------------------

/// Everything the events say about a document, for the aggregate's decisions and for readers
/// (process managers, projections).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DocumentState {
    /// Id.
    pub document_id: Uuid,
    /// Channel, branch and point.
    pub routing: Routing,
    /// The document as received.
    pub document: CanonicalDocument,
    /// Current status.
    pub status: DocumentStatus,
    /// When it was received.
    pub received_at: DateTime<Utc>,
    /// When the last event was recorded.
    pub updated_at: DateTime<Utc>,
    /// Blocking validation issues.
    pub errors: Vec<Issue>,
    /// Non-blocking validation issues.
    pub warnings: Vec<Issue>,
    /// The number, once drawn (SIFEN: transformed; autoimpresor: rendering).
    pub number: Option<DocumentNumber>,
    /// SIFEN: the CDC.
    pub cdc: Option<String>,
    /// SIFEN: `dCodSeg`.
    pub security_code: Option<String>,
    /// SIFEN: SHA-256 of the unsigned XML.
    pub xml_sha256: Option<String>,
    /// SIFEN: `dFecFirma`.
    pub signed_at: Option<DateTime<Utc>>,
    /// SIFEN: the signed XML every attempt sends.
    pub signed_xml_artifact_id: Option<Uuid>,
    /// SIFEN: attempts to send so far.
    pub attempts: u32,
    /// SIFEN: the lot of the current attempt.
    pub lot_id: Option<String>,
    /// SIFEN: when the current attempt was recorded.
    pub last_submitted_at: Option<DateTime<Utc>>,
    /// SIFEN: operational failures so far (the retry schedule counts these).
    pub failures: u32,
    /// SIFEN: the last operational failure.
    pub last_failure: Option<String>,
    /// In `retrying`: when the next attempt is due.
    pub next_attempt_at: Option<DateTime<Utc>>,
    /// In `retrying`: whether `RetryNow` was used since the last failure.
    pub retry_requested: bool,
    /// Why retrying stopped (`failed_terminal`).
    pub failure_reason: Option<String>,
    /// SIFEN's verdict on the document (accepted or rejected).
    pub answer: Option<SifenAnswer>,
    /// SIFEN's approval time, or when the autoimpresor printable was rendered.
    pub approved_at: Option<DateTime<Utc>>,
    /// Autoimpresor: the printable that made the document accepted.
    pub rendered_artifact_id: Option<Uuid>,
    /// A SIFEN event requested and not yet answered.
    pub pending: Option<PendingFiscalEvent>,
    /// SIFEN's last refusal of an event.
    pub last_refusal: Option<FiscalRefusal>,
    /// How the document ended, when cancelled or inutilised.
    pub voiding: Option<Voiding>,
    /// Every artifact, in the order recorded.
    pub artifacts: Vec<Artifact>,
    /// Whether a regeneration was requested and no printable recorded since.
    pub pdf_regeneration_pending: bool,
    /// Deliveries by id, each at its last recorded attempt.
    pub deliveries: BTreeMap<Uuid, DeliveryState>,
    /// Autoimpresor: why the document could not be issued (`failed_terminal`).
    #[serde(default)]
    pub issuance_refusal: Option<String>,
    /// Autoimpresor: the reports the channel's endpoint acknowledged.
    #[serde(default)]
    pub reported: Vec<NumberReport>,
}

impl DocumentState {
    /// The document type.
    pub fn doc_type(&self) -> DocumentType {
        self.document.doc_type
    }

    /// The channel.
    pub fn channel(&self) -> ChannelKind {
        self.routing.channel
    }

    /// An artifact by id.
    pub fn artifact(&self, artifact_id: Uuid) -> Option<&Artifact> {
        self.artifacts.iter().find(|a| a.artifact_id == artifact_id)
    }

    /// The latest version of a kind.
    pub fn latest_artifact(&self, kind: ArtifactKind) -> Option<&Artifact> {
        self.artifacts
            .iter()
            .filter(|a| a.kind == kind)
            .max_by_key(|a| a.version)
    }

    /// The version the next artifact of a kind must have.
    pub fn next_artifact_version(&self, kind: ArtifactKind) -> u32 {
        self.latest_artifact(kind)
            .map_or(1, |a| a.version.saturating_add(1))
    }

    /// The kind of the most recently recorded printable, if there is one.
    pub fn printable_kind(&self) -> Option<ArtifactKind> {
        self.artifacts
            .iter()
            .rev()
            .map(|a| a.kind)
            .find(|k| k.is_printable())
    }

    /// The last moment SIFEN's cancelación may be requested (approval + window).
    pub fn cancellation_deadline(&self) -> Option<DateTime<Utc>> {
        self.approved_at.map(|a| a + cancellation_window(self.doc_type()))
    }

    /// From when retrying may stop (signing + 60 h).
    pub fn give_up_not_before(&self) -> Option<DateTime<Utc>> {
        self.signed_at.map(|s| s + SUBMISSION_HORIZON)
    }

    fn pending_kind(&self) -> Option<FiscalEventKind> {
        self.pending.as_ref().map(|p| p.kind)
    }

    fn refused_last(&self, kind: FiscalEventKind, code: &str) -> bool {
        self.pending.is_none()
            && self
                .last_refusal
                .as_ref()
                .is_some_and(|r| r.kind == kind && r.code == code)
    }

    fn void(&mut self, kind: FiscalEventKind, reason: String, fiscal: bool, answer: Option<SifenAnswer>) {
        self.pending = None;
        self.voiding = Some(Voiding {
            kind,
            reason,
            fiscal,
            answer,
            at: self.updated_at,
        });
    }

    /// Folds one event (every event but `DocumentReceived`, which creates the state).
    fn apply(&mut self, event: DocumentEvent) {
        use DocumentStatus as S;
        self.updated_at = event.at();
        match event {
            DocumentEvent::DocumentReceived { .. } => {}
            DocumentEvent::DocumentValidated { warnings, .. } => {
                self.status = S::Validated;
                self.warnings = warnings;
            }
            DocumentEvent::DocumentValidationFailed { errors, warnings, .. } => {
                self.status = S::ValidationFailed;
                self.errors = errors;
                self.warnings = warnings;
            }
            DocumentEvent::DocumentQueued { .. } => self.status = S::Queued,
            DocumentEvent::DocumentTransformStarted { .. } => self.status = S::Transforming,
            DocumentEvent::DocumentTransformed {
                number,
                cdc,
                security_code,
                xml_sha256,
                ..
            } => {
                self.status = S::Signing;
                self.number = Some(number);
                self.cdc = Some(cdc);
                self.security_code = Some(security_code);
                self.xml_sha256 = Some(xml_sha256);
            }
            DocumentEvent::DocumentSigned {
                signed_at,
                signed_xml_artifact_id,
                ..
            } => {
                self.status = S::Submitting;
                self.signed_at = Some(signed_at);
                self.signed_xml_artifact_id = Some(signed_xml_artifact_id);
            }
            DocumentEvent::DocumentSubmitted { attempt, lot_id, at } => {
                self.attempts = attempt;
                self.lot_id = lot_id;
                self.last_submitted_at = Some(at);
            }
            DocumentEvent::DocumentAccepted {
                code,
                message,
                protocol,
                approved_at,
                ..
            } => {
                self.status = S::Accepted;
                self.approved_at = Some(approved_at);
                self.answer = Some(SifenAnswer {
                    code,
                    message,
                    protocol,
                });
            }
            DocumentEvent::DocumentRejected { code, message, .. } => {
                self.status = S::Rejected;
                self.answer = Some(SifenAnswer {
                    code,
                    message,
                    protocol: None,
                });
            }
            DocumentEvent::DocumentRetryScheduled {
                reason,
                next_attempt_at,
                ..
            } => {
                self.status = S::Retrying;
                self.failures = self.failures.saturating_add(1);
                self.last_failure = Some(reason);
                self.next_attempt_at = Some(next_attempt_at);
                self.retry_requested = false;
            }
            DocumentEvent::DocumentRetryRequested { at } => {
                self.next_attempt_at = Some(at);
                self.retry_requested = true;
            }
            DocumentEvent::DocumentSubmissionResumed { .. } => {
                self.status = S::Submitting;
                self.next_attempt_at = None;
                self.retry_requested = false;
            }
            DocumentEvent::DocumentFailedTerminally { reason, .. } => {
                self.status = S::FailedTerminal;
                self.failure_reason = Some(reason);
                self.next_attempt_at = None;
                self.retry_requested = false;
            }
            DocumentEvent::DocumentRenderingStarted { number, .. } => {
                self.status = S::Rendering;
                self.number = Some(number);
            }
            DocumentEvent::DocumentIssuanceRefused { code, message, .. } => {
                self.status = S::FailedTerminal;
                self.failure_reason = Some(message.clone());
                self.issuance_refusal = Some(format!("{code}: {message}"));
            }
            DocumentEvent::NumberingRangeNearlyExhausted { .. } => {}
            DocumentEvent::NumberReported { report, .. } => {
                if !self.reported.contains(&report) {
                    self.reported.push(report);
                }
            }
            DocumentEvent::DocumentRendered {
                printable_artifact_id,
                at,
                ..
            } => {
                self.status = S::Accepted;
                self.approved_at = Some(at);
                self.rendered_artifact_id = Some(printable_artifact_id);
            }
            DocumentEvent::DocumentCancellationRequested { reason, at } => {
                self.pending = Some(PendingFiscalEvent {
                    kind: FiscalEventKind::Cancellation,
                    reason,
                    requested_at: at,
                });
            }
            DocumentEvent::DocumentInutilizationRequested { reason, at } => {
                self.pending = Some(PendingFiscalEvent {
                    kind: FiscalEventKind::Inutilization,
                    reason,
                    requested_at: at,
                });
            }
            DocumentEvent::DocumentCancellationRefused { code, message, at } => {
                self.pending = None;
                self.last_refusal = Some(FiscalRefusal {
                    kind: FiscalEventKind::Cancellation,
                    code,
                    message,
                    at,
                });
            }
            DocumentEvent::DocumentInutilizationRefused { code, message, at } => {
                self.pending = None;
                self.last_refusal = Some(FiscalRefusal {
                    kind: FiscalEventKind::Inutilization,
                    code,
                    message,
                    at,
                });
            }
            DocumentEvent::DocumentCancelled {
                reason,
                fiscal,
                code,
                message,
                protocol,
                ..
            } => {
                self.status = S::Cancelled;
                let answer = answer_of(code, message, protocol);
                self.void(FiscalEventKind::Cancellation, reason, fiscal, answer);
            }
            DocumentEvent::DocumentInvalidated {
                reason,
                fiscal,
                code,
                message,
                protocol,
                ..
            } => {
                self.status = S::Invalidated;
                let answer = answer_of(code, message, protocol);
                self.void(FiscalEventKind::Inutilization, reason, fiscal, answer);
            }
            DocumentEvent::ArtifactRecorded {
                artifact_id,
                kind,
                content_type,
                sha256,
                size,
                version,
                at,
            } => {
                if kind.is_printable() {
                    self.pdf_regeneration_pending = false;
                }
                self.artifacts.push(Artifact {
                    artifact_id,
                    kind,
                    content_type,
                    sha256,
                    size,
                    version,
                    created_at: at,
                });
            }
            DocumentEvent::DeliveryRecorded {
                delivery_id,
                target,
                channel,
                status,
                attempt,
                detail,
                at,
            } => {
                self.deliveries.insert(
                    delivery_id,
                    DeliveryState {
                        target,
                        channel,
                        status,
                        attempt,
                        detail,
                        at,
                    },
                );
            }
            DocumentEvent::PdfRegenerationRequested { .. } => self.pdf_regeneration_pending = true,
        }
    }
}

fn answer_of(code: Option<String>, message: Option<String>, protocol: Option<String>) -> Option<SifenAnswer> {
    code.map(|code| SifenAnswer {
        code,
        message: message.unwrap_or_default(),
        protocol,
    })
}

/// The aggregate: no state before `DocumentReceived`, then [`DocumentState`].
#[derive(Debug, Default, Clone, PartialEq, Serialize, Deserialize)]
pub struct Document {
    state: Option<DocumentState>,
}

// ---------------------------------------------------------------------------------------------
// Decisions
// ---------------------------------------------------------------------------------------------

type Decision = Result<Vec<DocumentEvent>, DocumentError>;

fn one(event: DocumentEvent) -> Decision {
    Ok(vec![event])
}

/// The effect already holds: no event.
fn nothing() -> Decision {
    Ok(Vec::new())
}

impl Document {
    /// The document, once received.
    pub fn state(&self) -> Option<&DocumentState> {
        self.state.as_ref()
    }

    /// The document's state, taken.
    pub fn into_state(self) -> Option<DocumentState> {
        self.state
    }

    /// The events a command produces in the current state, or why it is refused. Pure: `handle`
    /// writes these through the event sink, and a caller may ask without writing.
    pub fn decide(&self, command: DocumentCommand) -> Decision {
        let Some(s) = &self.state else {
            return match command {
                DocumentCommand::Receive {
                    document_id,
                    routing,
                    document,
                    errors,
                    warnings,
                    at,
                } => {
                    let outcome = if errors.is_empty() {
                        DocumentEvent::DocumentValidated { warnings, at }
                    } else {
                        DocumentEvent::DocumentValidationFailed { errors, warnings, at }
                    };
                    Ok(vec![
                        DocumentEvent::DocumentReceived {
                            document_id,
                            routing,
                            document,
                            at,
                        },
                        outcome,
                    ])
                }
                _ => Err(DocumentError::NotFound),
            };
        };
        use DocumentStatus as S;
        let refused = DocumentError::InvalidTransition {
            from: s.status,
            command: command.name(),
        };
        let sifen = s.channel() == ChannelKind::Sifen;
        match command {
            DocumentCommand::Receive { .. } => Err(DocumentError::AlreadyExists),
            DocumentCommand::Queue { at } => match s.status {
                S::Validated => one(DocumentEvent::DocumentQueued { at }),
                S::Queued => nothing(),
                _ => Err(refused),
            },
            DocumentCommand::StartTransform { at } => match s.status {
                S::Queued if sifen => one(DocumentEvent::DocumentTransformStarted { at }),
                S::Transforming => nothing(),
                _ => Err(refused),
            },
            DocumentCommand::RecordTransformed {
                series,
                number,
                cdc,
                security_code,
                xml_sha256,
                at,
            } => match s.status {
                S::Transforming => {
                    number.check()?;
                    check_cdc(&cdc, s.doc_type(), &number, &security_code)?;
                    check_sha256("xml_sha256", &xml_sha256)?;
                    one(DocumentEvent::DocumentTransformed {
                        series,
                        number,
                        cdc,
                        security_code,
                        xml_sha256,
                        at,
                    })
                }
                S::Signing if s.cdc.as_deref() == Some(&cdc) && s.number.as_ref() == Some(&number) => {
                    nothing()
                }
                _ => Err(refused),
            },
            DocumentCommand::RecordSigned {
                signed_xml_artifact_id,
                signed_at,
                at,
            } => match s.status {
                S::Signing => {
                    let artifact = s
                        .artifact(signed_xml_artifact_id)
                        .filter(|a| a.kind == ArtifactKind::SignedXml)
                        .ok_or(DocumentError::UnknownArtifact {
                            artifact_id: signed_xml_artifact_id,
                            kind: ArtifactKind::SignedXml,
                        })?;
                    one(DocumentEvent::DocumentSigned {
                        signed_at,
                        signed_xml_artifact_id,
                        signed_xml_sha256: artifact.sha256.clone(),
                        at,
                    })
                }
                S::Submitting if s.signed_xml_artifact_id == Some(signed_xml_artifact_id) => nothing(),
                _ => Err(refused),
            },
            DocumentCommand::RecordSubmitted { attempt, lot_id, at } => {
                if s.status != S::Submitting {
                    return Err(refused);
                }
                let next = s.attempts.saturating_add(1);
                let current = s.attempts > 0 && attempt == s.attempts;
                if attempt == next || (current && s.lot_id.is_none() && lot_id.is_some()) {
                    one(DocumentEvent::DocumentSubmitted { attempt, lot_id, at })
                } else if current && lot_id == s.lot_id {
                    nothing()
                } else {
                    Err(DocumentError::AttemptOutOfOrder {
                        expected: next,
                        got: attempt,
                    })
                }
            }
            DocumentCommand::RecordAccepted {
                code,
                message,
                protocol,
                approved_at,
                at,
            } => match s.status {
                S::Submitting => one(DocumentEvent::DocumentAccepted {
                    code,
                    message,
                    protocol,
                    approved_at,
                    at,
                }),
                S::Accepted
                    if s.approved_at == Some(approved_at)
                        && s.answer
                            .as_ref()
                            .is_some_and(|a| a.code == code && a.protocol == protocol) =>
                {
                    nothing()
                }
                _ => Err(refused),
            },
            DocumentCommand::RecordRejected { code, message, at } => match s.status {
                S::Submitting => one(DocumentEvent::DocumentRejected { code, message, at }),
                S::Rejected if s.answer.as_ref().is_some_and(|a| a.code == code) => nothing(),
                _ => Err(refused),
            },
            DocumentCommand::RecordOperationalFailure {
                reason,
                next_attempt_at,
                at,
            } => match s.status {
                S::Submitting => one(DocumentEvent::DocumentRetryScheduled {
                    reason,
                    next_attempt_at,
                    at,
                }),
                S::Retrying
                    if s.last_failure.as_deref() == Some(&reason)
                        && (s.next_attempt_at == Some(next_attempt_at) || s.retry_requested) =>
                {
                    nothing()
                }
                _ => Err(refused),
            },
            DocumentCommand::RetryNow { at } => match s.status {
                S::Retrying if s.retry_requested => nothing(),
                S::Retrying => one(DocumentEvent::DocumentRetryRequested { at }),
                _ => Err(refused),
            },
            DocumentCommand::ResumeSubmission { at } => match s.status {
                S::Retrying => one(DocumentEvent::DocumentSubmissionResumed { at }),
                S::Submitting => nothing(),
                _ => Err(refused),
            },
            DocumentCommand::GiveUp { reason, at } => match s.status {
                S::Retrying => match s.give_up_not_before() {
                    Some(not_before) if at < not_before => Err(DocumentError::GiveUpTooEarly { not_before }),
                    _ => one(DocumentEvent::DocumentFailedTerminally { reason, at }),
                },
                S::FailedTerminal => nothing(),
                _ => Err(refused),
            },
            DocumentCommand::StartRendering { series, number, at } => match s.status {
                S::Queued if !sifen => {
                    number.check()?;
                    one(DocumentEvent::DocumentRenderingStarted { series, number, at })
                }
                S::Rendering if s.number.as_ref() == Some(&number) => nothing(),
                _ => Err(refused),
            },
            DocumentCommand::RefuseIssuance {
                code,
                message,
                field,
                at,
            } => match s.status {
                S::Queued | S::Transforming => one(DocumentEvent::DocumentIssuanceRefused {
                    code,
                    message,
                    field,
                    at,
                }),
                S::FailedTerminal if s.issuance_refusal.is_some() => nothing(),
                _ => Err(refused),
            },
            DocumentCommand::WarnNumberingRange {
                series,
                used,
                size,
                at,
            } => {
                if sifen || s.number.is_none() {
                    return Err(refused);
                }
                one(DocumentEvent::NumberingRangeNearlyExhausted {
                    series,
                    used,
                    size,
                    at,
                })
            }
            DocumentCommand::RecordNumberReported {
                report,
                http_status,
                at,
            } => {
                let due = match report {
                    NumberReport::Issued => s.rendered_artifact_id.is_some(),
                    NumberReport::Voided => s.status == S::Invalidated,
                };
                if sifen || !due {
                    return Err(refused);
                }
                if s.reported.contains(&report) {
                    return nothing();
                }
                one(DocumentEvent::NumberReported {
                    report,
                    http_status,
                    at,
                })
            }
            DocumentCommand::RecordRendered { artifact_id, at } => match s.status {
                S::Rendering => {
                    let artifact = s
                        .artifact(artifact_id)
                        .filter(|a| a.kind == ArtifactKind::PrintablePdf)
                        .ok_or(DocumentError::UnknownArtifact {
                            artifact_id,
                            kind: ArtifactKind::PrintablePdf,
                        })?;
                    one(DocumentEvent::DocumentRendered {
                        printable_artifact_id: artifact_id,
                        printable_sha256: artifact.sha256.clone(),
                        at,
                    })
                }
                S::Accepted if s.rendered_artifact_id == Some(artifact_id) => nothing(),
                _ => Err(refused),
            },
            DocumentCommand::Cancel { reason, at } => match s.status {
                S::Cancelled => nothing(),
                S::Received | S::Validated | S::Queued | S::Transforming | S::Signing | S::Rendering => {
                    one(DocumentEvent::DocumentCancelled {
                        reason: check_reason(&reason)?,
                        fiscal: false,
                        code: None,
                        message: None,
                        protocol: None,
                        at,
                    })
                }
                S::Accepted if sifen => match s.pending_kind() {
                    Some(FiscalEventKind::Cancellation) => nothing(),
                    Some(other) => Err(DocumentError::FiscalEventPending(other)),
                    None => {
                        let reason = check_reason(&reason)?;
                        let deadline = s.cancellation_deadline().ok_or(refused)?;
                        if at > deadline {
                            return Err(DocumentError::CancellationWindowClosed { deadline });
                        }
                        one(DocumentEvent::DocumentCancellationRequested { reason, at })
                    }
                },
                _ => Err(refused),
            },
            DocumentCommand::RecordCancelled {
                code,
                message,
                protocol,
                at,
            } => match (s.status, &s.pending) {
                (S::Cancelled, _) => nothing(),
                (S::Accepted, Some(p)) if p.kind == FiscalEventKind::Cancellation => {
                    one(DocumentEvent::DocumentCancelled {
                        reason: p.reason.clone(),
                        fiscal: true,
                        code: Some(code),
                        message: Some(message),
                        protocol,
                        at,
                    })
                }
                _ => Err(refused),
            },
            DocumentCommand::RecordCancellationRefused { code, message, at } => match s.pending_kind() {
                Some(FiscalEventKind::Cancellation) => {
                    one(DocumentEvent::DocumentCancellationRefused { code, message, at })
                }
                None if s.status == S::Accepted && s.refused_last(FiscalEventKind::Cancellation, &code) => {
                    nothing()
                }
                _ => Err(refused),
            },
            DocumentCommand::Inutilize { reason, at } => match s.status {
                S::Invalidated => nothing(),
                S::Accepted | S::Rejected | S::FailedTerminal => match s.pending_kind() {
                    Some(FiscalEventKind::Inutilization) => nothing(),
                    Some(other) => Err(DocumentError::FiscalEventPending(other)),
                    None if sifen => one(DocumentEvent::DocumentInutilizationRequested {
                        reason: check_reason(&reason)?,
                        at,
                    }),
                    // An autoimpresor document refused before it was numbered has no number to
                    // void.
                    None if s.number.is_none() => Err(refused),
                    None => one(DocumentEvent::DocumentInvalidated {
                        reason: check_reason(&reason)?,
                        fiscal: false,
                        code: None,
                        message: None,
                        protocol: None,
                        at,
                    }),
                },
                _ => Err(refused),
            },
            DocumentCommand::RecordInutilized {
                code,
                message,
                protocol,
                at,
            } => match (s.status, &s.pending) {
                (S::Invalidated, _) => nothing(),
                (_, Some(p)) if p.kind == FiscalEventKind::Inutilization => {
                    one(DocumentEvent::DocumentInvalidated {
                        reason: p.reason.clone(),
                        fiscal: true,
                        code: Some(code),
                        message: Some(message),
                        protocol,
                        at,
                    })
                }
                _ => Err(refused),
            },
            DocumentCommand::RecordInutilizationRefused { code, message, at } => match s.pending_kind() {
                Some(FiscalEventKind::Inutilization) => {
                    one(DocumentEvent::DocumentInutilizationRefused { code, message, at })
                }
                None if matches!(s.status, S::Accepted | S::Rejected | S::FailedTerminal)
                    && s.refused_last(FiscalEventKind::Inutilization, &code) =>
                {
                    nothing()
                }
                _ => Err(refused),
            },
            DocumentCommand::RecordArtifact {
                artifact_id,
                kind,
                content_type,
                sha256,
                size,
                version,
                at,
            } => {
                if s.artifact(artifact_id).is_some() {
                    return nothing();
                }
                if content_type.trim().is_empty() {
                    return Err(malformed("content_type", "a MIME type"));
                }
                check_sha256("sha256", &sha256)?;
                let expected = s.next_artifact_version(kind);
                if version != expected {
                    return Err(DocumentError::ArtifactVersion {
                        kind,
                        expected,
                        got: version,
                    });
                }
                one(DocumentEvent::ArtifactRecorded {
                    artifact_id,
                    kind,
                    content_type,
                    sha256,
                    size,
                    version,
                    at,
                })
            }
            DocumentCommand::RecordDelivery {
                delivery_id,
                target,
                channel,
                status,
                attempt,
                detail,
                at,
            } => {
                let known = s.deliveries.get(&delivery_id);
                if known.is_some_and(|d| d.attempt == attempt && d.status == status) {
                    return nothing();
                }
                one(DocumentEvent::DeliveryRecorded {
                    delivery_id,
                    target,
                    channel,
                    status,
                    attempt,
                    detail,
                    at,
                })
            }
            DocumentCommand::RequestPdfRegeneration { at } => {
                let kind = s.printable_kind().ok_or(DocumentError::NoPrintable)?;
                if s.pdf_regeneration_pending {
                    return nothing();
                }
                one(DocumentEvent::PdfRegenerationRequested { kind, at })
            }
        }
    }
}

impl Aggregate for Document {
    const TYPE: &'static str = "document";
    type Command = DocumentCommand;
    type Event = DocumentEvent;
    type Error = DocumentError;
    type Services = ();

    async fn handle(
        &mut self,
        command: DocumentCommand,
        _: &(),
        sink: &EventSink<Self>,
    ) -> Result<(), DocumentError> {
        for event in self.decide(command)? {
            sink.write(event, self).await;
        }
        Ok(())
    }

    fn apply(&mut self, event: DocumentEvent) {
        if let Some(state) = self.state.as_mut() {
            state.apply(event);
            return;
        }
        // Nothing but a receipt can start a stream; `decide` never produces anything else.
        if let DocumentEvent::DocumentReceived {
            document_id,
            routing,
            document,
            at,
        } = event
        {
            self.state = Some(DocumentState {
                document_id,
                routing,
                document: *document,
                status: DocumentStatus::Received,
                received_at: at,
                updated_at: at,
                errors: Vec::new(),
                warnings: Vec::new(),
                number: None,
                cdc: None,
                security_code: None,
                xml_sha256: None,
                signed_at: None,
                signed_xml_artifact_id: None,
                attempts: 0,
                lot_id: None,
                last_submitted_at: None,
                failures: 0,
                last_failure: None,
                next_attempt_at: None,
                retry_requested: false,
                failure_reason: None,
                answer: None,
                approved_at: None,
                rendered_artifact_id: None,
                pending: None,
                last_refusal: None,
                voiding: None,
                artifacts: Vec::new(),
                pdf_regeneration_pending: false,
                deliveries: BTreeMap::new(),
                issuance_refusal: None,
                reported: Vec::new(),
            });
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Tests
// ---------------------------------------------------------------------------------------------

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::document::canonical::{from_value, sample_invoice};
    use chrono::TimeZone;
    use cqrs_es::test::TestFramework;

    // --- fixtures ------------------------------------------------------------------------------

    fn t0() -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 3, 2, 13, 15, 0)
            .single()
            .expect("a time")
    }

    /// `t0` plus minutes.
    fn t(minutes: i64) -> DateTime<Utc> {
        t0() + TimeDelta::minutes(minutes)
    }

    const REASON: &str = "Error en el precio unitario";
    const SECURITY_CODE: &str = "587326098";
    const SERIES: &str = "company:12345678:001:001:1";
    const SIGNED_XML: Uuid = Uuid::from_u128(100);
    const PRINTABLE: Uuid = Uuid::from_u128(200);
    const KUDE: Uuid = Uuid::from_u128(300);

    fn sha(c: char) -> String {
        c.to_string().repeat(64)
    }

    fn routing(channel: ChannelKind) -> Routing {
        Routing {
            company_id: Uuid::from_u128(1),
            branch_id: Uuid::from_u128(2),
            issuance_point_id: Uuid::from_u128(3),
            channel,
            channel_id: Uuid::from_u128(4),
        }
    }

    fn canonical(doc_type: DocumentType) -> Box<CanonicalDocument> {
        let mut document = from_value(sample_invoice()).expect("the sample parses");
        document.doc_type = doc_type;
        Box::new(document)
    }

    fn number() -> DocumentNumber {
        DocumentNumber {
            timbrado: "12345678".into(),
            establishment: "001".into(),
            point: "001".into(),
            number: "0000001".into(),
        }
    }

    /// The CDC of `number()` for a type: RUC 80069563-1, legal entity, 2026-03-02, normal
    /// emission, `SECURITY_CODE`, and the check digit.
    fn cdc(doc_type: DocumentType) -> String {
        let code = doc_type.sifen_code().expect("a SIFEN type");
        let base = format!("{code:02}80069563100100100000012202603021{SECURITY_CODE}");
        assert_eq!(base.len(), 43);
        format!("{base}{}", modulo11(&base))
    }

    fn issue(code: &str) -> Issue {
        Issue::new("buyer.ruc", code, "a message")
    }

    fn received(channel: ChannelKind, doc_type: DocumentType) -> DocumentEvent {
        DocumentEvent::DocumentReceived {
            document_id: Uuid::from_u128(0xd0c),
            routing: routing(channel),
            document: canonical(doc_type),
            at: t(0),
        }
    }

    fn validated() -> DocumentEvent {
        DocumentEvent::DocumentValidated {
            warnings: vec![issue("unknown_taxpayer")],
            at: t(0),
        }
    }

    fn validation_failed() -> DocumentEvent {
        DocumentEvent::DocumentValidationFailed {
            errors: vec![issue("invalid_ruc")],
            warnings: vec![],
            at: t(0),
        }
    }

    fn queued() -> DocumentEvent {
        DocumentEvent::DocumentQueued { at: t(1) }
    }

    fn transform_started() -> DocumentEvent {
        DocumentEvent::DocumentTransformStarted { at: t(2) }
    }

    fn transformed(doc_type: DocumentType) -> DocumentEvent {
        DocumentEvent::DocumentTransformed {
            series: SERIES.into(),
            number: number(),
            cdc: cdc(doc_type),
            security_code: SECURITY_CODE.into(),
            xml_sha256: sha('a'),
            at: t(2),
        }
    }

    fn artifact_recorded(
        artifact_id: Uuid,
        kind: ArtifactKind,
        version: u32,
        at: DateTime<Utc>,
    ) -> DocumentEvent {
        let (content_type, c) = match kind {
            ArtifactKind::SignedXml | ArtifactKind::ChannelResponse => ("application/xml", 'b'),
            ArtifactKind::NormalizedPayload => ("application/json", 'd'),
            ArtifactKind::Kude | ArtifactKind::PrintablePdf => ("application/pdf", 'c'),
        };
        DocumentEvent::ArtifactRecorded {
            artifact_id,
            kind,
            content_type: content_type.into(),
            sha256: sha(c),
            size: 4096,
            version,
            at,
        }
    }

    fn signed() -> DocumentEvent {
        DocumentEvent::DocumentSigned {
            signed_at: t(3),
            signed_xml_artifact_id: SIGNED_XML,
            signed_xml_sha256: sha('b'),
            at: t(3),
        }
    }

    fn submitted(attempt: u32) -> DocumentEvent {
        DocumentEvent::DocumentSubmitted {
            attempt,
            lot_id: Some(format!("L{attempt}")),
            at: t(4),
        }
    }

    fn accepted() -> DocumentEvent {
        DocumentEvent::DocumentAccepted {
            code: "0260".into(),
            message: "Aprobado".into(),
            protocol: Some("48493617".into()),
            approved_at: t(5),
            at: t(6),
        }
    }

    fn rejected() -> DocumentEvent {
        DocumentEvent::DocumentRejected {
            code: "1000".into(),
            message: "CDC no corresponde con las informaciones del XML".into(),
            at: t(6),
        }
    }

    fn retry_scheduled() -> DocumentEvent {
        DocumentEvent::DocumentRetryScheduled {
            reason: "timeout".into(),
            next_attempt_at: t(6) + TimeDelta::seconds(30),
            at: t(6),
        }
    }

    fn failed_terminally() -> DocumentEvent {
        DocumentEvent::DocumentFailedTerminally {
            reason: "no answer 60 h after signing".into(),
            at: t(3) + SUBMISSION_HORIZON,
        }
    }

    fn cancellation_requested() -> DocumentEvent {
        DocumentEvent::DocumentCancellationRequested {
            reason: REASON.into(),
            at: t(10),
        }
    }

    fn inutilization_requested() -> DocumentEvent {
        DocumentEvent::DocumentInutilizationRequested {
            reason: REASON.into(),
            at: t(10),
        }
    }

    fn cancelled(fiscal: bool) -> DocumentEvent {
        DocumentEvent::DocumentCancelled {
            reason: REASON.into(),
            fiscal,
            code: fiscal.then(|| "0600".into()),
            message: fiscal.then(|| "Evento registrado correctamente".into()),
            protocol: fiscal.then(|| "777".into()),
            at: t(11),
        }
    }

    fn invalidated(fiscal: bool) -> DocumentEvent {
        DocumentEvent::DocumentInvalidated {
            reason: REASON.into(),
            fiscal,
            code: fiscal.then(|| "0600".into()),
            message: fiscal.then(|| "Evento registrado correctamente".into()),
            protocol: fiscal.then(|| "777".into()),
            at: t(11),
        }
    }

    fn rendering_started() -> DocumentEvent {
        DocumentEvent::DocumentRenderingStarted {
            series: String::new(),
            number: number(),
            at: t(2),
        }
    }

    fn rendered() -> DocumentEvent {
        DocumentEvent::DocumentRendered {
            printable_artifact_id: PRINTABLE,
            printable_sha256: sha('c'),
            at: t(3),
        }
    }

    // --- the backbone: a history for every situation a document can be in ----------------------

    /// Every place in the life of a document, by status, channel and pending SIFEN event.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    enum Situation {
        Received,
        ValidationFailed,
        Validated,
        QueuedSifen,
        Transforming,
        Signing,
        Submitting,
        Retrying,
        FailedTerminal,
        AcceptedSifen,
        CancellationPending,
        CancelledSifen,
        AcceptedInutilizationPending,
        Rejected,
        RejectedInutilizationPending,
        InvalidatedSifen,
        CancelledLocally,
        QueuedAutoimpresor,
        Rendering,
        AcceptedAutoimpresor,
        InvalidatedAutoimpresor,
    }

    impl Situation {
        const ALL: [Self; 21] = [
            Self::Received,
            Self::ValidationFailed,
            Self::Validated,
            Self::QueuedSifen,
            Self::Transforming,
            Self::Signing,
            Self::Submitting,
            Self::Retrying,
            Self::FailedTerminal,
            Self::AcceptedSifen,
            Self::CancellationPending,
            Self::CancelledSifen,
            Self::AcceptedInutilizationPending,
            Self::Rejected,
            Self::RejectedInutilizationPending,
            Self::InvalidatedSifen,
            Self::CancelledLocally,
            Self::QueuedAutoimpresor,
            Self::Rendering,
            Self::AcceptedAutoimpresor,
            Self::InvalidatedAutoimpresor,
        ];

        fn status(self) -> DocumentStatus {
            use DocumentStatus as S;
            match self {
                Self::Received => S::Received,
                Self::ValidationFailed => S::ValidationFailed,
                Self::Validated => S::Validated,
                Self::QueuedSifen | Self::QueuedAutoimpresor => S::Queued,
                Self::Transforming => S::Transforming,
                Self::Signing => S::Signing,
                Self::Submitting => S::Submitting,
                Self::Retrying => S::Retrying,
                Self::FailedTerminal => S::FailedTerminal,
                Self::AcceptedSifen
                | Self::CancellationPending
                | Self::AcceptedInutilizationPending
                | Self::AcceptedAutoimpresor => S::Accepted,
                Self::CancelledSifen | Self::CancelledLocally => S::Cancelled,
                Self::Rejected | Self::RejectedInutilizationPending => S::Rejected,
                Self::InvalidatedSifen | Self::InvalidatedAutoimpresor => S::Invalidated,
                Self::Rendering => S::Rendering,
            }
        }
    }

    /// The events that lead a document of `doc_type` to `situation`.
    fn history(situation: Situation, doc_type: DocumentType) -> Vec<DocumentEvent> {
        use Situation as X;
        let (before, step) = match situation {
            X::Received => (None, vec![received(ChannelKind::Sifen, doc_type)]),
            X::ValidationFailed => (Some(X::Received), vec![validation_failed()]),
            X::Validated => (Some(X::Received), vec![validated()]),
            X::QueuedSifen => (Some(X::Validated), vec![queued()]),
            X::Transforming => (Some(X::QueuedSifen), vec![transform_started()]),
            X::Signing => (Some(X::Transforming), vec![transformed(doc_type)]),
            X::Submitting => (
                Some(X::Signing),
                vec![
                    artifact_recorded(SIGNED_XML, ArtifactKind::SignedXml, 1, t(3)),
                    signed(),
                ],
            ),
            X::Retrying => (Some(X::Submitting), vec![submitted(1), retry_scheduled()]),
            X::FailedTerminal => (Some(X::Retrying), vec![failed_terminally()]),
            X::AcceptedSifen => (Some(X::Submitting), vec![submitted(1), accepted()]),
            X::CancellationPending => (Some(X::AcceptedSifen), vec![cancellation_requested()]),
            X::CancelledSifen => (Some(X::CancellationPending), vec![cancelled(true)]),
            X::AcceptedInutilizationPending => (Some(X::AcceptedSifen), vec![inutilization_requested()]),
            X::Rejected => (Some(X::Submitting), vec![submitted(1), rejected()]),
            X::RejectedInutilizationPending => (Some(X::Rejected), vec![inutilization_requested()]),
            X::InvalidatedSifen => (Some(X::RejectedInutilizationPending), vec![invalidated(true)]),
            X::CancelledLocally => (Some(X::QueuedSifen), vec![cancelled(false)]),
            X::QueuedAutoimpresor => (
                None,
                vec![
                    received(ChannelKind::Autoimpresor, doc_type),
                    validated(),
                    queued(),
                ],
            ),
            X::Rendering => (Some(X::QueuedAutoimpresor), vec![rendering_started()]),
            X::AcceptedAutoimpresor => (
                Some(X::Rendering),
                vec![
                    artifact_recorded(PRINTABLE, ArtifactKind::PrintablePdf, 1, t(3)),
                    rendered(),
                ],
            ),
            X::InvalidatedAutoimpresor => (Some(X::AcceptedAutoimpresor), vec![invalidated(false)]),
        };
        let mut events = before.map(|b| history(b, doc_type)).unwrap_or_default();
        events.extend(step);
        events
    }

    fn invoice(situation: Situation) -> Vec<DocumentEvent> {
        history(situation, DocumentType::Invoice)
    }

    fn run(given: Vec<DocumentEvent>, command: DocumentCommand) -> Decision {
        TestFramework::<Document>::with(())
            .given(given)
            .when(command)
            .inspect_result()
    }

    fn state_after(events: Vec<DocumentEvent>) -> DocumentState {
        let mut document = Document::default();
        for event in events {
            document.apply(event);
        }
        document.state.expect("a received document")
    }

    /// What a command should do in a situation.
    #[derive(Debug)]
    enum Expect {
        /// Produce at least one event (the exact events are asserted by the transition tests).
        Events,
        /// Nothing: the effect already holds.
        Nothing,
        /// `InvalidTransition` from the situation's status.
        Refused,
        /// Another refusal.
        Error(DocumentError),
    }

    /// Runs `command` in every situation and checks the outcome `expect` names.
    fn table(command: impl Fn() -> DocumentCommand, expect: impl Fn(Situation) -> Expect) {
        for situation in Situation::ALL {
            let command = command();
            let name = command.name();
            let result = run(invoice(situation), command);
            match expect(situation) {
                Expect::Events => assert!(
                    result.as_ref().is_ok_and(|events| !events.is_empty()),
                    "{name} in {situation:?}: {result:?}"
                ),
                Expect::Nothing => assert_eq!(result, Ok(vec![]), "{name} in {situation:?}"),
                Expect::Refused => assert_eq!(
                    result,
                    Err(DocumentError::InvalidTransition {
                        from: situation.status(),
                        command: name,
                    }),
                    "{name} in {situation:?}"
                ),
                Expect::Error(error) => assert_eq!(result, Err(error), "{name} in {situation:?}"),
            }
        }
    }

    // --- commands, one of each ------------------------------------------------------------------

    fn receive(channel: ChannelKind, errors: Vec<Issue>) -> DocumentCommand {
        DocumentCommand::Receive {
            document_id: Uuid::from_u128(0xd0c),
            routing: routing(channel),
            document: canonical(DocumentType::Invoice),
            errors,
            warnings: vec![issue("unknown_taxpayer")],
            at: t(0),
        }
    }

    fn record_transformed() -> DocumentCommand {
        DocumentCommand::RecordTransformed {
            series: SERIES.into(),
            number: number(),
            cdc: cdc(DocumentType::Invoice),
            security_code: SECURITY_CODE.into(),
            xml_sha256: sha('a'),
            at: t(2),
        }
    }

    fn record_signed() -> DocumentCommand {
        DocumentCommand::RecordSigned {
            signed_xml_artifact_id: SIGNED_XML,
            signed_at: t(3),
            at: t(3),
        }
    }

    fn record_submitted(attempt: u32, lot: Option<&str>) -> DocumentCommand {
        DocumentCommand::RecordSubmitted {
            attempt,
            lot_id: lot.map(str::to_owned),
            at: t(4),
        }
    }

    fn record_accepted() -> DocumentCommand {
        DocumentCommand::RecordAccepted {
            code: "0260".into(),
            message: "Aprobado".into(),
            protocol: Some("48493617".into()),
            approved_at: t(5),
            at: t(6),
        }
    }

    fn record_rejected() -> DocumentCommand {
        DocumentCommand::RecordRejected {
            code: "1000".into(),
            message: "CDC no corresponde con las informaciones del XML".into(),
            at: t(6),
        }
    }

    fn record_operational_failure() -> DocumentCommand {
        DocumentCommand::RecordOperationalFailure {
            reason: "timeout".into(),
            next_attempt_at: t(6) + TimeDelta::seconds(30),
            at: t(6),
        }
    }

    fn give_up(at: DateTime<Utc>) -> DocumentCommand {
        DocumentCommand::GiveUp {
            reason: "no answer 60 h after signing".into(),
            at,
        }
    }

    fn start_rendering() -> DocumentCommand {
        DocumentCommand::StartRendering {
            series: String::new(),
            number: number(),
            at: t(2),
        }
    }

    fn cancel(reason: &str, at: DateTime<Utc>) -> DocumentCommand {
        DocumentCommand::Cancel {
            reason: reason.into(),
            at,
        }
    }

    fn inutilize(reason: &str, at: DateTime<Utc>) -> DocumentCommand {
        DocumentCommand::Inutilize {
            reason: reason.into(),
            at,
        }
    }

    fn record_cancelled() -> DocumentCommand {
        DocumentCommand::RecordCancelled {
            code: "0600".into(),
            message: "Evento registrado correctamente".into(),
            protocol: Some("777".into()),
            at: t(11),
        }
    }

    fn record_inutilized() -> DocumentCommand {
        DocumentCommand::RecordInutilized {
            code: "0600".into(),
            message: "Evento registrado correctamente".into(),
            protocol: Some("777".into()),
            at: t(11),
        }
    }

    fn record_artifact(artifact_id: Uuid, kind: ArtifactKind, version: u32) -> DocumentCommand {
        let DocumentEvent::ArtifactRecorded {
            content_type,
            sha256,
            size,
            ..
        } = artifact_recorded(artifact_id, kind, version, t(20))
        else {
            unreachable!("artifact_recorded builds an ArtifactRecorded");
        };
        DocumentCommand::RecordArtifact {
            artifact_id,
            kind,
            content_type,
            sha256,
            size,
            version,
            at: t(20),
        }
    }

    fn record_delivery(status: DeliveryStatus, attempt: u32) -> DocumentCommand {
        DocumentCommand::RecordDelivery {
            delivery_id: Uuid::from_u128(400),
            target: DeliveryTarget::Customer,
            channel: DeliveryChannel::Email,
            status,
            attempt,
            detail: None,
            at: t(30),
        }
    }

    fn every_command() -> Vec<DocumentCommand> {
        vec![
            receive(ChannelKind::Sifen, vec![]),
            DocumentCommand::Queue { at: t(1) },
            DocumentCommand::StartTransform { at: t(2) },
            record_transformed(),
            record_signed(),
            record_submitted(1, Some("L1")),
            record_accepted(),
            record_rejected(),
            record_operational_failure(),
            DocumentCommand::RetryNow { at: t(7) },
            DocumentCommand::ResumeSubmission { at: t(7) },
            give_up(t(3) + SUBMISSION_HORIZON),
            start_rendering(),
            DocumentCommand::RecordRendered {
                artifact_id: PRINTABLE,
                at: t(3),
            },
            cancel(REASON, t(10)),
            record_cancelled(),
            DocumentCommand::RecordCancellationRefused {
                code: "4009".into(),
                message: "fuera de plazo".into(),
                at: t(11),
            },
            inutilize(REASON, t(10)),
            record_inutilized(),
            DocumentCommand::RecordInutilizationRefused {
                code: "4065".into(),
                message: "existe un DTE en el rango".into(),
                at: t(11),
            },
            record_artifact(Uuid::from_u128(500), ArtifactKind::ChannelResponse, 1),
            record_delivery(DeliveryStatus::Sent, 1),
            DocumentCommand::RequestPdfRegeneration { at: t(40) },
        ]
    }

    // --- values ---------------------------------------------------------------------------------

    #[test]
    fn the_stream_id_names_tenant_and_document() {
        let tenant = TenantId::from_uuid(Uuid::from_u128(7));
        assert_eq!(
            stream_id(tenant, Uuid::from_u128(8)),
            "document:00000000-0000-0000-0000-000000000007:00000000-0000-0000-0000-000000000008"
        );
    }

    #[test]
    fn statuses_are_the_contracts_fourteen_names() {
        let names: Vec<&str> = DocumentStatus::ALL.iter().map(|s| s.as_str()).collect();
        assert_eq!(
            names,
            vec![
                "received",
                "validation_failed",
                "validated",
                "queued",
                "transforming",
                "signing",
                "submitting",
                "accepted",
                "rejected",
                "retrying",
                "rendering",
                "cancelled",
                "invalidated",
                "failed_terminal"
            ]
        );
        for status in DocumentStatus::ALL {
            assert_eq!(
                serde_json::to_value(status).expect("json"),
                serde_json::json!(status.as_str())
            );
            assert_eq!(status.to_string(), status.as_str());
            assert!(!status.is_terminal() || status.is_final(), "{status}");
        }
        let finals: Vec<&str> = DocumentStatus::ALL
            .iter()
            .filter(|s| s.is_final())
            .map(|s| s.as_str())
            .collect();
        assert_eq!(
            finals,
            vec![
                "validation_failed",
                "accepted",
                "rejected",
                "cancelled",
                "invalidated",
                "failed_terminal"
            ]
        );
        let terminals: Vec<&str> = DocumentStatus::ALL
            .iter()
            .filter(|s| s.is_terminal())
            .map(|s| s.as_str())
            .collect();
        assert_eq!(terminals, vec!["validation_failed", "cancelled", "invalidated"]);
    }

    /// One event of every type, as the catalogue (docs/events.md) shows them.
    pub(crate) fn samples() -> Vec<DocumentEvent> {
        vec![
            received(ChannelKind::Sifen, DocumentType::Invoice),
            validated(),
            validation_failed(),
            queued(),
            transform_started(),
            transformed(DocumentType::Invoice),
            signed(),
            submitted(1),
            accepted(),
            rejected(),
            retry_scheduled(),
            DocumentEvent::DocumentRetryRequested { at: t(7) },
            DocumentEvent::DocumentSubmissionResumed { at: t(7) },
            failed_terminally(),
            rendering_started(),
            rendered(),
            cancellation_requested(),
            DocumentEvent::DocumentCancellationRefused {
                code: "4009".into(),
                message: "m".into(),
                at: t(11),
            },
            cancelled(true),
            inutilization_requested(),
            DocumentEvent::DocumentInutilizationRefused {
                code: "4065".into(),
                message: "m".into(),
                at: t(11),
            },
            invalidated(true),
            artifact_recorded(KUDE, ArtifactKind::Kude, 1, t(20)),
            DocumentEvent::DeliveryRecorded {
                delivery_id: Uuid::from_u128(400),
                target: DeliveryTarget::Issuer,
                channel: DeliveryChannel::Webhook,
                status: DeliveryStatus::Failed,
                attempt: 2,
                detail: Some("HTTP 500".into()),
                at: t(30),
            },
            DocumentEvent::PdfRegenerationRequested {
                kind: ArtifactKind::Kude,
                at: t(40),
            },
            DocumentEvent::DocumentIssuanceRefused {
                code: "numbering_range_exhausted".into(),
                message: "the authorised range 1-500 of timbrado 12345678 is used up".into(),
                field: None,
                at: t(2),
            },
            DocumentEvent::NumberingRangeNearlyExhausted {
                series: SERIES.into(),
                used: 450,
                size: 500,
                at: t(3),
            },
            DocumentEvent::NumberReported {
                report: NumberReport::Issued,
                http_status: 200,
                at: t(50),
            },
        ]
    }

    #[test]
    fn every_event_has_a_stable_type_name_and_version_1() {
        let events = samples();
        let mut names: Vec<String> = events.iter().map(|e| e.event_type()).collect();
        for (event, name) in events.iter().zip(&names) {
            assert!(crate::event::is_valid_event_type(name), "{name}");
            assert_eq!(crate::event::schema_version(event), Some(1), "{name}");
            // The serialized variant is the type name, so the archive reads the same both ways.
            let json = serde_json::to_value(event).expect("json");
            assert!(json.get(name).is_some(), "{json}");
            let back: DocumentEvent = serde_json::from_value(json).expect("round trip");
            assert_eq!(&back, event);
        }
        names.sort();
        names.dedup();
        assert_eq!(names.len(), 28, "one distinct name per event");
    }

    #[test]
    fn every_command_has_a_distinct_name_and_none_but_receive_starts_a_stream() {
        let commands = every_command();
        let mut names: Vec<&str> = commands.iter().map(DocumentCommand::name).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), 23);
        for command in commands.into_iter().skip(1) {
            let name = command.name();
            assert_eq!(run(vec![], command), Err(DocumentError::NotFound), "{name}");
        }
    }

    #[test]
    fn every_situation_of_the_backbone_folds_to_its_status_and_covers_every_status() {
        for situation in Situation::ALL {
            assert_eq!(
                state_after(invoice(situation)).status,
                situation.status(),
                "{situation:?}"
            );
        }
        for status in DocumentStatus::ALL {
            assert!(
                Situation::ALL.iter().any(|s| s.status() == status),
                "no situation reaches {status}"
            );
        }
    }

    #[test]
    fn numbers_and_cdcs_must_have_sifens_shape_and_agree() {
        assert_eq!(number().to_string(), "001-001-0000001");
        assert_eq!(number().check(), Ok(()));
        let with = |f: fn(&mut DocumentNumber)| {
            let mut n = number();
            f(&mut n);
            n.check()
        };
        assert_eq!(
            with(|n| n.timbrado = "1234567".into()),
            Err(malformed("timbrado", "8 digits"))
        );
        assert_eq!(
            with(|n| n.establishment = "000".into()),
            Err(malformed("establishment", "3 digits, 001 to 999"))
        );
        assert_eq!(
            with(|n| n.point = "1".into()),
            Err(malformed("point", "3 digits, 001 to 999"))
        );
        assert_eq!(
            with(|n| n.number = "0000000".into()),
            Err(malformed("number", "7 digits, 0000001 to 9999999"))
        );
        // The manual's own worked example (BRIEF §1.2).
        let manual = DocumentNumber {
            timbrado: "12345678".into(),
            establishment: "001".into(),
            point: "001".into(),
            number: "0014528".into(),
        };
        assert_eq!(
            check_cdc(
                "01444444017001001001452822017012515873260988",
                DocumentType::Invoice,
                &manual,
                "587326098"
            ),
            Ok(())
        );
        let good = cdc(DocumentType::Invoice);
        let check = |cdc: &str, doc_type: DocumentType, code: &str| check_cdc(cdc, doc_type, &number(), code);
        assert_eq!(check(&good, DocumentType::Invoice, SECURITY_CODE), Ok(()));
        let field_of = |r: Result<(), DocumentError>| match r {
            Err(DocumentError::Malformed { field, expected }) => (field, expected),
            other => panic!("{other:?}"),
        };
        assert_eq!(
            field_of(check(&good, DocumentType::Invoice, "000000000")).0,
            "security_code"
        );
        assert_eq!(
            field_of(check(&good[..43], DocumentType::Invoice, SECURITY_CODE)).0,
            "cdc"
        );
        assert!(
            field_of(check(&good, DocumentType::CreditNote, SECURITY_CODE))
                .1
                .contains("iTiDE")
        );
        assert!(
            field_of(check(&good, DocumentType::Invoice, "587326099"))
                .1
                .contains("security code")
        );
        let wrong_dv = format!("{}{}", &good[..43], (modulo11(&good[..43]) + 1) % 10);
        assert!(
            field_of(check(&wrong_dv, DocumentType::Invoice, SECURITY_CODE))
                .1
                .contains("check digit")
        );
        let other_number = DocumentNumber {
            number: "0000002".into(),
            ..number()
        };
        assert!(
            field_of(check_cdc(
                &good,
                DocumentType::Invoice,
                &other_number,
                SECURITY_CODE
            ))
            .1
            .contains("number")
        );
        assert!(
            field_of(check_cdc(&good, DocumentType::Receipt, &number(), SECURITY_CODE))
                .1
                .contains("SIFEN issues")
        );
        // Through the aggregate.
        let bad_cdc = DocumentCommand::RecordTransformed {
            series: SERIES.into(),
            number: number(),
            cdc: wrong_dv,
            security_code: SECURITY_CODE.into(),
            xml_sha256: sha('a'),
            at: t(2),
        };
        assert!(matches!(
            run(invoice(Situation::Transforming), bad_cdc),
            Err(DocumentError::Malformed { field: "cdc", .. })
        ));
        let bad_hash = DocumentCommand::RecordTransformed {
            series: SERIES.into(),
            number: number(),
            cdc: good,
            security_code: SECURITY_CODE.into(),
            xml_sha256: "ABC".into(),
            at: t(2),
        };
        assert_eq!(
            run(invoice(Situation::Transforming), bad_hash),
            Err(malformed("xml_sha256", "64 lower-case hex digits"))
        );
        let bad_number = DocumentCommand::StartRendering {
            series: String::new(),
            number: DocumentNumber {
                number: "12".into(),
                ..number()
            },
            at: t(2),
        };
        assert_eq!(
            run(invoice(Situation::QueuedAutoimpresor), bad_number),
            Err(malformed("number", "7 digits, 0000001 to 9999999"))
        );
    }

    // --- every allowed transition, with its exact events ----------------------------------------

    #[test]
    fn a_valid_document_is_received_and_validated_in_one_command() {
        TestFramework::<Document>::with(())
            .given_no_previous_events()
            .when(receive(ChannelKind::Sifen, vec![]))
            .then_expect_events(vec![
                received(ChannelKind::Sifen, DocumentType::Invoice),
                validated(),
            ]);
    }

    #[test]
    fn a_document_with_errors_is_received_and_fails_validation() {
        TestFramework::<Document>::with(())
            .given_no_previous_events()
            .when(receive(ChannelKind::Sifen, vec![issue("invalid_ruc")]))
            .then_expect_events(vec![
                received(ChannelKind::Sifen, DocumentType::Invoice),
                DocumentEvent::DocumentValidationFailed {
                    errors: vec![issue("invalid_ruc")],
                    warnings: vec![issue("unknown_taxpayer")],
                    at: t(0),
                },
            ]);
    }

    #[test]
    fn a_validated_document_is_queued() {
        TestFramework::<Document>::with(())
            .given(invoice(Situation::Validated))
            .when(DocumentCommand::Queue { at: t(1) })
            .then_expect_events(vec![queued()]);
    }

    #[test]
    fn a_queued_sifen_document_starts_transforming() {
        TestFramework::<Document>::with(())
            .given(invoice(Situation::QueuedSifen))
            .when(DocumentCommand::StartTransform { at: t(2) })
            .then_expect_events(vec![transform_started()]);
    }

    #[test]
    fn a_transformed_document_moves_to_signing_with_its_number_and_cdc() {
        TestFramework::<Document>::with(())
            .given(invoice(Situation::Transforming))
            .when(record_transformed())
            .then_expect_events(vec![transformed(DocumentType::Invoice)]);
    }

    #[test]
    fn a_signed_document_moves_to_submitting_once_its_signed_xml_is_stored() {
        TestFramework::<Document>::with(())
            .given(invoice(Situation::Signing))
            .and(vec![artifact_recorded(
                SIGNED_XML,
                ArtifactKind::SignedXml,
                1,
                t(3),
            )])
            .when(record_signed())
            .then_expect_events(vec![signed()]);
        TestFramework::<Document>::with(())
            .given(invoice(Situation::Signing))
            .when(record_signed())
            .then_expect_error(DocumentError::UnknownArtifact {
                artifact_id: SIGNED_XML,
                kind: ArtifactKind::SignedXml,
            });
        // An artifact of another kind is not a signed XML.
        TestFramework::<Document>::with(())
            .given(invoice(Situation::Signing))
            .and(vec![artifact_recorded(
                SIGNED_XML,
                ArtifactKind::ChannelResponse,
                1,
                t(3),
            )])
            .when(record_signed())
            .then_expect_error(DocumentError::UnknownArtifact {
                artifact_id: SIGNED_XML,
                kind: ArtifactKind::SignedXml,
            });
    }

    #[test]
    fn submissions_are_counted_attempt_by_attempt() {
        TestFramework::<Document>::with(())
            .given(invoice(Situation::Submitting))
            .when(record_submitted(1, Some("L1")))
            .then_expect_events(vec![submitted(1)]);
        // Recorded before sending, then again once SIFEN gives the lot.
        TestFramework::<Document>::with(())
            .given(invoice(Situation::Submitting))
            .and(vec![DocumentEvent::DocumentSubmitted {
                attempt: 1,
                lot_id: None,
                at: t(4),
            }])
            .when(record_submitted(1, Some("L1")))
            .then_expect_events(vec![submitted(1)]);
        // The same record again is nothing; a skipped or older attempt is refused.
        TestFramework::<Document>::with(())
            .given(invoice(Situation::Submitting))
            .and(vec![submitted(1)])
            .when(record_submitted(1, Some("L1")))
            .then_expect_events(vec![]);
        TestFramework::<Document>::with(())
            .given(invoice(Situation::Submitting))
            .and(vec![submitted(1)])
            .when(record_submitted(1, Some("L9")))
            .then_expect_error(DocumentError::AttemptOutOfOrder { expected: 2, got: 1 });
        TestFramework::<Document>::with(())
            .given(invoice(Situation::Submitting))
            .when(record_submitted(2, None))
            .then_expect_error(DocumentError::AttemptOutOfOrder { expected: 1, got: 2 });
        TestFramework::<Document>::with(())
            .given(invoice(Situation::Submitting))
            .when(record_submitted(0, None))
            .then_expect_error(DocumentError::AttemptOutOfOrder { expected: 1, got: 0 });
        // After a failure and a resume, the next attempt is the second.
        let mut events = invoice(Situation::Retrying);
        events.push(DocumentEvent::DocumentSubmissionResumed { at: t(7) });
        TestFramework::<Document>::with(())
            .given(events.clone())
            .when(record_submitted(2, Some("L2")))
            .then_expect_events(vec![DocumentEvent::DocumentSubmitted {
                attempt: 2,
                lot_id: Some("L2".into()),
                at: t(4),
            }]);
        events.push(submitted(2));
        let state = state_after(events);
        assert_eq!((state.attempts, state.failures), (2, 1));
        assert_eq!(state.lot_id.as_deref(), Some("L2"));
    }

    #[test]
    fn sifen_approval_accepts_a_submitting_document() {
        let mut given = invoice(Situation::Submitting);
        given.push(submitted(1));
        TestFramework::<Document>::with(())
            .given(given)
            .when(record_accepted())
            .then_expect_events(vec![accepted()]);
    }

    #[test]
    fn sifen_rejection_rejects_a_submitting_document() {
        TestFramework::<Document>::with(())
            .given(invoice(Situation::Submitting))
            .when(record_rejected())
            .then_expect_events(vec![rejected()]);
    }

    #[test]
    fn an_operational_failure_schedules_a_retry() {
        TestFramework::<Document>::with(())
            .given(invoice(Situation::Submitting))
            .when(record_operational_failure())
            .then_expect_events(vec![retry_scheduled()]);
    }

    #[test]
    fn a_manual_retry_makes_the_next_attempt_immediate_once() {
        TestFramework::<Document>::with(())
            .given(invoice(Situation::Retrying))
            .when(DocumentCommand::RetryNow { at: t(7) })
            .then_expect_events(vec![DocumentEvent::DocumentRetryRequested { at: t(7) }]);
        let mut requested = invoice(Situation::Retrying);
        requested.push(DocumentEvent::DocumentRetryRequested { at: t(7) });
        let state = state_after(requested.clone());
        assert_eq!(state.next_attempt_at, Some(t(7)));
        assert!(state.retry_requested);
        // A second click before the attempt runs is nothing new.
        TestFramework::<Document>::with(())
            .given(requested.clone())
            .when(DocumentCommand::RetryNow { at: t(8) })
            .then_expect_events(vec![]);
        // After the next failure, a manual retry is possible again.
        requested.extend([
            DocumentEvent::DocumentSubmissionResumed { at: t(7) },
            retry_scheduled(),
        ]);
        TestFramework::<Document>::with(())
            .given(requested)
            .when(DocumentCommand::RetryNow { at: t(9) })
            .then_expect_events(vec![DocumentEvent::DocumentRetryRequested { at: t(9) }]);
    }

    #[test]
    fn manual_retry_is_refused_in_every_status_but_retrying() {
        table(
            || DocumentCommand::RetryNow { at: t(7) },
            |s| match s {
                Situation::Retrying => Expect::Events,
                _ => Expect::Refused,
            },
        );
    }

    #[test]
    fn a_retrying_document_resumes_submission() {
        TestFramework::<Document>::with(())
            .given(invoice(Situation::Retrying))
            .when(DocumentCommand::ResumeSubmission { at: t(7) })
            .then_expect_events(vec![DocumentEvent::DocumentSubmissionResumed { at: t(7) }]);
        let mut events = invoice(Situation::Retrying);
        events.push(DocumentEvent::DocumentSubmissionResumed { at: t(7) });
        let state = state_after(events);
        assert_eq!(state.status, DocumentStatus::Submitting);
        assert_eq!(state.next_attempt_at, None);
    }

    #[test]
    fn retrying_is_given_up_from_60_hours_after_signing_on() {
        let horizon = t(3) + SUBMISSION_HORIZON;
        TestFramework::<Document>::with(())
            .given(invoice(Situation::Retrying))
            .when(give_up(horizon))
            .then_expect_events(vec![failed_terminally()]);
        TestFramework::<Document>::with(())
            .given(invoice(Situation::Retrying))
            .when(give_up(horizon - TimeDelta::seconds(1)))
            .then_expect_error(DocumentError::GiveUpTooEarly { not_before: horizon });
        assert_eq!(
            state_after(invoice(Situation::Retrying)).give_up_not_before(),
            Some(horizon)
        );
    }

    #[test]
    fn a_queued_autoimpresor_document_starts_rendering_with_its_number() {
        TestFramework::<Document>::with(())
            .given(invoice(Situation::QueuedAutoimpresor))
            .when(start_rendering())
            .then_expect_events(vec![rendering_started()]);
    }

    #[test]
    fn a_rendered_printable_accepts_an_autoimpresor_document() {
        TestFramework::<Document>::with(())
            .given(invoice(Situation::Rendering))
            .and(vec![artifact_recorded(
                PRINTABLE,
                ArtifactKind::PrintablePdf,
                1,
                t(3),
            )])
            .when(DocumentCommand::RecordRendered {
                artifact_id: PRINTABLE,
                at: t(3),
            })
            .then_expect_events(vec![rendered()]);
        TestFramework::<Document>::with(())
            .given(invoice(Situation::Rendering))
            .when(DocumentCommand::RecordRendered {
                artifact_id: PRINTABLE,
                at: t(3),
            })
            .then_expect_error(DocumentError::UnknownArtifact {
                artifact_id: PRINTABLE,
                kind: ArtifactKind::PrintablePdf,
            });
        let state = state_after(invoice(Situation::AcceptedAutoimpresor));
        assert_eq!(state.approved_at, Some(t(3)));
        assert_eq!(state.rendered_artifact_id, Some(PRINTABLE));
    }

    #[test]
    fn a_document_not_yet_submitted_is_cancelled_locally() {
        for situation in [
            Situation::Received,
            Situation::Validated,
            Situation::QueuedSifen,
            Situation::Transforming,
            Situation::Signing,
            Situation::QueuedAutoimpresor,
            Situation::Rendering,
        ] {
            TestFramework::<Document>::with(())
                .given(invoice(situation))
                .when(cancel(REASON, t(11)))
                .then_expect_events(vec![cancelled(false)]);
        }
        // A number drawn before the cancellation stays on record, unused.
        let mut events = invoice(Situation::Signing);
        events.push(cancelled(false));
        let state = state_after(events);
        assert_eq!(state.number, Some(number()));
        let voiding = state.voiding.expect("voided");
        assert_eq!(
            (voiding.kind, voiding.fiscal),
            (FiscalEventKind::Cancellation, false)
        );
    }

    #[test]
    fn an_accepted_sifen_document_requests_sifens_cancellation() {
        TestFramework::<Document>::with(())
            .given(invoice(Situation::AcceptedSifen))
            .when(cancel(&format!("  {REASON} "), t(10)))
            .then_expect_events(vec![cancellation_requested()]);
        let state = state_after(invoice(Situation::CancellationPending));
        assert_eq!(state.status, DocumentStatus::Accepted);
        assert_eq!(
            state.pending,
            Some(PendingFiscalEvent {
                kind: FiscalEventKind::Cancellation,
                reason: REASON.into(),
                requested_at: t(10),
            })
        );
    }

    #[test]
    fn sifens_registration_cancels_the_document() {
        TestFramework::<Document>::with(())
            .given(invoice(Situation::CancellationPending))
            .when(record_cancelled())
            .then_expect_events(vec![cancelled(true)]);
        let state = state_after(invoice(Situation::CancelledSifen));
        assert_eq!(state.pending, None);
        let voiding = state.voiding.expect("voided");
        assert!(voiding.fiscal);
        assert_eq!(voiding.answer.map(|a| a.code), Some("0600".into()));
    }

    #[test]
    fn sifens_refusal_of_a_cancellation_leaves_the_document_accepted() {
        let refusal = DocumentEvent::DocumentCancellationRefused {
            code: "4009".into(),
            message: "fuera de plazo".into(),
            at: t(11),
        };
        let refuse = || DocumentCommand::RecordCancellationRefused {
            code: "4009".into(),
            message: "fuera de plazo".into(),
            at: t(11),
        };
        TestFramework::<Document>::with(())
            .given(invoice(Situation::CancellationPending))
            .when(refuse())
            .then_expect_events(vec![refusal.clone()]);
        let mut events = invoice(Situation::CancellationPending);
        events.push(refusal);
        let state = state_after(events.clone());
        assert_eq!(
            (state.status, state.pending.clone()),
            (DocumentStatus::Accepted, None)
        );
        assert_eq!(state.last_refusal.map(|r| r.code), Some("4009".into()));
        // Recording the same refusal twice is nothing; a new request may follow.
        TestFramework::<Document>::with(())
            .given(events.clone())
            .when(refuse())
            .then_expect_events(vec![]);
        TestFramework::<Document>::with(())
            .given(events)
            .when(cancel(REASON, t(12)))
            .then_expect_events(vec![DocumentEvent::DocumentCancellationRequested {
                reason: REASON.into(),
                at: t(12),
            }]);
    }

    #[test]
    fn a_sifen_document_requests_inutilization_when_accepted_rejected_or_failed() {
        for situation in [
            Situation::AcceptedSifen,
            Situation::Rejected,
            Situation::FailedTerminal,
        ] {
            TestFramework::<Document>::with(())
                .given(invoice(situation))
                .when(inutilize(REASON, t(10)))
                .then_expect_events(vec![inutilization_requested()]);
        }
    }

    #[test]
    fn sifens_registration_invalidates_the_document() {
        for situation in [
            Situation::AcceptedInutilizationPending,
            Situation::RejectedInutilizationPending,
        ] {
            TestFramework::<Document>::with(())
                .given(invoice(situation))
                .when(record_inutilized())
                .then_expect_events(vec![invalidated(true)]);
        }
        let state = state_after(invoice(Situation::InvalidatedSifen));
        assert_eq!(
            state.voiding.map(|v| (v.kind, v.fiscal)),
            Some((FiscalEventKind::Inutilization, true))
        );
    }

    #[test]
    fn sifens_refusal_of_an_inutilization_leaves_the_status() {
        let refusal = DocumentEvent::DocumentInutilizationRefused {
            code: "4065".into(),
            message: "existe un DTE en el rango".into(),
            at: t(11),
        };
        TestFramework::<Document>::with(())
            .given(invoice(Situation::AcceptedInutilizationPending))
            .when(DocumentCommand::RecordInutilizationRefused {
                code: "4065".into(),
                message: "existe un DTE en el rango".into(),
                at: t(11),
            })
            .then_expect_events(vec![refusal.clone()]);
        let mut events = invoice(Situation::RejectedInutilizationPending);
        events.push(refusal);
        let state = state_after(events.clone());
        assert_eq!((state.status, state.pending), (DocumentStatus::Rejected, None));
        TestFramework::<Document>::with(())
            .given(events)
            .when(DocumentCommand::RecordInutilizationRefused {
                code: "4065".into(),
                message: "existe un DTE en el rango".into(),
                at: t(12),
            })
            .then_expect_events(vec![]);
    }

    fn refusal() -> DocumentCommand {
        DocumentCommand::RefuseIssuance {
            code: "configuration_error".into(),
            message: "the authorised range 1–200 is exhausted".into(),
            field: None,
            at: t(2),
        }
    }

    #[test]
    fn a_queued_sifen_document_whose_de_cannot_be_built_ends_failed_terminal_and_a_sent_one_cannot() {
        let refusal = || DocumentCommand::RefuseIssuance {
            code: "document_build_failed".into(),
            message: "the DE cannot be built: transport.vehicle is required".into(),
            field: Some("sifen".into()),
            at: t(2),
        };
        for situation in [Situation::QueuedSifen, Situation::Transforming] {
            let mut events = invoice(situation);
            let refused = run(events.clone(), refusal()).expect("refused");
            assert!(
                matches!(&refused[..], [DocumentEvent::DocumentIssuanceRefused { field: Some(f), .. }] if f == "sifen"),
                "{refused:?}"
            );
            events.extend(refused);
            let state = state_after(events.clone());
            assert_eq!(
                (state.status, state.number),
                (DocumentStatus::FailedTerminal, None)
            );
            // Repeating it changes nothing.
            assert_eq!(run(events, refusal()).expect("again"), vec![]);
        }
        // Once signed and sent, a document's fate is SIFEN's: the refusal is refused.
        for situation in [Situation::Submitting, Situation::AcceptedSifen] {
            assert!(run(invoice(situation), refusal()).is_err());
        }
    }

    #[test]
    fn a_queued_autoimpresor_document_outside_its_authorization_is_refused_without_a_number() {
        TestFramework::<Document>::with(())
            .given(invoice(Situation::QueuedAutoimpresor))
            .when(refusal())
            .then_expect_events(vec![DocumentEvent::DocumentIssuanceRefused {
                code: "configuration_error".into(),
                message: "the authorised range 1–200 is exhausted".into(),
                field: None,
                at: t(2),
            }]);
        let mut events = invoice(Situation::QueuedAutoimpresor);
        events.extend(run(events.clone(), refusal()).expect("refused"));
        let state = state_after(events.clone());
        assert_eq!(state.status, DocumentStatus::FailedTerminal);
        assert_eq!(state.number, None);
        assert!(
            state
                .issuance_refusal
                .as_deref()
                .is_some_and(|r| r.starts_with("configuration_error"))
        );
        // Repeated: nothing new. A number never drawn cannot be voided.
        assert_eq!(run(events.clone(), refusal()), Ok(vec![]));
        assert!(matches!(
            run(events, inutilize(REASON, t(11))),
            Err(DocumentError::InvalidTransition { .. })
        ));
        // Only a document not yet numbered is refused so (a queued SIFEN one too: its DE may
        // not build).
        for situation in [Situation::Rendering, Situation::AcceptedAutoimpresor] {
            assert!(
                matches!(
                    run(invoice(situation), refusal()),
                    Err(DocumentError::InvalidTransition { .. })
                ),
                "{situation:?}"
            );
        }
    }

    #[test]
    fn the_range_warning_and_reports_belong_to_numbered_autoimpresor_documents() {
        let warn = || DocumentCommand::WarnNumberingRange {
            series: "s".into(),
            used: 180,
            size: 200,
            at: t(2),
        };
        assert!(run(invoice(Situation::QueuedAutoimpresor), warn()).is_err());
        assert_eq!(
            run(invoice(Situation::Rendering), warn()),
            Ok(vec![DocumentEvent::NumberingRangeNearlyExhausted {
                series: "s".into(),
                used: 180,
                size: 200,
                at: t(2),
            }])
        );
        let report = |report| DocumentCommand::RecordNumberReported {
            report,
            http_status: 200,
            at: t(12),
        };
        assert!(run(invoice(Situation::Rendering), report(NumberReport::Issued)).is_err());
        assert!(
            run(
                invoice(Situation::AcceptedAutoimpresor),
                report(NumberReport::Voided)
            )
            .is_err()
        );
        assert!(run(invoice(Situation::AcceptedSifen), report(NumberReport::Issued)).is_err());
        let mut events = invoice(Situation::AcceptedAutoimpresor);
        let reported = run(events.clone(), report(NumberReport::Issued)).expect("reported");
        assert_eq!(reported.len(), 1);
        events.extend(reported);
        assert_eq!(run(events.clone(), report(NumberReport::Issued)), Ok(vec![]));
        assert_eq!(state_after(events).reported, vec![NumberReport::Issued]);
        let voided = invoice(Situation::InvalidatedAutoimpresor);
        assert_eq!(run(voided, report(NumberReport::Voided)).map(|e| e.len()), Ok(1));
    }

    #[test]
    fn an_accepted_autoimpresor_document_is_voided_in_one_step() {
        TestFramework::<Document>::with(())
            .given(invoice(Situation::AcceptedAutoimpresor))
            .when(inutilize(REASON, t(11)))
            .then_expect_events(vec![invalidated(false)]);
    }

    #[test]
    fn an_artifact_is_recorded_in_any_status() {
        for situation in Situation::ALL {
            TestFramework::<Document>::with(())
                .given(invoice(situation))
                .when(record_artifact(KUDE, ArtifactKind::Kude, 1))
                .then_expect_events(vec![artifact_recorded(KUDE, ArtifactKind::Kude, 1, t(20))]);
        }
    }

    #[test]
    fn a_delivery_is_recorded_in_any_status_and_each_attempt_once() {
        let recorded = |status, attempt| DocumentEvent::DeliveryRecorded {
            delivery_id: Uuid::from_u128(400),
            target: DeliveryTarget::Customer,
            channel: DeliveryChannel::Email,
            status,
            attempt,
            detail: None,
            at: t(30),
        };
        for situation in Situation::ALL {
            TestFramework::<Document>::with(())
                .given(invoice(situation))
                .when(record_delivery(DeliveryStatus::Pending, 0))
                .then_expect_events(vec![recorded(DeliveryStatus::Pending, 0)]);
        }
        let mut events = invoice(Situation::AcceptedSifen);
        events.push(recorded(DeliveryStatus::Failed, 1));
        TestFramework::<Document>::with(())
            .given(events.clone())
            .when(record_delivery(DeliveryStatus::Failed, 1))
            .then_expect_events(vec![]);
        TestFramework::<Document>::with(())
            .given(events.clone())
            .when(record_delivery(DeliveryStatus::Sent, 2))
            .then_expect_events(vec![recorded(DeliveryStatus::Sent, 2)]);
        let state = state_after(events);
        let delivery = state.deliveries.get(&Uuid::from_u128(400)).expect("recorded");
        assert_eq!((delivery.status, delivery.attempt), (DeliveryStatus::Failed, 1));
    }

    #[test]
    fn a_document_with_a_printable_gets_a_regeneration_once_per_new_version() {
        let mut events = invoice(Situation::AcceptedSifen);
        events.push(artifact_recorded(KUDE, ArtifactKind::Kude, 1, t(20)));
        let requested = DocumentEvent::PdfRegenerationRequested {
            kind: ArtifactKind::Kude,
            at: t(40),
        };
        TestFramework::<Document>::with(())
            .given(events.clone())
            .when(DocumentCommand::RequestPdfRegeneration { at: t(40) })
            .then_expect_events(vec![requested.clone()]);
        events.push(requested);
        // Until the new version is stored, asking again is nothing new.
        TestFramework::<Document>::with(())
            .given(events.clone())
            .when(DocumentCommand::RequestPdfRegeneration { at: t(41) })
            .then_expect_events(vec![]);
        events.push(artifact_recorded(
            Uuid::from_u128(301),
            ArtifactKind::Kude,
            2,
            t(42),
        ));
        TestFramework::<Document>::with(())
            .given(events.clone())
            .when(DocumentCommand::RequestPdfRegeneration { at: t(43) })
            .then_expect_events(vec![DocumentEvent::PdfRegenerationRequested {
                kind: ArtifactKind::Kude,
                at: t(43),
            }]);
        let state = state_after(events);
        let versions: Vec<u32> = state
            .artifacts
            .iter()
            .filter(|a| a.kind == ArtifactKind::Kude)
            .map(|a| a.version)
            .collect();
        assert_eq!(versions, vec![1, 2], "old versions stay listed");
        assert_eq!(
            state.latest_artifact(ArtifactKind::Kude).map(|a| a.artifact_id),
            Some(Uuid::from_u128(301))
        );
    }

    // --- every command refused where it does not belong ------------------------------------------

    #[test]
    fn receive_is_refused_on_any_existing_stream() {
        table(
            || receive(ChannelKind::Sifen, vec![]),
            |_| Expect::Error(DocumentError::AlreadyExists),
        );
    }

    #[test]
    fn queue_is_refused_but_from_validated() {
        table(
            || DocumentCommand::Queue { at: t(1) },
            |s| match s {
                Situation::Validated => Expect::Events,
                Situation::QueuedSifen | Situation::QueuedAutoimpresor => Expect::Nothing,
                _ => Expect::Refused,
            },
        );
    }

    #[test]
    fn start_transform_is_refused_but_for_a_queued_sifen_document() {
        table(
            || DocumentCommand::StartTransform { at: t(2) },
            |s| match s {
                Situation::QueuedSifen => Expect::Events,
                Situation::Transforming => Expect::Nothing,
                _ => Expect::Refused,
            },
        );
    }

    #[test]
    fn record_transformed_is_refused_but_in_transforming() {
        table(record_transformed, |s| match s {
            Situation::Transforming => Expect::Events,
            Situation::Signing => Expect::Nothing,
            _ => Expect::Refused,
        });
        // Another CDC once one is recorded is not a repeat.
        let mut other = record_transformed();
        if let DocumentCommand::RecordTransformed { number, .. } = &mut other {
            number.number = "0000002".into();
        }
        assert_eq!(
            run(invoice(Situation::Signing), other),
            Err(DocumentError::InvalidTransition {
                from: DocumentStatus::Signing,
                command: "record_transformed"
            })
        );
    }

    #[test]
    fn record_signed_is_refused_but_in_signing() {
        // `Signing` lacks the stored signed XML in the backbone; it is checked apart above.
        table(record_signed, |s| match s {
            Situation::Signing => Expect::Error(DocumentError::UnknownArtifact {
                artifact_id: SIGNED_XML,
                kind: ArtifactKind::SignedXml,
            }),
            Situation::Submitting => Expect::Nothing,
            _ => Expect::Refused,
        });
    }

    #[test]
    fn record_submitted_is_refused_but_in_submitting() {
        table(
            || record_submitted(1, Some("L1")),
            |s| match s {
                Situation::Submitting => Expect::Events,
                _ => Expect::Refused,
            },
        );
    }

    #[test]
    fn record_accepted_is_refused_but_in_submitting() {
        table(record_accepted, |s| match s {
            Situation::Submitting => Expect::Events,
            Situation::AcceptedSifen
            | Situation::CancellationPending
            | Situation::AcceptedInutilizationPending => Expect::Nothing,
            _ => Expect::Refused,
        });
    }

    #[test]
    fn record_rejected_is_refused_but_in_submitting() {
        table(record_rejected, |s| match s {
            Situation::Submitting => Expect::Events,
            Situation::Rejected | Situation::RejectedInutilizationPending => Expect::Nothing,
            _ => Expect::Refused,
        });
    }

    #[test]
    fn record_operational_failure_is_refused_but_in_submitting() {
        table(record_operational_failure, |s| match s {
            Situation::Submitting => Expect::Events,
            Situation::Retrying => Expect::Nothing,
            _ => Expect::Refused,
        });
    }

    #[test]
    fn resume_submission_is_refused_but_in_retrying() {
        table(
            || DocumentCommand::ResumeSubmission { at: t(7) },
            |s| match s {
                Situation::Retrying => Expect::Events,
                Situation::Submitting => Expect::Nothing,
                _ => Expect::Refused,
            },
        );
    }

    #[test]
    fn give_up_is_refused_but_in_retrying() {
        table(
            || give_up(t(3) + SUBMISSION_HORIZON),
            |s| match s {
                Situation::Retrying => Expect::Events,
                Situation::FailedTerminal => Expect::Nothing,
                _ => Expect::Refused,
            },
        );
    }

    #[test]
    fn start_rendering_is_refused_but_for_a_queued_autoimpresor_document() {
        table(start_rendering, |s| match s {
            Situation::QueuedAutoimpresor => Expect::Events,
            Situation::Rendering => Expect::Nothing,
            _ => Expect::Refused,
        });
    }

    #[test]
    fn record_rendered_is_refused_but_in_rendering() {
        // `Rendering` lacks the stored printable in the backbone; it is checked apart above.
        table(
            || DocumentCommand::RecordRendered {
                artifact_id: PRINTABLE,
                at: t(3),
            },
            |s| match s {
                Situation::Rendering => Expect::Error(DocumentError::UnknownArtifact {
                    artifact_id: PRINTABLE,
                    kind: ArtifactKind::PrintablePdf,
                }),
                Situation::AcceptedAutoimpresor => Expect::Nothing,
                _ => Expect::Refused,
            },
        );
    }

    #[test]
    fn cancel_is_refused_once_submitted_unless_accepted_on_sifen() {
        table(
            || cancel(REASON, t(10)),
            |s| match s {
                Situation::Received
                | Situation::Validated
                | Situation::QueuedSifen
                | Situation::Transforming
                | Situation::Signing
                | Situation::QueuedAutoimpresor
                | Situation::Rendering
                | Situation::AcceptedSifen => Expect::Events,
                Situation::CancellationPending | Situation::CancelledSifen | Situation::CancelledLocally => {
                    Expect::Nothing
                }
                Situation::AcceptedInutilizationPending => {
                    Expect::Error(DocumentError::FiscalEventPending(FiscalEventKind::Inutilization))
                }
                // validation_failed, submitting, retrying, failed_terminal, rejected,
                // invalidated, and an accepted autoimpresor document (voided by inutilize).
                _ => Expect::Refused,
            },
        );
    }

    #[test]
    fn record_cancelled_is_refused_without_a_pending_cancellation() {
        table(record_cancelled, |s| match s {
            Situation::CancellationPending => Expect::Events,
            Situation::CancelledSifen | Situation::CancelledLocally => Expect::Nothing,
            _ => Expect::Refused,
        });
    }

    #[test]
    fn record_cancellation_refused_is_refused_without_a_pending_cancellation() {
        table(
            || DocumentCommand::RecordCancellationRefused {
                code: "4009".into(),
                message: "fuera de plazo".into(),
                at: t(11),
            },
            |s| match s {
                Situation::CancellationPending => Expect::Events,
                _ => Expect::Refused,
            },
        );
    }

    #[test]
    fn inutilize_is_refused_but_when_accepted_rejected_or_failed() {
        table(
            || inutilize(REASON, t(10)),
            |s| match s {
                Situation::AcceptedSifen
                | Situation::Rejected
                | Situation::FailedTerminal
                | Situation::AcceptedAutoimpresor => Expect::Events,
                Situation::AcceptedInutilizationPending
                | Situation::RejectedInutilizationPending
                | Situation::InvalidatedSifen
                | Situation::InvalidatedAutoimpresor => Expect::Nothing,
                Situation::CancellationPending => {
                    Expect::Error(DocumentError::FiscalEventPending(FiscalEventKind::Cancellation))
                }
                _ => Expect::Refused,
            },
        );
    }

    #[test]
    fn record_inutilized_is_refused_without_a_pending_inutilization() {
        table(record_inutilized, |s| match s {
            Situation::AcceptedInutilizationPending | Situation::RejectedInutilizationPending => {
                Expect::Events
            }
            Situation::InvalidatedSifen | Situation::InvalidatedAutoimpresor => Expect::Nothing,
            _ => Expect::Refused,
        });
    }

    #[test]
    fn record_inutilization_refused_is_refused_without_a_pending_inutilization() {
        table(
            || DocumentCommand::RecordInutilizationRefused {
                code: "4065".into(),
                message: "existe un DTE en el rango".into(),
                at: t(11),
            },
            |s| match s {
                Situation::AcceptedInutilizationPending | Situation::RejectedInutilizationPending => {
                    Expect::Events
                }
                _ => Expect::Refused,
            },
        );
    }

    #[test]
    fn record_artifact_and_record_delivery_are_never_refused_by_status() {
        table(
            || record_artifact(Uuid::from_u128(500), ArtifactKind::ChannelResponse, 1),
            |_| Expect::Events,
        );
        table(|| record_delivery(DeliveryStatus::Sent, 1), |_| Expect::Events);
    }

    #[test]
    fn pdf_regeneration_is_refused_without_a_printable_and_allowed_with_one() {
        table(
            || DocumentCommand::RequestPdfRegeneration { at: t(40) },
            |s| match s {
                Situation::AcceptedAutoimpresor | Situation::InvalidatedAutoimpresor => Expect::Events,
                _ => Expect::Error(DocumentError::NoPrintable),
            },
        );
        for situation in Situation::ALL {
            let mut events = invoice(situation);
            events.push(artifact_recorded(KUDE, ArtifactKind::Kude, 1, t(20)));
            assert_eq!(
                run(events, DocumentCommand::RequestPdfRegeneration { at: t(40) }),
                Ok(vec![DocumentEvent::PdfRegenerationRequested {
                    kind: ArtifactKind::Kude,
                    at: t(40),
                }]),
                "{situation:?}"
            );
        }
    }

    // --- rules -------------------------------------------------------------------------------------

    #[test]
    fn a_document_is_received_once() {
        let mut state = Document::default();
        assert_eq!(state.state(), None);
        for event in invoice(Situation::Validated) {
            state.apply(event);
        }
        assert_eq!(
            state.decide(receive(ChannelKind::Sifen, vec![])),
            Err(DocumentError::AlreadyExists)
        );
        assert_eq!(
            run(
                invoice(Situation::ValidationFailed),
                receive(ChannelKind::Sifen, vec![])
            ),
            Err(DocumentError::AlreadyExists)
        );
    }

    /// Cancel at `approved_at + offset` for a type.
    fn cancel_after_approval(doc_type: DocumentType, offset: TimeDelta) -> Decision {
        let approved_at = t(5);
        run(
            history(Situation::AcceptedSifen, doc_type),
            cancel(REASON, approved_at + offset),
        )
    }

    #[test]
    fn an_invoice_may_be_cancelled_up_to_exactly_48_hours_after_approval() {
        let deadline = t(5) + TimeDelta::hours(48);
        assert_eq!(
            cancel_after_approval(DocumentType::Invoice, TimeDelta::hours(48)),
            Ok(vec![DocumentEvent::DocumentCancellationRequested {
                reason: REASON.into(),
                at: deadline,
            }])
        );
        assert_eq!(
            cancel_after_approval(
                DocumentType::Invoice,
                TimeDelta::hours(48) + TimeDelta::seconds(1)
            ),
            Err(DocumentError::CancellationWindowClosed { deadline })
        );
        // The window counts from SIFEN's approval, not from when kuatia recorded it (t(6)).
        assert_eq!(
            state_after(invoice(Situation::AcceptedSifen)).cancellation_deadline(),
            Some(deadline)
        );
    }

    #[test]
    fn an_autofactura_has_the_invoices_48_hour_window() {
        assert!(cancel_after_approval(DocumentType::Autofactura, TimeDelta::hours(48)).is_ok());
        assert_eq!(
            cancel_after_approval(
                DocumentType::Autofactura,
                TimeDelta::hours(48) + TimeDelta::seconds(1)
            ),
            Err(DocumentError::CancellationWindowClosed {
                deadline: t(5) + TimeDelta::hours(48)
            })
        );
    }

    #[test]
    fn credit_notes_and_the_other_types_have_168_hours() {
        for doc_type in [
            DocumentType::CreditNote,
            DocumentType::DebitNote,
            DocumentType::Remision,
        ] {
            assert!(
                cancel_after_approval(doc_type, TimeDelta::hours(100)).is_ok(),
                "{doc_type:?} after 100 h"
            );
            assert!(
                cancel_after_approval(doc_type, TimeDelta::hours(168)).is_ok(),
                "{doc_type:?} at 168 h"
            );
            assert_eq!(
                cancel_after_approval(doc_type, TimeDelta::hours(168) + TimeDelta::seconds(1)),
                Err(DocumentError::CancellationWindowClosed {
                    deadline: t(5) + TimeDelta::hours(168)
                }),
                "{doc_type:?}"
            );
        }
    }

    #[test]
    fn a_reason_has_5_to_500_characters_once_trimmed() {
        let ok = |reason: &str| run(invoice(Situation::QueuedSifen), cancel(reason, t(11)));
        assert_eq!(ok("Nope"), Err(DocumentError::ReasonLength { chars: 4 }));
        assert_eq!(ok("   Nope   "), Err(DocumentError::ReasonLength { chars: 4 }));
        assert_eq!(ok(""), Err(DocumentError::ReasonLength { chars: 0 }));
        assert!(ok("Error").is_ok());
        assert!(ok(&"ñ".repeat(500)).is_ok(), "characters, not bytes");
        assert_eq!(
            ok(&"a".repeat(501)),
            Err(DocumentError::ReasonLength { chars: 501 })
        );
        // The same rule for SIFEN's cancelación and for inutilize.
        assert_eq!(
            run(invoice(Situation::AcceptedSifen), cancel("Nope", t(10))),
            Err(DocumentError::ReasonLength { chars: 4 })
        );
        assert_eq!(
            run(invoice(Situation::Rejected), inutilize("x", t(10))),
            Err(DocumentError::ReasonLength { chars: 1 })
        );
        assert_eq!(
            run(
                invoice(Situation::AcceptedAutoimpresor),
                inutilize(&"a".repeat(501), t(10))
            ),
            Err(DocumentError::ReasonLength { chars: 501 })
        );
    }

    #[test]
    fn a_pending_cancellation_survives_a_crash_and_is_resolved_later() {
        // The API recorded the request, called SIFEN and died before recording the answer.
        let events = invoice(Situation::CancellationPending);
        let state = state_after(events.clone());
        assert_eq!(
            state.pending.as_ref().map(|p| p.kind),
            Some(FiscalEventKind::Cancellation)
        );
        // The caller asks again (even after the window): no new event, the call is driven again.
        TestFramework::<Document>::with(())
            .given(events.clone())
            .when(cancel(REASON, t(5) + TimeDelta::hours(72)))
            .then_expect_events(vec![]);
        // Another SIFEN event must wait.
        TestFramework::<Document>::with(())
            .given(events.clone())
            .when(inutilize(REASON, t(12)))
            .then_expect_error(DocumentError::FiscalEventPending(FiscalEventKind::Cancellation));
        // The reconciler records SIFEN's answer; recording it twice is harmless.
        TestFramework::<Document>::with(())
            .given(events.clone())
            .when(record_cancelled())
            .then_expect_events(vec![cancelled(true)]);
        TestFramework::<Document>::with(())
            .given(invoice(Situation::CancelledSifen))
            .when(record_cancelled())
            .then_expect_events(vec![]);
    }

    #[test]
    fn artifact_versions_increase_by_one_per_kind() {
        let mut events = invoice(Situation::AcceptedSifen);
        // signed_xml v1 is in the history; the next signed_xml is v2.
        TestFramework::<Document>::with(())
            .given(events.clone())
            .when(record_artifact(Uuid::from_u128(101), ArtifactKind::SignedXml, 1))
            .then_expect_error(DocumentError::ArtifactVersion {
                kind: ArtifactKind::SignedXml,
                expected: 2,
                got: 1,
            });
        // Another kind starts at 1, and cannot skip.
        TestFramework::<Document>::with(())
            .given(events.clone())
            .when(record_artifact(KUDE, ArtifactKind::Kude, 2))
            .then_expect_error(DocumentError::ArtifactVersion {
                kind: ArtifactKind::Kude,
                expected: 1,
                got: 2,
            });
        events.push(artifact_recorded(KUDE, ArtifactKind::Kude, 1, t(20)));
        TestFramework::<Document>::with(())
            .given(events.clone())
            .when(record_artifact(Uuid::from_u128(301), ArtifactKind::Kude, 1))
            .then_expect_error(DocumentError::ArtifactVersion {
                kind: ArtifactKind::Kude,
                expected: 2,
                got: 1,
            });
        TestFramework::<Document>::with(())
            .given(events.clone())
            .when(record_artifact(Uuid::from_u128(301), ArtifactKind::Kude, 3))
            .then_expect_error(DocumentError::ArtifactVersion {
                kind: ArtifactKind::Kude,
                expected: 2,
                got: 3,
            });
        TestFramework::<Document>::with(())
            .given(events.clone())
            .when(record_artifact(Uuid::from_u128(301), ArtifactKind::Kude, 2))
            .then_expect_events(vec![DocumentEvent::ArtifactRecorded {
                artifact_id: Uuid::from_u128(301),
                kind: ArtifactKind::Kude,
                content_type: "application/pdf".into(),
                sha256: sha('c'),
                size: 4096,
                version: 2,
                at: t(20),
            }]);
        // The same artifact recorded again (a retried job) is nothing.
        TestFramework::<Document>::with(())
            .given(events.clone())
            .when(record_artifact(KUDE, ArtifactKind::Kude, 1))
            .then_expect_events(vec![]);
        // Its hash and type are checked.
        let mut bad = record_artifact(Uuid::from_u128(302), ArtifactKind::Kude, 2);
        if let DocumentCommand::RecordArtifact { sha256, .. } = &mut bad {
            *sha256 = sha('C');
        }
        assert_eq!(
            run(events.clone(), bad),
            Err(malformed("sha256", "64 lower-case hex digits"))
        );
        let mut bad = record_artifact(Uuid::from_u128(302), ArtifactKind::Kude, 2);
        if let DocumentCommand::RecordArtifact { content_type, .. } = &mut bad {
            *content_type = " ".into();
        }
        assert_eq!(run(events, bad), Err(malformed("content_type", "a MIME type")));
    }

    #[test]
    fn repeating_a_pipeline_step_is_harmless_but_a_different_fact_is_refused() {
        // Accepted twice with the same answer: nothing; with another answer: refused.
        let mut other = record_accepted();
        if let DocumentCommand::RecordAccepted { protocol, .. } = &mut other {
            *protocol = Some("1".into());
        }
        assert_eq!(
            run(invoice(Situation::AcceptedSifen), other),
            Err(DocumentError::InvalidTransition {
                from: DocumentStatus::Accepted,
                command: "record_accepted"
            })
        );
        let other_failure = DocumentCommand::RecordOperationalFailure {
            reason: "HTTP 503".into(),
            next_attempt_at: t(9),
            at: t(9),
        };
        assert_eq!(
            run(invoice(Situation::Retrying), other_failure),
            Err(DocumentError::InvalidTransition {
                from: DocumentStatus::Retrying,
                command: "record_operational_failure"
            })
        );
        let other_number = DocumentCommand::StartRendering {
            series: String::new(),
            number: DocumentNumber {
                number: "0000002".into(),
                ..number()
            },
            at: t(2),
        };
        assert_eq!(
            run(invoice(Situation::Rendering), other_number),
            Err(DocumentError::InvalidTransition {
                from: DocumentStatus::Rendering,
                command: "start_rendering"
            })
        );
    }

    #[test]
    fn the_state_tells_readers_what_happened() {
        let mut events = invoice(Situation::AcceptedSifen);
        events.push(artifact_recorded(KUDE, ArtifactKind::Kude, 1, t(20)));
        let state = state_after(events);
        assert_eq!(state.document_id, Uuid::from_u128(0xd0c));
        assert_eq!(state.status, DocumentStatus::Accepted);
        assert_eq!(state.channel(), ChannelKind::Sifen);
        assert_eq!(state.doc_type(), DocumentType::Invoice);
        assert_eq!(state.received_at, t(0));
        assert_eq!(state.updated_at, t(20));
        assert_eq!(state.warnings, vec![issue("unknown_taxpayer")]);
        assert_eq!(
            state.number.as_ref().map(ToString::to_string),
            Some("001-001-0000001".into())
        );
        assert_eq!(state.cdc, Some(cdc(DocumentType::Invoice)));
        assert_eq!(state.security_code.as_deref(), Some(SECURITY_CODE));
        assert_eq!(state.signed_at, Some(t(3)));
        assert_eq!(state.signed_xml_artifact_id, Some(SIGNED_XML));
        assert_eq!((state.attempts, state.lot_id.as_deref()), (1, Some("L1")));
        assert_eq!(state.approved_at, Some(t(5)));
        assert_eq!(
            state.answer,
            Some(SifenAnswer {
                code: "0260".into(),
                message: "Aprobado".into(),
                protocol: Some("48493617".into()),
            })
        );
        assert_eq!(state.next_artifact_version(ArtifactKind::SignedXml), 2);
        assert_eq!(state.next_artifact_version(ArtifactKind::Kude), 2);
        assert_eq!(state.next_artifact_version(ArtifactKind::ChannelResponse), 1);
        assert_eq!(state.printable_kind(), Some(ArtifactKind::Kude));
        let retrying = state_after(invoice(Situation::Retrying));
        assert_eq!(retrying.next_attempt_at, Some(t(6) + TimeDelta::seconds(30)));
        assert_eq!(retrying.last_failure.as_deref(), Some("timeout"));
        let failed = state_after(invoice(Situation::ValidationFailed));
        assert_eq!(failed.errors, vec![issue("invalid_ruc")]);
        // The aggregate's state survives a JSON round trip (snapshots, the `state` column).
        let mut document = Document::default();
        for event in invoice(Situation::CancelledSifen) {
            document.apply(event);
        }
        let json = serde_json::to_string(&document).expect("json");
        let back: Document = serde_json::from_str(&json).expect("parse");
        assert_eq!(back, document);
    }

    #[test]
    fn events_name_the_status_they_lead_to() {
        for situation in Situation::ALL {
            let mut status = None;
            for event in invoice(situation) {
                status = event.resulting_status().or(status);
            }
            assert_eq!(status, Some(situation.status()), "{situation:?}");
        }
    }
}
