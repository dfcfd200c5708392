//! Reading documents: the list with its filters, a document's status, timeline and detail
//! (with SIFEN's last word in plain terms).

use super::*;

/// `GET /v1/documents` query.
#[derive(Debug, Default, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
pub struct ListQuery {
    /// Company.
    pub company_id: Option<String>,
    /// DocumentStatus.
    pub status: Option<String>,
    /// `sifen` or `autoimpresor`.
    pub channel: Option<String>,
    /// The caller's id.
    pub external_id: Option<String>,
    /// Exactly 44 digits.
    pub cdc: Option<String>,
    /// The buyer's RUC, with or without its check digit.
    pub ruc: Option<String>,
    /// issue_datetime ≥ (RFC 3339).
    pub date_from: Option<String>,
    /// issue_datetime < (RFC 3339).
    pub date_to: Option<String>,
    /// 1–100, default 50.
    pub limit: Option<String>,
    /// `next_cursor` of the previous page.
    pub cursor: Option<String>,
    /// `pending_manual`: only documents with a delivery waiting for the issuer's hand (`manual`
    /// mode, not yet recorded through `POST /v1/documents/{id}/deliveries`).
    pub delivery: Option<String>,
    /// A search (1 to 100 characters): the number (`001-001-0000001`), the CDC or the external id
    /// exactly, the buyer's RUC with or without its check digit; when it is none of those, a part
    /// of the buyer's legal or trade name, accents and case aside (`gomez` finds `Gómez`).
    pub q: Option<String>,
}

/// A page of documents.
#[derive(Debug, Serialize, ToSchema)]
pub struct DocumentList {
    /// Newest first.
    pub documents: Vec<DocumentView>,
    /// Pass as `cursor` for the next page; null on the last one.
    pub next_cursor: Option<String>,
}

fn bad(field: &str, message: &str) -> ApiError {
    ApiError::invalid_field(field, "invalid_format", message)
}

fn time_param(field: &str, value: Option<&str>) -> Result<Option<chrono::DateTime<Utc>>, ApiError> {
    value
        .map(|v| {
            chrono::DateTime::parse_from_rfc3339(v.trim())
                .map(|t| t.with_timezone(&Utc))
                .map_err(|_| {
                    bad(
                        field,
                        "expected an RFC 3339 date-time with offset, e.g. 2026-03-01T00:00:00-03:00",
                    )
                })
        })
        .transpose()
}

fn filter_from(caller: &Caller, q: &ListQuery) -> Result<(read_docs::Filter, u32), ApiError> {
    let company = q
        .company_id
        .as_deref()
        .map(|c| {
            c.trim()
                .parse::<Uuid>()
                .map_err(|_| bad("company_id", "company_id must be a UUID"))
        })
        .transpose()?;
    let status = match q.status.as_deref() {
        Some(s) if !DocumentStatus::ALL.iter().any(|st| st.as_str() == s) => {
            return Err(ApiError::invalid_field(
                "status",
                "invalid_enum",
                format!("unknown status {s:?}"),
            ));
        }
        other => other.map(str::to_owned),
    };
    let channel = match q.channel.as_deref() {
        Some(c) if c != "sifen" && c != "autoimpresor" => {
            return Err(ApiError::invalid_field(
                "channel",
                "invalid_enum",
                "channel is sifen or autoimpresor",
            ));
        }
        other => other.map(str::to_owned),
    };
    if let Some(cdc) = &q.cdc
        && !(cdc.len() == 44 && cdc.bytes().all(|b| b.is_ascii_digit()))
    {
        return Err(bad("cdc", "a CDC is exactly 44 digits"));
    }
    let buyer_ruc = q.ruc.as_deref().map(read_docs::ruc_number);
    if buyer_ruc
        .as_ref()
        .is_some_and(|r| r.is_empty() || r.len() > 8 || !r.bytes().all(|b| b.is_ascii_digit()))
    {
        return Err(bad("ruc", "a RUC is 1 to 8 digits, optionally followed by -DV"));
    }
    let pending_manual = match q.delivery.as_deref() {
        None => false,
        Some("pending_manual") => true,
        Some(other) => {
            return Err(ApiError::invalid_field(
                "delivery",
                "invalid_enum",
                format!("unknown delivery filter {other:?}: the one filter is pending_manual"),
            ));
        }
    };
    let search = match q.q.as_deref().map(str::trim) {
        None => None,
        Some(text) if (1..=100).contains(&text.chars().count()) => Some(text.to_owned()),
        Some(_) => return Err(bad("q", "a search has 1 to 100 characters")),
    };
    let limit = match q.limit.as_deref() {
        None => 50,
        Some(l) => match l.trim().parse::<u32>() {
            Ok(n) if (1..=100).contains(&n) => n,
            _ => return Err(bad("limit", "limit is 1 to 100")),
        },
    };
    let before = q
        .cursor
        .as_deref()
        .map(|c| {
            c.trim()
                .parse::<Uuid>()
                .map_err(|_| bad("cursor", "not a cursor of this listing"))
        })
        .transpose()?;
    Ok((
        read_docs::Filter {
            company_id: caller.company_scope(company)?,
            status,
            channel,
            external_id: q.external_id.clone(),
            cdc: q.cdc.clone(),
            buyer_ruc,
            date_from: time_param("date_from", q.date_from.as_deref())?,
            date_to: time_param("date_to", q.date_to.as_deref())?,
            before,
            pending_manual,
            search,
        },
        limit,
    ))
}

