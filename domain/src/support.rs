//! Support actions an operator takes on a running service (`kuatia jobs retry|discard`), recorded
//! as events so that the log says who changed the queue, when and why.
//!
//! They go to the tenant's `support` stream (`support:<tenant>`, the tenant of the job), with the
//! operator as the actor (`operator:<name>`: `--actor`, else the OS user). What concerns the
//! service rather than a tenant (who is an operator, a projection rebuilt, the store verified) goes
//! to the system's stream, `support:<TenantId::SYSTEM>`. The stream has one
//! writer at a time in practice and no invariants to guard, so it is appended to without a
//! version check and has no aggregate; the catalogue (docs/events.md) lists its events like any
//! other's.

use chrono::{DateTime, Utc};
use cqrs_es::DomainEvent;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::tenancy::TenantId;

/// The stream type of support events.
pub const STREAM_TYPE: &str = "support";

/// The support stream of a tenant.
pub fn stream_id(tenant: TenantId) -> String {
    format!("support:{tenant}")
}

/// Events of the support stream.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum SupportEvent {
    /// An operator made a dead or waiting job due now, with one attempt more than it had used.
    JobRetried {
        /// The job.
        job_id: Uuid,
        /// Its kind (`sifen.submit`).
        kind: String,
        /// Its idempotency key (names the document or delivery it works on).
        idempotency_key: String,
        /// Who (`--actor`, else the OS user).
        operator: String,
        /// Why, when the operator said.
        reason: Option<String>,
        /// When.
        at: DateTime<Utc>,
    },
    /// An operator made a waiting job dead without running it again.
    JobDiscarded {
        /// The job.
        job_id: Uuid,
        /// Its kind.
        kind: String,
        /// Its idempotency key.
        idempotency_key: String,
        /// Who (`--actor`, else the OS user).
        operator: String,
        /// Why (required; also the job's `last_error`).
        reason: String,
        /// When.
        at: DateTime<Utc>,
    },
    /// A person became an operator of the whole service (`kuatia operators add`): the
    /// operators' room of the console opens to them. On the system's support stream.
    OperatorAdded {
        /// The person's email (a registered user's, lower case).
        email: String,
        /// Who (`--actor`, else the OS user).
        operator: String,
        /// When.
        at: DateTime<Utc>,
    },
    /// A person stopped being an operator (`kuatia operators remove`).
    OperatorRemoved {
        /// The person's email.
        email: String,
        /// Who.
        operator: String,
        /// When.
        at: DateTime<Utc>,
    },
    /// An operator rebuilt a projection from the operators' room (on the system's stream).
    ProjectionRebuilt {
        /// The projection.
        name: String,
        /// How many events were replayed.
        events: u64,
        /// Who (`operator:<email>`'s email).
        operator: String,
        /// When it finished.
        at: DateTime<Utc>,
    },
    /// An operator verified the event store's hash chains from the operators' room.
    EventsVerified {
        /// How many events were checked.
        events: u64,
        /// How many streams broke their chain (0: all intact).
        broken: u64,
        /// Who.
        operator: String,
        /// When it finished.
        at: DateTime<Utc>,
    },
}

impl DomainEvent for SupportEvent {
    fn event_type(&self) -> String {
        match self {
            Self::JobRetried { .. } => "JobRetried",
            Self::JobDiscarded { .. } => "JobDiscarded",
            Self::OperatorAdded { .. } => "OperatorAdded",
            Self::OperatorRemoved { .. } => "OperatorRemoved",
            Self::ProjectionRebuilt { .. } => "ProjectionRebuilt",
            Self::EventsVerified { .. } => "EventsVerified",
        }
        .to_owned()
    }

    fn event_version(&self) -> String {
        "1".to_owned()
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// One event of every type, as the catalogue (docs/events.md) shows them.
    pub(crate) fn samples() -> Vec<SupportEvent> {
        let at = DateTime::<Utc>::from_timestamp(1_800_000_000, 0).expect("time");
        vec![
            SupportEvent::JobRetried {
                job_id: Uuid::from_u128(70),
                kind: "sifen.submit".into(),
                idempotency_key: format!("sifen.submit:{}", Uuid::from_u128(0xd0c)),
                operator: "ana".into(),
                reason: Some("SIFEN is answering again".into()),
                at,
            },
            SupportEvent::JobDiscarded {
                job_id: Uuid::from_u128(71),
                kind: "webhook.deliver".into(),
                idempotency_key: format!("webhook.deliver:{}", Uuid::from_u128(72)),
                operator: "ana".into(),
                reason: "the receiver was shut down".into(),
                at,
            },
            SupportEvent::OperatorAdded {
                email: "soporte@kuatia.com.py".into(),
                operator: "ana".into(),
                at,
            },
            SupportEvent::OperatorRemoved {
                email: "soporte@kuatia.com.py".into(),
                operator: "ana".into(),
                at,
            },
            SupportEvent::ProjectionRebuilt {
                name: "documents".into(),
                events: 1200,
                operator: "soporte@kuatia.com.py".into(),
                at,
            },
            SupportEvent::EventsVerified {
                events: 1200,
                broken: 0,
                operator: "soporte@kuatia.com.py".into(),
                at,
            },
        ]
    }
}
