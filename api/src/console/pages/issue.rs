//! Issuing a document by hand, for a business without an ERP: an invoice or a credit note (on an
//! invoice chosen from the accepted ones), on the SIFEN or the autoimpresor channel. The form
//! becomes a CanonicalDocumentV1 and goes through the API's own handlers: validate (issues shown
//! by field), the sandbox preview (the KuDE before issuing), and create with an Idempotency-Key
//! drawn when the form was first drawn, so that a double click issues once. Lines and totals are
//! computed with the validator's own rules ([`line_total`], [`included_tax`]); the script only
//! shows them live.

use crate::extract::Query;
use askama::Template;
use axum::Form;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue};
use axum::response::{IntoResponse, Response};
use kuatia_domain::document::validation::{included_tax, line_total};
use kuatia_domain::ruc::Ruc;
use rust_decimal::Decimal;
use serde_json::{Value, json};
use uuid::Uuid;

use super::json_of;
use crate::console::i18n::{self, Tr};
use crate::console::{Chrome, Console, redirect_with};
use crate::error::ApiError;
use crate::routes::documents::{self as api_docs, JsonBytes, ListQuery};
use crate::state::AppState;

/// One line of the form, as typed.
#[derive(Debug, Clone, Default)]
pub struct LineInput {
    pub description: String,
    pub quantity: String,
    pub unit_price: String,
    pub tax_rate: String,
    /// Its total, when quantity and price are numbers.
    pub total: String,
    /// Problems found on this line.
    pub problems: Vec<String>,
}

/// The form as typed.
#[derive(Debug, Clone, Default)]
pub struct IssueInput {
    pub doc_type: String,
    pub channel: String,
    pub company: String,
    pub buyer_ruc: String,
    pub buyer_name: String,
    pub buyer_email: String,
    pub condition: String,
    pub related: String,
    pub reason: String,
    pub key: String,
    pub lines: Vec<LineInput>,
}

/// A company to issue for.
pub struct CompanyOption {
    pub id: String,
    pub name: String,
    pub selected: bool,
}

/// An invoice a credit note may reference.
pub struct InvoiceOption {
    pub id: String,
    pub label: String,
    pub selected: bool,
}

/// The issue page.
#[derive(Template)]
#[template(path = "console/issue.html")]
pub struct IssuePage {
    pub chrome: Chrome,
    pub input: IssueInput,
    pub companies: Vec<CompanyOption>,
    pub invoices: Vec<InvoiceOption>,
    pub problems: Vec<String>,
    pub warnings: Vec<String>,
    pub checked: bool,
    pub subtotal: String,
    pub tax5: String,
    pub tax10: String,
    pub grand_total: String,
}

/// Lines a new form starts with.
const EMPTY_LINES: usize = 3;
/// The most lines the form takes (SIFEN's own limit is far above what a clerk types).
const MAX_LINES: usize = 100;

fn decimal(text: &str) -> Option<Decimal> {
    // Paraguay writes 1.500.000 and 2,5: thousands dots out, the decimal comma a point.
    let cleaned = text.trim().replace('.', "").replace(',', ".");
    if cleaned.is_empty() {
        return None;
    }
    cleaned.parse::<Decimal>().ok()
}

/// The form's fields, in order (lines are the repeated `description`, `quantity`, `unit_price`,
/// `tax_rate`).
fn input_of(fields: &[(String, String)]) -> IssueInput {
    let mut input = IssueInput::default();
    let mut lines: Vec<LineInput> = Vec::new();
    let (mut d, mut q, mut p, mut r) = (0, 0, 0, 0);
    let line = |lines: &mut Vec<LineInput>, i: usize| {
        while lines.len() <= i {
            lines.push(LineInput::default());
        }
    };
    for (name, value) in fields {
        let value = value.trim().to_owned();
        match name.as_str() {
            "type" => input.doc_type = value,
            "channel" => input.channel = value,
            "company" => input.company = value,
            "buyer_ruc" => input.buyer_ruc = value,
            "buyer_name" => input.buyer_name = value,
            "buyer_email" => input.buyer_email = value,
            "condition" => input.condition = value,
            "related" => input.related = value,
            "reason" => input.reason = value,
            "key" => input.key = value,
            "description" => {
                line(&mut lines, d);
                lines[d].description = value;
                d += 1;
            }
            "quantity" => {
                line(&mut lines, q);
                lines[q].quantity = value;
                q += 1;
            }
            "unit_price" => {
                line(&mut lines, p);
                lines[p].unit_price = value;
                p += 1;
            }
            "tax_rate" => {
                line(&mut lines, r);
                lines[r].tax_rate = value;
                r += 1;
            }
            _ => {}
        }
    }
    lines.truncate(MAX_LINES);
    input.lines = lines;
    input
}

