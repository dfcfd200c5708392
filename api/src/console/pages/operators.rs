//! The operators' room (`/console/operators`): for the support staff of the whole service, not
//! for a tenant's people. Only the people `kuatia operators add` made operators get in; to anyone
//! else, logged in or not, every page of it is "not found" (404), so its existence is not said.
//!
//! It shows the projections (position, lag, last error) with "Reconstruir" (the CLI's
//! `projections::runtime::rebuild`, one at a time, refused while a task runs, its progress on the
//! page), the job queue by kind and status with a job's attempts and last error, "Reintentar" and
//! "Descartar" (`kuatia_application::support`, as `kuatia jobs retry|discard`), SIFEN's health (the
//! documents each tenant's companies have waiting, and this instance's answers by code and their
//! latency) and the event store (head position, events in the last minute, "Verificar" with
//! progress). Every action is an event of a support stream with the operator as actor.

use askama::Template;
use axum::Form;
use axum::extract::{FromRequestParts, State};
use axum::http::request::Parts;
use axum::response::Response;
use chrono::Utc;
use kuatia_application::event_store::ReadFilter;
use kuatia_application::jobs::{JobFilter, JobListStatus};
use kuatia_application::projection::SqlValue;
use kuatia_application::support::{self, OperatorTask, Tasks, claim, update};
use serde::Deserialize;

use crate::auth::SESSION_COOKIE;
use crate::console::i18n::{Lang, Tr};
use crate::console::{Chrome, cookie, csrf_of, flash_of, plain_error, redirect_with};
use crate::error::ApiError;
use crate::extract::{Path, Query};
use crate::state::AppState;

/// A request of an operator: a logged-in user whose email the system's support stream lists.
pub struct Operator {
    /// The operator's email (the actor of what they do).
    pub email: String,
    /// The page frame.
    pub chrome: Chrome,
}

impl FromRequestParts<AppState> for Operator {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Self::Rejection> {
        let tr = Tr {
            lang: Lang::of_request(&parts.headers),
        };
        let not_found = || plain_error(tr, &ApiError::not_found(tr.t("error-not-found")));
        let Some(token) = cookie(&parts.headers, SESSION_COOKIE).map(str::to_owned) else {
            return Err(not_found());
        };
        let user = match kuatia_application::identity::session(&state.store, &token).await {
            Ok(Some((_, user))) => user,
            Ok(None) => return Err(not_found()),
            Err(e) => return Err(plain_error(tr, &e.into())),
        };
        let operators = support::operators(&state.store)
            .await
            .map_err(|e| plain_error(tr, &e.into()))?;
        if !operators.contains(&user.email.to_lowercase()) {
            return Err(not_found());
        }
        let chrome = Chrome {
            tr,
            user: user.email.clone(),
            tenants: Vec::new(),
            tenant_name: tr.t("operators-service"),
            role: tr.t("role-operator"),
            csrf: csrf_of(&token),
            flash: flash_of(&parts.headers, tr),
            nav: "operators",
            here: parts
                .uri
                .path_and_query()
                .map_or("/console/operators".to_owned(), |p| p.as_str().to_owned()),
            can_issue: false,
            can_see_access: false,
            can_try: false,
            can_set_up: false,
        };
        Ok(Self {
            email: user.email,
            chrome,
        })
    }
}

/// A projection's row.
pub struct ProjectionRow {
    pub name: String,
    pub kind: String,
    pub position: i64,
    pub lag: i64,
    pub last_error: String,
    pub updated: String,
    pub rebuildable: bool,
}

/// A job's row.
pub struct JobRow {
    pub id: String,
    pub kind: String,
    pub status: &'static str,
    pub attempts: String,
    pub next: String,
    pub last_error: String,
    pub retryable: bool,
    pub discardable: bool,
}

/// Jobs of a kind in a state.
pub struct JobCountRow {
    pub kind: String,
    pub state: String,
    pub count: i64,
}

/// Documents waiting, by tenant and company.
pub struct WaitingRow {
    pub tenant: String,
    pub company: String,
    pub status: String,
    pub n: i64,
}

/// SIFEN's answers to one tenant's SIFEN channel in the last 24 hours, by code.
pub struct ChannelAnswerRow {
    pub tenant: String,
    pub company: String,
    pub channel: String,
    pub code: String,
    pub answers: i64,
    pub latency: String,
    pub last: String,
}

