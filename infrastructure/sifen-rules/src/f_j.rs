//! Rules of §12.4 groups F–J (totals, cargo, associated documents, signature, QR): see the crate's documentation.

use crate::{NotChecked, Rule};

/// The rules checked here.
pub(crate) const RULES: &[Rule] = &[];

/// The rules of these groups not checked here, and why.
pub(crate) const NOT_CHECKED: &[NotChecked] = &[];
