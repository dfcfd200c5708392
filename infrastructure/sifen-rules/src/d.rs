//! Rules of §12.4 group D (general data, D1 operation, D2 issuer, D3 receiver): see the crate's documentation.

use crate::{NotChecked, Rule};

/// The rules checked here.
pub(crate) const RULES: &[Rule] = &[];

/// The rules of these groups not checked here, and why.
pub(crate) const NOT_CHECKED: &[NotChecked] = &[];
