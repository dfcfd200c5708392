//! Webhooks: the webhook endpoint aggregate, the event
//! names a receiver can subscribe to, which document event raises which of them, and the retry
//! schedule of a delivery.
//!
//! An endpoint is a stream `webhook_endpoint:<tenant>:<id>`, so who created, changed, rotated or
//! deleted it is in the audit trail. Its signing secrets never enter an event: they are sealed
//! in the vault and the events carry their ids (like channel credentials). The URL rules that
//! need no IO (scheme, host present, `https` in production) are here; the DNS check against
//! private ranges is the sender's, at creation and again at every delivery.

use chrono::{DateTime, TimeDelta, Utc};
use cqrs_es::event_sink::EventSink;
use cqrs_es::{Aggregate, DomainEvent};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::document::aggregate::{DeliveryStatus, DocumentEvent};
use crate::tenancy::{Environment, TenantId};

/// The stream id of an endpoint.
pub fn stream_id(tenant: TenantId, endpoint_id: Uuid) -> String {
    format!("webhook_endpoint:{tenant}:{endpoint_id}")
}

/// Every event type a receiver can subscribe to (`*` subscribes to all).
pub const EVENT_TYPES: [&str; 11] = [
    "document.accepted",
    "document.rejected",
    "document.validation_failed",
    "document.retrying",
    "document.failed_terminal",
    "document.failed",
    "document.cancelled",
    "document.invalidated",
    "document.delivery_failed",
    "certificate.expiring",
    "webhook.test",
];

/// The webhook event a document event raises, if any.
pub fn webhook_event_type(event: &DocumentEvent) -> Option<&'static str> {
    Some(match event {
        DocumentEvent::DocumentAccepted { .. } | DocumentEvent::DocumentRendered { .. } => {
            "document.accepted"
        }
        DocumentEvent::DocumentRejected { .. } => "document.rejected",
        DocumentEvent::DocumentValidationFailed { .. } => "document.validation_failed",
        DocumentEvent::DocumentRetryScheduled { .. } => "document.retrying",
        DocumentEvent::DocumentFailedTerminally { .. } => "document.failed_terminal",
        DocumentEvent::DocumentIssuanceRefused { .. } => "document.failed",
        DocumentEvent::DocumentCancelled { .. } => "document.cancelled",
        DocumentEvent::DocumentInvalidated { .. } => "document.invalidated",
        DocumentEvent::DeliveryRecorded {
            status: DeliveryStatus::Failed,
            ..
        } => "document.delivery_failed",
        _ => return None,
    })
}

/// Delay before retry `n` (1-based) of a failed delivery: 1 min, 5 min, 30 min, 2 h, 6 h, 12 h,
/// 24 h; `None` after the seventh retry (the delivery is `failed`).
pub fn retry_delay(retry: u32) -> Option<TimeDelta> {
    Some(match retry {
        1 => TimeDelta::minutes(1),
        2 => TimeDelta::minutes(5),
        3 => TimeDelta::minutes(30),
        4 => TimeDelta::hours(2),
        5 => TimeDelta::hours(6),
        6 => TimeDelta::hours(12),
        7 => TimeDelta::hours(24),
        _ => return None,
    })
}

/// The `certificate.expiring` warning due for a certificate with `days_left` whole days of
/// validity left (rounded up): 30, 7 or 1 days before, the smallest threshold reached, so a scan
/// that missed a day still warns once per threshold and never sends a stale larger one.
pub fn expiring_threshold(days_left: i64) -> Option<u32> {
    [1, 7, 30]
        .into_iter()
        .find(|t| days_left > 0 && days_left <= i64::from(*t))
}

/// How long the previous secret keeps signing after a rotation.
pub const ROTATION_OVERLAP_HOURS: i64 = 24;

/// What an endpoint is: where, what for, which events.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EndpointSettings {
    /// Only this company's events (`None`: every company of the tenant).
    pub company_id: Option<Uuid>,
    /// Where deliveries are POSTed.
    pub url: String,
    /// Free text.
    pub description: Option<String>,
    /// Event types, or `["*"]`.
    pub events: Vec<String>,
    /// Whether deliveries are made.
    pub active: bool,
}

