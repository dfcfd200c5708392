//! Tenant identity: every stream, job and read-model row belongs to exactly one tenant.

use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// The tenant a stream, job or read-model row belongs to.
///
/// Streams that belong to no tenant (operator-level records such as user accounts) use
/// [`TenantId::SYSTEM`], the nil UUID, so that every row still carries a tenant and tenants can be
/// sharded without a special case.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct TenantId(Uuid);

impl TenantId {
    /// The tenant of operator-level streams.
    pub const SYSTEM: TenantId = TenantId(Uuid::nil());

    /// Wraps a UUID.
    pub const fn from_uuid(id: Uuid) -> Self {
        Self(id)
    }

    /// The UUID inside.
    pub const fn as_uuid(&self) -> Uuid {
        self.0
    }
}

impl std::fmt::Display for TenantId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl std::str::FromStr for TenantId {
    type Err = uuid::Error;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Uuid::parse_str(s).map(Self)
    }
}

/// A tenant's unique, URL-safe name: `^[a-z0-9][a-z0-9-]{1,62}$`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct TenantSlug(String);

/// Why a text is not a slug.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("a slug is 2 to 63 characters of a-z, 0-9 and '-', starting with a letter or digit")]
pub struct SlugError;

impl TenantSlug {
    /// Parses a slug.
    pub fn parse(text: &str) -> Result<Self, SlugError> {
        let bytes = text.as_bytes();
        let allowed = |b: &u8| b.is_ascii_lowercase() || b.is_ascii_digit();
        let ok = (2..=63).contains(&bytes.len())
            && bytes.first().is_some_and(allowed)
            && bytes.iter().all(|b| allowed(b) || *b == b'-');
        if ok {
            Ok(Self(text.to_owned()))
        } else {
            Err(SlugError)
        }
    }

    /// The slug.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl TryFrom<String> for TenantSlug {
    type Error = SlugError;

    fn try_from(value: String) -> Result<Self, Self::Error> {
        Self::parse(&value)
    }
}

impl From<TenantSlug> for String {
    fn from(slug: TenantSlug) -> Self {
        slug.0
    }
}

/// Whether a tenant issues for real. A `demo` tenant's API keys start with `kt_test_`, and it may
/// use `http://` webhooks; a `production` tenant's keys start with `kt_live_`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Environment {
    /// Trying things out (the default).
    #[default]
    Demo,
    /// Real fiscal documents.
    Production,
}

impl Environment {
    /// The prefix of this environment's API keys.
    pub fn api_key_prefix(self) -> &'static str {
        match self {
            Self::Demo => "kt_test_",
            Self::Production => "kt_live_",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slugs_follow_the_decided_pattern() {
        for good in ["ab", "acme", "acme-sa-2026", "0day", &"a".repeat(63)] {
            assert!(TenantSlug::parse(good).is_ok(), "{good:?}");
        }
        for bad in [
            "",
            "a",
            "-acme",
            "Acme",
            "acme_sa",
            "acme sa",
            "ñandu",
            &"a".repeat(64),
        ] {
            assert_eq!(TenantSlug::parse(bad), Err(SlugError), "{bad:?}");
        }
        assert!(serde_json::from_str::<TenantSlug>("\"UPPER\"").is_err());
    }

    #[test]
    fn environments_name_their_key_prefixes() {
        assert_eq!(Environment::default(), Environment::Demo);
        assert_eq!(Environment::Demo.api_key_prefix(), "kt_test_");
        assert_eq!(Environment::Production.api_key_prefix(), "kt_live_");
    }

    #[test]
    fn a_tenant_id_round_trips_through_its_text_form() {
        let id = TenantId::from_uuid(Uuid::now_v7());
        let parsed: TenantId = id.to_string().parse().expect("a uuid parses");
        assert_eq!(parsed, id);
        assert!("not-a-uuid".parse::<TenantId>().is_err());
    }
}
