//! Paraguay's civil time, in which SIFEN dates are written (no offset in the XML).
//!
//! Since Law 7354 of October 2024 Paraguay keeps UTC−3 all year (it no longer switches between
//! −4 and −3), so a fixed offset is exact for every date kuatia issues documents on.

use chrono::{DateTime, FixedOffset, NaiveDate, NaiveDateTime, Utc};

/// UTC−3.
pub fn offset() -> FixedOffset {
    FixedOffset::west_opt(3 * 3600).unwrap_or_else(|| unreachable!("3 hours is a valid offset"))
}

/// Wall-clock time in Paraguay at `now`.
pub fn paraguay(now: DateTime<Utc>) -> NaiveDateTime {
    now.with_timezone(&offset()).naive_local()
}

/// The calendar day in Paraguay at `now`.
pub fn paraguay_today(now: DateTime<Utc>) -> NaiveDate {
    paraguay(now).date()
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    #[test]
    fn paraguay_is_three_hours_behind_utc_all_year() {
        let late_utc = Utc.with_ymd_and_hms(2026, 1, 2, 2, 30, 0).unwrap();
        assert_eq!(
            paraguay_today(late_utc),
            NaiveDate::from_ymd_opt(2026, 1, 1).unwrap()
        );
        let winter = Utc.with_ymd_and_hms(2026, 7, 1, 12, 0, 0).unwrap();
        assert_eq!(paraguay(winter).format("%H:%M").to_string(), "09:00");
    }
}
