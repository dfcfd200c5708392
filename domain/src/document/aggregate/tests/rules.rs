//! The rules [`Document::decide`] applies beyond the status: values of SIFEN's shape, the
//! cancellation windows, reasons, crashes between a request and its answer, artifact versions,
//! repeated commands.

use crate::channel::ChannelKind;
use crate::check_digit::modulo11;
use crate::document::aggregate::decide::{Decision, check_cdc};
use crate::document::aggregate::error::malformed;
use crate::document::aggregate::test_support::*;
use crate::document::aggregate::*;
use crate::document::canonical::DocumentType;
use chrono::TimeDelta;
use cqrs_es::Aggregate;
use cqrs_es::test::TestFramework;
use uuid::Uuid;

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
    // The manual's own worked example of a CDC.
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
