//! What SIFEN (or anything pretending to be SIFEN) answers: every input goes through the XML
//! reader and through the parser of each web service's answer, as the client reads a response
//! body. Every parser sees every input, so that the corpus holds plain answers (no selector
//! byte) and a crash file reproduces as it is. Nothing may panic: an answer that is not what was
//! expected is a `SoapError`.

#![no_main]

use kuatia_infrastructure::sifen_soap::fuzzing::{Element, parse, strip_prolog};
use kuatia_infrastructure::sifen_soap::messages;
use libfuzzer_sys::fuzz_target;

/// The statuses the client meets: SIFEN answers 200, faults come with 400 or 500.
const STATUSES: [u16; 2] = [200, 500];

/// Each element's recorded places must lie inside the text on character boundaries: signed
/// content is taken out of the answer by them, byte for byte.
fn check_ranges(text: &str, element: &Element) {
    let mut stack = vec![element];
    while let Some(e) = stack.pop() {
        let outer = text.get(e.outer.clone());
        assert!(
            outer.is_some(),
            "outer range {:?} of {} is not in the text",
            e.outer,
            e.qname
        );
        assert!(
            text.get(e.inner.clone()).is_some(),
            "inner range {:?} of {} is not in the text",
            e.inner,
            e.qname
        );
        assert!(
            e.outer.start <= e.inner.start && e.inner.end <= e.outer.end,
            "inner {:?} not within outer {:?} of {}",
            e.inner,
            e.outer,
            e.qname
        );
        stack.extend(e.children.iter());
    }
}

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        if let Ok(root) = parse(text) {
            check_ranges(text, &root);
        }
        let _ = parse(strip_prolog(text));
    }
    for status in STATUSES {
        let _ = messages::parse_recep_de(status, data);
        let _ = messages::parse_recep_lote(status, data);
        let _ = messages::parse_result_lote(status, data);
        let _ = messages::parse_cons_de(status, data);
        let _ = messages::parse_cons_ruc(status, data);
        let _ = messages::parse_recep_evento(status, data);
    }
});
