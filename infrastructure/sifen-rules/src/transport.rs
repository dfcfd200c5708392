//! Rules of §12.4 group E10 (transport of goods, E900–E999): see the crate's documentation.

use crate::{NotChecked, Rule};

/// The rules checked here.
pub(crate) const RULES: &[Rule] = &[];

/// The rules of this group not checked here, and why.
pub(crate) const NOT_CHECKED: &[NotChecked] = &[];
