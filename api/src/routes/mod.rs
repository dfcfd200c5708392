//! Handlers, one module per area of the contract.

pub mod health;
pub mod metrics;
