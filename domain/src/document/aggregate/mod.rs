//! The Document aggregate: the life of a sales document, from its receipt to its acceptance,
//! rejection, cancellation or inutilización, as events on one stream per document,
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
//! # Files
//!
//! - `command.rs`: [`DocumentCommand`] and the values commands carry ([`DocumentNumber`],
//!   [`ArtifactKind`], [`DeliveryTarget`], [`DeliveryStatus`], [`NumberReport`]).
//! - `event.rs`: [`DocumentEvent`] and [`stream_id`]; the event catalogue (docs/events.md) reads
//!   the variants' docs from this file.
//! - `state.rs`: [`DocumentState`], [`DocumentStatus`], the values the state keeps, and the fold
//!   of events into the state ([`Document`]'s `apply`).
//! - `decide.rs`: [`Document::decide`], every rule, with the limits it applies
//!   ([`SUBMISSION_HORIZON`], [`REASON_CHARS`], [`cancellation_window`]).
//! - `error.rs`: [`DocumentError`], the refusals.
//! - `test_support.rs` (tests only): the fixtures the tests share; `tests/` holds the tests of
//!   `decide.rs` (transitions, refusals, rules), the other files test themselves.
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
//! | submitting or retrying, 60 h after signing | `GiveUp` | failed_terminal | `DocumentFailedTerminally` |
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
//! | accepted | `DeliverByHand` | unchanged; the deliveries of its target waiting for the issuer's hand are `sent` | `DeliveredByHand` |
//! | accepted | `CreatePublicLink` | unchanged | `PublicLinkCreated` |
//! | any, the link made | `RevokePublicLink` | unchanged | `PublicLinkRevoked` |
//! | any, with a printable | `RequestPdfRegeneration` | unchanged | `PdfRegenerationRequested` |
//!
//! Anything else is refused with [`DocumentError::InvalidTransition`], which the API answers with
//! 409 `conflict_error`. A command whose effect already holds (a job run twice, a second click on
//! cancel) is no event rather than an error (repeating a command is harmless): `Queue` in
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
//! - Windows: 48 h for invoices *and autofacturas*, 168 h for the rest. SIFEN's manual gives
//!   autofacturas 168 h; kuatia keeps the stricter 48 h, which never sends a request SIFEN would
//!   refuse for lateness. One function, [`cancellation_window`].
//! - Local cancellation ("not yet submitted") is allowed in received, validated, queued,
//!   transforming, signing and rendering; not in submitting or retrying (SIFEN may hold the
//!   document), not in validation_failed (terminal). A number already drawn (signing, rendering)
//!   stays in the state, unused, so numbering can account for the gap.
//! - An accepted autoimpresor document is not cancelled: it is voided by `Inutilize` (the printed
//!   number is voided and reported), in one step since no authority answers.
//! - `Inutilize` of an accepted SIFEN document is allowed, as the contract says; SIFEN refuses to
//!   inutilize an approved number (4065), which comes back as `DocumentInutilizationRefused`.
//! - `GiveUp` is refused before 60 h after signing ([`SUBMISSION_HORIZON`]): the deadline is a
//!   domain rule, so it lives here; the retry schedule itself is the process manager's. Retries
//!   (automatic or `RetryNow`) are not limited by the aggregate.
//! - A reason (cancel, inutilize) is trimmed and must have 5 to 500 characters (SIFEN `mOtEve`),
//!   for local cancellations too: one rule, and the reason goes into the timeline.
//! - `RecordSigned` and `RecordRendered` refer to an artifact recorded before (`RecordArtifact`),
//!   so a document cannot reach `submitting` before its signed XML is stored (the signed XML is
//!   persisted before the first send).
//! - Artifact versions are per kind and consecutive from 1 (the next must be exactly one more).
//! - `RecordSubmitted` counts attempts: the next attempt is `attempts + 1`; the same attempt may
//!   be recorded again to add the lot id SIFEN gave it (record before sending, then with the lot).

mod command;
mod decide;
mod error;
mod event;
mod state;

pub use command::{
    ArtifactKind, DeliveryStatus, DeliveryTarget, DocumentCommand, DocumentNumber, HandChannel, NumberReport,
};
pub use decide::{
    HAND_NOTE_CHARS, HAND_RECIPIENT_CHARS, REASON_CHARS, SUBMISSION_HORIZON, cancellation_window,
};
pub use error::DocumentError;
pub use event::{DocumentEvent, document_of, stream_id};
pub use state::{
    Artifact, DeliveryState, Document, DocumentState, DocumentStatus, FiscalEventKind, FiscalRefusal,
    HandDelivery, PendingFiscalEvent, PublicLink, SifenAnswer, Voiding,
};

#[cfg(test)]
pub(crate) mod test_support;

/// The rules of [`Document::decide`], command by command.
#[cfg(test)]
mod tests {
    mod refusals;
    mod rules;
    mod transitions;
}
