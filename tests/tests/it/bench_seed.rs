//! `kuatia bench seed` (issue 30): the scale fixture writes histories the service reads as its
//! own. The seeded tenants are ready, their documents' chains verify, the read models equal a
//! rebuild, the number series go on where the seed left them, and the same seed writes the same
//! documents.

use kuatia_api::seed::{SeedOptions, SeedPorts, SeedReport, seed};
use kuatia_application::event_store::{BatchOutcome, ProjectionKind};
use kuatia_application::projection::Projection;
use kuatia_infrastructure::store::Database;
use kuatia_projections::documents::Documents;
use kuatia_projections::sifen_answers::SifenAnswers;
use kuatia_tests::{EventByEvent, TestApp, TestDb, snapshot, table_rows};
use reqwest::Method;
use serde_json::{Value, json};
use std::time::Duration;

const DOCUMENTS: &str = "SELECT CAST(id AS TEXT), CAST(tenant_id AS TEXT), status, channel, doc_type, \
     number, cdc, external_id, grand_total, CAST(version AS TEXT) FROM documents ORDER BY 1";
const SHAPE: &str = "SELECT status, channel, doc_type, number FROM documents \
     ORDER BY channel, doc_type, number, status";

fn ports(app: &TestApp) -> SeedPorts {
    SeedPorts::new(app.service().database.store(), &app.db.config()).expect("seed ports")
}

fn options() -> SeedOptions {
    SeedOptions {
        documents: 400,
        tenants: 3,
        seed: 30,
        large_share: 0.5,
        batch: 64,
        days: 30,
    }
}

async fn seeded() -> (TestApp, SeedReport) {
    let app = TestApp::spawn().await;
    let report = seed(&ports(&app), &options(), &|_| {}).await.expect("seed");
    (app, report)
}

