//! What both backends do the same way: validating an append, checking the stream head, hashing,
//! upcasting.

use chrono::{DateTime, Utc};
use kuatia_application::event_store::{AppendOutcome, AppendRequest, JsonEvent, RecordedEvent, StoreError};
use kuatia_application::hash::{HashInput, chain_hash};
use kuatia_application::upcast::UpcasterChain;
use kuatia_domain::tenancy::TenantId;
use serde_json::Value;
use tokio::sync::watch;
use uuid::Uuid;

/// The last event of a stream, as the append needs it.
#[derive(Debug, Clone)]
pub(crate) struct StreamHead {
    pub version: u64,
    pub hash: String,
    pub tenant_id: Uuid,
    pub stream_type: String,
}

/// Refuses appends that can never succeed.
pub(crate) fn validate(request: &AppendRequest) -> Result<(), StoreError> {
    if request.events.is_empty() {
        return Err(StoreError::Invalid("an append needs at least one event".into()));
    }
    if request.stream.stream_id.is_empty() || request.stream.stream_type.is_empty() {
        return Err(StoreError::Invalid("stream id and type must not be empty".into()));
    }
    for event in &request.events {
        if !kuatia_domain::event::is_valid_event_type(&event.event_type) {
            return Err(StoreError::Invalid(format!(
                "invalid event type name {:?}",
                event.event_type
            )));
        }
        if event.schema_version == 0 {
            return Err(StoreError::Invalid("schema versions start at 1".into()));
        }
    }
    for job in &request.jobs {
        if job.max_attempts == 0 || job.kind.is_empty() || job.idempotency_key.is_empty() {
            return Err(StoreError::Invalid(
                "a job needs a kind, a key and at least one attempt".into(),
            ));
        }
    }
    Ok(())
}

/// Checks ownership and the expected version against the head; returns the current version.
pub(crate) fn check_head(request: &AppendRequest, head: Option<&StreamHead>) -> Result<u64, StoreError> {
    let current = head.map_or(0, |h| h.version);
    // The expected version first: a writer that expected no stream (or another version) learns
    // that someone else wrote first, whoever that was.
    if !request.expected.admits(current) {
        return Err(StoreError::VersionConflict {
            stream_id: request.stream.stream_id.clone(),
            expected: request.expected,
            actual: current,
        });
    }
    if let Some(head) = head
        && (head.tenant_id != request.stream.tenant_id.as_uuid()
            || head.stream_type != request.stream.stream_type)
    {
        // Never append to another tenant's (or another type's) stream, whatever the caller
        // expected.
        return Err(StoreError::Invalid(format!(
            "stream {} belongs to another tenant or stream type",
            request.stream.stream_id
        )));
    }
    Ok(current)
}

/// Builds the stored form of the request's events (positions still 0), chaining their hashes.
pub(crate) fn chain(
    request: &AppendRequest,
    head: Option<&StreamHead>,
    current: u64,
    recorded_at: DateTime<Utc>,
) -> Vec<RecordedEvent> {
    let mut prev = head.map(|h| h.hash.clone());
    let mut out = Vec::with_capacity(request.events.len());
    for (i, event) in request.events.iter().enumerate() {
        let version = current + 1 + i as u64;
        let hash = chain_hash(&HashInput {
            prev_hash: prev.as_deref(),
            event_id: event.event_id,
            tenant_id: request.stream.tenant_id.as_uuid(),
            stream_type: &request.stream.stream_type,
            stream_id: &request.stream.stream_id,
            stream_version: version,
            event_type: &event.event_type,
            schema_version: event.schema_version,
            payload: &event.payload,
            metadata: &request.metadata,
            recorded_at,
        });
        out.push(RecordedEvent {
            global_position: 0,
            event_id: event.event_id,
            tenant_id: request.stream.tenant_id,
            stream_type: request.stream.stream_type.clone(),
            stream_id: request.stream.stream_id.clone(),
            stream_version: version,
            event_type: event.event_type.clone(),
            schema_version: event.schema_version,
            payload: event.payload.clone(),
            metadata: request.metadata.clone(),
            recorded_at,
            prev_hash: prev.clone(),
            hash: hash.clone(),
        });
        prev = Some(hash);
    }
    out
}

/// Runs the upcaster chain over a stored event.
pub(crate) fn upcast(chain: &UpcasterChain, mut event: RecordedEvent) -> RecordedEvent {
    let payload = std::mem::take(&mut event.payload);
    let (ty, version, payload) = chain.apply(
        std::mem::take(&mut event.event_type),
        event.schema_version,
        payload,
    );
    event.event_type = ty;
    event.schema_version = version;
    event.payload = payload;
    event
}