/// Lists documents, newest first, with every filter of the contract and cursor pagination.
#[utoipa::path(
    get,
    path = "/v1/documents",
    tag = "documents",
    security(("api_key" = []), ("session" = [])),
    params(ListQuery, ("X-Tenant-Id" = Uuid, Header, description = "The caller's tenant")),
    responses(
        (status = 200, description = "A page", body = DocumentList),
        (status = 400, description = "A malformed filter", body = ErrorBody)
    )
)]
pub async fn list_documents(
    State(state): State<AppState>,
    caller: Caller,
    Query(query): Query<ListQuery>,
) -> Result<axum::Json<DocumentList>, ApiError> {
    caller.require(READ_DOCUMENTS)?;
    let (filter, limit) = filter_from(&caller, &query)?;
    let mut rows = read_docs::list(&state.store, caller.tenant, &filter, limit + 1).await?;
    let more = rows.len() > limit as usize;
    rows.truncate(limit as usize);
    let next_cursor = if more {
        rows.last().map(|r| r.id.to_string())
    } else {
        None
    };
    Ok(axum::Json(DocumentList {
        documents: rows.into_iter().map(DocumentView::from).collect(),
        next_cursor,
    }))
}

pub(crate) async fn visible(state: &AppState, caller: &Caller, id: Uuid) -> Result<DocumentRow, ApiError> {
    read_docs::document(&state.store, caller.tenant, id)
        .await?
        .filter(|d| caller.sees(d.company_id))
        .ok_or_else(|| ApiError::not_found("no such document"))
}

/// A document's materialised status.
#[utoipa::path(
    get,
    path = "/v1/documents/{id}/status",
    tag = "documents",
    security(("api_key" = []), ("session" = [])),
    params(("id" = Uuid, Path, description = "The document"), ("X-Tenant-Id" = Uuid, Header, description = "The caller's tenant")),
    responses((status = 200, description = "Status", body = DocumentView), (status = 404, description = "No such document", body = ErrorBody))
)]
pub async fn document_status(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<Uuid>,
) -> Result<axum::Json<DocumentView>, ApiError> {
    caller.require(READ_DOCUMENTS)?;
    Ok(axum::Json(visible(&state, &caller, id).await?.into()))
}

