//! The audit timeline of one document: every event with its time, actor, type, what it changed
//! (the document's state before and after, as a list of changed fields), its hash and the previous
//! one; the chain verified by the service when the page was drawn; the document as it stood at any
//! event; the stream as NDJSON for `kuatia events verify --file`.

use crate::extract::Query;
use askama::Template;
use axum::extract::State;
use axum::response::Response;
use kuatia_application::audit;
use serde::Deserialize;
use serde_json::Value;
use uuid::Uuid;

use crate::console::i18n;
use crate::console::{Chrome, Console};
use crate::error::ApiError;
use crate::extract::Path;
use crate::routes::documents::audit::StateQuery;
use crate::routes::documents::{self as api_docs};
use crate::state::AppState;

/// One changed field.
pub struct Change {
    pub path: String,
    pub before: String,
    pub after: String,
}

/// One event of the timeline.
pub struct EventLine {
    pub version: i64,
    pub position: i64,
    pub at: String,
    pub actor: String,
    pub event_type: String,
    pub event_words: String,
    pub status_words: String,
    pub hash: String,
    pub prev_hash: String,
    pub changes: Vec<Change>,
    pub selected: bool,
}

/// The audit page.
#[derive(Template)]
#[template(path = "console/audit.html")]
pub struct AuditPage {
    pub chrome: Chrome,
    pub id: String,
    pub title: String,
    pub events: Vec<EventLine>,
    pub verified: bool,
    pub checked: u64,
    pub head_hash: String,
    pub broken: Option<String>,
    pub checked_at: String,
    pub as_of: Option<(u64, String)>,
}

/// The longest value shown in a change; longer ones are cut with an ellipsis.
const SHOWN_CHARS: usize = 120;

fn shown(value: Option<&Value>) -> String {
    let text = match value {
        None | Some(Value::Null) => "—".to_owned(),
        Some(Value::String(s)) => s.clone(),
        Some(other) => other.to_string(),
    };
    if text.chars().count() > SHOWN_CHARS {
        format!("{}…", text.chars().take(SHOWN_CHARS).collect::<String>())
    } else {
        text
    }
}

/// The leaves of `before` and `after` that differ, by path (`status`, `answer.code`,
/// `document.items[0].quantity`); an array or object that appears or vanishes whole is one change.
pub fn diff(before: &Value, after: &Value) -> Vec<Change> {
    let mut out = Vec::new();
    walk("", Some(before), Some(after), &mut out);
    out
}

fn walk(path: &str, before: Option<&Value>, after: Option<&Value>, out: &mut Vec<Change>) {
    let join = |key: &str| {
        if path.is_empty() {
            key.to_owned()
        } else {
            format!("{path}.{key}")
        }
    };
    match (before, after) {
        (Some(Value::Object(a)), Some(Value::Object(b))) => {
            let mut keys: Vec<&String> = a.keys().chain(b.keys()).collect();
            keys.sort();
            keys.dedup();
            for key in keys {
                walk(&join(key), a.get(key), b.get(key), out);
            }
        }
        (Some(Value::Array(a)), Some(Value::Array(b))) if a.len() == b.len() => {
            for (i, (x, y)) in a.iter().zip(b).enumerate() {
                walk(&format!("{path}[{i}]"), Some(x), Some(y), out);
            }
        }
        (a, b) if a != b => {
            // `null` and absent are the same to a reader.
            let empty = |v: Option<&Value>| v.is_none_or(Value::is_null);
            if empty(a) && empty(b) {
                return;
            }
            out.push(Change {
                path: path.to_owned(),
                before: shown(a),
                after: shown(b),
            });
        }
        _ => {}
    }
}

/// `?version=` of the page: the event whose state to show.
#[derive(Debug, Default, Deserialize)]
pub struct AuditQuery {
    version: Option<String>,
}

/// `GET /console/documents/{id}/audit`.
pub async fn show(
    State(state): State<AppState>,
    mut console: Console,
    Path(id): Path<String>,
    Query(q): Query<AuditQuery>,
) -> Response {
    console.chrome.nav = "documents";
    let Ok(id) = id.parse::<Uuid>() else {
        return console.error_page(&ApiError::not_found("no such document"));
    };
    match page(&state, &console, id, q).await {
        Ok(page) => console.page(&page),
        Err(e) => console.error_page(&e),
    }
}

