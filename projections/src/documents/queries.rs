//! The rows and queries the document endpoints read: a document, the list and its filter, the
//! counts by status, credit notes, the row intake left, the timeline and the artifacts.

use chrono::{DateTime, NaiveDate, Utc};
use kuatia_application::event_store::{SharedStore, StoreError};
use kuatia_application::projection::SqlValue;
use kuatia_domain::document::aggregate::{DocumentEvent, DocumentStatus};
use kuatia_domain::document::issues::Issue;
use kuatia_domain::tenancy::TenantId;
use serde_json::Value;
use uuid::Uuid;

use super::{buyer_ruc, corrupt, decode, intake_run};

/// The row intake left for document `id` (what `POST /v1/documents` answered), rebuilt from the
/// document's first events, which never change: the answer to a repeated request with the same
/// Idempotency-Key, whatever happened to the document since. `None` when there is no such
/// document.
pub async fn intake_row(
    store: &SharedStore,
    tenant: TenantId,
    id: Uuid,
) -> Result<Option<DocumentRow>, StoreError> {
    let events = store
        .load_stream(&kuatia_domain::document::aggregate::stream_id(tenant, id))
        .await?;
    let Some((run, _)) = intake_run(&events)? else {
        return Ok(None);
    };
    let (
        received,
        DocumentEvent::DocumentReceived {
            routing, document, ..
        },
    ) = &run.events[0]
    else {
        return Err(corrupt("intake run"));
    };
    let state = run.fold();
    let (status, last) = (state.status, state.last);
    let mut row = DocumentRow::after_intake(id, routing, document, state.errors, state.warnings);
    row.status = status.as_str().to_owned();
    row.version = last.stream_version as i64;
    row.created_at = received.recorded_at;
    row.updated_at = last.recorded_at;
    Ok(Some(row))
}

/// A document as the status and list endpoints show it.
#[derive(Debug, Clone, PartialEq)]
pub struct DocumentRow {
    /// Id.
    pub id: Uuid,
    /// Company.
    pub company_id: Uuid,
    /// Branch.
    pub branch_id: Uuid,
    /// Issuance point.
    pub issuance_point_id: Uuid,
    /// `sifen` or `autoimpresor`.
    pub channel: String,
    /// Document type.
    pub doc_type: String,
    /// The caller's id.
    pub external_id: String,
    /// Status.
    pub status: String,
    /// CDC (SIFEN, once transformed).
    pub cdc: Option<String>,
    /// `001-001-0000001`, once numbered.
    pub number: Option<String>,
    /// Buyer RUC number.
    pub buyer_ruc: Option<String>,
    /// Issue date-time (UTC).
    pub issue_datetime: DateTime<Utc>,
    /// Grand total, decimal text.
    pub grand_total: String,
    /// Blocking issues.
    pub errors: Vec<Issue>,
    /// Warnings.
    pub warnings: Vec<Issue>,
    /// Stream version.
    pub version: i64,
    /// Received.
    pub created_at: DateTime<Utc>,
    /// Last changed.
    pub updated_at: DateTime<Utc>,
}

impl DocumentRow {
    /// The row intake leaves behind, without reading it back: what [`Documents`] writes for a
    /// `DocumentReceived` and the validation events after it. The caller sets `status`,
    /// `version`, `created_at` and `updated_at` from the append (here `received`, 1 and the
    /// issue time). `POST /v1/documents` answers with it; a test holds it equal to the stored row.
    pub fn after_intake(
        id: Uuid,
        routing: &kuatia_domain::document::routing::Routing,
        document: &kuatia_domain::document::canonical::CanonicalDocument,
        errors: Vec<Issue>,
        warnings: Vec<Issue>,
    ) -> Self {
        let at = document.issue_datetime.with_timezone(&Utc);
        Self {
            id,
            company_id: routing.company_id,
            branch_id: routing.branch_id,
            issuance_point_id: routing.issuance_point_id,
            channel: routing.channel.as_str().to_owned(),
            doc_type: document.doc_type.as_str().to_owned(),
            external_id: document.external_id.clone(),
            status: "received".to_owned(),
            cdc: None,
            number: None,
            buyer_ruc: buyer_ruc(document),
            issue_datetime: document.issue_datetime.with_timezone(&Utc),
            grand_total: document.totals.grand_total.to_string(),
            errors,
            warnings,
            version: 1,
            created_at: at,
            updated_at: at,
        }
    }
}

