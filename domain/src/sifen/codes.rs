//! SIFEN's answer codes in plain words: what a code usually means for the person
//! looking at a document, and what to do about it. The document detail shows it next to SIFEN's
//! own code and message. The words are the answers table's ([`super::answers`]), the same
//! table the pipeline decides from.

use super::answers::{self, Meaning};

/// A code explained.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Explanation {
    /// What it usually means.
    pub meaning: &'static str,
    /// What to do (and what kuatia does).
    pub action: &'static str,
    /// What kuatia takes it for.
    pub class: Meaning,
}

impl Explanation {
    /// The same explanation in Spanish (es-PY), for the console's Spanish pages
    /// ([`super::answers_es`], held complete by its test).
    pub fn in_spanish(self) -> Self {
        let es = |text: &'static str| super::answers_es::spanish(text).unwrap_or(text);
        Self {
            meaning: es(self.meaning),
            action: es(self.action),
            class: self.class,
        }
    }
}

/// The explanation of a SIFEN result code: its row in the answers table, or, for a four-digit
/// code the table does not list, that it is taken for an operational failure.
pub fn explain(code: &str) -> Option<Explanation> {
    if let Some(row) = answers::any_row(code) {
        return Some(Explanation {
            meaning: row.plain,
            action: row.action,
            class: row.meaning,
        });
    }
    let code = code.trim();
    (code.len() == 4 && code.bytes().all(|b| b.is_ascii_digit())).then_some(Explanation {
        meaning: "SIFEN answered with a code kuatia's table of SIFEN's answers does not list.",
        action: answers::UNLISTED,
        class: Meaning::Operational,
    })
}

/// The explanation of a failure to get SIFEN's answer, from the reason the document recorded
/// ([`answers::Transport::reason`]): SIFEN could not be reached, or its answer did not come.
pub fn explain_failure(reason: &str) -> Option<Explanation> {
    answers::Transport::of_reason(reason).map(|t| Explanation {
        meaning: t.plain(),
        action: t.action(),
        class: t.meaning(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_transport_failure_reason_is_explained() {
        for t in answers::Transport::ALL {
            for reason in [t.reason("connection refused"), format!("lot {}", t.reason("x"))] {
                let found = explain_failure(&reason).unwrap_or_else(|| panic!("{reason} explained"));
                assert_eq!(found.class, Meaning::Operational);
                assert_eq!(found.meaning, t.plain());
                assert!(found.action.contains("30 s, 2 min"), "{reason}: {}", found.action);
            }
        }
        assert!(
            explain_failure("not sent (refused): x")
                .is_some_and(|e| e.meaning.starts_with("SIFEN could not be reached"))
        );
        assert_eq!(explain_failure("SIFEN 0161: busy"), None);
        assert_eq!(explain_failure("not sent (carrier pigeon): x"), None);
    }

    #[test]
    fn the_codes_integrators_ask_about_are_explained_and_unknown_ones_concluded_nothing_from() {
        for code in [
            "0160", "0161", "0301", "1001", "0142", "0260", "0420", "0422", "1264",
        ] {
            let found = explain(code).unwrap_or_else(|| panic!("{code} explained"));
            assert!(!found.meaning.is_empty() && !found.action.is_empty());
        }
        assert!(explain("0301").is_some_and(|e| e.meaning.contains("10 to 60 minutes")));
        assert_eq!(explain("1001").map(|e| e.class), Some(Meaning::Approved));
        assert_eq!(explain("0161").map(|e| e.class), Some(Meaning::Operational));
        assert_eq!(explain("9999").map(|e| e.class), Some(Meaning::Operational));
        assert_eq!(explain("not a code"), None);
    }
}
