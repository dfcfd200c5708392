//! The event store port: one append-only log of all streams, in commit order.
//!
//! Every event has a global position (commit-ordered: position N visible means every lower
//! position is final), a per-stream version (a concurrent writer gets
//! [`StoreError::VersionConflict`], never an overwrite), a UUIDv7 id, a database-clock timestamp
//! and a per-stream hash chain ([`crate::hash`]). Payloads are versioned; every read path runs the
//! upcaster chain ([`crate::upcast`]) before handing events out.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use kuatia_domain::tenancy::TenantId;
use serde::Serialize;
use serde_json::Value;
use std::sync::Arc;
use tokio::sync::watch;
use uuid::Uuid;

use crate::jobs::NewJob;
use crate::projection::Projection;
pub use crate::records::{
    EventMetadata, ExpectedVersion, JsonEvent, ProjectionKind, RecordedEvent, StoreError,
};

/// Which stream an append goes to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamRef {
    /// Owner of the stream.
    pub tenant_id: TenantId,
    /// The aggregate type (`document`, `tenant`, …).
    pub stream_type: String,
    /// Globally unique id of the stream (a UUID in text form for aggregates).
    pub stream_id: String,
}

/// An event to append. Its id is chosen by the writer (UUIDv7) so that a retried append can be
/// recognised; position, version, timestamp and hash are assigned by the store.
#[derive(Debug, Clone, PartialEq)]
pub struct NewEvent {
    /// UUIDv7, unique across the store.
    pub event_id: Uuid,
    /// Stable type name (`DocumentReceived`).
    pub event_type: String,
    /// Payload schema version, from 1.
    pub schema_version: u32,
    /// The event body.
    pub payload: Value,
}

impl NewEvent {
    /// A new event with a fresh UUIDv7.
    pub fn new(event_type: impl Into<String>, schema_version: u32, payload: Value) -> Self {
        Self {
            event_id: Uuid::now_v7(),
            event_type: event_type.into(),
            schema_version,
            payload,
        }
    }

    /// A domain event as the store keeps it: its stable type name, its schema version, and its
    /// serialised body (for an event appended without an aggregate, as support events are).
    pub fn from_domain<E: cqrs_es::DomainEvent + Serialize>(event: &E) -> Result<Self, StoreError> {
        let schema_version = kuatia_domain::event::schema_version(event).ok_or_else(|| {
            StoreError::Invalid(format!(
                "event {} has no integer schema version",
                event.event_type()
            ))
        })?;
        let payload = serde_json::to_value(event).map_err(|e| StoreError::Invalid(e.to_string()))?;
        Ok(Self::new(event.event_type(), schema_version, payload))
    }
}

/// One atomic append: events to one stream, and the jobs they cause (the outbox), committed
/// together or not at all.
#[derive(Debug, Clone)]
pub struct AppendRequest {
    /// Target stream.
    pub stream: StreamRef,
    /// Optimistic concurrency check.
    pub expected: ExpectedVersion,
    /// At least one event.
    pub events: Vec<NewEvent>,
    /// Shared by all events of this append.
    pub metadata: EventMetadata,
    /// Jobs written in the same transaction (a duplicate idempotency key is skipped).
    pub jobs: Vec<NewJob>,
}

/// What an append committed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AppendOutcome {
    /// Global positions of the appended events, in order.
    pub positions: Vec<i64>,
    /// The stream's version after the append.
    pub stream_version: u64,
    /// When the store recorded the events (one instant for the whole append).
    pub recorded_at: DateTime<Utc>,
}

/// Which events a global read returns.
#[derive(Debug, Clone, Default)]
pub struct ReadFilter {
    /// Only positions strictly greater than this.
    pub after: i64,
    /// At most this many.
    pub limit: usize,
    /// Only this tenant's events.
    pub tenant: Option<TenantId>,
    /// Only this stream's events.
    pub stream_id: Option<String>,
    /// Only events of this type (`DocumentReceived`).
    pub event_type: Option<String>,
    /// Only events of this company (with `tenant`): the company's own stream (its configuration,
    /// branches, issuance points, certificates, channels) and the streams of its documents. Events
    /// carry no company column: the company is read at query time through the companies and
    /// documents read models, which are written in the append's transaction and rebuilt in one
    /// transaction that blocks appends, so the answer is the same before and after a rebuild
    /// (docs/adr/0001-event-store.md, "Company of an event").
    pub company: Option<uuid::Uuid>,
    /// Only events of streams of these types (a projection's
    /// [`stream_types`](crate::projection::Projection::stream_types), for its rebuild).
    pub stream_types: Option<&'static [&'static str]>,
}

