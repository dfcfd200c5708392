//! Aggregates through cqrs-es: given/when/then rules, our `EventStore` implementation, and the
//! command executor that returns committed positions.

use cqrs_es::EventStore;
use cqrs_es::test::TestFramework;
use kuatia_application::aggregate::{AggregateStore, CommandExecutor, ExecuteError};
use kuatia_application::event_store::EventMetadata;
use kuatia_tests::TestDb;
use kuatia_tests::ledger::{Ledger, LedgerCommand as C, LedgerError, LedgerEvent as E};
use std::collections::HashMap;

use crate::store::tenant;

type Rules = TestFramework<Ledger>;

#[test]
fn opening_twice_is_harmless() {
    Rules::with(())
        .given(vec![E::Opened { owner: "ana".into() }])
        .when(C::Open { owner: "ana".into() })
        .then_expect_events(vec![]);
}

#[test]
fn withdrawing_more_than_the_balance_is_refused() {
    Rules::with(())
        .given(vec![
            E::Opened { owner: "ana".into() },
            E::Deposited { amount: 100 },
        ])
        .when(C::Withdraw { amount: 101 })
        .then_expect_error(LedgerError::Insufficient(100));
}

#[test]
fn a_closed_account_takes_no_more_commands() {
    Rules::with(())
        .given(vec![E::Opened { owner: "ana".into() }, E::Closed])
        .when(C::Deposit { amount: 5 })
        .then_expect_error(LedgerError::Closed);
}

#[tokio::test]
async fn the_executor_commits_events_and_returns_their_positions() {
    let db = TestDb::new().await;
    let store = db.open().await.store();
    let executor = CommandExecutor::<Ledger>::new(store.clone(), ());
    let t = tenant();
    let meta = EventMetadata {
        actor: Some("user:ana".into()),
        ..EventMetadata::default()
    };
    let opened = executor
        .execute(t, "acct-1", C::Open { owner: "ana".into() }, meta.clone())
        .await
        .expect("open");
    let deposited = executor
        .execute(t, "acct-1", C::Deposit { amount: 250 }, meta.clone())
        .await
        .expect("deposit");
    assert_eq!(opened.stream_version, 1);
    assert_eq!(deposited.stream_version, 2);
    assert!(deposited.positions[0] > opened.positions[0]);

    let again = executor
        .execute(t, "acct-1", C::Open { owner: "ana".into() }, meta.clone())
        .await
        .expect("noop");
    assert!(again.positions.is_empty(), "a repeated command commits nothing");
    assert_eq!(again.stream_version, 2);

    match executor
        .execute(t, "acct-1", C::Withdraw { amount: 999 }, meta.clone())
        .await
    {
        Err(ExecuteError::Rejected(LedgerError::Insufficient(250))) => {}
        other => panic!("expected a domain refusal, got {other:?}"),
    }
    match executor
        .execute(tenant(), "acct-1", C::Deposit { amount: 1 }, meta)
        .await
    {
        Err(ExecuteError::NotFound) => {}
        other => panic!("another tenant must not see the stream, got {other:?}"),
    }
    let events = store.load_stream("acct-1").await.expect("load");
    assert_eq!(events.len(), 2);
    assert_eq!(events[1].metadata.actor.as_deref(), Some("user:ana"));
}

#[tokio::test]
async fn concurrent_commands_on_one_aggregate_conflict_instead_of_overwriting() {
    let db = TestDb::new().await;
    let store = db.open().await.store();
    let t = tenant();
    let executor = std::sync::Arc::new(CommandExecutor::<Ledger>::new(store.clone(), ()));
    executor
        .execute(t, "acct", C::Open { owner: "x".into() }, EventMetadata::default())
        .await
        .expect("open");
    let tasks: Vec<_> = (0..8)
        .map(|_| {
            let executor = executor.clone();
            tokio::spawn(async move {
                executor
                    .execute(t, "acct", C::Deposit { amount: 10 }, EventMetadata::default())
                    .await
            })
        })
        .collect();
    let mut ok = 0;
    for task in tasks {
        match task.await.expect("task") {
            Ok(_) => ok += 1,
            Err(ExecuteError::Conflict(_)) => {}
            Err(other) => panic!("{other:?}"),
        }
    }
    let loaded = AggregateStore::<Ledger>::new(store, t)
        .load("acct")
        .await
        .expect("load");
    assert_eq!(
        loaded.version(),
        1 + ok,
        "every success is one event; no write was lost or doubled"
    );
}