/// A field that breaks a rule: (field, code, message).
pub type FieldIssue = (String, String, String);

fn issue(field: &str, code: &str, message: impl Into<String>) -> FieldIssue {
    (field.to_owned(), code.to_owned(), message.into())
}

impl EndpointSettings {
    /// The rules that need no IO: an `http(s)` URL with a host (`https` only in production), at
    /// most 2048 characters; a description of at most 500; at least one known event (or `*`).
    pub fn issues(&self, environment: Environment) -> Vec<FieldIssue> {
        let mut issues = Vec::new();
        let url = self.url.trim();
        let (scheme, rest) = url.split_once("://").unwrap_or(("", ""));
        let host = rest.split(['/', '?', '#']).next().unwrap_or("");
        if url.len() > 2048 {
            issues.push(issue("url", "too_long", "a URL has at most 2048 characters"));
        } else if !matches!(scheme, "http" | "https") || host.is_empty() || url.contains(char::is_whitespace)
        {
            issues.push(issue("url", "invalid_url", "an absolute http(s) URL is required"));
        } else if scheme == "http" && environment == Environment::Production {
            issues.push(issue(
                "url",
                "https_required",
                "a production tenant's webhook URL must use https",
            ));
        }
        if self.description.as_ref().is_some_and(|d| d.chars().count() > 500) {
            issues.push(issue(
                "description",
                "too_long",
                "a description has at most 500 characters",
            ));
        }
        if self.events.is_empty() {
            issues.push(issue("events", "required", "name at least one event, or \"*\""));
        }
        for (i, event) in self.events.iter().enumerate() {
            if event != "*" && !EVENT_TYPES.contains(&event.as_str()) {
                issues.push(issue(
                    &format!("events[{i}]"),
                    "unknown_event",
                    format!("unknown event {event:?} (known: *, {})", EVENT_TYPES.join(", ")),
                ));
            }
        }
        issues
    }

    /// Whether the endpoint wants this event type.
    pub fn subscribes(&self, event_type: &str) -> bool {
        self.events.iter().any(|e| e == "*" || e == event_type)
    }
}

/// Commands.
#[derive(Debug, Clone, PartialEq)]
pub enum EndpointCommand {
    /// Creates the endpoint with its first (sealed) secret.
    Create {
        /// Id.
        endpoint_id: Uuid,
        /// What it is.
        settings: EndpointSettings,
        /// The sealed secret's id.
        secret_id: Uuid,
    },
    /// Replaces its settings (a PATCH merged by the caller).
    Update {
        /// The new settings.
        settings: EndpointSettings,
    },
    /// A new secret; the current one keeps signing until `previous_valid_until`.
    RotateSecret {
        /// The new sealed secret's id.
        secret_id: Uuid,
        /// End of the overlap.
        previous_valid_until: DateTime<Utc>,
    },
    /// Stops deliveries (a repeated deactivation is harmless).
    Deactivate,
    /// Logical deletion (a repeated deletion is harmless).
    Delete,
}

/// Events.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum EndpointEvent {
    /// Created.
    WebhookEndpointCreated {
        /// Id.
        endpoint_id: Uuid,
        /// What it is.
        settings: EndpointSettings,
        /// The sealed secret's id.
        secret_id: Uuid,
    },
    /// Settings changed.
    WebhookEndpointUpdated {
        /// The new settings.
        settings: EndpointSettings,
    },
    /// A new secret; the previous one signs too until `previous_valid_until`.
    WebhookSecretRotated {
        /// The new sealed secret's id.
        secret_id: Uuid,
        /// The previous sealed secret's id.
        previous_secret_id: Uuid,
        /// End of the overlap.
        previous_valid_until: DateTime<Utc>,
    },
    /// Deliveries stopped.
    WebhookEndpointDeactivated,
    /// Deleted (logically: the stream and its deliveries stay).
    WebhookEndpointDeleted,
}

