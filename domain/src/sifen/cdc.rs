//! The CDC (Código de Control), the 44-character key of a SIFEN document (`DE@Id`, Manual Técnico
//! v150 §10.1).
//!
//! Parse, don't validate: a [`Cdc`] exists only with the XSD's form (`tCDC`: 44 digits, the RUC's
//! last character may be A–D) and the modulo-11 check digit of its first 43 characters
//! ([`crate::check_digit::modulo11`], the same algorithm as the RUC's). [`Cdc::build`] composes
//! one from its parts; [`Cdc::parse`] checks one received as text.
//!
//! The security code (`dCodSeg`) is an input: it must come from a CSPRNG, and this crate draws
//! no randomness.

use chrono::{Datelike, NaiveDate};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::check_digit::modulo11;
use crate::ruc::Ruc;

/// Length of a CDC.
pub const LENGTH: usize = 44;

/// A CDC with a right check digit.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Cdc(String);

/// Why a CDC cannot be built or parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CdcError {
    /// Not 44 characters.
    #[error("a CDC has 44 characters, not {0}")]
    Length(usize),
    /// A character out of place (positions count from 0).
    #[error("character {position} of a CDC must be {expected}, not {found:?}")]
    Character {
        /// Where.
        position: usize,
        /// What was found.
        found: char,
        /// What may stand there.
        expected: &'static str,
    },
    /// The last digit is not the check digit of the first 43 characters.
    #[error("the check digit of CDC {base} is {expected}, not {given}")]
    CheckDigit {
        /// The first 43 characters.
        base: String,
        /// The digit they call for.
        expected: u8,
        /// The digit given.
        given: u8,
    },
    /// A part given to [`Cdc::build`] does not fit its place.
    #[error("{part}: {reason}")]
    Part {
        /// Which part (its XML field).
        part: &'static str,
        /// What is wrong with it.
        reason: String,
    },
}

/// The parts of a CDC, in their order. Lives for one [`Cdc::build`] call.
#[derive(Debug, Clone, Copy)]
pub struct CdcParts<'a> {
    /// `iTiDE`: 1 invoice, 4 autofactura, 5 credit note, 6 debit note, 7 remisión.
    pub document_type: u8,
    /// The issuer's RUC (`dRucEm`, left-padded to 8, and `dDVEmi`).
    pub ruc: &'a Ruc,
    /// `dEst`, three digits.
    pub establishment: &'a str,
    /// `dPunExp`, three digits.
    pub point: &'a str,
    /// `dNumDoc`, 1 to 9 999 999 (written with seven digits).
    pub number: u64,
    /// `iTipCont`: 1 natural person, 2 legal entity.
    pub taxpayer_type: u8,
    /// The date part of `dFeEmiDE`, in Paraguay.
    pub issue_date: NaiveDate,
    /// `iTipEmi`: 1 normal, 2 contingency.
    pub emission_type: u8,
    /// `dCodSeg`: nine digits, not all zero, drawn by the caller from a CSPRNG.
    pub security_code: &'a str,
}

fn part(part: &'static str, reason: impl Into<String>) -> CdcError {
    CdcError::Part {
        part,
        reason: reason.into(),
    }
}

fn digits(value: &str, n: usize) -> bool {
    value.len() == n && value.bytes().all(|b| b.is_ascii_digit())
}

impl Cdc {
    /// Composes the CDC of a document from its parts and appends the check digit.
    pub fn build(parts: &CdcParts<'_>) -> Result<Self, CdcError> {
        if !(1..=99).contains(&parts.document_type) {
            return Err(part("iTiDE", "must be 1 to 99"));
        }
        if !digits(parts.establishment, 3) {
            return Err(part("dEst", "must be three digits"));
        }
        if !digits(parts.point, 3) {
            return Err(part("dPunExp", "must be three digits"));
        }
        if !(1..=9_999_999).contains(&parts.number) {
            return Err(part("dNumDoc", "must be 1 to 9999999"));
        }
        if !matches!(parts.taxpayer_type, 1 | 2) {
            return Err(part("iTipCont", "must be 1 or 2"));
        }
        if !(1000..=9999).contains(&parts.issue_date.year()) {
            return Err(part("dFeEmiDE", "the year must have four digits"));
        }
        if !matches!(parts.emission_type, 1 | 2) {
            return Err(part("iTipEmi", "must be 1 or 2"));
        }
        let code = parts.security_code;
        if !digits(code, 9) || code.bytes().all(|b| b == b'0') {
            return Err(part("dCodSeg", "must be nine digits, not all zero"));
        }
        let number = parts.ruc.number();
        if number.len() > 8 {
            return Err(part("dRucEm", "must have at most eight characters"));
        }
        let mut text = String::with_capacity(LENGTH);
        text.push_str(&format!("{:02}", parts.document_type));
        text.push_str(&"0".repeat(8 - number.len()));
        text.push_str(number);
        text.push(char::from(b'0' + parts.ruc.check_digit()));
        text.push_str(parts.establishment);
        text.push_str(parts.point);
        text.push_str(&format!("{:07}", parts.number));
        text.push(char::from(b'0' + parts.taxpayer_type));
        text.push_str(&parts.issue_date.format("%Y%m%d").to_string());
        text.push(char::from(b'0' + parts.emission_type));
        text.push_str(code);
        let dv = modulo11(&text);
        text.push(char::from(b'0' + dv));
        // Everything above was checked, so the result is a CDC; parsing it again keeps one
        // definition of the form instead of trusting the construction.
        Self::parse(&text)
    }