/// The lines with something typed in them.
fn typed(input: &IssueInput) -> Vec<&LineInput> {
    input
        .lines
        .iter()
        .filter(|l| !(l.description.is_empty() && l.unit_price.is_empty()))
        .collect()
}

/// Totals by the validator's rules: (subtotal, IVA 5, IVA 10, grand total).
fn totals(input: &mut IssueInput) -> (Decimal, Decimal, Decimal, Decimal) {
    let (mut tax5, mut tax10, mut grand) = (Decimal::ZERO, Decimal::ZERO, Decimal::ZERO);
    for l in &mut input.lines {
        let (Some(q), Some(p)) = (decimal(&l.quantity), decimal(&l.unit_price)) else {
            l.total.clear();
            continue;
        };
        let Some(total) = line_total(q, p) else { continue };
        l.total = i18n::money(&total.to_string());
        let rate = decimal(&l.tax_rate).unwrap_or(Decimal::TEN);
        let tax = if rate.is_zero() {
            Some(Decimal::ZERO)
        } else {
            included_tax(total, rate)
        }
        .unwrap_or_default();
        if rate == Decimal::from(5) {
            tax5 += tax;
        } else if rate == Decimal::TEN {
            tax10 += tax;
        }
        grand += total;
    }
    (grand - tax5 - tax10, tax5, tax10, grand)
}

/// A decimal as a JSON number (the canonical document's amounts are numbers).
fn json_number(d: Decimal) -> Value {
    serde_json::from_str(&d.normalize().to_string()).unwrap_or(Value::Null)
}

/// The CanonicalDocumentV1 of the form; `seller` is the chosen company.
fn document(input: &IssueInput, seller: &Value, now: chrono::DateTime<chrono::Utc>) -> Value {
    let mut items = Vec::new();
    let (mut tax_total, mut grand) = (Decimal::ZERO, Decimal::ZERO);
    for l in typed(input) {
        let q = decimal(&l.quantity);
        let p = decimal(&l.unit_price);
        let rate = decimal(&l.tax_rate).unwrap_or(Decimal::TEN);
        let total = q.zip(p).and_then(|(q, p)| line_total(q, p));
        let tax = total.and_then(|t| {
            if rate.is_zero() {
                Some(Decimal::ZERO)
            } else {
                included_tax(t, rate)
            }
        });
        tax_total += tax.unwrap_or_default();
        grand += total.unwrap_or_default();
        let number = |d: Option<Decimal>, raw: &str| match d {
            Some(d) => json_number(d),
            None => Value::String(raw.to_owned()),
        };
        items.push(json!({
            "description": l.description,
            "quantity": number(q, &l.quantity),
            "unit_price": number(p, &l.unit_price),
            "tax_rate": json_number(rate),
            "tax_amount": tax.map_or(Value::Null, json_number),
            "total_amount": total.map_or(Value::Null, json_number),
        }));
    }
    let issued = now
        .with_timezone(&kuatia_domain::local_time::offset())
        .to_rfc3339_opts(chrono::SecondsFormat::Secs, false);
    let mut doc = json!({
        "external_id": format!("console-{}", input.key),
        "type": if input.doc_type.is_empty() { "invoice" } else { input.doc_type.as_str() },
        "issue_datetime": issued,
        "currency": "PYG",
        "seller": seller,
        "items": items,
        "totals": {
            "subtotal": json_number(grand - tax_total),
            "tax_total": json_number(tax_total),
            "grand_total": json_number(grand),
        },
        "payment_terms": {
            "condition": if input.condition == "credit" { "credit" } else { "cash" },
            "method": "cash",
        },
    });
    if !input.company.is_empty() {
        doc["company_id"] = json!(input.company);
    }
    if !input.channel.is_empty() {
        doc["channel"] = json!(input.channel);
    }
    doc["buyer"] = if input.buyer_ruc.is_empty() {
        if input.buyer_name.is_empty() {
            json!({"operation_type": "anonymous"})
        } else {
            json!({"operation_type": "anonymous", "legal_name": input.buyer_name})
        }
    } else {
        let mut buyer =
            json!({"ruc": input.buyer_ruc, "legal_name": input.buyer_name, "document_type": "ruc"});
        if !input.buyer_email.is_empty() {
            buyer["email"] = json!(input.buyer_email);
        }
        buyer
    };
    if input.doc_type == "credit_note" {
        if !input.related.is_empty() {
            doc["associated_document"] = json!({"document_id": input.related});
        }
        doc["reason"] = json!(input.reason.parse::<u8>().unwrap_or(2));
    }
    doc
}

