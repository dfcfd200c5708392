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

use std::cell::RefCell;
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

use kuatia_domain::lookup::normalize::for_each_word;
use kuatia_domain::lookup::query::SearchQuery;
use kuatia_domain::lookup::rank::{FUZZY_MIN_LEN, Tier, similar_words};

/// A small, fast, non-cryptographic hasher (the FxHash mix) for the vocabulary while building.
#[derive(Default, Clone, Copy)]
pub(crate) struct FxHasher(u64);

const FX_SEED: u64 = 0x51_7c_c1_b7_27_22_0a_95;

impl Hasher for FxHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(5) ^ u64::from(b)).wrapping_mul(FX_SEED);
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0.rotate_left(5) ^ n).wrapping_mul(FX_SEED);
    }
}

pub(crate) type FxBuild = BuildHasherDefault<FxHasher>;

/// Hash of `word` with the byte at `skip` left out (`usize::MAX`: nothing left out). Two words
/// with the same text have the same hash whichever way they were obtained.
fn deletion_hash(word: &[u8], skip: usize) -> u64 {
    let mut h = FxHasher::default();
    for (i, &b) in word.iter().enumerate() {
        if i != skip {
            h.write(&[b]);
        }
    }
    // The length keeps "AB"+"C" apart from "A"+"BC"-style coincidences of the byte mix.
    h.write_u64(word.len() as u64 - u64::from(skip != usize::MAX));
    h.finish()
}

/// A RUC number (3–8 ASCII characters) packed big-endian into a `u64`, zero-padded on the right,
/// so that comparing packed values compares the texts, and a prefix is a range.
pub fn pack_ruc(ruc: &str) -> Option<u64> {
    let bytes = ruc.as_bytes();
    if bytes.is_empty() || bytes.len() > 8 || bytes.contains(&0) {
        return None;
    }
    let mut out = [0u8; 8];
    out[..bytes.len()].copy_from_slice(bytes);
    Some(u64::from_be_bytes(out))
}

/// The smallest and largest packed values that start with `prefix`.
fn prefix_bounds(prefix: &str) -> Option<(u64, u64)> {
    let low = pack_ruc(prefix)?;
    let free_bits = 8 * (8 - prefix.len());
    let high = if free_bits == 64 {
        u64::MAX
    } else {
        low | ((1u64 << free_bits) - 1)
    };
    Some((low, high))
}

/// The text of a packed RUC.
fn unpack_ruc(packed: u64, buffer: &mut [u8; 8]) -> &str {
    *buffer = packed.to_be_bytes();
    let len = buffer.iter().position(|&b| b == 0).unwrap_or(8);
    std::str::from_utf8(&buffer[..len]).unwrap_or("")
}

/// Collects rows into an [`Index`].
#[derive(Default)]
pub struct IndexBuilder {
    ruc: Vec<u64>,
    dv: Vec<u8>,
    state: Vec<u8>,
    states: Vec<String>,
    name_start: Vec<u32>,
    names: String,
    tok_start: Vec<u32>,
    toks: Vec<u32>,
    vocab: HashMap<Box<[u8]>, u32, FxBuild>,
    buffer: String,
    skipped: usize,
}

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

impl IndexBuilder {
    /// An empty builder.
    pub fn new() -> Self {
        Self {
            name_start: vec![0],
            tok_start: vec![0],
            ..Self::default()
        }
    }

    /// Rows pushed so far (skipped ones included).
    pub fn len(&self) -> usize {
        self.ruc.len() + self.skipped
    }

    /// Whether nothing was pushed.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Adds a row. A RUC that cannot be packed (the importer never stores one) is skipped.
    pub fn push(&mut self, ruc: &str, dv: u8, name: &str, state: &str) {
        let Some(packed) = pack_ruc(ruc) else {
            self.skipped += 1;
            return;
        };
        self.ruc.push(packed);
        self.dv.push(dv);
        let state_id = match self.states.iter().position(|s| s == state) {
            Some(i) => i,
            None => {
                self.states.push(state.to_owned());
                self.states.len() - 1
            }
        };
        self.state.push(u8::try_from(state_id).unwrap_or(u8::MAX));
        self.names.push_str(name);
        self.name_start
            .push(u32::try_from(self.names.len()).unwrap_or(u32::MAX));
        let (vocab, toks) = (&mut self.vocab, &mut self.toks);
        let mut buffer = std::mem::take(&mut self.buffer);
        for_each_word(name, &mut buffer, |word| {
            let next = u32::try_from(vocab.len()).unwrap_or(u32::MAX);
            let id = *vocab.entry(word.as_bytes().into()).or_insert(next);
            toks.push(id);
        });
        self.buffer = buffer;
        self.tok_start
            .push(u32::try_from(self.toks.len()).unwrap_or(u32::MAX));
    }

