//! The taxpayer lookup service (issue 9): importing DNIT's registry files (and
//! the designation and registry-match CSVs), the atomic switch between generations, search
//! ranking, keys and monthly quotas over HTTP. Every test runs on SQLite, and on PostgreSQL when
//! `KUATIA_TEST_POSTGRES_URL` is set.

use chrono::NaiveDate;
use kuatia_domain::document::validation::RegistryAnswer;
use kuatia_domain::ruc::Ruc;
use kuatia_infrastructure::lookup::generate::{GenerateOptions, generate};
use kuatia_infrastructure::lookup::import::{self, ImportError, ProblemKind};
use kuatia_infrastructure::lookup::{self as lookup, registry};
use kuatia_infrastructure::store::Database;
use kuatia_tests::{ScratchDir, TestApp, TestDb};
use serde_json::Value;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

fn published(day: u32) -> NaiveDate {
    NaiveDate::from_ymd_opt(2026, 3, day).expect("date")
}

async fn import_dir(db: &Database, dir: &Path, day: u32) -> import::ImportReport {
    import::import_registry(db, dir, published(day), &|_| {})
        .await
        .expect("import")
}

/// Writes registry files from `(file, lines)`.
fn write_files(dir: &Path, files: &[(&str, &[u8])]) {
    std::fs::create_dir_all(dir).expect("dir");
    for (name, body) in files {
        std::fs::write(dir.join(name), body).expect("write");
    }
}

#[tokio::test]
async fn a_generated_registry_with_broken_lines_imports_with_exact_counts() {
    let db = TestDb::new().await;
    let database = db.open().await;
    let scratch = ScratchDir::new();
    let summary = generate(
        &scratch.0,
        &GenerateOptions {
            rows: 3000,
            seed: 11,
            zip: true,
            pipes: 4,
            latin1: 5,
            blank: 3,
            broken: 7,
        },
    )
    .expect("generate");
    assert_eq!(summary.files.len(), 10);

    let progress = std::sync::Mutex::new(Vec::new());
    let report = import::import_registry(&database, &scratch.0, published(31), &|p| {
        progress.lock().expect("lock").push(p)
    })
    .await
    .expect("import");
    assert_eq!(report.generation, 1);
    assert_eq!(report.rows, 3000);
    assert_eq!(report.blank, 3);
    assert_eq!(report.broken, 7);
    assert_eq!(report.latin1, 5);
    assert_eq!(report.duplicates, 0);
    assert_eq!(report.lines, 3000 + 3 + 7);
    let listed: Vec<_> = report
        .problems
        .iter()
        .filter(|p| matches!(p.kind, ProblemKind::Blank | ProblemKind::Broken))
        .collect();
    assert_eq!(listed.len(), 10, "every blank and broken line is listed");
    assert!(listed.iter().all(|p| p.file.starts_with("ruc") && p.line >= 1));
    let last = *progress
        .lock()
        .expect("lock")
        .last()
        .expect("progress was reported");
    assert_eq!((last.rows, last.bytes), (3000, last.total_bytes));

    let status = registry::status(database.store().as_ref()).await.expect("status");
    assert_eq!((status.generation, status.row_count), (1, 3000));
    assert_eq!(status.published.as_deref(), Some("2026-03-31"));
    assert_eq!(status.import_lease, None, "the lease is released");

    let index = registry::load_index(&database).await.expect("load");
    assert_eq!(index.len(), 3000);
    assert_eq!(index.published(), Some("2026-03-31"));
    let with_bars = index
        .search(
            &kuatia_domain::lookup::query::parse_query("sucursal").expect("q"),
            None,
            0,
            100,
        )
        .0
        .ids
        .len()
        + index
            .search(
                &kuatia_domain::lookup::query::parse_query("sucesion").expect("q"),
                None,
                0,
                100,
            )
            .0
            .ids
            .len();
    assert!(with_bars >= 4, "names with a bar inside are imported whole");
    database.close().await;
}

#[tokio::test]
async fn a_bar_in_a_name_a_missing_trailing_bar_and_latin1_are_read_and_repeats_reported() {
    let db = TestDb::new().await;
    let database = db.open().await;
    let scratch = ScratchDir::new();
    write_files(
        &scratch.0,
        &[
            (
                "ruc1.txt",
                b"80000011|COMERCIAL EL SOL | SUCURSAL 2 S.A.|6||ACTIVO|\r\n\
                  4567891|ROJAS, ANA|1||CANCELADO\n\
                  \n\
                  4567891|ROJAS, ANA MARIA|1||ACTIVO|\n\
                  ruc|name|dv|old|state|\n",
            ),
            (
                "ruc2.txt",
                b"4444442|CA\xd1ETE N\xda\xd1EZ, JOS\xc9|8|CANJ700101A|SUSPENSION TEMPORAL|\n",
            ),
        ],
    );
    let report = import_dir(&database, &scratch.0, 1).await;
    assert_eq!(
        (report.rows, report.blank, report.broken, report.duplicates),
        (3, 1, 1, 1)
    );
    assert_eq!(report.latin1, 1);
    let kinds: Vec<(String, u64, ProblemKind)> = report
        .problems
        .iter()
        .filter(|p| p.kind != ProblemKind::DvMismatch)
        .map(|p| (p.file.clone(), p.line, p.kind))
        .collect();
    assert_eq!(
        kinds,
        [
            ("ruc1.txt".to_owned(), 3, ProblemKind::Blank),
            ("ruc1.txt".to_owned(), 4, ProblemKind::Duplicate),
            ("ruc1.txt".to_owned(), 5, ProblemKind::Broken),
        ]
    );
    let index = registry::load_index(&database).await.expect("load");
    let name_of = |ruc: &str| index.find(ruc).map(|r| index.taxpayer(r));
    assert_eq!(
        name_of("80000011").expect("listed").name,
        "COMERCIAL EL SOL | SUCURSAL 2 S.A."
    );
    assert_eq!(
        name_of("4567891").expect("listed").name,
        "ROJAS, ANA",
        "the first occurrence wins"
    );
    let latin1 = name_of("4444442").expect("listed");
    assert_eq!(
        (latin1.name.as_str(), latin1.state.as_str()),
        ("CAÑETE NÚÑEZ, JOSÉ", "SUSPENSION TEMPORAL")
    );
    database.close().await;
}

