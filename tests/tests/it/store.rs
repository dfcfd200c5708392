//! Event-store conformance: the same assertions on PostgreSQL and SQLite.

use kuatia_application::event_store::{
    AppendRequest, EventMetadata, ExpectedVersion, NewEvent, ReadFilter, StoreError, StreamRef,
};
use kuatia_application::hash::{ChainVerifier, recompute};
use kuatia_application::upcast::{FnUpcaster, UpcasterChain};
use kuatia_domain::tenancy::TenantId;
use kuatia_tests::TestDb;
use serde_json::json;
use std::sync::Arc;

pub fn tenant() -> TenantId {
    TenantId::from_uuid(uuid::Uuid::now_v7())
}

pub fn stream(tenant: TenantId, id: &str) -> StreamRef {
    StreamRef {
        tenant_id: tenant,
        stream_type: "ledger".into(),
        stream_id: id.into(),
    }
}

pub fn append(stream: StreamRef, expected: ExpectedVersion, types: &[&str]) -> AppendRequest {
    AppendRequest {
        stream,
        expected,
        events: types
            .iter()
            .enumerate()
            .map(|(i, t)| NewEvent::new(*t, 1, json!({"n": i, "amount": "150000", "note": "ñandutí"})))
            .collect(),
        metadata: EventMetadata {
            actor: Some("api_key:test".into()),
            request_id: Some("req-1".into()),
            correlation_id: Some("corr-1".into()),
            causation_id: None,
            trace_parent: None,
        },
        jobs: Vec::new(),
    }
}

#[tokio::test]
async fn an_append_assigns_versions_positions_uuidv7_ids_and_database_timestamps() {
    let db = TestDb::new().await;
    let store = db.open().await.store();
    let t = tenant();
    let before = chrono::Utc::now() - chrono::Duration::seconds(5);
    let outcome = store
        .append(append(
            stream(t, "s1"),
            ExpectedVersion::NoStream,
            &["Opened", "Deposited"],
        ))
        .await
        .expect("append");
    assert_eq!(outcome.stream_version, 2);
    assert_eq!(outcome.positions.len(), 2);
    assert!(outcome.positions[0] < outcome.positions[1]);

    let events = store.load_stream("s1").await.expect("load");
    assert_eq!(events.len(), 2);
    for (i, e) in events.iter().enumerate() {
        assert_eq!(e.stream_version, i as u64 + 1);
        assert_eq!(e.global_position, outcome.positions[i]);
        assert_eq!(e.event_id.get_version_num(), 7, "event ids are UUIDv7");
        assert_eq!(e.tenant_id, t);
        assert_eq!(e.metadata.actor.as_deref(), Some("api_key:test"));
        assert_eq!(e.metadata.correlation_id.as_deref(), Some("corr-1"));
        assert_eq!(e.payload["note"], "ñandutí");
        assert!(e.recorded_at > before && e.recorded_at < chrono::Utc::now() + chrono::Duration::seconds(5));
    }
    assert_eq!(events[0].prev_hash, None);
    assert_eq!(events[1].prev_hash.as_deref(), Some(events[0].hash.as_str()));
}

#[tokio::test]
async fn a_stale_expected_version_is_a_typed_conflict_and_writes_nothing() {
    let db = TestDb::new().await;
    let store = db.open().await.store();
    let t = tenant();
    store
        .append(append(stream(t, "s1"), ExpectedVersion::NoStream, &["Opened"]))
        .await
        .expect("first");
    for expected in [
        ExpectedVersion::NoStream,
        ExpectedVersion::Exact(2),
        ExpectedVersion::Exact(0),
    ] {
        let err = store
            .append(append(stream(t, "s1"), expected, &["Deposited"]))
            .await
            .expect_err("conflict");
        match err {
            StoreError::VersionConflict { actual, .. } => assert_eq!(actual, 1),
            other => panic!("expected a version conflict, got {other:?}"),
        }
    }
    assert_eq!(store.load_stream("s1").await.expect("load").len(), 1);
    assert_eq!(store.head_position().await.expect("head"), 1);
}

