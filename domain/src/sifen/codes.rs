//! SIFEN's answer codes in plain words (BRIEF §6.3): what a code usually means for the person
//! looking at a document, and what to do about it. The document detail shows it next to SIFEN's
//! own code and message.

/// A code explained.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Explanation {
    /// What it usually means.
    pub meaning: &'static str,
    /// What to do.
    pub action: &'static str,
}

const fn e(meaning: &'static str, action: &'static str) -> Explanation {
    Explanation { meaning, action }
}

/// The explanation of a SIFEN result code, for the codes integrators meet most.
pub fn explain(code: &str) -> Option<Explanation> {
    Some(match code {
        "0260" => e(
            "SIFEN approved the document.",
            "Nothing: it is valid; deliver the KuDE to the buyer.",
        ),
        "0422" => e(
            "SIFEN has the document as approved (found when kuatia asked for its CDC).",
            "Nothing: an earlier attempt was approved and its answer was lost on the way.",
        ),
        "1005" => e(
            "Approved with an observation: it was sent more than 72 hours after it was signed.",
            "Nothing for this document; send documents sooner after issuing them.",
        ),
        "0160" => e(
            "SIFEN could not read the XML: it is not well-formed or carries characters SIFEN refuses \
             (line breaks, tabs or control characters in a name, an address or a description).",
            "Correct the text fields of the document and issue it again as a new document.",
        ),
        "0161" | "0162" => e(
            "SIFEN's processing servers were unavailable.",
            "Nothing: kuatia retries on its schedule (30 s, 2 min, 10 min, …); POST /retry tries now.",
        ),
        "0141" => e(
            "The signature does not verify: the document changed after it was signed, or the \
             certificate does not match the key.",
            "Check the company's certificate (GET /v1/certificates, validate) and issue again.",
        ),
        "0142" => e(
            "The certificate that signed belongs to another RUC than the issuer's.",
            "Upload the issuing company's own certificate and point the sifen channel at it.",
        ),
        "0300" => e(
            "SIFEN received the lot and queued it for processing.",
            "Nothing: kuatia asks for the lot's result.",
        ),
        "0301" => e(
            "SIFEN did not queue the lot. Usually: the same CDC was sent again while a result was \
             still pending, a lot mixed document types or issuers, or held more than 50 documents; \
             SIFEN then blocks the issuer's sending for 10 to 60 minutes.",
            "Wait for the block to pass; kuatia queries each CDC before sending again and never \
             resends an approved one.",
        ),
        "1001" | "1002" => e(
            "SIFEN already has this CDC (a duplicate): an earlier attempt was approved.",
            "Nothing: kuatia confirms the approval by querying the CDC.",
        ),
        "1264" => e(
            "The issuer's RUC is not enabled for SIFEN's synchronous service.",
            "Ask DNIT to enable it, or send in lots.",
        ),
        "0420" => e(
            "SIFEN does not have the document as approved.",
            "Nothing while kuatia is still sending it; after a rejection, correct and issue again.",
        ),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_codes_integrators_ask_about_are_explained_and_unknown_ones_are_not() {
        for code in ["0160", "0161", "0301", "1001", "0142", "0260"] {
            let found = explain(code).unwrap_or_else(|| panic!("{code} explained"));
            assert!(!found.meaning.is_empty() && !found.action.is_empty());
        }
        assert!(explain("0301").is_some_and(|e| e.meaning.contains("10 to 60 minutes")));
        assert_eq!(explain("9999"), None);
    }
}
