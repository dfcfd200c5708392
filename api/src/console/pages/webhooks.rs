//! Webhooks (`/console/webhooks`): the tenant's endpoints (create with the secret shown once,
//! test, rotate the secret, deactivate and activate again, delete), an endpoint's deliveries by
//! status with a replay of the ones chosen, and a delivery with its payload and every attempt's
//! answer. Every action calls the REST handler of `/v1/webhooks`, so the roles, company scopes,
//! URL rules and refusals are the API's.

use askama::Template;
use axum::Form;
use axum::extract::State;
use axum::response::Response;
use serde::Deserialize;
use serde_json::json;
use uuid::Uuid;

use super::TokenForm;
use crate::console::i18n::{Tr, local, local_seconds};
use crate::console::{Chrome, Console, redirect_with};
use crate::error::ApiError;
use crate::extract::{Json, Path, Query};
use crate::routes::webhooks as api;
use crate::state::AppState;

/// Where the endpoint forms come back to.
const HERE: &str = "/console/webhooks";

/// An endpoint as listed.
pub struct EndpointLine {
    pub id: Uuid,
    pub url: String,
    pub description: String,
    pub events: String,
    pub active: bool,
    /// After a rotation: until when the previous secret also signs, in words.
    pub previous_until: Option<String>,
}

/// An event type to subscribe to.
pub struct EventChoice {
    pub value: &'static str,
    pub checked: bool,
}

/// A secret to show once.
pub struct SecretShown {
    pub title: String,
    pub value: String,
}

/// What the create form held when it was refused.
#[derive(Default)]
pub struct Typed {
    pub url: String,
    pub description: String,
}

/// The endpoints page.
#[derive(Template)]
#[template(path = "console/webhooks.html")]
pub struct WebhooksPage {
    pub chrome: Chrome,
    pub endpoints: Vec<EndpointLine>,
    pub events: Vec<EventChoice>,
    pub all_events: bool,
    pub can_manage: bool,
    pub secret: Option<SecretShown>,
    pub problem: Option<String>,
    pub typed: Typed,
}

/// A delivery as listed.
pub struct DeliveryLine {
    pub id: Uuid,
    pub event_type: String,
    pub status: String,
    pub status_words: String,
    pub attempts: u32,
    pub answer: String,
    pub created: String,
}

/// A status to filter by.
pub struct StatusChoice {
    pub value: &'static str,
    pub words: String,
    pub selected: bool,
}

/// One endpoint and its deliveries.
#[derive(Template)]
#[template(path = "console/webhook.html")]
pub struct EndpointPage {
    pub chrome: Chrome,
    pub endpoint: EndpointLine,
    pub deliveries: Vec<DeliveryLine>,
    pub statuses: Vec<StatusChoice>,
    pub can_manage: bool,
}

/// One attempt as shown.
pub struct AttemptLine {
    pub round: u32,
    pub attempt: u32,
    pub at: String,
    pub status_words: String,
    pub status: String,
    pub answer: String,
}

/// A delivery, its payload and attempts.
#[derive(Template)]
#[template(path = "console/webhook_delivery.html")]
pub struct DeliveryPage {
    pub chrome: Chrome,
    pub endpoint_id: Uuid,
    pub endpoint_url: String,
    pub id: Uuid,
    pub event_id: String,
    pub event_type: String,
    pub status: String,
    pub status_words: String,
    pub document_id: Option<Uuid>,
    pub created: String,
    pub delivered: Option<String>,
    pub next_attempt: Option<String>,
    pub payload: String,
    pub attempts: Vec<AttemptLine>,
    pub can_manage: bool,
}

/// A delivery status in words (`webhooks-status-<status>`).
fn status_words(tr: Tr, status: &str) -> String {
    tr.t(&format!("webhooks-status-{status}"))
}

/// The receiver's answer in words: its HTTP status, or what went wrong.
fn answer_words(tr: Tr, status_code: Option<u16>, error: Option<&str>) -> String {
    match (status_code, error) {
        (Some(code), _) => tr.t1("webhooks-answered", "code", code),
        (None, Some(error)) => error.to_owned(),
        (None, None) => String::new(),
    }
}

fn endpoint_line(view: api::WebhookView) -> EndpointLine {
    EndpointLine {
        id: view.id,
        url: view.url,
        description: view.description.unwrap_or_default(),
        events: view.events.join(", "),
        active: view.active,
        previous_until: view.previous_secret_expires_at.map(local),
    }
}

