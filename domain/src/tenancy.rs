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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tenant_id_round_trips_through_its_text_form() {
        let id = TenantId::from_uuid(Uuid::now_v7());
        let parsed: TenantId = id.to_string().parse().expect("a uuid parses");
        assert_eq!(parsed, id);
        assert!("not-a-uuid".parse::<TenantId>().is_err());
    }
}
