//! The random draws a generated row is made of: weighted picks, states, RUC numbers, the names
//! of persons and companies, legacy codes and broken lines.

use rand::Rng;
use rand::rngs::StdRng;

use super::words::{ACTIVITIES, FEMALE, FORMS, MALE, PLACES, STATES, SURNAMES, SYLLABLES};

/// Picks from `items` with the weights of [`cumulative`].
fn skewed<'a>(rng: &mut StdRng, items: &[&'a str], cumulative: &[f64]) -> &'a str {
    let total = cumulative.last().copied().unwrap_or(1.0);
    let x = rng.random::<f64>() * total;
    let i = cumulative.partition_point(|&c| c < x).min(items.len() - 1);
    items[i]
}

pub(super) fn cumulative(len: usize) -> Vec<f64> {
    let mut out = Vec::with_capacity(len);
    let mut total = 0.0;
    for rank in 0..len {
        total += 1.0 / (rank as f64 + 8.0);
        out.push(total);
    }
    out
}

pub(super) fn pick<'a>(rng: &mut StdRng, items: &[&'a str]) -> &'a str {
    items[rng.random_range(0..items.len())]
}

pub(super) fn state(rng: &mut StdRng) -> &'static str {
    let total: u32 = STATES.iter().map(|(_, w)| w).sum();
    let mut x = rng.random_range(0..total);
    for (s, w) in STATES {
        if x < w {
            return s;
        }
        x -= w;
    }
    "ACTIVO"
}

/// The first `n` letters of the search form of `word` (for legacy codes).
pub(super) fn initials(word: &str, n: usize) -> String {
    kuatia_domain::lookup::normalize::normalize(word)
        .chars()
        .filter(char::is_ascii_alphabetic)
        .chain(std::iter::repeat('X'))
        .take(n)
        .collect()
}

/// Distinct numbers `base + (i·a + c) mod m` for `i < count` (a permutation of `0..m`: `a` is
/// odd and `m` a power of two, and `m ≥ count`).
pub(super) fn spread(count: usize, base: u64, at_least: u64, rng: &mut StdRng) -> Vec<u64> {
    let m = at_least.max(count as u64).max(16).next_power_of_two();
    let a = (rng.random_range(m / 4..m / 2) | 1) % m;
    let c = rng.random_range(0..m);
    (0..count as u64)
        .map(|i| base + (i.wrapping_mul(a).wrapping_add(c) % m))
        .collect()
}

/// A made-up word of 2 to 4 syllables.
fn brand(rng: &mut StdRng) -> String {
    (0..rng.random_range(2..=4))
        .map(|_| pick(rng, SYLLABLES))
        .collect()
}

pub(super) fn person(rng: &mut StdRng, surnames: &[f64], given: &(Vec<f64>, Vec<f64>)) -> String {
    let s1 = skewed(rng, SURNAMES, surnames);
    let mut name = s1.to_owned();
    if rng.random_bool(0.85) {
        name.push(' ');
        name.push_str(skewed(rng, SURNAMES, surnames));
    }
    name.push_str(", ");
    let (firsts, weights) = if rng.random_bool(0.5) {
        (MALE, &given.0)
    } else {
        (FEMALE, &given.1)
    };
    name.push_str(skewed(rng, firsts, weights));
    if rng.random_bool(0.7) {
        name.push(' ');
        name.push_str(skewed(rng, firsts, weights));
    }
    name
}

pub(super) fn company(rng: &mut StdRng, surnames: &[f64]) -> String {
    let form = pick(rng, FORMS);
    match rng.random_range(0..8) {
        0 => format!("{} {} {form}", pick(rng, ACTIVITIES), pick(rng, PLACES)),
        6 => format!("{} {form}", brand(rng)),
        7 => format!("{} {} {form}", pick(rng, ACTIVITIES), brand(rng)),
        1 => format!("{} HERMANOS {form}", skewed(rng, SURNAMES, surnames)),
        2 => format!(
            "{} Y {} {form}",
            skewed(rng, SURNAMES, surnames),
            skewed(rng, SURNAMES, surnames)
        ),
        3 => format!(
            "{} {} {form}",
            pick(rng, ACTIVITIES),
            skewed(rng, SURNAMES, surnames)
        ),
        4 => format!("COOPERATIVA {} {} LTDA", pick(rng, ACTIVITIES), pick(rng, PLACES)),
        _ => format!("{} {form}", pick(rng, PLACES)),
    }
}

pub(super) fn broken_line(rng: &mut StdRng, k: usize) -> String {
    let n = rng.random_range(1_000_000..9_999_999u32);
    match k % 5 {
        0 => format!("{n}|TRUNCADO, LINEA|"),
        1 => format!("X{n}|RUC CON LETRA, MAL|1||ACTIVO|"),
        2 => format!("{n}|DIGITO VERIFICADOR, MAL|12||ACTIVO|"),
        3 => format!("{n}| |1||ACTIVO|"),
        _ => format!("{n}|SIN ESTADO, LINEA|1|||"),
    }
}