/// `GET /console/webhooks`.
pub async fn show(State(state): State<AppState>, mut console: Console) -> Response {
    console.chrome.nav = "webhooks";
    render(&state, &console, None, None, Typed::default(), &[]).await
}

async fn render(
    state: &AppState,
    console: &Console,
    secret: Option<SecretShown>,
    problem: Option<String>,
    typed: Typed,
    chosen: &[String],
) -> Response {
    let listed = api::list_webhooks(
        State(state.clone()),
        console.caller.clone(),
        Query(api::WebhookFilter { company_id: None }),
    )
    .await;
    match listed {
        Ok(listed) => console.page(&WebhooksPage {
            chrome: console.chrome.clone(),
            endpoints: listed.0.into_iter().map(endpoint_line).collect(),
            events: kuatia_domain::webhook::EVENT_TYPES
                .iter()
                .map(|e| EventChoice {
                    value: e,
                    checked: chosen.iter().any(|c| c == e),
                })
                .collect(),
            all_events: chosen.is_empty() || chosen.iter().any(|c| c == "*"),
            can_manage: console.may(api::MANAGE_WEBHOOKS),
            secret,
            problem,
            typed,
        }),
        Err(e) => console.error_page(&e),
    }
}

/// A refusal of a form: a role not allowed, or a thing not there, is the refusal page (`None`);
/// any other refusal (a URL the rules refuse) is said on the page, by field.
fn refusal_words(e: &ApiError) -> Option<String> {
    (!matches!(e.status.as_u16(), 403 | 404)).then(|| super::issues_said(e).join(" · "))
}

/// `POST /console/webhooks`: the endpoint's secret is shown on the answer itself, once.
pub async fn create(
    State(state): State<AppState>,
    mut console: Console,
    Form(fields): Form<Vec<(String, String)>>,
) -> Response {
    console.chrome.nav = "webhooks";
    let field = |name: &str| {
        fields
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.trim().to_owned())
            .unwrap_or_default()
    };
    if let Some(r) = console.refuse_forged(Some(&field("csrf"))) {
        return r;
    }
    let tr = console.chrome.tr;
    let mut events: Vec<String> = fields
        .iter()
        .filter(|(k, _)| k == "events")
        .map(|(_, v)| v.clone())
        .collect();
    if field("all") == "1" || events.is_empty() {
        events = vec!["*".to_owned()];
    }
    let typed = Typed {
        url: field("url"),
        description: field("description"),
    };
    let description = Some(typed.description.clone()).filter(|d| !d.is_empty());
    let body = json!({ "url": typed.url, "description": description, "events": events });
    let created = match serde_json::from_value(body) {
        Ok(body) => api::create_webhook(State(state.clone()), console.caller.clone(), Json(body)).await,
        Err(e) => Err(ApiError::validation(e.to_string())),
    };
    match created {
        Ok((_, created)) => {
            let shown = SecretShown {
                title: tr.t1("webhooks-created", "url", &created.0.webhook.url),
                value: created.0.secret.clone(),
            };
            render(&state, &console, Some(shown), None, Typed::default(), &[]).await
        }
        Err(e) => match refusal_words(&e) {
            Some(problem) => render(&state, &console, None, Some(problem), typed, &events).await,
            None => console.error_page(&e),
        },
    }
}

/// `POST /console/webhooks/{id}/rotate`: the new secret, shown once.
pub async fn rotate(
    State(state): State<AppState>,
    mut console: Console,
    Path(id): Path<String>,
    Form(form): Form<TokenForm>,
) -> Response {
    console.chrome.nav = "webhooks";
    let id = match console.target(form.csrf.as_deref(), &id, "webhook endpoint") {
        Ok(id) => id,
        Err(refused) => return *refused,
    };
    match api::rotate_webhook_secret(State(state.clone()), console.caller.clone(), Path(id)).await {
        Ok(rotated) => {
            let tr = console.chrome.tr;
            let shown = SecretShown {
                title: tr.t1("webhooks-rotated", "url", &rotated.0.webhook.url),
                value: rotated.0.secret.clone(),
            };
            render(&state, &console, Some(shown), None, Typed::default(), &[]).await
        }
        Err(e) => console.error_page(&e),
    }
}

