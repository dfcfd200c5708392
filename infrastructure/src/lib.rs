//! kuatia's adapters: the event store and job queue on PostgreSQL and SQLite, configuration,
//! and telemetry.
//!
//! Implements the ports of `kuatia-application`; knows nothing of HTTP. Start reading at
//! [`store`] (the two backends behind one `Store` trait), then [`config`].

pub mod artifacts;
pub mod config;
pub mod delivery;
pub mod destination;
pub mod lookup;
pub mod printing;
pub mod selfsigned;
pub mod sifen;
pub mod sifen_sim;
pub mod sifen_soap;
pub mod store;
pub mod telemetry;
pub mod vault;
pub mod webhooks;
