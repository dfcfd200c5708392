//! SIFEN's modulo-11 check digit ("módulo 11, basemax 11"), used for the RUC and for the CDC.
//!
//! From the right, digits are weighted 2, 3, …, 11, 2, 3, …; `r = sum mod 11`; the check digit is
//! `11 − r`, or 0 when `r` is 0 or 1. Letters count as their ASCII code written in decimal (a RUC
//! may end in A–D). Source and worked examples: Manual Técnico v150 §10.2.

/// The check digit of `text` (digits and ASCII letters; anything else is ignored by callers that
/// validated the format first).
pub fn modulo11(text: &str) -> u8 {
    let mut digits = String::with_capacity(text.len() * 2);
    for c in text.chars() {
        if c.is_ascii_digit() {
            digits.push(c);
        } else if c.is_ascii() {
            digits.push_str(&(c as u32).to_string());
        }
    }
    let mut weight = 2u32;
    let mut total = 0u32;
    for d in digits.bytes().rev() {
        if weight > 11 {
            weight = 2;
        }
        total += u32::from(d - b'0') * weight;
        weight += 1;
    }
    let r = total % 11;
    if r > 1 { (11 - r) as u8 } else { 0 }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_the_verified_ruc_examples_of_the_brief() {
        for (ruc, dv) in [
            ("80069563", 1),
            ("44444401", 7),
            ("80013884", 8),
            ("80002201", 7),
            ("80081294", 8),
            ("80004464", 9),
            ("929023", 0),
            ("80089752", 8),
            ("80027920", 4),
            ("80056394", 8),
            ("80032830", 2),
            ("88888801", 5),
        ] {
            assert_eq!(modulo11(ruc), dv, "{ruc}");
        }
    }

    #[test]
    fn matches_the_manuals_cdc_example() {
        assert_eq!(modulo11("0144444401700100100145282201701251587326098"), 8);
        assert_eq!(modulo11("0180013884800100112345641201812181781979223"), 9);
    }

    #[test]
    fn a_check_digit_is_always_one_decimal_digit() {
        for n in 0..20_000u32 {
            assert!(modulo11(&n.to_string()) <= 9);
        }
    }
}
