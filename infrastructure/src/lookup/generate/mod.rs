//! `kuatia lookup generate`: synthetic registry files shaped like DNIT's, for tests, demos and
//! benchmarks.
//!
//! Ten files `ruc0.txt` … `ruc9.txt` (or `.zip`), split by the RUC's last digit, each sorted by
//! RUC, in the published line format. Persons (88 %) are `APELLIDO APELLIDO, NOMBRE NOMBRE` with
//! RUCs below 80 000 000 (their identity card numbers); companies (12 %) have RUCs from
//! 80 000 000 and names built from activities, places and legal forms. Surnames follow a skewed
//! frequency (GONZALEZ, BENITEZ, MARTINEZ, … are common, as in Paraguay), so searches meet
//! realistically large result sets. Every DV is modulo 11 (`kuatia_domain::check_digit`).
//!
//! The state mix is an assumption (DNIT publishes no statistics, only the values):
//! ACTIVO 64 %, CANCELADO 18 %, SUSPENSION TEMPORAL 14 %, BLOQUEADO 2.5 %,
//! CANCELADO DEFINITIVO 1.5 %.
//!
//! On request it injects the quirks an importer must survive, in exact numbers so that tests can
//! check the import's counts: names containing `|`, lines in Latin-1, blank lines and broken
//! lines. Output is reproducible for a given seed.
//!
//! Here: the options, the summary and the writing of the files. Beside: `words.rs` (the word
//! lists and the state mix), `draw.rs` (the random draws a row is made of), `tests.rs`.

use kuatia_domain::lookup::line::{RegistryRow, format_line};
use kuatia_domain::ruc::Ruc;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::io::Write;
use std::path::{Path, PathBuf};

mod draw;
#[cfg(test)]
mod tests;
mod words;

use draw::{broken_line, company, cumulative, initials, person, pick, spread, state};
use words::{ACTIVITIES, FEMALE, FORMS, MALE, STATES, SURNAMES};

/// What to generate.
#[derive(Debug, Clone)]
pub struct GenerateOptions {
    /// Taxpayers.
    pub rows: usize,
    /// Seed of the random choices.
    pub seed: u64,
    /// Write `rucN.zip` (each holding `rucN.txt`) instead of `rucN.txt`.
    pub zip: bool,
    /// Names containing `|` (rows, counted in `rows`).
    pub pipes: usize,
    /// Rows written in Latin-1 (counted in `rows`).
    pub latin1: usize,
    /// Extra blank lines.
    pub blank: usize,
    /// Extra broken lines.
    pub broken: usize,
}

impl Default for GenerateOptions {
    fn default() -> Self {
        Self {
            rows: 1000,
            seed: 42,
            zip: false,
            pipes: 0,
            latin1: 0,
            blank: 0,
            broken: 0,
        }
    }
}

