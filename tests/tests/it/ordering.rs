//! Commit order = global order. The classic race: appender A draws position N, appender B draws
//! N+1 and commits, a subscriber reads N+1 and moves its checkpoint past N, A commits N late and
//! the subscriber never sees it. These tests reproduce the race on a plain sequence (the control,
//! PostgreSQL) and show that through the store the late commit is never skipped.

use async_trait::async_trait;
use kuatia_application::event_store::{
    ExpectedVersion, ProjectionKind, ReadFilter, RecordedEvent, SharedStore, StoreError,
};
use kuatia_application::projection::{Projection, SqlTx};
use kuatia_application::upcast::UpcasterChain;
use kuatia_tests::TestDb;
use rand::Rng;
use sqlx::Connection;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{Notify, Semaphore};

use crate::store::{append, stream, tenant};

/// An inline projection that holds the append transaction open (after the insert, before the
/// commit) for streams named `slow…`, until the test opens the gate; fails streams named
/// `poison…`; and delays the others by a random few milliseconds.
struct Stall {
    entered: Arc<Notify>,
    gate: Arc<Semaphore>,
    jitter_ms: u64,
}

#[async_trait]
impl Projection for Stall {
    fn name(&self) -> &'static str {
        "test_stall"
    }
    fn kind(&self) -> ProjectionKind {
        ProjectionKind::Inline
    }
    fn tables(&self) -> &'static [&'static str] {
        &[]
    }
    async fn apply(&self, _tx: &mut dyn SqlTx, event: &RecordedEvent) -> Result<(), StoreError> {
        if event.stream_id.starts_with("slow") {
            self.entered.notify_one();
            self.gate
                .acquire()
                .await
                .map_err(|e| StoreError::Invalid(e.to_string()))?
                .forget();
        } else if event.stream_id.starts_with("poison") {
            return Err(StoreError::Invalid("this stream cannot be projected".into()));
        } else if self.jitter_ms > 0 {
            let ms = rand::rng().random_range(0..=self.jitter_ms);
            tokio::time::sleep(Duration::from_millis(ms)).await;
        }
        Ok(())
    }
}

async fn read_after(store: &SharedStore, after: i64) -> Vec<i64> {
    store
        .read_all(&ReadFilter {
            after,
            limit: 10_000,
            ..ReadFilter::default()
        })
        .await
        .expect("read")
        .iter()
        .map(|e| e.global_position)
        .collect()
}

#[tokio::test]
async fn control_a_plain_sequence_loses_the_late_commit_to_a_polling_reader() {
    let db = TestDb::new().await;
    let Some(mut a) = db.owner_pg().await else {
        eprintln!("PostgreSQL-only control experiment: skipped on SQLite (one writer at a time)");
        return;
    };
    let mut b = sqlx::PgConnection::connect(&db.url).await.expect("b");
    let mut reader = sqlx::PgConnection::connect(&db.url).await.expect("reader");
    sqlx::query("CREATE TABLE race_demo (position bigserial PRIMARY KEY, note text)")
        .execute(&mut a)
        .await
        .expect("table");
    let mut tx_a = a.begin().await.expect("begin a");
    sqlx::query("INSERT INTO race_demo (note) VALUES ('a: first to draw, last to commit')")
        .execute(&mut *tx_a)
        .await
        .expect("a draws 1");
    sqlx::query("INSERT INTO race_demo (note) VALUES ('b')")
        .execute(&mut b)
        .await
        .expect("b commits 2");
    let seen: Vec<i64> =
        sqlx::query_scalar("SELECT position FROM race_demo WHERE position > 0 ORDER BY position")
            .fetch_all(&mut reader)
            .await
            .expect("read");
    assert_eq!(seen, vec![2], "the reader sees 2 before 1 is committed");
    let checkpoint = 2;
    tx_a.commit().await.expect("a commits 1 late");
    let after: Vec<i64> =
        sqlx::query_scalar("SELECT position FROM race_demo WHERE position > $1 ORDER BY position")
            .bind(checkpoint)
            .fetch_all(&mut reader)
            .await
            .expect("read");
    assert!(
        after.is_empty(),
        "position 1 is lost to the reader: the race is real"
    );
}

