//! One line of a DNIT registry file (`rucN.txt`), read robustly.
//!
//! The format is `RUC|NAME|DV|OLD_RUC|STATE|`: no header, `|` between fields and after the last
//! one. A name may itself contain `|`, so the RUC is read from the left and the DV, old code and
//! state from the right; whatever lies between is the name. A missing trailing `|` is tolerated.
//! Lines are UTF-8; a line that is not valid UTF-8 is read as Windows-1252 (Latin-1 with the
//! printable 0x80–0x9F block), which every byte sequence decodes in, and counted as such.
//! A line that still cannot be a row ([`LineError`]) is *broken*: the importer counts and reports
//! it with its line number, never drops it silently.

use std::borrow::Cow;

use crate::check_digit::modulo11;
use crate::lookup::normalize::normalize;
use crate::ruc::Ruc;

/// One taxpayer as the registry lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegistryRow {
    /// The RUC number without check digit (a valid RUC form, upper case).
    pub ruc: String,
    /// The name as published (trimmed), `APELLIDOS, NOMBRES` for persons.
    pub name: String,
    /// The check digit the registry gives.
    pub dv: u8,
    /// The legacy alphanumeric code (`RUC ANTERIOR`), possibly empty.
    pub old_ruc: String,
    /// The state in search form (`ACTIVO`, `SUSPENSION TEMPORAL`, …).
    pub state: String,
}

impl RegistryRow {
    /// Whether the registry's DV differs from the modulo-11 digit of the number (kept as
    /// published, but counted by the importer).
    pub fn dv_differs_from_modulo11(&self) -> bool {
        modulo11(&self.ruc) != self.dv
    }
}

/// How a line's bytes were decoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encoding {
    /// Valid UTF-8.
    Utf8,
    /// Not UTF-8; read as Windows-1252 / Latin-1.
    Latin1,
}

/// Why a line is not a row.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LineError {
    /// Fewer than the five fields.
    #[error("expected 5 fields RUC|NAME|DV|OLD_RUC|STATE|, found {found}")]
    TooFewFields {
        /// Fields found.
        found: usize,
    },
    /// The RUC is not 3–8 characters of the form `[1-9][0-9]*[0-9A-D]?`.
    #[error("RUC {0:?} is not a RUC number (3 to 8 characters, [1-9][0-9]*[0-9A-D]?)")]
    Ruc(String),
    /// The name is empty.
    #[error("the name is empty")]
    EmptyName,
    /// The DV is not one digit.
    #[error("check digit {0:?} is not one digit")]
    Dv(String),
    /// The state is empty.
    #[error("the state is empty")]
    EmptyState,
    /// A control character (other than a tab) inside the line.
    #[error("control character U+{0:04X} in the line")]
    ControlCharacter(u32),
}

/// What a line turned out to be.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Line {
    /// Empty or only whitespace.
    Blank,
    /// A row.
    Row(RegistryRow, Encoding),
    /// Not a row.
    Broken(LineError, Encoding),
}

/// Windows-1252's printable characters in 0x80–0x9F; `None` where it has none.
const CP1252_HIGH: [Option<char>; 32] = [
    Some('€'),
    None,
    Some('‚'),
    Some('ƒ'),
    Some('„'),
    Some('…'),
    Some('†'),
    Some('‡'),
    Some('ˆ'),
    Some('‰'),
    Some('Š'),
    Some('‹'),
    Some('Œ'),
    None,
    Some('Ž'),
    None,
    None,
    Some('‘'),
    Some('’'),
    Some('“'),
    Some('”'),
    Some('•'),
    Some('–'),
    Some('—'),
    Some('˜'),
    Some('™'),
    Some('š'),
    Some('›'),
    Some('œ'),
    None,
    Some('ž'),
    Some('Ÿ'),
];

/// Decodes a line (without its line break): UTF-8, else Windows-1252 (an undefined byte becomes
/// the C1 control of the same value, which [`parse_line`] then refuses).
pub fn decode(bytes: &[u8]) -> (Cow<'_, str>, Encoding) {
    match std::str::from_utf8(bytes) {
        Ok(text) => (Cow::Borrowed(text), Encoding::Utf8),
        Err(_) => {
            let text = bytes
                .iter()
                .map(|&b| match b {
                    0x80..=0x9F => CP1252_HIGH[usize::from(b - 0x80)].unwrap_or(char::from(b)),
                    _ => char::from(b),
                })
                .collect();
            (Cow::Owned(text), Encoding::Latin1)
        }
    }
}

/// Reads one line (its bytes without `\n`; a final `\r` and a UTF-8 byte-order mark are
/// ignored).
pub fn parse_line(bytes: &[u8]) -> Line {
    let bytes = bytes.strip_suffix(b"\r").unwrap_or(bytes);
    let bytes = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes);
    let (text, encoding) = decode(bytes);
    if text.trim().is_empty() {
        return Line::Blank;
    }
    match parse_fields(&text) {
        Ok(row) => Line::Row(row, encoding),
        Err(err) => Line::Broken(err, encoding),
    }
}

