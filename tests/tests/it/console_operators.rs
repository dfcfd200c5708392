//! The operators' room over plain HTTP: closed (404) to anyone `kuatia operators add` did not
//! make an operator, a tenant's owner included; an operator rebuilds a projection and sees it to
//! the end, verifies the store, retries and discards jobs; each action an event of a support
//! stream with the operator as actor. The browser drives it in `console_browser`.

use std::time::{Duration, Instant};

use kuatia_application::jobs::NewJob;
use kuatia_domain::tenancy::TenantId;
use kuatia_tests::Simulated;

use crate::console::{Visitor, flash, hidden, service_with_an_accepted_invoice};

const PASSWORD: &str = "a long enough secret";
pub(crate) const OPERATOR: &str = "soporte@kuatia.com.py";

/// The tenant's service with `OPERATOR` registered (a viewer of the tenant) and made an operator.
pub(crate) async fn with_an_operator() -> Simulated {
    let (f, _doc) = service_with_an_accepted_invoice().await;
    crate::identity::join(&f.app, &f.tenant, &f.key, OPERATOR, "viewer").await;
    let store = f.app.service().database.store();
    assert!(
        kuatia_application::support::add_operator(&store, OPERATOR, "test")
            .await
            .expect("add")
    );
    f
}

/// A dead job of a kind no worker runs, in the tenant's queue: its id.
pub(crate) async fn dead_job(f: &Simulated, key: &str) -> String {
    let jobs = f.app.service().database.jobs();
    let tenant = TenantId::from_uuid(f.tenant.parse().expect("tenant"));
    let mut job = NewJob::new("test.noop", key, tenant, serde_json::json!({}));
    job.max_attempts = 1;
    jobs.enqueue(&job).await.expect("enqueue");
    let claimed = jobs
        .claim("w", &["test.noop".to_owned()], 1, Duration::from_secs(30))
        .await
        .expect("claim");
    jobs.fail(claimed[0].id, "w", "the receiver is gone", None)
        .await
        .expect("fail");
    claimed[0].id.to_string()
}

/// The support events of the system's and the tenant's streams: `(type, actor)`.
async fn support_events(f: &Simulated) -> Vec<(String, String)> {
    let store = f.app.service().database.store();
    let mut out = Vec::new();
    for stream in [
        kuatia_domain::support::stream_id(TenantId::SYSTEM),
        format!("support:{}", f.tenant),
    ] {
        for e in store.load_stream(&stream).await.expect("stream") {
            out.push((e.event_type.clone(), e.metadata.actor.clone().unwrap_or_default()));
        }
    }
    out
}

#[tokio::test]
async fn the_room_is_not_found_by_anyone_but_an_operator() {
    let f = with_an_operator().await;
    let mut anonymous = Visitor::new(&f.app.base);
    assert_eq!(anonymous.get("/console/operators").await.status, 404);
    let mut owner = Visitor::new(&f.app.base);
    owner.log_in("duena@example.com.py", PASSWORD).await;
    let csrf = hidden(&owner.get("/console").await.body, "csrf");
    for path in ["/console/operators", "/console/operators?status=dead"] {
        assert_eq!(owner.get(path).await.status, 404, "{path}");
    }
    for path in [
        "/console/operators/verify",
        "/console/operators/projections/documents/rebuild",
    ] {
        let refused = owner.post(path, &[("csrf", &csrf)]).await;
        assert_eq!(refused.status, 404, "{path}");
    }
    assert!(support_events(&f).await.iter().all(|(t, _)| t == "OperatorAdded"));
    // Removed, the operator is refused again.
    let mut op = Visitor::new(&f.app.base);
    op.log_in(OPERATOR, PASSWORD).await;
    assert_eq!(op.get("/console/operators").await.status, 200);
    let store = f.app.service().database.store();
    kuatia_application::support::remove_operator(&store, OPERATOR, "test")
        .await
        .expect("remove");
    assert_eq!(op.get("/console/operators").await.status, 404);
    f.app.stop().await;
}

