//! What the aggregate's tests share: fixed times and values, one builder per event and per
//! command, the backbone (a history of events for every situation a document can be in, by
//! status, channel and pending SIFEN event), `run` and `table` to check a command in them, and
//! [`samples`], one event of every type, which the event catalogue (docs/events.md) shows.

use super::decide::Decision;
use super::*;
use crate::channel::ChannelKind;
use crate::check_digit::modulo11;
use crate::document::canonical::{CanonicalDocument, DeliveryChannel, DocumentType};
use crate::document::canonical::{from_value, sample_invoice};
use crate::document::issues::Issue;
use crate::document::routing::Routing;
use chrono::TimeZone;
use chrono::{DateTime, TimeDelta, Utc};
use cqrs_es::Aggregate;
use cqrs_es::test::TestFramework;
use uuid::Uuid;

// --- fixtures ------------------------------------------------------------------------------

pub(super) fn t0() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 3, 2, 13, 15, 0)
        .single()
        .expect("a time")
}

/// `t0` plus minutes.
pub(super) fn t(minutes: i64) -> DateTime<Utc> {
    t0() + TimeDelta::minutes(minutes)
}

pub(super) const REASON: &str = "Error en el precio unitario";
pub(super) const SECURITY_CODE: &str = "587326098";
pub(super) const SERIES: &str = "company:12345678:001:001:1";
pub(super) const SIGNED_XML: Uuid = Uuid::from_u128(100);
pub(super) const PRINTABLE: Uuid = Uuid::from_u128(200);
pub(super) const KUDE: Uuid = Uuid::from_u128(300);

pub(super) fn sha(c: char) -> String {
    c.to_string().repeat(64)
}

pub(super) fn routing(channel: ChannelKind) -> Routing {
    Routing {
        company_id: Uuid::from_u128(1),
        branch_id: Uuid::from_u128(2),
        issuance_point_id: Uuid::from_u128(3),
        channel,
        channel_id: Uuid::from_u128(4),
    }
}

pub(super) fn canonical(doc_type: DocumentType) -> Box<CanonicalDocument> {
    let mut document = from_value(sample_invoice()).expect("the sample parses");
    document.doc_type = doc_type;
    Box::new(document)
}

pub(super) fn number() -> DocumentNumber {
    DocumentNumber {
        timbrado: "12345678".into(),
        establishment: "001".into(),
        point: "001".into(),
        number: "0000001".into(),
    }
}

/// The CDC of `number()` for a type: RUC 80069563-1, legal entity, 2026-03-02, normal
/// emission, `SECURITY_CODE`, and the check digit.
pub(super) fn cdc(doc_type: DocumentType) -> String {
    let code = doc_type.sifen_code().expect("a SIFEN type");
    let base = format!("{code:02}80069563100100100000012202603021{SECURITY_CODE}");
    assert_eq!(base.len(), 43);
    format!("{base}{}", modulo11(&base))
}

pub(super) fn issue(code: &str) -> Issue {
    Issue::new("buyer.ruc", code, "a message")
}

pub(super) fn received(channel: ChannelKind, doc_type: DocumentType) -> DocumentEvent {
    DocumentEvent::DocumentReceived {
        document_id: Uuid::from_u128(0xd0c),
        routing: routing(channel),
        document: canonical(doc_type),
        at: t(0),
    }
}

pub(super) fn validated() -> DocumentEvent {
    DocumentEvent::DocumentValidated {
        warnings: vec![issue("unknown_taxpayer")],
        at: t(0),
    }
}

pub(super) fn validation_failed() -> DocumentEvent {
    DocumentEvent::DocumentValidationFailed {
        errors: vec![issue("invalid_ruc")],
        warnings: vec![],
        at: t(0),
    }
}

pub(super) fn queued() -> DocumentEvent {
    DocumentEvent::DocumentQueued { at: t(1) }
}

pub(super) fn transform_started() -> DocumentEvent {
    DocumentEvent::DocumentTransformStarted { at: t(2) }
}

pub(super) fn transformed(doc_type: DocumentType) -> DocumentEvent {
    DocumentEvent::DocumentTransformed {
        series: SERIES.into(),
        number: number(),
        cdc: cdc(doc_type),
        security_code: SECURITY_CODE.into(),
        xml_sha256: sha('a'),
        at: t(2),
    }
}

