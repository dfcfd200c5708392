//! The per-stream hash chain that makes the log tamper-evident.
//!
//! `hash = SHA-256(canonical JSON of {prev_hash, event_id, tenant_id, stream_type, stream_id,
//! stream_version, event_type, schema_version, payload, metadata, recorded_at})`, where canonical
//! JSON means object keys sorted, no insignificant white space (serde_json's compact form over a
//! `BTreeMap`-backed map), `prev_hash` is the previous event's hash in lower-case hex or null, and
//! `recorded_at` is RFC 3339 UTC with microseconds. An auditor can recompute it with any JSON
//! library; `kuatia events verify` does so for every stream. Changing any stored field, deleting
//! an event or reordering a stream breaks the chain at that event.

use chrono::{DateTime, SecondsFormat, Utc};
use serde_json::Value;
use serde_json::value::RawValue;
use sha2::{Digest, Sha256};

use crate::event_store::{EventMetadata, RecordedEvent};

/// The fields the hash covers, borrowed. The payload is a parsed [`Value`] or, when verifying,
/// the stored text ([`RawValue`]), which the backends keep as it was hashed.
#[derive(Debug, Clone, Copy)]
pub struct HashInput<'a, P: ?Sized = Value> {
    /// Previous hash in hex, `None` for the first event of a stream.
    pub prev_hash: Option<&'a str>,
    /// Event id.
    pub event_id: uuid::Uuid,
    /// Tenant.
    pub tenant_id: uuid::Uuid,
    /// Stream type.
    pub stream_type: &'a str,
    /// Stream id.
    pub stream_id: &'a str,
    /// Version within the stream.
    pub stream_version: u64,
    /// Type name.
    pub event_type: &'a str,
    /// Schema version as stored.
    pub schema_version: u32,
    /// Payload as stored.
    pub payload: &'a P,
    /// Metadata as stored.
    pub metadata: &'a EventMetadata,
    /// Database-clock timestamp.
    pub recorded_at: DateTime<Utc>,
}

/// Formats a timestamp the way the hash (and SQLite storage) expects: RFC 3339, UTC, microseconds.
pub fn format_timestamp(at: DateTime<Utc>) -> String {
    at.to_rfc3339_opts(SecondsFormat::Micros, true)
}

/// The canonical object, its fields declared in sorted key order: serde_json writes a struct's
/// fields in declaration order, so its compact form is byte for byte that of the sorted map,
/// without copying the payload into a new map first (issue 30: every append and `events verify`
/// hashed a deep copy of every payload).
#[derive(serde::Serialize)]
struct Canonical<'a, P: ?Sized> {
    event_id: String,
    event_type: &'a str,
    // A struct of its own: made a map here, so that its keys are sorted too.
    metadata: Value,
    payload: &'a P,
    prev_hash: Option<&'a str>,
    recorded_at: String,
    schema_version: u32,
    stream_id: &'a str,
    stream_type: &'a str,
    stream_version: u64,
    tenant_id: String,
}

/// Computes the chain hash of one event, lower-case hex.
pub fn chain_hash<P: serde::Serialize + ?Sized>(input: &HashInput<'_, P>) -> String {
    let canonical = Canonical {
        event_id: input.event_id.to_string(),
        event_type: input.event_type,
        metadata: serde_json::to_value(input.metadata).unwrap_or_default(),
        payload: input.payload,
        prev_hash: input.prev_hash,
        recorded_at: format_timestamp(input.recorded_at),
        schema_version: input.schema_version,
        stream_id: input.stream_id,
        stream_type: input.stream_type,
        stream_version: input.stream_version,
        tenant_id: input.tenant_id.to_string(),
    };
    let bytes = serde_json::to_vec(&canonical).unwrap_or_default();
    hex::encode(Sha256::digest(&bytes))
}

/// Recomputes the hash of a stored event (read raw, not upcast).
pub fn recompute<P: serde::Serialize>(event: &RecordedEvent<P>) -> String {
    hash_with(event, &event.payload)
}

/// The hash of a stored event with `payload` for its payload (the same body, parsed).
fn hash_with<P, B: serde::Serialize + ?Sized>(event: &RecordedEvent<P>, payload: &B) -> String {
    chain_hash(&HashInput {
        prev_hash: event.prev_hash.as_deref(),
        event_id: event.event_id,
        tenant_id: event.tenant_id.as_uuid(),
        stream_type: &event.stream_type,
        stream_id: &event.stream_id,
        stream_version: event.stream_version,
        event_type: &event.event_type,
        schema_version: event.schema_version,
        payload,
        metadata: &event.metadata,
        recorded_at: event.recorded_at,
    })
}