async fn page(state: &AppState, console: &Console, id: Uuid, q: AuditQuery) -> Result<AuditPage, ApiError> {
    let tr = console.chrome.tr;
    let caller = &console.caller;
    let timeline = api_docs::read::document_timeline(State(state.clone()), caller.clone(), Path(id))
        .await?
        .0;
    let chain = api_docs::audit::document_chain(State(state.clone()), caller.clone(), Path(id))
        .await?
        .0;
    let history = audit::history(&state.store, caller.tenant, id).await?;
    let as_json = |v: u64| {
        history
            .iter()
            .find(|(version, _)| *version == v)
            .and_then(|(_, s)| serde_json::to_value(s).ok())
            .unwrap_or(Value::Null)
    };
    let selected = q.version.as_deref().and_then(|v| v.trim().parse::<u64>().ok());
    let as_of = match q.version {
        Some(version) => {
            let view = api_docs::audit::document_state_as_of(
                State(state.clone()),
                caller.clone(),
                Path(id),
                Query(StateQuery {
                    version: Some(version),
                }),
            )
            .await?
            .0;
            let pretty = serde_json::to_string_pretty(&view.state).map_err(|e| ApiError::internal(&e))?;
            Some((view.version, pretty))
        }
        None => None,
    };
    let events = timeline
        .iter()
        .map(|e| {
            let version = e.version as u64;
            let before = if version > 1 {
                as_json(version - 1)
            } else {
                Value::Object(Default::default())
            };
            EventLine {
                version: e.version,
                position: e.position,
                at: i18n::local_seconds(e.at),
                actor: e
                    .actor
                    .as_ref()
                    .map(|a| {
                        a.name
                            .clone()
                            .unwrap_or_else(|| format!("{} {}", a.actor_type, a.id))
                    })
                    .unwrap_or_else(|| tr.t("actor-system")),
                event_words: tr.event(&e.event_type),
                event_type: e.event_type.clone(),
                status_words: tr.status(&e.status),
                hash: e.hash.clone(),
                prev_hash: e.prev_hash.clone().unwrap_or_else(|| "—".into()),
                changes: diff(&before, &as_json(version)),
                selected: selected == Some(version),
            }
        })
        .collect();
    let title = history
        .last()
        .map(|(_, s)| {
            format!(
                "{} {}",
                tr.doc_type(s.document.doc_type.as_str()),
                s.number.as_ref().map(ToString::to_string).unwrap_or_default()
            )
        })
        .unwrap_or_default();
    Ok(AuditPage {
        chrome: console.chrome.clone(),
        id: id.to_string(),
        title,
        events,
        verified: chain.verified,
        checked: chain.events,
        head_hash: chain.head_hash.unwrap_or_default(),
        broken: chain
            .broken_at
            .map(|b| format!("v{} (#{}) — {}", b.version, b.position, b.reason)),
        checked_at: i18n::local_seconds(state.intake.clock.now()),
        as_of,
    })
}

/// `GET /console/documents/{id}/events`: the stream as NDJSON (the API's export).
pub async fn download(State(state): State<AppState>, console: Console, Path(id): Path<String>) -> Response {
    let Ok(id) = id.parse::<Uuid>() else {
        return console.error_page(&ApiError::not_found("no such document"));
    };
    match api_docs::audit::document_events(State(state), console.caller.clone(), Path(id)).await {
        Ok(ndjson) => ndjson,
        Err(e) => console.error_page(&e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_diff_lists_the_changed_leaves_by_path() {
        let before = json!({"status": "queued", "cdc": null, "items": [{"q": 1}], "attempts": 0});
        let after =
            json!({"status": "transforming", "cdc": "0180", "items": [{"q": 2}], "attempts": 0, "lot": "7"});
        let changes: Vec<(String, String, String)> = diff(&before, &after)
            .into_iter()
            .map(|c| (c.path, c.before, c.after))
            .collect();
        assert_eq!(
            changes,
            vec![
                ("cdc".into(), "—".into(), "0180".into()),
                ("items[0].q".into(), "1".into(), "2".into()),
                ("lot".into(), "—".into(), "7".into()),
                ("status".into(), "queued".into(), "transforming".into()),
            ]
        );
    }
}
