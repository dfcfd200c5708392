//! One document: header, buyer, items, SIFEN's answer in words, artifacts (the KuDE to view or
//! save, the signed XML), the deliveries waiting for the issuer's hand, and the actions the role
//! allows — retry, cancel (with the window left), inutilize, regenerate the PDF, record a delivery
//! by hand, make a public link for the customer. Every action calls the REST handler.

use askama::Template;
use axum::Form;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::Response;
use chrono::Utc;
use kuatia_domain::channel::ChannelKind;
use kuatia_domain::document::aggregate::{DocumentState, DocumentStatus, cancellation_window};
use serde::Deserialize;
use serde_json::json;
use uuid::Uuid;

use super::TokenForm;
use crate::console::i18n::{self, Tr};
use crate::console::{Chrome, Console, redirect_with, url_encode};
use crate::error::ApiError;
use crate::extract::Path;
use crate::routes::documents::{self as api_docs, JsonBytes, SifenAnswerView};
use crate::state::AppState;

/// A line of the document.
pub struct ItemLine {
    pub description: String,
    pub quantity: String,
    pub unit_price: String,
    pub tax_rate: String,
    pub total: String,
}

/// An artifact with its links.
pub struct ArtifactLink {
    pub kind: String,
    pub version: i64,
    pub size: String,
    pub created: String,
    pub view_url: Option<String>,
    pub download_url: String,
}

/// A delivery of the document.
pub struct DeliveryLine {
    pub target: String,
    pub channel: String,
    pub status: String,
    pub waits_for_hand: bool,
    pub at: String,
}

/// A delivery recorded by hand.
pub struct HandLine {
    pub channel: String,
    pub sent: bool,
    pub recipient: String,
    pub note: String,
    pub at: String,
}

/// The document page.
#[derive(Template)]
#[template(path = "console/document.html")]
pub struct DocumentPage {
    pub chrome: Chrome,
    pub id: String,
    pub doc_type: String,
    pub number: String,
    pub cdc: Option<String>,
    pub status: String,
    pub status_words: String,
    pub channel: String,
    pub external_id: String,
    pub issued: String,
    pub buyer_name: String,
    pub buyer_ruc: String,
    pub buyer_email: String,
    pub items: Vec<ItemLine>,
    pub subtotal: String,
    pub tax_total: String,
    pub grand_total: String,
    pub errors: Vec<String>,
    pub sifen: Option<SifenAnswerView>,
    pub artifacts: Vec<ArtifactLink>,
    pub deliveries: Vec<DeliveryLine>,
    pub hand: Vec<HandLine>,
    pub pending_manual: bool,
    pub public_link: Option<String>,
    pub whatsapp_url: Option<String>,
    pub can_retry: bool,
    pub can_cancel: bool,
    pub cancel_note: Option<String>,
    pub can_inutilize: bool,
    pub can_regenerate: bool,
    pub can_deliver: bool,
    /// The service can email it (a mail server is configured).
    pub can_email: bool,
    pub can_audit: bool,
}

fn name_of(party: &kuatia_domain::document::canonical::Party) -> String {
    party
        .legal_name
        .clone()
        .or_else(|| party.trade_name.clone())
        .unwrap_or_default()
}

/// A value's name in the API (its serde name).
fn name<T: serde::Serialize>(value: &T) -> String {
    serde_json::to_value(value)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_default()
}

fn size(bytes: i64) -> String {
    if bytes >= 1024 * 1024 {
        format!("{:.1} MB", bytes as f64 / (1024.0 * 1024.0))
    } else if bytes >= 1024 {
        format!("{} KB", bytes / 1024)
    } else {
        format!("{bytes} B")
    }
}

/// What the cancellation window leaves, in words (an accepted SIFEN document only).
fn cancel_note(tr: Tr, s: &DocumentState, now: chrono::DateTime<Utc>) -> Option<String> {
    let approved = s.approved_at?;
    let closes = approved + cancellation_window(s.doc_type());
    if now >= closes {
        Some(tr.t1("cancel-window-closed", "when", i18n::local(closes)))
    } else {
        let hours = (closes - now).num_hours();
        Some(tr.t1("cancel-window-left", "hours", hours))
    }
}

