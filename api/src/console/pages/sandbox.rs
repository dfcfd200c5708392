//! The sandbox playground (`/console/sandbox`): a canonical document to paste or edit, starting
//! from the repository's example of each type (issued now, sold by the tenant's first company, routed
//! to it by `company_id`),
//! run through `POST /v1/sandbox/preview` with the console's own credentials, so with the
//! tenant's configuration: the issues by field, the routing and number, SIFEN's answer, the
//! signed XML (highlighted on the server: no script needed) and the KuDE as a PDF. Nothing is
//! stored and nothing has fiscal effect (the sandbox use case). The hand-issue form's "Vista
//! previa" runs through [`run`] too.

use askama::Template;
use axum::Form;
use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, Request, StatusCode, header};
use axum::response::{IntoResponse, Response};
use base64::Engine;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::console::{Chrome, Console};
use crate::error::ApiError;
use crate::state::AppState;

/// The examples offered, by name: the repository's `examples/`.
const EXAMPLES: [(&str, &str); 7] = [
    ("invoice", include_str!("../../../../examples/invoice.json")),
    (
        "credit-note",
        include_str!("../../../../examples/credit-note.json"),
    ),
    ("debit-note", include_str!("../../../../examples/debit-note.json")),
    ("remision", include_str!("../../../../examples/remision.json")),
    (
        "autofactura",
        include_str!("../../../../examples/autofactura.json"),
    ),
    (
        "autoimpresor-invoice",
        include_str!("../../../../examples/autoimpresor-invoice.json"),
    ),
    (
        "autoimpresor-receipt",
        include_str!("../../../../examples/autoimpresor-receipt.json"),
    ),
];

/// The modes offered (`""`: the one the document's channel implies).
const MODES: [&str; 4] = ["", "demo_simulated", "sifen_dev", "autoimpresor_test"];

/// The preview through the sandbox handler, with the console's credentials (the session cookie
/// and the tenant): the API's answer as JSON, or its refusal.
pub(super) async fn run(
    state: &AppState,
    console: &Console,
    headers: &HeaderMap,
    body: String,
) -> Result<Value, ApiError> {
    let mut request = Request::builder()
        .method("POST")
        .uri("/v1/sandbox/preview")
        .header(header::CONTENT_TYPE, "application/json")
        .header(crate::auth::TENANT_HEADER, console.caller.tenant.to_string());
    if let Some(cookie) = headers.get(header::COOKIE) {
        request = request.header(header::COOKIE, cookie.clone());
    }
    let request = request
        .body(Body::from(body))
        .map_err(|e| ApiError::internal(&e))?;
    let answer = crate::routes::sandbox::preview(State(state.clone()), request).await?;
    Ok(serde_json::to_value(&answer.0).unwrap_or(Value::Null))
}

/// The preview's PDF (the KuDE, or the autoimpresor printable), if it made one.
pub(super) fn pdf_of(answer: &Value) -> Option<Vec<u8>> {
    answer["artifacts"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|a| a["content_type"] == "application/pdf")
        .and_then(|a| a["body_base64"].as_str())
        .and_then(|b| base64::engine::general_purpose::STANDARD.decode(b).ok())
}

/// A PDF to look at in the browser.
pub(super) fn pdf_response(bytes: Vec<u8>) -> Response {
    (
        [
            (header::CONTENT_TYPE, HeaderValue::from_static("application/pdf")),
            (
                header::CONTENT_DISPOSITION,
                HeaderValue::from_static("inline; filename=\"vista-previa.pdf\""),
            ),
        ],
        bytes,
    )
        .into_response()
}

/// A piece of highlighted XML: its kind (`tag`, `attr`, `value`, `text`, `punct`) and its text.
pub struct Piece {
    pub kind: &'static str,
    pub text: String,
}

