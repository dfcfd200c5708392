//! Tests of the index: packing, tiers, RUC searches, state filters, pages, and a property test
//! against the domain's ranking rule.

use super::encoding::prefix_bounds;
use super::search::{BITSET_FROM, BITSET_THRESHOLD};
use super::*;
use kuatia_domain::lookup::query::parse_query;

fn index(rows: &[(&str, &str, &str)]) -> Index {
    let mut b = IndexBuilder::new();
    for (ruc, name, state) in rows {
        b.push(ruc, 1, name, state);
    }
    b.finish(1, Some("2026-01-31".into()))
}

fn names(ix: &Index, q: &str, states: &[&str]) -> Vec<String> {
    let query = parse_query(q).expect("query");
    let mask = ix
        .state_mask(&states.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>())
        .expect("states");
    let (page, total) = ix.search(&query, mask, 0, 100);
    assert_eq!(total, ix.count(&query, mask), "count = results without limit");
    assert_eq!(total as usize, page.ids.len());
    page.ids.iter().map(|&r| ix.taxpayer(r).name).collect()
}

#[test]
fn packed_rucs_compare_like_their_text() {
    let a = pack_ruc("800").expect("pack");
    let b = pack_ruc("8000").expect("pack");
    let c = pack_ruc("80069563").expect("pack");
    let d = pack_ruc("801").expect("pack");
    assert!(a < b && b < c && c < d);
    let (lo, hi) = prefix_bounds("800").expect("bounds");
    assert!(lo <= a && c <= hi && d > hi);
    let mut buffer = [0u8; 8];
    assert_eq!(unpack_ruc(c, &mut buffer), "80069563");
    assert_eq!(pack_ruc("123456789"), None);
}

#[test]
fn exact_beats_prefix_beats_all_words_beats_similar() {
    let ix = index(&[
        ("1000001", "BENITEZ GONZALEZ, JUAN", "ACTIVO"),
        ("1000002", "GONZALEZ, JUAN", "ACTIVO"),
        ("1000003", "GONZALEZ BENITEZ, JUAN CARLOS", "ACTIVO"),
        ("1000004", "GONZALES, JUAN", "CANCELADO"),
        ("1000005", "ROJAS, ANA", "ACTIVO"),
    ]);
    assert_eq!(
        names(&ix, "juan gonzalez", &[]),
        [
            "GONZALEZ, JUAN",
            "BENITEZ GONZALEZ, JUAN",
            "GONZALEZ BENITEZ, JUAN CARLOS",
            "GONZALES, JUAN"
        ]
    );
    assert_eq!(
        names(&ix, "gonzalez", &["ACTIVO"]),
        [
            "GONZALEZ BENITEZ, JUAN CARLOS",
            "GONZALEZ, JUAN",
            "BENITEZ GONZALEZ, JUAN"
        ]
    );
}

#[test]
fn ruc_prefixes_list_in_ruc_order_and_a_dv_is_exact() {
    let ix = index(&[
        ("80069563", "DE GENERACION ELECTRONICA S.A.", "ACTIVO"),
        ("8006956", "OTRA", "ACTIVO"),
        ("80069564", "TERCERA", "CANCELADO"),
        ("4567890", "ROJAS, ANA", "ACTIVO"),
    ]);
    assert_eq!(
        names(&ix, "8006956", &[]),
        ["OTRA", "DE GENERACION ELECTRONICA S.A.", "TERCERA"]
    );
    assert_eq!(names(&ix, "8006956", &["CANCELADO"]), ["TERCERA"]);
    assert_eq!(names(&ix, "80069563-1", &[]), ["DE GENERACION ELECTRONICA S.A."]);
    assert!(names(&ix, "80069563-2", &[]).is_empty());
    assert_eq!(
        ix.find("4567890").map(|r| ix.taxpayer(r).name),
        Some("ROJAS, ANA".into())
    );
    assert_eq!(ix.find("4567891"), None);
}

#[test]
fn unknown_states_are_refused_with_the_known_ones() {
    let ix = index(&[("4567890", "ROJAS, ANA", "ACTIVO"), ("4567891", "X", "CANCELADO")]);
    let err = ix.state_mask(&["PERDIDO".into()]).expect_err("unknown");
    assert_eq!(err.known, ["ACTIVO", "CANCELADO"]);
    let empty = Index::empty(0);
    assert!(empty.state_mask(&["BLOQUEADO".into()]).is_ok());
    assert_eq!(
        empty.state_mask(&["X".into()]).expect_err("unknown").known.len(),
        5
    );
}