/// One timeline entry.
#[derive(Debug, Serialize, ToSchema)]
pub struct TimelineView {
    /// Global position in the event log.
    pub position: i64,
    /// Version in the document's stream.
    pub version: i64,
    /// Event type.
    #[serde(rename = "type")]
    pub event_type: String,
    /// Status after the event.
    pub status: String,
    /// When it was recorded.
    pub at: chrono::DateTime<Utc>,
    /// Who, resolved when read (`{type, id, name}`: a key's current name, a user's email; see
    /// `GET /v1/events`); null when the event has none.
    pub actor: Option<crate::routes::events::ActorView>,
    /// The event's data.
    #[schema(value_type = Object)]
    pub data: Value,
    /// The previous event's `hash` in this document's stream; null for the first.
    pub prev_hash: Option<String>,
    /// The event's chain hash (hex SHA-256; `kuatia events verify`).
    pub hash: String,
}

async fn timeline_of(state: &AppState, caller: &Caller, id: Uuid) -> Result<Vec<TimelineView>, ApiError> {
    let entries = read_docs::timeline(&state.store, caller.tenant, id).await?;
    let named: Vec<String> = entries.iter().filter_map(|e| e.actor.clone()).collect();
    let actors = crate::routes::events::resolve_actors(state, caller.tenant, &named).await?;
    Ok(entries
        .into_iter()
        .map(|e| TimelineView {
            position: e.position,
            version: e.version,
            event_type: e.event_type,
            status: e.status,
            at: e.at,
            actor: e.actor.as_deref().and_then(|a| actors.get(a).cloned()),
            data: e.data,
            prev_hash: e.prev_hash,
            hash: e.hash,
        })
        .collect())
}

/// A document's timeline: the immutable events of its stream, oldest first.
#[utoipa::path(
    get,
    path = "/v1/documents/{id}/timeline",
    tag = "documents",
    security(("api_key" = []), ("session" = [])),
    params(("id" = Uuid, Path, description = "The document"), ("X-Tenant-Id" = Uuid, Header, description = "The caller's tenant")),
    responses((status = 200, description = "Events", body = [TimelineView]), (status = 404, description = "No such document", body = ErrorBody))
)]
pub async fn document_timeline(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<Uuid>,
) -> Result<axum::Json<Vec<TimelineView>>, ApiError> {
    caller.require(READ_TIMELINE)?;
    visible(&state, &caller, id).await?;
    Ok(axum::Json(timeline_of(&state, &caller, id).await?))
}

/// The diagnostic detail: summary, the canonical document as received, artifacts, and (for roles
/// that read audit data) the timeline.
#[derive(Debug, Serialize, ToSchema)]
pub struct DocumentDetail {
    /// The status view.
    pub summary: DocumentView,
    /// Artifacts.
    pub artifacts: Vec<ArtifactView>,
    /// The timeline; null for roles without audit access (viewer, issuer).
    pub timeline: Option<Vec<TimelineView>>,
    /// SIFEN's last answer (or the last failure to get one), explained; null before the first.
    pub sifen: Option<SifenAnswerView>,
}

/// SIFEN's last word on a document, in SIFEN's terms and in plain ones.
#[derive(Debug, Serialize, ToSchema)]
pub struct SifenAnswerView {
    /// SIFEN's code (`0260`, `0160`, …); null when the last attempt got no answer.
    pub code: Option<String>,
    /// SIFEN's message, or what went wrong reaching it.
    pub message: String,
    /// `dProtAut`, when approved.
    pub protocol: Option<String>,
    /// What the code usually means.
    pub meaning: Option<String>,
    /// What to do about it (and what kuatia does).
    pub action: Option<String>,
    /// What kuatia takes the code for, from SIFEN's answers table (docs/sifen-channel.md):
    /// `approved`, `rejected`, `absent`, `processing` or `operational` (ask again later).
    #[schema(value_type = Option<String>)]
    pub class: Option<kuatia_domain::sifen::answers::Meaning>,
}

/// The SIFEN block of the detail, from the document's own state.
async fn sifen_answer(
    state: &AppState,
    caller: &Caller,
    id: Uuid,
) -> Result<Option<SifenAnswerView>, ApiError> {
    Ok(documents::last_word(&state.store, caller.tenant, id)
        .await?
        .map(SifenAnswerView::from))
}