/// XML cut into pieces to colour: tag names, attribute names and values, the rest as text. A
/// reader's aid only (the text is escaped by the template like any other). With `indent`, each
/// element starts a line indented by its depth (whitespace-only text between tags is dropped): the
/// signed DE is one line, unreadable as it stands.
pub fn highlight(xml: &str, indent: bool) -> Vec<Piece> {
    #[derive(PartialEq)]
    enum Last {
        Start,
        Open,
        Close,
        Text,
    }
    let mut pieces: Vec<Piece> = Vec::new();
    let mut push = |kind: &'static str, text: &str| {
        if text.is_empty() {
            return;
        }
        match pieces.last_mut() {
            Some(last) if last.kind == kind => last.text.push_str(text),
            _ => pieces.push(Piece {
                kind,
                text: text.to_owned(),
            }),
        }
    };
    let (mut depth, mut last) = (0usize, Last::Start);
    let line = |depth: usize| format!("\n{}", "  ".repeat(depth));
    let mut rest = xml;
    while let Some(open) = rest.find('<') {
        let text = &rest[..open];
        if !(indent && text.trim().is_empty()) {
            push("text", text);
            if !text.is_empty() {
                last = Last::Text;
            }
        }
        let Some(close) = rest[open..].find('>').map(|c| open + c) else {
            push("text", &rest[open..]);
            return pieces;
        };
        let tag = &rest[open + 1..close];
        let closing = tag.starts_with('/');
        let special = tag.starts_with('!') || tag.starts_with('?');
        let empty = tag.ends_with('/');
        if indent {
            if closing {
                depth = depth.saturating_sub(1);
                if last == Last::Close {
                    push("text", &line(depth));
                }
            } else if last != Last::Start && last != Last::Text {
                push("text", &line(depth));
            }
        }
        push("punct", "<");
        if special {
            push("punct", tag);
        } else {
            let (lead, body) = match tag.strip_prefix('/') {
                Some(body) => ("/", body),
                None => ("", tag),
            };
            let name_end = body
                .find(|c: char| c.is_whitespace() || c == '/')
                .unwrap_or(body.len());
            push("punct", lead);
            push("tag", &body[..name_end]);
            let mut attrs = &body[name_end..];
            while !attrs.is_empty() {
                let Some(eq) = attrs.find('=') else {
                    push("punct", attrs);
                    break;
                };
                push("attr", &attrs[..eq]);
                push("punct", "=");
                let after = &attrs[eq + 1..];
                let quote = after.chars().next().filter(|c| *c == '"' || *c == '\'');
                match quote.and_then(|q| after[1..].find(q).map(|end| (q, end))) {
                    Some((_, end)) => {
                        push("value", &after[..end + 2]);
                        attrs = &after[end + 2..];
                    }
                    None => {
                        push("text", after);
                        break;
                    }
                }
            }
        }
        push("punct", ">");
        last = if closing || special || empty {
            Last::Close
        } else {
            depth += 1;
            Last::Open
        };
        rest = &rest[close + 1..];
    }
    push("text", rest);
    pieces
}

/// An example to start from.
pub struct ExampleChoice {
    pub name: &'static str,
    pub words: String,
}

/// A mode to choose.
pub struct ModeChoice {
    pub value: &'static str,
    pub words: String,
    pub selected: bool,
}

/// What the preview answered, to show.
pub struct Outcome {
    pub channel: String,
    pub number: String,
    pub timbrado: String,
    pub configuration: String,
    /// SIFEN's answer in a line (status, code, message), or the printer's.
    pub answer: String,
    pub approved: bool,
    pub warnings: Vec<String>,
    pub signed_xml: Vec<Piece>,
    pub channel_response: Vec<Piece>,
    pub response_json: String,
    pub has_pdf: bool,
}

/// The playground.
#[derive(Template)]
#[template(path = "console/sandbox.html")]
pub struct SandboxPage {
    pub chrome: Chrome,
    pub examples: Vec<ExampleChoice>,
    pub modes: Vec<ModeChoice>,
    pub document: String,
    /// The refusal's issues, `field: message`, each.
    pub problems: Vec<String>,
    pub outcome: Option<Outcome>,
}