#[tokio::test]
async fn a_cached_aggregate_catches_up_with_another_instance_and_equals_a_full_fold() {
    // Two stores on one database: two instances, each with its own aggregate cache.
    let db = TestDb::new().await;
    let (here, there) = (db.open().await.store(), db.open().await.store());
    let t = tenant();
    let meta = EventMetadata::default;
    let executor = CommandExecutor::<Ledger>::new(here.clone(), ());
    executor
        .execute(t, "acct", C::Open { owner: "ana".into() }, meta())
        .await
        .expect("open");
    executor
        .execute(t, "acct", C::Deposit { amount: 100 }, meta())
        .await
        .expect("deposit");
    // Committing left the aggregate in this store's cache, at its version.
    let cache = here.aggregate_cache().expect("the store keeps aggregates");
    let (version, cached) = cache.get::<Ledger>(t, "acct").expect("cached");
    assert_eq!((version, cached.balance), (2, 100));
    assert!(
        cache.get::<Ledger>(tenant(), "acct").is_none(),
        "another tenant's stream"
    );

    // The other instance deposits; this one's cache is behind, yet a withdrawal only that deposit
    // allows is decided on the stream as it stands (the events after the cached version).
    CommandExecutor::<Ledger>::new(there.clone(), ())
        .execute(t, "acct", C::Deposit { amount: 50 }, meta())
        .await
        .expect("deposit there");
    executor
        .execute(t, "acct", C::Withdraw { amount: 150 }, meta())
        .await
        .expect("withdraw what both deposited");
    let loaded = AggregateStore::<Ledger>::new(here.clone(), t)
        .load("acct")
        .await
        .expect("load");
    assert_eq!((loaded.version(), loaded.aggregate().balance), (4, 0));

    // What the cache holds is what folding every event gives.
    let mut folded = Ledger::default();
    let envelopes = AggregateStore::<Ledger>::new(there, t)
        .load_events("acct")
        .await
        .expect("events");
    for envelope in envelopes {
        cqrs_es::Aggregate::apply(&mut folded, envelope.payload);
    }
    assert_eq!(cache.get::<Ledger>(t, "acct"), Some((4, folded)));
}

#[tokio::test]
async fn our_store_serves_cqrs_es_through_its_event_store_trait() {
    let db = TestDb::new().await;
    let store = db.open().await.store();
    let t = tenant();
    let aggregates = AggregateStore::<Ledger>::new(store, t);
    let context = aggregates.load_aggregate("acct-9").await.expect("load new");
    let mut metadata = HashMap::new();
    metadata.insert("actor".to_owned(), "user:bea".to_owned());
    let committed = aggregates
        .commit(
            vec![E::Opened { owner: "bea".into() }, E::Deposited { amount: 7 }],
            context,
            metadata,
        )
        .await
        .expect("commit");
    assert_eq!(
        committed.iter().map(|e| e.sequence).collect::<Vec<_>>(),
        vec![1, 2]
    );
    let envelopes = aggregates.load_events("acct-9").await.expect("events");
    assert_eq!(envelopes.len(), 2);
    assert_eq!(envelopes[1].payload, E::Deposited { amount: 7 });
    assert_eq!(
        envelopes[0].metadata.get("actor").map(String::as_str),
        Some("user:bea")
    );
    // A context loaded before another commit is stale: committing it conflicts.
    let stale = aggregates.load_aggregate("acct-9").await.expect("load");
    let fresh = aggregates.load_aggregate("acct-9").await.expect("load");
    aggregates
        .commit(vec![E::Deposited { amount: 1 }], fresh, HashMap::new())
        .await
        .expect("fresh commit");
    match aggregates
        .commit(vec![E::Deposited { amount: 2 }], stale, HashMap::new())
        .await
    {
        Err(cqrs_es::AggregateError::AggregateConflict) => {}
        other => panic!("a stale context must conflict, got {other:?}"),
    }
}

