//! Registry states and the `state` filter.
//!
//! The registry's own values are kept (in search form, so `Suspensión temporal` and
//! `SUSPENSION TEMPORAL` are one state). A filter value is compared in the same form, with `_`
//! accepted for the space (`SUSPENSION_TEMPORAL`).

use crate::lookup::normalize::normalize;

/// The states DNIT's files are known to use (as other lookup services list them); the registry
/// may hold others, which are then known too.
pub const KNOWN_STATES: [&str; 5] = [
    "ACTIVO",
    "SUSPENSION TEMPORAL",
    "CANCELADO",
    "BLOQUEADO",
    "CANCELADO DEFINITIVO",
];

/// The state `ACTIVO`.
pub const ACTIVE: &str = "ACTIVO";

/// A filter value in the form states are stored in.
pub fn filter_form(value: &str) -> String {
    normalize(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filter_values_ignore_case_accents_and_underscores() {
        assert_eq!(filter_form("activo"), "ACTIVO");
        assert_eq!(filter_form("Suspensión_temporal"), "SUSPENSION TEMPORAL");
        assert_eq!(filter_form(" cancelado  definitivo "), "CANCELADO DEFINITIVO");
    }
}
