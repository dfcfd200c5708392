//! Tests of the generator: its lines parse, with the quirks asked for.

use super::*;
use kuatia_domain::lookup::line::{Encoding, Line, parse_line};

#[test]
fn generated_lines_parse_with_correct_check_digits_and_the_quirks_asked_for() {
    let dir = std::env::temp_dir().join(format!("kuatia-gen-{}", uuid::Uuid::now_v7().simple()));
    let options = GenerateOptions {
        rows: 2000,
        seed: 7,
        pipes: 5,
        latin1: 4,
        blank: 3,
        broken: 6,
        ..GenerateOptions::default()
    };
    let summary = generate(&dir, &options).expect("generate");
    let (mut rows, mut blank, mut broken, mut latin1, mut pipes) = (0, 0, 0, 0, 0);
    let mut seen = std::collections::HashSet::new();
    for (path, _) in &summary.files {
        let digit = path
            .file_stem()
            .and_then(|s| s.to_str())
            .and_then(|s| s.strip_prefix("ruc"))
            .expect("name");
        let bytes = std::fs::read(path).expect("read");
        for line in bytes.strip_suffix(b"\n").unwrap_or(&bytes).split(|&b| b == b'\n') {
            match parse_line(line) {
                Line::Blank => blank += 1,
                Line::Broken(..) => broken += 1,
                Line::Row(row, encoding) => {
                    rows += 1;
                    assert!(!row.dv_differs_from_modulo11(), "{row:?}");
                    assert!(row.ruc.ends_with(digit), "{} in ruc{digit}.txt", row.ruc);
                    assert!(seen.insert(row.ruc.clone()), "RUC {} twice", row.ruc);
                    latin1 += usize::from(encoding == Encoding::Latin1);
                    pipes += usize::from(row.name.contains('|'));
                }
            }
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!((rows, blank, broken, latin1, pipes), (2000, 3, 6, 4, 5));
    assert_eq!(summary.states.iter().map(|(_, n)| n).sum::<usize>(), 2000);
}