pub(super) fn artifact_recorded(
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

pub(super) fn signed() -> DocumentEvent {
    DocumentEvent::DocumentSigned {
        signed_at: t(3),
        signed_xml_artifact_id: SIGNED_XML,
        signed_xml_sha256: sha('b'),
        at: t(3),
    }
}

pub(super) fn submitted(attempt: u32) -> DocumentEvent {
    DocumentEvent::DocumentSubmitted {
        attempt,
        lot_id: Some(format!("L{attempt}")),
        at: t(4),
    }
}

pub(super) fn accepted() -> DocumentEvent {
    DocumentEvent::DocumentAccepted {
        code: "0260".into(),
        message: "Aprobado".into(),
        protocol: Some("48493617".into()),
        approved_at: t(5),
        at: t(6),
    }
}

pub(super) fn rejected() -> DocumentEvent {
    DocumentEvent::DocumentRejected {
        code: "1000".into(),
        message: "CDC no corresponde con las informaciones del XML".into(),
        at: t(6),
    }
}

pub(super) fn retry_scheduled() -> DocumentEvent {
    DocumentEvent::DocumentRetryScheduled {
        reason: "timeout".into(),
        next_attempt_at: t(6) + TimeDelta::seconds(30),
        at: t(6),
    }
}

pub(super) fn failed_terminally() -> DocumentEvent {
    DocumentEvent::DocumentFailedTerminally {
        reason: "no answer 60 h after signing".into(),
        at: t(3) + SUBMISSION_HORIZON,
    }
}

pub(super) fn cancellation_requested() -> DocumentEvent {
    DocumentEvent::DocumentCancellationRequested {
        reason: REASON.into(),
        at: t(10),
    }
}

pub(super) fn inutilization_requested() -> DocumentEvent {
    DocumentEvent::DocumentInutilizationRequested {
        reason: REASON.into(),
        at: t(10),
    }
}

pub(super) fn cancelled(fiscal: bool) -> DocumentEvent {
    DocumentEvent::DocumentCancelled {
        reason: REASON.into(),
        fiscal,
        code: fiscal.then(|| "0600".into()),
        message: fiscal.then(|| "Evento registrado correctamente".into()),
        protocol: fiscal.then(|| "777".into()),
        at: t(11),
    }
}

pub(super) fn invalidated(fiscal: bool) -> DocumentEvent {
    DocumentEvent::DocumentInvalidated {
        reason: REASON.into(),
        fiscal,
        code: fiscal.then(|| "0600".into()),
        message: fiscal.then(|| "Evento registrado correctamente".into()),
        protocol: fiscal.then(|| "777".into()),
        at: t(11),
    }
}

pub(super) fn rendering_started() -> DocumentEvent {
    DocumentEvent::DocumentRenderingStarted {
        series: String::new(),
        number: number(),
        at: t(2),
    }
}

pub(super) fn rendered() -> DocumentEvent {
    DocumentEvent::DocumentRendered {
        printable_artifact_id: PRINTABLE,
        printable_sha256: sha('c'),
        at: t(3),
    }
}

// --- the backbone: a history for every situation a document can be in ----------------------

/// Every place in the life of a document, by status, channel and pending SIFEN event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Situation {
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
    pub(super) const ALL: [Self; 21] = [
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

    pub(super) fn status(self) -> DocumentStatus {
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
pub(super) fn history(situation: Situation, doc_type: DocumentType) -> Vec<DocumentEvent> {
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

pub(super) fn invoice(situation: Situation) -> Vec<DocumentEvent> {
    history(situation, DocumentType::Invoice)
}

pub(super) fn run(given: Vec<DocumentEvent>, command: DocumentCommand) -> Decision {
    TestFramework::<Document>::with(())
        .given(given)
        .when(command)
        .inspect_result()
}

pub(super) fn state_after(events: Vec<DocumentEvent>) -> DocumentState {
    let mut document = Document::default();
    for event in events {
        document.apply(event);
    }
    document.state.expect("a received document")
}

/// What a command should do in a situation.
#[derive(Debug)]
pub(super) enum Expect {
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
pub(super) fn table(command: impl Fn() -> DocumentCommand, expect: impl Fn(Situation) -> Expect) {
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

pub(super) fn receive(channel: ChannelKind, errors: Vec<Issue>) -> DocumentCommand {
    DocumentCommand::Receive {
        document_id: Uuid::from_u128(0xd0c),
        routing: routing(channel),
        document: canonical(DocumentType::Invoice),
        errors,
        warnings: vec![issue("unknown_taxpayer")],
        at: t(0),
    }
}

pub(super) fn record_transformed() -> DocumentCommand {
    DocumentCommand::RecordTransformed {
        series: SERIES.into(),
        number: number(),
        cdc: cdc(DocumentType::Invoice),
        security_code: SECURITY_CODE.into(),
        xml_sha256: sha('a'),
        at: t(2),
    }
}

pub(super) fn record_signed() -> DocumentCommand {
    DocumentCommand::RecordSigned {
        signed_xml_artifact_id: SIGNED_XML,
        signed_at: t(3),
        at: t(3),
    }
}

pub(super) fn record_submitted(attempt: u32, lot: Option<&str>) -> DocumentCommand {
    DocumentCommand::RecordSubmitted {
        attempt,
        lot_id: lot.map(str::to_owned),
        at: t(4),
    }
}

pub(super) fn record_accepted() -> DocumentCommand {
    DocumentCommand::RecordAccepted {
        code: "0260".into(),
        message: "Aprobado".into(),
        protocol: Some("48493617".into()),
        approved_at: t(5),
        at: t(6),
    }
}

pub(super) fn record_rejected() -> DocumentCommand {
    DocumentCommand::RecordRejected {
        code: "1000".into(),
        message: "CDC no corresponde con las informaciones del XML".into(),
        at: t(6),
    }
}

pub(super) fn record_operational_failure() -> DocumentCommand {
    DocumentCommand::RecordOperationalFailure {
        reason: "timeout".into(),
        next_attempt_at: t(6) + TimeDelta::seconds(30),
        at: t(6),
    }
}

pub(super) fn give_up(at: DateTime<Utc>) -> DocumentCommand {
    DocumentCommand::GiveUp {
        reason: "no answer 60 h after signing".into(),
        at,
    }
}

pub(super) fn start_rendering() -> DocumentCommand {
    DocumentCommand::StartRendering {
        series: String::new(),
        number: number(),
        at: t(2),
    }
}

pub(super) fn cancel(reason: &str, at: DateTime<Utc>) -> DocumentCommand {
    DocumentCommand::Cancel {
        reason: reason.into(),
        at,
    }
}

pub(super) fn inutilize(reason: &str, at: DateTime<Utc>) -> DocumentCommand {
    DocumentCommand::Inutilize {
        reason: reason.into(),
        at,
    }
}

pub(super) fn record_cancelled() -> DocumentCommand {
    DocumentCommand::RecordCancelled {
        code: "0600".into(),
        message: "Evento registrado correctamente".into(),
        protocol: Some("777".into()),
        at: t(11),
    }
}

pub(super) fn record_inutilized() -> DocumentCommand {
    DocumentCommand::RecordInutilized {
        code: "0600".into(),
        message: "Evento registrado correctamente".into(),
        protocol: Some("777".into()),
        at: t(11),
    }
}

pub(super) fn record_artifact(artifact_id: Uuid, kind: ArtifactKind, version: u32) -> DocumentCommand {
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

pub(super) fn record_delivery(status: DeliveryStatus, attempt: u32) -> DocumentCommand {
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

pub(super) fn deliver_by_hand(target: DeliveryTarget) -> DocumentCommand {
    DocumentCommand::DeliverByHand {
        target,
        channel: HandChannel::Printed,
        recipient: Some("  Juan Pérez (mostrador)  ".into()),
        note: None,
        sent: None,
        at: t(50),
    }
}

pub(super) const LINK_TOKEN_SHA256: &str = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08";

pub(super) fn create_public_link() -> DocumentCommand {
    DocumentCommand::CreatePublicLink {
        link_id: Uuid::from_u128(700),
        token_sha256: LINK_TOKEN_SHA256.into(),
        expires_at: t(60) + TimeDelta::days(90),
        at: t(60),
    }
}

pub(super) fn every_command() -> Vec<DocumentCommand> {
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
        deliver_by_hand(DeliveryTarget::Customer),
        create_public_link(),
        DocumentCommand::RevokePublicLink {
            link_id: Uuid::from_u128(700),
            at: t(61),
        },
        DocumentCommand::RequestPdfRegeneration { at: t(40) },
    ]
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
        DocumentEvent::DeliveredByHand {
            settled: vec![Uuid::from_u128(400)],
            target: DeliveryTarget::Customer,
            channel: HandChannel::InPerson,
            recipient: Some("Juan Pérez".into()),
            note: Some("firmó el recibo".into()),
            sent: None,
            at: t(50),
        },
        DocumentEvent::PublicLinkCreated {
            link_id: Uuid::from_u128(700),
            token_sha256: LINK_TOKEN_SHA256.into(),
            expires_at: t(60) + TimeDelta::days(90),
            at: t(60),
        },
        DocumentEvent::PublicLinkRevoked {
            link_id: Uuid::from_u128(700),
            at: t(61),
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
