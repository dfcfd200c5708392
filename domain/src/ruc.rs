//! The RUC (Registro Único de Contribuyentes), Paraguay's taxpayer number, with its check digit.
//!
//! Parse, don't validate: a [`Ruc`] exists only with a number of the XSD's `tRuc` form
//! (`[1-9][0-9]*[0-9A-D]?`, 3 to 8 characters) and the check digit that belongs to it.

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::check_digit::modulo11;

/// A taxpayer number with its check digit.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Ruc {
    number: String,
    dv: u8,
}

/// Why a text is not a RUC.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RucError {
    /// Not of the form `NNNNNNNN-D` (or `NNNNNNNN` where the check digit may be computed).
    #[error("a RUC is 3 to 8 characters ([1-9][0-9]*[0-9A-D]?) followed by '-' and one check digit")]
    Format,
    /// The check digit does not belong to the number.
    #[error("the check digit of RUC {number} is {expected}, not {given}")]
    CheckDigit {
        /// The number.
        number: String,
        /// The digit it should have.
        expected: u8,
        /// The digit given.
        given: u8,
    },
}

fn valid_number(number: &str) -> bool {
    let bytes = number.as_bytes();
    let (last, body) = match bytes.split_last() {
        Some(split) => split,
        None => return false,
    };
    (3..=8).contains(&bytes.len())
        && matches!(bytes[0], b'1'..=b'9')
        && body.iter().all(u8::is_ascii_digit)
        && (last.is_ascii_digit() || (b'A'..=b'D').contains(last))
}

impl Ruc {
    /// Parses `80069563-1`: the check digit must match.
    pub fn parse(text: &str) -> Result<Self, RucError> {
        let (number, dv) = text.trim().split_once('-').ok_or(RucError::Format)?;
        let given = match dv.as_bytes() {
            [d] if d.is_ascii_digit() => d - b'0',
            _ => return Err(RucError::Format),
        };
        let ruc = Self::from_number(number)?;
        if ruc.dv != given {
            return Err(RucError::CheckDigit {
                number: ruc.number,
                expected: ruc.dv,
                given,
            });
        }
        Ok(ruc)
    }

    /// Parses `80069563` or `80069563-1` (lookups accept either).
    pub fn parse_lenient(text: &str) -> Result<Self, RucError> {
        let text = text.trim();
        if text.contains('-') {
            Self::parse(text)
        } else {
            Self::from_number(text)
        }
    }

    /// The RUC of a number without check digit (the digit is computed).
    pub fn from_number(number: &str) -> Result<Self, RucError> {
        if !valid_number(number) {
            return Err(RucError::Format);
        }
        Ok(Self {
            number: number.to_owned(),
            dv: modulo11(number),
        })
    }

    /// The number without check digit (`dRucEm`).
    pub fn number(&self) -> &str {
        &self.number
    }

    /// The check digit (`dDVEmi`).
    pub fn check_digit(&self) -> u8 {
        self.dv
    }

    /// Whether a taxpayer with this number is a legal entity (80 000 000 and above).
    pub fn is_legal_entity(&self) -> bool {
        self.number.parse::<u64>().is_ok_and(|n| n >= 80_000_000)
    }
}

impl std::fmt::Display for Ruc {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}-{}", self.number, self.dv)
    }
}

impl std::str::FromStr for Ruc {
    type Err = RucError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s)
    }
}

impl Serialize for Ruc {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Ruc {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        Self::parse(&text).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn the_set_test_emitter_parses_and_prints_back() {
        let ruc = Ruc::parse("80069563-1").expect("valid");
        assert_eq!((ruc.number(), ruc.check_digit()), ("80069563", 1));
        assert_eq!(ruc.to_string(), "80069563-1");
        assert!(ruc.is_legal_entity());
        assert!(
            !Ruc::from_number("4444440").expect("valid").is_legal_entity(),
            "a person's RUC"
        );
    }

    #[test]
    fn a_wrong_check_digit_names_the_right_one() {
        assert_eq!(
            Ruc::parse("80069563-2"),
            Err(RucError::CheckDigit {
                number: "80069563".into(),
                expected: 1,
                given: 2
            })
        );
    }

    #[test]
    fn malformed_rucs_are_refused() {
        for bad in [
            "",
            "80069563",
            "-1",
            "0069563-1",
            "12-1",
            "123456789-0",
            "8006956E-1",
            "80069563-12",
            "8006 9563-1",
            "80069563-x",
        ] {
            assert_eq!(Ruc::parse(bad), Err(RucError::Format), "{bad:?}");
        }
    }

    #[test]
    fn lookups_take_the_number_with_or_without_its_digit() {
        assert_eq!(
            Ruc::parse_lenient("80069563").expect("bare").to_string(),
            "80069563-1"
        );
        assert_eq!(
            Ruc::parse_lenient(" 80069563-1 ").expect("full").to_string(),
            "80069563-1"
        );
        assert!(Ruc::parse_lenient("80069563-7").is_err());
    }

    #[test]
    fn a_ruc_ending_in_a_letter_is_accepted_with_its_digit() {
        let ruc = Ruc::from_number("1234567A").expect("letter suffix");
        assert_eq!(Ruc::parse(&ruc.to_string()), Ok(ruc));
    }

    #[test]
    fn serde_uses_the_printed_form_and_checks_the_digit() {
        let ruc: Ruc = serde_json::from_str("\"80013884-8\"").expect("valid");
        assert_eq!(serde_json::to_string(&ruc).expect("json"), "\"80013884-8\"");
        assert!(serde_json::from_str::<Ruc>("\"80013884-1\"").is_err());
    }

    proptest! {
        #[test]
        fn every_number_round_trips_and_only_its_own_digit_is_accepted(n in 100u32..99_999_999, other in 0u8..10) {
            let number = n.to_string();
            let ruc = Ruc::from_number(&number).expect("valid number");
            prop_assert_eq!(Ruc::parse(&ruc.to_string()), Ok(ruc.clone()));
            if other != ruc.check_digit() {
                let is_check_digit_error = matches!(
                    Ruc::parse(&format!("{number}-{other}")),
                    Err(RucError::CheckDigit { .. })
                );
                prop_assert!(is_check_digit_error);
            }
        }
    }
}
