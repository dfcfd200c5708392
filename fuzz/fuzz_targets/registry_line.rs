//! The taxpayer registry import (`kuatia lookup import`): each line of the input is read as a
//! line of DNIT's `rucN.txt` (`parse_line`), the rows go into the search index as the importer
//! loads them (first occurrence of a RUC wins), and the last line is also tried as a search
//! query (`parse_query`) against that index. Nothing may panic; a row written back
//! (`format_line`) reads as the same row; every row is found again by its RUC.

#![no_main]

use kuatia_domain::check_digit::modulo11;
use kuatia_domain::lookup::line::{Line, format_line, parse_line};
use kuatia_domain::lookup::query::parse_query;
use kuatia_infrastructure::lookup::index::{IndexBuilder, pack_ruc};
use libfuzzer_sys::fuzz_target;
use std::collections::HashSet;

fuzz_target!(|data: &[u8]| {
    let mut builder = IndexBuilder::new();
    let mut seen = HashSet::new();
    let mut rows = Vec::new();
    for bytes in data.split(|&b| b == b'\n') {
        let Line::Row(row, _) = parse_line(bytes) else {
            continue;
        };
        let again = parse_line(format_line(&row).as_bytes());
        assert!(
            matches!(&again, Line::Row(r, _) if *r == row),
            "{row:?} written back reads as {again:?}"
        );
        let _ = row.dv_differs_from_modulo11();
        let _ = modulo11(&row.ruc);
        let key = pack_ruc(&row.ruc).expect("a row's RUC packs");
        if seen.insert(key) {
            builder.push(&row.ruc, row.dv, &row.name, &row.state);
            rows.push(row);
        }
    }
    let index = builder.finish(1, Some("2026-03-01".into()));
    for row in &rows {
        let id = index.find(&row.ruc).expect("every imported RUC is found");
        let taxpayer = index.taxpayer(id);
        assert_eq!((taxpayer.ruc.as_str(), taxpayer.dv), (row.ruc.as_str(), row.dv));
        assert_eq!(taxpayer.name, row.name);
    }
    let last = data.rsplit(|&b| b == b'\n').next().unwrap_or_default();
    if let Ok(query) = parse_query(&String::from_utf8_lossy(last))
        && let Ok(mask) = index.state_mask(&[])
    {
        let (page, total) = index.search(&query, mask, 0, 20);
        assert!(page.ids.len() as u64 <= total, "a page holds at most the total");
        let _ = index.count(&query, mask);
    }
});