#[tokio::test]
async fn several_commands_commit_together_in_one_append_or_not_at_all() {
    let db = TestDb::new().await;
    let store = db.open().await.store();
    let executor = CommandExecutor::<Ledger>::new(store.clone(), ());
    let t = tenant();
    // Each command sees the events of the ones before it: the deposit makes the withdrawal valid.
    let committed = executor
        .execute_all(
            t,
            "acct-9",
            vec![
                C::Open { owner: "ana".into() },
                C::Deposit { amount: 100 },
                C::Withdraw { amount: 60 },
            ],
            EventMetadata::default(),
        )
        .await
        .expect("all three");
    assert_eq!(committed.stream_version, 3);
    assert_eq!(committed.positions.len(), 3);
    let positions = &committed.positions;
    assert!(
        positions.windows(2).all(|w| w[1] == w[0] + 1),
        "one append: consecutive positions {positions:?}"
    );
    // A refused command refuses the whole batch: nothing of the deposit before it is stored.
    let refused = executor
        .execute_all(
            t,
            "acct-9",
            vec![C::Deposit { amount: 5 }, C::Withdraw { amount: 1_000 }],
            EventMetadata::default(),
        )
        .await;
    assert!(
        matches!(
            refused,
            Err(ExecuteError::Rejected(LedgerError::Insufficient(45)))
        ),
        "{refused:?}"
    );
    assert_eq!(store.load_stream("acct-9").await.expect("load").len(), 3);
}

#[tokio::test]
async fn execute_new_reads_nothing_and_refuses_a_stream_that_exists() {
    let db = TestDb::new().await;
    let store = db.open().await.store();
    let executor = CommandExecutor::<Ledger>::new(store.clone(), ());
    let t = tenant();
    let first = executor
        .execute_new(
            t,
            "acct-new",
            vec![C::Open { owner: "ana".into() }, C::Deposit { amount: 10 }],
            EventMetadata::default(),
        )
        .await
        .expect("a new stream");
    assert_eq!(first.stream_version, 2);
    assert!(first.recorded_at.is_some(), "the append's time is reported");
    // The same again: the stream exists, so the append (expecting none) conflicts and
    // nothing more is stored.
    let again = executor
        .execute_new(
            t,
            "acct-new",
            vec![C::Open { owner: "ana".into() }],
            EventMetadata::default(),
        )
        .await;
    assert!(matches!(again, Err(ExecuteError::Conflict(_))), "{again:?}");
    assert_eq!(store.load_stream("acct-new").await.expect("load").len(), 2);
}

/// `documents::commands` decides again after a concurrency conflict.
mod conflicts {
    use super::{EventMetadata, TestDb, tenant};
    use kuatia_application::aggregate::AggregateStore;
    use kuatia_application::documents::{DocumentsError, Intake, command, receive};
    use kuatia_application::event_store::{
        AppendOutcome, AppendRequest, BatchOutcome, ReadFilter, RecordedEvent, SharedStore, Store,
        StoreError, SubscriptionStatus,
    };
    use kuatia_application::projection::{Projection, SqlValue};
    use kuatia_domain::document::aggregate::{ArtifactKind, Document, DocumentCommand, stream_id};
    use kuatia_domain::tenancy::TenantId;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// A store that lets another writer append to one stream right before each of the first `left`
    /// appends to it it forwards: the deterministic form of a job recording a KuDE between a
    /// document command's load and its append.
    struct Interloper {
        inner: SharedStore,
        stream: String,
        tenant: TenantId,
        document: uuid::Uuid,
        left: AtomicUsize,
        /// Whether it offers the inner store's aggregate cache.
        cache: bool,
        /// Stream reads it forwarded.
        reads: AtomicUsize,
    }