/// `POST /console/webhooks/{id}/test`: a signed `webhook.test` now; the answer said above.
pub async fn test(
    State(state): State<AppState>,
    console: Console,
    Path(id): Path<String>,
    Form(form): Form<TokenForm>,
) -> Response {
    let id = match console.target(form.csrf.as_deref(), &id, "webhook endpoint") {
        Ok(id) => id,
        Err(refused) => return *refused,
    };
    let tr = console.chrome.tr;
    match api::test_webhook(State(state), console.caller.clone(), Path(id)).await {
        Ok(result) => {
            let answer = answer_words(tr, result.0.status_code, result.0.error.as_deref());
            let (ok, key) = if result.0.delivered {
                (true, "webhooks-test-delivered")
            } else {
                (false, "webhooks-test-failed")
            };
            redirect_with(HERE, ok, &tr.t1(key, "answer", answer))
        }
        Err(e) => console.error_page(&e),
    }
}

/// The switch form: `active` is `true` or `false`.
#[derive(Debug, Deserialize)]
pub struct ActiveForm {
    csrf: Option<String>,
    active: Option<String>,
}

/// `POST /console/webhooks/{id}/active`: deactivate (deliveries stop) or activate again.
pub async fn set_active(
    State(state): State<AppState>,
    console: Console,
    Path(id): Path<String>,
    Form(form): Form<ActiveForm>,
) -> Response {
    let id = match console.target(form.csrf.as_deref(), &id, "webhook endpoint") {
        Ok(id) => id,
        Err(refused) => return *refused,
    };
    let active = form.active.as_deref() == Some("true");
    let answer = api::update_webhook(
        State(state),
        console.caller.clone(),
        Path(id),
        Json(json!({ "active": active })),
    )
    .await;
    let done = if active {
        "webhooks-activated"
    } else {
        "webhooks-deactivated"
    };
    match answer {
        Ok(_) => redirect_with(HERE, true, &console.chrome.tr.t(done)),
        Err(e) => match refusal_words(&e) {
            Some(words) => redirect_with(HERE, false, &words),
            None => console.error_page(&e),
        },
    }
}

/// `POST /console/webhooks/{id}/delete`.
pub async fn delete(
    State(state): State<AppState>,
    console: Console,
    Path(id): Path<String>,
    Form(form): Form<TokenForm>,
) -> Response {
    let id = match console.target(form.csrf.as_deref(), &id, "webhook endpoint") {
        Ok(id) => id,
        Err(refused) => return *refused,
    };
    match api::delete_webhook(State(state), console.caller.clone(), Path(id)).await {
        Ok(_) => redirect_with(HERE, true, &console.chrome.tr.t("webhooks-deleted")),
        Err(e) => console.error_page(&e),
    }
}

/// The deliveries' filter.
#[derive(Debug, Deserialize)]
pub struct DeliveriesQuery {
    status: Option<String>,
}

/// `GET /console/webhooks/{id}`: the endpoint and its latest 100 deliveries, by status.
pub async fn endpoint(
    State(state): State<AppState>,
    mut console: Console,
    Path(id): Path<String>,
    axum::extract::Query(query): axum::extract::Query<DeliveriesQuery>,
) -> Response {
    console.chrome.nav = "webhooks";
    let Ok(id) = id.parse::<Uuid>() else {
        return console.error_page(&ApiError::not_found("no such webhook endpoint"));
    };
    let tr = console.chrome.tr;
    let status = query.status.filter(|s| !s.is_empty());
    let listed = async {
        let endpoints = api::list_webhooks(
            State(state.clone()),
            console.caller.clone(),
            Query(api::WebhookFilter { company_id: None }),
        )
        .await?
        .0;
        let endpoint = endpoints
            .into_iter()
            .find(|e| e.id == id)
            .ok_or_else(|| ApiError::not_found("no such webhook endpoint"))?;
        let deliveries = api::list_deliveries(
            State(state.clone()),
            console.caller.clone(),
            Path(id),
            Query(api::DeliveryFilter {
                status: status.clone(),
                limit: Some(100),
            }),
        )
        .await?
        .0;
        Ok::<_, ApiError>((endpoint, deliveries))
    }
    .await;
    let (endpoint, deliveries) = match listed {
        Ok(listed) => listed,
        Err(e) => return console.error_page(&e),
    };
    let statuses = kuatia_application::webhooks::DeliveryStatus::ALL
        .iter()
        .map(|s| StatusChoice {
            value: s.as_str(),
            words: status_words(tr, s.as_str()),
            selected: status.as_deref() == Some(s.as_str()),
        })
        .collect();
    console.page(&EndpointPage {
        chrome: console.chrome.clone(),
        endpoint: endpoint_line(endpoint),
        deliveries: deliveries
            .into_iter()
            .map(|d| DeliveryLine {
                id: d.id,
                status_words: status_words(tr, &d.status),
                answer: answer_words(tr, d.last_status_code, d.last_error.as_deref()),
                event_type: d.event_type,
                status: d.status,
                attempts: d.attempts,
                created: local(d.created_at),
            })
            .collect(),
        statuses,
        can_manage: console.may(api::MANAGE_WEBHOOKS),
    })
}