#[test]
fn pages_follow_the_ranking() {
    let rows: Vec<(String, String)> = (0..50)
        .map(|i| (format!("{}", 1_000_000 + i), format!("VERA {i:02}, ANA")))
        .collect();
    let mut b = IndexBuilder::new();
    for (ruc, name) in &rows {
        b.push(ruc, 0, name, "ACTIVO");
    }
    b.push("2000000", 0, "VERA", "ACTIVO");
    let ix = b.finish(1, None);
    let query = parse_query("vera").expect("query");
    let (first, total) = ix.search(&query, None, 0, 10);
    assert_eq!(total, 51);
    assert_eq!(ix.taxpayer(first.ids[0]).name, "VERA");
    assert_eq!(first.tiers[0], Some(Tier::Exact));
    let (second, _) = ix.search(&query, None, 10, 10);
    assert_eq!(ix.taxpayer(second.ids[0]).name, "VERA 09, ANA");
    let (last, _) = ix.search(&query, None, 50, 10);
    assert_eq!(last.ids.len(), 1);
}

/// Words that prefix, repeat and nearly repeat each other, so that every tier occurs.
const POOL: [&str; 16] = [
    "ANA", "ANALIA", "JUAN", "JUANA", "JAUN", "GONZALEZ", "GONZALES", "GONZA", "VERA", "VERO", "ROJAS",
    "ROSAS", "SA", "SRL", "CAÑETE", "CANETE",
];

fn brute_force(rows: &[(String, String, String)], words: &[String], states: &[String]) -> Vec<String> {
    use kuatia_domain::lookup::normalize::words as words_of;
    let mut hits: Vec<(Tier, Vec<String>, u64, String)> = rows
        .iter()
        .filter(|(_, _, state)| states.is_empty() || states.contains(state))
        .filter_map(|(ruc, name, _)| {
            let name_words = words_of(name);
            kuatia_domain::lookup::rank::rank(words, &name_words)
                .map(|t| (t, name_words, pack_ruc(ruc).unwrap_or(0), ruc.clone()))
        })
        .collect();
    hits.sort();
    hits.into_iter().map(|h| h.3).collect()
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig { cases: 300, ..Default::default() })]

    #[test]
    fn the_index_ranks_exactly_as_the_domain_rule(
        names in proptest::collection::vec(
            proptest::collection::vec(proptest::sample::select(POOL.to_vec()), 1..5), 1..40),
        query in proptest::collection::vec(
            (proptest::sample::select(POOL.to_vec()), 0usize..4), 1..4),
        filter in proptest::option::of(proptest::sample::select(vec!["ACTIVO", "CANCELADO"])),
        offset in 0usize..5,
        limit in 1usize..8,
    ) {
        let rows: Vec<(String, String, String)> = names
            .iter()
            .enumerate()
            .map(|(i, words)| {
                let state = if i % 3 == 0 { "CANCELADO" } else { "ACTIVO" };
                (format!("{}", 1_000_000 + i * 7919 % 1000), words.join(" "), state.to_owned())
            })
            .collect();
        let mut seen = std::collections::HashSet::new();
        let mut rows: Vec<_> = rows.into_iter().filter(|r| seen.insert(r.0.clone())).collect();
        // Both states exist whatever was drawn.
        rows.push(("9000001".into(), "XQXQ".into(), "ACTIVO".into()));
        rows.push(("9000002".into(), "XQXQ".into(), "CANCELADO".into()));
        let mut b = IndexBuilder::new();
        for (ruc, name, state) in &rows {
            b.push(ruc, 0, name, state);
        }
        let ix = b.finish(1, None);
        // Query words: whole pool words or cut short (prefixes).
        let words: Vec<String> = query
            .iter()
            .map(|(w, cut)| {
                let w = kuatia_domain::lookup::normalize::normalize(w);
                let keep = w.len().saturating_sub(*cut).max(1);
                w[..keep].to_owned()
            })
            .collect();
        let states: Vec<String> = filter.iter().map(|s| (*s).to_owned()).collect();
        let expected = brute_force(&rows, &words, &states);
        let q = SearchQuery::Name { words };
        let mask = ix.state_mask(&states).expect("known states");
        // Small registries exercise the merge paths; a threshold of 1 the bitset paths.
        BITSET_THRESHOLD.with(|t| t.set(if offset % 2 == 0 { 1 } else { BITSET_FROM }));
        let (all, total) = ix.search(&q, mask, 0, 1000);
        let got: Vec<String> = all.ids.iter().map(|&r| ix.taxpayer(r).ruc).collect();
        proptest::prop_assert_eq!(&got, &expected);
        proptest::prop_assert_eq!(total as usize, expected.len());
        proptest::prop_assert_eq!(ix.count(&q, mask), total);
        let (page, _) = ix.search(&q, mask, offset, limit);
        let page: Vec<String> = page.ids.iter().map(|&r| ix.taxpayer(r).ruc).collect();
        let window: Vec<String> = expected.iter().skip(offset).take(limit).cloned().collect();
        proptest::prop_assert_eq!(page, window);
    }
}
