//! The in-memory search index of one registry generation.
//!
//! Built from the rows of the active slot ([`super::live`] loads and swaps it), immutable once
//! built, shared by every request through an `Arc`. It answers exactly what
//! [`kuatia_domain::lookup::rank::rank`] defines (a property test in `tests/` compares the two on
//! random registries), in a few hundred microseconds on two million taxpayers. Why memory and not
//! SQL: `docs/lookup.md` ("Storage and search").
//!
//! Layout (about 110 bytes per taxpayer):
//! - records sorted by the search form of their name, then RUC, so that "alphabetical within a
//!   tier" is just "in record order": RUC packed into a `u64`, DV, state, the published name in
//!   one arena, and the name's word ids;
//! - the vocabulary (distinct words) sorted, so that the words beginning with a prefix are one
//!   range of ids, and their postings (which records hold each word) one contiguous slice;
//! - record ids sorted by RUC, for RUC prefixes and exact lookups;
//! - a one-deletion neighbourhood of every word (hash → word id), so that the words
//!   [`similar_words`] to a query word are found with a handful of binary searches.
//!
//! [`similar_words`]: kuatia_domain::lookup::rank::similar_words
//!
//! Here: the index, its public answers and its lookups by record and RUC. Beside: `encoding.rs`
//! (packed RUCs, word hashes, posting metadata), `build.rs` (rows → index), `search.rs` (how a
//! name or RUC search runs), `cache.rs` (recent answers), `tests.rs`.

use kuatia_domain::lookup::query::SearchQuery;
use kuatia_domain::lookup::rank::Tier;

mod build;
mod cache;
mod encoding;
mod search;
#[cfg(test)]
mod tests;

pub use build::IndexBuilder;
pub use cache::CACHE_ENTRIES;
use cache::ResultCache;
pub(crate) use encoding::FxBuild;
pub use encoding::pack_ruc;
use encoding::unpack_ruc;

/// A taxpayer as the index returns it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Taxpayer {
    /// RUC number.
    pub ruc: String,
    /// Check digit.
    pub dv: u8,
    /// Published name.
    pub name: String,
    /// State.
    pub state: String,
}

/// One registry generation, searchable.
pub struct Index {
    cache: std::sync::Mutex<ResultCache>,
    cache_hits: std::sync::atomic::AtomicU64,
    cache_misses: std::sync::atomic::AtomicU64,
    generation: i64,
    published: Option<String>,
    ruc: Vec<u64>,
    dv: Vec<u8>,
    state: Vec<u8>,
    states: Vec<String>,
    name_start: Vec<u32>,
    names: String,
    tok_start: Vec<u32>,
    toks: Vec<u32>,
    vocab_start: Vec<u32>,
    vocab: Vec<u8>,
    /// Prefix sums of posting lengths: word `w`'s records are
    /// `postings[post_start[w]..post_start[w + 1]]`, and a range of words is one slice.
    post_start: Vec<u32>,
    postings: Vec<u32>,
    /// Per posting: position and name length (see [`META_POS`](encoding::META_POS)).
    post_meta: Vec<u16>,
    /// Records whose name repeats a word (a bit per record).
    repeat: Vec<u64>,
    by_ruc: Vec<u32>,
    del_hash: Vec<u64>,
    del_word: Vec<u32>,
    /// Where each bucket of hashes (their top bits) starts in `del_hash`: a probe is one or two
    /// cache misses instead of a binary search.
    del_dir: Vec<u32>,
    del_shift: u32,
}

impl std::fmt::Debug for Index {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Index")
            .field("generation", &self.generation)
            .field("published", &self.published)
            .field("records", &self.ruc.len())
            .field("words", &(self.vocab_start.len() - 1))
            .finish_non_exhaustive()
    }
}

/// Which states a search keeps: a bit per state of the index; `None` keeps all.
pub type StateMask = Option<u64>;

/// A state filter naming states the registry does not have.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown state {unknown:?}; known states: {}", known.join(", "))]
pub struct UnknownState {
    /// The value sent.
    pub unknown: String,
    /// The states that can be filtered on.
    pub known: Vec<String>,
}

/// One page of results and the total.
#[derive(Debug, Clone, Default)]
pub struct Page {
    /// Record ids, best first.
    pub ids: Vec<u32>,
    /// Tier of each id (`None` for RUC searches).
    pub tiers: Vec<Option<Tier>>,
}

impl Index {
    /// An index with no taxpayers (before the first import).
    pub fn empty(generation: i64) -> Self {
        IndexBuilder::new().finish(generation, None)
    }

