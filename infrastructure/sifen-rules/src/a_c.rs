//! Rules of §12.4 groups A, B and C (signed fields, emission, timbrado): see the crate's documentation.

use crate::{NotChecked, Rule};

/// The rules checked here.
pub(crate) const RULES: &[Rule] = &[];

/// The rules of these groups not checked here, and why.
pub(crate) const NOT_CHECKED: &[NotChecked] = &[];