fn issues(value: &SqlValue) -> Result<Vec<Issue>, StoreError> {
    match value {
        SqlValue::Json(v) => serde_json::from_value(v.clone()),
        SqlValue::Text(t) => serde_json::from_str(t),
        _ => return Err(corrupt("issues")),
    }
    .map_err(|e| StoreError::Corrupt(format!("issues: {e}")))
}

fn row(r: &[SqlValue]) -> Result<DocumentRow, StoreError> {
    let text = |i: usize, what: &str| r[i].as_text().ok_or_else(|| corrupt(what));
    let uuid = |i: usize, what: &str| r[i].as_uuid().ok_or_else(|| corrupt(what));
    Ok(DocumentRow {
        id: uuid(0, "id")?,
        company_id: uuid(1, "company")?,
        branch_id: uuid(2, "branch")?,
        issuance_point_id: uuid(3, "point")?,
        channel: text(4, "channel")?,
        doc_type: text(5, "type")?,
        external_id: text(6, "external id")?,
        status: text(7, "status")?,
        cdc: r[8].non_null().and_then(SqlValue::as_text),
        number: r[9].non_null().and_then(SqlValue::as_text),
        buyer_ruc: r[10].non_null().and_then(SqlValue::as_text),
        issue_datetime: r[11].as_timestamp().ok_or_else(|| corrupt("issue_datetime"))?,
        grand_total: text(12, "grand total")?,
        errors: issues(&r[13])?,
        warnings: issues(&r[14])?,
        version: r[15].as_i64().ok_or_else(|| corrupt("version"))?,
        created_at: r[16].as_timestamp().ok_or_else(|| corrupt("created_at"))?,
        updated_at: r[17].as_timestamp().ok_or_else(|| corrupt("updated_at"))?,
    })
}

/// One document of the tenant.
pub async fn document(
    store: &SharedStore,
    tenant: TenantId,
    id: Uuid,
) -> Result<Option<DocumentRow>, StoreError> {
    let rows = store
        .query(
            "SELECT id, company_id, branch_id, issuance_point_id, channel, doc_type, external_id, status, cdc, \
               number, buyer_ruc, issue_datetime, grand_total, errors, warnings, version, created_at, updated_at \
             FROM documents WHERE tenant_id = $1 AND id = $2",
            &[SqlValue::Uuid(tenant.as_uuid()), SqlValue::Uuid(id)],
        )
        .await?;
    rows.first().map(|r| row(r)).transpose()
}

/// The grand totals of the tenant's live credit notes that refer to the document with `cdc`
/// (SIFEN rule 2417 adds them up): every one but those that ended `validation_failed`,
/// `rejected`, `failed_terminal`, `cancelled` or `invalidated`.
pub async fn credit_notes_of(
    store: &SharedStore,
    tenant: TenantId,
    cdc: &str,
) -> Result<Vec<String>, StoreError> {
    let rows = store
        .query(
            "SELECT grand_total FROM documents WHERE tenant_id = $1 AND associated_cdc = $2 \
               AND doc_type = 'credit_note' \
               AND status NOT IN ('validation_failed', 'rejected', 'failed_terminal', 'cancelled', 'invalidated')",
            &[SqlValue::Uuid(tenant.as_uuid()), SqlValue::Text(cdc.to_owned())],
        )
        .await?;
    Ok(rows.iter().filter_map(|r| r[0].as_text()).collect())
}

/// Documents per status over every tenant, for the `kuatia_documents` gauge (read when
/// `/metrics` is scraped, so every instance reports the whole pipeline): sums of the counts
/// migration 0028's triggers keep, not a count of the documents.
pub async fn count_by_status(store: &SharedStore) -> Result<Vec<(String, i64)>, StoreError> {
    let rows = store
        .query(
            "SELECT status, CAST(sum(n) AS BIGINT) FROM document_counts GROUP BY status",
            &[],
        )
        .await?;
    Ok(rows
        .iter()
        .filter_map(|r| Some((r[0].as_text()?, r[1].as_i64().unwrap_or(0))))
        .collect())
}

