//! Rules of §12.4 groups E1–E7 (FE, AFE, notes, remisión, conditions of the operation): see the crate's documentation.

use crate::{NotChecked, Rule};

/// The rules checked here.
pub(crate) const RULES: &[Rule] = &[];

/// The rules of these groups not checked here, and why.
pub(crate) const NOT_CHECKED: &[NotChecked] = &[];
