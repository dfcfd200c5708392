//! Home: today's and this month's documents by status, and what needs attention (documents
//! SIFEN refused or kuatia gave up on, retries, validation failures, deliveries waiting for the
//! issuer's hand, certificates expiring, channels not ready).

use crate::extract::Query;
use askama::Template;
use axum::extract::State;
use axum::response::Response;
use kuatia_domain::document::aggregate::DocumentStatus;

use super::documents::{Row, row};
use crate::console::{Chrome, Console};
use crate::routes::documents::ListQuery;
use crate::state::AppState;

/// One status and how many.
pub struct Count {
    pub status: String,
    pub words: String,
    pub n: i64,
}

/// A certificate near its end.
pub struct CertificateNote {
    pub name: String,
    pub until: String,
    pub days: i64,
}

/// A channel that cannot issue, and why.
pub struct ChannelNote {
    pub channel: String,
    pub problems: Vec<String>,
}

/// The home page.
#[derive(Template)]
#[template(path = "console/home.html")]
pub struct HomePage {
    pub chrome: Chrome,
    pub today: Vec<Count>,
    pub today_total: i64,
    pub month: Vec<Count>,
    pub month_total: i64,
    pub attention: Vec<Count>,
    pub pending_manual: Vec<Row>,
    pub certificates: Vec<CertificateNote>,
    pub channels: Vec<ChannelNote>,
    /// Autoimpresor ranges 90 % used or more, in words.
    pub ranges: Vec<String>,
    pub can_issue: bool,
    /// No channel can issue yet and the role may set one up: the wizard is offered first.
    pub setup_needed: bool,
}

/// The statuses that ask for someone's attention, in the order shown.
const ATTENTION: [DocumentStatus; 4] = [
    DocumentStatus::Rejected,
    DocumentStatus::FailedTerminal,
    DocumentStatus::Retrying,
    DocumentStatus::ValidationFailed,
];

fn counts(console: &Console, found: &[(String, i64)]) -> (Vec<Count>, i64) {
    let tr = console.chrome.tr;
    let mut out: Vec<Count> = DocumentStatus::ALL
        .iter()
        .filter_map(|s| {
            let n = found
                .iter()
                .find(|(st, _)| st == s.as_str())
                .map_or(0, |(_, n)| *n);
            (n > 0).then(|| Count {
                status: s.as_str().to_owned(),
                words: tr.status(s.as_str()),
                n,
            })
        })
        .collect();
    out.sort_by_key(|c| std::cmp::Reverse(c.n));
    let total = out.iter().map(|c| c.n).sum();
    (out, total)
}

/// `GET /console`.
pub async fn show(State(state): State<AppState>, mut console: Console) -> Response {
    console.chrome.nav = "home";
    match page(&state, &console).await {
        Ok(page) => console.page(&page),
        Err(e) => console.error_page(&e),
    }
}

async fn page(state: &AppState, console: &Console) -> Result<HomePage, crate::error::ApiError> {
    let caller = &console.caller;
    caller.require(crate::routes::documents::READ_DOCUMENTS)?;
    let tr = console.chrome.tr;
    let now = state.intake.clock.now();
    let stats = crate::routes::documents::read::document_stats(State(state.clone()), caller.clone())
        .await?
        .0;
    let pairs = |m: &std::collections::BTreeMap<String, i64>| {
        m.iter().map(|(k, v)| (k.clone(), *v)).collect::<Vec<_>>()
    };
    let (today_counts, today_total) = counts(console, &pairs(&stats.today));
    let (month_counts, month_total) = counts(console, &pairs(&stats.month));
    let all = pairs(&stats.all);
    let attention = ATTENTION
        .iter()
        .filter_map(|s| {
            let n = all.iter().find(|(st, _)| st == s.as_str()).map_or(0, |(_, n)| *n);
            (n > 0).then(|| Count {
                status: s.as_str().to_owned(),
                words: tr.status(s.as_str()),
                n,
            })
        })
        .collect();
    let pending = crate::routes::documents::read::list_documents(
        State(state.clone()),
        caller.clone(),
        Query(ListQuery {
            delivery: Some("pending_manual".into()),
            limit: Some("10".into()),
            ..ListQuery::default()
        }),
    )
    .await?
    .0;
    let pending_manual = pending.documents.iter().map(|d| row(tr, d)).collect();
    let mut certificates = Vec::new();
    let mut channels = Vec::new();
    let mut ranges = Vec::new();
    let mut setup_needed = false;
    if console.may(crate::routes::certificates::LIST_CERTIFICATES) {
        let listed = crate::routes::certificates::list_certificates(State(state.clone()), caller.clone())
            .await?
            .0;
        let names: Vec<(String, String)> = listed
            .iter()
            .map(|c| (c.id.to_string(), c.label.clone().unwrap_or(c.subject.clone())))
            .collect();
        let name_of = |kind: &str, id: &str| {
            (kind == "certificate")
                .then(|| names.iter().find(|(i, _)| i == id).map(|(_, n)| n.clone()))
                .flatten()
        };
        for c in listed {
            let days = (c.not_after - now).num_days();
            if days <= 30 {
                certificates.push(CertificateNote {
                    name: c.label.clone().unwrap_or(c.subject.clone()),
                    until: crate::console::i18n::local(c.not_after),
                    days,
                });
            }
        }
        let readiness = crate::routes::emission_channels::channel_readiness(
            State(state.clone()),
            caller.clone(),
            Query(Default::default()),
        )
        .await?
        .0;
        for ch in &readiness.channels {
            if let Some(n) = ch.numbering.as_ref().filter(|n| n.nearly_exhausted) {
                ranges.push(tr.tn(
                    "home-range-nearly-used",
                    &[
                        ("timbrado", &n.timbrado),
                        ("left", &kuatia_domain::format::quantity_of(n.left.into())),
                        ("percent", &n.used_percent),
                    ],
                ));
            }
        }
        setup_needed = console.may(crate::routes::companies::CREATE_COMPANY)
            && !readiness.channels.iter().any(|c| c.ready);
        for ch in readiness.channels.into_iter().filter(|c| !c.ready) {
            channels.push(ChannelNote {
                channel: ch.channel,
                problems: ch
                    .checks
                    .into_iter()
                    .filter(|c| !c.ok)
                    .map(|c| tr.finding(&c.finding, &c.message, &name_of))
                    .collect(),
            });
        }
    }
    Ok(HomePage {
        chrome: console.chrome.clone(),
        today: today_counts,
        today_total,
        month: month_counts,
        month_total,
        attention,
        pending_manual,
        certificates,
        channels,
        ranges,
        can_issue: console.may(crate::routes::documents::CREATE_DOCUMENT),
        setup_needed,
    })
}