/// A tenant's documents per status, issued on or after Paraguay's day `since` when given (the
/// console's home: today, this month, all time): sums of `document_counts` (one row per day,
/// company and status), so the work grows with the days a tenant has issued on, not with its
/// documents.
pub async fn status_counts(
    store: &SharedStore,
    tenant: TenantId,
    company: Option<Uuid>,
    since: Option<NaiveDate>,
) -> Result<Vec<(String, i64)>, StoreError> {
    macro_rules! counts {
        ($filter:literal) => {
            concat!(
                "SELECT status, CAST(sum(n) AS BIGINT) FROM document_counts WHERE tenant_id = $1",
                $filter,
                " GROUP BY status"
            )
        };
    }
    let t = SqlValue::Uuid(tenant.as_uuid());
    let rows = match (company, since) {
        (None, None) => store.query(counts!(""), &[t]).await?,
        (None, Some(since)) => {
            store
                .query(counts!(" AND day >= $2"), &[t, SqlValue::Date(since)])
                .await?
        }
        (Some(company), None) => {
            store
                .query(counts!(" AND company_id = $2"), &[t, SqlValue::Uuid(company)])
                .await?
        }
        (Some(company), Some(since)) => {
            store
                .query(
                    counts!(" AND day >= $2 AND company_id = $3"),
                    &[t, SqlValue::Date(since), SqlValue::Uuid(company)],
                )
                .await?
        }
    };
    Ok(rows
        .iter()
        .filter_map(|r| Some((r[0].as_text()?, r[1].as_i64().unwrap_or(0))))
        .collect())
}

/// The list filters; `None` means "any".
#[derive(Debug, Clone, Default)]
pub struct Filter {
    /// Company.
    pub company_id: Option<Uuid>,
    /// Status.
    pub status: Option<String>,
    /// Channel.
    pub channel: Option<String>,
    /// External id.
    pub external_id: Option<String>,
    /// CDC.
    pub cdc: Option<String>,
    /// Buyer RUC number (without DV).
    pub buyer_ruc: Option<String>,
    /// issue_datetime ≥.
    pub date_from: Option<DateTime<Utc>>,
    /// issue_datetime <.
    pub date_to: Option<DateTime<Utc>>,
    /// Only ids below this one (the cursor).
    pub before: Option<Uuid>,
    /// Only documents with a delivery still waiting for the issuer's hand.
    pub pending_manual: bool,
    /// A search: the number, the CDC or the external id exactly, the buyer's RUC (with or without
    /// its check digit), or a part of the buyer's legal or trade name (accents and case aside).
    pub search: Option<String>,
}

/// The list's columns.
macro_rules! list_columns {
    () => {
        "id, company_id, branch_id, issuance_point_id, channel, doc_type, external_id, status, cdc, \
         number, buyer_ruc, issue_datetime, grand_total, errors, warnings, version, created_at, updated_at"
    };
}

/// The list's filters. One statement for every combination of them: a NULL parameter switches
/// its condition off.
macro_rules! list_conditions {
    () => {
        "tenant_id = $1 \
           AND ($2 IS NULL OR company_id = $2) AND ($3 IS NULL OR status = $3) \
           AND ($4 IS NULL OR channel = $4) AND ($5 IS NULL OR external_id = $5) \
           AND ($6 IS NULL OR cdc = $6) AND ($7 IS NULL OR buyer_ruc = $7) \
           AND ($8 IS NULL OR issue_datetime >= $8) AND ($9 IS NULL OR issue_datetime < $9) \
           AND ($10 IS NULL OR id < $10) \
           AND ($12 IS NULL OR EXISTS (SELECT 1 FROM document_manual_deliveries m \
             WHERE m.tenant_id = documents.tenant_id AND m.document_id = documents.id AND m.pending)) "
    };
}

/// The list's statement with one more condition: the documents walked newest first.
macro_rules! page_sql {
    ($and:literal) => {
        concat!(
            "SELECT ",
            list_columns!(),
            " FROM documents WHERE ",
            list_conditions!(),
            $and,
            " ORDER BY id DESC LIMIT $11"
        )
    };
}