/// The issues of an answer's `errors` (or `details.errors`), as `field: message`, and the lines
/// they name marked.
fn issues_of(errors: &Value, input: &mut IssueInput) -> Vec<String> {
    let mut out = Vec::new();
    for e in errors.as_array().into_iter().flatten() {
        let field = e["field"].as_str().unwrap_or_default();
        let message = e["message"].as_str().unwrap_or_default();
        let typed_lines: Vec<usize> = input
            .lines
            .iter()
            .enumerate()
            .filter(|(_, l)| !(l.description.is_empty() && l.unit_price.is_empty()))
            .map(|(i, _)| i)
            .collect();
        if let Some(rest) = field.strip_prefix("items[")
            && let Some((n, _)) = rest.split_once(']')
            && let Ok(n) = n.parse::<usize>()
            && let Some(&line) = typed_lines.get(n)
        {
            input.lines[line].problems.push(message.to_owned());
        }
        out.push(format!("{field}: {message}"));
    }
    out
}

/// The problems of a refused request: its issues by field, else its message.
fn refusal(e: ApiError, input: &mut IssueInput) -> Vec<String> {
    let errors = e.details.as_ref().map_or(Value::Null, |d| d["errors"].clone());
    let problems = issues_of(&errors, input);
    if problems.is_empty() {
        vec![e.message]
    } else {
        problems
    }
}

/// The document this form already issued, if it did: its external id is the form's key. A form
/// sent again later (back in the browser, a second tab) finds it; the idempotency key alone
/// would refuse it, since the issue time in the body is the time of each post.
async fn issued_by_form(state: &AppState, console: &Console, key: &str) -> Option<String> {
    let found = api_docs::read::list_documents(
        State(state.clone()),
        console.caller.clone(),
        Query(ListQuery {
            external_id: Some(format!("console-{key}")),
            limit: Some("1".into()),
            ..ListQuery::default()
        }),
    )
    .await
    .ok()?;
    found.0.documents.first().map(|d| d.id.to_string())
}

async fn companies(state: &AppState, console: &Console) -> Result<Vec<(String, Value)>, ApiError> {
    let listed = crate::routes::companies::list_companies(State(state.clone()), console.caller.clone())
        .await?
        .0;
    Ok(listed
        .into_iter()
        .map(|c| {
            let seller = json!({"ruc": c.ruc, "legal_name": c.profile.legal_name});
            (c.id.to_string(), seller)
        })
        .collect())
}

