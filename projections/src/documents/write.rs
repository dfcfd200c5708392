//! What one document event writes besides the document's status and version: the row intake
//! creates, issues, CDC and number, artifacts.

use chrono::Utc;
use kuatia_application::event_store::{RecordedEvent, StoreError};
use kuatia_application::projection::{SqlTx, SqlValue};
use kuatia_domain::document::aggregate::{DeliveryStatus, DocumentEvent};
use kuatia_domain::document::issues::Issue;
use serde_json::Value;
use uuid::Uuid;

use super::{associated_cdc, buyer_ruc, buyer_search, json};

/// What an event writes besides the document's status and version.
pub(super) async fn apply_own(
    tx: &mut dyn SqlTx,
    event: &RecordedEvent,
    decoded: &DocumentEvent,
    document_id: Uuid,
) -> Result<(), StoreError> {
    let version = event.stream_version as i64;
    let tenant = SqlValue::Uuid(event.tenant_id.as_uuid());
    {
        match decoded {
            DocumentEvent::DocumentReceived {
                routing, document, ..
            } => {
                let buyer_ruc = buyer_ruc(document);
                tx.execute(
                    "INSERT INTO documents (id, tenant_id, company_id, branch_id, issuance_point_id, channel, \
                       channel_id, doc_type, external_id, status, cdc, number, buyer_ruc, issue_datetime, grand_total, \
                       errors, warnings, state, stream_id, version, created_at, updated_at, associated_cdc, \
                       buyer_search) \
                     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, 'received', NULL, NULL, $10, $11, $12, $13, $13, $14, \
                       $15, $16, $17, $17, $18, $19) ON CONFLICT (id) DO NOTHING",
                    &[
                        SqlValue::Uuid(document_id),
                        tenant.clone(),
                        SqlValue::Uuid(routing.company_id),
                        SqlValue::Uuid(routing.branch_id),
                        SqlValue::Uuid(routing.issuance_point_id),
                        SqlValue::Text(routing.channel.as_str().to_owned()),
                        SqlValue::Uuid(routing.channel_id),
                        SqlValue::Text(document.doc_type.as_str().to_owned()),
                        SqlValue::Text(document.external_id.clone()),
                        buyer_ruc.map_or(SqlValue::Null, SqlValue::Text),
                        SqlValue::Timestamp(document.issue_datetime.with_timezone(&Utc)),
                        SqlValue::Text(document.totals.grand_total.to_string()),
                        SqlValue::Json(Value::Array(Vec::new())),
                        SqlValue::Json(serde_json::json!({})),
                        SqlValue::Text(event.stream_id.clone()),
                        SqlValue::Int(version),
                        SqlValue::Timestamp(event.recorded_at),
                        associated_cdc(document).map_or(SqlValue::Null, SqlValue::Text),
                        buyer_search(document).map_or(SqlValue::Null, SqlValue::Text),
                    ],
                )
                .await?;
            }
            DocumentEvent::DocumentValidated { warnings, .. } => {
                set_issues(tx, document_id, &[], warnings).await?;
            }
            DocumentEvent::DocumentValidationFailed { errors, warnings, .. } => {
                set_issues(tx, document_id, errors, warnings).await?;
            }
            DocumentEvent::DocumentTransformed { number, cdc, .. } => {
                tx.execute(
                    "UPDATE documents SET cdc = $2, number = $3 WHERE id = $1",
                    &[
                        SqlValue::Uuid(document_id),
                        SqlValue::Text(cdc.clone()),
                        SqlValue::Text(number.to_string()),
                    ],
                )
                .await?;
            }
            DocumentEvent::DocumentIssuanceRefused {
                code, message, field, ..
            } => {
                // A queued document has no errors yet: the refusal is its one error.
                let path = field.as_deref().unwrap_or("autoimpresor");
                tx.execute(
                    "UPDATE documents SET errors = $2 WHERE id = $1",
                    &[
                        SqlValue::Uuid(document_id),
                        SqlValue::Json(json(&[Issue::new(path, code, message.clone())])?),
                    ],
                )
                .await?;
            }
            DocumentEvent::DocumentRenderingStarted { number, .. } => {
                tx.execute(
                    "UPDATE documents SET number = $2 WHERE id = $1",
                    &[SqlValue::Uuid(document_id), SqlValue::Text(number.to_string())],
                )
                .await?;
            }
            DocumentEvent::ArtifactRecorded {
                artifact_id,
                kind,
                content_type,
                sha256,
                size,
                version: artifact_version,
                ..
            } => {
                tx.execute(
                    "INSERT INTO document_artifacts (id, tenant_id, document_id, kind, version, content_type, sha256, \
                       size, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) ON CONFLICT (id) DO NOTHING",
                    &[
                        SqlValue::Uuid(*artifact_id),
                        tenant.clone(),
                        SqlValue::Uuid(document_id),
                        SqlValue::Text(kind.as_str().to_owned()),
                        SqlValue::Int(i64::from(*artifact_version)),
                        SqlValue::Text(content_type.clone()),
                        SqlValue::Text(sha256.clone()),
                        SqlValue::Int(i64::try_from(*size).unwrap_or(i64::MAX)),
                        SqlValue::Timestamp(event.recorded_at),
                    ],
                )
                .await?;
            }
            DocumentEvent::DeliveryRecorded {
                delivery_id,
                target,
                channel,
                status: DeliveryStatus::Pending,
                attempt: 0,
                ..
            } => {
                // A manual delivery, waiting for the issuer's hand (a replay finds its row,
                // settled or not, and leaves it).
                tx.execute(
                    "INSERT INTO document_manual_deliveries (id, tenant_id, document_id, target, channel, \
                       pending, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (id) DO NOTHING",
                    &[
                        SqlValue::Uuid(*delivery_id),
                        tenant.clone(),
                        SqlValue::Uuid(document_id),
                        SqlValue::Text(name(target)),
                        SqlValue::Text(name(channel)),
                        SqlValue::Bool(true),
                        SqlValue::Timestamp(event.recorded_at),
                    ],
                )
                .await?;
            }
            DocumentEvent::DeliveredByHand { settled, .. } => {
                for delivery_id in settled {
                    tx.execute(
                        "UPDATE document_manual_deliveries SET pending = $2, updated_at = $3 WHERE id = $1",
                        &[
                            SqlValue::Uuid(*delivery_id),
                            SqlValue::Bool(false),
                            SqlValue::Timestamp(event.recorded_at),
                        ],
                    )
                    .await?;
                }
            }
            DocumentEvent::PublicLinkCreated {
                link_id,
                token_sha256,
                expires_at,
                at,
            } => {
                tx.execute(
                    "INSERT INTO document_public_links (token_sha256, id, tenant_id, document_id, expires_at, \
                       revoked_at, created_at) VALUES ($1, $2, $3, $4, $5, NULL, $6) ON CONFLICT (token_sha256) DO NOTHING",
                    &[
                        SqlValue::Text(token_sha256.clone()),
                        SqlValue::Uuid(*link_id),
                        tenant.clone(),
                        SqlValue::Uuid(document_id),
                        SqlValue::Timestamp(*expires_at),
                        SqlValue::Timestamp(*at),
                    ],
                )
                .await?;
            }
            DocumentEvent::PublicLinkRevoked { link_id, at } => {
                tx.execute(
                    "UPDATE document_public_links SET revoked_at = $2 WHERE id = $1 AND revoked_at IS NULL",
                    &[SqlValue::Uuid(*link_id), SqlValue::Timestamp(*at)],
                )
                .await?;
            }
            _ => {}
        }
    }
    Ok(())
}

/// Whether `apply_own` changes the document's own row for this event (the others write rows of
/// their own tables, or nothing).
pub(super) fn changes_row(decoded: &DocumentEvent) -> bool {
    matches!(
        decoded,
        DocumentEvent::DocumentValidated { .. }
            | DocumentEvent::DocumentValidationFailed { .. }
            | DocumentEvent::DocumentTransformed { .. }
            | DocumentEvent::DocumentIssuanceRefused { .. }
            | DocumentEvent::DocumentRenderingStarted { .. }
    )
}

/// A value's name as the API writes it (`customer`, `email`).
fn name<T: serde::Serialize>(value: &T) -> String {
    serde_json::to_value(value)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_default()
}

async fn set_issues(
    tx: &mut dyn SqlTx,
    id: Uuid,
    errors: &[Issue],
    warnings: &[Issue],
) -> Result<(), StoreError> {
    tx.execute(
        "UPDATE documents SET errors = $2, warnings = $3 WHERE id = $1",
        &[
            SqlValue::Uuid(id),
            SqlValue::Json(json(&errors)?),
            SqlValue::Json(json(&warnings)?),
        ],
    )
    .await
    .map(|_| ())
}
