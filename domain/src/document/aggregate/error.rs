//! Why a command is refused: [`DocumentError`], each refusal with what the API answers.

use chrono::{DateTime, Utc};
use uuid::Uuid;

use super::command::ArtifactKind;
use super::state::{DocumentStatus, FiscalEventKind};

/// Refusals. Meant to map to HTTP as: [`Self::NotFound`] and [`Self::NoSuchLink`] 404,
/// [`Self::ReasonLength`] and
/// [`Self::TooLong`] 400 `validation_error`, every other one 409 `conflict_error` ([`Self::Malformed`] comes from a
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
        /// The refused command ([`DocumentCommand::name`](super::DocumentCommand::name)).
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
    /// A delivery by hand's recipient or note is longer than its limit (400 `validation_error`).
    #[error("`{field}` has at most {max} characters, this one has {chars}")]
    TooLong {
        /// Which field.
        field: &'static str,
        /// Its limit.
        max: usize,
        /// Characters of the trimmed text.
        chars: usize,
    },
    /// No public link of this id on the document (404).
    #[error("no such public link")]
    NoSuchLink,
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

pub(super) fn malformed(field: &'static str, expected: &'static str) -> DocumentError {
    DocumentError::Malformed { field, expected }
}