/// `?example=`.
#[derive(Debug, Deserialize)]
pub struct ExampleQuery {
    example: Option<String>,
}

/// An example as the tenant would send it: issued now, sold by its first company.
async fn example(state: &AppState, console: &Console, name: &str) -> String {
    let text = EXAMPLES
        .iter()
        .find(|(n, _)| *n == name)
        .map_or(EXAMPLES[0].1, |(_, text)| text);
    let Ok(mut document) = serde_json::from_str::<Value>(text) else {
        return text.to_owned();
    };
    let now = chrono::Utc::now().with_timezone(&kuatia_domain::local_time::offset());
    document["issue_datetime"] = json!(now.to_rfc3339_opts(chrono::SecondsFormat::Secs, false));
    if let Ok(companies) =
        crate::routes::companies::list_companies(State(state.clone()), console.caller.clone()).await
        && let Some(company) = companies.0.first()
    {
        document["company_id"] = json!(company.id);
        document["seller"] = json!({"ruc": company.ruc, "legal_name": company.profile.legal_name});
    }
    serde_json::to_string_pretty(&document).unwrap_or_else(|_| text.to_owned())
}

fn page(
    console: &Console,
    document: String,
    mode: &str,
    problems: Vec<String>,
    outcome: Option<Outcome>,
) -> SandboxPage {
    let tr = console.chrome.tr;
    SandboxPage {
        chrome: console.chrome.clone(),
        examples: EXAMPLES
            .iter()
            .map(|(name, _)| ExampleChoice {
                name,
                words: tr.t(&format!("sandbox-example-{name}")),
            })
            .collect(),
        modes: MODES
            .iter()
            .map(|m| ModeChoice {
                value: m,
                words: tr.t(&format!("sandbox-mode-{}", if m.is_empty() { "auto" } else { m })),
                selected: *m == mode,
            })
            .collect(),
        document,
        problems,
        outcome,
    }
}

/// `GET /console/sandbox`: the playground with an example in it.
pub async fn show(
    State(state): State<AppState>,
    mut console: Console,
    axum::extract::Query(query): axum::extract::Query<ExampleQuery>,
) -> Response {
    console.chrome.nav = "sandbox";
    if let Err(e) = console.caller.require(crate::routes::sandbox::USE_SANDBOX) {
        return console.error_page(&e);
    }
    let document = example(&state, &console, query.example.as_deref().unwrap_or("invoice")).await;
    console.page(&page(&console, document, "", Vec::new(), None))
}

/// The playground's form.
#[derive(Debug, Deserialize)]
pub struct RunForm {
    csrf: Option<String>,
    document: Option<String>,
    mode: Option<String>,
    /// `kude`: answer the PDF itself; anything else: the page with the outcome.
    action: Option<String>,
}

