//! What the event store keeps and answers, as data: an event as recorded, its metadata, the
//! version a writer expects, how a projection is fed, and the store's errors. A leaf: the store
//! port ([`crate::event_store`]), the job queue ([`crate::jobs`]) and the projections
//! ([`crate::projection`]) all speak these, and none of them is needed to name one.

use chrono::{DateTime, Utc};
use kuatia_domain::tenancy::TenantId;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use uuid::Uuid;

/// The version a writer believes the stream is at.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum ExpectedVersion {
    /// The stream must not exist yet.
    NoStream,
    /// The stream's last event must have exactly this version (1-based).
    Exact(u64),
    /// No check: append after whatever is there (for streams with one writer by construction).
    Any,
}

impl ExpectedVersion {
    /// The version the stream is expected to be at, with 0 for an empty stream.
    pub fn from_current(version: u64) -> Self {
        if version == 0 {
            Self::NoStream
        } else {
            Self::Exact(version)
        }
    }

    /// Whether a stream whose last version is `actual` (0 when empty) satisfies this expectation.
    pub fn admits(&self, actual: u64) -> bool {
        match self {
            Self::NoStream => actual == 0,
            Self::Exact(v) => *v == actual,
            Self::Any => true,
        }
    }
}

/// Who and what caused an event. Stored with the event and covered by its hash.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct EventMetadata {
    /// Who acted: `user:<id>`, `api_key:<id>`, `system:<worker>`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub actor: Option<String>,
    /// The HTTP request that caused the event, when there was one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_id: Option<String>,
    /// Groups every event of one business flow (a document's whole pipeline).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub correlation_id: Option<String>,
    /// The event or job that directly caused this one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub causation_id: Option<String>,
    /// The W3C `traceparent` of the span that wrote the event (`crate::trace_context`), so that
    /// work a subscription does for the event (a webhook delivery) joins the same trace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace_parent: Option<String>,
}

impl EventMetadata {
    /// Reads the metadata out of cqrs-es's string map (keys `actor`, `request_id`,
    /// `correlation_id`, `causation_id`, `trace_parent`; other keys are ignored).
    pub fn from_map(map: &std::collections::HashMap<String, String>) -> Self {
        Self {
            actor: map.get("actor").cloned(),
            request_id: map.get("request_id").cloned(),
            correlation_id: map.get("correlation_id").cloned(),
            causation_id: map.get("causation_id").cloned(),
            trace_parent: map.get("trace_parent").cloned(),
        }
    }

    /// The same metadata as cqrs-es's string map.
    pub fn to_map(&self) -> std::collections::HashMap<String, String> {
        let mut map = std::collections::HashMap::new();
        let fields = [
            ("actor", &self.actor),
            ("request_id", &self.request_id),
            ("correlation_id", &self.correlation_id),
            ("causation_id", &self.causation_id),
            ("trace_parent", &self.trace_parent),
        ];
        for (key, value) in fields {
            if let Some(value) = value {
                map.insert(key.to_owned(), value.clone());
            }
        }
        map
    }
}

/// An event as stored, after upcasting (unless read raw for verification). Its body is a parsed
/// [`Value`], or, for a reader that only passes it on, the stored JSON text
/// ([`JsonEvent`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RecordedEvent<P = Value> {
    /// Commit-ordered position across all streams.
    pub global_position: i64,
    /// UUIDv7.
    pub event_id: Uuid,
    /// Owner.
    pub tenant_id: TenantId,
    /// Aggregate type.
    pub stream_type: String,
    /// Stream id.
    pub stream_id: String,
    /// 1-based version within the stream.
    pub stream_version: u64,
    /// Stable type name.
    pub event_type: String,
    /// Schema version of `payload` (after upcasting, the newest known).
    pub schema_version: u32,
    /// The body.
    pub payload: P,
    /// Actor, request, correlation, causation.
    pub metadata: EventMetadata,
    /// Database clock at append, microsecond precision on PostgreSQL, millisecond on SQLite.
    pub recorded_at: DateTime<Utc>,
    /// Hash of the previous event of the stream, hex (`None` for version 1).
    pub prev_hash: Option<String>,
    /// Hash of this event over its stored (not upcast) form, hex.
    pub hash: String,
}

/// An event whose body is kept as the JSON text it was stored as (upcast, where a step of the
/// chain applies, and written again): `GET /v1/events` hands bodies on without parsing each into
/// a map and writing it back (issue 30: that was most of the route's time).
pub type JsonEvent = RecordedEvent<Box<serde_json::value::RawValue>>;

/// Errors of the event store. A version conflict is a normal, typed outcome; the rest are
/// infrastructure failures.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// Another writer appended first.
    #[error("stream {stream_id} is at version {actual}, expected {expected:?}")]
    VersionConflict {
        /// The stream.
        stream_id: String,
        /// What the writer expected.
        expected: ExpectedVersion,
        /// What the stream is at.
        actual: u64,
    },
    /// An append or read request that can never succeed (empty append, bad type name).
    #[error("invalid request: {0}")]
    Invalid(String),
    /// A projection failed inside the transaction; nothing was committed.
    #[error("projection {name} failed: {message}")]
    Projection {
        /// The projection.
        name: String,
        /// Its error.
        message: String,
    },
    /// A write hit a unique constraint (a taken email, a reused key): the constraint's name.
    #[error("duplicate value for {0}")]
    Duplicate(String),
    /// Stored data that cannot be read back (bad JSON, unknown state).
    #[error("corrupt stored data: {0}")]
    Corrupt(String),
    /// The database failed.
    #[error("database error: {0}")]
    Database(#[source] Box<dyn std::error::Error + Send + Sync>),
}

/// How a projection is fed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ProjectionKind {
    /// Updated in the append transaction: read-your-writes.
    Inline,
    /// A catch-up subscription: eventually consistent, pure read model.
    CatchUp,
    /// A catch-up subscription with side effects (writes jobs): never rebuilt.
    SideEffect,
}

impl ProjectionKind {
    /// The name stored in the subscriptions table.
    pub fn as_str(&self) -> &'static str {
        match self {
            Self::Inline => "inline",
            Self::CatchUp => "catch_up",
            Self::SideEffect => "side_effect",
        }
    }
}
