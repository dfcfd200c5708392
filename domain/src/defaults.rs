//! How an omitted reference is resolved: a branch, issuance point or channel omitted from
//! a document is resolved only when exactly one candidate exists, or exactly one is marked
//! default; otherwise the document is refused naming the ambiguity. This is the one place that
//! rule lives.

/// Why no candidate could be chosen.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unresolved<T> {
    /// The explicit choice is not among the candidates (another company's branch, say).
    Unknown(T),
    /// There is no candidate at all.
    Missing,
    /// Several candidates and not exactly one default: these are they.
    Ambiguous(Vec<T>),
}

/// Picks the explicit choice if valid, else the only candidate, else the only default.
pub fn resolve<T: Copy + Eq>(explicit: Option<T>, candidates: &[(T, bool)]) -> Result<T, Unresolved<T>> {
    if let Some(choice) = explicit {
        return if candidates.iter().any(|(c, _)| *c == choice) {
            Ok(choice)
        } else {
            Err(Unresolved::Unknown(choice))
        };
    }
    match candidates {
        [] => Err(Unresolved::Missing),
        [(only, _)] => Ok(*only),
        _ => {
            let defaults: Vec<T> = candidates.iter().filter(|(_, d)| *d).map(|(c, _)| *c).collect();
            match defaults.as_slice() {
                [one] => Ok(*one),
                [] => Err(Unresolved::Ambiguous(
                    candidates.iter().map(|(c, _)| *c).collect(),
                )),
                many => Err(Unresolved::Ambiguous(many.to_vec())),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_explicit_choice_must_be_a_candidate() {
        assert_eq!(resolve(Some(2), &[(1, true), (2, false)]), Ok(2));
        assert_eq!(resolve(Some(9), &[(1, true)]), Err(Unresolved::Unknown(9)));
    }

    #[test]
    fn a_single_candidate_is_chosen_default_or_not() {
        assert_eq!(resolve(None, &[(7, false)]), Ok(7));
    }

    #[test]
    fn among_several_exactly_one_default_decides() {
        assert_eq!(resolve(None, &[(1, false), (2, true), (3, false)]), Ok(2));
    }

    #[test]
    fn no_candidate_or_no_single_default_is_refused_naming_the_choices() {
        assert_eq!(resolve::<u8>(None, &[]), Err(Unresolved::Missing));
        assert_eq!(
            resolve(None, &[(1, false), (2, false)]),
            Err(Unresolved::Ambiguous(vec![1, 2]))
        );
        assert_eq!(
            resolve(None, &[(1, true), (2, true), (3, false)]),
            Err(Unresolved::Ambiguous(vec![1, 2]))
        );
    }
}