/// `GET /console/webhooks/{id}/deliveries/{delivery_id}`.
pub async fn delivery(
    State(state): State<AppState>,
    mut console: Console,
    Path((id, delivery_id)): Path<(String, String)>,
) -> Response {
    console.chrome.nav = "webhooks";
    let (Ok(id), Ok(delivery_id)) = (id.parse::<Uuid>(), delivery_id.parse::<Uuid>()) else {
        return console.error_page(&ApiError::not_found("no such delivery of this endpoint"));
    };
    let tr = console.chrome.tr;
    let found = async {
        let detail = api::get_delivery(
            State(state.clone()),
            console.caller.clone(),
            Path((id, delivery_id)),
        )
        .await?
        .0;
        let url = api::list_webhooks(
            State(state.clone()),
            console.caller.clone(),
            Query(api::WebhookFilter { company_id: None }),
        )
        .await?
        .0
        .into_iter()
        .find(|e| e.id == id)
        .map(|e| e.url)
        .unwrap_or_default();
        Ok::<_, ApiError>((detail, url))
    }
    .await;
    let (detail, endpoint_url) = match found {
        Ok(found) => found,
        Err(e) => return console.error_page(&e),
    };
    let d = detail.delivery;
    console.page(&DeliveryPage {
        chrome: console.chrome.clone(),
        endpoint_id: id,
        endpoint_url,
        id: d.id,
        event_id: d.event_id,
        event_type: d.event_type,
        status_words: status_words(tr, &d.status),
        status: d.status,
        document_id: d.document_id,
        created: local_seconds(d.created_at),
        delivered: d.delivered_at.map(local_seconds),
        next_attempt: d.next_attempt_at.map(local_seconds),
        payload: serde_json::to_string_pretty(&detail.payload).unwrap_or_default(),
        attempts: detail
            .history
            .into_iter()
            .map(|a| AttemptLine {
                round: a.replay,
                attempt: a.attempt,
                at: local_seconds(a.at),
                status_words: status_words(tr, &a.status),
                answer: answer_words(tr, a.status_code, a.error.as_deref()),
                status: a.status,
            })
            .collect(),
        can_manage: console.may(api::MANAGE_WEBHOOKS),
    })
}

/// `POST /console/webhooks/{id}/replay`: every delivery chosen (`delivery_id`, repeated) queued
/// again, each through `POST /v1/webhooks/{id}/replay`; back to where the form was (`back`).
pub async fn replay(
    State(state): State<AppState>,
    console: Console,
    Path(id): Path<String>,
    Form(fields): Form<Vec<(String, String)>>,
) -> Response {
    let value = |name: &str| fields.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str());
    let id = match console.target(value("csrf"), &id, "webhook endpoint") {
        Ok(id) => id,
        Err(refused) => return *refused,
    };
    let tr = console.chrome.tr;
    let endpoint_page = format!("{HERE}/{id}");
    // Back to the endpoint's page or one of its deliveries' pages, never elsewhere.
    let back = value("back")
        .filter(|b| *b == endpoint_page || b.starts_with(&format!("{endpoint_page}/deliveries/")))
        .unwrap_or(&endpoint_page)
        .to_owned();
    let chosen: Vec<&str> = fields
        .iter()
        .filter(|(k, _)| k == "delivery_id")
        .map(|(_, v)| v.as_str())
        .collect();
    if chosen.is_empty() {
        return redirect_with(&back, false, &tr.t("webhooks-replay-none"));
    }
    let mut queued = 0;
    for delivery in chosen {
        let Ok(delivery) = delivery.parse::<Uuid>() else {
            return console.error_page(&ApiError::not_found("no such delivery of this endpoint"));
        };
        let answer = api::replay_delivery(
            State(state.clone()),
            console.caller.clone(),
            Path(id),
            Json(json!({ "delivery_id": delivery })),
        )
        .await;
        match answer {
            Ok(_) => queued += 1,
            Err(e) => return console.error_page(&e),
        }
    }
    redirect_with(&back, true, &tr.t1("webhooks-replayed", "count", queued))
}