#[tokio::test]
async fn of_many_concurrent_writers_expecting_the_same_version_exactly_one_wins() {
    let db = TestDb::new().await;
    let store = db.open().await.store();
    let t = tenant();
    let tasks: Vec<_> = (0..16)
        .map(|_| {
            let store = store.clone();
            tokio::spawn(async move {
                store
                    .append(append(
                        stream(t, "contended"),
                        ExpectedVersion::NoStream,
                        &["Opened"],
                    ))
                    .await
            })
        })
        .collect();
    let mut won = 0;
    let mut conflicts = 0;
    for task in tasks {
        match task.await.expect("task") {
            Ok(_) => won += 1,
            Err(StoreError::VersionConflict { .. }) => conflicts += 1,
            Err(other) => panic!("unexpected error {other:?}"),
        }
    }
    assert_eq!((won, conflicts), (1, 15));
    assert_eq!(store.load_stream("contended").await.expect("load").len(), 1);
}

#[tokio::test]
async fn read_all_pages_through_every_stream_in_global_order_with_filters() {
    let db = TestDb::new().await;
    let store = db.open().await.store();
    let (a, b) = (tenant(), tenant());
    for i in 0..5 {
        let expected = ExpectedVersion::from_current(i);
        store
            .append(append(stream(a, "a1"), expected, &["Deposited"]))
            .await
            .expect("a1");
        store
            .append(append(stream(b, "b1"), expected, &["Deposited"]))
            .await
            .expect("b1");
        store
            .append(append(stream(a, "a2"), expected, &["Deposited"]))
            .await
            .expect("a2");
    }
    let all = store
        .read_all(&ReadFilter {
            after: 0,
            limit: 100,
            ..ReadFilter::default()
        })
        .await
        .expect("read");
    assert_eq!(all.len(), 15);
    assert!(
        all.windows(2)
            .all(|w| w[0].global_position < w[1].global_position)
    );

    let mut paged = Vec::new();
    let mut after = 0;
    loop {
        let page = store
            .read_all(&ReadFilter {
                after,
                limit: 4,
                ..ReadFilter::default()
            })
            .await
            .expect("page");
        let Some(last) = page.last() else { break };
        after = last.global_position;
        paged.extend(page);
    }
    assert_eq!(paged, all, "paging sees every event once, in order");

    let only_a = store
        .read_all(&ReadFilter {
            after: 0,
            limit: 100,
            tenant: Some(a),
            stream_id: None,
            ..ReadFilter::default()
        })
        .await
        .expect("tenant filter");
    assert_eq!(only_a.len(), 10);
    assert!(only_a.iter().all(|e| e.tenant_id == a));

    let one_stream = store
        .read_all(&ReadFilter {
            after: all[3].global_position,
            limit: 100,
            tenant: Some(a),
            stream_id: Some("a2".into()),
            ..ReadFilter::default()
        })
        .await
        .expect("stream filter");
    assert_eq!(one_stream.len(), 4);
    assert!(one_stream.iter().all(|e| e.stream_id == "a2"));
}

#[tokio::test]
async fn a_stream_of_another_tenant_or_type_is_never_appended_to() {
    let db = TestDb::new().await;
    let store = db.open().await.store();
    let (a, b) = (tenant(), tenant());
    store
        .append(append(stream(a, "s1"), ExpectedVersion::NoStream, &["Opened"]))
        .await
        .expect("a");
    let err = store
        .append(append(stream(b, "s1"), ExpectedVersion::Any, &["Deposited"]))
        .await
        .expect_err("other tenant");
    assert!(matches!(err, StoreError::Invalid(_)), "{err:?}");
    let mut other_type = stream(a, "s1");
    other_type.stream_type = "other".into();
    let err = store
        .append(append(other_type, ExpectedVersion::Any, &["Deposited"]))
        .await
        .expect_err("other type");
    assert!(matches!(err, StoreError::Invalid(_)), "{err:?}");
    assert_eq!(store.load_stream("s1").await.expect("load").len(), 1);
}

#[tokio::test]
async fn appends_that_can_never_succeed_are_refused_before_touching_the_database() {
    let db = TestDb::new().await;
    let store = db.open().await.store();
    let t = tenant();
    let empty = append(stream(t, "s1"), ExpectedVersion::Any, &[]);
    assert!(matches!(store.append(empty).await, Err(StoreError::Invalid(_))));
    let bad_name = append(stream(t, "s1"), ExpectedVersion::Any, &["not a type"]);
    assert!(matches!(
        store.append(bad_name).await,
        Err(StoreError::Invalid(_))
    ));
    let mut zero = append(stream(t, "s1"), ExpectedVersion::Any, &["Opened"]);
    zero.events[0].schema_version = 0;
    assert!(matches!(store.append(zero).await, Err(StoreError::Invalid(_))));
    assert_eq!(store.head_position().await.expect("head"), 0);
}