impl From<documents::LastWord> for SifenAnswerView {
    fn from(word: documents::LastWord) -> Self {
        let explained = word.explained;
        Self {
            code: word.code,
            message: word.message,
            protocol: word.protocol,
            meaning: explained.map(|e| e.meaning.to_owned()),
            action: explained.map(|e| e.action.to_owned()),
            class: explained.map(|e| e.class),
        }
    }
}

/// A document's detail.
#[utoipa::path(
    get,
    path = "/v1/documents/{id}",
    tag = "documents",
    security(("api_key" = []), ("session" = [])),
    params(("id" = Uuid, Path, description = "The document"), ("X-Tenant-Id" = Uuid, Header, description = "The caller's tenant")),
    responses((status = 200, description = "Detail", body = DocumentDetail), (status = 404, description = "No such document", body = ErrorBody))
)]
pub async fn get_document(
    State(state): State<AppState>,
    caller: Caller,
    headers: HeaderMap,
    Path(id): Path<Uuid>,
) -> Result<axum::Json<DocumentDetail>, ApiError> {
    caller.require(READ_DOCUMENTS)?;
    let row = visible(&state, &caller, id).await?;
    let artifacts = crate::routes::artifacts::views(&state, &headers, &caller, id).await?;
    let timeline = if caller.role.allows(READ_TIMELINE) {
        Some(timeline_of(&state, &caller, id).await?)
    } else {
        None
    };
    let sifen = sifen_answer(&state, &caller, id).await?;
    Ok(axum::Json(DocumentDetail {
        summary: row.into(),
        artifacts,
        timeline,
        sifen,
    }))
}

/// Documents per status, by issue date in Paraguay's calendar.
#[derive(Debug, Serialize, ToSchema)]
pub struct DocumentStats {
    /// Issued today (Paraguay's date), per status; statuses with none are left out.
    #[schema(value_type = Object, example = json!({"accepted": 12, "retrying": 1}))]
    pub today: std::collections::BTreeMap<String, i64>,
    /// Issued this calendar month, per status.
    #[schema(value_type = Object)]
    pub month: std::collections::BTreeMap<String, i64>,
    /// Every document of the tenant (or the key's company), per status.
    #[schema(value_type = Object)]
    pub all: std::collections::BTreeMap<String, i64>,
}

/// How many documents are in each status: issued today, this month (Paraguay's calendar), and in
/// all; what the console's home shows, and what an integrator's dashboard needs without paging
/// the list. A company-scoped key counts its company's only.
#[utoipa::path(
    get,
    path = "/v1/documents/stats",
    tag = "documents",
    security(("api_key" = []), ("session" = [])),
    params(("X-Tenant-Id" = Uuid, Header, description = "The caller's tenant")),
    responses(
        (status = 200, description = "Counts per status", body = DocumentStats),
        (status = 401, description = "No valid credentials", body = ErrorBody),
        (status = 403, description = "Role not allowed", body = ErrorBody)
    )
)]
pub async fn document_stats(
    State(state): State<AppState>,
    caller: Caller,
) -> Result<axum::Json<DocumentStats>, ApiError> {
    use chrono::Datelike;
    caller.require(READ_DOCUMENTS)?;
    let today = kuatia_domain::local_time::paraguay_today(state.intake.clock.now());
    let month_start = today.with_day(1).unwrap_or(today);
    let count = |since| read_docs::status_counts(&state.store, caller.tenant, caller.company_id, since);
    Ok(axum::Json(DocumentStats {
        today: count(Some(today)).await?.into_iter().collect(),
        month: count(Some(month_start)).await?.into_iter().collect(),
        all: count(None).await?.into_iter().collect(),
    }))
}

/// The most documents one export holds; a larger one is refused, asking for a narrower filter.
pub const EXPORT_MAX_ROWS: usize = 100_000;

/// One CSV cell (RFC 4180): quoted when it holds a separator, a quote or a line break; a cell a
/// spreadsheet would run as a formula (`=`, `+`, `-`, `@`, tab, carriage return first) gets a
/// leading `'` so that it stays text.
fn csv_cell(text: &str) -> String {
    let text = if text.starts_with(['=', '+', '-', '@', '\t', '\r']) {
        format!("'{text}")
    } else {
        text.to_owned()
    };
    if text.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", text.replace('"', "\"\""))
    } else {
        text
    }
}

