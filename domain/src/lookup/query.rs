//! What a search or lookup request asks for, parsed before anything is searched.
//!
//! `q` made of digits (dots and spaces allowed, as in `4.567.890`), optionally ending in a letter
//! A–D and optionally followed by `-DV`, is a RUC: without a DV it matches RUCs by prefix, with
//! one it matches that RUC and DV exactly. Any other `q` is a name, compared word by word in
//! search form ([`crate::lookup::normalize`]).

use crate::lookup::normalize::words;
use crate::ruc::{Ruc, RucError};

/// Fewest characters of `q` (after trimming).
pub const MIN_QUERY_CHARS: usize = 3;
/// Most characters of `q`.
pub const MAX_QUERY_CHARS: usize = 200;
/// Most words of a name query.
pub const MAX_QUERY_WORDS: usize = 12;
/// Results per page when `limit` is not given.
pub const DEFAULT_LIMIT: usize = 20;
/// Largest `limit`.
pub const MAX_LIMIT: usize = 100;

/// A parsed `q`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SearchQuery {
    /// RUCs starting with `prefix`; with `dv`, only the RUC `prefix` itself with that check digit.
    Ruc {
        /// Upper-case digits, possibly ending in A–D.
        prefix: String,
        /// The check digit given after `-`.
        dv: Option<u8>,
    },
    /// Names containing these words (search form, in the order typed).
    Name {
        /// At least one word.
        words: Vec<String>,
    },
}

/// Why `q` cannot be searched.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum QueryError {
    /// Fewer than [`MIN_QUERY_CHARS`] characters.
    #[error("q must have at least {MIN_QUERY_CHARS} characters")]
    TooShort,
    /// More than [`MAX_QUERY_CHARS`] characters.
    #[error("q must have at most {MAX_QUERY_CHARS} characters")]
    TooLong,
    /// No letter or digit at all.
    #[error("q must contain letters or digits")]
    NoWords,
    /// More than [`MAX_QUERY_WORDS`] words.
    #[error("q must have at most {MAX_QUERY_WORDS} words")]
    TooManyWords,
}

/// The RUC part of `q`, if `q` is a RUC (see the module documentation).
fn as_ruc(q: &str) -> Option<SearchQuery> {
    let compact: String = q.chars().filter(|c| !matches!(c, '.' | ' ')).collect();
    let (number, dv) = match compact.split_once('-') {
        Some((number, dv)) => {
            let dv = match dv.as_bytes() {
                [d] if d.is_ascii_digit() => d - b'0',
                _ => return None,
            };
            (number, Some(dv))
        }
        None => (compact.as_str(), None),
    };
    let (last, body) = number.as_bytes().split_last()?;
    let last_ok =
        last.is_ascii_digit() || (!body.is_empty() && matches!(last.to_ascii_uppercase(), b'A'..=b'D'));
    (last_ok && body.iter().all(u8::is_ascii_digit)).then(|| SearchQuery::Ruc {
        prefix: number.to_ascii_uppercase(),
        dv,
    })
}

/// Parses `q`.
pub fn parse_query(q: &str) -> Result<SearchQuery, QueryError> {
    let q = q.trim();
    let chars = q.chars().count();
    if chars < MIN_QUERY_CHARS {
        return Err(QueryError::TooShort);
    }
    if chars > MAX_QUERY_CHARS {
        return Err(QueryError::TooLong);
    }
    if let Some(ruc) = as_ruc(q) {
        return Ok(ruc);
    }
    let words = words(q);
    if words.is_empty() {
        return Err(QueryError::NoWords);
    }
    if words.len() > MAX_QUERY_WORDS {
        return Err(QueryError::TooManyWords);
    }
    Ok(SearchQuery::Name { words })
}

/// The path of `GET /api/ruc/{ruc_dv_or_ruc}`: a RUC with or without its check digit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RucLookup {
    /// The number (a valid RUC form).
    pub number: String,
    /// The check digit sent, if any.
    pub given_dv: Option<u8>,
    /// The check digit modulo 11 gives the number.
    pub computed_dv: u8,
}

