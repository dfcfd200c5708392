//! The rules of the associated document (`iTipDocAso`: an electronic document by CDC, a printed
//! one, a constancia) and of each type's own fields (reason, transport, the SIFEN extensions).

use super::*;

pub(super) fn associated_document_rules(doc: &CanonicalDocument, issuer: &Ruc, out: &mut Vec<Issue>) {
    let profile = profile(doc.doc_type);
    match (&doc.associated_document, profile.associated_document) {
        (None, Need::Required) => {
            let why = if profile.constancia {
                "an autofactura refers to its seller's constancia (rule 2416)"
            } else {
                "a credit or debit note refers to the invoice it adjusts (rule 2400)"
            };
            required(out, "associated_document", false, why);
        }
        (None, _) => {}
        (Some(_), Need::NotAllowed) => not_allowed(
            out,
            "associated_document",
            true,
            &format!("a {} refers to no document", doc.doc_type.as_str()),
        ),
        (Some(a), _) if profile.constancia => constancia_rules(a, out),
        (Some(a), _) => reference_rules(a, doc.doc_type, issuer, out),
    }
}

/// One field of a printed document: name, presence, and the value with its digit count.
type PrintedField<'a> = (&'static str, bool, Option<(&'a str, usize)>);

/// The printed document's fields: name, presence, and the value with its digit count (a date
/// has none).
pub(super) fn printed_fields(a: &AssociatedDocument) -> [PrintedField<'_>; 5] {
    fn digits(v: &Option<String>, n: usize) -> Option<(&str, usize)> {
        v.as_deref().map(|s| (s, n))
    }
    [
        (
            "timbrado",
            a.timbrado.is_some(),
            digits(&a.timbrado, TIMBRADO_DIGITS),
        ),
        (
            "establishment",
            a.establishment.is_some(),
            digits(&a.establishment, ESTABLISHMENT_DIGITS),
        ),
        ("point", a.point.is_some(), digits(&a.point, ESTABLISHMENT_DIGITS)),
        (
            "number",
            a.number.is_some(),
            digits(&a.number, facts::NUMBER_DIGITS),
        ),
        ("issue_date", a.issue_date.is_some(), None),
    ]
}

pub(super) fn constancia_fields(a: &AssociatedDocument) -> [(&'static str, bool); 3] {
    [
        ("constancia_type", a.constancia_type.is_some()),
        ("constancia_number", a.constancia_number.is_some()),
        ("constancia_control", a.constancia_control.is_some()),
    ]
}

/// An electronic (CDC) or printed document.
pub(super) fn reference_rules(
    a: &AssociatedDocument,
    doc_type: DocumentType,
    issuer: &Ruc,
    out: &mut Vec<Issue>,
) {
    for (name, present) in constancia_fields(a) {
        not_allowed(
            out,
            &format!("associated_document.{name}"),
            present,
            "a constancia is an autofactura's associated document (rule 2434)",
        );
    }
    // A reference by document_id is resolved at intake, which fills the CDC or reports
    // associated_document_not_found.
    if a.cdc.is_none() && a.document_id.is_some() {
        return;
    }
    let printed = printed_fields(a);
    if let Some(cdc) = &a.cdc {
        for (name, present, _) in printed {
            not_allowed(
                out,
                &format!("associated_document.{name}"),
                present,
                "with a cdc the document is electronic, not printed",
            );
        }
        let note = matches!(doc_type, DocumentType::CreditNote | DocumentType::DebitNote);
        if cdc_rules(cdc, out) && note {
            if !cdc.starts_with("01") {
                push(
                    out,
                    "associated_document.cdc",
                    codes::ASSOCIATED_DOCUMENT_NOT_INVOICE,
                    format!(
                        "a credit or debit note adjusts an invoice, whose CDC starts with 01, not {} (rule 2414)",
                        cdc.get(..2).unwrap_or_default()
                    ),
                );
            }
            // The CDC carries its issuer's RUC (positions 3–11): a note adjusts the company's own
            // invoice, never another taxpayer's.
            let cdc_issuer = (
                cdc.get(2..10).unwrap_or_default().trim_start_matches('0'),
                cdc.get(10..11).unwrap_or_default(),
            );
            let own = (
                issuer.number().trim_start_matches('0'),
                issuer.check_digit().to_string(),
            );
            if cdc_issuer != (own.0, own.1.as_str()) {
                push(
                    out,
                    "associated_document.cdc",
                    codes::ASSOCIATED_DOCUMENT_OTHER_ISSUER,
                    format!(
                        "a credit or debit note adjusts one of the company's own invoices: this CDC was issued by RUC {}-{}, not {}-{}",
                        cdc_issuer.0, cdc_issuer.1, own.0, own.1
                    ),
                );
            }
        }
        return;
    }
    if printed.iter().all(|(_, present, _)| !present) {
        required(
            out,
            "associated_document.cdc",
            false,
            "give the electronic document's cdc, or the printed one's timbrado, establishment, point, number and issue_date (rule 2402)",
        );
        return;
    }
    for (name, present, digits) in printed {
        let field = format!("associated_document.{name}");
        required(
            out,
            &field,
            present,
            "a printed document is named by all five fields",
        );
        if let Some((value, n)) = digits {
            pattern_issue(
                out,
                &field,
                pattern(value, n, n, u8::is_ascii_digit),
                &format!("{n} digits"),
            );
        }
    }
}

/// A CDC's form and check digit; whether both are right.
pub(super) fn cdc_rules(cdc: &str, out: &mut Vec<Issue>) -> bool {
    const FIELD: &str = "associated_document.cdc";
    let bytes = cdc.as_bytes();
    let form = bytes.len() == 44
        && bytes
            .iter()
            .enumerate()
            .all(|(i, b)| b.is_ascii_digit() || (i == 9 && (b'A'..=b'D').contains(b)));
    if !form {
        pattern_issue(
            out,
            FIELD,
            false,
            "44 characters, all digits but the RUC's last (0-9 or A-D)",
        );
        return false;
    }
    let (Some(base), Some(last)) = (cdc.get(..43), bytes.last()) else {
        return false;
    };
    let expected = modulo11(base);
    let given = last - b'0';
    if expected != given {
        push(
            out,
            FIELD,
            codes::INVALID_CHECK_DIGIT,
            format!("the check digit of CDC {base} is {expected}, not {given}"),
        );
        return false;
    }
    true
}

pub(super) fn constancia_rules(a: &AssociatedDocument, out: &mut Vec<Issue>) {
    let why = "an autofactura's associated document is a constancia (rule 2418)";
    not_allowed(out, "associated_document.cdc", a.cdc.is_some(), why);
    for (name, present, _) in printed_fields(a) {
        not_allowed(out, &format!("associated_document.{name}"), present, why);
    }
    if required(
        out,
        "associated_document.constancia_type",
        a.constancia_type.is_some(),
        "1 (not a taxpayer) or 2 (microproducer)",
    ) && let Some(t) = a.constancia_type
        && facts::constancia_type(t).is_none()
    {
        push(
            out,
            "associated_document.constancia_type",
            codes::INVALID_CODE,
            format!("constancia_type {t} is not 1 (not a taxpayer) or 2 (microproducer)"),
        );
    }
    if let Some(number) = &a.constancia_number {
        let n = facts::CONSTANCIA_NUMBER_DIGITS;
        pattern_issue(
            out,
            "associated_document.constancia_number",
            pattern(number, n, n, u8::is_ascii_digit),
            &format!("{n} digits"),
        );
    }
    if let Some(control) = &a.constancia_control {
        let n = facts::CONSTANCIA_CONTROL_LENGTH;
        pattern_issue(
            out,
            "associated_document.constancia_control",
            pattern(control, n, n, alphanumeric_or_dash),
            &format!("{n} letters, digits or dashes"),
        );
    }
}

// ---------------------------------------------------------------------------------------------
// Reason, transport and the SIFEN extensions.

pub(super) fn type_field_rules(doc: &CanonicalDocument, ctx: &ValidationContext<'_>, out: &mut Vec<Issue>) {
    let profile = profile(doc.doc_type);
    let (need, reasons) = profile.reason;
    match (doc.reason, need) {
        (None, Need::Required) => {
            required(
                out,
                "reason",
                false,
                &format!("the motive of a {} (one of {reasons:?})", doc.doc_type.as_str()),
            );
        }
        (Some(_), Need::NotAllowed) => not_allowed(
            out,
            "reason",
            true,
            "reason is the motive of a credit note, debit note or remisión",
        ),
        (Some(r), _) if !reasons.contains(&r) => push(
            out,
            "reason",
            codes::INVALID_CODE,
            format!(
                "reason {r} is not a motive of a {}: one of {reasons:?}",
                doc.doc_type.as_str()
            ),
        ),
        _ => {}
    }
    // Rule 2606: goods moved between the company's own premises go to the company itself.
    if doc.doc_type == DocumentType::Remision && doc.reason == Some(7) {
        let buyer_ruc = doc.buyer.as_ref().and_then(|b| b.ruc.as_deref());
        let same = buyer_ruc
            .and_then(|text| Ruc::parse(text).ok())
            .is_some_and(|ruc| ruc.number() == ctx.company_ruc.number());
        if !same {
            push(
                out,
                "buyer.ruc",
                codes::REMISION_BUYER_NOT_ISSUER,
                format!(
                    "a remisión between the company's own premises (reason 7) goes to the company itself: buyer.ruc must be {} (rule 2606), not {}",
                    ctx.company_ruc,
                    buyer_ruc.unwrap_or("absent")
                ),
            );
        }
    }
    let transport = doc.transport.as_ref().is_some_and(|t| !t.is_empty());
    match profile.transport {
        Need::Required => {
            required(
                out,
                "transport",
                transport,
                "a remisión carries its transport data (gTransp, rule 2100)",
            );
        }
        Need::NotAllowed => not_allowed(
            out,
            "transport",
            doc.transport.is_some(),
            &format!("a {} carries no transport data", doc.doc_type.as_str()),
        ),
        Need::Optional => {}
    }
    if let Some(p) = doc.presence
        && !PRESENCE_CODES.contains(&p)
    {
        push(
            out,
            "presence",
            codes::INVALID_CODE,
            format!("presence {p} is not one of {PRESENCE_CODES:?} (iIndPres)"),
        );
    }
    if let Some(t) = doc.transaction_type
        && facts::transaction_type(t).is_none()
    {
        push(
            out,
            "transaction_type",
            codes::INVALID_CODE,
            format!(
                "transaction_type {t} is not 1 to {} (iTipTra)",
                facts::TRANSACTION_TYPES.len()
            ),
        );
    }
}