/// The filtered list as CSV, every matching document (newest first), for a spreadsheet: the
/// same filters as `GET /v1/documents` (`limit` and `cursor` do not apply). Columns: `id`, `type`,
/// `number`, `cdc`, `status`, `issue_date` (Paraguay's local date and time of `issue_datetime`),
/// `buyer_ruc`, `grand_total` (guaraníes), `currency`, `external_id`, `channel`, `created_at`.
#[utoipa::path(
    get,
    path = "/v1/documents/export",
    tag = "documents",
    security(("api_key" = []), ("session" = [])),
    params(ListQuery, ("X-Tenant-Id" = Uuid, Header, description = "The caller's tenant")),
    responses(
        (status = 200, description = "RFC 4180 CSV, UTF-8, a header row", content_type = "text/csv", body = String),
        (status = 400, description = "A malformed filter, `limit` or `cursor` given, or more than 100 000 documents match", body = ErrorBody)
    )
)]
pub async fn export_documents(
    State(state): State<AppState>,
    caller: Caller,
    Query(query): Query<ListQuery>,
) -> Result<Response, ApiError> {
    caller.require(READ_DOCUMENTS)?;
    for (field, given) in [("limit", &query.limit), ("cursor", &query.cursor)] {
        if given.is_some() {
            return Err(bad(
                field,
                "the export holds every matching document: narrow it with the filters instead",
            ));
        }
    }
    let (mut filter, _) = filter_from(&caller, &query)?;
    let mut body = String::from(
        "id,type,number,cdc,status,issue_date,buyer_ruc,grand_total,currency,external_id,channel,created_at\n",
    );
    let mut rows = 0;
    loop {
        let page = read_docs::list(&state.store, caller.tenant, &filter, 1000).await?;
        let Some(last) = page.last() else { break };
        filter.before = Some(last.id);
        rows += page.len();
        if rows > EXPORT_MAX_ROWS {
            return Err(ApiError::validation(format!(
                "more than {EXPORT_MAX_ROWS} documents match: narrow the export (date_from, date_to, status, company_id)"
            )));
        }
        for d in &page {
            let issued = kuatia_domain::local_time::paraguay(d.issue_datetime)
                .format("%Y-%m-%d %H:%M:%S")
                .to_string();
            let cells = [
                d.id.to_string(),
                d.doc_type.clone(),
                d.number.clone().unwrap_or_default(),
                d.cdc.clone().unwrap_or_default(),
                d.status.clone(),
                issued,
                d.buyer_ruc.clone().unwrap_or_default(),
                d.grand_total.clone(),
                "PYG".to_owned(),
                d.external_id.clone(),
                d.channel.clone(),
                d.created_at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
            ];
            let line: Vec<String> = cells.iter().map(|c| csv_cell(c)).collect();
            body.push_str(&line.join(","));
            body.push('\n');
        }
    }
    let today = kuatia_domain::local_time::paraguay_today(state.intake.clock.now());
    let name = format!("documentos-{}.csv", today.format("%Y%m%d"));
    Ok(attachment("text/csv; charset=utf-8", &name, body))
}

#[cfg(test)]
mod tests {
    use super::csv_cell;

    #[test]
    fn a_csv_cell_is_quoted_when_it_must_be_and_never_runs_as_a_formula() {
        assert_eq!(csv_cell("ERP-1"), "ERP-1");
        assert_eq!(csv_cell("a,b"), "\"a,b\"");
        assert_eq!(csv_cell("dijo \"sí\""), "\"dijo \"\"sí\"\"\"");
        assert_eq!(csv_cell("línea\notra"), "\"línea\notra\"");
        assert_eq!(csv_cell("=HYPERLINK(\"x\")"), "\"'=HYPERLINK(\"\"x\"\")\"");
        assert_eq!(csv_cell("+595"), "'+595");
        assert_eq!(csv_cell("@SUM(A1)"), "'@SUM(A1)");
    }
}
