//! Plans, monthly allowances and the month they are counted in.
//!
//! Requests with an `X-API-Key` count against the key's plan; requests without one count against
//! an allowance per client IP. Months are calendar months in Paraguay (UTC−3 all year, see
//! [`crate::local_time`]), so an allowance renews at 00:00 of the 1st in Asunción.

use chrono::{DateTime, Datelike, NaiveDate, TimeZone, Utc};

/// A lookup plan.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Plan {
    /// Development and testing.
    Dev,
    /// Small integrations.
    Starter,
    /// Regular production integrations.
    Business,
    /// Large, massive or custom use: the limit is set per key.
    Enterprise,
}

impl Plan {
    /// Every plan.
    pub const ALL: [Plan; 4] = [Plan::Dev, Plan::Starter, Plan::Business, Plan::Enterprise];

    /// The wire and command-line name.
    pub fn as_str(&self) -> &'static str {
        match self {
            Self::Dev => "dev",
            Self::Starter => "starter",
            Self::Business => "business",
            Self::Enterprise => "enterprise",
        }
    }

    /// Parses a plan name (case-insensitive).
    pub fn parse(text: &str) -> Option<Self> {
        Self::ALL
            .into_iter()
            .find(|p| p.as_str().eq_ignore_ascii_case(text.trim()))
    }

    /// The default monthly limit; `None` for a plan whose limit is agreed per key.
    pub fn default_monthly_limit(&self) -> Option<u64> {
        match self {
            Self::Dev => Some(1_000),
            Self::Starter => Some(20_000),
            Self::Business => Some(250_000),
            Self::Enterprise => None,
        }
    }
}

impl std::fmt::Display for Plan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Default monthly allowance of requests without a key, per client IP.
pub const ANONYMOUS_MONTHLY_LIMIT: u64 = 300;

/// The counting month at `now`: its name (`2026-03`) and when the next one starts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Period {
    /// `YYYY-MM` in Paraguay.
    pub name: String,
    /// The first instant of the next month in Paraguay.
    pub resets_at: DateTime<Utc>,
}

/// The counting month at `now`.
pub fn period_at(now: DateTime<Utc>) -> Period {
    let today = crate::local_time::paraguay_today(now);
    let (year, month) = if today.month() == 12 {
        (today.year() + 1, 1)
    } else {
        (today.year(), today.month() + 1)
    };
    let first = NaiveDate::from_ymd_opt(year, month, 1)
        .and_then(|d| d.and_hms_opt(0, 0, 0))
        .unwrap_or_else(|| unreachable!("the 1st of a month exists"));
    let resets_at = crate::local_time::offset()
        .from_local_datetime(&first)
        .single()
        .map_or(now, |t| t.with_timezone(&Utc));
    Period {
        name: format!("{:04}-{:02}", today.year(), today.month()),
        resets_at,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plans_have_the_decided_limits() {
        assert_eq!(Plan::parse("Starter"), Some(Plan::Starter));
        assert_eq!(Plan::parse("gold"), None);
        let limits: Vec<_> = Plan::ALL.iter().map(Plan::default_monthly_limit).collect();
        assert_eq!(limits, [Some(1_000), Some(20_000), Some(250_000), None]);
    }

    #[test]
    fn months_are_counted_in_paraguay_time() {
        let late_utc = Utc.with_ymd_and_hms(2026, 4, 1, 2, 0, 0).unwrap();
        let p = period_at(late_utc);
        assert_eq!(p.name, "2026-03", "still March 31st in Asunción");
        assert_eq!(p.resets_at, Utc.with_ymd_and_hms(2026, 4, 1, 3, 0, 0).unwrap());
        let december = period_at(Utc.with_ymd_and_hms(2026, 12, 15, 12, 0, 0).unwrap());
        assert_eq!(december.name, "2026-12");
        assert_eq!(
            december.resets_at,
            Utc.with_ymd_and_hms(2027, 1, 1, 3, 0, 0).unwrap()
        );
    }
}