impl DomainEvent for EndpointEvent {
    fn event_type(&self) -> String {
        match self {
            Self::WebhookEndpointCreated { .. } => "WebhookEndpointCreated",
            Self::WebhookEndpointUpdated { .. } => "WebhookEndpointUpdated",
            Self::WebhookSecretRotated { .. } => "WebhookSecretRotated",
            Self::WebhookEndpointDeactivated => "WebhookEndpointDeactivated",
            Self::WebhookEndpointDeleted => "WebhookEndpointDeleted",
        }
        .to_owned()
    }

    fn event_version(&self) -> String {
        "1".to_owned()
    }
}

/// Refusals.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EndpointError {
    /// The stream exists.
    #[error("the webhook endpoint exists already")]
    AlreadyExists,
    /// No such endpoint (or it was deleted).
    #[error("no such webhook endpoint")]
    NotFound,
}

/// The aggregate.
#[derive(Debug, Default, Clone, PartialEq, Serialize, Deserialize)]
pub struct WebhookEndpoint {
    /// The settings, once created.
    pub settings: Option<EndpointSettings>,
    /// The current secret.
    pub secret_id: Option<Uuid>,
    /// Logically deleted.
    pub deleted: bool,
}

impl Aggregate for WebhookEndpoint {
    const TYPE: &'static str = "webhook_endpoint";
    type Command = EndpointCommand;
    type Event = EndpointEvent;
    type Error = EndpointError;
    type Services = ();

    async fn handle(
        &mut self,
        command: EndpointCommand,
        _: &(),
        sink: &EventSink<Self>,
    ) -> Result<(), EndpointError> {
        if let EndpointCommand::Create {
            endpoint_id,
            settings,
            secret_id,
        } = command
        {
            if self.settings.is_some() {
                return Err(EndpointError::AlreadyExists);
            }
            let event = EndpointEvent::WebhookEndpointCreated {
                endpoint_id,
                settings,
                secret_id,
            };
            sink.write(event, self).await;
            return Ok(());
        }
        let (Some(current), Some(current_secret)) = (self.settings.clone(), self.secret_id) else {
            return Err(EndpointError::NotFound);
        };
        if self.deleted {
            return match command {
                EndpointCommand::Delete => Ok(()),
                _ => Err(EndpointError::NotFound),
            };
        }
        let event = match command {
            EndpointCommand::Create { .. } => unreachable!("handled above"),
            EndpointCommand::Update { settings } if settings == current => return Ok(()),
            EndpointCommand::Update { settings } => EndpointEvent::WebhookEndpointUpdated { settings },
            EndpointCommand::RotateSecret {
                secret_id,
                previous_valid_until,
            } => EndpointEvent::WebhookSecretRotated {
                secret_id,
                previous_secret_id: current_secret,
                previous_valid_until,
            },
            EndpointCommand::Deactivate if !current.active => return Ok(()),
            EndpointCommand::Deactivate => EndpointEvent::WebhookEndpointDeactivated,
            EndpointCommand::Delete => EndpointEvent::WebhookEndpointDeleted,
        };
        sink.write(event, self).await;
        Ok(())
    }