/// `POST /console/sandbox`: the document run through the sandbox; the page again with what it
/// answered (or the PDF, for "Ver el KuDE").
pub async fn submit(
    State(state): State<AppState>,
    mut console: Console,
    headers: HeaderMap,
    Form(form): Form<RunForm>,
) -> Response {
    console.chrome.nav = "sandbox";
    if let Some(r) = console.refuse_forged(form.csrf.as_deref()) {
        return r;
    }
    let document = form.document.unwrap_or_default();
    let mode = form.mode.unwrap_or_default();
    let mode = MODES.iter().find(|m| **m == mode).copied().unwrap_or("");
    // The mode joins the document as the API takes it; a body that is not an object goes as
    // typed, for the API to say what is wrong with it.
    let body = match serde_json::from_str::<Value>(&document) {
        Ok(Value::Object(mut object)) if !mode.is_empty() => {
            object.insert("mode".into(), json!(mode));
            Value::Object(object).to_string()
        }
        _ => document.clone(),
    };
    let answer = match run(&state, &console, &headers, body).await {
        Ok(answer) => answer,
        Err(e) if matches!(e.status.as_u16(), 401 | 403) => return console.error_page(&e),
        Err(e) => {
            let mut refused = console.page(&page(&console, document, mode, super::issues_said(&e), None));
            *refused.status_mut() = StatusCode::UNPROCESSABLE_ENTITY;
            return refused;
        }
    };
    let pdf = pdf_of(&answer);
    let has_pdf = pdf.is_some();
    if form.action.as_deref() == Some("kude")
        && let Some(bytes) = pdf
    {
        return pdf_response(bytes);
    }
    let tr = console.chrome.tr;
    let artifact = |kind: &str| {
        answer["artifacts"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|a| a["type"] == kind)
            .and_then(|a| a["body"].as_str())
            .map(|xml| highlight(xml, true))
            .unwrap_or_default()
    };
    let response = &answer["response"];
    let answer_line = match (response["status"].as_str(), response["code"].as_str()) {
        (Some(status), Some(code)) => format!(
            "{status} · {code} · {}",
            response["message"].as_str().unwrap_or_default()
        ),
        _ => response["message"]
            .as_str()
            .or(response["status"].as_str())
            .unwrap_or_default()
            .to_owned(),
    };
    let routing = &answer["routing"];
    let text = |v: &Value| v.as_str().unwrap_or_default().to_owned();
    let outcome = Outcome {
        channel: tr.t(&format!("channel-kind-{}", text(&answer["channel"]))),
        number: text(&routing["number"]),
        timbrado: text(&routing["timbrado"]),
        configuration: tr.t(&format!(
            "sandbox-configuration-{}",
            text(&routing["configuration"])
        )),
        answer: answer_line,
        approved: response["approved"].as_bool().unwrap_or(false),
        warnings: answer["warnings"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|w| format!("{}: {}", text(&w["field"]), text(&w["message"])))
            .collect(),
        signed_xml: artifact("signed_xml"),
        channel_response: artifact("channel_response"),
        response_json: serde_json::to_string_pretty(response).unwrap_or_default(),
        has_pdf,
    };
    console.page(&page(&console, document, mode, Vec::new(), Some(outcome)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn joined(pieces: &[Piece]) -> String {
        pieces.iter().map(|p| p.text.as_str()).collect()
    }

    #[test]
    fn highlighting_keeps_every_character_and_colours_names_and_values() {
        let xml = "<?xml version=\"1.0\"?><rDE xmlns=\"http://ekuatia.set.gov.py/sifen/xsd\"><dDVId a='1'>7</dDVId><x/><!-- c --></rDE>";
        let pieces = highlight(xml, false);
        assert_eq!(joined(&pieces), xml, "nothing lost or added");
        let of = |kind: &str| -> Vec<&str> {
            pieces
                .iter()
                .filter(|p| p.kind == kind)
                .map(|p| p.text.as_str())
                .collect()
        };
        assert_eq!(of("tag"), ["rDE", "dDVId", "dDVId", "x", "rDE"]);
        assert_eq!(of("value"), ["\"http://ekuatia.set.gov.py/sifen/xsd\"", "'1'"]);
        assert_eq!(of("text"), ["7"]);
        for broken in ["<a", "a < b", "<a b=\"c>", "<a b=c>", ""] {
            assert_eq!(joined(&highlight(broken, false)), broken);
            assert_eq!(joined(&highlight(broken, true)), broken);
        }
    }

    #[test]
    fn indenting_puts_each_element_on_its_line_and_adds_only_whitespace() {
        let xml = "<?xml version=\"1.0\"?><a><b>1</b><c><d/><e>x y</e></c></a>";
        let shown = joined(&highlight(xml, true));
        assert_eq!(
            shown,
            "<?xml version=\"1.0\"?>\n<a>\n  <b>1</b>\n  <c>\n    <d/>\n    <e>x y</e>\n  </c>\n</a>"
        );
        // Whitespace between tags is the indentation's own, not doubled.
        assert_eq!(
            joined(&highlight("<a>\n <b>1</b>\n</a>", true)),
            "<a>\n  <b>1</b>\n</a>"
        );
    }
}