async fn draw(
    state: &AppState,
    console: &Console,
    mut input: IssueInput,
    problems: Vec<String>,
    warnings: Vec<String>,
    checked: bool,
) -> Response {
    let tr: Tr = console.chrome.tr;
    let companies = match companies(state, console).await {
        Ok(c) => c,
        Err(e) => return console.error_page(&e),
    };
    if input.company.is_empty()
        && let Some((id, _)) = companies.first()
    {
        input.company = id.clone();
    }
    let accepted = api_docs::read::list_documents(
        State(state.clone()),
        console.caller.clone(),
        Query(ListQuery {
            status: Some("accepted".into()),
            limit: Some("100".into()),
            ..ListQuery::default()
        }),
    )
    .await;
    let invoices = accepted
        .map(|l| l.0.documents)
        .unwrap_or_default()
        .into_iter()
        .filter(|d| d.doc_type == "invoice")
        .map(|d| InvoiceOption {
            selected: input.related == d.id.to_string(),
            id: d.id.to_string(),
            label: format!(
                "{} · {} · {}",
                d.number.clone().unwrap_or_default(),
                i18n::local(d.issue_datetime),
                i18n::money(&match &d.grand_total {
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                })
            ),
        })
        .collect();
    while input.lines.len() < EMPTY_LINES {
        input.lines.push(LineInput::default());
    }
    for l in &mut input.lines {
        if l.quantity.is_empty() && l.description.is_empty() {
            l.quantity = "1".into();
        }
        if l.tax_rate.is_empty() {
            l.tax_rate = "10".into();
        }
    }
    let (subtotal, tax5, tax10, grand) = totals(&mut input);
    let page = IssuePage {
        chrome: console.chrome.clone(),
        companies: companies
            .iter()
            .map(|(id, seller)| CompanyOption {
                selected: *id == input.company,
                id: id.clone(),
                name: format!(
                    "{} ({})",
                    seller["legal_name"].as_str().unwrap_or_default(),
                    seller["ruc"].as_str().unwrap_or_default()
                ),
            })
            .collect(),
        invoices,
        problems,
        warnings,
        checked,
        subtotal: i18n::money(&subtotal.to_string()),
        tax5: i18n::money(&tax5.to_string()),
        tax10: i18n::money(&tax10.to_string()),
        grand_total: i18n::money(&grand.to_string()),
        input,
    };
    let _ = tr;
    console.page(&page)
}

/// `GET /console/issue`: an empty form with a fresh idempotency key.
pub async fn form(State(state): State<AppState>, mut console: Console) -> Response {
    console.chrome.nav = "issue";
    if let Err(e) = console.caller.require(api_docs::CREATE_DOCUMENT) {
        return console.error_page(&e);
    }
    let input = IssueInput {
        doc_type: "invoice".into(),
        condition: "cash".into(),
        key: Uuid::now_v7().to_string(),
        ..IssueInput::default()
    };
    draw(&state, &console, input, Vec::new(), Vec::new(), false).await
}

