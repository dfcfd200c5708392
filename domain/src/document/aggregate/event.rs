//! What happened to a document: [`DocumentEvent`], on one stream per document ([`stream_id`]).

use chrono::{DateTime, Utc};
use cqrs_es::DomainEvent;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::command::{
    ArtifactKind, DeliveryStatus, DeliveryTarget, DocumentNumber, HandChannel, NumberReport,
};
use super::state::DocumentStatus;
use crate::document::canonical::{CanonicalDocument, DeliveryChannel};
use crate::document::issues::Issue;
use crate::document::routing::Routing;
use crate::tenancy::TenantId;

/// The stream id of a document.
pub fn stream_id(tenant: TenantId, id: Uuid) -> String {
    format!("document:{tenant}:{id}")
}

/// The document a document stream's id names (`document:<tenant>:<uuid>`); `None` for any other.
pub fn document_of(stream_id: &str) -> Option<Uuid> {
    let mut parts = stream_id.splitn(3, ':');
    match (parts.next(), parts.next(), parts.next()) {
        (Some("document"), Some(_tenant), Some(id)) => id.parse().ok(),
        _ => None,
    }
}

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
    /// The issuer delivered the document by hand; the deliveries it settles (those of `target`
    /// waiting for the issuer's hand) are `sent` from now on.
    DeliveredByHand {
        /// The deliveries this settles (none when no delivery was waiting).
        settled: Vec<Uuid>,
        /// For whom.
        target: DeliveryTarget,
        /// How.
        channel: HandChannel,
        /// To whom, as the issuer wrote it.
        recipient: Option<String>,
        /// The issuer's note.
        note: Option<String>,
        /// The mail server's answer when the service emailed the document itself for the issuer
        /// (`send`); none when the issuer only recorded a delivery made elsewhere.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        sent: Option<String>,
        /// When.
        at: DateTime<Utc>,
    },
    /// A long-lived link to the document's printable was made for its customer (only the SHA-256
    /// of its token is kept).
    PublicLinkCreated {
        /// The link's id.
        link_id: Uuid,
        /// SHA-256 (hex) of the token in the link's URL.
        token_sha256: String,
        /// When the link stops working.
        expires_at: DateTime<Utc>,
        /// When.
        at: DateTime<Utc>,
    },
    /// A public link was revoked: it stops working.
    PublicLinkRevoked {
        /// The link's id.
        link_id: Uuid,
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
            | Self::DeliveredByHand { at, .. }
            | Self::PublicLinkCreated { at, .. }
            | Self::PublicLinkRevoked { at, .. }
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
            | Self::DeliveredByHand { .. }
            | Self::PublicLinkCreated { .. }
            | Self::PublicLinkRevoked { .. }
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
            Self::DeliveredByHand { .. } => "DeliveredByHand",
            Self::PublicLinkCreated { .. } => "PublicLinkCreated",
            Self::PublicLinkRevoked { .. } => "PublicLinkRevoked",
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

#[cfg(test)]
mod tests {
    use super::super::test_support::*;
    use super::*;

    #[test]
    fn the_stream_id_names_tenant_and_document() {
        let tenant = TenantId::from_uuid(Uuid::from_u128(7));
        assert_eq!(
            stream_id(tenant, Uuid::from_u128(8)),
            "document:00000000-0000-0000-0000-000000000007:00000000-0000-0000-0000-000000000008"
        );
    }

    #[test]
    fn a_document_stream_names_its_document_and_no_other_stream_does() {
        let (tenant, id) = (TenantId::from_uuid(Uuid::from_u128(1)), Uuid::from_u128(2));
        assert_eq!(document_of(&stream_id(tenant, id)), Some(id));
        assert_eq!(document_of(&format!("company:{tenant}:{id}")), None);
        assert_eq!(document_of("document:only-two"), None);
        assert_eq!(document_of(&format!("document:{tenant}:not-a-uuid")), None);
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
        assert_eq!(names.len(), 31, "one distinct name per event");
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
