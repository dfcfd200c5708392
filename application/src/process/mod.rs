//! The process managers: job handlers that take a document from one state to the next by
//! talking to the world (SIFEN, a printer, a mail server, an integrator's endpoint) and
//! recording what happened as the document's events. Each works through the ports of
//! [`ports`] and those the application already has (the event store, the job queue, the
//! artifact store, the vault); `kuatia_api::compose` builds their adapters.
//!
//! - [`sifen`]: numbering, building and signing, sending (alone or in lots), reconciling before
//!   any resend, polling lots, and the cancelación / inutilización events.
//! - [`build`]: one DE built and signed (the SIFEN process and the sandbox both use it).
//! - [`delivery`]: an accepted document to its customer and issuer (email, WhatsApp, Telegram),
//!   and invitations by email.
//! - [`webhook_delivery`]: webhook deliveries to the integrators' endpoints, signed, retried and
//!   in order, and the certificate expiry scan that raises `certificate.expiring`. (The webhook
//!   use cases the API calls, endpoints and the deliveries table, are `crate::webhooks`.)

pub mod autoimpresor;
pub mod build;
mod common;
pub mod delivery;
pub mod ports;
pub mod sifen;
pub mod webhook_delivery;