/// The list's statement for a date window far back (issue 30): the window's documents first,
/// read from `documents_window_idx` alone (migration 0034), then the newest of them. Walking
/// newest first, as [`page_sql`] does, a window 200 days back first skipped every newer document
/// (102 000 rows, 145 ms at 100 000 documents; the planner takes the window's documents for
/// spread over the whole history, not gathered at its end). `MATERIALIZED` keeps the planner
/// from folding the window back into that walk.
const WINDOW_SQL: &str = concat!(
    "WITH in_window AS MATERIALIZED (SELECT id FROM documents WHERE ",
    list_conditions!(),
    ") SELECT ",
    list_columns!(),
    " FROM documents WHERE tenant_id = $1 \
       AND id IN (SELECT id FROM in_window ORDER BY id DESC LIMIT $11) ORDER BY id DESC"
);

/// How many documents [`window_first`] counts, at most, on either side of a window's end.
const WINDOW_COUNT: i64 = 5_000;

/// Whether a page with a date window is read window first ([`WINDOW_SQL`]) rather than walked
/// newest first: when fewer documents are in the window than were issued after it (each counted
/// up to [`WINDOW_COUNT`] on the window's index, in order of issue so that it is the index that
/// is read). A window that reaches today, or has few documents after it, is walked: its
/// documents are the newest.
async fn window_first(store: &SharedStore, tenant: TenantId, filter: &Filter) -> Result<bool, StoreError> {
    let Some(to) = filter.date_to else {
        return Ok(false);
    };
    let counts = store
        .query(
            "SELECT (SELECT count(*) FROM (SELECT 1 FROM documents WHERE tenant_id = $1 \
                 AND issue_datetime >= $3 ORDER BY issue_datetime LIMIT $4) AS newer), \
               (SELECT count(*) FROM (SELECT 1 FROM documents WHERE tenant_id = $1 \
                 AND ($2 IS NULL OR issue_datetime >= $2) AND issue_datetime < $3 \
                 ORDER BY issue_datetime DESC LIMIT $4) AS inside)",
            &[
                SqlValue::Uuid(tenant.as_uuid()),
                opt_time(filter.date_from),
                SqlValue::Timestamp(to),
                SqlValue::Int(WINDOW_COUNT),
            ],
        )
        .await?;
    let count = |i: usize| {
        counts
            .first()
            .and_then(|r| r.get(i))
            .and_then(SqlValue::as_i64)
            .unwrap_or(0)
    };
    let (newer, inside) = (count(0), count(1));
    Ok(newer >= inside)
}