#[tokio::test]
async fn an_import_without_any_row_leaves_the_registry_unchanged() {
    let db = TestDb::new().await;
    let database = db.open().await;
    let good = ScratchDir::new();
    write_files(&good.0, &[("ruc0.txt", b"4567890|ROJAS, ANA|3||ACTIVO|\n")]);
    import_dir(&database, &good.0, 1).await;
    let bad = ScratchDir::new();
    write_files(&bad.0, &[("ruc0.txt", b"garbage\n\nmore garbage\n")]);
    let err = import::import_registry(&database, &bad.0, published(2), &|_| {})
        .await
        .expect_err("nothing to import");
    assert!(matches!(err, ImportError::Invalid(_)), "{err}");
    let status = registry::status(database.store().as_ref()).await.expect("status");
    assert_eq!(
        (status.generation, status.row_count, status.import_lease),
        (1, 1, None)
    );
    let empty = ScratchDir::new();
    assert!(matches!(
        import::import_registry(&database, &empty.0, published(2), &|_| {}).await,
        Err(ImportError::Invalid(_))
    ));
    database.close().await;
}

#[tokio::test]
async fn only_one_import_runs_at_a_time() {
    let db = TestDb::new().await;
    let database = db.open().await;
    let store = database.store();
    let now = chrono::Utc::now();
    let lease = now + chrono::Duration::minutes(5);
    assert!(
        registry::claim_lease(store.as_ref(), now, lease)
            .await
            .expect("claim")
            .is_some()
    );
    let scratch = ScratchDir::new();
    write_files(&scratch.0, &[("ruc0.txt", b"4567890|ROJAS, ANA|3||ACTIVO|\n")]);
    let err = import::import_registry(&database, &scratch.0, published(1), &|_| {})
        .await
        .expect_err("busy");
    assert!(matches!(err, ImportError::Busy(_)), "{err}");
    database.close().await;
}

#[tokio::test]
async fn readers_see_the_old_or_the_new_registry_never_a_mix() {
    let db = TestDb::new().await;
    let database = db.open().await;
    let old = ScratchDir::new();
    generate(
        &old.0,
        &GenerateOptions {
            rows: 20_000,
            seed: 1,
            ..GenerateOptions::default()
        },
    )
    .expect("generate");
    // The new publication: the old one without ruc0.txt, plus one taxpayer.
    let new = ScratchDir::new();
    generate(
        &new.0,
        &GenerateOptions {
            rows: 20_000,
            seed: 1,
            ..GenerateOptions::default()
        },
    )
    .expect("generate");
    let dropped = std::fs::read_to_string(new.0.join("ruc0.txt")).expect("read");
    let dropped_ruc = dropped
        .lines()
        .next()
        .expect("a line")
        .split('|')
        .next()
        .expect("ruc")
        .to_owned();
    std::fs::remove_file(new.0.join("ruc0.txt")).expect("remove");
    write_files(
        &new.0,
        &[("ruc10.txt", b"9999997|NUEVO, CONTRIBUYENTE|9||ACTIVO|\n")],
    );
    let added = Ruc::from_number("9999997").expect("ruc");
    let removed = Ruc::from_number(&dropped_ruc).expect("ruc");

    import_dir(&database, &old.0, 1).await;
    let store = database.store();
    assert_eq!(
        lookup::registry_answer(store.as_ref(), &added).await,
        RegistryAnswer::NotFound
    );
    assert!(matches!(
        lookup::registry_answer(store.as_ref(), &removed).await,
        RegistryAnswer::Found { .. }
    ));

    let done = Arc::new(AtomicBool::new(false));
    let reader = {
        let (store, done) = (store.clone(), done.clone());
        let (added, removed) = (added.clone(), removed.clone());
        tokio::spawn(async move {
            let mut observations = 0;
            while !done.load(Ordering::Acquire) {
                // One statement each, `added` first: generations only move forward, so once
                // `added` is listed (new) `removed` cannot be (old) any more.
                let a = lookup::registry_answer(store.as_ref(), &added).await;
                let r = lookup::registry_answer(store.as_ref(), &removed).await;
                let listed = |x: &RegistryAnswer| matches!(x, RegistryAnswer::Found { .. });
                assert!(!(listed(&a) && listed(&r)), "a mix of two generations");
                assert_ne!(a, RegistryAnswer::NotLoaded);
                assert_ne!(r, RegistryAnswer::NotLoaded);
                observations += 1;
            }
            observations
        })
    };
    let loader = {
        let database = database.clone();
        tokio::spawn(async move {
            let mut sizes = Vec::new();
            for _ in 0..3 {
                let index = registry::load_index(&database).await.expect("a whole generation");
                sizes.push((index.generation(), index.len()));
            }
            sizes
        })
    };
    let report = import_dir(&database, &new.0, 2).await;
    done.store(true, Ordering::Release);
    assert!(reader.await.expect("reader") > 0);
    let new_rows = report.rows as usize;
    for (generation, len) in loader.await.expect("loader") {
        match generation {
            1 => assert_eq!(len, 20_000),
            2 => assert_eq!(len, new_rows),
            other => panic!("generation {other}"),
        }
    }
    assert!(matches!(
        lookup::registry_answer(store.as_ref(), &added).await,
        RegistryAnswer::Found { .. }
    ));
    assert_eq!(
        lookup::registry_answer(store.as_ref(), &removed).await,
        RegistryAnswer::NotFound
    );
    let status = registry::status(store.as_ref()).await.expect("status");
    assert_eq!((status.generation, status.row_count as usize), (2, new_rows));
    assert_eq!(
        registry::load_index(&database).await.expect("load").len(),
        new_rows
    );
    database.close().await;
}

