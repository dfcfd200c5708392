//! Every command [`Document::decide`] refuses where it does not belong.

use crate::channel::ChannelKind;
use crate::document::aggregate::test_support::*;
use crate::document::aggregate::*;
use uuid::Uuid;

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
fn give_up_is_refused_but_in_submitting_or_retrying() {
    table(
        || give_up(t(3) + SUBMISSION_HORIZON),
        |s| match s {
            Situation::Retrying | Situation::Submitting => Expect::Events,
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
        Situation::AcceptedInutilizationPending | Situation::RejectedInutilizationPending => Expect::Events,
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
