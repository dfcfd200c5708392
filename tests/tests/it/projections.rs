//! Read models: inline projections are read-your-writes; catch-up subscriptions move their
//! checkpoint with their rows; an incrementally built projection equals a rebuilt one; applying
//! an event twice changes nothing; side-effect subscriptions are never rebuilt.

use async_trait::async_trait;
use kuatia_application::aggregate::{CommandExecutor, ExecuteError};
use kuatia_application::event_store::{
    BatchOutcome, EventMetadata, ExpectedVersion, ProjectionKind, RecordedEvent, SharedStore, StoreError,
    StreamRef,
};
use kuatia_application::projection::{Projection, SqlTx};
use kuatia_domain::tenancy::TenantId;
use kuatia_infrastructure::store::Database;
use kuatia_projections::event_type_counts::EventTypeCounts;
use kuatia_projections::runtime::{self, RebuildError, RuntimeConfig};
use kuatia_projections::stream_index::StreamIndex;
use kuatia_tests::ledger::{Ledger, LedgerCommand};
use kuatia_tests::{TestDb, snapshot};
use proptest::prelude::*;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

use crate::store::{append, stream, tenant};

const STREAM_INDEX: &str = "SELECT CAST(stream_id AS TEXT), CAST(tenant_id AS TEXT), stream_type, \
     CAST(version AS TEXT), last_event_type, CAST(last_position AS TEXT), \
     CAST(first_recorded_at AS TEXT), CAST(last_recorded_at AS TEXT) FROM stream_index ORDER BY stream_id";
const COUNTS: &str = "SELECT CAST(tenant_id AS TEXT), stream_type, event_type, CAST(events AS TEXT), \
     CAST(last_position AS TEXT) FROM event_type_counts ORDER BY 1, 2, 3";

fn no_progress(_: i64, _: i64) {}

#[tokio::test]
async fn an_inline_projection_is_updated_in_the_append_transaction() {
    let db = TestDb::new().await;
    let database = db.open().await;
    let store = database.store();
    let t = tenant();
    let outcome = store
        .append(append(
            stream(t, "s1"),
            ExpectedVersion::NoStream,
            &["Opened", "Deposited"],
        ))
        .await
        .expect("append");
    let rows = snapshot(&database, STREAM_INDEX).await;
    assert_eq!(rows.len(), 1, "visible as soon as append returns");
    assert_eq!(rows[0][3].as_deref(), Some("2"));
    assert_eq!(rows[0][4].as_deref(), Some("Deposited"));
    assert_eq!(rows[0][5], Some(outcome.positions[1].to_string()));
}

#[tokio::test]
async fn a_catch_up_subscription_applies_batches_and_moves_its_checkpoint_with_them() {
    let db = TestDb::new().await;
    let database = db.open().await;
    let store = database.store();
    let t = tenant();
    for i in 0..5 {
        store
            .append(append(
                stream(t, "s1"),
                ExpectedVersion::from_current(i),
                &["Deposited"],
            ))
            .await
            .expect("append");
    }
    store
        .register_projection(&EventTypeCounts)
        .await
        .expect("register");
    assert_eq!(
        store.run_batch(&EventTypeCounts, 3).await.expect("batch"),
        BatchOutcome::Applied {
            count: 3,
            position: 3
        }
    );
    assert_eq!(snapshot(&database, COUNTS).await[0][3].as_deref(), Some("3"));
    assert_eq!(
        store.run_batch(&EventTypeCounts, 3).await.expect("batch"),
        BatchOutcome::Applied {
            count: 2,
            position: 5
        }
    );
    assert_eq!(
        store.run_batch(&EventTypeCounts, 3).await.expect("batch"),
        BatchOutcome::CaughtUp
    );
    let status = store.subscription_statuses().await.expect("status");
    let counts = status
        .iter()
        .find(|s| s.name == EventTypeCounts::NAME)
        .expect("listed");
    assert_eq!((counts.position, counts.lag), (5, 0));
}

/// A catch-up projection that fails on one event type until told otherwise.
struct Fragile {
    broken: std::sync::atomic::AtomicBool,
}