#[tokio::test]
async fn the_registry_answer_is_not_loaded_before_the_first_import() {
    let db = TestDb::new().await;
    let database = db.open().await;
    let ruc = Ruc::parse("80069563-1").expect("ruc");
    assert_eq!(
        lookup::registry_answer(database.store().as_ref(), &ruc).await,
        RegistryAnswer::NotLoaded
    );
    let scratch = ScratchDir::new();
    write_files(
        &scratch.0,
        &[(
            "ruc3.txt",
            b"80069563|DE GENERACION ELECTRONICA S.A.|1||BLOQUEADO|\n",
        )],
    );
    import_dir(&database, &scratch.0, 1).await;
    assert_eq!(
        lookup::registry_answer(database.store().as_ref(), &ruc).await,
        RegistryAnswer::Found {
            state: "BLOQUEADO".into()
        }
    );
    database.close().await;
}

#[tokio::test]
async fn designations_and_registry_matches_import_from_csv_and_replace_the_previous_ones() {
    let db = TestDb::new().await;
    let database = db.open().await;
    let scratch = ScratchDir::new();
    let mandates = scratch.0.join("mandates.csv");
    std::fs::write(
        &mandates,
        "ruc,group,start_date,link\n\
         80069563-1,\"Grupo 1, primera etapa\",2025-07-01,https://dnit.example/r/1\n\
         4567890,Grupo 2,2026-01-01,\n\
         80069563-7,Grupo 9,2026-01-01,x\n\
         4567890,Grupo 3,2026-02-01,later\n",
    )
    .expect("write");
    let report = import::import_mandates(&database, &mandates)
        .await
        .expect("import");
    assert_eq!((report.rows, report.duplicates, report.rejected.len()), (2, 1, 1));
    assert_eq!(report.rejected[0].line, 4);
    let siara = scratch.0.join("siara.csv");
    std::fs::write(
        &siara,
        "ruc,group,category,legal_type,department,city,registry_state,last_communication,synchronized_at,source_link\n\
         80069563,A,B,SOCIEDAD ANONIMA,CENTRAL,LUQUE,ACTIVA,2026-02-01,2026-03-01T10:00:00Z,https://siara.example/80069563\n",
    )
    .expect("write");
    assert_eq!(
        import::import_siara(&database, &siara)
            .await
            .expect("import")
            .rows,
        1
    );
    let store = database.store();
    let (mandate, siara_row) = lookup::details(store.as_ref(), "80069563")
        .await
        .expect("details");
    let mandate = mandate.expect("designated");
    assert_eq!(mandate.group, "Grupo 1, primera etapa");
    assert_eq!(mandate.start_date, "2025-07-01");
    assert_eq!(siara_row.expect("matched").city.as_deref(), Some("LUQUE"));
    let (later, none) = lookup::details(store.as_ref(), "4567890").await.expect("details");
    assert_eq!(
        later.expect("designated").group,
        "Grupo 3",
        "the last row of a RUC wins"
    );
    assert_eq!(none, None);

    std::fs::write(
        &mandates,
        "ruc,group,start_date,link\n4567890,Grupo 4,2026-03-01,\n",
    )
    .expect("write");
    import::import_mandates(&database, &mandates)
        .await
        .expect("import");
    let (gone, _) = lookup::details(store.as_ref(), "80069563")
        .await
        .expect("details");
    assert_eq!(gone, None, "an import replaces the whole table");
    database.close().await;
}

// ---------------------------------------------------------------------------------------------
// Over HTTP, on the lookup listener.
// ---------------------------------------------------------------------------------------------

/// The hand-made ranking fixture: `(ruc, name, state)`; DVs are computed.
const FIXTURE: [(&str, &str, &str); 8] = [
    ("80069563", "DE GENERACION ELECTRONICA S.A.", "ACTIVO"),
    ("1000001", "GONZALEZ, JUAN", "ACTIVO"),
    ("1000002", "BENITEZ GONZALEZ, JUAN", "ACTIVO"),
    ("1000003", "GONZALEZ BENITEZ, JUAN CARLOS", "SUSPENSION TEMPORAL"),
    ("1000004", "GONZALES, JUAN", "CANCELADO"),
    ("1000005", "NÚÑEZ, JOSÉ MARÍA", "ACTIVO"),
    ("1000006", "ROJAS, ANA", "BLOQUEADO"),
    ("1000007", "JUAN GONZALEZ E HIJOS S.R.L.", "ACTIVO"),
];

