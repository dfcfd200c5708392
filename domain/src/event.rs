//! Naming rules shared by every event of every aggregate.
//!
//! An event's type name is stable forever (it is the archive format), written as
//! `PastTenseVerbPhrase` (`DocumentReceived`), and carries an integer schema version that starts
//! at 1 and grows when the payload shape changes; readers upcast older versions.

use cqrs_es::DomainEvent;

/// Reads the integer schema version of an event (cqrs-es carries it as a string).
///
/// Returns `None` when the aggregate declared something that is not a positive integer; the
/// event store refuses such an event rather than guess.
pub fn schema_version<E: DomainEvent>(event: &E) -> Option<u32> {
    event.event_version().parse::<u32>().ok().filter(|v| *v >= 1)
}

/// Whether a type name follows the rules: ASCII letters and digits, starting upper case.
pub fn is_valid_event_type(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_uppercase())
        && chars.all(|c| c.is_ascii_alphanumeric())
        && name.len() <= 100
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn event_type_names_are_upper_camel_case_ascii() {
        assert!(is_valid_event_type("DocumentReceived"));
        assert!(is_valid_event_type("Cdc44Assigned"));
        assert!(!is_valid_event_type("documentReceived"));
        assert!(!is_valid_event_type("Document Received"));
        assert!(!is_valid_event_type(""));
        assert!(!is_valid_event_type(&"A".repeat(101)));
    }
}
