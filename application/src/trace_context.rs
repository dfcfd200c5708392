//! The W3C trace context that jobs carry across the queue, so that a request, the jobs it
//! causes, the jobs those cause and the SIFEN calls they make are one trace.
//!
//! A job written while a span is current gets that span's `traceparent`
//! (`00-<trace id>-<span id>-<flags>`) in its payload under [`PAYLOAD_KEY`]; the worker runs the
//! job's handler in a span whose parent is that context ([`crate::worker`]). Handlers read
//! their own keys and ignore this one.
//!
//! The application does not know how spans carry their context (that is the telemetry
//! adapter's business, `kuatia_infrastructure::telemetry`): the adapter installs a reader once
//! per process with [`install`]. Without one (a process that never installed the telemetry
//! layer) no context is read and jobs carry none; nothing else changes.

use serde_json::Value;
use std::sync::OnceLock;

/// The payload key holding the `traceparent` of the span that wrote the job.
pub const PAYLOAD_KEY: &str = "trace_parent";

/// Reads the `traceparent` of the current span, when there is one with a context.
pub type Reader = fn() -> Option<String>;

static READER: OnceLock<Reader> = OnceLock::new();

/// Installs the process's reader; the first call wins (returns whether this one did).
pub fn install(reader: Reader) -> bool {
    READER.set(reader).is_ok()
}

/// The `traceparent` of the current span, when a reader is installed and a span is current.
pub fn current() -> Option<String> {
    READER.get().and_then(|read| read())
}

/// The trace id (32 lowercase hex digits) of a `traceparent`.
pub fn trace_id(traceparent: &str) -> Option<&str> {
    traceparent.get(3..35)
}

/// The `traceparent` a job payload carries, if any.
pub fn of_payload(payload: &Value) -> Option<&str> {
    payload.get(PAYLOAD_KEY).and_then(Value::as_str)
}

/// Adds the current `traceparent` to an object payload that does not carry one yet.
pub fn stamp(payload: &mut Value) {
    stamp_from(payload, current);
}

/// Adds a given `traceparent` (an event's, say) to an object payload that does not carry one yet.
pub fn stamp_with(payload: &mut Value, traceparent: Option<&str>) {
    stamp_from(payload, || traceparent.map(str::to_owned));
}

/// Adds `traceparent()` (asked only when it is needed) to an object payload without one.
fn stamp_from(payload: &mut Value, traceparent: impl FnOnce() -> Option<String>) {
    if let Value::Object(map) = payload
        && !map.contains_key(PAYLOAD_KEY)
        && let Some(traceparent) = traceparent()
    {
        map.insert(PAYLOAD_KEY.to_owned(), Value::String(traceparent));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_trace_id_is_the_second_field_of_a_traceparent() {
        assert_eq!(
            trace_id("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"),
            Some("4bf92f3577b34da6a3ce929d0e0e4736")
        );
        assert_eq!(trace_id("00-short"), None);
    }

    #[test]
    fn a_payload_carries_its_traceparent_under_one_key() {
        let payload = json!({"document_id": "x", PAYLOAD_KEY: "00-abc"});
        assert_eq!(of_payload(&payload), Some("00-abc"));
        assert_eq!(of_payload(&json!({"document_id": "x"})), None);
        // Nothing current (no reader in unit tests): the payload is left as it is.
        let mut untouched = json!({"document_id": "x"});
        stamp(&mut untouched);
        assert_eq!(untouched, json!({"document_id": "x"}));
    }
}