#[tokio::test]
async fn every_stream_hash_chain_verifies_and_recomputes() {
    let db = TestDb::new().await;
    let store = db.open().await.store();
    let t = tenant();
    for i in 0..4 {
        store
            .append(append(
                stream(t, "x"),
                ExpectedVersion::from_current(i * 2),
                &["A", "B"],
            ))
            .await
            .expect("x");
        store
            .append(append(stream(t, "y"), ExpectedVersion::from_current(i), &["C"]))
            .await
            .expect("y");
    }
    let raw = store
        .read_all_raw(&ReadFilter {
            after: 0,
            limit: 1000,
            ..ReadFilter::default()
        })
        .await
        .expect("raw");
    let mut verifier = ChainVerifier::default();
    for event in &raw {
        assert_eq!(recompute(event), event.hash);
        verifier.check(event).expect("intact chain");
    }
    assert_eq!((verifier.checked(), verifier.streams()), (12, 2));
}

#[tokio::test]
async fn payload_numbers_and_unicode_survive_storage_byte_for_byte_in_the_hash() {
    let db = TestDb::new().await;
    let store = db.open().await.store();
    let t = tenant();
    let mut request = append(stream(t, "tricky"), ExpectedVersion::NoStream, &["Odd"]);
    request.events[0].payload = json!({
        "float": 0.30000000000000004, "big": 9007199254740993_i64, "neg": -0.0, "exp": 1e300,
        "text": "guaraní ₲ \u{1F600} \"quoted\" \\ back \u{0} nul", "nested": {"z": [1, {"b": 2, "a": 1}], "a": null}
    });
    store.append(request).await.expect("append");
    let raw = store
        .read_all_raw(&ReadFilter {
            after: 0,
            limit: 10,
            ..ReadFilter::default()
        })
        .await
        .expect("raw");
    assert_eq!(
        recompute(&raw[0]),
        raw[0].hash,
        "the stored payload must hash as it did at append time"
    );
}

