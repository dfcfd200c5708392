//! Every transition [`Document::decide`] allows, with its exact events.

use crate::channel::ChannelKind;
use crate::document::aggregate::test_support::*;
use crate::document::aggregate::*;
use crate::document::canonical::DeliveryChannel;
use crate::document::canonical::DocumentType;
use chrono::TimeDelta;
use cqrs_es::test::TestFramework;
use uuid::Uuid;

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

/// An attempt whose operational failure comes past the horizon gives up from `submitting`
/// (the process manager records it instead of a retry no one would make).
#[test]
fn submitting_is_given_up_from_60_hours_after_signing_on() {
    let horizon = t(3) + SUBMISSION_HORIZON;
    TestFramework::<Document>::with(())
        .given(invoice(Situation::Submitting))
        .when(give_up(horizon))
        .then_expect_events(vec![failed_terminally()]);
    TestFramework::<Document>::with(())
        .given(invoice(Situation::Submitting))
        .when(give_up(horizon - TimeDelta::seconds(1)))
        .then_expect_error(DocumentError::GiveUpTooEarly { not_before: horizon });
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

/// A delivery by hand is for an accepted document only; it settles the deliveries of its
/// target that wait for the issuer's hand (the plan's `pending` at attempt 0) and nothing else:
/// not the other target's, not an automatic delivery's pending retry. The recipient is trimmed.
#[test]
fn a_delivery_by_hand_settles_the_waiting_deliveries_of_its_target_only() {
    table(
        || deliver_by_hand(DeliveryTarget::Customer),
        |situation| {
            if situation.status() == DocumentStatus::Accepted {
                Expect::Events
            } else {
                Expect::Refused
            }
        },
    );
    let waiting = |id: u128, target| DocumentEvent::DeliveryRecorded {
        delivery_id: Uuid::from_u128(id),
        target,
        channel: DeliveryChannel::Email,
        status: DeliveryStatus::Pending,
        attempt: 0,
        detail: Some("manual: the issuer delivers from the console".into()),
        at: t(30),
    };
    let mut events = invoice(Situation::AcceptedSifen);
    events.push(waiting(401, DeliveryTarget::Customer));
    events.push(waiting(402, DeliveryTarget::Issuer));
    // An automatic delivery waiting for its second attempt is the job's, not the issuer's.
    events.push(DocumentEvent::DeliveryRecorded {
        delivery_id: Uuid::from_u128(403),
        target: DeliveryTarget::Customer,
        channel: DeliveryChannel::Whatsapp,
        status: DeliveryStatus::Pending,
        attempt: 1,
        detail: Some("attempt 1 failed".into()),
        at: t(30),
    });
    let delivered = DocumentEvent::DeliveredByHand {
        settled: vec![Uuid::from_u128(401)],
        target: DeliveryTarget::Customer,
        channel: HandChannel::Printed,
        recipient: Some("Juan Pérez (mostrador)".into()),
        note: None,
        sent: None,
        at: t(50),
    };
    TestFramework::<Document>::with(())
        .given(events.clone())
        .when(deliver_by_hand(DeliveryTarget::Customer))
        .then_expect_events(vec![delivered.clone()]);
    events.push(delivered);
    let state = state_after(events.clone());
    let status = |id: u128| state.deliveries[&Uuid::from_u128(id)].status;
    assert_eq!(status(401), DeliveryStatus::Sent);
    assert_eq!(status(402), DeliveryStatus::Pending, "the issuer's still waits");
    assert_eq!(
        status(403),
        DeliveryStatus::Pending,
        "the job's retry is not settled"
    );
    assert_eq!(state.hand_deliveries.len(), 1);
    // A second hand delivery to the customer is recorded too, settling nothing more.
    TestFramework::<Document>::with(())
        .given(events)
        .when(deliver_by_hand(DeliveryTarget::Customer))
        .then_expect_events(vec![DocumentEvent::DeliveredByHand {
            settled: vec![],
            target: DeliveryTarget::Customer,
            channel: HandChannel::Printed,
            recipient: Some("Juan Pérez (mostrador)".into()),
            note: None,
            sent: None,
            at: t(50),
        }]);
}

#[test]
fn a_delivery_by_hand_with_a_recipient_or_note_too_long_is_refused() {
    let long = |n: usize| Some("ñ".repeat(n));
    let command = |recipient, note| DocumentCommand::DeliverByHand {
        target: DeliveryTarget::Customer,
        channel: HandChannel::Other,
        recipient,
        note,
        sent: None,
        at: t(50),
    };
    let events = invoice(Situation::AcceptedSifen);
    assert_eq!(
        run(events.clone(), command(long(201), None)),
        Err(DocumentError::TooLong {
            field: "recipient",
            max: 200,
            chars: 201
        })
    );
    assert_eq!(
        run(events.clone(), command(None, long(501))),
        Err(DocumentError::TooLong {
            field: "note",
            max: 500,
            chars: 501
        })
    );
    let Ok(accepted) = run(events, command(long(200), Some("   ".into()))) else {
        panic!("at the limit, and a blank note is no note");
    };
    assert!(matches!(
        &accepted[..],
        [DocumentEvent::DeliveredByHand { note: None, .. }]
    ));
}

/// A public link is made for an accepted document, once per link id; revoking it is one event,
/// again nothing, and an unknown link is `NoSuchLink`. The state knows each link and its end.
#[test]
fn a_public_link_is_made_for_an_accepted_document_and_revoked_once() {
    table(create_public_link, |situation| {
        if situation.status() == DocumentStatus::Accepted {
            Expect::Events
        } else {
            Expect::Refused
        }
    });
    let mut events = invoice(Situation::AcceptedSifen);
    let created = DocumentEvent::PublicLinkCreated {
        link_id: Uuid::from_u128(700),
        token_sha256: LINK_TOKEN_SHA256.into(),
        expires_at: t(60) + TimeDelta::days(90),
        at: t(60),
    };
    TestFramework::<Document>::with(())
        .given(events.clone())
        .when(create_public_link())
        .then_expect_events(vec![created.clone()]);
    let revoke = || DocumentCommand::RevokePublicLink {
        link_id: Uuid::from_u128(700),
        at: t(61),
    };
    assert_eq!(run(events.clone(), revoke()), Err(DocumentError::NoSuchLink));
    events.push(created);
    TestFramework::<Document>::with(())
        .given(events.clone())
        .when(create_public_link())
        .then_expect_events(vec![]);
    let revoked = DocumentEvent::PublicLinkRevoked {
        link_id: Uuid::from_u128(700),
        at: t(61),
    };
    TestFramework::<Document>::with(())
        .given(events.clone())
        .when(revoke())
        .then_expect_events(vec![revoked.clone()]);
    events.push(revoked);
    TestFramework::<Document>::with(())
        .given(events.clone())
        .when(revoke())
        .then_expect_events(vec![]);
    let state = state_after(events.clone());
    assert_eq!(state.public_links.len(), 1);
    assert_eq!(state.public_links[0].revoked_at, Some(t(61)));
    let mut bad = create_public_link();
    if let DocumentCommand::CreatePublicLink { token_sha256, .. } = &mut bad {
        *token_sha256 = "not a hash".into();
    }
    assert!(matches!(
        run(invoice(Situation::AcceptedSifen), bad),
        Err(DocumentError::Malformed {
            field: "token_sha256",
            ..
        })
    ));
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