#[tokio::test]
async fn a_subscriber_never_skips_an_append_that_commits_late() {
    let db = TestDb::new().await;
    let entered = Arc::new(Notify::new());
    let gate = Arc::new(Semaphore::new(0));
    let stall = Arc::new(Stall {
        entered: entered.clone(),
        gate: gate.clone(),
        jitter_ms: 0,
    });
    let store = db
        .open_custom(vec![stall], Arc::new(UpcasterChain::new()))
        .await
        .store();
    let t = tenant();

    // A draws its position and stalls before committing.
    let a = {
        let store = store.clone();
        tokio::spawn(async move {
            store
                .append(append(stream(t, "slow-a"), ExpectedVersion::NoStream, &["A"]))
                .await
        })
    };
    entered.notified().await;
    // B starts after A and would, without the lock, draw the next position and commit first.
    let b = {
        let store = store.clone();
        tokio::spawn(async move {
            store
                .append(append(stream(t, "fast-b"), ExpectedVersion::NoStream, &["B"]))
                .await
        })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        !b.is_finished(),
        "B must wait for A: it may not commit a higher position first"
    );
    let mut checkpoint = 0;
    let seen_early = read_after(&store, checkpoint).await;
    assert!(
        seen_early.is_empty(),
        "nothing is visible while A is open: {seen_early:?}"
    );
    checkpoint = seen_early.last().copied().unwrap_or(checkpoint);

    gate.add_permits(1);
    let pos_a = a.await.expect("a").expect("a appended").positions[0];
    let pos_b = b.await.expect("b").expect("b appended").positions[0];
    assert!(pos_a < pos_b, "commit order is global order");
    assert_eq!(read_after(&store, checkpoint).await, vec![pos_a, pos_b]);
}

#[tokio::test]
async fn under_concurrent_appends_with_jittered_commits_a_polling_subscriber_sees_every_position() {
    let db = TestDb::new().await;
    let stall = Arc::new(Stall {
        entered: Arc::new(Notify::new()),
        gate: Arc::new(Semaphore::new(0)),
        jitter_ms: 3,
    });
    let store = db
        .open_custom(vec![stall], Arc::new(UpcasterChain::new()))
        .await
        .store();
    let t = tenant();
    let writers: Vec<_> = (0..12)
        .map(|w| {
            let store = store.clone();
            tokio::spawn(async move {
                for i in 0..15u64 {
                    store
                        .append(append(
                            stream(t, &format!("w{w}")),
                            ExpectedVersion::from_current(i),
                            &["E"],
                        ))
                        .await
                        .expect("append");
                }
            })
        })
        .collect();
    // The subscriber polls like a catch-up subscription: positions past its checkpoint.
    let subscriber = {
        let store = store.clone();
        tokio::spawn(async move {
            let mut checkpoint = 0;
            let mut seen = Vec::new();
            while seen.len() < 180 {
                let page = read_after(&store, checkpoint).await;
                if let Some(last) = page.last() {
                    checkpoint = *last;
                }
                seen.extend(page);
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
            seen
        })
    };
    for w in writers {
        w.await.expect("writer");
    }
    let seen = tokio::time::timeout(Duration::from_secs(60), subscriber)
        .await
        .expect("the subscriber saw all 180 events")
        .expect("subscriber");
    let all = read_after(&store, 0).await;
    assert_eq!(
        seen, all,
        "the subscriber saw every committed position, in order, exactly once"
    );
}

#[tokio::test]
async fn queued_appends_share_one_transaction_and_a_bad_one_does_not_fail_its_neighbours() {
    let db = TestDb::new().await;
    let entered = Arc::new(Notify::new());
    let gate = Arc::new(Semaphore::new(0));
    let projection = Arc::new(Stall {
        entered: entered.clone(),
        gate: gate.clone(),
        jitter_ms: 0,
    });
    let store = db
        .open_custom(vec![projection], Arc::new(UpcasterChain::new()))
        .await
        .store();
    let t = tenant();
    let first = {
        let store = store.clone();
        tokio::spawn(async move {
            store
                .append(append(stream(t, "slow-0"), ExpectedVersion::NoStream, &["A"]))
                .await
        })
    };
    entered.notified().await;
    // While the first transaction is open, more appends queue up behind it.
    let names: Vec<String> = (0..10)
        .map(|i| {
            if i == 4 {
                "poison-4".to_owned()
            } else {
                format!("queued-{i}")
            }
        })
        .collect();
    let queued: Vec<_> = names
        .iter()
        .map(|name| {
            let store = store.clone();
            let name = name.clone();
            tokio::spawn(async move {
                store
                    .append(append(stream(t, &name), ExpectedVersion::NoStream, &["B"]))
                    .await
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(200)).await;
    gate.add_permits(1);
    first.await.expect("task").expect("the first append commits");
    let mut results = Vec::new();
    for task in queued {
        results.push(task.await.expect("task"));
    }
    for (name, result) in names.iter().zip(&results) {
        if name.starts_with("poison") {
            assert!(
                matches!(result, Err(StoreError::Projection { .. })),
                "{name}: {result:?}"
            );
            assert!(
                store.load_stream(name).await.expect("load").is_empty(),
                "nothing of it was stored"
            );
        } else {
            assert!(result.is_ok(), "{name}: {result:?}");
        }
    }
    // The good ones were committed together: one transaction, one database clock reading.
    let mut stamps = std::collections::BTreeMap::new();
    for name in names.iter().filter(|n| !n.starts_with("poison")) {
        let events = store.load_stream(name).await.expect("load");
        *stamps.entry(events[0].recorded_at).or_insert(0) += 1;
    }
    assert!(
        stamps.values().any(|n| *n > 1),
        "queued appends share a transaction (same recorded_at): {stamps:?}"
    );
}
