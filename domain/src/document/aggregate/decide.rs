//! The rules: [`Document::decide`] turns a command into events, or refuses it, from what the
//! events recorded so far; with the limits the rules apply and the checks of what a channel
//! reports.

use chrono::TimeDelta;
use std::ops::RangeInclusive;

use super::command::{ArtifactKind, DocumentCommand, DocumentNumber, NumberReport, digits, not_all_zero};
use super::error::{DocumentError, malformed};
use super::event::DocumentEvent;
use super::state::{Document, DocumentStatus, FiscalEventKind};
use crate::channel::ChannelKind;
use crate::check_digit::modulo11;
use crate::document::canonical::DocumentType;

/// How long after signing a document may stay unanswered before it is given up: automatic
/// attempts continue until 60 h after signing, then the document is `failed_terminal`.
pub const SUBMISSION_HORIZON: TimeDelta = TimeDelta::hours(60);

/// Characters a cancellation or inutilización reason may have, once trimmed (SIFEN `mOtEve`).
pub const REASON_CHARS: RangeInclusive<usize> = 5..=500;

/// How long after SIFEN's approval an accepted document may be cancelled: 48 h for invoices and
/// autofacturas, 168 h for the rest.
pub fn cancellation_window(doc_type: DocumentType) -> TimeDelta {
    match doc_type {
        DocumentType::Invoice | DocumentType::Autofactura => TimeDelta::hours(48),
        DocumentType::CreditNote
        | DocumentType::DebitNote
        | DocumentType::Remision
        | DocumentType::Receipt => TimeDelta::hours(168),
    }
}

/// Refuses a CDC that is not the one of this document: SIFEN's shape (44 characters), the type, the
/// establishment, point, number and security code in their places, and the check digit.
pub(super) fn check_cdc(
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

pub(super) fn check_sha256(field: &'static str, text: &str) -> Result<(), DocumentError> {
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
pub(super) fn check_reason(reason: &str) -> Result<String, DocumentError> {
    let reason = reason.trim();
    let chars = reason.chars().count();
    if REASON_CHARS.contains(&chars) {
        Ok(reason.to_owned())
    } else {
        Err(DocumentError::ReasonLength { chars })
    }
}

/// The longest recipient of a delivery by hand (a name, an address, a phone), in characters.
pub const HAND_RECIPIENT_CHARS: usize = 200;
/// The longest note of a delivery by hand, in characters.
pub const HAND_NOTE_CHARS: usize = 500;

/// Trims an optional text (empty is none) and checks its length.
fn bounded(text: Option<String>, field: &'static str, max: usize) -> Result<Option<String>, DocumentError> {
    let Some(text) = text.map(|t| t.trim().to_owned()).filter(|t| !t.is_empty()) else {
        return Ok(None);
    };
    let chars = text.chars().count();
    if chars > max {
        return Err(DocumentError::TooLong { field, max, chars });
    }
    Ok(Some(text))
}

pub(super) type Decision = Result<Vec<DocumentEvent>, DocumentError>;

fn one(event: DocumentEvent) -> Decision {
    Ok(vec![event])
}

/// The effect already holds: no event.
fn nothing() -> Decision {
    Ok(Vec::new())
}

impl Document {
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
                // From submitting too: an attempt that fails past the horizon ends the document
                // there, with no retry scheduled beyond it.
                S::Retrying | S::Submitting => match s.give_up_not_before() {
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
            DocumentCommand::DeliverByHand {
                target,
                channel,
                recipient,
                note,
                sent,
                at,
            } => {
                if s.status != S::Accepted {
                    return Err(refused);
                }
                let recipient = bounded(recipient, "recipient", HAND_RECIPIENT_CHARS)?;
                let note = bounded(note, "note", HAND_NOTE_CHARS)?;
                let settled = s
                    .deliveries
                    .iter()
                    .filter(|(_, d)| d.target == target && d.awaits_hand())
                    .map(|(id, _)| *id)
                    .collect();
                one(DocumentEvent::DeliveredByHand {
                    settled,
                    target,
                    channel,
                    recipient,
                    note,
                    sent,
                    at,
                })
            }
            DocumentCommand::CreatePublicLink {
                link_id,
                token_sha256,
                expires_at,
                at,
            } => {
                if s.status != S::Accepted {
                    return Err(refused);
                }
                check_sha256("token_sha256", &token_sha256)?;
                if s.public_links.iter().any(|l| l.link_id == link_id) {
                    return nothing();
                }
                one(DocumentEvent::PublicLinkCreated {
                    link_id,
                    token_sha256,
                    expires_at,
                    at,
                })
            }
            DocumentCommand::RevokePublicLink { link_id, at } => {
                match s.public_links.iter().find(|l| l.link_id == link_id) {
                    None => Err(DocumentError::NoSuchLink),
                    Some(link) if link.revoked_at.is_some() => nothing(),
                    Some(_) => one(DocumentEvent::PublicLinkRevoked { link_id, at }),
                }
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