impl RucLookup {
    /// Parses `80069563-1` or `80069563`. Only the form is checked here: whether a given DV is
    /// right is decided against the registry's record when there is one (its DV is the
    /// authority), else against modulo 11 ([`RucLookup::check_digit_error`]).
    pub fn parse(text: &str) -> Result<Self, RucError> {
        let text = text.trim();
        let (number, given_dv) = match text.split_once('-') {
            Some((number, dv)) => match dv.as_bytes() {
                [d] if d.is_ascii_digit() => (number, Some(d - b'0')),
                _ => return Err(RucError::Format),
            },
            None => (text, None),
        };
        let ruc = Ruc::from_number(&number.to_ascii_uppercase())?;
        Ok(Self {
            number: ruc.number().to_owned(),
            given_dv,
            computed_dv: ruc.check_digit(),
        })
    }

    /// The error for a DV that does not belong, given the DV of the registry's record if there
    /// is one; `None` when no DV was sent or it is right.
    pub fn check_digit_error(&self, record_dv: Option<u8>) -> Option<RucError> {
        let given = self.given_dv?;
        let expected = record_dv.unwrap_or(self.computed_dv);
        (given != expected).then(|| RucError::CheckDigit {
            number: self.number.clone(),
            expected,
            given,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ruc(prefix: &str, dv: Option<u8>) -> SearchQuery {
        SearchQuery::Ruc {
            prefix: prefix.into(),
            dv,
        }
    }

    #[test]
    fn digits_are_a_ruc_prefix_and_a_dv_makes_it_exact() {
        assert_eq!(parse_query("800"), Ok(ruc("800", None)));
        assert_eq!(parse_query(" 80069563-1 "), Ok(ruc("80069563", Some(1))));
        assert_eq!(parse_query("4.567.890"), Ok(ruc("4567890", None)));
        assert_eq!(parse_query("1234567a"), Ok(ruc("1234567A", None)));
    }

    #[test]
    fn anything_else_is_a_name() {
        assert_eq!(
            parse_query("Gonzalez, Juan"),
            Ok(SearchQuery::Name {
                words: vec!["GONZALEZ".into(), "JUAN".into()]
            })
        );
        assert_eq!(
            parse_query("farmacia 2000"),
            Ok(SearchQuery::Name {
                words: vec!["FARMACIA".into(), "2000".into()]
            })
        );
        assert!(matches!(parse_query("800-12"), Ok(SearchQuery::Name { .. })));
    }

    #[test]
    fn short_long_and_empty_queries_are_refused() {
        assert_eq!(parse_query("ab"), Err(QueryError::TooShort));
        assert_eq!(parse_query("  ñu "), Err(QueryError::TooShort));
        assert_eq!(parse_query("80"), Err(QueryError::TooShort));
        assert_eq!(parse_query("...."), Err(QueryError::NoWords));
        assert_eq!(parse_query(&"a".repeat(201)), Err(QueryError::TooLong));
        assert_eq!(parse_query(&"ab ".repeat(13)), Err(QueryError::TooManyWords));
    }

    #[test]
    fn a_lookup_takes_the_ruc_with_or_without_its_dv() {
        let bare = RucLookup::parse("80069563").expect("bare");
        assert_eq!(
            (bare.number.as_str(), bare.given_dv, bare.computed_dv),
            ("80069563", None, 1)
        );
        assert_eq!(bare.check_digit_error(None), None);
        let full = RucLookup::parse("80069563-1").expect("full");
        assert_eq!(full.check_digit_error(None), None);
        let wrong = RucLookup::parse("80069563-7").expect("form is fine");
        assert!(matches!(
            wrong.check_digit_error(None),
            Some(RucError::CheckDigit {
                expected: 1,
                given: 7,
                ..
            })
        ));
        assert_eq!(
            wrong.check_digit_error(Some(7)),
            None,
            "the record's DV is the authority"
        );
        assert_eq!(RucLookup::parse("80069563-x"), Err(RucError::Format));
        assert_eq!(RucLookup::parse("abc"), Err(RucError::Format));
    }
}
