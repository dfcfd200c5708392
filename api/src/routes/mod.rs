//! Handlers, one module per area of the contract.

pub mod api_keys;
pub mod health;
pub mod identity;
pub mod metrics;
pub mod tenants;
