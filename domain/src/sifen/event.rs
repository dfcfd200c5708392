//! The issuer's SIFEN events: the unsigned `gGroupGesEve` of one cancelación
//! (`rGeVeCan`) or one inutilización (`rGeVeInu`), in the exact shape the event signer
//! (`infrastructure::sifen::sign::sign_event`) accepts and `siRecepEvento_v150.xsd` validates:
//!
//! ```text
//! <?xml version="1.0" encoding="UTF-8"?>
//! <gGroupGesEve xmlns=SIFEN xmlns:xsi=… xsi:schemaLocation="SIFEN siRecepEvento_v150.xsd">
//!   <rGesEve><rEve Id="{id}"><dFecFirma>…</dFecFirma><dVerFor>150</dVerFor>
//!     <gGroupTiEvt><rGeVeCan>…</rGeVeCan></gGroupTiEvt></rEve></rGesEve>
//! </gGroupGesEve>
//! ```
//!
//! written with no whitespace between tags, no prefixes inside, no self-closing tags, and text
//! escaped as exclusive C14N writes it (the signer digests the bytes as they are). Pure: the
//! event id and the signing time (Paraguay's wall clock, `dFecFirma`) come in as arguments.
//!
//! The reason (`mOtEve`, 5 to 500 characters) is sent with its whitespace runs collapsed to one
//! space (SIFEN refuses edition characters, 0105); the aggregate checked its length already, and
//! the check here repeats it on what is actually sent.

use chrono::NaiveDateTime;

/// The opening of the group, exactly as the signer expects it.
pub const GROUP_OPEN: &str = concat!(
    r#"<gGroupGesEve xmlns="http://ekuatia.set.gov.py/sifen/xsd""#,
    r#" xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance""#,
    r#" xsi:schemaLocation="http://ekuatia.set.gov.py/sifen/xsd siRecepEvento_v150.xsd">"#,
);

/// The largest event id (`tdIdEve`: 1 to 9 999 999 999).
pub const MAX_EVENT_ID: u64 = 9_999_999_999;

/// Which event, with its fields.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EventKind<'a> {
    /// Cancelación of an approved DTE (`rGeVeCan`).
    Cancellation {
        /// The document's CDC (44 digits).
        cdc: &'a str,
    },
    /// Inutilización of a range of numbers that never became a valid DTE (`rGeVeInu`).
    Inutilization {
        /// `dNumTim` (8 digits).
        timbrado: &'a str,
        /// `dEst` (3 digits).
        establishment: &'a str,
        /// `dPunExp` (3 digits).
        point: &'a str,
        /// `dNumIn`.
        from: u32,
        /// `dNumFin` (equal to `from` for one number).
        to: u32,
        /// `iTiDE` (1 to 9).
        doc_type: u8,
    },
}

/// One event to write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventInput<'a> {
    /// `rEve@Id`: a positive number chosen by the issuer.
    pub id: u64,
    /// `dFecFirma`: Paraguay's wall-clock time.
    pub signed_at: NaiveDateTime,
    /// The reason (`mOtEve`).
    pub reason: &'a str,
    /// The event.
    pub kind: EventKind<'a>,
}

/// Why an event cannot be written.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EventError {
    /// `rEve@Id` outside 1..=9 999 999 999.
    #[error("event id {0} is outside 1..=9999999999")]
    Id(u64),
    /// A reason of fewer than 5 or more than 500 characters.
    #[error("a reason has 5 to 500 characters, this one has {0}")]
    Reason(usize),
    /// A field that does not have its SIFEN form.
    #[error("{field} {value:?} is not {expected}")]
    Field {
        /// The element.
        field: &'static str,
        /// What was given.
        value: String,
        /// What it must be.
        expected: &'static str,
    },
}

fn digits(field: &'static str, value: &str, len: usize, expected: &'static str) -> Result<(), EventError> {
    if value.len() == len && value.bytes().all(|b| b.is_ascii_digit()) {
        Ok(())
    } else {
        Err(EventError::Field {
            field,
            value: value.to_owned(),
            expected,
        })
    }
}