    /// Checks a CDC: 44 characters of the XSD's form and the right check digit.
    pub fn parse(text: &str) -> Result<Self, CdcError> {
        let length = text.chars().count();
        if length != LENGTH {
            return Err(CdcError::Length(length));
        }
        for (position, c) in text.chars().enumerate() {
            let ok = c.is_ascii_digit() || (position == 9 && ('A'..='D').contains(&c));
            if !ok {
                let expected = if position == 9 {
                    "a digit or A-D"
                } else {
                    "a digit"
                };
                return Err(CdcError::Character {
                    position,
                    found: c,
                    expected,
                });
            }
        }
        // All ASCII from here on, so byte offsets are character offsets.
        let (base, last) = text.split_at(LENGTH - 1);
        let expected = modulo11(base);
        let given = last.as_bytes()[0] - b'0';
        if expected != given {
            return Err(CdcError::CheckDigit {
                base: base.to_owned(),
                expected,
                given,
            });
        }
        Ok(Self(text.to_owned()))
    }

    /// The 44 characters.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    fn digit(&self, at: usize) -> u8 {
        self.0.as_bytes()[at] - b'0'
    }

    /// `iTiDE`.
    pub fn document_type(&self) -> u8 {
        self.digit(0) * 10 + self.digit(1)
    }

    /// The issuer's RUC without padding and without check digit (`dRucEm`).
    pub fn ruc_number(&self) -> &str {
        self.0[2..10].trim_start_matches('0')
    }

    /// The RUC's check digit (`dDVEmi`).
    pub fn ruc_check_digit(&self) -> u8 {
        self.digit(10)
    }

    /// `dEst`.
    pub fn establishment(&self) -> &str {
        &self.0[11..14]
    }

    /// `dPunExp`.
    pub fn point(&self) -> &str {
        &self.0[14..17]
    }

    /// `dNumDoc`, seven digits.
    pub fn number(&self) -> &str {
        &self.0[17..24]
    }

    /// `iTipCont`.
    pub fn taxpayer_type(&self) -> u8 {
        self.digit(24)
    }

    /// The issue date as written, `AAAAMMDD`.
    pub fn issue_date(&self) -> &str {
        &self.0[25..33]
    }

    /// `iTipEmi`.
    pub fn emission_type(&self) -> u8 {
        self.digit(33)
    }

    /// `dCodSeg`.
    pub fn security_code(&self) -> &str {
        &self.0[34..43]
    }

    /// `dDVId`, the last digit.
    pub fn check_digit(&self) -> u8 {
        self.digit(43)
    }

    /// As the KuDE prints it: eleven groups of four separated by spaces.
    pub fn grouped(&self) -> String {
        let mut out = String::with_capacity(LENGTH + 10);
        for (i, c) in self.0.chars().enumerate() {
            if i > 0 && i % 4 == 0 {
                out.push(' ');
            }
            out.push(c);
        }
        out
    }
}

impl std::fmt::Display for Cdc {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::str::FromStr for Cdc {
    type Err = CdcError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s)
    }
}

impl AsRef<str> for Cdc {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl Serialize for Cdc {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.0)
    }
}

impl<'de> Deserialize<'de> for Cdc {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        Self::parse(&text).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The manual's example (MT p.57–58).
    const MANUAL: &str = "01444444017001001001452822017012515873260988";

    fn date(y: i32, m: u32, d: u32) -> NaiveDate {
        NaiveDate::from_ymd_opt(y, m, d).expect("a date")
    }

