//! The document list: the API's filters (status, channel, dates as Paraguay's calendar days), a
//! search box (number, CDC, external id, buyer RUC or name), cursor pages, and the CSV export of
//! the filtered list. Both call the REST handlers with the console's caller.

use crate::extract::Query;
use askama::Template;
use axum::extract::State;
use axum::response::Response;
use kuatia_domain::document::aggregate::DocumentStatus;
use serde::Deserialize;

use crate::console::i18n::{self, Tr};
use crate::console::{Chrome, Console, url_encode};
use crate::error::ApiError;
use crate::routes::documents::{DocumentView, ListQuery};
use crate::state::AppState;

/// A document in a list.
pub struct Row {
    pub id: String,
    pub number: String,
    pub doc_type: String,
    pub status: String,
    pub status_words: String,
    pub total: String,
    pub issued: String,
    pub external_id: String,
}

/// A list row from the API's view.
pub fn row(tr: Tr, d: &DocumentView) -> Row {
    let total = match &d.grand_total {
        serde_json::Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    Row {
        id: d.id.to_string(),
        number: d.number.clone().unwrap_or_else(|| "—".into()),
        doc_type: tr.doc_type(&d.doc_type),
        status: d.status.clone(),
        status_words: tr.status(&d.status),
        total: i18n::money(&total),
        issued: i18n::local(d.issue_datetime),
        external_id: d.external_id.clone(),
    }
}

/// The console's filters (dates are calendar days in Paraguay).
#[derive(Debug, Default, Deserialize, Clone)]
pub struct Filters {
    #[serde(default)]
    pub q: Option<String>,
    #[serde(default)]
    pub status: Option<String>,
    #[serde(default)]
    pub channel: Option<String>,
    #[serde(default)]
    pub from: Option<String>,
    #[serde(default)]
    pub to: Option<String>,
    #[serde(default)]
    pub delivery: Option<String>,
    #[serde(default)]
    pub cursor: Option<String>,
}

fn nonempty(v: &Option<String>) -> Option<String> {
    v.as_deref()
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
}

impl Filters {
    /// The API's query for these filters: `from` is the day's first moment in Paraguay, `to` the
    /// next day's (so that `to` includes its whole day).
    fn api_query(&self, limit: Option<&str>) -> Result<ListQuery, ApiError> {
        let day = |field: &str, text: Option<String>, next: bool| -> Result<Option<String>, ApiError> {
            let Some(text) = text else { return Ok(None) };
            let date = chrono::NaiveDate::parse_from_str(&text, "%Y-%m-%d")
                .map_err(|_| ApiError::invalid_field(field, "invalid_format", "a date is YYYY-MM-DD"))?;
            let date = if next {
                date.succ_opt().unwrap_or(date)
            } else {
                date
            };
            Ok(Some(format!("{}T00:00:00-03:00", date.format("%Y-%m-%d"))))
        };
        Ok(ListQuery {
            q: nonempty(&self.q),
            status: nonempty(&self.status),
            channel: nonempty(&self.channel),
            date_from: day("from", nonempty(&self.from), false)?,
            date_to: day("to", nonempty(&self.to), true)?,
            delivery: nonempty(&self.delivery),
            cursor: nonempty(&self.cursor),
            limit: limit.map(str::to_owned),
            ..ListQuery::default()
        })
    }

    /// These filters as a query string (without the cursor).
    pub fn query_string(&self) -> String {
        [
            ("q", &self.q),
            ("status", &self.status),
            ("channel", &self.channel),
            ("from", &self.from),
            ("to", &self.to),
            ("delivery", &self.delivery),
        ]
        .iter()
        .filter_map(|(k, v)| nonempty(v).map(|v| format!("{k}={}", url_encode(&v))))
        .collect::<Vec<_>>()
        .join("&")
    }
}

/// A status to choose in the filter.
pub struct StatusOption {
    pub value: String,
    pub words: String,
    pub selected: bool,
}

/// The list page.
#[derive(Template)]
#[template(path = "console/documents.html")]
pub struct DocumentsPage {
    pub chrome: Chrome,
    pub rows: Vec<Row>,
    pub filters: Filters,
    pub statuses: Vec<StatusOption>,
    pub next_url: Option<String>,
    pub export_url: String,
    pub error: Option<String>,
    pub paged: bool,
}

impl DocumentsPage {
    fn value(v: &Option<String>) -> &str {
        v.as_deref().unwrap_or("")
    }
    pub fn q(&self) -> &str {
        Self::value(&self.filters.q)
    }
    pub fn from(&self) -> &str {
        Self::value(&self.filters.from)
    }
    pub fn to(&self) -> &str {
        Self::value(&self.filters.to)
    }
    pub fn channel_is(&self, c: &str) -> bool {
        self.filters.channel.as_deref() == Some(c)
    }
    pub fn pending_manual(&self) -> bool {
        self.filters.delivery.as_deref() == Some("pending_manual")
    }
}

/// `GET /console/documents`.
pub async fn list(
    State(state): State<AppState>,
    mut console: Console,
    Query(filters): Query<Filters>,
) -> Response {
    console.chrome.nav = "documents";
    let tr = console.chrome.tr;
    let statuses = DocumentStatus::ALL
        .iter()
        .map(|s| StatusOption {
            value: s.as_str().to_owned(),
            words: tr.status(s.as_str()),
            selected: filters.status.as_deref() == Some(s.as_str()),
        })
        .collect();
    let query_string = filters.query_string();
    let listed = match filters.api_query(Some("50")) {
        Ok(query) => {
            crate::routes::documents::read::list_documents(State(state), console.caller.clone(), Query(query))
                .await
                .map(|j| j.0)
        }
        Err(e) => Err(e),
    };
    let (rows, next_url, error) = match listed {
        Ok(list) => (
            list.documents.iter().map(|d| row(tr, d)).collect(),
            list.next_cursor.map(|c| {
                let sep = if query_string.is_empty() { "" } else { "&" };
                format!("/console/documents?{query_string}{sep}cursor={c}")
            }),
            None,
        ),
        // A malformed filter shows on the page, with the filters kept (status 200: the page is
        // the answer, the message says what to fix).
        Err(e) if e.status.is_client_error() => (Vec::new(), None, Some(e.message)),
        Err(e) => return console.error_page(&e),
    };
    let page = DocumentsPage {
        paged: filters.cursor.is_some(),
        chrome: console.chrome.clone(),
        rows,
        statuses,
        next_url,
        export_url: format!("/console/documents/export?{query_string}"),
        filters,
        error,
    };
    console.page(&page)
}

/// `GET /console/documents/export`: the API's CSV export of the same filters.
pub async fn export(
    State(state): State<AppState>,
    console: Console,
    Query(mut filters): Query<Filters>,
) -> Response {
    filters.cursor = None;
    let query = match filters.api_query(None) {
        Ok(q) => q,
        Err(e) => return console.error_page(&e),
    };
    match crate::routes::documents::read::export_documents(State(state), console.caller.clone(), Query(query))
        .await
    {
        Ok(csv) => csv,
        Err(e) => console.error_page(&e),
    }
}