/// SIFEN answers of this instance by operation and code.
pub struct AnswerRow {
    pub operation: String,
    pub code: String,
    pub n: String,
}

/// A running or ended task, in words.
pub struct TaskView {
    pub title: String,
    pub running: bool,
    pub ok: bool,
    pub percent: i64,
    pub position: i64,
    pub head: i64,
    pub started: String,
    pub outcome: String,
}

/// The room.
#[derive(Template)]
#[template(path = "console/operators.html")]
pub struct RoomPage {
    pub chrome: Chrome,
    pub head: i64,
    pub last_minute: String,
    pub task: Option<TaskView>,
    pub projections: Vec<ProjectionRow>,
    pub job_counts: Vec<JobCountRow>,
    pub jobs: Vec<JobRow>,
    pub status: String,
    pub kind: String,
    pub statuses: Vec<(&'static str, String)>,
    pub waiting: Vec<WaitingRow>,
    pub channel_answers: Vec<ChannelAnswerRow>,
    pub answers: Vec<AnswerRow>,
    pub latency: Vec<AnswerRow>,
    pub busy: bool,
}

/// `?status=&kind=` of the jobs' list.
#[derive(Debug, Default, Deserialize)]
pub struct JobsQuery {
    pub status: Option<String>,
    pub kind: Option<String>,
}

/// `GET /console/operators`.
pub async fn show(State(state): State<AppState>, op: Operator, Query(query): Query<JobsQuery>) -> Response {
    match page(&state, &op, query).await {
        Ok(page) => op.chrome.page(&page),
        Err(e) => op.chrome.error_page(&e),
    }
}

async fn page(state: &AppState, op: &Operator, query: JobsQuery) -> Result<RoomPage, ApiError> {
    let tr = op.chrome.tr;
    let local = crate::console::i18n::local_seconds;
    let head = state.store.head_position().await?;
    let now = Utc::now();
    // Events in the last minute: the newest 2 000 at most, counted by their time.
    let recent = state
        .store
        .read_all_raw(&ReadFilter {
            after: (head - 2000).max(0),
            limit: 2000,
            ..ReadFilter::default()
        })
        .await?;
    let minute = recent
        .iter()
        .filter(|e| now - e.recorded_at <= chrono::Duration::seconds(60))
        .count();
    let last_minute = if minute >= 2000 {
        format!("≥ {minute}")
    } else {
        minute.to_string()
    };
    let task = state.operator_task.lock().ok().and_then(|t| t.clone());
    let busy = task.as_ref().is_some_and(|t| t.finished.is_none());
    let task = task.map(|t| TaskView {
        title: if t.kind == "rebuild" {
            tr.t1("operators-task-rebuild", "name", &t.name)
        } else {
            tr.t("operators-task-verify")
        },
        running: t.finished.is_none(),
        ok: t.ok,
        percent: if t.head > 0 {
            (t.position * 100 / t.head).clamp(0, 100)
        } else {
            100
        },
        position: t.position,
        head: t.head,
        started: tr.tn(
            "operators-task-started",
            &[("operator", &t.operator), ("at", &local(t.started))],
        ),
        outcome: t.outcome,
    });
    let projections = state
        .store
        .subscription_statuses()
        .await?
        .into_iter()
        .map(|s| ProjectionRow {
            rebuildable: state.projections.rebuildable(&s.name) == Some(true),
            name: s.name,
            kind: s.kind,
            position: s.position,
            lag: s.lag,
            last_error: s.last_error.unwrap_or_default(),
            updated: s.updated_at.map(local).unwrap_or_default(),
        })
        .collect();
    let job_counts = state
        .jobs
        .counts()
        .await?
        .into_iter()
        .map(|c| JobCountRow {
            kind: c.kind,
            state: c.state.as_str().to_owned(),
            count: c.count,
        })
        .collect();
    let status_text = query.status.clone().unwrap_or_default();
    let kind = query.kind.clone().unwrap_or_default();
    let jobs = state
        .jobs
        .list(&JobFilter {
            status: JobListStatus::parse(&status_text),
            kind: Some(kind.clone()).filter(|k| !k.is_empty()),
            document: None,
            limit: 100,
        })
        .await?
        .into_iter()
        .map(|j| {
            let status = support::job_status(&j);
            JobRow {
                id: j.id.to_string(),
                kind: j.kind.clone(),
                status,
                attempts: format!("{}/{}", j.attempts, j.max_attempts),
                next: local(j.next_attempt_at),
                last_error: j.last_error.clone().unwrap_or_default(),
                retryable: matches!(status, "dead" | "pending" | "failed"),
                discardable: matches!(status, "pending" | "failed"),
            }
        })
        .collect();
    let int = |v: &SqlValue| match v {
        SqlValue::Int(n) => *n,
        SqlValue::Text(t) => t.parse().unwrap_or(0),
        _ => 0,
    };
    let text = |v: &SqlValue| v.as_text().unwrap_or_default();
    // Documents waiting for SIFEN (or the printer), by tenant and company: the per-day counts,
    // never the documents themselves.
    let waiting = state
        .store
        .query(
            "SELECT COALESCE(t.slug, CAST(c.tenant_id AS TEXT)), COALESCE(co.ruc, CAST(c.company_id AS TEXT)), \
               c.status, CAST(SUM(c.n) AS BIGINT) FROM document_counts c \
             LEFT JOIN tenants t ON t.id = c.tenant_id LEFT JOIN companies co ON co.id = c.company_id \
             WHERE c.status IN ('queued', 'signing', 'submitting', 'submitted', 'retrying') \
             GROUP BY c.tenant_id, t.slug, c.company_id, co.ruc, c.status HAVING SUM(c.n) > 0 \
             ORDER BY SUM(c.n) DESC LIMIT 50",
            &[],
        )
        .await?
        .into_iter()
        .map(|row| WaitingRow {
            tenant: text(&row[0]),
            company: text(&row[1]),
            status: tr.status(&text(&row[2])),
            n: int(&row[3]),
        })
        .collect();
    // SIFEN's answers to each tenant's SIFEN channels in the last 24 hours (the `sifen_answers`
    // read model, by hour: at most 24 rows per channel and code are summed).
    let since = now - chrono::Duration::hours(24);
    let since = chrono::DurationRound::duration_trunc(since, chrono::TimeDelta::hours(1)).unwrap_or(since);
    let channel_answers = state
        .store
        .query(
            "SELECT COALESCE(t.slug, CAST(a.tenant_id AS TEXT)), COALESCE(co.ruc, CAST(a.company_id AS TEXT)), \
               CAST(a.channel_id AS TEXT), a.code, CAST(SUM(a.answers) AS BIGINT), \
               CAST(SUM(a.latency_ms) AS BIGINT), CAST(SUM(a.timed) AS BIGINT), MAX(a.last_at) \
             FROM sifen_answers a LEFT JOIN tenants t ON t.id = a.tenant_id \
             LEFT JOIN companies co ON co.id = a.company_id WHERE a.hour >= $1 \
             GROUP BY a.tenant_id, t.slug, a.company_id, co.ruc, a.channel_id, a.code \
             ORDER BY 1, 2, 3, 4 LIMIT 200",
            &[SqlValue::Timestamp(since)],
        )
        .await?
        .into_iter()
        .map(|row| {
            let code = text(&row[3]);
            let (latency_ms, timed) = (int(&row[5]), int(&row[6]));
            ChannelAnswerRow {
                tenant: text(&row[0]),
                company: text(&row[1]),
                channel: text(&row[2]).chars().take(8).collect(),
                code: if code == support::SIFEN_RETRY_CODE {
                    tr.t("operators-code-retry")
                } else {
                    code
                },
                answers: int(&row[4]),
                latency: if timed > 0 {
                    format!("{} ms", kuatia_domain::format::quantity(&(latency_ms / timed).to_string()))
                } else {
                    "—".to_owned()
                },
                last: row[7].as_timestamp().map(local).unwrap_or_default(),
            }
        })
        .collect();
    let exposition = state.prometheus.render();
    let (answers, latency) = sifen_answers(&exposition);
    Ok(RoomPage {
        chrome: op.chrome.clone(),
        head,
        last_minute,
        task,
        projections,
        job_counts,
        jobs,
        status: status_text,
        kind,
        statuses: ["", "pending", "failed", "running", "succeeded", "dead"]
            .into_iter()
            .map(|s| {
                (
                    s,
                    tr.t(&format!(
                        "operators-job-status-{}",
                        if s.is_empty() { "all" } else { s }
                    )),
                )
            })
            .collect(),
        waiting,
        channel_answers,
        answers,
        latency,
        busy,
    })
}

/// This instance's SIFEN answers by operation and code, and the mean time of a request by
/// operation, from its Prometheus exposition.
fn sifen_answers(exposition: &str) -> (Vec<AnswerRow>, Vec<AnswerRow>) {
    let label = |line: &str, name: &str| {
        let key = format!("{name}=\"");
        line.find(&key).and_then(|at| {
            let rest = &line[at + key.len()..];
            rest.split('"').next().map(str::to_owned)
        })
    };
    let value = |line: &str| line.rsplit(' ').next().and_then(|v| v.parse::<f64>().ok());
    let mut answers = Vec::new();
    let mut sums = std::collections::BTreeMap::<String, (f64, f64)>::new();
    for line in exposition.lines().filter(|l| !l.starts_with('#')) {
        let name = line.split('{').next().unwrap_or_default();
        match (name, label(line, "operation"), value(line)) {
            ("kuatia_sifen_responses_total", Some(operation), Some(n)) => {
                if let Some(code) = label(line, "code") {
                    answers.push(AnswerRow {
                        operation,
                        code,
                        n: format!("{n:.0}"),
                    });
                }
            }
            ("kuatia_sifen_request_duration_seconds_sum", Some(operation), Some(v)) => {
                sums.entry(operation).or_default().0 += v;
            }
            ("kuatia_sifen_request_duration_seconds_count", Some(operation), Some(v)) => {
                sums.entry(operation).or_default().1 += v;
            }
            _ => {}
        }
    }
    let latency = sums
        .into_iter()
        .filter(|(_, (_, n))| *n > 0.0)
        .map(|(op, (sum, n))| AnswerRow {
            operation: op,
            code: format!("{:.0} ms", sum / n * 1000.0),
            n: format!("{n:.0}"),
        })
        .collect();
    (answers, latency)
}

/// A form with only its token (and a reason).
#[derive(Debug, Deserialize)]
pub struct ActionForm {
    pub csrf: Option<String>,
    pub reason: Option<String>,
}

/// Claims the room's slot for a task of `kind` (on projection `name`) by `op`: the slot to report
/// to, or `None` while another task runs.
fn begin(state: &AppState, op: &Operator, kind: &'static str, name: &str) -> Option<Tasks> {
    let task = OperatorTask {
        kind,
        name: name.to_owned(),
        operator: op.email.clone(),
        started: Utc::now(),
        position: 0,
        head: 0,
        finished: None,
        ok: false,
        outcome: String::new(),
    };
    claim(&state.operator_task, task).then(|| state.operator_task.clone())
}

/// Notes how far the task got.
fn advance(tasks: &Tasks, position: i64, head: i64) {
    update(tasks, |t| {
        t.position = position;
        t.head = head;
    });
}

/// Notes the task's end and what it found.
fn end(tasks: &Tasks, ok: bool, outcome: String) {
    update(tasks, |t| {
        t.finished = Some(Utc::now());
        t.ok = ok;
        t.outcome = outcome;
        if ok {
            t.position = t.head.max(t.position);
        }
    });
}

/// `POST /console/operators/projections/{name}/rebuild`: empties the projection and replays it
/// in the background, the page showing how far it got; recorded as `ProjectionRebuilt`.
pub async fn rebuild(
    State(state): State<AppState>,
    op: Operator,
    Path(name): Path<String>,
    Form(form): Form<ActionForm>,
) -> Response {
    if let Some(r) = op.chrome.refuse_forged(form.csrf.as_deref()) {
        return r;
    }
    let tr = op.chrome.tr;
    match state.projections.rebuildable(&name) {
        None => return op.chrome.error_page(&ApiError::not_found("no such projection")),
        Some(false) => return redirect_with("/console/operators", false, &tr.t("operators-side-effect")),
        Some(true) => {}
    }
    let Some(tasks) = begin(&state, &op, "rebuild", &name) else {
        return redirect_with("/console/operators", false, &tr.t("operators-busy"));
    };
    let (store, projections, operator) = (state.store.clone(), state.projections.clone(), op.email);
    let started = tr.t1("operators-rebuild-started", "name", &name);
    tokio::spawn(async move {
        let progress = |position, head| advance(&tasks, position, head);
        match support::rebuild_projection(&store, projections.as_ref(), &name, &operator, &progress).await {
            Ok(events) => end(&tasks, true, tr.t1("operators-rebuilt-events", "n", events)),
            Err(e) => end(&tasks, false, e),
        }
    });
    redirect_with("/console/operators", true, &started)
}

/// `POST /console/operators/verify`: checks every stream's hash chain in the background;
/// recorded as `EventsVerified`.
pub async fn verify(State(state): State<AppState>, op: Operator, Form(form): Form<ActionForm>) -> Response {
    if let Some(r) = op.chrome.refuse_forged(form.csrf.as_deref()) {
        return r;
    }
    let tr = op.chrome.tr;
    let Some(tasks) = begin(&state, &op, "verify", "") else {
        return redirect_with("/console/operators", false, &tr.t("operators-busy"));
    };
    let (store, operator) = (state.store.clone(), op.email);
    tokio::spawn(async move {
        let progress = |position, head| advance(&tasks, position, head);
        match support::verify_recorded(&store, &operator, &progress).await {
            Ok(found) => match &found.broken {
                Some(b) => end(
                    &tasks,
                    false,
                    format!(
                        "event {} (position {}, stream {}): {}",
                        b.event_id, b.global_position, b.stream_id, b.reason
                    ),
                ),
                None => end(
                    &tasks,
                    true,
                    tr.tn(
                        "operators-verified",
                        &[("events", &found.checked), ("streams", &found.streams)],
                    ),
                ),
            },
            Err(e) => end(&tasks, false, e.to_string()),
        }
    });
    redirect_with("/console/operators", true, &tr.t("operators-verify-started"))
}

/// `POST /console/operators/jobs/{id}/retry`.
pub async fn retry_job(
    State(state): State<AppState>,
    op: Operator,
    Path(id): Path<String>,
    Form(form): Form<ActionForm>,
) -> Response {
    if let Some(r) = op.chrome.refuse_forged(form.csrf.as_deref()) {
        return r;
    }
    let Ok(id) = id.parse::<uuid::Uuid>() else {
        return op.chrome.error_page(&ApiError::not_found("no such job"));
    };
    let reason = form.reason.map(|r| r.trim().to_owned()).filter(|r| !r.is_empty());
    let done = support::retry_job(&state.store, state.jobs.as_ref(), id, &op.email, reason).await;
    said(&op, done, "operators-job-retried")
}

/// `POST /console/operators/jobs/{id}/discard` (a reason is required).
pub async fn discard_job(
    State(state): State<AppState>,
    op: Operator,
    Path(id): Path<String>,
    Form(form): Form<ActionForm>,
) -> Response {
    if let Some(r) = op.chrome.refuse_forged(form.csrf.as_deref()) {
        return r;
    }
    let Ok(id) = id.parse::<uuid::Uuid>() else {
        return op.chrome.error_page(&ApiError::not_found("no such job"));
    };
    let reason = form.reason.unwrap_or_default();
    let done = support::discard_job(&state.store, state.jobs.as_ref(), id, &op.email, &reason).await;
    said(&op, done, "operators-job-discarded")
}

fn said(
    op: &Operator,
    done: Result<kuatia_application::jobs::Job, support::SupportError>,
    key: &str,
) -> Response {
    let tr = op.chrome.tr;
    match done {
        Ok(job) => redirect_with(
            "/console/operators#jobs",
            true,
            &tr.tn(
                key,
                &[
                    ("id", &job.id),
                    ("kind", &job.kind),
                    ("status", &support::job_status(&job)),
                ],
            ),
        ),
        Err(support::SupportError::Store(e)) => op.chrome.error_page(&e.into()),
        Err(support::SupportError::NoReason) => {
            redirect_with("/console/operators#jobs", false, &tr.t("operators-reason-needed"))
        }
        Err(e) => redirect_with("/console/operators#jobs", false, &e.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sifen_answers_are_read_from_the_exposition_by_operation_and_code() {
        let exposition = "# TYPE kuatia_sifen_responses_total counter\n\
            kuatia_sifen_responses_total{operation=\"recep_de\",code=\"0260\"} 3\n\
            kuatia_sifen_responses_total{operation=\"recep_de\",code=\"timeout\"} 1\n\
            kuatia_sifen_request_duration_seconds_sum{operation=\"recep_de\"} 0.8\n\
            kuatia_sifen_request_duration_seconds_count{operation=\"recep_de\"} 4\n";
        let (answers, latency) = sifen_answers(exposition);
        let codes: Vec<(&str, &str)> = answers.iter().map(|a| (a.code.as_str(), a.n.as_str())).collect();
        assert_eq!(codes, [("0260", "3"), ("timeout", "1")]);
        assert_eq!(latency.len(), 1);
        assert_eq!(latency[0].code, "200 ms");
    }
}