pub(crate) fn fixture_files(dir: &Path, rows: &[(&str, &str, &str)]) {
    let mut body = String::new();
    for (ruc, name, state) in rows {
        let dv = Ruc::from_number(ruc).expect("ruc").check_digit();
        body.push_str(&format!("{ruc}|{name}|{dv}||{state}|\n"));
    }
    write_files(dir, &[("ruc0.txt", body.as_bytes())]);
}

/// A service with the lookup listener on port 0, over a database holding `rows` (published
/// 2026-03-31), once its registry is loaded. Returns the app and the lookup base URL.
async fn lookup_app(
    rows: &[(&str, &str, &str)],
    adjust: impl FnOnce(&mut kuatia_infrastructure::config::Config),
) -> (TestApp, String) {
    let db = TestDb::new().await;
    if !rows.is_empty() {
        let database = db.open().await;
        let scratch = ScratchDir::new();
        fixture_files(&scratch.0, rows);
        import_dir(&database, &scratch.0, 31).await;
        database.close().await;
    }
    let app = TestApp::spawn_on(db, |c| {
        lookup_config(c);
        adjust(c);
    })
    .await
    .expect("start");
    let base = format!("http://{}", app.service().lookup_addr.expect("lookup listener"));
    wait_ready(&app.client, &base).await;
    (app, base)
}

fn lookup_config(c: &mut kuatia_infrastructure::config::Config) {
    c.lookup_enabled = true;
    c.lookup_listen = "127.0.0.1:0".parse().expect("address");
    c.lookup_refresh_secs = 1;
    c.lookup_quota_anonymous = 1_000;
}

async fn wait_ready(client: &reqwest::Client, base: &str) {
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        let r = client.get(format!("{base}/ready")).send().await.expect("ready");
        if r.status() == 200 {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the lookup service never became ready"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn get_json(client: &reqwest::Client, url: &str) -> (u16, Value) {
    let r = client.get(url).send().await.expect("request");
    let status = r.status().as_u16();
    (status, r.json().await.unwrap_or(Value::Null))
}

fn names(body: &Value) -> Vec<String> {
    body.as_array()
        .expect("an array")
        .iter()
        .map(|i| i["name"].as_str().expect("name").to_owned())
        .collect()
}

#[tokio::test]
async fn search_ranks_exact_then_prefix_then_all_words_then_similar_ignoring_case_accents_and_order() {
    let (app, base) = lookup_app(&FIXTURE, |_| {}).await;
    let (status, body) = get_json(&app.client, &format!("{base}/api/search?q=juan%20gonzalez")).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        names(&body),
        [
            "GONZALEZ, JUAN",               // exact: the same words in another order
            "JUAN GONZALEZ E HIJOS S.R.L.", // prefix: starts with the query
            "BENITEZ GONZALEZ, JUAN",       // all words, alphabetical
            "GONZALEZ BENITEZ, JUAN CARLOS",
            "GONZALES, JUAN", // similar: one letter off
        ]
    );
    let first = &body[0];
    let dv = Ruc::from_number("1000001").expect("ruc").check_digit();
    assert_eq!(first["ruc"], "1000001");
    assert_eq!(first["dv"], dv.to_string());
    assert_eq!(first["fullRuc"], format!("1000001-{dv}"));
    assert_eq!(first["state"], "ACTIVO");
    assert_eq!(first["publicationDateText"], "2026-03-31");

    let (_, accents) = get_json(&app.client, &format!("{base}/api/search?q=jose%20maria%20NUNEZ")).await;
    assert_eq!(names(&accents), ["NÚÑEZ, JOSÉ MARÍA"]);
    let (_, typed) = get_json(
        &app.client,
        &format!("{base}/api/search?q=N%C3%BA%C3%B1ez%2C%20Jos%C3%A9"),
    )
    .await;
    assert_eq!(names(&typed), ["NÚÑEZ, JOSÉ MARÍA"]);
    let (_, prefix) = get_json(&app.client, &format!("{base}/api/search?q=gonzalez%20ben")).await;
    assert_eq!(names(&prefix)[0], "GONZALEZ BENITEZ, JUAN CARLOS");
    let (_, by_ruc) = get_json(&app.client, &format!("{base}/api/search?q=100000")).await;
    assert_eq!(
        by_ruc.as_array().expect("array").len(),
        7,
        "digits match RUC prefixes"
    );
    assert_eq!(by_ruc[0]["ruc"], "1000001", "in RUC order");
    let (_, exact_ruc) = get_json(&app.client, &format!("{base}/api/search?q=80.069.563-1")).await;
    assert_eq!(names(&exact_ruc), ["DE GENERACION ELECTRONICA S.A."]);
    app.stop().await;
}