#[tokio::test]
async fn the_seed_writes_a_history_the_service_reads_as_its_own() {
    let (app, report) = seeded().await;
    let shares: Vec<u64> = report.tenants.iter().map(|t| t.documents).collect();
    assert_eq!(shares, vec![200, 100, 100]);
    assert_eq!(report.documents, 400);
    let store = app.service().database.store();

    // Every final status, both channels, every SIFEN type.
    let rows = snapshot(&app.service().database, SHAPE).await;
    assert_eq!(rows.len(), 400);
    let count = |column: usize, value: &str| {
        rows.iter()
            .filter(|r| r[column].as_deref() == Some(value))
            .count()
    };
    for status in [
        "accepted",
        "rejected",
        "cancelled",
        "invalidated",
        "failed_terminal",
        "validation_failed",
    ] {
        assert!(count(0, status) > 0, "no {status} document in {rows:?}");
    }
    for doc_type in [
        "invoice",
        "credit_note",
        "debit_note",
        "remision",
        "autofactura",
        "receipt",
    ] {
        assert!(count(2, doc_type) > 0, "no {doc_type} document");
    }
    assert!(count(1, "autoimpresor") > 0 && count(1, "sifen") > 0);
    assert!(
        (9.0..11.0).contains(&(report.events as f64 / report.documents as f64)),
        "about ten events per document: {}",
        report.events
    );

    // The chains verify, and the read model equals its rebuild.
    let verified = kuatia_application::support::verify_store(&store, &|_, _| {})
        .await
        .expect("verify");
    assert!(verified.broken.is_none(), "{:?}", verified.broken);
    assert!(verified.checked >= report.events);
    let before = snapshot(&app.service().database, DOCUMENTS).await;
    kuatia_projections::runtime::rebuild(&store, &Documents, &|_, _| {})
        .await
        .expect("rebuild");
    assert_eq!(snapshot(&app.service().database, DOCUMENTS).await, before);

    // A seeded tenant is ready, its artifacts download, and its list answers.
    let large = &report.tenants[0];
    let tenant = large.id.to_string();
    let get = |path: String| {
        let request = app.as_key(Method::GET, &path, &large.api_key, &tenant);
        async move {
            let response = request.send().await.expect("send");
            let status = response.status().as_u16();
            (status, response.json::<Value>().await.unwrap_or(Value::Null))
        }
    };
    let (status, readiness) = get(format!(
        "/v1/emission-channels/readiness?company_id={}",
        large.company_id
    ))
    .await;
    assert_eq!(status, 200, "{readiness}");
    let channels = readiness["channels"].as_array().expect("channels");
    assert!(
        channels.len() == 2 && channels.iter().all(|c| c["ready"] == true),
        "{readiness}"
    );
    let (status, list) = get("/v1/documents?status=accepted&limit=5".to_owned()).await;
    assert_eq!(status, 200, "{list}");
    let first = &list["documents"][0];
    assert_eq!(first["status"], "accepted", "{list}");
    let id = first["id"].as_str().expect("id");
    let (status, artifacts) = get(format!("/v1/documents/{id}/artifacts")).await;
    assert_eq!(status, 200, "{artifacts}");
    let listed = artifacts.as_array().expect("artifacts");
    assert!(!listed.is_empty(), "{artifacts}");
    for artifact in listed {
        let url = artifact["download_url"].as_str().expect("download_url");
        let response = app.client.get(url).send().await.expect("download");
        assert_eq!(response.status().as_u16(), 200, "{artifact}");
    }

    // Intake goes on: the next invoice of the large tenant's series takes the number after the
    // seed's last one.
    let seeded_invoices = rows
        .iter()
        .filter(|r| r[1].as_deref() == Some("sifen") && r[2].as_deref() == Some("invoice") && r[3].is_some())
        .count();
    assert!(seeded_invoices > 0);
    let mut invoice = kuatia_domain::document::canonical::sample_invoice();
    invoice["company_id"] = json!(large.company_id);
    invoice["external_id"] = json!("AFTER-SEED-1");
    invoice["seller"]["ruc"] = json!(large.ruc);
    invoice["issue_datetime"] = json!(kuatia_tests::http::hours_ago(0));
    let response = app
        .as_key(Method::POST, "/v1/documents", &large.api_key, &tenant)
        .header("Idempotency-Key", "after-seed-1")
        .json(&invoice)
        .send()
        .await
        .expect("post");
    let posted: Value = response.json().await.expect("json");
    let id = posted["id"]
        .as_str()
        .unwrap_or_else(|| panic!("{posted}"))
        .to_owned();
    let large_invoices = snapshot(&app.service().database, LARGE_INVOICES)
        .await
        .into_iter()
        .filter(|r| r[0].as_deref() == Some(tenant.as_str()))
        .count();
    let mut number = Value::Null;
    let mut document = Value::Null;
    for _ in 0..100 {
        document = get(format!("/v1/documents/{id}")).await.1;
        number = document["summary"]["number"].clone();
        if !number.is_null() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let drawn = number
        .as_str()
        .unwrap_or_else(|| panic!("not numbered: {document}"))
        .rsplit('-')
        .next()
        .expect("number")
        .to_owned();
    assert_eq!(drawn, format!("{:07}", large_invoices + 1), "{number}");
    app.stop().await;
}

const LARGE_INVOICES: &str = "SELECT CAST(tenant_id AS TEXT) FROM documents \
     WHERE channel = 'sifen' AND doc_type = 'invoice' AND number IS NOT NULL";

#[tokio::test]
async fn the_same_seed_writes_the_same_documents_and_a_second_run_is_refused() {
    let (first, _) = seeded().await;
    let (second, _) = seeded().await;
    assert_eq!(
        snapshot(&first.service().database, SHAPE).await,
        snapshot(&second.service().database, SHAPE).await
    );
    let again = seed(&ports(&first), &options(), &|_| {}).await;
    let refused = format!("{:#}", again.expect_err("seeded twice"));
    assert!(refused.contains("exists already"), "{refused}");
    first.stop().await;
    second.stop().await;
}

const ANSWER_ROWS: &str = "SELECT code, CAST(answers AS TEXT), CAST(timed AS TEXT) FROM sifen_answers";

/// Every row of a projection's tables.
async fn rows_of(database: &Database, projection: &dyn Projection) -> Vec<Vec<String>> {
    let mut rows = Vec::new();
    for table in projection.tables() {
        rows.push(table_rows(database, table).await);
    }
    rows
}

/// Every projection a rebuild serves leaves, through its batch path (`apply_all`) and reading
/// only its stream types, the rows its `apply` leaves event by event over every event, on a
/// history with every ending (issue 30: batch paths and stream filters are what make a rebuild
/// fast). `sifen_answers` also counts each answer once when a batch is delivered again over
/// answers counted already and new ones.
#[tokio::test]
async fn rebuilds_leave_the_rows_event_by_event_application_leaves() {
    // No service runs on the database: no subscription loop moves a checkpoint but the test.
    let db = TestDb::new().await;
    let database = db.open().await;
    let store = database.store();
    let ports = SeedPorts::new(store.clone(), &db.config()).expect("seed ports");
    seed(&ports, &options(), &|_| {}).await.expect("seed");
    let none = |_: i64, _: i64| {};

    let mut rebuilt = Vec::new();
    for projection in kuatia_projections::registry::all() {
        if projection.kind() == ProjectionKind::SideEffect {
            continue;
        }
        let projection = projection.as_ref();
        kuatia_projections::runtime::rebuild(&store, &EventByEvent(projection), &none)
            .await
            .expect("rebuild event by event");
        let one_by_one = rows_of(&database, projection).await;
        kuatia_projections::runtime::rebuild(&store, projection, &none)
            .await
            .expect("rebuild");
        assert_eq!(
            rows_of(&database, projection).await,
            one_by_one,
            "{}",
            projection.name()
        );
        rebuilt.push(projection.name());
    }
    for name in [
        "documents",
        "sifen_answers",
        "access",
        "configuration",
        "number_series",
    ] {
        assert!(rebuilt.contains(&name), "{name} in {rebuilt:?}");
    }

    // SIFEN's answers are there with their codes, retries and times.
    let answers = snapshot(&database, ANSWER_ROWS).await;
    let codes: std::collections::BTreeSet<_> = answers.iter().map(|r| r[0].clone()).collect();
    assert!(
        codes.len() >= 3 && codes.contains(&Some("retry".to_owned())),
        "{codes:?}"
    );
    assert!(
        answers.iter().any(|r| r[2].as_deref() != Some("0")),
        "timed: {answers:?}"
    );

    // Event by event up to some position, then back a little: the next batches hold answers
    // counted already and answers not yet counted, and count each once.
    let expected = rows_of(&database, &SifenAnswers).await;
    store.reset_projection(&SifenAnswers).await.expect("reset");
    let mut reached = 0;
    for _ in 0..2 {
        match store
            .run_batch(&EventByEvent(&SifenAnswers), 900)
            .await
            .expect("a batch")
        {
            BatchOutcome::Applied { position, .. } => reached = position,
            other => panic!("{other:?}"),
        }
    }
    let back = format!(
        "UPDATE subscriptions SET position = {} WHERE name = 'sifen_answers'",
        reached / 2
    );
    kuatia_tests::execute(&database, Box::leak(back.into_boxed_str()))
        .await
        .expect("rewind");
    kuatia_projections::runtime::catch_up(&store, &SifenAnswers, 1000, &none)
        .await
        .expect("catch up");
    assert_eq!(rows_of(&database, &SifenAnswers).await, expected);
}

/// The document list gives the same pages whichever way it reads them (issue 30): a date window
/// far back is read window first, one that reaches today is walked newest first, a part of a name
/// many documents share is found among the newest documents and a rare one through the names
/// index. Every page, followed cursor by cursor, is the one worked out from the whole list.
#[tokio::test]
async fn the_list_over_a_history_gives_the_pages_the_whole_list_says() {
    let app = TestApp::spawn().await;
    let options = SeedOptions {
        documents: 2_100,
        tenants: 1,
        seed: 31,
        large_share: 1.0,
        batch: 300,
        days: 60,
    };
    let report = seed(&ports(&app), &options, &|_| {}).await.expect("seed");
    let tenant = &report.tenants[0];
    let tenant_id = tenant.id.to_string();
    // Every page of a query, cursor by cursor.
    let pages = |query: String, limit: u32| {
        let app = &app;
        let (key, tenant_id) = (&tenant.api_key, &tenant_id);
        async move {
            let mut ids = Vec::new();
            let mut cursor: Option<String> = None;
            loop {
                let after = cursor
                    .as_ref()
                    .map(|c| format!("&cursor={c}"))
                    .unwrap_or_default();
                let path = format!("/v1/documents?limit={limit}&{query}{after}");
                let response = app
                    .as_key(Method::GET, &path, key, tenant_id)
                    .send()
                    .await
                    .expect("send");
                assert_eq!(response.status().as_u16(), 200, "{path}");
                let page: Value = response.json().await.expect("json");
                let documents = page["documents"].as_array().expect("documents").clone();
                assert!(documents.len() <= limit as usize, "{path}");
                ids.extend(documents);
                match page["next_cursor"].as_str() {
                    Some(next) => cursor = Some(next.to_owned()),
                    None => return ids,
                }
            }
        }
    };
    // One buyer nobody else has, posted after the seed: a part of its name is not found among
    // the newest documents often enough to fill a page, so the names index finds it.
    let mut invoice = kuatia_domain::document::canonical::sample_invoice();
    invoice["company_id"] = json!(tenant.company_id);
    invoice["external_id"] = json!("RARE-BUYER-1");
    invoice["seller"]["ruc"] = json!(tenant.ruc);
    invoice["issue_datetime"] = json!(kuatia_tests::http::hours_ago(0));
    invoice["buyer"] =
        json!({"legal_name": "Ña Benítez Ybyrá", "document_type": "ci", "document_number": "4321"});
    let response = app
        .as_key(Method::POST, "/v1/documents", &tenant.api_key, &tenant_id)
        .header("Idempotency-Key", "rare-buyer-1")
        .json(&invoice)
        .send()
        .await
        .expect("post");
    assert!(
        response.status().is_success(),
        "{}",
        response.text().await.unwrap_or_default()
    );
    let all = pages(String::new(), 100).await;
    assert_eq!(all.len(), 2_101);
    let id = |d: &Value| d["id"].as_str().expect("id").to_owned();
    let issued = |d: &Value| {
        d["issue_datetime"]
            .as_str()
            .and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok())
            .expect("issue_datetime")
            .with_timezone(&chrono::Utc)
    };

    let now = chrono::Utc::now();
    let days = |n: i64| now - chrono::Duration::days(n);
    let at = |t: chrono::DateTime<chrono::Utc>| t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    let windows = [
        // far back: fewer documents in it than after it, read window first
        (Some(days(50)), Some(days(45)), None, None),
        (Some(days(50)), Some(days(45)), Some("accepted"), Some("sifen")),
        (Some(days(40)), Some(days(38)), Some("cancelled"), None),
        (None, Some(days(55)), None, Some("autoimpresor")),
        // reaching today, or most of the history: walked newest first
        (Some(days(3)), None, None, None),
        (Some(days(59)), Some(days(2)), Some("accepted"), None),
    ];
    for (from, to, status, channel) in windows {
        let mut query = Vec::new();
        if let Some(from) = from {
            query.push(format!("date_from={}", at(from)));
        }
        if let Some(to) = to {
            query.push(format!("date_to={}", at(to)));
        }
        if let Some(status) = status {
            query.push(format!("status={status}"));
        }
        if let Some(channel) = channel {
            query.push(format!("channel={channel}"));
        }
        let query = query.join("&");
        let expected: Vec<String> = all
            .iter()
            .filter(|d| from.is_none_or(|f| issued(d) >= f) && to.is_none_or(|t| issued(d) < t))
            .filter(|d| status.is_none_or(|s| d["status"] == s) && channel.is_none_or(|c| d["channel"] == c))
            .map(id)
            .collect();
        assert!(!expected.is_empty(), "{query}: the seed left nothing to find");
        let listed: Vec<String> = pages(query.clone(), 20).await.iter().map(id).collect();
        assert_eq!(listed, expected, "{query}");
    }

    // A part of a name: the buyers' names as stored, searched here by hand.
    let names: std::collections::HashMap<String, String> = snapshot(
        &app.service().database,
        "SELECT CAST(id AS TEXT), buyer_search FROM documents WHERE buyer_search IS NOT NULL",
    )
    .await
    .into_iter()
    .filter_map(|r| Some((r[0].clone()?, r[1].clone()?)))
    .collect();
    for (part, many) in [
        ("cliente", true),
        ("generacion", true),
        ("benitez", false),
        ("nadie", false),
    ] {
        let expected: Vec<String> = all
            .iter()
            .map(id)
            .filter(|i| names.get(i).is_some_and(|n| n.contains(part)))
            .collect();
        assert_eq!(expected.len() > 50, many, "{part}: {} documents", expected.len());
        let listed: Vec<String> = pages(format!("q={part}"), 50).await.iter().map(id).collect();
        assert_eq!(listed, expected, "q={part}");
    }
    app.stop().await;
}