/// `GET /console/documents/{id}`.
pub async fn show(
    State(state): State<AppState>,
    mut console: Console,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Response {
    console.chrome.nav = "documents";
    let Ok(id) = id.parse::<Uuid>() else {
        return console.error_page(&ApiError::not_found("no such document"));
    };
    match page(&state, &console, &headers, id).await {
        Ok(page) => console.page(&page),
        Err(e) => console.error_page(&e),
    }
}

async fn page(
    state: &AppState,
    console: &Console,
    headers: &HeaderMap,
    id: Uuid,
) -> Result<DocumentPage, ApiError> {
    let tr = console.chrome.tr;
    let caller = &console.caller;
    // What `GET /v1/documents/{id}` reads, less the timeline (the audit page has it): the
    // permission, the document (404 for another tenant's), its artifacts, SIFEN's last word.
    caller.require(api_docs::READ_DOCUMENTS)?;
    let summary = api_docs::DocumentView::from(api_docs::visible(state, caller, id).await?);
    let artifacts = crate::routes::artifacts::views(state, headers, caller, id).await?;
    let s = kuatia_application::documents::state_of(&state.store, caller.tenant, id)
        .await?
        .ok_or_else(|| ApiError::not_found("no such document"))?;
    let sifen = kuatia_application::documents::last_word_of(&s).map(|mut word| {
        if tr.lang == crate::console::i18n::Lang::Es {
            word.explained = word.explained.map(|e| e.in_spanish());
        }
        SifenAnswerView::from(word)
    });
    let d = &s.document;
    let summary = &summary;
    let status = s.status;
    let now = state.intake.clock.now();
    let sifen_channel = s.channel() == ChannelKind::Sifen;
    let artifacts = artifacts
        .iter()
        .map(|a| ArtifactLink {
            kind: tr.t(&format!("artifact-{}", a.kind)),
            version: a.version,
            size: size(a.size),
            created: i18n::local(a.created_at),
            view_url: a
                .content_type
                .starts_with("application/pdf")
                .then(|| format!("{}&inline=1", a.download_url)),
            download_url: a.download_url.clone(),
        })
        .collect();
    let deliveries: Vec<DeliveryLine> = s
        .deliveries
        .values()
        .map(|dl| DeliveryLine {
            target: tr.t(&format!("target-{}", &name(&dl.target))),
            channel: tr.t(&format!("channel-{}", &name(&dl.channel))),
            status: tr.t(&format!("delivery-{}", &name(&dl.status))),
            waits_for_hand: dl.awaits_hand(),
            at: i18n::local(dl.at),
        })
        .collect();
    let pending_manual = s.deliveries.values().any(|d| d.awaits_hand());
    let hand = s
        .hand_deliveries
        .iter()
        .map(|h| HandLine {
            channel: tr.t(&format!("hand-{}", &name(&h.channel))),
            sent: h.sent.is_some(),
            recipient: h.recipient.clone().unwrap_or_default(),
            note: h.note.clone().unwrap_or_default(),
            at: i18n::local(h.at),
        })
        .collect();
    let may = |p| console.may(p);
    let cancellable = matches!(
        status,
        DocumentStatus::Received
            | DocumentStatus::Validated
            | DocumentStatus::Queued
            | DocumentStatus::Transforming
            | DocumentStatus::Signing
            | DocumentStatus::Rendering
    ) || (status == DocumentStatus::Accepted && sifen_channel);
    let public_link = console.chrome.flash.as_ref().and_then(|f| f.link.clone());
    let whatsapp_url = public_link.as_ref().map(|link| {
        let text = tr.t1(
            "whatsapp-message",
            "document",
            format!(
                "{} {}",
                tr.doc_type(&summary.doc_type),
                summary.number.clone().unwrap_or_default()
            ),
        );
        format!("https://wa.me/?text={}", url_encode(&format!("{text} {link}")))
    });
    Ok(DocumentPage {
        chrome: console.chrome.clone(),
        id: id.to_string(),
        doc_type: tr.doc_type(&summary.doc_type),
        number: summary.number.clone().unwrap_or_else(|| "—".into()),
        cdc: summary.cdc.as_deref().map(i18n::cdc_groups),
        status: status.as_str().to_owned(),
        status_words: tr.status(status.as_str()),
        channel: tr.t(&format!("channel-kind-{}", summary.channel)),
        external_id: summary.external_id.clone(),
        issued: i18n::local(summary.issue_datetime),
        buyer_name: d.buyer.as_ref().map(name_of).unwrap_or_default(),
        buyer_ruc: d.buyer.as_ref().and_then(|b| b.ruc.clone()).unwrap_or_default(),
        buyer_email: d.buyer.as_ref().and_then(|b| b.email.clone()).unwrap_or_default(),
        items: d
            .items
            .iter()
            .map(|i| ItemLine {
                description: i.description.clone(),
                quantity: i.quantity.to_string(),
                unit_price: i18n::money(&i.unit_price.to_string()),
                tax_rate: format!("{} %", i.tax_rate),
                total: i18n::money(&i.total_amount.to_string()),
            })
            .collect(),
        subtotal: i18n::money(&d.totals.subtotal.to_string()),
        tax_total: i18n::money(&d.totals.tax_total.to_string()),
        grand_total: i18n::money(&d.totals.grand_total.to_string()),
        errors: s
            .errors
            .iter()
            .map(|e| format!("{}: {}", e.field, e.message))
            .collect(),
        sifen,
        artifacts,
        deliveries,
        hand,
        pending_manual,
        public_link,
        whatsapp_url,
        can_retry: may(api_docs::RETRY_DOCUMENT)
            && matches!(status, DocumentStatus::Retrying | DocumentStatus::FailedTerminal),
        can_cancel: may(api_docs::VOID_DOCUMENT) && cancellable,
        cancel_note: if status == DocumentStatus::Accepted && sifen_channel {
            cancel_note(tr, &s, now)
        } else {
            None
        },
        can_inutilize: may(api_docs::VOID_DOCUMENT)
            && (matches!(status, DocumentStatus::Rejected | DocumentStatus::FailedTerminal)
                || (status == DocumentStatus::Accepted && !sifen_channel)),
        can_regenerate: may(crate::routes::printing::REGENERATE_PDF) && status == DocumentStatus::Accepted,
        can_deliver: may(api_docs::DELIVER_BY_HAND) && status == DocumentStatus::Accepted,
        can_email: may(api_docs::DELIVER_BY_HAND)
            && status == DocumentStatus::Accepted
            && state.mail_configured,
        can_audit: may(api_docs::READ_TIMELINE),
    })
}

/// The page to come back to.
fn back_to(id: &str) -> String {
    format!("/console/documents/{}", url_encode(id))
}

/// What an action's answer means for the person who clicked.
fn outcome(console: &Console, id: &str, answer: Result<Response, ApiError>, done_key: &str) -> Response {
    let tr = console.chrome.tr;
    match answer {
        Ok(r) if r.status() == axum::http::StatusCode::ACCEPTED => {
            redirect_with(&back_to(id), true, &tr.t("action-pending"))
        }
        Ok(_) => redirect_with(&back_to(id), true, &tr.t(done_key)),
        Err(e) => refused(console, id, &e),
    }
}

/// A refused action: not there, or not for this role, is the refusal itself with its status;
/// anything else is said on the document's page.
fn refused(console: &Console, id: &str, e: &ApiError) -> Response {
    if matches!(e.status.as_u16(), 403 | 404) {
        console.error_page(e)
    } else {
        redirect_with(&back_to(id), false, &e.message)
    }
}

/// A form with a reason.
#[derive(Debug, Deserialize)]
pub struct ReasonForm {
    csrf: Option<String>,
    reason: Option<String>,
}

/// `POST /console/documents/{id}/retry`.
pub async fn retry(
    State(state): State<AppState>,
    console: Console,
    Path(id): Path<String>,
    Form(form): Form<TokenForm>,
) -> Response {
    let uuid = match console.target(form.csrf.as_deref(), &id, "document") {
        Ok(uuid) => uuid,
        Err(refused) => return *refused,
    };
    let answer = api_docs::actions::retry_document(State(state), console.caller.clone(), Path(uuid)).await;
    outcome(&console, &id, answer, "action-retry-done")
}

async fn void(state: AppState, console: Console, id: String, form: ReasonForm, cancel: bool) -> Response {
    let uuid = match console.target(form.csrf.as_deref(), &id, "document") {
        Ok(uuid) => uuid,
        Err(refused) => return *refused,
    };
    let body = Bytes::from(json!({ "reason": form.reason.unwrap_or_default() }).to_string());
    let caller = console.caller.clone();
    let answer = if cancel {
        api_docs::actions::cancel_document(State(state), caller, Path(uuid), JsonBytes(body)).await
    } else {
        api_docs::actions::inutilize_document(State(state), caller, Path(uuid), JsonBytes(body)).await
    };
    outcome(
        &console,
        &id,
        answer,
        if cancel {
            "action-cancel-done"
        } else {
            "action-inutilize-done"
        },
    )
}

/// `POST /console/documents/{id}/cancel`.
pub async fn cancel(
    State(state): State<AppState>,
    console: Console,
    Path(id): Path<String>,
    Form(form): Form<ReasonForm>,
) -> Response {
    void(state, console, id, form, true).await
}

/// `POST /console/documents/{id}/inutilize`.
pub async fn inutilize(
    State(state): State<AppState>,
    console: Console,
    Path(id): Path<String>,
    Form(form): Form<ReasonForm>,
) -> Response {
    void(state, console, id, form, false).await
}

/// `POST /console/documents/{id}/regenerate`.
pub async fn regenerate(
    State(state): State<AppState>,
    console: Console,
    Path(id): Path<String>,
    Form(form): Form<TokenForm>,
) -> Response {
    let uuid = match console.target(form.csrf.as_deref(), &id, "document") {
        Ok(uuid) => uuid,
        Err(refused) => return *refused,
    };
    let answer =
        crate::routes::printing::regenerate_pdf(State(state), console.caller.clone(), Path(uuid)).await;
    outcome(&console, &id, answer, "action-regenerate-done")
}

/// The delivery-by-hand form.
#[derive(Debug, Deserialize)]
pub struct DeliveryForm {
    csrf: Option<String>,
    channel: Option<String>,
    recipient: Option<String>,
    note: Option<String>,
    /// Present when the service is to email it (the "send by email" form).
    send: Option<String>,
}

/// `POST /console/documents/{id}/deliveries`: `POST /v1/documents/{id}/deliveries`, recording a
/// delivery made elsewhere or, from the "send by email" form, emailing the document now.
pub async fn deliver(
    State(state): State<AppState>,
    console: Console,
    Path(id): Path<String>,
    Form(form): Form<DeliveryForm>,
) -> Response {
    let uuid = match console.target(form.csrf.as_deref(), &id, "document") {
        Ok(uuid) => uuid,
        Err(refused) => return *refused,
    };
    let text = |v: Option<String>| v.map(|s| s.trim().to_owned()).filter(|s| !s.is_empty());
    let body = Bytes::from(
        json!({
            "channel": form.channel.unwrap_or_default(),
            "recipient": text(form.recipient),
            "note": text(form.note),
            "send": form.send.is_some(),
        })
        .to_string(),
    );
    let answer =
        api_docs::actions::deliver_by_hand(State(state), console.caller.clone(), Path(uuid), JsonBytes(body))
            .await;
    if form.send.is_none() {
        return outcome(&console, &id, answer, "action-delivered-done");
    }
    let tr = console.chrome.tr;
    match answer {
        Ok(_) => redirect_with(&back_to(&id), true, &tr.t("email-sent")),
        // Why it was not sent, in the clerk's words (the server's own after them).
        Err(e) => {
            let field = e
                .details
                .as_ref()
                .and_then(|d| d["errors"][0]["code"].as_str())
                .unwrap_or_default();
            let key = match (e.status.as_u16(), field) {
                (400, "invalid") => "email-error-address",
                (400, _) => "email-error-refused",
                (502, _) => "email-error-upstream",
                (409, _) => "email-error-conflict",
                _ => return refused(&console, &id, &e),
            };
            redirect_with(&back_to(&id), false, &tr.t1(key, "why", &e.message))
        }
    }
}

/// `POST /console/documents/{id}/public-link`: a public KuDE link for the customer, shown once
/// (with a WhatsApp-ready message).
pub async fn public_link(
    State(state): State<AppState>,
    console: Console,
    headers: HeaderMap,
    Path(id): Path<String>,
    Form(form): Form<TokenForm>,
) -> Response {
    let uuid = match console.target(form.csrf.as_deref(), &id, "document") {
        Ok(uuid) => uuid,
        Err(refused) => return *refused,
    };
    let made = crate::routes::public_links::create_public_link(
        State(state),
        console.caller.clone(),
        headers,
        Path(uuid),
    )
    .await;
    match made {
        Ok(response) => match super::json_of(response).await {
            Ok(view) => {
                let url = view["url"].as_str().unwrap_or_default().to_owned();
                crate::console::redirect_with_link(&back_to(&id), &url)
            }
            Err(e) => console.error_page(&e),
        },
        Err(e) => refused(&console, &id, &e),
    }
}