fn parse_fields(text: &str) -> Result<RegistryRow, LineError> {
    if let Some(c) = text.chars().find(|&c| c.is_control() && c != '\t') {
        return Err(LineError::ControlCharacter(u32::from(c)));
    }
    let text = text.trim_end();
    let text = text.strip_suffix('|').unwrap_or(text);
    let found = text.split('|').count();
    let (ruc, rest) = text.split_once('|').ok_or(LineError::TooFewFields { found })?;
    let mut right = rest.rsplitn(4, '|');
    let (Some(state), Some(old_ruc), Some(dv), Some(name)) =
        (right.next(), right.next(), right.next(), right.next())
    else {
        return Err(LineError::TooFewFields { found });
    };
    let ruc = ruc.trim().to_ascii_uppercase();
    if Ruc::from_number(&ruc).is_err() {
        return Err(LineError::Ruc(ruc));
    }
    let name = name.trim();
    if name.is_empty() {
        return Err(LineError::EmptyName);
    }
    let dv = match dv.trim().as_bytes() {
        [d] if d.is_ascii_digit() => d - b'0',
        _ => return Err(LineError::Dv(dv.trim().to_owned())),
    };
    let state = normalize(state);
    if state.is_empty() {
        return Err(LineError::EmptyState);
    }
    Ok(RegistryRow {
        ruc,
        name: name.to_owned(),
        dv,
        old_ruc: old_ruc.trim().to_owned(),
        state,
    })
}

/// Writes a row as a registry line (with the trailing `|` and no line break).
pub fn format_line(row: &RegistryRow) -> String {
    format!(
        "{}|{}|{}|{}|{}|",
        row.ruc, row.name, row.dv, row.old_ruc, row.state
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn row(line: &[u8]) -> RegistryRow {
        match parse_line(line) {
            Line::Row(row, _) => row,
            other => panic!("not a row: {other:?}"),
        }
    }

    #[test]
    fn a_plain_line_is_read_with_its_trailing_bar() {
        let r = row(b"80069563|DE GENERACION ELECTRONICA S.A.|1|DEGE800695T|ACTIVO|");
        assert_eq!(r.ruc, "80069563");
        assert_eq!(r.name, "DE GENERACION ELECTRONICA S.A.");
        assert_eq!(
            (r.dv, r.old_ruc.as_str(), r.state.as_str()),
            (1, "DEGE800695T", "ACTIVO")
        );
        assert!(!r.dv_differs_from_modulo11());
    }

    #[test]
    fn a_bar_inside_the_name_stays_in_the_name() {
        let r = row(b"4567890|GONZALEZ | HIJOS, JUAN|3||SUSPENSION TEMPORAL|");
        assert_eq!(r.name, "GONZALEZ | HIJOS, JUAN");
        assert_eq!(r.state, "SUSPENSION TEMPORAL");
        assert_eq!(r.old_ruc, "");
        let r = row(b"4567890|A|B|C|3|X|ACTIVO|\r");
        assert_eq!((r.name.as_str(), r.dv, r.old_ruc.as_str()), ("A|B|C", 3, "X"));
    }

    #[test]
    fn a_missing_trailing_bar_is_tolerated() {
        let r = row(b"4567890|ROJAS, ANA|3|ROAN|CANCELADO");
        assert_eq!((r.name.as_str(), r.state.as_str()), ("ROJAS, ANA", "CANCELADO"));
    }

    #[test]
    fn latin1_lines_are_decoded_and_flagged() {
        let line = b"4567890|NU\xd1EZ CA\xd1ETE, JOS\xc9|3||ACTIVO|";
        match parse_line(line) {
            Line::Row(r, Encoding::Latin1) => assert_eq!(r.name, "NUÑEZ CAÑETE, JOSÉ"),
            other => panic!("{other:?}"),
        }
        match parse_line("4567890|NUÑEZ, JOSÉ|3||ACTIVO|".as_bytes()) {
            Line::Row(r, Encoding::Utf8) => assert_eq!(r.name, "NUÑEZ, JOSÉ"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn blank_and_broken_lines_say_what_is_wrong() {
        assert_eq!(parse_line(b""), Line::Blank);
        assert_eq!(parse_line(b"   \r"), Line::Blank);
        let broken = |line: &[u8]| match parse_line(line) {
            Line::Broken(err, _) => err,
            other => panic!("not broken: {other:?}"),
        };
        assert_eq!(
            broken(b"4567890|ROJAS, ANA|3|"),
            LineError::TooFewFields { found: 3 }
        );
        assert_eq!(broken(b"no bars at all"), LineError::TooFewFields { found: 1 });
        assert_eq!(broken(b"ABC|ROJAS, ANA|3||ACTIVO|"), LineError::Ruc("ABC".into()));
        assert_eq!(broken(b"4567890| |3||ACTIVO|"), LineError::EmptyName);
        assert_eq!(broken(b"4567890|ROJAS|33||ACTIVO|"), LineError::Dv("33".into()));
        assert_eq!(broken(b"4567890|ROJAS|3||  |"), LineError::EmptyState);
        assert_eq!(
            broken(b"4567890|RO\x00JAS|3||ACTIVO|"),
            LineError::ControlCharacter(0)
        );
        assert_eq!(
            broken(b"4567890|RO\x81JAS|3||ACTIVO|"),
            LineError::ControlCharacter(0x81)
        );
    }

    #[test]
    fn a_byte_order_mark_is_not_part_of_the_ruc() {
        assert_eq!(row(b"\xEF\xBB\xBF4567890|ROJAS|3||ACTIVO|").ruc, "4567890");
    }

    proptest! {
        #[test]
        fn a_formatted_row_reads_back(
            n in 100u32..99_999_999,
            name in "[A-Z][A-Z ,.|Ñ]{0,30}[A-Z]",
            old in "[A-Z0-9]{0,11}",
            state in prop::sample::select(vec!["ACTIVO", "CANCELADO", "SUSPENSION TEMPORAL"]),
        ) {
            let ruc = Ruc::from_number(&n.to_string()).expect("valid");
            let original = RegistryRow {
                ruc: ruc.number().to_owned(),
                name,
                dv: ruc.check_digit(),
                old_ruc: old,
                state: state.to_owned(),
            };
            prop_assert_eq!(row(format_line(&original).as_bytes()), original);
        }
    }
}