fn number(field: &'static str, n: u32) -> Result<String, EventError> {
    if (1..=9_999_999).contains(&n) {
        Ok(format!("{n:07}"))
    } else {
        Err(EventError::Field {
            field,
            value: n.to_string(),
            expected: "a number from 1 to 9999999",
        })
    }
}

/// The reason as sent: whitespace runs collapsed to one space, trimmed, 5 to 500 characters.
pub fn reason_text(reason: &str) -> Result<String, EventError> {
    let text = reason.split_whitespace().collect::<Vec<_>>().join(" ");
    let chars = text.chars().count();
    if (5..=500).contains(&chars) {
        Ok(text)
    } else {
        Err(EventError::Reason(chars))
    }
}

/// Escapes text as exclusive C14N writes it.
fn escape_into(out: &mut String, text: &str) {
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '\r' => out.push_str("&#xD;"),
            c => out.push(c),
        }
    }
}

fn leaf(out: &mut String, tag: &str, text: &str) {
    out.push('<');
    out.push_str(tag);
    out.push('>');
    escape_into(out, text);
    out.push_str("</");
    out.push_str(tag);
    out.push('>');
}

/// The unsigned `gGroupGesEve` holding one event, with its XML declaration.
pub fn build_event(input: &EventInput<'_>) -> Result<String, EventError> {
    if !(1..=MAX_EVENT_ID).contains(&input.id) {
        return Err(EventError::Id(input.id));
    }
    let reason = reason_text(input.reason)?;
    let mut xml = String::with_capacity(512 + reason.len());
    xml.push_str("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    xml.push_str(GROUP_OPEN);
    xml.push_str("<rGesEve><rEve Id=\"");
    xml.push_str(&input.id.to_string());
    xml.push_str("\">");
    leaf(
        &mut xml,
        "dFecFirma",
        &input.signed_at.format("%Y-%m-%dT%H:%M:%S").to_string(),
    );
    leaf(&mut xml, "dVerFor", "150");
    xml.push_str("<gGroupTiEvt>");
    match &input.kind {
        EventKind::Cancellation { cdc } => {
            digits("Id", cdc, 44, "a CDC of 44 digits")?;
            xml.push_str("<rGeVeCan>");
            leaf(&mut xml, "Id", cdc);
            leaf(&mut xml, "mOtEve", &reason);
            xml.push_str("</rGeVeCan>");
        }
        EventKind::Inutilization {
            timbrado,
            establishment,
            point,
            from,
            to,
            doc_type,
        } => {
            digits("dNumTim", timbrado, 8, "a timbrado of 8 digits")?;
            digits("dEst", establishment, 3, "an establishment of 3 digits")?;
            digits("dPunExp", point, 3, "an issuance point of 3 digits")?;
            let (from_text, to_text) = (number("dNumIn", *from)?, number("dNumFin", *to)?);
            if to < from {
                return Err(EventError::Field {
                    field: "dNumFin",
                    value: to_text,
                    expected: "at least dNumIn",
                });
            }
            if !(1..=9).contains(doc_type) {
                return Err(EventError::Field {
                    field: "iTiDE",
                    value: doc_type.to_string(),
                    expected: "a document type from 1 to 9",
                });
            }
            xml.push_str("<rGeVeInu>");
            leaf(&mut xml, "dNumTim", timbrado);
            leaf(&mut xml, "dEst", establishment);
            leaf(&mut xml, "dPunExp", point);
            leaf(&mut xml, "dNumIn", &from_text);
            leaf(&mut xml, "dNumFin", &to_text);
            leaf(&mut xml, "iTiDE", &doc_type.to_string());
            leaf(&mut xml, "mOtEve", &reason);
            xml.push_str("</rGeVeInu>");
        }
    }
    xml.push_str("</gGroupTiEvt></rEve></rGesEve></gGroupGesEve>");
    Ok(xml)
}

#[cfg(test)]
mod tests {
    use super::*;

    const CDC: &str = "01800695631001001000000122025011511234567899";

    fn at(text: &str) -> NaiveDateTime {
        NaiveDateTime::parse_from_str(text, "%Y-%m-%dT%H:%M:%S").unwrap()
    }

    fn cancel(reason: &str) -> EventInput<'_> {
        EventInput {
            id: 1,
            signed_at: at("2026-11-22T03:13:09"),
            reason,
            kind: EventKind::Cancellation { cdc: CDC },
        }
    }

    #[test]
    fn a_cancellation_is_the_vectors_unsigned_event_byte_for_byte() {
        // shared/sifen/vectors/generated/cancel-event-signed-selfsigned.xml without its Signature.
        let xml = build_event(&cancel("Error en la emision del documento")).unwrap();
        assert_eq!(
            xml,
            concat!(
                "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n",
                r#"<gGroupGesEve xmlns="http://ekuatia.set.gov.py/sifen/xsd" xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" xsi:schemaLocation="http://ekuatia.set.gov.py/sifen/xsd siRecepEvento_v150.xsd">"#,
                r#"<rGesEve><rEve Id="1"><dFecFirma>2026-11-22T03:13:09</dFecFirma><dVerFor>150</dVerFor><gGroupTiEvt><rGeVeCan><Id>01800695631001001000000122025011511234567899</Id><mOtEve>Error en la emision del documento</mOtEve></rGeVeCan></gGroupTiEvt></rEve></rGesEve>"#,
                "</gGroupGesEve>",
            )
        );
    }

    #[test]
    fn an_inutilization_names_one_number_of_its_series() {
        let xml = build_event(&EventInput {
            id: 42,
            signed_at: at("2026-11-22T10:00:00"),
            reason: "  Salto de\n numeracion  ",
            kind: EventKind::Inutilization {
                timbrado: "12558946",
                establishment: "001",
                point: "002",
                from: 17,
                to: 17,
                doc_type: 1,
            },
        })
        .unwrap();
        assert!(xml.contains(concat!(
            r#"<rGesEve><rEve Id="42"><dFecFirma>2026-11-22T10:00:00</dFecFirma><dVerFor>150</dVerFor>"#,
            "<gGroupTiEvt><rGeVeInu><dNumTim>12558946</dNumTim><dEst>001</dEst><dPunExp>002</dPunExp>",
            "<dNumIn>0000017</dNumIn><dNumFin>0000017</dNumFin><iTiDE>1</iTiDE>",
            "<mOtEve>Salto de numeracion</mOtEve></rGeVeInu></gGroupTiEvt></rEve></rGesEve></gGroupGesEve>"
        )));
    }

    #[test]
    fn text_is_escaped_as_c14n_writes_it() {
        let xml = build_event(&cancel("Precio <mal> & \"otro\"")).unwrap();
        assert!(xml.contains("<mOtEve>Precio &lt;mal&gt; &amp; \"otro\"</mOtEve>"));
    }

    #[test]
    fn wrong_fields_are_refused() {
        assert_eq!(build_event(&cancel("abc")), Err(EventError::Reason(3)));
        assert_eq!(
            build_event(&cancel(&"x".repeat(501))),
            Err(EventError::Reason(501))
        );
        let mut input = cancel("Error de emision");
        input.id = 0;
        assert_eq!(build_event(&input), Err(EventError::Id(0)));
        input.id = MAX_EVENT_ID + 1;
        assert!(build_event(&input).is_err());
        input.id = 1;
        input.kind = EventKind::Cancellation { cdc: "123" };
        assert!(matches!(
            build_event(&input),
            Err(EventError::Field { field: "Id", .. })
        ));
        let inu = |from, to, doc_type, timbrado| EventInput {
            id: 1,
            signed_at: at("2026-11-22T10:00:00"),
            reason: "Salto de numeracion",
            kind: EventKind::Inutilization {
                timbrado,
                establishment: "001",
                point: "001",
                from,
                to,
                doc_type,
            },
        };
        assert!(build_event(&inu(5, 4, 1, "12558946")).is_err());
        assert!(build_event(&inu(0, 0, 1, "12558946")).is_err());
        assert!(build_event(&inu(5, 5, 0, "12558946")).is_err());
        assert!(build_event(&inu(5, 5, 1, "1255894")).is_err());
        assert!(build_event(&inu(5, 6, 7, "12558946")).is_ok());
    }
}