    fn apply(&mut self, event: EndpointEvent) {
        match event {
            EndpointEvent::WebhookEndpointCreated {
                settings, secret_id, ..
            } => {
                self.settings = Some(settings);
                self.secret_id = Some(secret_id);
            }
            EndpointEvent::WebhookEndpointUpdated { settings } => self.settings = Some(settings),
            EndpointEvent::WebhookSecretRotated { secret_id, .. } => self.secret_id = Some(secret_id),
            EndpointEvent::WebhookEndpointDeactivated => {
                if let Some(s) = self.settings.as_mut() {
                    s.active = false;
                }
            }
            EndpointEvent::WebhookEndpointDeleted => self.deleted = true,
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use cqrs_es::test::TestFramework;

    /// One event of every type, as the catalogue (docs/events.md) shows them.
    pub(crate) fn samples() -> Vec<EndpointEvent> {
        let mut changed = settings(true);
        changed.events = vec!["document.accepted".into(), "document.rejected".into()];
        changed.description = Some("ERP".into());
        vec![
            created(),
            EndpointEvent::WebhookEndpointUpdated { settings: changed },
            EndpointEvent::WebhookSecretRotated {
                secret_id: Uuid::from_u128(9),
                previous_secret_id: Uuid::from_u128(2),
                previous_valid_until: DateTime::<Utc>::from_timestamp(1_800_000_000, 0).expect("time"),
            },
            EndpointEvent::WebhookEndpointDeactivated,
            EndpointEvent::WebhookEndpointDeleted,
        ]
    }

    fn settings(active: bool) -> EndpointSettings {
        EndpointSettings {
            company_id: None,
            url: "https://erp.example.com/hooks".into(),
            description: None,
            events: vec!["*".into()],
            active,
        }
    }

    fn created() -> EndpointEvent {
        EndpointEvent::WebhookEndpointCreated {
            endpoint_id: Uuid::from_u128(1),
            settings: settings(true),
            secret_id: Uuid::from_u128(2),
        }
    }

    #[test]
    fn an_endpoint_is_created_once() {
        TestFramework::<WebhookEndpoint>::with(())
            .given(vec![created()])
            .when(EndpointCommand::Create {
                endpoint_id: Uuid::from_u128(1),
                settings: settings(true),
                secret_id: Uuid::from_u128(3),
            })
            .then_expect_error(EndpointError::AlreadyExists);
    }

    #[test]
    fn rotating_names_the_previous_secret() {
        let until = DateTime::<Utc>::from_timestamp(1_800_000_000, 0).expect("time");
        TestFramework::<WebhookEndpoint>::with(())
            .given(vec![created()])
            .when(EndpointCommand::RotateSecret {
                secret_id: Uuid::from_u128(9),
                previous_valid_until: until,
            })
            .then_expect_events(vec![EndpointEvent::WebhookSecretRotated {
                secret_id: Uuid::from_u128(9),
                previous_secret_id: Uuid::from_u128(2),
                previous_valid_until: until,
            }]);
    }

    #[test]
    fn deactivating_or_deleting_twice_changes_nothing() {
        TestFramework::<WebhookEndpoint>::with(())
            .given(vec![created(), EndpointEvent::WebhookEndpointDeactivated])
            .when(EndpointCommand::Deactivate)
            .then_expect_events(vec![]);
        TestFramework::<WebhookEndpoint>::with(())
            .given(vec![created(), EndpointEvent::WebhookEndpointDeleted])
            .when(EndpointCommand::Delete)
            .then_expect_events(vec![]);
        TestFramework::<WebhookEndpoint>::with(())
            .given(vec![created(), EndpointEvent::WebhookEndpointDeleted])
            .when(EndpointCommand::Update {
                settings: settings(false),
            })
            .then_expect_error(EndpointError::NotFound);
    }

    #[test]
    fn production_tenants_need_https_and_known_events() {
        let mut s = settings(true);
        s.url = "http://erp.example.com/hooks".into();
        s.events = vec!["document.accepted".into(), "document.exploded".into()];
        let codes: Vec<String> = s
            .issues(Environment::Production)
            .into_iter()
            .map(|i| i.1)
            .collect();
        assert_eq!(codes, vec!["https_required", "unknown_event"]);
        assert!(
            s.issues(Environment::Demo)
                .iter()
                .all(|i| i.1 != "https_required")
        );
        s.url = "ftp://x".into();
        assert_eq!(s.issues(Environment::Demo)[0].1, "invalid_url");
    }

    #[test]
    fn certificates_are_warned_at_thirty_seven_and_one_days() {
        let got: Vec<Option<u32>> = [45, 30, 29, 8, 7, 2, 1, 0, -3]
            .into_iter()
            .map(expiring_threshold)
            .collect();
        assert_eq!(
            got,
            vec![
                None,
                Some(30),
                Some(30),
                Some(30),
                Some(7),
                Some(7),
                Some(1),
                None,
                None
            ]
        );
    }

    #[test]
    fn the_retry_schedule_is_seven_retries_then_failed() {
        let minutes: Vec<i64> = (1..=7).filter_map(retry_delay).map(|d| d.num_minutes()).collect();
        assert_eq!(minutes, vec![1, 5, 30, 120, 360, 720, 1440]);
        assert_eq!(retry_delay(8), None);
    }
}