/// A body [`ChainVerifier`] hashes: a parsed [`Value`], or the stored JSON text, hashed as it is
/// (it is stored exactly as it was hashed, so no parsing and writing back per event: issue 30)
/// and, only when that does not match, parsed and hashed in canonical form.
pub trait Body: serde::Serialize {
    /// The body parsed, when it is text; `None` when it is parsed already.
    fn parsed(&self) -> Option<Value>;
}

impl Body for Value {
    fn parsed(&self) -> Option<Value> {
        None
    }
}

impl Body for Box<RawValue> {
    fn parsed(&self) -> Option<Value> {
        serde_json::from_str(self.get()).ok()
    }
}

/// The first place a chain is broken.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChainBreak {
    /// Global position of the offending event.
    pub global_position: i64,
    /// Its id.
    pub event_id: uuid::Uuid,
    /// Its stream.
    pub stream_id: String,
    /// Its version.
    pub stream_version: u64,
    /// What is wrong.
    pub reason: String,
}

/// Walks events in global order and checks every stream's chain incrementally.
#[derive(Debug, Default)]
pub struct ChainVerifier {
    heads: std::collections::HashMap<String, (u64, String)>,
    checked: u64,
    last_position: Option<i64>,
}

impl ChainVerifier {
    /// Checks the next event (events must come in global order, read raw).
    pub fn check<P: Body>(&mut self, event: &RecordedEvent<P>) -> Result<(), ChainBreak> {
        let broken = |reason: String| ChainBreak {
            global_position: event.global_position,
            event_id: event.event_id,
            stream_id: event.stream_id.clone(),
            stream_version: event.stream_version,
            reason,
        };
        if let Some(last) = self.last_position
            && event.global_position <= last
        {
            return Err(broken(format!(
                "global position {} comes after position {} (positions must rise)",
                event.global_position, last
            )));
        }
        let (expected_version, expected_prev) = match self.heads.get(&event.stream_id) {
            Some((version, hash)) => (version + 1, Some(hash.as_str())),
            None => (1, None),
        };
        if event.stream_version != expected_version {
            return Err(broken(format!(
                "stream version {} follows version {} (an event is missing or out of order)",
                event.stream_version,
                expected_version - 1
            )));
        }
        if event.prev_hash.as_deref() != expected_prev {
            return Err(broken(
                "prev_hash does not equal the previous event's hash".to_owned(),
            ));
        }
        let mut recomputed = recompute(event);
        if recomputed != event.hash
            && let Some(parsed) = event.payload.parsed()
        {
            // Stored text that is not in canonical form (never written so by this service) is
            // hashed as the definition says: parsed, keys sorted, compact.
            recomputed = hash_with(event, &parsed);
        }
        if recomputed != event.hash {
            return Err(broken(format!(
                "stored hash {} does not match the recomputed {}",
                event.hash, recomputed
            )));
        }
        self.heads.insert(
            event.stream_id.clone(),
            (event.stream_version, event.hash.clone()),
        );
        self.checked += 1;
        self.last_position = Some(event.global_position);
        Ok(())
    }

    /// How many events passed.
    pub fn checked(&self) -> u64 {
        self.checked
    }

    /// The position of the last event that passed (`None` before the first).
    pub fn last_position(&self) -> Option<i64> {
        self.last_position
    }