#[tokio::test]
async fn state_filters_repeat_and_an_unknown_state_lists_the_known_ones() {
    let (app, base) = lookup_app(&FIXTURE, |_| {}).await;
    let (_, active) = get_json(&app.client, &format!("{base}/api/search?q=gonzalez&state=ACTIVO")).await;
    assert_eq!(
        names(&active),
        [
            "GONZALEZ, JUAN",
            "BENITEZ GONZALEZ, JUAN",
            "JUAN GONZALEZ E HIJOS S.R.L."
        ],
        "the name starting with the word first, then the others alphabetically"
    );
    let (_, two) = get_json(
        &app.client,
        &format!("{base}/api/search?q=gonzalez&state=cancelado&state=suspension_temporal"),
    )
    .await;
    assert_eq!(names(&two), ["GONZALEZ BENITEZ, JUAN CARLOS", "GONZALES, JUAN"]);
    let (_, count) = get_json(
        &app.client,
        &format!("{base}/api/search/count?q=gonzalez&state=CANCELADO&state=SUSPENSION%20TEMPORAL"),
    )
    .await;
    assert_eq!(count, serde_json::json!({"count": 2}));
    let (status, err) = get_json(
        &app.client,
        &format!("{base}/api/search?q=gonzalez&state=PERDIDO"),
    )
    .await;
    assert_eq!(status, 400);
    assert_eq!(err["code"], "validation_error");
    assert!(err["request_id"].is_string());
    let known: Vec<&str> = err["details"]["known_states"]
        .as_array()
        .expect("known states")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert_eq!(known, ["ACTIVO", "BLOQUEADO", "CANCELADO", "SUSPENSION TEMPORAL"]);
    app.stop().await;
}

#[tokio::test]
async fn the_count_equals_the_number_of_results_without_limit_and_pages_follow_the_ranking() {
    let (app, base) = lookup_app(&FIXTURE, |_| {}).await;
    for query in [
        "q=gonzalez",
        "q=juan",
        "q=juan%20gonzalez",
        "q=gonzales",
        "q=100",
        "q=juan&state=ACTIVO",
        "q=nadie%20se%20llama%20asi",
    ] {
        let (_, all) = get_json(&app.client, &format!("{base}/api/search?{query}&limit=100")).await;
        let (_, count) = get_json(&app.client, &format!("{base}/api/search/count?{query}")).await;
        assert_eq!(
            count["count"].as_u64(),
            Some(all.as_array().expect("array").len() as u64),
            "{query}"
        );
    }
    let (_, all) = get_json(&app.client, &format!("{base}/api/search?q=juan&limit=100")).await;
    let mut paged = Vec::new();
    for offset in (0..6).step_by(2) {
        let (_, page) = get_json(
            &app.client,
            &format!("{base}/api/search?q=juan&limit=2&offset={offset}"),
        )
        .await;
        paged.extend(names(&page));
    }
    assert_eq!(paged, names(&all));
    let (_, default) = get_json(&app.client, &format!("{base}/api/search?q=100")).await;
    assert_eq!(default.as_array().expect("array").len(), 7, "default limit 20");
    app.stop().await;
}

#[tokio::test]
async fn short_queries_and_bad_paging_are_refused() {
    let (app, base) = lookup_app(&FIXTURE, |_| {}).await;
    for query in [
        "q=ab",
        "q=%20%20a%20",
        "",
        "q=80",
        "q=juan&limit=0",
        "q=juan&limit=101",
        "q=juan&offset=-1",
        "q=juan&limit=x",
    ] {
        let (status, body) = get_json(&app.client, &format!("{base}/api/search?{query}")).await;
        assert_eq!(status, 400, "{query}: {body}");
        assert_eq!(body["code"], "validation_error", "{query}");
    }
    let (status, _) = get_json(&app.client, &format!("{base}/api/search/count?q=ju")).await;
    assert_eq!(status, 400);
    app.stop().await;
}