    /// Builds the index (CPU-bound: seconds for millions of rows; run it off the async threads).
    pub fn finish(self, generation: i64, published: Option<String>) -> Index {
        let n = self.ruc.len();
        // 1. The vocabulary in byte order; word ids follow it.
        let mut words: Vec<(Box<[u8]>, u32)> = self.vocab.into_iter().collect();
        words.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        let mut remap = vec![0u32; words.len()];
        let mut vocab_start = Vec::with_capacity(words.len() + 1);
        let mut vocab = Vec::new();
        vocab_start.push(0u32);
        for (new_id, (word, old_id)) in words.iter().enumerate() {
            remap[*old_id as usize] = new_id as u32;
            vocab.extend_from_slice(word);
            vocab_start.push(u32::try_from(vocab.len()).unwrap_or(u32::MAX));
        }
        drop(words);
        let mut toks = self.toks;
        for t in &mut toks {
            *t = remap[*t as usize];
        }
        drop(remap);
        let tok_start = self.tok_start;
        let tokens_of = |r: usize| &toks[tok_start[r] as usize..tok_start[r + 1] as usize];

        // 2. Records in the order of their words, then RUC: sort on the first two words, then
        //    finish each run of equal keys with a full comparison.
        let key = |r: usize| {
            let t = tokens_of(r);
            let a = t.first().map_or(0, |&x| u64::from(x) + 1);
            let b = t.get(1).map_or(0, |&x| u64::from(x) + 1);
            (a << 32) | b
        };
        let mut order: Vec<(u64, u32)> = (0..n).map(|r| (key(r), r as u32)).collect();
        order.sort_unstable_by_key(|&(k, _)| k);
        let mut start = 0;
        while start < order.len() {
            let mut end = start + 1;
            while end < order.len() && order[end].0 == order[start].0 {
                end += 1;
            }
            if end - start > 1 {
                order[start..end].sort_unstable_by(|a, b| {
                    let (ra, rb) = (a.1 as usize, b.1 as usize);
                    tokens_of(ra)
                        .cmp(tokens_of(rb))
                        .then(self.ruc[ra].cmp(&self.ruc[rb]))
                });
            }
            start = end;
        }

        // 3. Every per-record array in that order.
        let mut ruc = Vec::with_capacity(n);
        let mut dv = Vec::with_capacity(n);
        let mut state = Vec::with_capacity(n);
        let mut name_start = Vec::with_capacity(n + 1);
        let mut names = String::with_capacity(self.names.len());
        let mut new_tok_start = Vec::with_capacity(n + 1);
        let mut new_toks = Vec::with_capacity(toks.len());
        name_start.push(0u32);
        new_tok_start.push(0u32);
        for &(_, r) in &order {
            let r = r as usize;
            ruc.push(self.ruc[r]);
            dv.push(self.dv[r]);
            state.push(self.state[r]);
            names.push_str(&self.names[self.name_start[r] as usize..self.name_start[r + 1] as usize]);
            name_start.push(u32::try_from(names.len()).unwrap_or(u32::MAX));
            new_toks.extend_from_slice(tokens_of(r));
            new_tok_start.push(u32::try_from(new_toks.len()).unwrap_or(u32::MAX));
        }
        drop(order);
        drop(toks);
        let toks = new_toks;
        let tok_start = new_tok_start;

        // 4. Postings by counting sort: each word's list comes out in record order. A word
        //    repeated within one name is listed once.
        let vocab_len = vocab_start.len() - 1;
        let mut counts = vec![0u32; vocab_len + 1];
        let distinct = |r: usize, f: &mut dyn FnMut(u32)| {
            let t = &toks[tok_start[r] as usize..tok_start[r + 1] as usize];
            for (i, &w) in t.iter().enumerate() {
                if !t[..i].contains(&w) {
                    f(w);
                }
            }
        };
        for r in 0..n {
            distinct(r, &mut |w| counts[w as usize + 1] += 1);
        }
        for i in 1..counts.len() {
            counts[i] += counts[i - 1];
        }
        let post_start = counts;
        let mut fill = post_start.clone();
        let total = *post_start.last().unwrap_or(&0) as usize;
        let mut postings = vec![0u32; total];
        let mut post_meta = vec![0u16; total];
        let mut repeat = vec![0u64; n / 64 + 1];
        for r in 0..n {
            let t = &toks[tok_start[r] as usize..tok_start[r + 1] as usize];
            let len = (t.len() as u16).min(META_POS);
            if (1..t.len()).any(|i| t[..i].contains(&t[i])) {
                repeat[r / 64] |= 1 << (r % 64);
            }
            for (pos, &w) in t.iter().enumerate() {
                if t[..pos].contains(&w) {
                    continue;
                }
                let slot = &mut fill[w as usize];
                postings[*slot as usize] = r as u32;
                post_meta[*slot as usize] = (pos as u16).min(META_POS) | (len << META_LEN_SHIFT);
                *slot += 1;
            }
        }
        drop(fill);

        // 5. Record ids by RUC.
        let mut by_ruc: Vec<u32> = (0..n as u32).collect();
        by_ruc.sort_unstable_by_key(|&r| ruc[r as usize]);

        // 6. The one-deletion neighbourhood of every word long enough to be similar to a query
        //    word of FUZZY_MIN_LEN bytes.
        let mut deletions: Vec<(u64, u32)> = Vec::new();
        for w in 0..vocab_len {
            let word = &vocab[vocab_start[w] as usize..vocab_start[w + 1] as usize];
            if word.len() + 1 < FUZZY_MIN_LEN {
                continue;
            }
            deletions.push((deletion_hash(word, usize::MAX), w as u32));
            for skip in 0..word.len() {
                if skip > 0 && word[skip] == word[skip - 1] {
                    continue; // the same text as deleting the previous byte
                }
                deletions.push((deletion_hash(word, skip), w as u32));
            }
        }
        deletions.sort_unstable();
        deletions.dedup();
        let (del_hash, del_word): (Vec<u64>, Vec<u32>) = deletions.into_iter().unzip();
        let del_shift = 64 - (del_hash.len().max(2).next_power_of_two().trailing_zeros()).clamp(8, 24);
        let mut del_dir = Vec::with_capacity((1usize << (64 - del_shift)) + 1);
        for bucket in 0..=(1u64 << (64 - del_shift)) {
            del_dir.push(del_hash.partition_point(|&h| (h >> del_shift) < bucket) as u32);
        }

        Index {
            cache: std::sync::Mutex::default(),
            cache_hits: std::sync::atomic::AtomicU64::new(0),
            cache_misses: std::sync::atomic::AtomicU64::new(0),
            generation,
            published,
            ruc,
            dv,
            state,
            states: self.states,
            name_start,
            names,
            tok_start,
            toks,
            vocab_start,
            vocab,
            post_start,
            postings,
            post_meta,
            repeat,
            by_ruc,
            del_hash,
            del_word,
            del_dir,
            del_shift,
        }
    }
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
    /// Per posting: position and name length (see [`META_POS`]).
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

/// Recent name-search answers: new ones go to `current`; when it is full it becomes `previous`
/// (the older map is dropped) and a hit there moves back — an approximate LRU with constant work
/// per request and no per-entry bookkeeping.
struct ResultCache {
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

/// What one query word matches: the word ids it begins (`lo..hi`, its own id first when it is a
/// word of the vocabulary) and the words similar to it outside that range.
struct WordPlan {
    exact: Option<u32>,
    lo: u32,
    hi: u32,
    similar: Vec<u32>,
}

impl WordPlan {
    fn cost(&self, index: &Index) -> u64 {
        let range = u64::from(index.post_start[self.hi as usize] - index.post_start[self.lo as usize]);
        range
            + self
                .similar
                .iter()
                .map(|&w| u64::from(index.post_start[w as usize + 1] - index.post_start[w as usize]))
                .sum::<u64>()
    }
}

/// Per-tier accumulation of one text search.
struct Tiers {
    /// Collect ids only until this many per tier (0: count only).
    keep: usize,
    counts: [u64; 4],
    ids: [Vec<u32>; 4],
}

/// Buffers a search reuses (one set per thread), so that large candidate lists cost no
/// allocation.
#[derive(Default)]
struct Scratch {
    ids: Vec<u32>,
    flags: Vec<u64>,
    spare_ids: Vec<u32>,
    spare_flags: Vec<u64>,
    /// Bitsets over record ids: matched, and the three flags of [`F_RANGE`], [`F_POS`],
    /// [`F_EXACT`]. Kept all zero between uses.
    bits: [Vec<u64>; 4],
}

/// Above this many postings, a query word's records are marked in bitsets rather than merged.
const BITSET_FROM: usize = 4096;

thread_local! {
    /// [`BITSET_FROM`], lowered by tests so that small registries take the bitset paths too.
    static BITSET_THRESHOLD: std::cell::Cell<usize> = const { std::cell::Cell::new(BITSET_FROM) };
}

thread_local! {
    static SCRATCH: RefCell<Scratch> = RefCell::new(Scratch::default());
}

/// One word's postings within a query word's matches.
struct Slice {
    word: u32,
    /// In the query word's prefix range (else: similar to it).
    range: bool,
    start: usize,
    end: usize,
}

/// Which flags a search can use: range only when the word has similar words (else every match
/// is in range), position only when the prefix tier is possible, exact only when the exact tier
/// is.
#[derive(Debug, Clone, Copy)]
struct Needs {
    range: bool,
    pos: bool,
    exact: bool,
}

/// A candidate was found in one of a word's slices (above every word's flags).
const FOUND: u64 = 1 << 63;

/// Per query word `w`, three flag bits at `3·w`: the record has a word in `w`'s prefix range…
const F_RANGE: u64 = 1;
/// …it has the word that the prefix tier needs at position `w`…
const F_POS: u64 = 2;
/// …it has `w` itself and exactly as many words as the query.
const F_EXACT: u64 = 4;
/// Posting metadata: position of the word in the name (its first occurrence; capped) and the
/// name's number of words (capped). A name that repeats a word is marked in `Index::repeat`
/// and ranked by [`Index::classify`] instead.
const META_POS: u16 = 63;
const META_LEN_SHIFT: u16 = 6;

/// The first index in `from..to` whose posting is `>= r` (exponential then binary search).
fn gallop(postings: &[u32], from: usize, to: usize, r: u32) -> usize {
    if from >= to || postings[from] >= r {
        return from;
    }
    let mut step = 1;
    let mut low = from;
    let mut high = from + 1;
    while high < to && postings[high] < r {
        low = high;
        step *= 2;
        high = (high + step).min(to);
    }
    let high = high.min(to);
    low + 1 + postings[low + 1..high].partition_point(|&p| p < r)
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

    fn repeats(&self, record: u32) -> bool {
        (self.repeat[record as usize / 64] >> (record % 64)) & 1 == 1
    }

    fn keeps(&self, mask: StateMask, record: u32) -> bool {
        mask.is_none_or(|m| m & (1u64 << self.state[record as usize].min(63)) != 0)
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

    /// The records whose RUC starts with `prefix`, as a slice of `by_ruc`.
    fn ruc_range(&self, prefix: &str) -> &[u32] {
        let Some((low, high)) = prefix_bounds(prefix) else {
            return &[];
        };
        let from = self.by_ruc.partition_point(|&r| self.ruc[r as usize] < low);
        let to = self.by_ruc.partition_point(|&r| self.ruc[r as usize] <= high);
        &self.by_ruc[from..to.max(from)]
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
    fn cached(&self, words: &[String], mask: StateMask, offset: usize, limit: usize) -> (Page, u64) {
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

    fn search_ruc(
        &self,
        prefix: &str,
        dv: Option<u8>,
        mask: StateMask,
        offset: usize,
        limit: usize,
    ) -> (Page, u64) {
        let mut page = Page::default();
        if let Some(dv) = dv {
            let hit = self
                .find(prefix)
                .filter(|&r| self.dv[r as usize] == dv && self.keeps(mask, r));
            if let Some(r) = hit {
                if offset == 0 && limit > 0 {
                    page.ids.push(r);
                    page.tiers.push(None);
                }
                return (page, 1);
            }
            return (page, 0);
        }
        let range = self.ruc_range(prefix);
        if mask.is_none() {
            let ids: Vec<u32> = range.iter().skip(offset).take(limit).copied().collect();
            page.tiers = vec![None; ids.len()];
            page.ids = ids;
            return (page, range.len() as u64);
        }
        let mut total = 0u64;
        for &r in range {
            if self.keeps(mask, r) {
                if total >= offset as u64 && page.ids.len() < limit {
                    page.ids.push(r);
                    page.tiers.push(None);
                }
                total += 1;
            }
        }
        (page, total)
    }

    fn word(&self, w: u32) -> &[u8] {
        &self.vocab[self.vocab_start[w as usize] as usize..self.vocab_start[w as usize + 1] as usize]
    }

    fn plan(&self, word: &str) -> WordPlan {
        let bytes = word.as_bytes();
        let vocab_len = self.vocab_start.len() - 1;
        let lo = {
            let (mut a, mut b) = (0usize, vocab_len);
            while a < b {
                let mid = (a + b) / 2;
                if self.word(mid as u32) < bytes {
                    a = mid + 1;
                } else {
                    b = mid;
                }
            }
            a
        };
        let hi = {
            let (mut a, mut b) = (lo, vocab_len);
            while a < b {
                let mid = (a + b) / 2;
                if self.word(mid as u32).starts_with(bytes) {
                    a = mid + 1;
                } else {
                    b = mid;
                }
            }
            a
        };
        let exact = (lo < hi && self.word(lo as u32) == bytes).then_some(lo as u32);
        let mut similar = Vec::new();
        if bytes.len() >= FUZZY_MIN_LEN {
            let mut probe = |hash: u64| {
                let bucket = (hash >> self.del_shift) as usize;
                let (lo, hi) = (self.del_dir[bucket] as usize, self.del_dir[bucket + 1] as usize);
                let from = lo + self.del_hash[lo..hi].partition_point(|&h| h < hash);
                for i in from..hi {
                    if self.del_hash[i] != hash {
                        break;
                    }
                    let w = self.del_word[i];
                    if ((w as usize) < lo || (w as usize) >= hi) && similar_words(bytes, self.word(w)) {
                        similar.push(w);
                    }
                }
            };
            probe(deletion_hash(bytes, usize::MAX));
            for skip in 0..bytes.len() {
                if skip > 0 && bytes[skip] == bytes[skip - 1] {
                    continue;
                }
                probe(deletion_hash(bytes, skip));
            }
            similar.sort_unstable();
            similar.dedup();
        }
        WordPlan {
            exact,
            lo: lo as u32,
            hi: hi as u32,
            similar,
        }
    }

    /// The postings of a word: where they are and how they match.
    fn slice(&self, word: u32, range: bool) -> Slice {
        Slice {
            word,
            range,
            start: self.post_start[word as usize] as usize,
            end: self.post_start[word as usize + 1] as usize,
        }
    }

    /// The slices of a planned query word: each word of its prefix range, then its similar words.
    fn slices(&self, plan: &WordPlan) -> Vec<Slice> {
        (plan.lo..plan.hi)
            .map(|w| self.slice(w, true))
            .chain(plan.similar.iter().map(|&w| self.slice(w, false)))
            .collect()
    }

    /// Marks every record of `slices` in `bits`: matched, and the flags of query word `w`
    /// unshifted (range, position, exact) that `needs` asks for. Returns the range of bitset
    /// words touched.
    fn mark(
        &self,
        w: usize,
        k: usize,
        plan: &WordPlan,
        slices: &[Slice],
        needs: Needs,
        bits: &mut [Vec<u64>; 4],
    ) -> (usize, usize) {
        let (mut first, mut last) = (usize::MAX, 0);
        for s in slices {
            if s.start < s.end {
                first = first.min(self.postings[s.start] as usize / 64);
                last = last.max(self.postings[s.end - 1] as usize / 64);
            }
            for e in s.start..s.end {
                let r = self.postings[e] as usize;
                let (i, bit) = (r / 64, 1u64 << (r % 64));
                bits[0][i] |= bit;
                if needs.range && s.range {
                    bits[1][i] |= bit;
                }
                if needs.pos || needs.exact {
                    let f = self.entry_flags(w, k, plan, s, e) >> (3 * w);
                    if needs.pos && f & F_POS != 0 {
                        bits[2][i] |= bit;
                    }
                    if needs.exact && f & F_EXACT != 0 {
                        bits[3][i] |= bit;
                    }
                }
            }
        }
        (first, last)
    }

    /// The flags of bit `b` of bitset word `i`, shifted for query word `w`.
    fn marked_flags(bits: &[Vec<u64>; 4], needs: Needs, i: usize, b: usize, w: usize) -> u64 {
        let range = if needs.range { bits[1][i] } else { bits[0][i] };
        let f = ((range >> b) & 1) | (((bits[2][i] >> b) & 1) << 1) | (((bits[3][i] >> b) & 1) << 2);
        f << (3 * w)
    }

    /// The flags one posting entry gives query word `w` of `k` (see [`F_RANGE`]).
    fn entry_flags(&self, w: usize, k: usize, plan: &WordPlan, slice: &Slice, entry: usize) -> u64 {
        let meta = self.post_meta[entry];
        let pos = usize::from(meta & META_POS);
        let len = usize::from((meta >> META_LEN_SHIFT) & META_POS);
        let is_exact = plan.exact == Some(slice.word);
        let mut f = 0;
        if slice.range {
            f |= F_RANGE;
        }
        if pos == w && (if w + 1 < k { is_exact } else { slice.range }) {
            f |= F_POS;
        }
        if is_exact && len == k {
            f |= F_EXACT;
        }
        f << (3 * w)
    }

    fn search_words(&self, words: &[String], mask: StateMask, offset: usize, limit: usize) -> (Page, u64) {
        let k = words.len();
        let plans: Vec<WordPlan> = words.iter().map(|w| self.plan(w)).collect();
        let mut tiers = Tiers {
            keep: if limit == 0 {
                0
            } else {
                offset.saturating_add(limit)
            },
            counts: [0; 4],
            ids: Default::default(),
        };
        if k == 0 || plans.iter().any(|p| p.lo == p.hi && p.similar.is_empty()) {
            return (Page::default(), 0);
        }
        // A word repeated in the query needs the multiset comparison of the reference.
        let repeated_words = (1..k).any(|i| words[..i].contains(&words[i]));
        let mut exact_sorted: Option<Vec<u32>> = plans.iter().map(|p| p.exact).collect();
        if let Some(ids) = &mut exact_sorted {
            ids.sort_unstable();
        }
        let prefix_possible = plans[..k - 1].iter().all(|p| p.exact.is_some());
        let needs_of = |plan: &WordPlan| Needs {
            range: !plan.similar.is_empty(),
            pos: prefix_possible,
            exact: exact_sorted.is_some(),
        };
        let mut order: Vec<usize> = (0..k).collect();
        order.sort_by_key(|&w| plans[w].cost(self));
        let all_words_mask: u64 = (0..k).fold(0, |m, w| m | (1 << (3 * w)));
        let place = |r: u32, flags: u64, tiers: &mut Tiers| {
            if !self.keeps(mask, r) {
                return;
            }
            let tier = if repeated_words || self.repeats(r) {
                match self.classify(r, &plans, exact_sorted.as_deref()) {
                    Some(t) => t,
                    None => return,
                }
            } else if flags & (all_words_mask << 2) == all_words_mask << 2 {
                Tier::Exact
            } else if flags & (all_words_mask << 1) == all_words_mask << 1 {
                Tier::Prefix
            } else if flags & all_words_mask == all_words_mask {
                Tier::AllWords
            } else {
                Tier::Similar
            };
            let t = tier as usize;
            tiers.counts[t] += 1;
            if tiers.ids[t].len() < tiers.keep {
                tiers.ids[t].push(r);
            }
        };
        SCRATCH.with(|scratch| {
            let mut scratch = scratch.borrow_mut();
            let Scratch {
                ids,
                flags,
                spare_ids,
                spare_flags,
                bits,
            } = &mut *scratch;
            let words_len = self.ruc.len() / 64 + 1;
            let bitset_from = BITSET_THRESHOLD.with(std::cell::Cell::get);
            for b in bits.iter_mut() {
                if b.len() < words_len {
                    b.resize(words_len, 0);
                }
            }
            ids.clear();
            flags.clear();
            let stream = k == 1;
            let emit = |r: u32, f: u64, ids: &mut Vec<u32>, flags: &mut Vec<u64>, tiers: &mut Tiers| {
                if stream {
                    place(r, f, tiers);
                } else {
                    ids.push(r);
                    flags.push(f);
                }
            };
            // 1. The cheapest word's records, in record order, with their flags: its slices
            //    merged from the smallest up (the last merge, with the largest slice, dominates),
            //    or marked in bitsets when a short prefix spreads it over many slices.
            let driver = order[0];
            let mut slices = self.slices(&plans[driver]);
            let entries: usize = slices.iter().map(|s| s.end - s.start).sum();
            let many = if bitset_from <= 1 { 1 } else { 8 };
            if slices.len() > many && entries >= bitset_from {
                let needs = needs_of(&plans[driver]);
                let (first, last) = self.mark(driver, k, &plans[driver], &slices, needs, bits);
                for i in first..=last.min(words_len - 1) {
                    let mut word = bits[0][i];
                    while word != 0 {
                        let b = word.trailing_zeros() as usize;
                        word &= word - 1;
                        let f = Self::marked_flags(bits, needs, i, b, driver);
                        emit((i * 64 + b) as u32, f, ids, flags, &mut tiers);
                    }
                    for bitset in bits.iter_mut() {
                        bitset[i] = 0;
                    }
                }
            } else {
                slices.sort_by_key(|s| s.end - s.start);
                let (merged_ids, merged_flags) = (&mut *spare_ids, &mut *spare_flags);
                merged_ids.clear();
                merged_flags.clear();
                for s in &slices {
                    // ids/flags ∪ slice → merged, then swap.
                    let (mut a, mut e) = (0, s.start);
                    while a < ids.len() || e < s.end {
                        let take_slice = a == ids.len() || (e < s.end && self.postings[e] <= ids[a]);
                        if take_slice {
                            let r = self.postings[e];
                            let mut f = self.entry_flags(driver, k, &plans[driver], s, e);
                            if a < ids.len() && ids[a] == r {
                                f |= flags[a];
                                a += 1;
                            }
                            merged_ids.push(r);
                            merged_flags.push(f);
                            e += 1;
                        } else {
                            merged_ids.push(ids[a]);
                            merged_flags.push(flags[a]);
                            a += 1;
                        }
                    }
                    std::mem::swap(ids, merged_ids);
                    std::mem::swap(flags, merged_flags);
                    merged_ids.clear();
                    merged_flags.clear();
                }
                if stream {
                    for (&r, &f) in ids.iter().zip(flags.iter()) {
                        place(r, f, &mut tiers);
                    }
                    ids.clear();
                    flags.clear();
                }
            }
            // 2. Every other word keeps the records it matches. Each of its slices is
            //    intersected with the candidates from whichever side is smaller, galloping
            //    through the other (both are in record order, so cursors only move forward);
            //    a short prefix spread over many slices is marked in bitsets instead.
            for &w in &order[1..] {
                if ids.is_empty() {
                    break;
                }
                let slices = self.slices(&plans[w]);
                let entries: usize = slices.iter().map(|s| s.end - s.start).sum();
                let mut kept = 0;
                if slices.len() > many && entries >= bitset_from && ids.len() * slices.len() > entries {
                    let needs = needs_of(&plans[w]);
                    let (first, last) = self.mark(w, k, &plans[w], &slices, needs, bits);
                    for c in 0..ids.len() {
                        let r = ids[c] as usize;
                        let (i, b) = (r / 64, r % 64);
                        if (bits[0][i] >> b) & 1 == 1 {
                            ids[kept] = ids[c];
                            flags[kept] = flags[c] | Self::marked_flags(bits, needs, i, b, w);
                            kept += 1;
                        }
                    }
                    if first <= last {
                        let last = last.min(words_len - 1);
                        for (n, bitset) in bits.iter_mut().enumerate() {
                            let used = n == 0
                                || (n == 1 && needs.range)
                                || (n == 2 && needs.pos)
                                || (n == 3 && needs.exact);
                            if used {
                                bitset[first..=last].fill(0);
                            }
                        }
                    }
                } else {
                    let found = &mut *spare_flags;
                    found.clear();
                    found.resize(ids.len(), 0);
                    for s in &slices {
                        if s.end - s.start < ids.len() {
                            let mut c = 0;
                            for e in s.start..s.end {
                                c = gallop(ids, c, ids.len(), self.postings[e]);
                                if c == ids.len() {
                                    break;
                                }
                                if ids[c] == self.postings[e] {
                                    found[c] |= FOUND | self.entry_flags(w, k, &plans[w], s, e);
                                }
                            }
                        } else {
                            let mut e = s.start;
                            for (c, &r) in ids.iter().enumerate() {
                                e = gallop(&self.postings, e, s.end, r);
                                if e == s.end {
                                    break;
                                }
                                if self.postings[e] == r {
                                    found[c] |= FOUND | self.entry_flags(w, k, &plans[w], s, e);
                                }
                            }
                        }
                    }
                    for c in 0..ids.len() {
                        if found[c] & FOUND != 0 {
                            ids[kept] = ids[c];
                            flags[kept] = flags[c] | (found[c] & !FOUND);
                            kept += 1;
                        }
                    }
                }
                ids.truncate(kept);
                flags.truncate(kept);
            }
            if !stream {
                for (&r, &f) in ids.iter().zip(flags.iter()) {
                    place(r, f, &mut tiers);
                }
            }
        });
        let total: u64 = tiers.counts.iter().sum();
        let mut page = Page::default();
        if limit > 0 {
            let mut skip = offset;
            for (t, ids) in tiers.ids.iter().enumerate() {
                for &r in ids {
                    if skip > 0 {
                        skip -= 1;
                        continue;
                    }
                    if page.ids.len() == limit {
                        break;
                    }
                    page.ids.push(r);
                    page.tiers.push(Some(Tier::ALL[t]));
                }
            }
        }
        (page, total)
    }

    /// The tier of record `r` for the planned words, as [`kuatia_domain::lookup::rank::rank`]
    /// defines it.
    fn classify(&self, r: u32, plans: &[WordPlan], exact_sorted: Option<&[u32]>) -> Option<Tier> {
        let toks = &self.toks[self.tok_start[r as usize] as usize..self.tok_start[r as usize + 1] as usize];
        let mut similar_only = false;
        for p in plans {
            let mut found = false;
            let mut similar = false;
            for &t in toks {
                if t >= p.lo && t < p.hi {
                    found = true;
                    break;
                }
                if !similar && !p.similar.is_empty() && p.similar.binary_search(&t).is_ok() {
                    similar = true;
                }
            }
            if !found {
                if !similar {
                    return None;
                }
                similar_only = true;
            }
        }
        if let Some(wanted) = exact_sorted
            && wanted.len() == toks.len()
        {
            let mut sorted = [0u32; kuatia_domain::lookup::query::MAX_QUERY_WORDS];
            let sorted = &mut sorted[..toks.len()];
            sorted.copy_from_slice(toks);
            sorted.sort_unstable();
            if sorted == wanted {
                return Some(Tier::Exact);
            }
        }
        let k = plans.len();
        if toks.len() >= k
            && plans[..k - 1].iter().zip(toks).all(|(p, &t)| p.exact == Some(t))
            && toks[k - 1] >= plans[k - 1].lo
            && toks[k - 1] < plans[k - 1].hi
        {
            return Some(Tier::Prefix);
        }
        Some(if similar_only {
            Tier::Similar
        } else {
            Tier::AllWords
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kuatia_domain::lookup::query::parse_query;

    fn index(rows: &[(&str, &str, &str)]) -> Index {
        let mut b = IndexBuilder::new();
        for (ruc, name, state) in rows {
            b.push(ruc, 1, name, state);
        }
        b.finish(1, Some("2026-01-31".into()))
    }

    fn names(ix: &Index, q: &str, states: &[&str]) -> Vec<String> {
        let query = parse_query(q).expect("query");
        let mask = ix
            .state_mask(&states.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>())
            .expect("states");
        let (page, total) = ix.search(&query, mask, 0, 100);
        assert_eq!(total, ix.count(&query, mask), "count = results without limit");
        assert_eq!(total as usize, page.ids.len());
        page.ids.iter().map(|&r| ix.taxpayer(r).name).collect()
    }

    #[test]
    fn packed_rucs_compare_like_their_text() {
        let a = pack_ruc("800").expect("pack");
        let b = pack_ruc("8000").expect("pack");
        let c = pack_ruc("80069563").expect("pack");
        let d = pack_ruc("801").expect("pack");
        assert!(a < b && b < c && c < d);
        let (lo, hi) = prefix_bounds("800").expect("bounds");
        assert!(lo <= a && c <= hi && d > hi);
        let mut buffer = [0u8; 8];
        assert_eq!(unpack_ruc(c, &mut buffer), "80069563");
        assert_eq!(pack_ruc("123456789"), None);
    }

    #[test]
    fn exact_beats_prefix_beats_all_words_beats_similar() {
        let ix = index(&[
            ("1000001", "BENITEZ GONZALEZ, JUAN", "ACTIVO"),
            ("1000002", "GONZALEZ, JUAN", "ACTIVO"),
            ("1000003", "GONZALEZ BENITEZ, JUAN CARLOS", "ACTIVO"),
            ("1000004", "GONZALES, JUAN", "CANCELADO"),
            ("1000005", "ROJAS, ANA", "ACTIVO"),
        ]);
        assert_eq!(
            names(&ix, "juan gonzalez", &[]),
            [
                "GONZALEZ, JUAN",
                "BENITEZ GONZALEZ, JUAN",
                "GONZALEZ BENITEZ, JUAN CARLOS",
                "GONZALES, JUAN"
            ]
        );
        assert_eq!(
            names(&ix, "gonzalez", &["ACTIVO"]),
            [
                "GONZALEZ BENITEZ, JUAN CARLOS",
                "GONZALEZ, JUAN",
                "BENITEZ GONZALEZ, JUAN"
            ]
        );
    }

    #[test]
    fn ruc_prefixes_list_in_ruc_order_and_a_dv_is_exact() {
        let ix = index(&[
            ("80069563", "DE GENERACION ELECTRONICA S.A.", "ACTIVO"),
            ("8006956", "OTRA", "ACTIVO"),
            ("80069564", "TERCERA", "CANCELADO"),
            ("4567890", "ROJAS, ANA", "ACTIVO"),
        ]);
        assert_eq!(
            names(&ix, "8006956", &[]),
            ["OTRA", "DE GENERACION ELECTRONICA S.A.", "TERCERA"]
        );
        assert_eq!(names(&ix, "8006956", &["CANCELADO"]), ["TERCERA"]);
        assert_eq!(names(&ix, "80069563-1", &[]), ["DE GENERACION ELECTRONICA S.A."]);
        assert!(names(&ix, "80069563-2", &[]).is_empty());
        assert_eq!(
            ix.find("4567890").map(|r| ix.taxpayer(r).name),
            Some("ROJAS, ANA".into())
        );
        assert_eq!(ix.find("4567891"), None);
    }

    #[test]
    fn unknown_states_are_refused_with_the_known_ones() {
        let ix = index(&[("4567890", "ROJAS, ANA", "ACTIVO"), ("4567891", "X", "CANCELADO")]);
        let err = ix.state_mask(&["PERDIDO".into()]).expect_err("unknown");
        assert_eq!(err.known, ["ACTIVO", "CANCELADO"]);
        let empty = Index::empty(0);
        assert!(empty.state_mask(&["BLOQUEADO".into()]).is_ok());
        assert_eq!(
            empty.state_mask(&["X".into()]).expect_err("unknown").known.len(),
            5
        );
    }

    #[test]
    fn pages_follow_the_ranking() {
        let rows: Vec<(String, String)> = (0..50)
            .map(|i| (format!("{}", 1_000_000 + i), format!("VERA {i:02}, ANA")))
            .collect();
        let mut b = IndexBuilder::new();
        for (ruc, name) in &rows {
            b.push(ruc, 0, name, "ACTIVO");
        }
        b.push("2000000", 0, "VERA", "ACTIVO");
        let ix = b.finish(1, None);
        let query = parse_query("vera").expect("query");
        let (first, total) = ix.search(&query, None, 0, 10);
        assert_eq!(total, 51);
        assert_eq!(ix.taxpayer(first.ids[0]).name, "VERA");
        assert_eq!(first.tiers[0], Some(Tier::Exact));
        let (second, _) = ix.search(&query, None, 10, 10);
        assert_eq!(ix.taxpayer(second.ids[0]).name, "VERA 09, ANA");
        let (last, _) = ix.search(&query, None, 50, 10);
        assert_eq!(last.ids.len(), 1);
    }

    /// Words that prefix, repeat and nearly repeat each other, so that every tier occurs.
    const POOL: [&str; 16] = [
        "ANA", "ANALIA", "JUAN", "JUANA", "JAUN", "GONZALEZ", "GONZALES", "GONZA", "VERA", "VERO", "ROJAS",
        "ROSAS", "SA", "SRL", "CAÑETE", "CANETE",
    ];

    fn brute_force(rows: &[(String, String, String)], words: &[String], states: &[String]) -> Vec<String> {
        use kuatia_domain::lookup::normalize::words as words_of;
        let mut hits: Vec<(Tier, Vec<String>, u64, String)> = rows
            .iter()
            .filter(|(_, _, state)| states.is_empty() || states.contains(state))
            .filter_map(|(ruc, name, _)| {
                let name_words = words_of(name);
                kuatia_domain::lookup::rank::rank(words, &name_words)
                    .map(|t| (t, name_words, pack_ruc(ruc).unwrap_or(0), ruc.clone()))
            })
            .collect();
        hits.sort();
        hits.into_iter().map(|h| h.3).collect()
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig { cases: 300, ..Default::default() })]

        #[test]
        fn the_index_ranks_exactly_as_the_domain_rule(
            names in proptest::collection::vec(
                proptest::collection::vec(proptest::sample::select(POOL.to_vec()), 1..5), 1..40),
            query in proptest::collection::vec(
                (proptest::sample::select(POOL.to_vec()), 0usize..4), 1..4),
            filter in proptest::option::of(proptest::sample::select(vec!["ACTIVO", "CANCELADO"])),
            offset in 0usize..5,
            limit in 1usize..8,
        ) {
            let rows: Vec<(String, String, String)> = names
                .iter()
                .enumerate()
                .map(|(i, words)| {
                    let state = if i % 3 == 0 { "CANCELADO" } else { "ACTIVO" };
                    (format!("{}", 1_000_000 + i * 7919 % 1000), words.join(" "), state.to_owned())
                })
                .collect();
            let mut seen = std::collections::HashSet::new();
            let mut rows: Vec<_> = rows.into_iter().filter(|r| seen.insert(r.0.clone())).collect();
            // Both states exist whatever was drawn.
            rows.push(("9000001".into(), "XQXQ".into(), "ACTIVO".into()));
            rows.push(("9000002".into(), "XQXQ".into(), "CANCELADO".into()));
            let mut b = IndexBuilder::new();
            for (ruc, name, state) in &rows {
                b.push(ruc, 0, name, state);
            }
            let ix = b.finish(1, None);
            // Query words: whole pool words or cut short (prefixes).
            let words: Vec<String> = query
                .iter()
                .map(|(w, cut)| {
                    let w = kuatia_domain::lookup::normalize::normalize(w);
                    let keep = w.len().saturating_sub(*cut).max(1);
                    w[..keep].to_owned()
                })
                .collect();
            let states: Vec<String> = filter.iter().map(|s| (*s).to_owned()).collect();
            let expected = brute_force(&rows, &words, &states);
            let q = SearchQuery::Name { words };
            let mask = ix.state_mask(&states).expect("known states");
            // Small registries exercise the merge paths; a threshold of 1 the bitset paths.
            BITSET_THRESHOLD.with(|t| t.set(if offset % 2 == 0 { 1 } else { BITSET_FROM }));
            let (all, total) = ix.search(&q, mask, 0, 1000);
            let got: Vec<String> = all.ids.iter().map(|&r| ix.taxpayer(r).ruc).collect();
            proptest::prop_assert_eq!(&got, &expected);
            proptest::prop_assert_eq!(total as usize, expected.len());
            proptest::prop_assert_eq!(ix.count(&q, mask), total);
            let (page, _) = ix.search(&q, mask, offset, limit);
            let page: Vec<String> = page.ids.iter().map(|&r| ix.taxpayer(r).ruc).collect();
            let window: Vec<String> = expected.iter().skip(offset).take(limit).cloned().collect();
            proptest::prop_assert_eq!(page, window);
        }
    }
}