/// Progress of a subscription batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BatchOutcome {
    /// Applied this many events and moved the checkpoint to `position`.
    Applied {
        /// Events applied.
        count: usize,
        /// New checkpoint.
        position: i64,
    },
    /// Nothing past the checkpoint.
    CaughtUp,
    /// Another instance holds the subscription's checkpoint row.
    Busy,
}

/// Where a subscription stands.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SubscriptionStatus {
    /// Projection name.
    pub name: String,
    /// How it is fed.
    pub kind: String,
    /// Last applied global position.
    pub position: i64,
    /// Head of the store minus position.
    pub lag: i64,
    /// Last error, cleared by the next successful batch.
    pub last_error: Option<String>,
    /// When the checkpoint last moved.
    pub updated_at: Option<DateTime<Utc>>,
}

/// An event with its body written out as JSON text.
pub fn json_event(event: RecordedEvent) -> Result<JsonEvent, StoreError> {
    let payload = serde_json::value::to_raw_value(&event.payload)
        .map_err(|e| StoreError::Corrupt(format!("payload of event {}: {e}", event.event_id)))?;
    Ok(RecordedEvent {
        global_position: event.global_position,
        event_id: event.event_id,
        tenant_id: event.tenant_id,
        stream_type: event.stream_type,
        stream_id: event.stream_id,
        stream_version: event.stream_version,
        event_type: event.event_type,
        schema_version: event.schema_version,
        payload,
        metadata: event.metadata,
        recorded_at: event.recorded_at,
        prev_hash: event.prev_hash,
        hash: event.hash,
    })
}

/// The event store: one trait, a PostgreSQL and a SQLite implementation.
#[async_trait]
pub trait Store: Send + Sync {
    /// Appends events (and their jobs, and runs the inline projections) in one transaction.
    async fn append(&self, request: AppendRequest) -> Result<AppendOutcome, StoreError>;

    /// Appends several requests in the order given, each checked and answered on its own as
    /// [`Store::append`] does (one refused request does not refuse the others). The backends
    /// queue them together for their group commit, so they usually share one transaction and no
    /// other writer's append comes between them; this default appends them one after another.
    async fn append_all(&self, requests: Vec<AppendRequest>) -> Vec<Result<AppendOutcome, StoreError>> {
        let mut results = Vec::with_capacity(requests.len());
        for request in requests {
            results.push(self.append(request).await);
        }
        results
    }

    /// Every event of one stream in version order, upcast.
    async fn load_stream(&self, stream_id: &str) -> Result<Vec<RecordedEvent>, StoreError>;

    /// The events of one stream as stored (not upcast: the hash chain covers these payloads), in
    /// version order: the auditor's export and chain check of one document. The backends read it
    /// by the stream's index; the default walks the tenant's log.
    async fn load_stream_raw(
        &self,
        tenant: TenantId,
        stream_id: &str,
    ) -> Result<Vec<RecordedEvent>, StoreError> {
        let mut filter = ReadFilter {
            after: 0,
            limit: 1000,
            tenant: Some(tenant),
            stream_id: Some(stream_id.to_owned()),
            ..ReadFilter::default()
        };
        let mut events = Vec::new();
        loop {
            let page = self.read_all_raw(&filter).await?;
            let Some(last) = page.last() else {
                return Ok(events);
            };
            filter.after = last.global_position;
            events.extend(page);
        }
    }

    /// The events of one stream after version `after`, in version order, upcast (what a cached
    /// aggregate at that version has not seen).
    async fn load_stream_after(&self, stream_id: &str, after: u64) -> Result<Vec<RecordedEvent>, StoreError> {
        let mut events = self.load_stream(stream_id).await?;
        events.retain(|e| e.stream_version > after);
        Ok(events)
    }

    /// The folded aggregates this store's users keep (`crate::aggregate_cache`); `None`: none
    /// are kept, every load reads the whole stream.
    fn aggregate_cache(&self) -> Option<&crate::aggregate_cache::AggregateCache> {
        None
    }