    fn artifact(kind: ArtifactKind, version: u32) -> DocumentCommand {
        DocumentCommand::RecordArtifact {
            artifact_id: uuid::Uuid::now_v7(),
            kind,
            content_type: "application/pdf".into(),
            sha256: "ab".repeat(32),
            size: 1,
            version,
            at: chrono::Utc::now(),
        }
    }

    #[async_trait::async_trait]
    impl Store for Interloper {
        async fn append(&self, request: AppendRequest) -> Result<AppendOutcome, StoreError> {
            if request.stream.stream_id == self.stream
                && self
                    .left
                    .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| n.checked_sub(1))
                    .is_ok()
            {
                let kudes = AggregateStore::<Document>::new(self.inner.clone(), self.tenant)
                    .load(&self.stream)
                    .await?
                    .aggregate()
                    .state()
                    .map(|s| s.next_artifact_version(ArtifactKind::Kude))
                    .unwrap_or(1);
                command(
                    &self.inner,
                    self.tenant,
                    self.document,
                    artifact(ArtifactKind::Kude, kudes),
                    EventMetadata::default(),
                )
                .await
                .expect("the interloper's write");
            }
            self.inner.append(request).await
        }

        async fn load_stream(&self, stream_id: &str) -> Result<Vec<RecordedEvent>, StoreError> {
            self.reads.fetch_add(1, Ordering::AcqRel);
            self.inner.load_stream(stream_id).await
        }

        async fn load_stream_after(
            &self,
            stream_id: &str,
            after: u64,
        ) -> Result<Vec<RecordedEvent>, StoreError> {
            self.reads.fetch_add(1, Ordering::AcqRel);
            self.inner.load_stream_after(stream_id, after).await
        }

        fn aggregate_cache(&self) -> Option<&kuatia_application::aggregate_cache::AggregateCache> {
            if self.cache {
                self.inner.aggregate_cache()
            } else {
                None
            }
        }

        async fn read_all(&self, filter: &ReadFilter) -> Result<Vec<RecordedEvent>, StoreError> {
            self.inner.read_all(filter).await
        }

        async fn read_all_raw(&self, filter: &ReadFilter) -> Result<Vec<RecordedEvent>, StoreError> {
            self.inner.read_all_raw(filter).await
        }

        async fn head_position(&self) -> Result<i64, StoreError> {
            self.inner.head_position().await
        }

        fn position_hint(&self) -> tokio::sync::watch::Receiver<i64> {
            self.inner.position_hint()
        }

        async fn register_projection(&self, projection: &dyn Projection) -> Result<(), StoreError> {
            self.inner.register_projection(projection).await
        }

        async fn run_batch(
            &self,
            projection: &dyn Projection,
            max_events: usize,
        ) -> Result<BatchOutcome, StoreError> {
            self.inner.run_batch(projection, max_events).await
        }

        async fn record_projection_error(&self, name: &str, error: &str) -> Result<(), StoreError> {
            self.inner.record_projection_error(name, error).await
        }

        async fn reset_projection(&self, projection: &dyn Projection) -> Result<(), StoreError> {
            self.inner.reset_projection(projection).await
        }

        async fn rebuild_inline(
            &self,
            projection: &dyn Projection,
            progress: &(dyn Fn(i64, i64) + Send + Sync),
        ) -> Result<u64, StoreError> {
            self.inner.rebuild_inline(projection, progress).await
        }

        async fn subscription_statuses(&self) -> Result<Vec<SubscriptionStatus>, StoreError> {
            self.inner.subscription_statuses().await
        }

        async fn ping(&self) -> Result<(), StoreError> {
            self.inner.ping().await
        }

        async fn query(
            &self,
            sql: &'static str,
            params: &[SqlValue],
        ) -> Result<Vec<Vec<SqlValue>>, StoreError> {
            self.inner.query(sql, params).await
        }

