//! How well a name matches a text query: exact > prefix > all words > similar.
//!
//! Both sides are lists of words in search form ([`crate::lookup::normalize`]). A query word
//! *matches* a name word when it equals it, is a prefix of it, or (only for query words of
//! [`FUZZY_MIN_LEN`] bytes or more) is [`similar_words`] to it. A name matches a query when every
//! query word matches some word of the name; then its tier is:
//!
//! 1. [`Tier::Exact`]: the same words, in any order (`juan gonzalez` = `GONZALEZ, JUAN`);
//! 2. [`Tier::Prefix`]: the name starts with the query, in order, the last query word possibly
//!    cut short (`gonzalez ju` → `GONZALEZ, JUAN`);
//! 3. [`Tier::AllWords`]: every query word equals or begins some name word, in any order
//!    (`juan gonz` → `GONZALEZ BENITEZ, JUAN CARLOS`);
//! 4. [`Tier::Similar`]: every query word matches, but at least one only by similarity
//!    (`gonzales juan` → `GONZALEZ, JUAN`).
//!
//! [`rank`] is the reference definition; the search index in `kuatia-infrastructure` computes
//! the same tiers faster and is tested against this function. Within a tier, results are in
//! alphabetical order of the name's search form, then by RUC.

/// Match quality, best first (the derived order sorts best first).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Tier {
    /// The same words in any order.
    Exact,
    /// The name begins with the query.
    Prefix,
    /// Every query word equals or begins a name word.
    AllWords,
    /// Every query word matches, some only by similarity.
    Similar,
}

impl Tier {
    /// All tiers, best first.
    pub const ALL: [Tier; 4] = [Tier::Exact, Tier::Prefix, Tier::AllWords, Tier::Similar];
}

/// Shortest query word (in bytes of its search form) that may match by similarity; shorter words
/// have too many one-edit neighbours to be useful.
pub const FUZZY_MIN_LEN: usize = 4;

/// Whether `a` and `b` become the same text after deleting at most one byte from each: one
/// substitution, insertion, deletion or swap of neighbours apart (`GONZALES`/`GONZALEZ`,
/// `BENITES`/`BENITEZ`, `GIMENEZ`/`JIMENEZ`, `MARTNIEZ`/`MARTINEZ`). This is the relation a
/// one-deletion neighbourhood index finds exactly, which is why it is defined this way rather
/// than as an edit distance (it also admits a few distance-2 pairs such as a shifted word,
/// `ABCD`/`BCDE`).
pub fn similar_words(a: &[u8], b: &[u8]) -> bool {
    if a == b {
        return true;
    }
    if a.len().abs_diff(b.len()) > 1 {
        return false;
    }
    let deletions = |w: &[u8]| -> Vec<Vec<u8>> {
        (0..w.len())
            .map(|i| {
                let mut d = w.to_vec();
                d.remove(i);
                d
            })
            .collect()
    };
    let (da, db) = (deletions(a), deletions(b));
    da.iter().any(|d| d.as_slice() == b)
        || db.iter().any(|d| d.as_slice() == a)
        || da.iter().any(|x| db.contains(x))
}

/// How a query word relates to one name word, best first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum WordMatch {
    Prefix,
    Similar,
}

fn word_match(query_word: &str, name_word: &str) -> Option<WordMatch> {
    if name_word.starts_with(query_word) {
        Some(WordMatch::Prefix)
    } else if query_word.len() >= FUZZY_MIN_LEN && similar_words(query_word.as_bytes(), name_word.as_bytes())
    {
        Some(WordMatch::Similar)
    } else {
        None
    }
}