/// A page of documents, newest first (ids are UUIDv7, so id order is creation order and a cursor
/// on the id never skips or repeats).
///
/// A search looks the references up first (number, CDC, external id: a union of their indexes);
/// a reference found is the answer. Otherwise a search shaped like a reference (digits, `-` and
/// `.` alone) is a buyer's RUC, walked newest first on its index; anything else is a part of the
/// buyer's names: the names' trigram index finds the documents with it when they are few, and
/// when they are many the walk newest first fills the page soon.
pub async fn list(
    store: &SharedStore,
    tenant: TenantId,
    filter: &Filter,
    limit: u32,
) -> Result<Vec<DocumentRow>, StoreError> {
    let Some(search) = filter.search.as_deref() else {
        if filter.pending_manual {
            // The deliveries waiting are few: read them by their partial index and look their
            // documents up, instead of walking every document asking each (the whole tenant
            // when none waits, as on the console's home).
            let waiting = page_sql!(
                "AND id IN (SELECT document_id FROM document_manual_deliveries \
                   WHERE tenant_id = $1 AND pending)"
            );
            return page(store, tenant, filter, limit, waiting, Vec::new()).await;
        }
        let sql = if window_first(store, tenant, filter).await? {
            WINDOW_SQL
        } else {
            page_sql!("")
        };
        return page(store, tenant, filter, limit, sql, Vec::new()).await;
    };
    let references = page_sql!(
        "AND id IN (SELECT id FROM documents WHERE tenant_id = $1 AND number = $13 \
         UNION ALL SELECT id FROM documents WHERE tenant_id = $1 AND cdc = $13 \
         UNION ALL SELECT id FROM documents WHERE tenant_id = $1 AND external_id = $13)"
    );
    let keys = || vec![SqlValue::Text(search.to_owned())];
    let rows = page(store, tenant, filter, limit, references, keys()).await?;
    if !rows.is_empty() {
        return Ok(rows);
    }
    // A later page of a reference's documents is past its end, not a search of names.
    if filter.before.is_some() {
        let first = Filter {
            before: None,
            ..filter.clone()
        };
        if !page(store, tenant, &first, 1, references, keys())
            .await?
            .is_empty()
        {
            return Ok(rows);
        }
    }
    let reference_shaped = search
        .chars()
        .all(|c| c.is_ascii_digit() || matches!(c, '-' | '.' | ' '));
    if reference_shaped {
        // A buyer's RUC, with or without its check digit.
        let ruc = super::ruc_number(search).replace('.', "");
        return page(
            store,
            tenant,
            filter,
            limit,
            page_sql!("AND buyer_ruc = $13"),
            vec![SqlValue::Text(ruc)],
        )
        .await;
    }
    let folded = super::search_text(search);
    let like = SqlValue::Text(format!(
        "%{}%",
        folded.replace('!', "!!").replace('%', "!%").replace('_', "!_")
    ));
    // A part many documents share: the tenant's newest documents fill the page. Walked only as
    // far back as the NAMED_WALK-th newest document (before the cursor): a page filled there is
    // the page; one not filled asks the names index (issue 30: the index's count of a part all
    // 100 000 documents share took 340 ms on PostgreSQL, whose trigram index reads every match
    // of every tenant before it counts).
    let newest = page(
        store,
        tenant,
        filter,
        limit,
        page_sql!(
            "AND buyer_search LIKE $13 ESCAPE '!' \
             AND id >= (SELECT id FROM documents WHERE tenant_id = $1 AND ($10 IS NULL OR id < $10) \
               ORDER BY id DESC LIMIT 1 OFFSET $14)"
        ),
        vec![like.clone(), SqlValue::Int(NAMED_WALK - 1)],
    )
    .await?;
    if newest.len() >= limit as usize {
        return Ok(newest);
    }
    if let Some(part) = indexed_part(&folded) {
        // The names index (migration 0029: trigrams) says how many documents have the part, up
        // to one more than it lets through; few, and their ids are the page's candidates.
        let found = store
            .query(
                "SELECT count(*) FROM (SELECT 1 FROM document_names \
                   WHERE tenant_id = $1 AND buyer_search LIKE $2 LIMIT $3) AS named",
                &[
                    SqlValue::Uuid(tenant.as_uuid()),
                    part.clone(),
                    SqlValue::Int(NAMED_FEW + 1),
                ],
            )
            .await?;
        let named = found.first().and_then(|r| r.first()).and_then(SqlValue::as_i64);
        if named.is_some_and(|n| n <= NAMED_FEW) {
            return page(
                store,
                tenant,
                filter,
                limit,
                page_sql!(
                    "AND id IN (SELECT document_id FROM document_names \
                       WHERE tenant_id = $1 AND buyer_search LIKE $14) \
                     AND buyer_search LIKE $13 ESCAPE '!'"
                ),
                vec![like, part],
            )
            .await;
        }
    }
    // Many documents have it (or it is too short to index): walking the newest first fills the
    // page soon.
    page(
        store,
        tenant,
        filter,
        limit,
        page_sql!("AND buyer_search LIKE $13 ESCAPE '!'"),
        vec![like],
    )
    .await
}

/// How many of the tenant's newest documents a search of a name's part reads before it asks the
/// names index: a part one document in 40 has fills a page of 50 among them.
const NAMED_WALK: i64 = 2_000;

/// Up to this many documents with a part of a name are looked up by the names index; more, and
/// the walk newest first fills a page sooner than looking them all up.
const NAMED_FEW: i64 = 1_000;

/// The pattern the names index answers for a search: three characters or more (trigrams), none
/// of them a wildcard or an escape of either backend's LIKE (the index's LIKE takes no `ESCAPE`;
/// such a search is walked).
fn indexed_part(folded: &str) -> Option<SqlValue> {
    (folded.chars().count() >= 3 && !folded.contains(['%', '_', '\\']))
        .then(|| SqlValue::Text(format!("%{folded}%")))
}