/// What was generated.
#[derive(Debug, Clone, Default)]
pub struct GenerateSummary {
    /// The files written, with their number of rows.
    pub files: Vec<(PathBuf, usize)>,
    /// Taxpayers written.
    pub rows: usize,
    /// Of which persons.
    pub persons: usize,
    /// Rows per state.
    pub states: Vec<(&'static str, usize)>,
    /// Names containing `|`.
    pub pipes: usize,
    /// Rows written in Latin-1.
    pub latin1: usize,
    /// Blank lines added.
    pub blank: usize,
    /// Broken lines added.
    pub broken: usize,
}

/// Writes the files into `out` (created if missing).
pub fn generate(out: &Path, options: &GenerateOptions) -> std::io::Result<GenerateSummary> {
    std::fs::create_dir_all(out)?;
    let mut rng = StdRng::seed_from_u64(options.seed);
    let surnames = cumulative(SURNAMES.len());
    let given = (cumulative(MALE.len()), cumulative(FEMALE.len()));
    let persons = options.rows * 88 / 100;
    let companies = options.rows - persons;
    let mut numbers = spread(persons, 400_000, persons as u64 * 3, &mut rng);
    numbers.extend(spread(companies, 80_000_000, companies as u64 * 2, &mut rng));

    let mut summary = GenerateSummary {
        rows: options.rows,
        persons,
        ..GenerateSummary::default()
    };
    let mut state_counts = [0usize; STATES.len()];
    // (RUC, line bytes), per file by last digit.
    let mut files: Vec<Vec<(u64, Vec<u8>)>> = vec![Vec::new(); 10];
    let pipes: Vec<usize> = choose(&mut rng, options.rows, options.pipes.min(options.rows), None);
    let latin1: Vec<usize> = choose(
        &mut rng,
        options.rows,
        options.latin1.min(options.rows),
        Some(&pipes),
    );
    for (i, &number) in numbers.iter().enumerate() {
        let is_person = i < persons;
        let mut name = if is_person {
            person(&mut rng, &surnames, &given)
        } else {
            company(&mut rng, &surnames)
        };
        if pipes.binary_search(&i).is_ok() {
            name = if is_person {
                format!("{name} | SUCESION")
            } else {
                format!(
                    "{} | SUCURSAL {} {}",
                    pick(&mut rng, ACTIVITIES),
                    rng.random_range(1..9),
                    pick(&mut rng, FORMS)
                )
            };
            summary.pipes += 1;
        }
        let is_latin1 = latin1.binary_search(&i).is_ok();
        if is_latin1 {
            name = format!(
                "CAÑETE NUÑEZ, {}",
                pick(&mut rng, &["JOSÉ", "MARÍA", "ÁNGEL", "INÉS", "ANDRÉS"])
            );
            summary.latin1 += 1;
        }
        let ruc = Ruc::from_number(&number.to_string())
            .map_err(|e| std::io::Error::other(format!("generated RUC {number}: {e}")))?;
        let st = state(&mut rng);
        if let Some(k) = STATES.iter().position(|(s, _)| *s == st) {
            state_counts[k] += 1;
        }
        let old_ruc = if is_person && rng.random_bool(0.7) {
            let parts: Vec<&str> = name.split(", ").collect();
            format!(
                "{}{}{:02}{:02}{:02}{}",
                initials(parts[0], 2),
                initials(parts.get(1).unwrap_or(&"X"), 2),
                rng.random_range(40..99),
                rng.random_range(1..13),
                rng.random_range(1..29),
                char::from(b'A' + rng.random_range(0..26u8))
            )
        } else if !is_person && rng.random_bool(0.4) {
            format!(
                "{}{:06}{}",
                initials(&name, 4),
                rng.random_range(0..1_000_000),
                char::from(b'A' + rng.random_range(0..26u8))
            )
        } else {
            String::new()
        };
        let row = RegistryRow {
            ruc: ruc.number().to_owned(),
            name,
            dv: ruc.check_digit(),
            old_ruc,
            state: st.to_owned(),
        };
        let line = format_line(&row);
        let bytes = if is_latin1 {
            line.chars()
                .map(|c| u8::try_from(u32::from(c)).unwrap_or(b'?'))
                .collect()
        } else {
            line.into_bytes()
        };
        files[(number % 10) as usize].push((number, bytes));
    }
    summary.states = STATES
        .iter()
        .zip(state_counts)
        .map(|((s, _), n)| (*s, n))
        .collect();
    for file in &mut files {
        file.sort_unstable_by_key(|(n, _)| *n);
    }
    // Extra lines at random places (RUC 0 keeps them where they fall after sorting).
    for k in 0..options.blank + options.broken {
        let file = &mut files[rng.random_range(0..10)];
        let at = rng.random_range(0..=file.len());
        let line = if k < options.blank {
            Vec::new()
        } else {
            broken_line(&mut rng, k - options.blank).into_bytes()
        };
        file.insert(at, (0, line));
    }
    summary.blank = options.blank;
    summary.broken = options.broken;

    for (digit, lines) in files.iter().enumerate() {
        let rows = lines.iter().filter(|(n, _)| *n != 0).count();
        let txt_name = format!("ruc{digit}.txt");
        let mut body = Vec::with_capacity(lines.iter().map(|(_, l)| l.len() + 1).sum());
        for (_, line) in lines {
            body.extend_from_slice(line);
            body.push(b'\n');
        }
        let path = if options.zip {
            let path = out.join(format!("ruc{digit}.zip"));
            let file = std::fs::File::create(&path)?;
            let mut zip = zip::ZipWriter::new(file);
            zip.start_file(
                txt_name,
                zip::write::SimpleFileOptions::default().compression_method(zip::CompressionMethod::Deflated),
            )
            .map_err(std::io::Error::other)?;
            zip.write_all(&body)?;
            zip.finish().map_err(std::io::Error::other)?;
            path
        } else {
            let path = out.join(txt_name);
            std::fs::write(&path, &body)?;
            path
        };
        summary.files.push((path, rows));
    }
    Ok(summary)
}

/// `count` distinct indexes below `n`, sorted, avoiding those in `avoid`.
fn choose(rng: &mut StdRng, n: usize, count: usize, avoid: Option<&[usize]>) -> Vec<usize> {
    let mut chosen = std::collections::BTreeSet::new();
    let free = n - avoid.map_or(0, <[usize]>::len);
    let count = count.min(free);
    while chosen.len() < count {
        let i = rng.random_range(0..n);
        if avoid.is_some_and(|a| a.binary_search(&i).is_ok()) {
            continue;
        }
        chosen.insert(i);
    }
    chosen.into_iter().collect()
}
