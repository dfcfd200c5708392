//! The cache of recent name-search answers an [`Index`] keeps while it serves.

use std::collections::HashMap;

use super::encoding::FxBuild;
use super::{Index, Page, StateMask};

/// Recent name-search answers: new ones go to `current`; when it is full it becomes `previous`
/// (the older map is dropped) and a hit there moves back — an approximate LRU with constant work
/// per request and no per-entry bookkeeping.
pub(super) struct ResultCache {
    current: HashMap<String, (Page, u64), FxBuild>,
    previous: HashMap<String, (Page, u64), FxBuild>,
    /// Answers per map (two maps: at most twice this many); 0 turns the cache off.
    capacity: usize,
}

/// Default [`ResultCache`] capacity: 20 000 answers per map, a few MB.
pub const CACHE_ENTRIES: usize = 20_000;

impl Default for ResultCache {
    fn default() -> Self {
        Self {
            current: HashMap::default(),
            previous: HashMap::default(),
            capacity: CACHE_ENTRIES,
        }
    }
}

impl ResultCache {
    fn get(&mut self, key: &str) -> Option<(Page, u64)> {
        if let Some(hit) = self.current.get(key) {
            return Some(hit.clone());
        }
        let (key, hit) = self.previous.remove_entry(key)?;
        self.put(key, hit.clone());
        Some(hit)
    }

    fn put(&mut self, key: String, answer: (Page, u64)) {
        if self.capacity == 0 {
            return;
        }
        if self.current.len() >= self.capacity {
            self.previous = std::mem::take(&mut self.current);
        }
        self.current.insert(key, answer);
    }
}

impl Index {
    /// The same index with a cache of `entries` answers per map (0: no cache).
    pub fn with_cache_entries(self, entries: usize) -> Self {
        self.cache
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .capacity = entries;
        self
    }

    /// Name searches answered from the cache, and computed.
    pub fn cache_stats(&self) -> (u64, u64) {
        (
            self.cache_hits.load(std::sync::atomic::Ordering::Relaxed),
            self.cache_misses.load(std::sync::atomic::Ordering::Relaxed),
        )
    }

    /// [`Index::search_words`] through the cache of recent answers. An index never changes, so
    /// an answer stays right for as long as the index serves; the cache goes with it when a new
    /// generation replaces it.
    pub(super) fn cached(
        &self,
        words: &[String],
        mask: StateMask,
        offset: usize,
        limit: usize,
    ) -> (Page, u64) {
        use std::fmt::Write;
        use std::sync::atomic::Ordering::Relaxed;
        let mut key = words.join(" ");
        let _ = write!(key, "|{mask:?}|{offset}|{limit}");
        if let Some(hit) = self
            .cache
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(&key)
        {
            self.cache_hits.fetch_add(1, Relaxed);
            return hit;
        }
        self.cache_misses.fetch_add(1, Relaxed);
        let answer = self.search_words(words, mask, offset, limit);
        self.cache
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .put(key, answer.clone());
        answer
    }
}
