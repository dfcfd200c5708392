//! What callers ask of a document: [`DocumentCommand`], and the values commands carry (a
//! document's number, artifact kinds, delivery targets and outcomes, number reports).

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::error::{DocumentError, malformed};
use crate::document::canonical::{CanonicalDocument, DeliveryChannel};
use crate::document::issues::Issue;
use crate::document::routing::Routing;

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
    /// `POST /deliveries`: the issuer delivered the document by hand (printed, by their own email
    /// or WhatsApp, in person). Settles every delivery of `target` waiting for the issuer's hand.
    DeliverByHand {
        /// For whom.
        target: DeliveryTarget,
        /// How.
        channel: HandChannel,
        /// To whom, as the issuer writes it (a name, an address, a phone).
        recipient: Option<String>,
        /// The issuer's note.
        note: Option<String>,
        /// The mail server's answer when the service emailed the document for the issuer.
        sent: Option<String>,
        /// When.
        at: DateTime<Utc>,
    },
    /// `POST /public-links`: a long-lived link to the document's printable for its customer.
    /// Only the SHA-256 of the link's token is kept: the token itself is shown once.
    CreatePublicLink {
        /// The link's id.
        link_id: Uuid,
        /// SHA-256 (hex) of the token in the link's URL.
        token_sha256: String,
        /// When the link stops working.
        expires_at: DateTime<Utc>,
        /// When.
        at: DateTime<Utc>,
    },
    /// `DELETE /public-links/{id}`: the link stops working now.
    RevokePublicLink {
        /// The link's id.
        link_id: Uuid,
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
            Self::DeliverByHand { .. } => "deliver_by_hand",
            Self::CreatePublicLink { .. } => "create_public_link",
            Self::RevokePublicLink { .. } => "revoke_public_link",
            Self::RequestPdfRegeneration { .. } => "regenerate_pdf",
        }
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

pub(super) fn digits(text: &str, len: usize) -> bool {
    text.len() == len && text.bytes().all(|b| b.is_ascii_digit())
}

pub(super) fn not_all_zero(text: &str) -> bool {
    text.bytes().any(|b| b != b'0')
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

/// Kinds of artifact (docs/artifacts.md).
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

/// Who a delivery is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum DeliveryTarget {
    /// The buyer.
    Customer,
    /// The issuer.
    Issuer,
}

/// How the issuer delivered a document by hand.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum HandChannel {
    /// The printed KuDE (or printable), handed or posted.
    Printed,
    /// From the issuer's own mailbox, or the service's mail server from the console.
    Email,
    /// A WhatsApp message with the document's link.
    Whatsapp,
    /// In person, on a screen or on paper.
    InPerson,
    /// Anything else (the note says what).
    Other,
}

impl HandChannel {
    /// Its name in the API.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Printed => "printed",
            Self::Email => "email",
            Self::Whatsapp => "whatsapp",
            Self::InPerson => "in_person",
            Self::Other => "other",
        }
    }
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

#[cfg(test)]
mod tests {
    use super::super::test_support::*;
    use super::*;

    #[test]
    fn every_command_has_a_distinct_name_and_none_but_receive_starts_a_stream() {
        let commands = every_command();
        let mut names: Vec<&str> = commands.iter().map(DocumentCommand::name).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), 26);
        for command in commands.into_iter().skip(1) {
            let name = command.name();
            assert_eq!(run(vec![], command), Err(DocumentError::NotFound), "{name}");
        }
    }
}