    /// Events in global (commit) order, upcast.
    async fn read_all(&self, filter: &ReadFilter) -> Result<Vec<RecordedEvent>, StoreError>;

    /// Events in global order exactly as stored (no upcasting): for hash verification and export.
    async fn read_all_raw(&self, filter: &ReadFilter) -> Result<Vec<RecordedEvent>, StoreError>;

    /// [`Store::read_all`] with each body kept as JSON text, for a reader that hands bodies on
    /// (`GET /v1/events`). The backends read the stored text and parse a body only when an
    /// upcaster applies to it; this default writes the upcast bodies out again.
    async fn read_all_json(&self, filter: &ReadFilter) -> Result<Vec<JsonEvent>, StoreError> {
        self.read_all(filter).await?.into_iter().map(json_event).collect()
    }

    /// [`Store::read_all_raw`] with each body kept as the JSON text it is stored as (which is
    /// the text its hash covers): `events verify` hashes it as it is and `events export` writes
    /// it out as it is, neither parsing it first. This default writes the bodies out again.
    async fn read_all_raw_json(&self, filter: &ReadFilter) -> Result<Vec<JsonEvent>, StoreError> {
        self.read_all_raw(filter)
            .await?
            .into_iter()
            .map(json_event)
            .collect()
    }

    /// The highest committed position (0 when empty).
    async fn head_position(&self) -> Result<i64, StoreError>;

    /// Changes whenever this process sees new events committed (a hint; always poll as well).
    fn position_hint(&self) -> watch::Receiver<i64>;

    /// Makes sure the projection has a checkpoint row.
    async fn register_projection(&self, projection: &dyn Projection) -> Result<(), StoreError>;

    /// Applies the next batch past the checkpoint and moves the checkpoint, in one transaction,
    /// holding the checkpoint row lock (another instance gets [`BatchOutcome::Busy`]).
    async fn run_batch(
        &self,
        projection: &dyn Projection,
        max_events: usize,
    ) -> Result<BatchOutcome, StoreError>;

    /// Records a failed batch on the checkpoint row.
    async fn record_projection_error(&self, name: &str, error: &str) -> Result<(), StoreError>;

    /// Empties the projection's tables and moves its checkpoint to 0, holding its lock.
    async fn reset_projection(&self, projection: &dyn Projection) -> Result<(), StoreError>;

    /// Refreshes a rebuilt projection's tables for the planner: on PostgreSQL, as their owner,
    /// `VACUUM (ANALYZE)` (a rebuild deletes and rewrites every row: until autovacuum came by, the
    /// planner knew nothing of the new rows and index-only scans read the heap; issue 30 measured
    /// a date-window list at 264 ms instead of 1.4 ms right after a rebuild). This default does
    /// nothing.
    async fn refresh_tables(&self, _projection: &dyn Projection) -> Result<(), StoreError> {
        Ok(())
    }

    /// Rebuilds an inline projection from position 0 in one transaction that blocks appends, so
    /// no append can slip between the replay and the switch back to inline updates.
    async fn rebuild_inline(
        &self,
        projection: &dyn Projection,
        progress: &(dyn Fn(i64, i64) + Send + Sync),
    ) -> Result<u64, StoreError>;

    /// Checkpoints and lag of every registered projection.
    async fn subscription_statuses(&self) -> Result<Vec<SubscriptionStatus>, StoreError>;

    /// Whether the database answers.
    async fn ping(&self) -> Result<(), StoreError>;

    /// Reads a read model or plain table with portable SQL (`$1` placeholders; see
    /// [`crate::projection::SqlTx`] for how values map on each backend).
    async fn query(
        &self,
        sql: &'static str,
        params: &[crate::projection::SqlValue],
    ) -> Result<Vec<Vec<crate::projection::SqlValue>>, StoreError>;

    /// Runs one statement on a plain table (credentials, sessions), in its own transaction.
    /// A unique violation is [`StoreError::Duplicate`].
    async fn execute(
        &self,
        sql: &'static str,
        params: &[crate::projection::SqlValue],
    ) -> Result<u64, StoreError>;
}

/// A shared store.
pub type SharedStore = Arc<dyn Store>;