#[tokio::test]
async fn an_operator_rebuilds_verifies_retries_and_discards_each_recorded_as_theirs() {
    let f = with_an_operator().await;
    let dead = dead_job(&f, "noop:dead").await;
    let mut op = Visitor::new(&f.app.base);
    op.log_in(OPERATOR, PASSWORD).await;
    let room = op.get("/console/operators").await;
    assert_eq!(room.status, 200, "{}", room.body);
    assert!(
        room.body.contains("data-projection=\"documents\""),
        "{}",
        room.body
    );
    assert!(room.body.contains("id=\"store-head\""));
    assert!(room.body.contains(&dead), "the dead job is listed");
    let csrf = hidden(&room.body, "csrf");

    // A forged form does nothing.
    let forged = op
        .post(
            "/console/operators/projections/documents/rebuild",
            &[("csrf", "x")],
        )
        .await;
    assert_eq!(forged.status, 403);

    // Rebuild, watched to the end.
    let started = op
        .post(
            "/console/operators/projections/documents/rebuild",
            &[("csrf", &csrf)],
        )
        .await;
    assert_eq!(started.status, 303, "{}", started.body);
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let page = op.get("/console/operators").await;
        if page.body.contains("data-state=\"done\"") {
            assert!(
                page.body.contains("Reconstrucción de «documents»"),
                "{}",
                page.body
            );
            break;
        }
        assert!(!page.body.contains("data-state=\"failed\""), "{}", page.body);
        assert!(Instant::now() < deadline, "the rebuild never ended");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // The documents are still there.
    assert_eq!(f.document_count().await, 1);

    // Verify the store.
    let verify = op.post("/console/operators/verify", &[("csrf", &csrf)]).await;
    assert_eq!(verify.status, 303);
    let deadline = Instant::now() + Duration::from_secs(30);
    while !op
        .get("/console/operators")
        .await
        .body
        .contains("data-state=\"done\"")
    {
        assert!(Instant::now() < deadline, "the verification never ended");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    // Retry the dead job; discard needs a reason.
    let retried = op
        .post(
            &format!("/console/operators/jobs/{dead}/retry"),
            &[("csrf", &csrf)],
        )
        .await;
    assert_eq!(retried.status, 303);
    assert!(flash(&op.get("/console/operators").await).contains("ahora failed"));
    let no_reason = op
        .post(
            &format!("/console/operators/jobs/{dead}/discard"),
            &[("csrf", &csrf), ("reason", " ")],
        )
        .await;
    assert_eq!(no_reason.status, 303);
    assert!(flash(&op.get("/console/operators").await).contains("motivo"));
    let discarded = op
        .post(
            &format!("/console/operators/jobs/{dead}/discard"),
            &[("csrf", &csrf), ("reason", "receptor dado de baja")],
        )
        .await;
    assert_eq!(discarded.status, 303);
    let dead_now = op.get("/console/operators?status=dead").await;
    assert!(
        dead_now
            .body
            .contains("discarded by soporte@kuatia.com.py: receptor dado de baja")
    );

    let actor = format!("operator:{OPERATOR}");
    let events = support_events(&f).await;
    for wanted in [
        "ProjectionRebuilt",
        "EventsVerified",
        "JobRetried",
        "JobDiscarded",
    ] {
        assert!(
            events.iter().any(|(t, a)| t == wanted && *a == actor),
            "{wanted} by {actor}: {events:?}"
        );
    }
    f.app.stop().await;
}

const ANSWERS: &str = "SELECT CAST(company_id AS TEXT), code, CAST(answers AS TEXT), CAST(timed AS TEXT), \
     CAST(latency_ms AS TEXT) FROM sifen_answers ORDER BY 1, 2";

#[tokio::test]
async fn the_room_shows_sifens_answers_per_tenant_channel_from_a_read_model_that_counts_once() {
    let f = with_an_operator().await;
    let mut op = Visitor::new(&f.app.base);
    op.log_in(OPERATOR, PASSWORD).await;
    // The accepted invoice's answer reaches the room once the catch-up subscription has run.
    let deadline = Instant::now() + Duration::from_secs(30);
    let room = loop {
        let room = op.get("/console/operators").await;
        if room.body.contains("id=\"channel-answers\"") {
            break room;
        }
        assert!(Instant::now() < deadline, "no answers shown: {}", room.body);
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let table = room
        .body
        .split("id=\"channel-answers\"")
        .nth(1)
        .and_then(|t| t.split("</table>").next())
        .expect("the table");
    for expected in ["80069563-1", "0260", " ms"] {
        assert!(table.contains(expected), "{expected} in {table}");
    }
    let database = &f.app.service().database;
    let rows = kuatia_tests::snapshot(database, ANSWERS).await;
    assert_eq!(rows.len(), 1, "{rows:?}");
    assert_eq!(
        (
            rows[0][0].as_deref(),
            rows[0][1].as_deref(),
            rows[0][2].as_deref(),
            rows[0][3].as_deref()
        ),
        (Some(f.company.as_str()), Some("0260"), Some("1"), Some("1")),
        "one answer, timed from its attempt: {rows:?}"
    );
    // Delivered again, and rebuilt from the log: the same rows.
    let store = database.store();
    let projection = kuatia_projections::sifen_answers::SifenAnswers;
    let none = |_: i64, _: i64| {};
    kuatia_tests::execute(
        database,
        "UPDATE subscriptions SET position = 0 WHERE name = 'sifen_answers'",
    )
    .await
    .expect("rewind");
    kuatia_projections::runtime::catch_up(&store, &projection, 50, &none)
        .await
        .expect("redeliver");
    assert_eq!(kuatia_tests::snapshot(database, ANSWERS).await, rows);
    kuatia_projections::runtime::rebuild(&store, &projection, &none)
        .await
        .expect("rebuild");
    assert_eq!(kuatia_tests::snapshot(database, ANSWERS).await, rows);
    let in_flight =
        kuatia_tests::snapshot(database, "SELECT CAST(document_id AS TEXT) FROM sifen_sends").await;
    assert!(
        in_flight.is_empty(),
        "an answered document is no longer in flight: {in_flight:?}"
    );
    f.app.stop().await;
}
