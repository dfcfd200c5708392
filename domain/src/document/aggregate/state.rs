//! What the events say about a document: [`DocumentState`] and its [`DocumentStatus`], the
//! values the state keeps, and the fold of events into it (`apply`, here for [`Document`]).

use chrono::{DateTime, Utc};
use cqrs_es::Aggregate;
use cqrs_es::event_sink::EventSink;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use uuid::Uuid;

use super::command::{
    ArtifactKind, DeliveryStatus, DeliveryTarget, DocumentCommand, DocumentNumber, HandChannel, NumberReport,
};
use super::decide::{SUBMISSION_HORIZON, cancellation_window};
use super::error::DocumentError;
use super::event::DocumentEvent;
use crate::channel::ChannelKind;
use crate::document::canonical::{CanonicalDocument, DeliveryChannel, DocumentType};
use crate::document::issues::Issue;
use crate::document::routing::Routing;

/// The contract's document statuses, exactly.
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

impl DeliveryState {
    /// Whether the delivery waits for the issuer's hand: a `manual` delivery the plan recorded
    /// `pending` at attempt 0 (automatic deliveries record their attempts from 1), not yet
    /// settled by a delivery by hand.
    pub fn awaits_hand(&self) -> bool {
        self.status == DeliveryStatus::Pending && self.attempt == 0
    }
}

/// A delivery the issuer made by hand.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HandDelivery {
    /// For whom.
    pub target: DeliveryTarget,
    /// How.
    pub channel: HandChannel,
    /// To whom, as the issuer wrote it.
    pub recipient: Option<String>,
    /// The issuer's note.
    pub note: Option<String>,
    /// The mail server's answer when the service emailed the document itself.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sent: Option<String>,
    /// The deliveries it settled.
    pub settled: Vec<Uuid>,
    /// When.
    pub at: DateTime<Utc>,
}

/// A long-lived link to the document's printable.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PublicLink {
    /// Its id.
    pub link_id: Uuid,
    /// When it stops working.
    pub expires_at: DateTime<Utc>,
    /// When it was revoked.
    pub revoked_at: Option<DateTime<Utc>>,
    /// When it was made.
    pub created_at: DateTime<Utc>,
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
    /// The deliveries the issuer made by hand, in the order recorded.
    #[serde(default)]
    pub hand_deliveries: Vec<HandDelivery>,
    /// The public links to its printable, in the order made.
    #[serde(default)]
    pub public_links: Vec<PublicLink>,
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

    pub(super) fn pending_kind(&self) -> Option<FiscalEventKind> {
        self.pending.as_ref().map(|p| p.kind)
    }

    pub(super) fn refused_last(&self, kind: FiscalEventKind, code: &str) -> bool {
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
            DocumentEvent::DeliveredByHand {
                settled,
                target,
                channel,
                recipient,
                note,
                sent,
                at,
            } => {
                for id in &settled {
                    if let Some(delivery) = self.deliveries.get_mut(id) {
                        delivery.status = DeliveryStatus::Sent;
                        delivery.detail = Some(format!("delivered by hand ({})", channel.as_str()));
                        delivery.at = at;
                    }
                }
                self.hand_deliveries.push(HandDelivery {
                    target,
                    channel,
                    recipient,
                    note,
                    sent,
                    settled,
                    at,
                });
            }
            DocumentEvent::PublicLinkCreated {
                link_id,
                expires_at,
                at,
                ..
            } => self.public_links.push(PublicLink {
                link_id,
                expires_at,
                revoked_at: None,
                created_at: at,
            }),
            DocumentEvent::PublicLinkRevoked { link_id, at } => {
                if let Some(link) = self.public_links.iter_mut().find(|l| l.link_id == link_id) {
                    link.revoked_at.get_or_insert(at);
                }
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
    pub(super) state: Option<DocumentState>,
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
                hand_deliveries: Vec::new(),
                public_links: Vec::new(),
                issuance_refusal: None,
                reported: Vec::new(),
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_support::*;
    use super::*;
    use chrono::TimeDelta;

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
}