/// Runs the upcaster chain over a stored event read as JSON text: its body is parsed and written
/// again only when a step applies.
pub(crate) fn upcast_json(chain: &UpcasterChain, mut event: JsonEvent) -> Result<JsonEvent, StoreError> {
    if !chain.applies(&event.event_type, event.schema_version) {
        return Ok(event);
    }
    let id = event.event_id;
    let corrupt = |e: serde_json::Error| StoreError::Corrupt(format!("payload of event {id}: {e}"));
    let stored: Value = serde_json::from_str(event.payload.get()).map_err(corrupt)?;
    let (ty, version, payload) = chain.apply(
        std::mem::take(&mut event.event_type),
        event.schema_version,
        stored,
    );
    event.event_type = ty;
    event.schema_version = version;
    event.payload = serde_json::value::to_raw_value(&payload).map_err(corrupt)?;
    Ok(event)
}

/// Parses a stored tenant id.
pub(crate) fn tenant(id: Uuid) -> TenantId {
    TenantId::from_uuid(id)
}

/// Whether a database error is a unique violation of the given constraint.
pub(crate) fn is_unique_violation(err: &sqlx::Error, constraint: &str) -> bool {
    match err {
        sqlx::Error::Database(db) => {
            db.is_unique_violation()
                && (db.constraint() == Some(constraint) || db.message().contains("stream_id"))
        }
        _ => false,
    }
}

/// One request of a batch that passed its checks, with its events ready to insert.
#[derive(Debug)]
pub(crate) struct Planned {
    /// Index of the request in the batch.
    pub index: usize,
    /// The stream's version before this request.
    pub current: u64,
    /// The stored form of its events (positions still 0).
    pub events: Vec<RecordedEvent>,
    /// The append's instant.
    pub now: DateTime<Utc>,
}

/// Checks every request of a batch against the stream heads, in order, as if each were appended
/// alone: a later request on the same stream sees the earlier one's events. `heads` holds the
/// heads read under the append lock and is advanced as requests are accepted. A refused request
/// gets its error; the others are planned.
pub(crate) fn plan(
    requests: &[AppendRequest],
    heads: &mut std::collections::HashMap<String, StreamHead>,
    now: DateTime<Utc>,
) -> (Vec<Planned>, Vec<Option<StoreError>>) {
    let mut planned = Vec::with_capacity(requests.len());
    let mut refusals: Vec<Option<StoreError>> = Vec::with_capacity(requests.len());
    for (index, request) in requests.iter().enumerate() {
        let head = heads.get(&request.stream.stream_id);
        match check_head(request, head) {
            Ok(current) => {
                let events = chain(request, head, current, now);
                if let Some(last) = events.last() {
                    heads.insert(
                        request.stream.stream_id.clone(),
                        StreamHead {
                            version: last.stream_version,
                            hash: last.hash.clone(),
                            tenant_id: request.stream.tenant_id.as_uuid(),
                            stream_type: request.stream.stream_type.clone(),
                        },
                    );
                }
                planned.push(Planned {
                    index,
                    current,
                    events,
                    now,
                });
                refusals.push(None);
            }
            Err(err) => refusals.push(Some(err)),
        }
    }
    (planned, refusals)
}

/// Each request's result: its refusal, or the outcome of its planned events (positions filled).
pub(crate) fn outcomes(
    planned: Vec<Planned>,
    refusals: Vec<Option<StoreError>>,
) -> Vec<Result<AppendOutcome, StoreError>> {
    let mut outcomes: Vec<Option<AppendOutcome>> = vec![None; refusals.len()];
    for p in planned {
        outcomes[p.index] = Some(AppendOutcome {
            stream_version: p.current + p.events.len() as u64,
            positions: p.events.iter().map(|e| e.global_position).collect(),
            recorded_at: p.now,
        });
    }
    refusals
        .into_iter()
        .zip(outcomes)
        .map(|(refusal, outcome)| match (refusal, outcome) {
            (Some(err), _) => Err(err),
            (None, Some(outcome)) => Ok(outcome),
            (None, None) => Err(StoreError::Corrupt("a planned append has no outcome".into())),
        })
        .collect()
}

/// Moves the position hint forward (never back) and wakes its subscribers.
pub(crate) fn raise(hint: &watch::Sender<i64>, position: i64) {
    hint.send_if_modified(|current| {
        if position > *current {
            *current = position;
            true
        } else {
            false
        }
    });
}