    /// How many streams were seen.
    pub fn streams(&self) -> usize {
        self.heads.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kuatia_domain::tenancy::TenantId;
    use serde_json::json;

    fn event(version: u64, prev: Option<String>, payload: Value) -> RecordedEvent {
        let mut e = RecordedEvent {
            global_position: version as i64,
            event_id: uuid::Uuid::now_v7(),
            tenant_id: TenantId::SYSTEM,
            stream_type: "test".into(),
            stream_id: "s1".into(),
            stream_version: version,
            event_type: "Happened".into(),
            schema_version: 1,
            payload,
            metadata: EventMetadata::default(),
            recorded_at: Utc::now(),
            prev_hash: prev,
            hash: String::new(),
        };
        e.hash = recompute(&e);
        e
    }

    /// The hash's definition, as the module's documentation and the ADR give it: the sorted map,
    /// written compactly. The struct the code serialises must give the same bytes.
    fn by_the_definition(e: &RecordedEvent) -> String {
        let canonical = json!({
            "prev_hash": e.prev_hash,
            "event_id": e.event_id.to_string(),
            "tenant_id": e.tenant_id.as_uuid().to_string(),
            "stream_type": e.stream_type,
            "stream_id": e.stream_id,
            "stream_version": e.stream_version,
            "event_type": e.event_type,
            "schema_version": e.schema_version,
            "payload": e.payload,
            "metadata": e.metadata,
            "recorded_at": format_timestamp(e.recorded_at),
        });
        hex::encode(Sha256::digest(serde_json::to_vec(&canonical).expect("json")))
    }

    #[test]
    fn the_hash_is_the_sorted_maps_whatever_the_fields_hold() {
        let first = event(
            1,
            None,
            json!({"z": [1, {"b": null, "a": "ñ\"\u{1}"}], "a": 1.5, "m": {}}),
        );
        let mut second = event(2, Some(first.hash.clone()), json!("text"));
        second.metadata = EventMetadata {
            actor: Some("api_key:1".into()),
            request_id: Some("r".into()),
            correlation_id: Some("c".into()),
            causation_id: None,
            trace_parent: Some("00-abc-def-01".into()),
        };
        second.hash = recompute(&second);
        for e in [&first, &second] {
            assert_eq!(e.hash, by_the_definition(e));
        }
    }

    #[test]
    fn stored_text_verifies_as_it_is_or_in_canonical_form_and_a_changed_one_breaks() {
        let stored = event(1, None, json!({"b": 1, "a": [true, "ñ"], "c": -0.0}));
        let as_text = |body: &str| {
            let mut e = crate::event_store::json_event(stored.clone()).expect("json");
            if !body.is_empty() {
                e.payload = RawValue::from_string(body.to_owned()).expect("json");
            }
            e
        };
        // As the service stores it: the canonical text itself.
        let canonical = as_text("");
        assert_eq!(canonical.payload.get(), r#"{"a":[true,"ñ"],"b":1,"c":-0.0}"#);
        assert!(ChainVerifier::default().check(&canonical).is_ok());
        // The same body in another form (spaces, key order): parsed, then it verifies.
        assert!(
            ChainVerifier::default()
                .check(&as_text(r#"{ "c": -0.0, "b": 1, "a": [true, "\u00f1"] }"#))
                .is_ok()
        );
        // Another body breaks the chain, in either form.
        for changed in [
            r#"{"a":[true,"ñ"],"b":2,"c":-0.0}"#,
            r#"{ "b": 1, "a": [true] , "c": -0.0}"#,
        ] {
            let broken = ChainVerifier::default()
                .check(&as_text(changed))
                .expect_err(changed);
            assert!(broken.reason.contains("does not match"), "{}", broken.reason);
        }
    }

    #[test]
    fn key_order_of_the_payload_does_not_change_the_hash() {
        let a: Value = serde_json::from_str(r#"{"b":1,"a":{"y":2,"x":[1,2]}}"#).unwrap();
        let b: Value = serde_json::from_str(r#"{"a":{"x":[1,2],"y":2},"b":1}"#).unwrap();
        let mut e1 = event(1, None, a);
        let mut e2 = e1.clone();
        e2.payload = b;
        e1.hash = recompute(&e1);
        e2.hash = recompute(&e2);
        assert_eq!(e1.hash, e2.hash);
    }

    #[test]
    fn a_changed_payload_breaks_the_chain_at_that_event() {
        let e1 = event(1, None, json!({"n": 1}));
        let mut e2 = event(2, Some(e1.hash.clone()), json!({"n": 2}));
        e2.payload = json!({"n": 3});
        let mut verifier = ChainVerifier::default();
        verifier.check(&e1).unwrap();
        let err = verifier.check(&e2).unwrap_err();
        assert_eq!(err.stream_version, 2);
        assert!(err.reason.contains("does not match"), "{}", err.reason);
    }

    #[test]
    fn positions_out_of_order_break_the_chain() {
        let mut a = event(1, None, json!({}));
        a.stream_id = "s-a".into();
        a.global_position = 5;
        a.hash = recompute(&a);
        let mut b = event(1, None, json!({}));
        b.stream_id = "s-b".into();
        b.global_position = 4;
        b.hash = recompute(&b);
        let mut verifier = ChainVerifier::default();
        verifier.check(&a).unwrap();
        let err = verifier.check(&b).unwrap_err();
        assert!(err.reason.contains("positions must rise"), "{}", err.reason);
    }

    #[test]
    fn a_missing_event_breaks_the_chain() {
        let e1 = event(1, None, json!({}));
        let e2 = event(2, Some(e1.hash.clone()), json!({}));
        let e3 = event(3, Some(e2.hash.clone()), json!({}));
        let mut verifier = ChainVerifier::default();
        verifier.check(&e1).unwrap();
        let err = verifier.check(&e3).unwrap_err();
        assert!(err.reason.contains("missing"), "{}", err.reason);
    }
}