    /// The registry generation it holds.
    pub fn generation(&self) -> i64 {
        self.generation
    }

    /// The publication date of that generation.
    pub fn published(&self) -> Option<&str> {
        self.published.as_deref()
    }

    /// Number of taxpayers.
    pub fn len(&self) -> usize {
        self.ruc.len()
    }

    /// Whether it holds no taxpayer.
    pub fn is_empty(&self) -> bool {
        self.ruc.is_empty()
    }

    /// Number of distinct words.
    pub fn words(&self) -> usize {
        self.vocab_start.len() - 1
    }

    /// Approximate heap size in bytes.
    pub fn heap_bytes(&self) -> usize {
        self.ruc.len() * 8
            + self.dv.len()
            + self.state.len()
            + self.name_start.len() * 4
            + self.names.len()
            + self.tok_start.len() * 4
            + self.toks.len() * 4
            + self.vocab_start.len() * 4
            + self.vocab.len()
            + self.post_start.len() * 4
            + self.postings.len() * 6
            + self.by_ruc.len() * 4
            + self.del_hash.len() * 12
            + self.del_dir.len() * 4
    }

    /// The states present, in first-seen order.
    pub fn states(&self) -> &[String] {
        &self.states
    }

    /// The mask keeping `wanted` (values in the stored form, see
    /// [`kuatia_domain::lookup::state::filter_form`]); empty keeps all. A state the registry
    /// does not have is an error listing those it has (or the known DNIT states while the
    /// registry is empty).
    pub fn state_mask(&self, wanted: &[String]) -> Result<StateMask, UnknownState> {
        if wanted.is_empty() {
            return Ok(None);
        }
        let mut mask = 0u64;
        for value in wanted {
            match self.states.iter().position(|s| s == value) {
                Some(i) if i < 64 => mask |= 1 << i,
                _ => {
                    let known = kuatia_domain::lookup::state::KNOWN_STATES;
                    if self.is_empty() && known.contains(&value.as_str()) {
                        continue;
                    }
                    let mut list: Vec<String> = if self.is_empty() {
                        known.iter().map(|s| (*s).to_owned()).collect()
                    } else {
                        self.states.clone()
                    };
                    list.sort();
                    return Err(UnknownState {
                        unknown: value.clone(),
                        known: list,
                    });
                }
            }
        }
        Ok(Some(mask))
    }

    /// The taxpayer of a record id.
    pub fn taxpayer(&self, id: u32) -> Taxpayer {
        let r = id as usize;
        let mut buffer = [0u8; 8];
        Taxpayer {
            ruc: unpack_ruc(self.ruc[r], &mut buffer).to_owned(),
            dv: self.dv[r],
            name: self.names[self.name_start[r] as usize..self.name_start[r + 1] as usize].to_owned(),
            state: self
                .states
                .get(usize::from(self.state[r]))
                .cloned()
                .unwrap_or_default(),
        }
    }

    /// The record of a RUC number (without DV).
    pub fn find(&self, ruc: &str) -> Option<u32> {
        let packed = pack_ruc(ruc)?;
        let at = self.by_ruc.partition_point(|&r| self.ruc[r as usize] < packed);
        self.by_ruc
            .get(at)
            .copied()
            .filter(|&r| self.ruc[r as usize] == packed)
    }

    /// A page of results for `query`, best first, with the total number of matches.
    pub fn search(&self, query: &SearchQuery, mask: StateMask, offset: usize, limit: usize) -> (Page, u64) {
        match query {
            SearchQuery::Ruc { prefix, dv } => self.search_ruc(prefix, *dv, mask, offset, limit),
            SearchQuery::Name { words } => self.cached(words, mask, offset, limit),
        }
    }

    /// The number of matches of `query` (what [`Index::search`] would list without a limit).
    pub fn count(&self, query: &SearchQuery, mask: StateMask) -> u64 {
        match query {
            SearchQuery::Ruc { prefix, dv } => self.search_ruc(prefix, *dv, mask, 0, 0).1,
            SearchQuery::Name { words } => self.cached(words, mask, 0, 0).1,
        }
    }

    /// [`Index::search`] without the cache of recent answers (what a search costs when it is
    /// new; for benchmarks).
    pub fn search_uncached(
        &self,
        query: &SearchQuery,
        mask: StateMask,
        offset: usize,
        limit: usize,
    ) -> (Page, u64) {
        match query {
            SearchQuery::Ruc { prefix, dv } => self.search_ruc(prefix, *dv, mask, offset, limit),
            SearchQuery::Name { words } => self.search_words(words, mask, offset, limit),
        }
    }
}
