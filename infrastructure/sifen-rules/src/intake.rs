//! Rules that kuatia's intake also checks before a document is numbered, with the issue code it
//! answers (docs/issue-codes.md). Data only: the checks themselves are in the domain's
//! validation; `tests/tests/it/sifen_rules.rs` proves each pair on a document breaking the rule.

/// (rule code, issue code).
pub const INTAKE: &[(&str, &str)] = &[("2606", "remision_buyer_not_issuer")];
