//! How Paraguay writes numbers, dates and the CDC (`1.500.000`, `2,5`, `15/01/2025`, a CDC in
//! groups of four): the printables and the console both write them from here.

use rust_decimal::{Decimal, RoundingStrategy};
use std::str::FromStr;

/// Decimals an amount in `currency` is printed with: none for guaraníes, two otherwise.
pub fn currency_decimals(currency: &str) -> u32 {
    if currency.eq_ignore_ascii_case("PYG") {
        0
    } else {
        2
    }
}

/// `1500000` → `1.500.000`; with `decimals` > 0, `1500.5` → `1.500,50`. Rounds half away from
/// zero (SIFEN's rounding). Text that is not a number is returned as it is.
pub fn amount(text: &str, decimals: u32) -> String {
    match Decimal::from_str(text.trim()) {
        Ok(value) => amount_of(value, decimals),
        Err(_) => text.trim().to_owned(),
    }
}

/// [`amount`] of a decimal.
pub fn amount_of(value: Decimal, decimals: u32) -> String {
    let rounded = value.round_dp_with_strategy(decimals, RoundingStrategy::MidpointAwayFromZero);
    let text = format!("{:.*}", decimals as usize, rounded.abs());
    let (int, frac) = text.split_once('.').unwrap_or((&text, ""));
    let mut out = String::new();
    if rounded.is_sign_negative() && !rounded.is_zero() {
        out.push('-');
    }
    out.push_str(&group(int));
    if !frac.is_empty() {
        out.push(',');
        out.push_str(frac);
    }
    out
}

/// A quantity or a unit price with as many decimals as it has (at most 8): `2` → `2`,
/// `2.50` → `2,5`, `1500` → `1.500`.
pub fn quantity(text: &str) -> String {
    match Decimal::from_str(text.trim()) {
        Ok(value) => quantity_of(value),
        Err(_) => text.trim().to_owned(),
    }
}

/// [`quantity`] of a decimal.
pub fn quantity_of(value: Decimal) -> String {
    let value = value
        .round_dp_with_strategy(8, RoundingStrategy::MidpointAwayFromZero)
        .normalize();
    let scale = value.scale();
    amount_of(value, scale)
}

fn group(int: &str) -> String {
    let digits: Vec<char> = int.chars().collect();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.iter().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push('.');
        }
        out.push(*c);
    }
    out
}

/// `2025-01-15` → `15/01/2025`; `2025-01-15T10:00:00` → `15/01/2025 10:00:00`. Anything else
/// is returned as it is.
pub fn date(text: &str) -> String {
    let text = text.trim();
    let (day, time) = match text.split_once('T') {
        Some((d, t)) => (d, Some(t)),
        None => (text, None),
    };
    let parts: Vec<&str> = day.split('-').collect();
    let [y, m, d] = parts.as_slice() else {
        return text.to_owned();
    };
    match time {
        Some(t) => format!("{d}/{m}/{y} {t}"),
        None => format!("{d}/{m}/{y}"),
    }
}

/// The CDC in 11 groups of four digits.
pub fn cdc_groups(cdc: &str) -> String {
    cdc.as_bytes()
        .chunks(4)
        .map(|c| String::from_utf8_lossy(c).into_owned())
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn amounts_use_dots_for_thousands_and_commas_for_decimals() {
        assert_eq!(amount("1500000", 0), "1.500.000");
        assert_eq!(amount("165000.0000", 0), "165.000");
        assert_eq!(amount("52380.95238095", 0), "52.381");
        assert_eq!(amount("0", 0), "0");
        assert_eq!(amount("999", 0), "999");
        assert_eq!(amount("1000", 0), "1.000");
        assert_eq!(amount("-2500.5", 0), "-2.501");
        assert_eq!(amount("1234567.891", 2), "1.234.567,89");
        assert_eq!(amount("12.5", 2), "12,50");
        assert_eq!(amount("n/a", 0), "n/a");
    }

    #[test]
    fn quantities_keep_their_own_decimals() {
        assert_eq!(quantity("1"), "1");
        assert_eq!(quantity("2.50"), "2,5");
        assert_eq!(quantity("1500"), "1.500");
        assert_eq!(quantity("0.125"), "0,125");
    }

    #[test]
    fn dates_and_the_cdc_are_written_the_paraguayan_way() {
        assert_eq!(date("2025-01-15"), "15/01/2025");
        assert_eq!(date("2025-01-15T10:00:00"), "15/01/2025 10:00:00");
        assert_eq!(
            cdc_groups("01800695631001001000000122025011511234567899"),
            "0180 0695 6310 0100 1000 0001 2202 5011 5112 3456 7899"
        );
    }
}