    #[test]
    fn the_manuals_example_is_built_from_its_parts() {
        let ruc = Ruc::from_number("44444401").expect("ruc");
        assert_eq!(ruc.check_digit(), 7);
        let cdc = Cdc::build(&CdcParts {
            document_type: 1,
            ruc: &ruc,
            establishment: "001",
            point: "001",
            number: 14528,
            taxpayer_type: 2,
            issue_date: date(2017, 1, 25),
            emission_type: 1,
            security_code: "587326098",
        })
        .expect("valid parts");
        assert_eq!(cdc.as_str(), MANUAL);
        assert_eq!(cdc.check_digit(), 8);
        assert_eq!(
            cdc.grouped(),
            "0144 4444 0170 0100 1001 4528 2201 7012 5158 7326 0988"
        );
    }

    #[test]
    fn the_generated_vectors_are_built_from_their_parts() {
        let ruc = Ruc::parse("80069563-1").expect("ruc");
        let parts = CdcParts {
            document_type: 1,
            ruc: &ruc,
            establishment: "001",
            point: "001",
            number: 1,
            taxpayer_type: 2,
            issue_date: date(2025, 1, 15),
            emission_type: 1,
            security_code: "123456789",
        };
        assert_eq!(
            Cdc::build(&parts).expect("fe").as_str(),
            "01800695631001001000000122025011511234567899"
        );
        let nc = CdcParts {
            document_type: 5,
            number: 2,
            issue_date: date(2025, 1, 16),
            security_code: "987654321",
            ..parts
        };
        assert_eq!(
            Cdc::build(&nc).expect("nc").as_str(),
            "05800695631001001000000222025011619876543217"
        );
    }

    #[test]
    fn the_set_examples_parse_and_expose_their_parts() {
        for text in [
            "01800138848001001123456412018121817819792239",
            "05009290230001001000005212019040910000000345",
            "06009290230001001000002612019040917819792232",
            "07800044649001001900018322019031217200146403",
        ] {
            let cdc = Cdc::parse(text).expect(text);
            assert_eq!(cdc.to_string(), text);
        }
        let cdc = Cdc::parse(MANUAL).expect("manual");
        assert_eq!(cdc.document_type(), 1);
        assert_eq!((cdc.ruc_number(), cdc.ruc_check_digit()), ("44444401", 7));
        assert_eq!((cdc.establishment(), cdc.point()), ("001", "001"));
        assert_eq!(cdc.number(), "0014528");
        assert_eq!(cdc.taxpayer_type(), 2);
        assert_eq!(cdc.issue_date(), "20170125");
        assert_eq!(cdc.emission_type(), 1);
        assert_eq!(cdc.security_code(), "587326098");
        let small = Cdc::parse("05009290230001001000005212019040910000000345").expect("nc");
        assert_eq!(small.ruc_number(), "929023");
    }

    #[test]
    fn malformed_cdcs_name_their_fault() {
        assert_eq!(Cdc::parse(""), Err(CdcError::Length(0)));
        assert_eq!(Cdc::parse(&MANUAL[..43]), Err(CdcError::Length(43)));
        assert_eq!(Cdc::parse(&format!("{MANUAL}0")), Err(CdcError::Length(45)));
        let mut letter = MANUAL.to_owned();
        letter.replace_range(3..4, "X");
        assert!(matches!(
            Cdc::parse(&letter),
            Err(CdcError::Character {
                position: 3,
                found: 'X',
                ..
            })
        ));
        let mut ninth = MANUAL.to_owned();
        ninth.replace_range(9..10, "E");
        assert!(matches!(
            Cdc::parse(&ninth),
            Err(CdcError::Character {
                position: 9,
                found: 'E',
                ..
            })
        ));
        ninth.replace_range(9..10, "D");
        assert!(matches!(Cdc::parse(&ninth), Err(CdcError::CheckDigit { .. })));
        assert_eq!(
            Cdc::parse("01444444017001001001452822017012515873260987"),
            Err(CdcError::CheckDigit {
                base: MANUAL[..43].to_owned(),
                expected: 8,
                given: 7
            })
        );
        assert!(matches!(
            Cdc::parse("0144444401700100100145282201701251587326098ñ"),
            Err(CdcError::Character { position: 43, .. })
        ));
    }

    #[test]
    fn a_ruc_ending_in_a_letter_keeps_it_and_weighs_its_ascii_code() {
        let ruc = Ruc::from_number("1234567A").expect("letter suffix");
        let cdc = Cdc::build(&CdcParts {
            document_type: 1,
            ruc: &ruc,
            establishment: "001",
            point: "002",
            number: 3,
            taxpayer_type: 1,
            issue_date: date(2026, 3, 2),
            emission_type: 1,
            security_code: "000000001",
        })
        .expect("valid");
        assert_eq!(&cdc.as_str()[2..10], "1234567A");
        assert_eq!(cdc.ruc_number(), "1234567A");
        assert_eq!(Cdc::parse(cdc.as_str()), Ok(cdc));
    }

