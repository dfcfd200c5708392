//! Folded aggregates by stream, as this process last loaded or committed them.
//!
//! A document is loaded (every event of its stream read and decoded) by each step that touches
//! it: its jobs, their commands, the lot poll, the KuDE. The store keeps one [`AggregateCache`]
//! (`Store::aggregate_cache`), and the aggregate store and command executor use it:
//!
//! - a load reads only the events after the cached version (`Store::load_stream_after`: one
//!   indexed query, usually answering nothing) and folds them onto the cached aggregate;
//! - a command is decided on the cached aggregate without reading at all: its append expects the
//!   cached version, so only a decision made on the stream as it stands commits; a conflict,
//!   refusal or no-op there (the cache may be stale: another instance wrote) is decided again on
//!   the stream as read (`crate::aggregate::CommandExecutor::execute_all`);
//! - a committed command leaves the aggregate as its events left it, at the new version; a
//!   conflict (someone wrote first) forgets the stream.
//!
//! Entries are typed by aggregate and tenant (a hit for another tenant's stream id is a miss).
//! The cache holds at most its capacity of streams; past it, the least recently used half goes.

use kuatia_domain::tenancy::TenantId;
use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::sync::Mutex;

/// Streams kept by default (a document's state is a few kilobytes: some tens of megabytes).
pub const DEFAULT_CAPACITY: usize = 8_192;

struct Entry {
    type_id: TypeId,
    tenant: TenantId,
    version: u64,
    aggregate: Box<dyn Any + Send + Sync>,
    used: u64,
}

struct Entries {
    map: HashMap<String, Entry>,
    clock: u64,
}

/// See the module documentation.
pub struct AggregateCache {
    entries: Mutex<Entries>,
    capacity: usize,
}

impl std::fmt::Debug for AggregateCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AggregateCache")
            .field("capacity", &self.capacity)
            .field("len", &self.len())
            .finish()
    }
}

impl Default for AggregateCache {
    fn default() -> Self {
        Self::new(DEFAULT_CAPACITY)
    }
}

impl AggregateCache {
    /// A cache of at most `capacity` streams (at least 2).
    pub fn new(capacity: usize) -> Self {
        Self {
            entries: Mutex::new(Entries {
                map: HashMap::new(),
                clock: 0,
            }),
            capacity: capacity.max(2),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Entries> {
        self.entries
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Streams held.
    pub fn len(&self) -> usize {
        self.lock().map.len()
    }

    /// Whether it holds nothing.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The stream's aggregate of type `A` owned by `tenant` and its version, if held.
    pub fn get<A: Clone + 'static>(&self, tenant: TenantId, stream_id: &str) -> Option<(u64, A)> {
        let mut entries = self.lock();
        entries.clock += 1;
        let clock = entries.clock;
        let entry = entries.map.get_mut(stream_id)?;
        if entry.type_id != TypeId::of::<A>() || entry.tenant != tenant {
            return None;
        }
        entry.used = clock;
        let aggregate = entry.aggregate.downcast_ref::<A>()?.clone();
        Some((entry.version, aggregate))
    }

    /// Keeps the stream's aggregate at `version`, unless a newer one is held already.
    pub fn put<A: Clone + Send + Sync + 'static>(
        &self,
        tenant: TenantId,
        stream_id: &str,
        version: u64,
        aggregate: &A,
    ) {
        let mut entries = self.lock();
        entries.clock += 1;
        let clock = entries.clock;
        if let Some(entry) = entries.map.get_mut(stream_id)
            && entry.type_id == TypeId::of::<A>()
            && entry.tenant == tenant
        {
            if entry.version <= version {
                entry.version = version;
                entry.aggregate = Box::new(aggregate.clone());
            }
            entry.used = clock;
            return;
        }
        if entries.map.len() >= self.capacity {
            // The least recently used half goes (capacity ≥ 2: the map holds two at least).
            let mut used: Vec<u64> = entries.map.values().map(|e| e.used).collect();
            let middle = used.len() / 2 - 1;
            let (_, &mut threshold, _) = used.select_nth_unstable(middle);
            entries.map.retain(|_, e| e.used > threshold);
        }
        entries.map.insert(
            stream_id.to_owned(),
            Entry {
                type_id: TypeId::of::<A>(),
                tenant,
                version,
                aggregate: Box::new(aggregate.clone()),
                used: clock,
            },
        );
    }

    /// Drops the stream (after a conflict: someone else wrote it).
    pub fn forget(&self, stream_id: &str) {
        self.lock().map.remove(stream_id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use uuid::Uuid;

    fn tenant() -> TenantId {
        TenantId::from_uuid(Uuid::now_v7())
    }

    #[test]
    fn a_hit_is_typed_by_aggregate_and_tenant_and_never_goes_back_a_version() {
        let cache = AggregateCache::new(10);
        let (t, other) = (tenant(), tenant());
        cache.put(t, "s", 3, &String::from("three"));
        assert_eq!(cache.get::<String>(t, "s"), Some((3, "three".to_owned())));
        assert_eq!(cache.get::<u64>(t, "s"), None, "another aggregate type");
        assert_eq!(cache.get::<String>(other, "s"), None, "another tenant");
        cache.put(t, "s", 2, &String::from("two"));
        assert_eq!(
            cache.get::<String>(t, "s"),
            Some((3, "three".to_owned())),
            "older"
        );
        cache.put(t, "s", 4, &String::from("four"));
        assert_eq!(cache.get::<String>(t, "s"), Some((4, "four".to_owned())));
        cache.forget("s");
        assert_eq!(cache.get::<String>(t, "s"), None);
    }

    #[test]
    fn past_its_capacity_the_least_recently_used_half_goes() {
        let cache = AggregateCache::new(4);
        let t = tenant();
        for (i, s) in ["a", "b", "c", "d"].iter().enumerate() {
            cache.put(t, s, 1, &(i as u64));
        }
        // "a" and "b" used again: "c" and "d" are the least recently used.
        assert!(cache.get::<u64>(t, "a").is_some());
        assert!(cache.get::<u64>(t, "b").is_some());
        cache.put(t, "e", 1, &9u64);
        assert_eq!(cache.len(), 3);
        for (s, held) in [("a", true), ("b", true), ("c", false), ("d", false), ("e", true)] {
            assert_eq!(cache.get::<u64>(t, s).is_some(), held, "{s}");
        }
    }
}