/// `POST /console/issue`: `action` is `lookup` (the buyer's name from the registry), `add_line`,
/// `validate`, `preview` (the KuDE, as a PDF) or `issue`.
pub async fn submit(
    State(state): State<AppState>,
    mut console: Console,
    headers: HeaderMap,
    Form(fields): Form<Vec<(String, String)>>,
) -> Response {
    console.chrome.nav = "issue";
    let token = fields.iter().find(|(k, _)| k == "csrf").map(|(_, v)| v.as_str());
    if let Some(r) = console.refuse_forged(token) {
        return r;
    }
    if let Err(e) = console.caller.require(api_docs::CREATE_DOCUMENT) {
        return console.error_page(&e);
    }
    let tr = console.chrome.tr;
    let action = fields
        .iter()
        .find(|(k, _)| k == "action")
        .map_or("validate", |(_, v)| v.as_str())
        .to_owned();
    let mut input = input_of(&fields);
    if input.key.parse::<Uuid>().is_err() {
        input.key = Uuid::now_v7().to_string();
    }
    match action.as_str() {
        "add_line" => {
            if input.lines.len() < MAX_LINES {
                input.lines.push(LineInput::default());
            }
            return draw(&state, &console, input, Vec::new(), Vec::new(), false).await;
        }
        "lookup" => {
            let found = match Ruc::parse_lenient(&input.buyer_ruc) {
                Ok(ruc) => {
                    let name = state.intake.registry.name_of(&ruc).await;
                    if name.is_some() {
                        input.buyer_ruc = ruc.to_string();
                    }
                    name
                }
                Err(_) => None,
            };
            return match found {
                Some(name) => {
                    input.buyer_name = name;
                    draw(&state, &console, input, Vec::new(), Vec::new(), false).await
                }
                None => {
                    let problem = tr.t("issue-lookup-none");
                    draw(&state, &console, input, vec![problem], Vec::new(), false).await
                }
            };
        }
        _ => {}
    }
    let sellers = match companies(&state, &console).await {
        Ok(c) => c,
        Err(e) => return console.error_page(&e),
    };
    let seller = sellers
        .iter()
        .find(|(id, _)| *id == input.company)
        .or_else(|| sellers.first())
        .map(|(_, s)| s.clone())
        .unwrap_or(Value::Null);
    let doc = document(&input, &seller, state.intake.clock.now());
    let body = Bytes::from(doc.to_string());
    match action.as_str() {
        "preview" => preview(&state, &console, &headers, &doc).await,
        "issue" => {
            if let Some(id) = issued_by_form(&state, &console, &input.key).await {
                return redirect_with(&format!("/console/documents/{id}"), true, &tr.t("issue-done"));
            }
            let mut api_headers = HeaderMap::new();
            if let Ok(v) = HeaderValue::from_str(&format!("console-{}", input.key)) {
                api_headers.insert("idempotency-key", v);
            }
            let created = api_docs::create_document(
                State(state.clone()),
                console.caller.clone(),
                api_headers,
                JsonBytes(body),
            )
            .await;
            match created {
                Ok(response) => match json_of(response).await {
                    Ok(view) if view["status"] == "validation_failed" => {
                        let problems = issues_of(&view["errors"], &mut input);
                        // A new key: the next try is a new document.
                        input.key = Uuid::now_v7().to_string();
                        draw(&state, &console, input, problems, Vec::new(), true).await
                    }
                    Ok(view) => {
                        let id = view["id"].as_str().unwrap_or_default().to_owned();
                        redirect_with(&format!("/console/documents/{id}"), true, &tr.t("issue-done"))
                    }
                    Err(e) => console.error_page(&e),
                },
                Err(e) => {
                    // Two posts of one form racing across a second: the other one issued it.
                    if let Some(id) = issued_by_form(&state, &console, &input.key).await {
                        return redirect_with(&format!("/console/documents/{id}"), true, &tr.t("issue-done"));
                    }
                    let problems = refusal(e, &mut input);
                    draw(&state, &console, input, problems, Vec::new(), true).await
                }
            }
        }
        _ => {
            let checked =
                api_docs::validate_document(State(state.clone()), console.caller.clone(), JsonBytes(body))
                    .await;
            match checked {
                Ok(response) => match json_of(response.into_response()).await {
                    Ok(v) => {
                        let problems = issues_of(&v["errors"], &mut input);
                        let warnings = issues_of(&v["warnings"], &mut IssueInput::default());
                        draw(&state, &console, input, problems, warnings, true).await
                    }
                    Err(e) => console.error_page(&e),
                },
                Err(e) => {
                    let problems = refusal(e, &mut input);
                    draw(&state, &console, input, problems, Vec::new(), true).await
                }
            }
        }
    }
}

/// The KuDE (or printable) of the form through the sandbox handler, with the caller's own
/// configuration, as a PDF to look at.
async fn preview(state: &AppState, console: &Console, headers: &HeaderMap, doc: &Value) -> Response {
    let view = match super::sandbox::run(state, console, headers, doc.to_string()).await {
        Ok(view) => view,
        Err(e) => return console.error_page(&e),
    };
    match super::sandbox::pdf_of(&view) {
        Some(bytes) => super::sandbox::pdf_response(bytes),
        None => {
            let errors = view["errors"].clone();
            let message = errors
                .as_array()
                .and_then(|a| a.first())
                .and_then(|e| e["message"].as_str())
                .unwrap_or("no preview")
                .to_owned();
            console.error_page(&ApiError::validation(message))
        }
    }
}
