//! The destination policy's rules for one tenant (docs/security.md): production or demo, under
//! the operator's allow-list and signup setting (`infrastructure/src/destination.rs`).

use kuatia_application::event_store::{SharedStore, StoreError};
use kuatia_domain::tenancy::TenantId;
use kuatia_infrastructure::destination::{Policy, Rules};

/// The rules `tenant`'s outgoing requests follow (an unknown tenant: production's).
pub async fn rules(store: &SharedStore, policy: &Policy, tenant: TenantId) -> Result<Rules, StoreError> {
    Ok(policy.rules(kuatia_projections::access::is_production(store, tenant).await?))
}