/// The tier of `name` for `query` (both in search form), or `None` when it does not match.
/// An empty query matches nothing.
pub fn rank<Q: AsRef<str>, N: AsRef<str>>(query: &[Q], name: &[N]) -> Option<Tier> {
    if query.is_empty() {
        return None;
    }
    let mut similar_only = false;
    for q in query {
        let best = name
            .iter()
            .filter_map(|n| word_match(q.as_ref(), n.as_ref()))
            .min()?;
        similar_only |= best == WordMatch::Similar;
    }
    let mut sorted_query: Vec<&str> = query.iter().map(AsRef::as_ref).collect();
    let mut sorted_name: Vec<&str> = name.iter().map(AsRef::as_ref).collect();
    sorted_query.sort_unstable();
    sorted_name.sort_unstable();
    if sorted_query == sorted_name {
        return Some(Tier::Exact);
    }
    let k = query.len();
    if name.len() >= k
        && query[..k - 1]
            .iter()
            .zip(name)
            .all(|(q, n)| q.as_ref() == n.as_ref())
        && name[k - 1].as_ref().starts_with(query[k - 1].as_ref())
    {
        return Some(Tier::Prefix);
    }
    Some(if similar_only {
        Tier::Similar
    } else {
        Tier::AllWords
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lookup::normalize::words;

    fn tier(query: &str, name: &str) -> Option<Tier> {
        rank(&words(query), &words(name))
    }

    #[test]
    fn an_exact_name_beats_a_prefix_which_beats_all_words_which_beats_similar() {
        assert_eq!(tier("gonzalez juan", "GONZALEZ, JUAN"), Some(Tier::Exact));
        assert_eq!(tier("gonzalez ju", "GONZALEZ, JUAN"), Some(Tier::Prefix));
        assert_eq!(tier("juan gonz", "GONZALEZ BENITEZ, JUAN"), Some(Tier::AllWords));
        assert_eq!(tier("gonzales juan", "GONZALEZ, JUAN"), Some(Tier::Similar));
        assert!(
            Tier::Exact < Tier::Prefix && Tier::Prefix < Tier::AllWords && Tier::AllWords < Tier::Similar
        );
    }

    #[test]
    fn word_order_case_and_accents_do_not_matter() {
        assert_eq!(tier("José María Núñez", "NUNEZ, JOSE MARIA"), Some(Tier::Exact));
        assert_eq!(tier("nunez jose maria", "NÚÑEZ, JOSÉ MARÍA"), Some(Tier::Exact));
    }

    #[test]
    fn every_query_word_must_match_something() {
        assert_eq!(tier("gonzalez pedro", "GONZALEZ, JUAN"), None);
        assert_eq!(tier("xyz", "GONZALEZ, JUAN"), None);
        assert_eq!(tier("", "GONZALEZ, JUAN"), None);
    }

    #[test]
    fn short_words_never_match_by_similarity() {
        assert_eq!(tier("jua", "GONZALEZ, JUAN"), Some(Tier::AllWords));
        assert_eq!(tier("jaun", "GONZALEZ, JUAN"), Some(Tier::Similar));
        assert_eq!(
            tier("jan", "GONZALEZ, JUAN"),
            None,
            "3 bytes: too short for similarity"
        );
    }

    #[test]
    fn similar_words_are_one_deletion_from_each_other() {
        for (a, b) in [
            ("GONZALES", "GONZALEZ"),
            ("BENITES", "BENITEZ"),
            ("MARTNIEZ", "MARTINEZ"),
            ("GIMENEZ", "JIMENEZ"),
            ("LOPES", "LOPEZ"),
            ("LOPE", "LOPEZ"),
            ("ABCD", "BCDE"),
        ] {
            assert!(similar_words(a.as_bytes(), b.as_bytes()), "{a} ~ {b}");
            assert!(similar_words(b.as_bytes(), a.as_bytes()), "{b} ~ {a}");
        }
        for (a, b) in [
            ("GONZALEZ", "GOMEZ"),
            ("ROJAS", "ROSAS ROJAS"),
            ("LOPEZ", "PEREZ"),
        ] {
            assert!(!similar_words(a.as_bytes(), b.as_bytes()), "{a} !~ {b}");
        }
    }

    #[test]
    fn a_single_word_ranks_by_where_it_sits() {
        assert_eq!(tier("vera", "VERA"), Some(Tier::Exact));
        assert_eq!(tier("vera", "VERA ROJAS, ANA"), Some(Tier::Prefix));
        assert_eq!(tier("vera", "ROJAS VERA, ANA"), Some(Tier::AllWords));
        assert_eq!(tier("vera", "ROJAS VERO, ANA"), Some(Tier::Similar));
        assert_eq!(tier("vera", "ROJAS VERON, ANA"), None, "two edits away");
    }
}
