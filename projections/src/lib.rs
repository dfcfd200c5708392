//! kuatia's read side: read models and the subscription runtime that feeds them.
//!
//! Depends on `domain` and `application` (the ports) only: projections write portable SQL
//! through `application::projection::SqlTx`, so each is written once for both backends. Start at
//! [`registry`] (every projection of the service), then [`runtime`] (catch-up loops, rebuild).

pub mod access;
pub mod artifacts;
pub mod configuration;
pub mod documents;
pub mod event_type_counts;
pub mod number_series;
pub mod reads;
pub mod registry;
pub mod runtime;
pub mod sifen_answers;
pub mod stream_index;
pub mod webhook_fanout;
pub mod webhooks;
