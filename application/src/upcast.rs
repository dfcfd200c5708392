//! Upcasting: turning stored payloads of older schema versions into the current shape on read.
//!
//! Stored events are never rewritten. Each [`Upcaster`] lifts one `(event_type, schema_version)`
//! by one step; the [`UpcasterChain`] applies steps until none matches, on every read path
//! (aggregate load, subscriptions, timelines, rebuilds). Verification reads raw events instead,
//! because the hash covers what was stored.

use serde_json::Value;

/// One step: from `(event_type, from_version)` to `from_version + 1` (or a new type name).
pub trait Upcaster: Send + Sync {
    /// Whether this step applies.
    fn can_upcast(&self, event_type: &str, schema_version: u32) -> bool;
    /// Returns the new type name, the new version, and the new payload.
    fn upcast(&self, event_type: &str, schema_version: u32, payload: Value) -> (String, u32, Value);
}

/// An upcaster made of a closure, for the common "one type, one version" case.
pub struct FnUpcaster<F> {
    event_type: &'static str,
    from_version: u32,
    f: F,
}

impl<F> FnUpcaster<F>
where
    F: Fn(Value) -> Value + Send + Sync,
{
    /// Lifts `event_type` at `from_version` to `from_version + 1` with `f`.
    pub fn new(event_type: &'static str, from_version: u32, f: F) -> Self {
        Self {
            event_type,
            from_version,
            f,
        }
    }
}

impl<F> Upcaster for FnUpcaster<F>
where
    F: Fn(Value) -> Value + Send + Sync,
{
    fn can_upcast(&self, event_type: &str, schema_version: u32) -> bool {
        event_type == self.event_type && schema_version == self.from_version
    }

    fn upcast(&self, event_type: &str, schema_version: u32, payload: Value) -> (String, u32, Value) {
        (event_type.to_owned(), schema_version + 1, (self.f)(payload))
    }
}

/// The ordered set of upcasters of the application.
#[derive(Default)]
pub struct UpcasterChain {
    steps: Vec<Box<dyn Upcaster>>,
}

impl std::fmt::Debug for UpcasterChain {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UpcasterChain")
            .field("steps", &self.steps.len())
            .finish()
    }
}

impl UpcasterChain {
    /// A chain with no steps.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a step.
    pub fn with(mut self, step: impl Upcaster + 'static) -> Self {
        self.steps.push(Box::new(step));
        self
    }

    /// Whether a step applies to a stored `(event_type, schema_version)`: when none does, the
    /// stored body is already current and a reader may hand it on unparsed.
    pub fn applies(&self, event_type: &str, schema_version: u32) -> bool {
        self.steps
            .iter()
            .any(|s| s.can_upcast(event_type, schema_version))
    }

    /// Applies steps until none matches. A step that does not raise the version is a bug and
    /// would loop; the chain stops after as many rounds as it has steps.
    pub fn apply(&self, event_type: String, schema_version: u32, payload: Value) -> (String, u32, Value) {
        let (mut ty, mut version, mut body) = (event_type, schema_version, payload);
        for _ in 0..=self.steps.len() {
            let Some(step) = self.steps.iter().find(|s| s.can_upcast(&ty, version)) else {
                break;
            };
            let (next_ty, next_version, next_body) = step.upcast(&ty, version, body);
            ty = next_ty;
            version = next_version;
            body = next_body;
        }
        (ty, version, body)
    }
}

/// The application's upcasters: every schema change of a stored event adds a step here.
/// (None yet: every event type is at schema version 1.)
pub fn registered() -> UpcasterChain {
    UpcasterChain::new()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn steps_are_applied_in_sequence_until_the_current_version() {
        let chain = UpcasterChain::new()
            .with(FnUpcaster::new("Renamed", 1, |mut p| {
                p["name"] = p["nombre"].take();
                p
            }))
            .with(FnUpcaster::new("Renamed", 2, |mut p| {
                p["version"] = json!(3);
                p
            }));
        let (ty, v, body) = chain.apply("Renamed".into(), 1, json!({"nombre": "x"}));
        assert_eq!((ty.as_str(), v), ("Renamed", 3));
        assert_eq!(body["name"], "x");
        assert_eq!(body["version"], 3);
    }

    #[test]
    fn events_without_a_step_pass_unchanged() {
        let chain = UpcasterChain::new().with(FnUpcaster::new("A", 1, |_| json!(null)));
        let (_, v, body) = chain.apply("B".into(), 1, json!({"k": 1}));
        assert_eq!(v, 1);
        assert_eq!(body, json!({"k": 1}));
    }
}