/// The filtered page with one more condition (in `sql`, whose parameters are `$13`… in
/// `values`).
async fn page(
    store: &SharedStore,
    tenant: TenantId,
    filter: &Filter,
    limit: u32,
    sql: &'static str,
    values: Vec<SqlValue>,
) -> Result<Vec<DocumentRow>, StoreError> {
    let mut params = vec![
        SqlValue::Uuid(tenant.as_uuid()),
        filter.company_id.into(),
        opt_text(&filter.status),
        opt_text(&filter.channel),
        opt_text(&filter.external_id),
        opt_text(&filter.cdc),
        opt_text(&filter.buyer_ruc),
        opt_time(filter.date_from),
        opt_time(filter.date_to),
        filter.before.into(),
        SqlValue::Int(i64::from(limit)),
        if filter.pending_manual {
            SqlValue::Bool(true)
        } else {
            SqlValue::TypedNull(kuatia_application::projection::SqlType::Bool)
        },
    ];
    params.extend(values);
    let rows = store.query(sql, &params).await?;
    rows.iter().map(|r| row(r)).collect()
}

fn opt_text(value: &Option<String>) -> SqlValue {
    value.clone().map_or(SqlValue::Null, SqlValue::Text)
}

fn opt_time(value: Option<DateTime<Utc>>) -> SqlValue {
    value.map_or(
        SqlValue::TypedNull(kuatia_application::projection::SqlType::Timestamp),
        SqlValue::Timestamp,
    )
}

/// One timeline entry.
#[derive(Debug, Clone, PartialEq)]
pub struct TimelineEntry {
    /// Global position.
    pub position: i64,
    /// Stream version.
    pub version: i64,
    /// Event type.
    pub event_type: String,
    /// Status after the event.
    pub status: String,
    /// Recorded at.
    pub at: DateTime<Utc>,
    /// Who.
    pub actor: Option<String>,
    /// The event's data.
    pub data: Value,
    /// The previous event's hash in the stream (`None` for the first).
    pub prev_hash: Option<String>,
    /// The event's chain hash.
    pub hash: String,
}

/// A document's timeline, oldest first: the events of its stream (upcast, as every read path
/// sees them), each with the status the document had after it. Empty for a document the tenant
/// does not have (the stream id names the tenant).
pub async fn timeline(
    store: &SharedStore,
    tenant: TenantId,
    id: Uuid,
) -> Result<Vec<TimelineEntry>, StoreError> {
    let events = store
        .load_stream(&kuatia_domain::document::aggregate::stream_id(tenant, id))
        .await?;
    let mut status = DocumentStatus::Received;
    events
        .into_iter()
        .map(|event| {
            status = decode(&event)?.resulting_status().unwrap_or(status);
            Ok(TimelineEntry {
                position: event.global_position,
                version: event.stream_version as i64,
                event_type: event.event_type,
                status: status.as_str().to_owned(),
                at: event.recorded_at,
                actor: event.metadata.actor,
                data: event.payload,
                prev_hash: event.prev_hash,
                hash: event.hash,
            })
        })
        .collect()
}

/// An artifact row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArtifactRow {
    /// Id.
    pub id: Uuid,
    /// Kind.
    pub kind: String,
    /// Version per kind.
    pub version: i64,
    /// MIME type.
    pub content_type: String,
    /// SHA-256.
    pub sha256: String,
    /// Bytes.
    pub size: i64,
    /// Recorded.
    pub created_at: DateTime<Utc>,
}

/// A document's artifacts, by kind and version.
pub async fn artifacts(
    store: &SharedStore,
    tenant: TenantId,
    id: Uuid,
) -> Result<Vec<ArtifactRow>, StoreError> {
    let rows = store
        .query(
            "SELECT id, kind, version, content_type, sha256, size, created_at FROM document_artifacts \
             WHERE tenant_id = $1 AND document_id = $2 ORDER BY kind, version",
            &[SqlValue::Uuid(tenant.as_uuid()), SqlValue::Uuid(id)],
        )
        .await?;
    rows.iter()
        .map(|r| {
            Ok(ArtifactRow {
                id: r[0].as_uuid().ok_or_else(|| corrupt("artifact id"))?,
                kind: r[1].as_text().ok_or_else(|| corrupt("kind"))?,
                version: r[2].as_i64().ok_or_else(|| corrupt("version"))?,
                content_type: r[3].as_text().ok_or_else(|| corrupt("content type"))?,
                sha256: r[4].as_text().ok_or_else(|| corrupt("sha256"))?,
                size: r[5].as_i64().ok_or_else(|| corrupt("size"))?,
                created_at: r[6].as_timestamp().ok_or_else(|| corrupt("created_at"))?,
            })
        })
        .collect()
}
