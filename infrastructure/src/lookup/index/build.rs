//! Building an [`Index`]: rows are collected, then sorted into the record order, the vocabulary,
//! the postings, the RUC order and the one-deletion neighbourhood of every word.

use std::collections::HashMap;

use kuatia_domain::lookup::normalize::for_each_word;
use kuatia_domain::lookup::rank::FUZZY_MIN_LEN;

use super::Index;
use super::encoding::{FxBuild, META_LEN_SHIFT, META_POS, deletion_hash, pack_ruc};

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