#[tokio::test]
async fn upcasters_run_on_every_read_path_but_not_on_raw_reads() {
    let db = TestDb::new().await;
    {
        let store = db.open().await.store();
        let t = tenant();
        let mut request = append(
            stream(t, "u1"),
            ExpectedVersion::NoStream,
            &["Deposited", "Noted"],
        );
        request.events[0].payload = json!({"monto": 100});
        request.events[1].payload = json!({"note": "sin cambio", "z": [1.5, -0.0]});
        store.append(request).await.expect("v1 event");
    }
    let chain = UpcasterChain::new().with(FnUpcaster::new("Deposited", 1, |p| json!({"amount": p["monto"]})));
    let store = db.open_with(Arc::new(chain)).await.store();
    let loaded = store.load_stream("u1").await.expect("load");
    assert_eq!(
        (loaded[0].schema_version, loaded[0].payload.clone()),
        (2, json!({"amount": 100}))
    );
    let filter = ReadFilter {
        after: 0,
        limit: 10,
        ..ReadFilter::default()
    };
    let read = store.read_all(&filter).await.expect("read_all");
    assert_eq!(read[0].payload, json!({"amount": 100}));
    let raw = store.read_all_raw(&filter).await.expect("raw");
    assert_eq!(
        (raw[0].schema_version, raw[0].payload.clone()),
        (1, json!({"monto": 100}))
    );
    assert_eq!(recompute(&raw[0]), raw[0].hash);
    // Read as JSON text (`GET /v1/events`): upcast where a step applies, the stored text as it is
    // where none does.
    let text = store.read_all_json(&filter).await.expect("json");
    assert_eq!(
        (text[0].schema_version, text[0].payload.get()),
        (2, r#"{"amount":100}"#)
    );
    assert_eq!(
        (text[1].schema_version, text[1].payload.get()),
        (1, r#"{"note":"sin cambio","z":[1.5,-0.0]}"#)
    );
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(text[1].payload.get()).expect("parses"),
        read[1].payload
    );
}

#[tokio::test]
async fn the_application_cannot_update_or_delete_events() {
    let db = TestDb::new().await;
    let database = db.open().await;
    let store = database.store();
    store
        .append(append(
            stream(tenant(), "s1"),
            ExpectedVersion::NoStream,
            &["Opened"],
        ))
        .await
        .expect("append");
    // Through the service's own pool (the kuatia_app role on PostgreSQL).
    for sql in ["UPDATE events SET payload = payload", "DELETE FROM events"] {
        let err = kuatia_tests::execute(&database, sql)
            .await
            .expect_err("must be refused");
        let message = err.to_string();
        assert!(
            message.contains("permission denied") || message.contains("append-only"),
            "{sql}: {message}"
        );
    }
    if let Some(mut owner) = db.owner_pg().await {
        // The role is what the migration revoked: the app role holds no UPDATE/DELETE/TRUNCATE.
        let privileges: Vec<String> = sqlx::query_scalar(
            "SELECT privilege_type FROM information_schema.role_table_grants \
             WHERE grantee = 'kuatia_app' AND table_name = 'events' ORDER BY privilege_type",
        )
        .fetch_all(&mut owner)
        .await
        .expect("grants");
        assert!(privileges.contains(&"INSERT".to_owned()) && privileges.contains(&"SELECT".to_owned()));
        for forbidden in ["UPDATE", "DELETE", "TRUNCATE"] {
            assert!(!privileges.contains(&forbidden.to_owned()), "{privileges:?}");
        }
        // Even the owner is stopped by the trigger.
        for sql in [
            "UPDATE events SET payload = payload",
            "DELETE FROM events",
            "TRUNCATE events",
        ] {
            let err = sqlx::query(sql)
                .execute(&mut owner)
                .await
                .expect_err("trigger refuses");
            assert!(err.to_string().contains("append-only"), "{sql}: {err}");
        }
    }
    assert_eq!(store.load_stream("s1").await.expect("load").len(), 1);
}

#[tokio::test]
async fn a_rewritten_event_breaks_the_chain_at_that_event_on_either_backend() {
    let db = TestDb::new().await;
    let store = db.open().await.store();
    let t = tenant();
    store
        .append(append(
            stream(t, "audited"),
            ExpectedVersion::NoStream,
            &["A", "B", "C"],
        ))
        .await
        .expect("append");
    // Someone with the owner's credentials switches the guard off and edits the second event.
    if let Some(mut owner) = db.owner_pg().await {
        for sql in [
            "ALTER TABLE events DISABLE TRIGGER events_no_update_or_delete",
            "UPDATE events SET payload = '{\"n\": 42}' WHERE stream_version = 2",
        ] {
            sqlx::query(sql).execute(&mut owner).await.expect(sql);
        }
    } else if let Some(mut owner) = db.owner_sqlite().await {
        for sql in [
            "DROP TRIGGER events_no_update",
            "UPDATE events SET payload = '{\"n\": 42}' WHERE stream_version = 2",
        ] {
            sqlx::query(sql).execute(&mut owner).await.expect(sql);
        }
    }
    let raw = store
        .read_all_raw(&ReadFilter {
            after: 0,
            limit: 10,
            ..ReadFilter::default()
        })
        .await
        .expect("raw");
    let mut verifier = ChainVerifier::default();
    verifier.check(&raw[0]).expect("the first event is intact");
    let broken = verifier.check(&raw[1]).expect_err("the edit is detected");
    assert_eq!((broken.event_id, broken.stream_version), (raw[1].event_id, 2));
}

#[tokio::test]
async fn a_large_append_spread_over_several_statements_lands_whole_and_in_order() {
    let db = TestDb::new().await;
    let store = db.open().await.store();
    let t = tenant();
    let names: Vec<String> = (0..60).map(|i| format!("Line{i}")).collect();
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    let mut request = append(stream(t, "big"), ExpectedVersion::NoStream, &refs);
    for (i, event) in request.events.iter_mut().enumerate() {
        event.payload = json!({"i": i, "description": "x".repeat(1500)});
    }
    let outcome = store.append(request).await.expect("append ~90 KB");
    assert_eq!(outcome.stream_version, 60);
    assert!(
        outcome.positions.windows(2).all(|w| w[1] == w[0] + 1),
        "{:?}",
        outcome.positions
    );
    let events = store.load_stream("big").await.expect("load");
    assert_eq!(events.len(), 60);
    let mut verifier = ChainVerifier::default();
    for (i, event) in events.iter().enumerate() {
        assert_eq!(event.payload["i"], i);
        verifier.check(event).expect("chain");
    }
}