#[tokio::test]
async fn an_exact_lookup_takes_the_ruc_with_or_without_dv_and_a_key_adds_designation_and_match() {
    let (app, base) = lookup_app(&FIXTURE, |_| {}).await;
    // Designation and registry match for 80069563, and a key.
    let database = app.db.open().await;
    let scratch = ScratchDir::new();
    let mandates = scratch.0.join("m.csv");
    std::fs::write(
        &mandates,
        "ruc,group,start_date,link\n80069563-1,G1,2025-07-01,https://dnit.example/g1\n",
    )
    .expect("write");
    import::import_mandates(&database, &mandates)
        .await
        .expect("mandates");
    let siara = scratch.0.join("s.csv");
    std::fs::write(
        &siara,
        "ruc,group,category,legal_type,department,city,registry_state,last_communication,synchronized_at,source_link\n\
         80069563,A,B,S.A.,CENTRAL,LUQUE,ACTIVA,2026-02-01,2026-03-01T10:00:00Z,https://siara.example/1\n",
    )
    .expect("write");
    import::import_siara(&database, &siara).await.expect("siara");
    let (_, key) = lookup::keys::create_key(
        database.store().as_ref(),
        "ERP",
        kuatia_domain::lookup::plan::Plan::Starter,
        None,
        chrono::Utc::now(),
    )
    .await
    .expect("key");
    database.close().await;

    for path in ["80069563-1", "80069563"] {
        let (status, body) = get_json(&app.client, &format!("{base}/api/ruc/{path}")).await;
        assert_eq!(status, 200, "{path}: {body}");
        assert_eq!(body["fullRuc"], "80069563-1");
        assert_eq!(body["name"], "DE GENERACION ELECTRONICA S.A.");
        assert_eq!(body["publicationDateText"], "2026-03-31");
        assert!(
            body.get("sifenMandate").is_none(),
            "no key, no designation: {body}"
        );
        assert!(body.get("siara").is_none());
    }
    let keyed: Value = app
        .client
        .get(format!("{base}/api/ruc/80069563-1"))
        .header("X-API-Key", &key)
        .send()
        .await
        .expect("get")
        .json()
        .await
        .expect("json");
    assert_eq!(
        keyed["sifenMandate"],
        serde_json::json!({"group": "G1", "startDate": "2025-07-01", "link": "https://dnit.example/g1"})
    );
    assert_eq!(keyed["siara"]["city"], "LUQUE");
    assert_eq!(keyed["siara"]["legalType"], "S.A.");
    assert_eq!(keyed["siara"]["synchronizedAt"], "2026-03-01T10:00:00Z");
    assert_eq!(keyed["siara"]["sourceLink"], "https://siara.example/1");
    let (_, without_details) = get_json(&app.client, &format!("{base}/api/ruc/1000001")).await;
    assert_eq!(without_details["ruc"], "1000001");

    let (status, body) = get_json(&app.client, &format!("{base}/api/ruc/80069563-2")).await;
    assert_eq!(status, 400, "{body}");
    assert!(
        body["message"].as_str().expect("message").contains("check digit"),
        "{body}"
    );
    let (status, _) = get_json(&app.client, &format!("{base}/api/ruc/4444449")).await;
    assert_eq!(status, 404);
    let unknown_dv = Ruc::from_number("4444449").expect("ruc").check_digit();
    let (status, _) = get_json(&app.client, &format!("{base}/api/ruc/4444449-{unknown_dv}")).await;
    assert_eq!(status, 404);
    let (status, _) = get_json(
        &app.client,
        &format!("{base}/api/ruc/4444449-{}", (unknown_dv + 1) % 10),
    )
    .await;
    assert_eq!(status, 400, "a wrong DV is 400 even for an unknown RUC");
    let (status, _) = get_json(&app.client, &format!("{base}/api/ruc/not-a-ruc")).await;
    assert_eq!(status, 400);
    let bad_key = app
        .client
        .get(format!("{base}/api/ruc/80069563"))
        .header("X-API-Key", "kl_made_up")
        .send()
        .await
        .expect("get");
    assert_eq!(bad_key.status(), 401);
    app.stop().await;
}

fn header(response: &reqwest::Response, name: &str) -> Option<i64> {
    response.headers().get(name)?.to_str().ok()?.parse().ok()
}

/// Stops the service and starts it again on the same database (same configuration).
async fn restart(
    app: &mut TestApp,
    adjust: impl FnOnce(&mut kuatia_infrastructure::config::Config),
) -> String {
    app.service
        .take()
        .expect("running")
        .stop()
        .await
        .expect("clean stop");
    let mut config = app.db.config();
    lookup_config(&mut config);
    adjust(&mut config);
    let service = kuatia_api::compose::start(config).await.expect("restart");
    let base = format!("http://{}", service.lookup_addr.expect("lookup listener"));
    app.service = Some(service);
    wait_ready(&app.client, &base).await;
    base
}

