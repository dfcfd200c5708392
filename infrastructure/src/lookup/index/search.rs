//! How a search runs: RUC prefixes over the RUC order; names by planning each query word (its
//! prefix range and similar words), intersecting their postings (merged, galloped or marked in
//! bitsets) and sorting the matches into tiers.

use std::cell::RefCell;

use kuatia_domain::lookup::rank::{FUZZY_MIN_LEN, Tier, similar_words};

use super::encoding::{META_LEN_SHIFT, META_POS, deletion_hash, prefix_bounds};
use super::{Index, Page, StateMask};

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
pub(super) const BITSET_FROM: usize = 4096;

thread_local! {
    /// [`BITSET_FROM`], lowered by tests so that small registries take the bitset paths too.
    pub(super) static BITSET_THRESHOLD: std::cell::Cell<usize> = const { std::cell::Cell::new(BITSET_FROM) };
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
    fn repeats(&self, record: u32) -> bool {
        (self.repeat[record as usize / 64] >> (record % 64)) & 1 == 1
    }

    fn keeps(&self, mask: StateMask, record: u32) -> bool {
        mask.is_none_or(|m| m & (1u64 << self.state[record as usize].min(63)) != 0)
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

    pub(super) fn search_ruc(
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

    pub(super) fn search_words(
        &self,
        words: &[String],
        mask: StateMask,
        offset: usize,
        limit: usize,
    ) -> (Page, u64) {
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