    #[test]
    fn parts_that_do_not_fit_are_refused() {
        let ruc = Ruc::parse("80069563-1").expect("ruc");
        let good = CdcParts {
            document_type: 1,
            ruc: &ruc,
            establishment: "001",
            point: "001",
            number: 1,
            taxpayer_type: 2,
            issue_date: date(2026, 3, 2),
            emission_type: 1,
            security_code: "123456789",
        };
        for (bad, field) in [
            (
                CdcParts {
                    document_type: 0,
                    ..good
                },
                "iTiDE",
            ),
            (
                CdcParts {
                    establishment: "1",
                    ..good
                },
                "dEst",
            ),
            (CdcParts { point: "00a", ..good }, "dPunExp"),
            (CdcParts { number: 0, ..good }, "dNumDoc"),
            (
                CdcParts {
                    number: 10_000_000,
                    ..good
                },
                "dNumDoc",
            ),
            (
                CdcParts {
                    taxpayer_type: 3,
                    ..good
                },
                "iTipCont",
            ),
            (
                CdcParts {
                    issue_date: date(10_000, 1, 1),
                    ..good
                },
                "dFeEmiDE",
            ),
            (
                CdcParts {
                    emission_type: 0,
                    ..good
                },
                "iTipEmi",
            ),
            (
                CdcParts {
                    security_code: "000000000",
                    ..good
                },
                "dCodSeg",
            ),
            (
                CdcParts {
                    security_code: "12345678",
                    ..good
                },
                "dCodSeg",
            ),
        ] {
            assert!(
                matches!(Cdc::build(&bad), Err(CdcError::Part { part, .. }) if part == field),
                "{field}"
            );
        }
    }

    #[test]
    fn serde_uses_the_text_and_checks_the_digit() {
        let cdc: Cdc = serde_json::from_str(&format!("\"{MANUAL}\"")).expect("valid");
        assert_eq!(
            serde_json::to_string(&cdc).expect("json"),
            format!("\"{MANUAL}\"")
        );
        assert!(serde_json::from_str::<Cdc>("\"01444444017001001001452822017012515873260980\"").is_err());
    }

    proptest! {
        #[test]
        fn every_built_cdc_parses_back_with_its_parts_and_no_other_check_digit(
            document_type in prop::sample::select(vec![1u8, 4, 5, 6, 7]),
            ruc_number in 100u32..99_999_999,
            establishment in 1u16..1000,
            point in 1u16..1000,
            number in 1u64..=9_999_999,
            taxpayer_type in 1u8..=2,
            days in 0i64..20_000,
            code in 1u32..=999_999_999,
            bump in 1u8..10,
        ) {
            let ruc = Ruc::from_number(&ruc_number.to_string()).expect("ruc");
            let establishment = format!("{establishment:03}");
            let point = format!("{point:03}");
            let code = format!("{code:09}");
            let issue_date = date(2018, 11, 22) + chrono::TimeDelta::days(days);
            let cdc = Cdc::build(&CdcParts {
                document_type, ruc: &ruc, establishment: &establishment, point: &point, number,
                taxpayer_type, issue_date, emission_type: 1, security_code: &code,
            }).expect("valid parts");
            prop_assert_eq!(Cdc::parse(cdc.as_str()), Ok(cdc.clone()));
            prop_assert_eq!(cdc.document_type(), document_type);
            prop_assert_eq!(cdc.ruc_number(), ruc.number());
            prop_assert_eq!(cdc.ruc_check_digit(), ruc.check_digit());
            prop_assert_eq!(cdc.establishment(), establishment.as_str());
            prop_assert_eq!(cdc.number(), format!("{number:07}"));
            prop_assert_eq!(cdc.issue_date(), issue_date.format("%Y%m%d").to_string());
            prop_assert_eq!(cdc.security_code(), code.as_str());
            // Any other last digit is refused.
            let mut bytes = cdc.as_str().as_bytes().to_vec();
            bytes[LENGTH - 1] = b'0' + (bytes[LENGTH - 1] - b'0' + bump) % 10;
            let changed = String::from_utf8(bytes).expect("ascii");
            let refused = matches!(Cdc::parse(&changed), Err(CdcError::CheckDigit { .. }));
            prop_assert!(refused, "{}", changed);
        }
    }
}
