//! Rules that kuatia's intake also checks before a document is numbered, with the issue code it
//! answers (docs/issue-codes.md). Data only: the checks themselves are in the domain's
//! validation (and, for `sifen` documents, in the DE builder intake runs); the test
//! `sifen_rules::each_rule_intake_checks_is_refused_there_with_its_issue_code` breaks each rule on
//! a document intake otherwise accepts and requires that issue code.

/// (rule code, issue code).
pub const INTAKE: &[(&str, &str)] = &[
    ("1150", "issue_datetime_too_old"),
    ("1151", "issue_datetime_in_future"),
    ("1309", "invalid_check_digit"),
    ("1316", "autofactura_buyer_not_issuer"),
    ("1318", "conditionally_required"),
    ("1321", "anonymous_total_limit"),
    ("1600", "conditionally_required"),
    ("1650", "conditionally_required"),
    ("2100", "conditionally_required"),
    ("2400", "conditionally_required"),
    ("2402", "invalid_check_digit"),
    ("2413", "invalid_for_sifen"),
    ("2403", "associated_document_other_issuer"),
    ("2414", "associated_document_not_invoice"),
    ("2417", "credit_note_exceeds_invoice"),
    ("2440", "invalid_for_sifen"),
    ("2604", "invalid_for_sifen"),
    ("2605", "conditionally_required"),
    ("2606", "remision_buyer_not_issuer"),
];