#[async_trait]
impl Projection for Fragile {
    fn name(&self) -> &'static str {
        "test_fragile"
    }
    fn kind(&self) -> ProjectionKind {
        ProjectionKind::CatchUp
    }
    fn tables(&self) -> &'static [&'static str] {
        &[]
    }
    async fn apply(&self, _tx: &mut dyn SqlTx, event: &RecordedEvent) -> Result<(), StoreError> {
        if self.broken.load(std::sync::atomic::Ordering::SeqCst) && event.event_type == "Poison" {
            return Err(StoreError::Invalid("cannot digest Poison".into()));
        }
        Ok(())
    }
}

#[tokio::test]
async fn a_failing_subscription_records_its_error_retries_and_never_skips_the_event() {
    let db = TestDb::new().await;
    let database = db.open().await;
    let store = database.store();
    let t = tenant();
    store
        .append(append(
            stream(t, "s1"),
            ExpectedVersion::NoStream,
            &["Fine", "Poison", "Fine"],
        ))
        .await
        .expect("append");
    let fragile = Arc::new(Fragile {
        broken: std::sync::atomic::AtomicBool::new(true),
    });
    let shutdown = CancellationToken::new();
    let config = RuntimeConfig {
        poll_interval: Duration::from_millis(20),
        batch_size: 10,
    };
    let handle = runtime::spawn(store.clone(), vec![fragile.clone()], config, shutdown.clone());
    let mut failing = None;
    for _ in 0..100 {
        let statuses = store.subscription_statuses().await.expect("status");
        if let Some(s) = statuses
            .iter()
            .find(|s| s.name == "test_fragile" && s.last_error.is_some())
        {
            failing = Some(s.clone());
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let failing = failing.expect("the error is recorded");
    assert_eq!(failing.position, 0, "the failed batch was rolled back");
    assert!(failing.last_error.as_deref().unwrap_or("").contains("Poison"));
    fragile.broken.store(false, std::sync::atomic::Ordering::SeqCst);
    let mut healed = false;
    for _ in 0..300 {
        let statuses = store.subscription_statuses().await.expect("status");
        let s = statuses
            .iter()
            .find(|s| s.name == "test_fragile")
            .expect("listed");
        if s.position == 3 && s.last_error.is_none() {
            healed = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    shutdown.cancel();
    handle.await.expect("runtime");
    assert!(
        healed,
        "after the fix the subscription catches up and clears its error"
    );
}

struct Mailer;

#[async_trait]
impl Projection for Mailer {
    fn name(&self) -> &'static str {
        "test_mailer"
    }
    fn kind(&self) -> ProjectionKind {
        ProjectionKind::SideEffect
    }
    fn tables(&self) -> &'static [&'static str] {
        &[]
    }
    async fn apply(&self, _tx: &mut dyn SqlTx, _event: &RecordedEvent) -> Result<(), StoreError> {
        Ok(())
    }
}

#[tokio::test]
async fn a_side_effect_subscription_is_never_rebuilt() {
    let db = TestDb::new().await;
    let store = db.open().await.store();
    store.register_projection(&Mailer).await.expect("register");
    match runtime::rebuild(&store, &Mailer, &no_progress).await {
        Err(RebuildError::SideEffects(name)) => assert_eq!(name, "test_mailer"),
        other => panic!("expected a refusal, got {other:?}"),
    }
    assert!(matches!(
        store.reset_projection(&Mailer).await,
        Err(StoreError::Invalid(_))
    ));
}

/// A rebuild leaves its tables vacuumed and analysed on PostgreSQL, by their owner (the
/// application role may not): the first queries after it plan with the new rows' statistics and
/// read index-only (issue 30). SQLite has nothing to refresh.
#[tokio::test]
async fn a_rebuilt_projections_tables_are_vacuumed_and_analysed() {
    let db = TestDb::new().await;
    let Some(mut owner) = db.owner_pg().await else {
        return;
    };
    let store = db.open().await.store();
    store
        .append(append(
            stream(tenant(), "v1"),
            ExpectedVersion::NoStream,
            &["Opened"],
        ))
        .await
        .expect("append");
    for projection in [&StreamIndex as &dyn Projection, &EventTypeCounts] {
        runtime::rebuild(&store, projection, &no_progress)
            .await
            .expect("rebuild");
        for table in projection.tables() {
            let mut refreshed = false;
            for _ in 0..50 {
                refreshed = sqlx::query_scalar(
                    "SELECT last_vacuum IS NOT NULL AND last_analyze IS NOT NULL \
                     FROM pg_stat_user_tables WHERE relname = $1",
                )
                .bind(table)
                .fetch_one(&mut owner)
                .await
                .expect("pg_stat_user_tables");
                if refreshed {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            assert!(
                refreshed,
                "{table} was not vacuumed and analysed after the rebuild"
            );
        }
    }
}

/// Runs one command with retries on version conflicts, like a client would.
async fn run(executor: &CommandExecutor<Ledger>, t: TenantId, id: &str, command: LedgerCommand) {
    for _ in 0..50 {
        match executor
            .execute(t, id, command.clone(), EventMetadata::default())
            .await
        {
            Ok(_) | Err(ExecuteError::Rejected(_)) => return,
            Err(ExecuteError::Conflict(_)) => tokio::task::yield_now().await,
            Err(other) => panic!("{other:?}"),
        }
    }
    panic!("too many conflicts");
}

fn command(kind: u8, amount: i64) -> LedgerCommand {
    match kind {
        0 => LedgerCommand::Open {
            owner: format!("owner-{amount}"),
        },
        1 => LedgerCommand::Deposit { amount },
        2 => LedgerCommand::Withdraw { amount },
        _ => LedgerCommand::Close,
    }
}

async fn incremental_equals_rebuilt(ops: Vec<(usize, u8, i64)>, writers: usize) {
    let db = TestDb::new().await;
    let database: Database = db.open().await;
    let store: SharedStore = database.store();
    let tenants = [
        TenantId::from_uuid(uuid::Uuid::now_v7()),
        TenantId::from_uuid(uuid::Uuid::now_v7()),
    ];
    // The subscription runs while the writers write: the incremental build.
    let shutdown = CancellationToken::new();
    let config = RuntimeConfig {
        poll_interval: Duration::from_millis(5),
        batch_size: 7,
    };
    let subscription = runtime::spawn(
        store.clone(),
        vec![Arc::new(EventTypeCounts)],
        config,
        shutdown.clone(),
    );
    let executor = Arc::new(CommandExecutor::<Ledger>::new(store.clone(), ()));
    let chunks: Vec<Vec<(usize, u8, i64)>> = (0..writers)
        .map(|w| ops.iter().skip(w).step_by(writers).cloned().collect())
        .collect();
    let tasks: Vec<_> = chunks
        .into_iter()
        .map(|chunk| {
            let executor = executor.clone();
            tokio::spawn(async move {
                for (s, kind, amount) in chunk {
                    // Every stream is opened first so that most commands do something.
                    let id = format!("acct-{s}");
                    let t = tenants[s % 2];
                    run(&executor, t, &id, command(0, amount)).await;
                    run(&executor, t, &id, command(kind, amount)).await;
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.expect("writer");
    }
    runtime::catch_up(&store, &EventTypeCounts, 7, &no_progress)
        .await
        .expect("catch up");
    shutdown.cancel();
    subscription.await.expect("runtime");
    let incremental = (
        snapshot(&database, STREAM_INDEX).await,
        snapshot(&database, COUNTS).await,
    );
    let head = store.head_position().await.expect("head");
    let counted: i64 = incremental
        .1
        .iter()
        .map(|r| r[3].as_deref().unwrap_or("0").parse::<i64>().unwrap_or(0))
        .sum();
    assert_eq!(counted, head, "every event counted exactly once");

    runtime::rebuild(&store, &StreamIndex, &no_progress)
        .await
        .expect("rebuild inline");
    runtime::rebuild(&store, &EventTypeCounts, &no_progress)
        .await
        .expect("rebuild catch-up");
    let rebuilt = (
        snapshot(&database, STREAM_INDEX).await,
        snapshot(&database, COUNTS).await,
    );
    assert_eq!(incremental, rebuilt, "incremental == rebuilt");

    // Deliver every event a second time, on top of the existing rows.
    kuatia_tests::execute(&database, "UPDATE subscriptions SET position = 0")
        .await
        .expect("rewind");
    runtime::catch_up(&store, &EventTypeCounts, 5, &no_progress)
        .await
        .expect("redeliver");
    while store.run_batch(&StreamIndex, 50).await.expect("redeliver inline") != BatchOutcome::CaughtUp {}
    let twice = (
        snapshot(&database, STREAM_INDEX).await,
        snapshot(&database, COUNTS).await,
    );
    assert_eq!(incremental, twice, "applying every event twice changes nothing");
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 8, failure_persistence: None, .. ProptestConfig::default() })]

    #[test]
    fn incrementally_built_projections_equal_rebuilt_ones_and_redelivery_changes_nothing(
        ops in proptest::collection::vec((0usize..6, 0u8..4, 1i64..500), 1..40),
        writers in 1usize..5,
    ) {
        let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("runtime");
        rt.block_on(incremental_equals_rebuilt(ops, writers));
    }
}

#[tokio::test]
async fn subscribers_are_woken_by_new_events_from_any_instance() {
    let db = TestDb::new().await;
    let here = db.open().await.store();
    let there = db.open().await.store();
    let t = tenant();
    // On PostgreSQL the other instance's commit reaches us through NOTIFY; on SQLite (one
    // process) through the in-process signal of the instance that appended.
    let (watcher, writer) = if db.is_postgres() {
        (&here, &there)
    } else {
        (&here, &here)
    };
    let mut hint = watcher.position_hint();
    let before = *hint.borrow_and_update();
    let outcome = writer
        .append(append(
            stream(t, "wake"),
            ExpectedVersion::NoStream,
            &["Happened"],
        ))
        .await
        .expect("append");
    tokio::time::timeout(Duration::from_secs(5), async {
        while *hint.borrow_and_update() < outcome.positions[0] {
            hint.changed().await.expect("hint channel open");
        }
    })
    .await
    .expect("the watcher is woken by the new event");
    assert!(before < outcome.positions[0]);
}

#[tokio::test]
async fn while_one_instance_holds_a_subscription_another_backs_off() {
    let db = TestDb::new().await;
    let Some(mut other_instance) = db.owner_pg().await else {
        eprintln!("SQLite has one writer: batches of one subscription simply queue (see the ADR)");
        return;
    };
    let store = db.open().await.store();
    store
        .append(append(
            stream(tenant(), "s"),
            ExpectedVersion::NoStream,
            &["Happened"],
        ))
        .await
        .expect("append");
    store
        .register_projection(&EventTypeCounts)
        .await
        .expect("register");
    let mut tx = sqlx::Connection::begin(&mut other_instance).await.expect("begin");
    sqlx::query("SELECT position FROM subscriptions WHERE name = 'event_type_counts' FOR UPDATE")
        .execute(&mut *tx)
        .await
        .expect("lock the checkpoint row");
    assert_eq!(
        store.run_batch(&EventTypeCounts, 10).await.expect("batch"),
        BatchOutcome::Busy
    );
    tx.rollback().await.expect("release");
    assert!(matches!(
        store.run_batch(&EventTypeCounts, 10).await.expect("batch"),
        BatchOutcome::Applied { count: 1, .. }
    ));
}

/// A `DocumentTransformed` of document `id` drawing `number` of `series`, as an append.
fn numbered(
    t: TenantId,
    id: uuid::Uuid,
    series: &str,
    number: u64,
) -> kuatia_application::event_store::AppendRequest {
    use kuatia_domain::document::aggregate::{DocumentEvent, DocumentNumber};
    let event = DocumentEvent::DocumentTransformed {
        series: series.into(),
        number: DocumentNumber {
            timbrado: "12345678".into(),
            establishment: "001".into(),
            point: "001".into(),
            number: format!("{number:07}"),
        },
        cdc: format!("CDC-{id}"),
        security_code: "123456789".into(),
        xml_sha256: "0".repeat(64),
        at: chrono::Utc::now(),
    };
    let mut request = append(
        kuatia_application::event_store::StreamRef {
            tenant_id: t,
            stream_type: "document".into(),
            stream_id: kuatia_domain::document::aggregate::stream_id(t, id),
        },
        ExpectedVersion::Any,
        &[],
    );
    request.events = vec![kuatia_application::event_store::NewEvent::new(
        "DocumentTransformed",
        1,
        serde_json::to_value(&event).expect("event"),
    )];
    request
}

async fn next_number(store: &SharedStore, t: TenantId, series: &str) -> u64 {
    kuatia_projections::number_series::next_number(store, t, series)
        .await
        .expect("next number")
}

#[tokio::test]
async fn a_number_series_moves_by_whole_batches_only_from_its_next_number() {
    use kuatia_projections::number_series::NOT_NEXT;
    let db = TestDb::new().await;
    let database = db.open().await;
    let store = database.store();
    let t = tenant();
    let doc = uuid::Uuid::now_v7;
    let refused = |result: &Result<kuatia_application::event_store::AppendOutcome, StoreError>| matches!(result, Err(StoreError::Projection { message, .. }) if message.contains(NOT_NEXT));

    // A turn's numbers, queued together: a new series opens at the first and moves past the last.
    let turn: Vec<_> = (1..=5).map(|n| numbered(t, doc(), "S", n)).collect();
    let results = store.append_all(turn).await;
    assert!(results.iter().all(Result::is_ok), "{results:?}");
    assert_eq!(next_number(&store, t, "S").await, 6);

    // Two series at once, one of them not from its next number: that one is refused whole,
    // the other moves.
    let results = store
        .append_all(vec![
            numbered(t, doc(), "S", 7),
            numbered(t, doc(), "S", 8),
            numbered(t, doc(), "T", 1),
        ])
        .await;
    assert!(refused(&results[0]) && refused(&results[1]), "{results:?}");
    assert!(results[2].is_ok(), "{results:?}");
    assert_eq!(next_number(&store, t, "S").await, 6);
    assert_eq!(next_number(&store, t, "T").await, 2);

    // Numbers that do not follow one another: the ones that are next move the series, the
    // others are refused.
    let results = store
        .append_all(vec![
            numbered(t, doc(), "S", 6),
            numbered(t, doc(), "S", 8),
            numbered(t, doc(), "S", 7),
        ])
        .await;
    assert!(results[0].is_ok(), "{results:?}");
    assert!(refused(&results[1]), "{results:?}");
    assert!(results[2].is_ok(), "{results:?}");
    assert_eq!(next_number(&store, t, "S").await, 8);
    // Each series as if numbered one document at a time.
    database.close().await;
}

/// Migration 0017 starts the `webhook_fanout` subscription before the first event of every
/// document whose `webhook.fanout` job (of the versions that fanned out with jobs) had not
/// finished, and removes those jobs; with none, at the head of the stream.
#[tokio::test]
async fn the_fanout_migration_hands_unfinished_fanout_jobs_over_to_the_subscription() {
    let db = TestDb::new().await;
    let t = tenant();
    let document = |id: uuid::Uuid| StreamRef {
        tenant_id: t,
        stream_type: "ledger".into(),
        stream_id: format!("document:{t}:{id}"),
    };
    let (done, pending, later) = (uuid::Uuid::now_v7(), uuid::Uuid::now_v7(), uuid::Uuid::now_v7());
    let first_pending = {
        let database = db.open().await;
        let store = database.store();
        store
            .append(append(
                document(done),
                ExpectedVersion::NoStream,
                &["A", "B", "C"],
            ))
            .await
            .expect("append");
        let mut request = append(document(pending), ExpectedVersion::NoStream, &["A", "B"]);
        request.jobs = vec![kuatia_application::jobs::NewJob::new(
            "webhook.fanout",
            format!("webhook.fanout:{pending}:document.accepted:1"),
            t,
            serde_json::json!({ "document_id": pending }),
        )];
        let outcome = store.append(request).await.expect("append with the old job");
        store
            .append(append(document(later), ExpectedVersion::NoStream, &["A", "B"]))
            .await
            .expect("append");
        // As a database of a version before 0017 stood: the job pending, no subscription.
        for sql in [
            "DELETE FROM subscriptions WHERE name = 'webhook_fanout'",
            "DELETE FROM _sqlx_migrations WHERE version = 17",
        ] {
            kuatia_tests::execute(&database, sql).await.expect(sql);
        }
        database.close().await;
        outcome.positions[0]
    };
    let database = db.open().await;
    let position = async |database: &Database| {
        snapshot(
            database,
            "SELECT CAST(position AS TEXT) FROM subscriptions WHERE name = 'webhook_fanout'",
        )
        .await
    };
    assert_eq!(
        position(&database).await,
        vec![vec![Some((first_pending - 1).to_string())]],
        "just before the first event of the document whose fan-out had not run"
    );
    assert!(
        snapshot(&database, "SELECT id FROM jobs WHERE kind = 'webhook.fanout'")
            .await
            .is_empty()
    );
    // With no unfinished fan-out job, it starts at the head.
    for sql in [
        "DELETE FROM subscriptions WHERE name = 'webhook_fanout'",
        "DELETE FROM _sqlx_migrations WHERE version = 17",
    ] {
        kuatia_tests::execute(&database, sql).await.expect(sql);
    }
    let head = database.store().head_position().await.expect("head");
    database.close().await;
    let database = db.open().await;
    assert_eq!(position(&database).await, vec![vec![Some(head.to_string())]]);
    database.close().await;
}

/// The documents' batch update finds its rows by primary key, not by reading the whole table
/// (it runs under the append lock, for every batch of pipeline events). PostgreSQL only: SQLite
/// writes event by event.
#[tokio::test]
async fn the_documents_batch_update_reads_its_rows_by_key_not_the_whole_table() {
    use sqlx::{Connection, Row};
    let db = TestDb::new().await;
    let Some(mut conn) = db.owner_pg().await else {
        return;
    };
    db.open().await.close().await;
    sqlx::query(
        "INSERT INTO documents (id, tenant_id, company_id, branch_id, issuance_point_id, channel, channel_id, \
           doc_type, external_id, status, issue_datetime, grand_total, errors, warnings, state, stream_id, \
           version, created_at, updated_at) \
         SELECT gen_random_uuid(), gen_random_uuid(), gen_random_uuid(), gen_random_uuid(), gen_random_uuid(), \
           'sifen', gen_random_uuid(), 'invoice', 'E' || g, 'queued', now(), '100', '[]', '[]', '{}', 's' || g, \
           3, now(), now() FROM generate_series(1, 5000) AS g",
    )
    .execute(&mut conn)
    .await
    .expect("documents");
    sqlx::query("ANALYZE documents")
        .execute(&mut conn)
        .await
        .expect("analyze");
    let ids: Vec<uuid::Uuid> = sqlx::query_scalar("SELECT id FROM documents LIMIT 8")
        .fetch_all(&mut conn)
        .await
        .expect("ids");
    let rows: Vec<serde_json::Value> = ids
        .iter()
        .map(|id| {
            serde_json::json!({"id": id, "status": "signing", "version": 5,
                "updated_at": "2026-11-25T10:00:00.000000Z", "cdc": "01", "number": "0000001"})
        })
        .collect();
    let statement = format!("EXPLAIN {}", kuatia_projections::documents::STEP_UPDATE);
    let plan: Vec<String> = sqlx::query(sqlx::AssertSqlSafe(statement))
        .bind(sqlx::types::Json(&rows))
        .fetch_all(&mut conn)
        .await
        .expect("explain")
        .iter()
        .map(|r| r.get::<String, _>(0))
        .collect();
    let plan = plan.join("\n");
    assert!(plan.contains("documents_pkey"), "{plan}");
    assert!(!plan.contains("Seq Scan on documents"), "{plan}");
    let updated = sqlx::query(kuatia_projections::documents::STEP_UPDATE)
        .bind(sqlx::types::Json(&rows))
        .execute(&mut conn)
        .await
        .expect("update")
        .rows_affected();
    assert_eq!(updated, 8);
    conn.close().await.expect("close");
}
