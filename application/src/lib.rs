//! kuatia's application layer: use cases, process managers, and the ports adapters implement.
//!
//! Depends on `domain` only (plus runtime utilities); never on a database driver or a web
//! framework. The ports are traits: [`event_store::Store`] (append, load, read all, subscription
//! batches), [`jobs::JobQueue`] (the outbox), [`projection::Projection`] (a read model written
//! through [`projection::SqlTx`]). Start reading at [`event_store`], then [`aggregate`] for how a
//! command becomes committed events, then [`jobs`] and [`worker`] for side effects.

pub mod access;
pub mod aggregate;
pub mod aggregate_cache;
pub mod artifacts;
pub mod audit;
pub mod combine;
pub mod configuration;
pub mod documents;
pub mod download_urls;
pub mod event_store;
pub mod external_ids;
pub mod hash;
pub mod idempotency;
pub mod identity;
pub mod intake;
pub mod jobs;
pub mod mac;
pub mod printables;
pub mod process;
pub mod projection;
pub mod rate_limit;
pub mod records;
pub mod sandbox;
pub mod statements;
pub mod support;
pub mod trace_context;
pub mod upcast;
pub mod vault;
pub mod webhooks;
pub mod worker;