#[tokio::test]
async fn a_spent_allowance_answers_429_and_the_counts_survive_a_restart() {
    let quotas = |c: &mut kuatia_infrastructure::config::Config| {
        c.lookup_quota_anonymous = 3;
        c.lookup_quota_dev = 2;
        c.lookup_key_cache_secs = 0;
    };
    let (mut app, base) = lookup_app(&FIXTURE, quotas).await;
    let mut remaining = Vec::new();
    for path in [
        "/api/search?q=juan",
        "/api/search/count?q=juan",
        "/api/ruc/80069563",
    ] {
        let r = app.client.get(format!("{base}{path}")).send().await.expect("get");
        assert_eq!(r.status(), 200, "{path}");
        assert_eq!(header(&r, "x-ratelimit-limit"), Some(3));
        assert!(header(&r, "x-ratelimit-reset").expect("reset") > chrono::Utc::now().timestamp());
        remaining.push(header(&r, "x-ratelimit-remaining").expect("remaining"));
    }
    assert_eq!(remaining, [2, 1, 0]);
    let spent = app
        .client
        .get(format!("{base}/api/search?q=juan"))
        .send()
        .await
        .expect("get");
    assert_eq!(spent.status(), 429);
    let retry_after = header(&spent, "retry-after").expect("Retry-After");
    assert!(
        (1..=31 * 86_400 + 3 * 3600).contains(&retry_after),
        "{retry_after}"
    );
    assert_eq!(header(&spent, "x-ratelimit-remaining"), Some(0));
    let body: Value = spent.json().await.expect("json");
    assert_eq!(body["code"], "rate_limit_error");
    assert_eq!(body["details"]["bucket"], "lookup_monthly");
    assert_eq!(body["details"]["plan"], "anonymous");
    assert_eq!(body["details"]["limit"], 3);
    // The service routes are not metered.
    assert_eq!(
        app.client
            .get(format!("{base}/health"))
            .send()
            .await
            .expect("get")
            .status(),
        200
    );

    // A key has its own allowance (its plan's).
    let database = app.db.open().await;
    let (created, key) = lookup::keys::create_key(
        database.store().as_ref(),
        "tester",
        kuatia_domain::lookup::plan::Plan::Dev,
        None,
        chrono::Utc::now(),
    )
    .await
    .expect("key");
    database.close().await;
    let keyed = |base: String, key: String, client: reqwest::Client| async move {
        client
            .get(format!("{base}/api/search?q=juan"))
            .header("X-API-Key", key)
            .send()
            .await
            .expect("get")
    };
    let r = keyed(base.clone(), key.clone(), app.client.clone()).await;
    assert_eq!(
        (r.status().as_u16(), header(&r, "x-ratelimit-limit")),
        (200, Some(2))
    );

    let base = restart(&mut app, quotas).await;
    let after = app
        .client
        .get(format!("{base}/api/search?q=juan"))
        .send()
        .await
        .expect("get");
    assert_eq!(after.status(), 429, "the IP's count survived the restart");
    let r = keyed(base.clone(), key.clone(), app.client.clone()).await;
    assert_eq!(
        (r.status().as_u16(), header(&r, "x-ratelimit-remaining")),
        (200, Some(0))
    );
    let r = keyed(base.clone(), key.clone(), app.client.clone()).await;
    assert_eq!(r.status(), 429, "and so did the key's");
    let body: Value = r.json().await.expect("json");
    assert_eq!(body["details"]["plan"], "dev");

    let database = app.db.open().await;
    let revoked = lookup::keys::revoke_key(database.store().as_ref(), &created.prefix, chrono::Utc::now())
        .await
        .expect("revoke");
    assert!(revoked.is_some());
    // Counts reach the database within a flush (every second).
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    loop {
        let usage = lookup::keys::usage(
            database.store().as_ref(),
            &kuatia_domain::lookup::plan::period_at(chrono::Utc::now()).name,
        )
        .await
        .expect("usage");
        if usage.get(&format!("key:{}", created.id)) == Some(&2) {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "{usage:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    database.close().await;
    let r = keyed(base.clone(), key.clone(), app.client.clone()).await;
    assert_eq!(r.status(), 401, "a revoked key is refused");
    app.stop().await;
}

#[tokio::test]
async fn a_running_service_picks_up_a_new_import_and_serves_its_own_openapi_health_and_metrics() {
    let (app, base) = lookup_app(&[], |c| {
        c.metrics_bearer_token = Some(kuatia_infrastructure::config::Secret::new("m-token"))
    })
    .await;
    let (_, empty) = get_json(&app.client, &format!("{base}/api/search?q=gonzalez")).await;
    assert_eq!(empty, serde_json::json!([]), "no registry yet: no results");
    let (_, health) = get_json(&app.client, &format!("{base}/health")).await;
    assert_eq!(
        (health["status"].as_str(), health["generation"].as_i64()),
        (Some("ok"), Some(0))
    );

    let database = app.db.open().await;
    let scratch = ScratchDir::new();
    fixture_files(&scratch.0, &FIXTURE);
    import_dir(&database, &scratch.0, 15).await;
    database.close().await;
    let deadline = std::time::Instant::now() + Duration::from_secs(15);
    loop {
        let (_, count) = get_json(&app.client, &format!("{base}/api/search/count?q=gonzalez")).await;
        if count["count"] == 5 {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the new registry was not picked up: {count}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let (_, found) = get_json(&app.client, &format!("{base}/api/ruc/80069563")).await;
    assert_eq!(found["publicationDateText"], "2026-03-15");

    let (status, doc) = get_json(&app.client, &format!("{base}/openapi.json")).await;
    assert_eq!(status, 200);
    assert_eq!(doc["info"]["title"], "kuatia taxpayer lookup API");
    for path in [
        "/api/search",
        "/api/search/count",
        "/api/ruc/{ruc_dv_or_ruc}",
        "/health",
        "/ready",
        "/metrics",
    ] {
        assert!(doc["paths"][path].is_object(), "{path} documented");
    }
    assert!(
        doc["paths"].get("/v1/documents").is_none(),
        "not the invoicing document"
    );
    let (status, _) = get_json(&app.client, &format!("{base}/ready")).await;
    assert_eq!(status, 200);
    let unauthorised = app
        .client
        .get(format!("{base}/metrics"))
        .send()
        .await
        .expect("get");
    assert_eq!(unauthorised.status(), 401);
    let metrics = app
        .client
        .get(format!("{base}/metrics"))
        .bearer_auth("m-token")
        .send()
        .await
        .expect("get")
        .text()
        .await
        .expect("text");
    assert!(
        metrics.contains("kuatia_lookup_registry_taxpayers 8"),
        "{metrics}"
    );
    assert!(
        metrics.contains("route=\"/api/search\""),
        "request metrics by route"
    );
    // Every series has its help text (the lookup's own gauges included).
    crate::api::promtool_accepts(&metrics);
    let (status, body) = get_json(&app.client, &format!("{base}/nothing/here")).await;
    assert_eq!((status, body["code"].as_str()), (404, Some("not_found")));
    app.stop().await;
}

/// Runs `kuatia lookup …` in-process: clap parsing and the command, as the binary does.
async fn kuatia_lookup(config: &kuatia_infrastructure::config::Config, args: &[&str]) -> anyhow::Result<()> {
    use clap::Parser;
    let cli = kuatia_api::cli::Cli::try_parse_from(std::iter::once("kuatia").chain(args.iter().copied()))?;
    match cli.command {
        Some(kuatia_api::cli::Command::Lookup(cmd)) => {
            kuatia_api::lookup::cli::run(config, cmd).await.map(|_| ())
        }
        other => anyhow::bail!("not a lookup command: {other:?}"),
    }
}

#[tokio::test]
async fn the_lookup_commands_generate_import_report_and_manage_keys() {
    let db = TestDb::new().await;
    let config = db.config();
    let scratch = ScratchDir::new();
    let dir = scratch.0.join("dnit");
    let dir_text = dir.to_string_lossy().into_owned();
    kuatia_lookup(
        &config,
        &[
            "lookup", "generate", "--rows", "500", "--out", &dir_text, "--zip", "--broken", "2", "--blank",
            "1",
        ],
    )
    .await
    .expect("generate");
    assert!(dir.join("ruc0.zip").exists());
    let report_path = scratch.0.join("report.json");
    let report_text = report_path.to_string_lossy().into_owned();
    kuatia_lookup(
        &config,
        &[
            "lookup",
            "import",
            "--dir",
            &dir_text,
            "--published",
            "2026-03-31",
            "--report",
            &report_text,
        ],
    )
    .await
    .expect("import");
    let report: Value = serde_json::from_slice(&std::fs::read(&report_path).expect("report")).expect("json");
    assert_eq!(
        (
            report["rows"].as_u64(),
            report["broken"].as_u64(),
            report["blank"].as_u64()
        ),
        (Some(500), Some(2), Some(1))
    );
    assert_eq!(report["generation"], 1);
    assert!(
        report["problems"]
            .as_array()
            .expect("problems")
            .iter()
            .all(|p| p["file"].as_str().is_some_and(|f| f.starts_with("ruc")) && p["line"].as_u64().is_some()),
        "{report}"
    );
    assert!(
        kuatia_lookup(&config, &["lookup", "import", "--published", "2026-03-31"])
            .await
            .is_err(),
        "--published needs --dir"
    );
    assert!(
        kuatia_lookup(
            &config,
            &[
                "lookup",
                "keys",
                "create",
                "--plan",
                "enterprise",
                "--name",
                "Big"
            ]
        )
        .await
        .is_err(),
        "an enterprise key needs --limit"
    );
    assert!(
        kuatia_lookup(
            &config,
            &["lookup", "keys", "create", "--plan", "gold", "--name", "X"]
        )
        .await
        .is_err()
    );
    kuatia_lookup(
        &config,
        &[
            "lookup",
            "keys",
            "create",
            "--plan",
            "enterprise",
            "--name",
            "Big",
            "--limit",
            "5000000",
        ],
    )
    .await
    .expect("create");
    kuatia_lookup(&config, &["lookup", "keys", "list"])
        .await
        .expect("list");
    kuatia_lookup(&config, &["lookup", "status"])
        .await
        .expect("status");
    let database = db.open().await;
    let keys = lookup::keys::list_keys(database.store().as_ref())
        .await
        .expect("keys");
    assert_eq!((keys.len(), keys[0].monthly_limit), (1, Some(5_000_000)));
    let prefix = keys[0].prefix.clone();
    database.close().await;
    kuatia_lookup(&config, &["lookup", "keys", "revoke", &prefix])
        .await
        .expect("revoke");
    assert!(
        kuatia_lookup(&config, &["lookup", "keys", "revoke", &prefix])
            .await
            .is_err(),
        "already revoked"
    );
}

#[tokio::test]
async fn intake_warns_about_a_buyer_the_registry_lists_as_not_active_or_does_not_list() {
    // The sample invoice's buyer is 80013884-8.
    let app = TestApp::spawn_with(|c| c.workers = 0).await;
    let ready = app.ready_at("registry", "http://127.0.0.1:9").await;
    let validate = |doc: &Value| {
        app.as_key(
            reqwest::Method::POST,
            "/v1/documents/validate",
            &ready.key,
            &ready.tenant,
        )
        .json(doc)
    };
    let mut doc = kuatia_domain::document::canonical::sample_invoice();
    doc["company_id"] = serde_json::json!(ready.company);
    doc["issue_datetime"] = serde_json::json!(kuatia_tests::hours_ago(1));
    let warnings = |body: &Value| -> Vec<String> {
        body["warnings"]
            .as_array()
            .map(|w| {
                w.iter()
                    .filter_map(|i| i["code"].as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default()
    };

    // No registry imported yet: no warning.
    let (status, body) = kuatia_tests::send(validate(&doc)).await;
    assert_eq!(status, 200, "{body}");
    assert!(warnings(&body).is_empty(), "{body}");

    let scratch = ScratchDir::new();
    fixture_files(&scratch.0, &[("80013884", "CLIENTE S.A.", "CANCELADO")]);
    import_dir(&app.service().database, &scratch.0, 1).await;
    let (status, body) = kuatia_tests::send(validate(&doc)).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["valid"], true, "a warning does not block: {body}");
    assert_eq!(warnings(&body), vec!["buyer_ruc_not_active".to_owned()], "{body}");

    // A registry that does not list the buyer.
    let other = ScratchDir::new();
    fixture_files(
        &other.0,
        &[("80069563", "DE GENERACION ELECTRONICA S.A.", "ACTIVO")],
    );
    import_dir(&app.service().database, &other.0, 2).await;
    let (_, body) = kuatia_tests::send(validate(&doc)).await;
    assert_eq!(warnings(&body), vec!["buyer_ruc_not_found".to_owned()], "{body}");
    app.stop().await;
}