        async fn execute(&self, sql: &'static str, params: &[SqlValue]) -> Result<u64, StoreError> {
            self.inner.execute(sql, params).await
        }
    }

    /// A stored document (refused by validation: no jobs follow) and a store whose next `writes`
    /// appends to it are each preceded by another writer's.
    async fn interloped(db: &TestDb, writes: usize) -> (Arc<Interloper>, uuid::Uuid) {
        interloped_on(db.open().await.store(), writes, false).await
    }

    /// [`interloped`] over a given store, with its aggregate cache or without.
    async fn interloped_on(inner: SharedStore, writes: usize, cache: bool) -> (Arc<Interloper>, uuid::Uuid) {
        let t = tenant();
        let document_id = uuid::Uuid::now_v7();
        let body = kuatia_domain::document::canonical::sample_invoice().to_string();
        let document = kuatia_domain::document::canonical::parse(body.as_bytes()).expect("the sample parses");
        let routing = kuatia_domain::document::routing::Routing {
            company_id: uuid::Uuid::now_v7(),
            branch_id: uuid::Uuid::now_v7(),
            issuance_point_id: uuid::Uuid::now_v7(),
            channel: kuatia_domain::channel::ChannelKind::Sifen,
            channel_id: uuid::Uuid::now_v7(),
        };
        let intake = Intake {
            document_id,
            routing,
            document,
            errors: vec![kuatia_domain::document::issues::Issue::new(
                "totals",
                "arithmetic",
                "off",
            )],
            warnings: Vec::new(),
        };
        receive(&inner, t, intake, EventMetadata::default(), chrono::Utc::now())
            .await
            .expect("received")
            .expect("new");
        let store = Arc::new(Interloper {
            inner,
            stream: stream_id(t, document_id),
            tenant: t,
            document: document_id,
            left: AtomicUsize::new(writes),
            cache,
            reads: AtomicUsize::new(0),
        });
        (store, document_id)
    }

    #[tokio::test]
    async fn a_command_on_a_cached_document_reads_nothing_and_a_stale_one_is_decided_again() {
        // Two instances on one database, each with its own aggregate cache.
        let db = TestDb::new().await;
        let there = db.open().await.store();
        let (store, id) = interloped_on(db.open().await.store(), 0, true).await;
        let (here, t): (SharedStore, _) = (store.clone(), store.tenant);
        // Intake left the document in this instance's cache: a command on it reads nothing.
        command(
            &here,
            t,
            id,
            artifact(ArtifactKind::NormalizedPayload, 1),
            EventMetadata::default(),
        )
        .await
        .expect("committed");
        assert_eq!(store.reads.load(Ordering::Acquire), 0);

        // The other instance records a KuDE: this cache is one version behind. A command decided
        // on it conflicts in its append, so it is decided once more on the stream as read (one
        // read), and commits — the caller sees no conflict.
        command(
            &there,
            t,
            id,
            artifact(ArtifactKind::Kude, 1),
            EventMetadata::default(),
        )
        .await
        .expect("there");
        command(
            &here,
            t,
            id,
            artifact(ArtifactKind::SignedXml, 1),
            EventMetadata::default(),
        )
        .await
        .expect("decided again on the stream as it stands");
        assert_eq!(store.reads.load(Ordering::Acquire), 1);

        // The same through a group of documents (a numbering turn, a lot's verdicts).
        command(
            &there,
            t,
            id,
            artifact(ArtifactKind::Kude, 2),
            EventMetadata::default(),
        )
        .await
        .expect("there");
        let span = tracing::Span::none;
        let each = kuatia_application::documents::commands_each(
            &here,
            t,
            vec![(id, vec![artifact(ArtifactKind::ChannelResponse, 1)], span())],
            EventMetadata::default(),
        )
        .await;
        assert_eq!(each.len(), 1);
        let document = each[0].as_ref().expect("committed").clone().expect("a document");
        assert_eq!(store.reads.load(Ordering::Acquire), 2);
        for (kind, next) in [
            (ArtifactKind::NormalizedPayload, 2),
            (ArtifactKind::Kude, 3),
            (ArtifactKind::SignedXml, 2),
            (ArtifactKind::ChannelResponse, 2),
        ] {
            assert_eq!(document.next_artifact_version(kind), next, "{kind:?}");
        }
        // And the cache holds what a full fold of the stream gives.
        let folded = AggregateStore::<Document>::new(there, t)
            .load(&store.stream)
            .await
            .expect("load");
        let cached = here
            .aggregate_cache()
            .and_then(|c| c.get::<Document>(t, &store.stream))
            .expect("cached");
        assert_eq!(cached, (folded.version(), folded.aggregate().clone()));
    }

    #[tokio::test]
    async fn a_load_to_act_trusts_the_cache_only_when_the_caller_would_act_on_it() {
        // Two instances on one database, each with its own aggregate cache.
        let db = TestDb::new().await;
        let there = db.open().await.store();
        let (store, id) = interloped_on(db.open().await.store(), 0, true).await;
        let (here, t): (SharedStore, _) = (store.clone(), store.tenant);
        let documents = AggregateStore::<Document>::new(here.clone(), t);
        let kudes = |d: &Document| d.state().map(|s| s.next_artifact_version(ArtifactKind::Kude));

        // Intake left the document in this instance's cache: a caller that acts reads nothing.
        let acting = documents
            .load_to_act(&store.stream, |_| true)
            .await
            .expect("load");
        assert_eq!((acting.version(), store.reads.load(Ordering::Acquire)), (2, 0));

        // The other instance records a KuDE. A caller that would act still gets the cached
        // aggregate, unread (its append, expecting version 2, will conflict) ...
        command(
            &there,
            t,
            id,
            artifact(ArtifactKind::Kude, 1),
            EventMetadata::default(),
        )
        .await
        .expect("there");
        let stale = documents
            .load_to_act(&store.stream, |_| true)
            .await
            .expect("load");
        assert_eq!((stale.version(), kudes(stale.aggregate())), (2, Some(1)));
        assert_eq!(store.reads.load(Ordering::Acquire), 0);

        // ... while one that would do nothing on it reads the stream and gets it as it stands,
        // which the cache then holds.
        let mut asked = None;
        let fresh = documents
            .load_to_act(&store.stream, |d| {
                asked = kudes(d);
                false
            })
            .await
            .expect("load");
        assert_eq!(asked, Some(1), "asked about the cached aggregate");
        assert_eq!((fresh.version(), kudes(fresh.aggregate())), (3, Some(2)));
        assert_eq!(store.reads.load(Ordering::Acquire), 1);
        let acting = documents
            .load_to_act(&store.stream, |_| true)
            .await
            .expect("load");
        assert_eq!((acting.version(), store.reads.load(Ordering::Acquire)), (3, 1));
    }

    #[tokio::test]
    async fn a_document_command_is_decided_again_when_another_writer_appended_first() {
        let db = TestDb::new().await;
        let (store, id) = interloped(&db, 2).await;
        let shared: SharedStore = store.clone();
        command(
            &shared,
            store.tenant,
            id,
            artifact(ArtifactKind::NormalizedPayload, 1),
            EventMetadata::default(),
        )
        .await
        .expect("decided again on the newer state, and committed");
        let state = AggregateStore::<Document>::new(shared.clone(), store.tenant)
            .load(&store.stream)
            .await
            .expect("load");
        let state = state.aggregate().state().expect("a document");
        // Both interlopers' KuDEs and the command's own artifact.
        assert_eq!(state.next_artifact_version(ArtifactKind::Kude), 3);
        assert_eq!(state.next_artifact_version(ArtifactKind::NormalizedPayload), 2);
    }

    #[tokio::test]
    async fn a_document_command_gives_up_with_a_conflict_after_five_tries() {
        let db = TestDb::new().await;
        let (store, id) = interloped(&db, 100).await;
        let shared: SharedStore = store.clone();
        let result = command(
            &shared,
            store.tenant,
            id,
            artifact(ArtifactKind::NormalizedPayload, 1),
            EventMetadata::default(),
        )
        .await;
        assert!(matches!(result, Err(DocumentsError::Conflict)), "{result:?}");
        assert_eq!(store.left.load(Ordering::Acquire), 95);
    }
}
