//! kuatia's domain: the pure rules of e-invoicing in Paraguay.
//!
//! This crate must not depend on IO, an async runtime, a database driver or a web framework
//! (a test over `cargo metadata` in `tests/` enforces that for sqlx, axum, tokio and reqwest).
//! Aggregates implement [`cqrs_es::Aggregate`]: they decide from state and command and return
//! events; `apply` only folds. Time and ids come in as arguments, never from a clock.
//!
//! Start reading at [`tenancy`] for the identifiers every stream carries, [`event`] for the
//! naming rules every event follows, [`ruc`] and [`check_digit`] for taxpayer numbers, and
//! [`access`] for roles and permissions.

pub mod access;
pub mod certificate;
pub mod channel;
pub mod check_digit;
pub mod company;
pub mod defaults;
pub mod document;
pub mod event;
pub mod format;
pub mod geography;
pub mod local_time;
pub mod lookup;
pub mod print_settings;
pub mod ruc;
pub mod sifen;
pub mod support;
pub mod tenancy;
pub mod tenant;
pub mod webhook;

#[cfg(test)]
mod catalogue;
