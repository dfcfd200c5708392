//! The setup wizard (`/console/setup`): a taxpayer from nothing to a ready channel, one step a
//! page, each saving through the REST API's own handlers with the console's caller: the company
//! (`POST`/`PATCH /v1/companies`; the RUC's check digit checked as typed, the legal name filled
//! from the taxpayer registry when one is loaded, the place chosen from SET's tables), branch and
//! issuance point (`POST /v1/branches`, `/v1/issuance-points`), the certificate
//! (`POST /v1/certificates`, then its checks from `POST /v1/certificates/{id}/validate`), the SIFEN
//! and/or autoimpresor channel (`POST`/`PATCH /v1/emission-channels`), the print settings
//! (`PATCH /v1/print-settings`, with the KuDE of a sample invoice rendered by the sandbox use case
//! beside them) and the readiness checklist (`GET /v1/emission-channels/readiness`), whose green
//! ends at the hand-issue form.
//!
//! Nothing is kept by the wizard itself: where it stands is read from what is configured, so
//! leaving and coming back (`/console/setup`) continues at the first step not done, and the same
//! pages edit each record later. A refusal is said by field beside the field, with what was typed
//! kept (passwords and files excepted).

use std::collections::BTreeMap;

use askama::Template;
use axum::Form;
use axum::body::Body;
use axum::extract::{Multipart, State};
use axum::http::{HeaderMap, Request, header};
use axum::response::{IntoResponse, Redirect, Response};
use base64::Engine;
use kuatia_domain::geography;
use kuatia_domain::ruc::Ruc;
use serde::Deserialize;
use serde_json::{Map, Value, json};
use uuid::Uuid;

use crate::console::{Chrome, Console, redirect_with};
use crate::error::ApiError;
use crate::extract::{Json, Path, Query};
use crate::routes::branches::{
    BranchQuery, BranchView, CreateBranch, CreateIssuancePoint, IssuancePointView, PointQuery,
};
use crate::routes::certificates::{CertificateView, CheckView};
use crate::routes::companies::CompanyView;
use crate::routes::emission_channels::{ChannelReadiness, ChannelRequest, ChannelView, CompanyFilter};
use crate::routes::print_settings::{PrintSettingsQuery, PrintSettingsView};
use crate::state::AppState;

/// SIFEN's test environment, offered to a new channel (SET's address; the SOAP client's
/// `TEST_BASE_URL`).
const SIFEN_TEST: &str = "https://sifen-test.set.gov.py";

/// The steps, in order.
pub const STEPS: [&str; 6] = ["company", "branch", "certificate", "channel", "print", "ready"];

/// One step in the list at the top.
pub struct StepLink {
    pub name: &'static str,
    pub words: String,
    pub done: bool,
}

/// A choice of a select.
pub struct Choice {
    pub value: String,
    pub words: String,
}

/// A field of a form.
pub struct Field {
    pub name: &'static str,
    pub label: String,
    /// `text`, `email`, `tel`, `date`, `password`, `file`, `select`, `checkbox`.
    pub kind: &'static str,
    pub value: String,
    pub options: Vec<Choice>,
    pub hint: Option<String>,
    pub error: Option<String>,
    pub required: bool,
    /// Extra attributes (static, from this module only).
    pub attrs: &'static str,
}

/// A fieldset.
pub struct Group {
    pub legend: String,
    pub fields: Vec<Field>,
}

/// A secondary submit button (`action=value`).
pub struct Button {
    pub value: &'static str,
    pub words: String,
    pub id: &'static str,
}

/// A form of a step.
pub struct FormSpec {
    pub id: &'static str,
    pub heading: Option<String>,
    pub action: String,
    pub multipart: bool,
    pub groups: Vec<Group>,
    pub submit: String,
    pub buttons: Vec<Button>,
}

/// A check, green or not.
pub struct Check {
    pub ok: bool,
    pub words: String,
}

/// A link on a listed record (`href`, words, element id).
pub struct RecordLink {
    pub href: String,
    pub words: String,
    pub id: String,
}

/// A record already configured, with its checks and the links that edit it.
pub struct Listed {
    pub title: String,
    pub lines: Vec<String>,
    pub checks: Vec<Check>,
    pub links: Vec<RecordLink>,
}

/// A step's page.
#[derive(Template)]
#[template(path = "console/setup.html")]
pub struct SetupPage {
    pub chrome: Chrome,
    pub steps: Vec<StepLink>,
    pub step: &'static str,
    pub title: String,
    pub intro: String,
    /// `?company=…` when the company was chosen explicitly, else empty.
    pub cq: String,
    pub problems: Vec<String>,
    pub notes: Vec<String>,
    pub listed: Vec<Listed>,
    pub forms: Vec<FormSpec>,
    pub preview: Option<String>,
    pub skip: Option<(String, String)>,
    pub next: Option<(String, String)>,
}

/// `?company=` on every step.
#[derive(Debug, Default, Deserialize)]
pub struct CompanyChoice {
    pub company: Option<String>,
}

/// What is configured for the company the wizard works on.
struct Progress {
    company: Option<CompanyView>,
    branches: Vec<BranchView>,
    points: Vec<IssuancePointView>,
    certificates: Vec<CertificateView>,
    channels: Vec<ChannelView>,
    print: Option<PrintSettingsView>,
    readiness: Vec<ChannelReadiness>,
    /// Whether the company was named in the query.
    explicit: bool,
}

impl Progress {
    fn company_id(&self) -> Option<Uuid> {
        self.company.as_ref().map(|c| c.id)
    }

    fn done(&self, step: &str) -> bool {
        match step {
            "company" => self.company.is_some(),
            "branch" => !self.points.is_empty(),
            "certificate" => {
                !self.certificates.is_empty() || self.channels.iter().any(|c| c.channel == "autoimpresor")
            }
            "channel" => !self.channels.is_empty(),
            "print" => self.print.as_ref().is_some_and(|p| p.id.is_some()),
            // A channel that can issue; a kind not configured is not a step left.
            _ => self.readiness.iter().any(|r| r.ready),
        }
    }

    /// A branch (`001 · Casa matriz`), point (`001-001 Caja 1`) or certificate (its label or
    /// holder) of this company by id, as a check names it.
    fn name_of(&self, kind: &str, id: &str) -> Option<String> {
        let id: Uuid = id.parse().ok()?;
        match kind {
            "branch" => self
                .branches
                .iter()
                .find(|b| b.id == id)
                .map(|b| format!("{} · {}", b.code, b.name)),
            "point" => {
                let pt = self.points.iter().find(|pt| pt.id == id)?;
                let branch = self.branches.iter().find(|b| b.id == pt.branch_id)?;
                Some(match &pt.name {
                    Some(name) => format!("{}-{} · {name}", branch.code, pt.code),
                    None => format!("{}-{}", branch.code, pt.code),
                })
            }
            "certificate" => self
                .certificates
                .iter()
                .find(|c| c.id == id)
                .map(|c| c.label.clone().unwrap_or_else(|| c.subject.clone())),
            _ => None,
        }
    }

    /// The first step not done (the last when all are).
    fn next_step(&self) -> &'static str {
        STEPS.iter().copied().find(|s| !self.done(s)).unwrap_or("ready")
    }

    fn cq(&self) -> String {
        match (&self.company, self.explicit) {
            (Some(c), true) => format!("?company={}", c.id),
            _ => String::new(),
        }
    }
}

async fn progress(state: &AppState, console: &Console, choice: &CompanyChoice) -> Result<Progress, ApiError> {
    let caller = &console.caller;
    let companies = crate::routes::companies::list_companies(State(state.clone()), caller.clone())
        .await?
        .0;
    let wanted = choice
        .company
        .as_deref()
        .filter(|c| !c.is_empty())
        .map(|c| {
            c.parse::<Uuid>()
                .map_err(|_| ApiError::not_found("no such company"))
        })
        .transpose()?;
    let company = match wanted {
        Some(id) => Some(
            companies
                .into_iter()
                .find(|c| c.id == id)
                .ok_or_else(|| ApiError::not_found("no such company"))?,
        ),
        None => companies.into_iter().next(),
    };
    let mut p = Progress {
        company,
        branches: Vec::new(),
        points: Vec::new(),
        certificates: Vec::new(),
        channels: Vec::new(),
        print: None,
        readiness: Vec::new(),
        explicit: wanted.is_some(),
    };
    let Some(id) = p.company_id() else {
        return Ok(p);
    };
    let s = || State(state.clone());
    p.branches = crate::routes::branches::list_branches(
        s(),
        caller.clone(),
        Query(BranchQuery { company_id: Some(id) }),
    )
    .await?
    .0;
    p.points = crate::routes::branches::list_issuance_points(
        s(),
        caller.clone(),
        Query(PointQuery {
            company_id: Some(id),
            branch_id: None,
        }),
    )
    .await?
    .0;
    p.certificates = crate::routes::certificates::list_certificates(s(), caller.clone())
        .await?
        .0
        .into_iter()
        .filter(|c| c.company_id == id)
        .collect();
    p.channels = crate::routes::emission_channels::list_channels(
        s(),
        caller.clone(),
        Query(CompanyFilter { company_id: Some(id) }),
    )
    .await?
    .0;
    p.print = Some(
        crate::routes::print_settings::get_print_settings(
            s(),
            caller.clone(),
            Query(PrintSettingsQuery { company_id: Some(id) }),
        )
        .await?
        .0,
    );
    p.readiness = crate::routes::emission_channels::channel_readiness(
        s(),
        caller.clone(),
        Query(CompanyFilter { company_id: Some(id) }),
    )
    .await?
    .0
    .channels;
    Ok(p)
}

/// The values a form sent (the last of a repeated name).
struct Sent(Vec<(String, String)>);

impl Sent {
    fn get(&self, name: &str) -> String {
        self.0
            .iter()
            .rev()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.trim().to_owned())
            .unwrap_or_default()
    }

    fn opt(&self, name: &str) -> Option<String> {
        Some(self.get(name)).filter(|v| !v.is_empty())
    }

    fn checked(&self, name: &str) -> bool {
        self.0.iter().any(|(k, v)| k == name && v == "1")
    }
}

/// Where each refusal goes: the API's field (`sifen.csc_id`, `economic_activities[0].code`)
/// to the form's field, through `aliases` and then its last segment; what names no field of the
/// form stays in the list at the top only.
fn by_field(
    tr: crate::console::i18n::Tr,
    err: &ApiError,
    aliases: &[(&str, &str)],
) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for issue in err
        .details
        .as_ref()
        .and_then(|d| d["errors"].as_array())
        .into_iter()
        .flatten()
    {
        let field = issue["field"].as_str().unwrap_or_default();
        let message = said_issue(
            tr,
            field,
            issue["code"].as_str().unwrap_or_default(),
            issue["message"].as_str().unwrap_or_default(),
        );
        let name = aliases
            .iter()
            .find(|(api, _)| {
                field == *api
                    || field.starts_with(&format!("{api}["))
                    || field.starts_with(&format!("{api}."))
            })
            .map_or_else(
                || {
                    let last = field.rsplit('.').next().unwrap_or(field);
                    last.split('[').next().unwrap_or(last).to_owned()
                },
                |(_, form)| (*form).to_owned(),
            );
        out.entry(name).or_insert(message);
    }
    out
}

/// A refusal of `field` with `code` in the console's words (`setup-error-<code>-<field's path>`,
/// else `setup-error-<code>`, with the values its sentence needs: the longest length
/// the API's message names, the place SET's table gives a city), else the API's message.
fn said_issue(tr: crate::console::i18n::Tr, field: &str, code: &str, message: &str) -> String {
    // `economic_activities[0].code` → `economic_activities-code`.
    let mut path = String::new();
    let mut in_index = false;
    for c in field.chars() {
        match c {
            '[' => in_index = true,
            ']' => in_index = false,
            '.' => path.push('-'),
            c if !in_index => path.push(c),
            _ => {}
        }
    }
    let mut values: Vec<(&str, String)> = Vec::new();
    match code {
        // "… must have 1 to 255 characters"
        "invalid_length" => {
            if let Some(max) = message
                .split(" to ")
                .nth(1)
                .and_then(|rest| rest.split(' ').next())
                .filter(|n| n.bytes().all(|b| b.is_ascii_digit()))
            {
                values.push(("max", max.to_owned()));
            }
        }
        // "city 6 (AGUARA) is in department 2 CONCEPCION, not …": the place from the table.
        "city_department_mismatch" | "city_district_mismatch" => {
            let place = message
                .strip_prefix("city ")
                .and_then(|rest| rest.split(' ').next())
                .and_then(|code| code.parse::<u32>().ok())
                .and_then(geography::city)
                .and_then(|city| {
                    let district = geography::district(city.district)?;
                    let department = geography::department(district.department)?;
                    Some((city, district, department))
                });
            if let Some((city, district, department)) = place {
                values.push(("city", city.name.clone()));
                values.push(("district", district.name.clone()));
                values.push(("department", department.name.clone()));
            }
        }
        _ => {}
    }
    let args: Vec<(&str, &dyn std::fmt::Display)> = values
        .iter()
        .map(|(name, value)| (*name, value as &dyn std::fmt::Display))
        .collect();
    let needs = match code {
        "invalid_length" => &["max"][..],
        "city_department_mismatch" | "city_district_mismatch" => &["city", "district", "department"][..],
        _ => &[][..],
    };
    if needs.iter().any(|n| !values.iter().any(|(have, _)| have == n)) {
        return message.to_owned();
    }
    for key in [
        format!("setup-error-{code}-{path}"),
        format!("setup-error-{code}"),
    ] {
        let words = tr.tn(&key, &args);
        if words != key {
            return words;
        }
    }
    message.to_owned()
}

fn field(name: &'static str, label: String, kind: &'static str, value: impl Into<String>) -> Field {
    Field {
        name,
        label,
        kind,
        value: value.into(),
        options: Vec::new(),
        hint: None,
        error: None,
        required: false,
        attrs: "",
    }
}

impl Field {
    /// The ids of what describes the field: its live RUC check, hint and error.
    pub fn described_by(&self) -> String {
        let mut ids = Vec::new();
        if self.name == "ruc" {
            ids.push("ruc-check".to_owned());
        }
        if self.hint.is_some() {
            ids.push(format!("h-{}", self.name));
        }
        if self.error.is_some() {
            ids.push(format!("e-{}", self.name));
        }
        ids.join(" ")
    }

    fn required(mut self) -> Self {
        self.required = true;
        self
    }
    fn hint(mut self, hint: String) -> Self {
        self.hint = Some(hint);
        self
    }
    fn attrs(mut self, attrs: &'static str) -> Self {
        self.attrs = attrs;
        self
    }
    fn options(mut self, options: Vec<Choice>) -> Self {
        self.options = options;
        self
    }
}

/// Sets each field's error from `errors` and says what the top of the page lists: the errors no
/// field took, else "see the marked fields", else the refusal's message.
fn said(
    tr: crate::console::i18n::Tr,
    forms: &mut [FormSpec],
    errors: BTreeMap<String, String>,
    e: &ApiError,
) -> Vec<String> {
    let left = place_errors(forms, errors);
    if !left.is_empty() {
        left
    } else if e.details.is_some() {
        vec![tr.t("setup-see-fields")]
    } else {
        vec![e.message.clone()]
    }
}

/// Sets each field's error from `errors`; returns the errors no field took.
fn place_errors(forms: &mut [FormSpec], mut errors: BTreeMap<String, String>) -> Vec<String> {
    for form in forms.iter_mut() {
        for group in &mut form.groups {
            for f in &mut group.fields {
                if let Some(e) = errors.remove(f.name) {
                    f.error = Some(e);
                }
            }
        }
    }
    errors.into_iter().map(|(f, m)| format!("{f}: {m}")).collect()
}

fn choice(value: impl Into<String>, words: impl Into<String>) -> Choice {
    Choice {
        value: value.into(),
        words: words.into(),
    }
}

/// The page frame of `step`.
fn frame(console: &Console, p: &Progress, step: &'static str) -> SetupPage {
    let tr = console.chrome.tr;
    let mut chrome = console.chrome.clone();
    chrome.nav = "setup";
    SetupPage {
        chrome,
        steps: STEPS
            .iter()
            .map(|s| StepLink {
                name: s,
                words: tr.t(&format!("setup-step-{s}")),
                done: p.done(s),
            })
            .collect(),
        step,
        title: tr.t(&format!("setup-step-{step}")),
        intro: tr.t(&format!("setup-intro-{step}")),
        cq: p.cq(),
        problems: Vec::new(),
        notes: Vec::new(),
        listed: Vec::new(),
        forms: Vec::new(),
        preview: None,
        skip: None,
        next: None,
    }
}

/// The link to the step after `step`, once `step` is done.
fn next_link(console: &Console, p: &Progress, step: &str) -> Option<(String, String)> {
    let i = STEPS.iter().position(|s| *s == step)?;
    let after = STEPS.get(i + 1)?;
    p.done(step).then(|| {
        (
            format!("/console/setup/{after}{}", p.cq()),
            console.chrome.tr.t("setup-continue"),
        )
    })
}

/// The progress and the page frame of `step` (its next link set), or the answer instead: a
/// refusal, or the company's step for a step that needs the company before it exists.
async fn open_step(
    state: &AppState,
    console: &Console,
    choice: &CompanyChoice,
    step: &'static str,
) -> Result<(Progress, SetupPage), Response> {
    console
        .caller
        .require(crate::routes::companies::CREATE_COMPANY)
        .map_err(|e| console.error_page(&e))?;
    let p = progress(state, console, choice)
        .await
        .map_err(|e| console.error_page(&e))?;
    if step != "company" && p.company.is_none() {
        return Err(Redirect::to("/console/setup/company").into_response());
    }
    let mut page = frame(console, &p, step);
    page.next = next_link(console, &p, step);
    Ok((p, page))
}

/// Runs `build` on the step's page (see [`open_step`]), or answers its refusal.
async fn show_step(
    state: &AppState,
    console: &Console,
    choice: &CompanyChoice,
    step: &'static str,
    build: impl FnOnce(&Console, &Progress, &mut SetupPage) -> Result<(), ApiError>,
) -> Response {
    let (p, mut page) = match open_step(state, console, choice, step).await {
        Ok(opened) => opened,
        Err(answer) => return answer,
    };
    match build(console, &p, &mut page) {
        Ok(()) => console.page(&page),
        Err(e) => console.error_page(&e),
    }
}

/// `GET /console/setup`: the first step not done.
pub async fn start(
    State(state): State<AppState>,
    console: Console,
    Query(choice): Query<CompanyChoice>,
) -> Response {
    if let Err(e) = console.caller.require(crate::routes::companies::CREATE_COMPANY) {
        return console.error_page(&e);
    }
    match progress(&state, &console, &choice).await {
        Ok(p) => Redirect::to(&format!("/console/setup/{}{}", p.next_step(), p.cq())).into_response(),
        Err(e) => console.error_page(&e),
    }
}

/// `GET /console/setup/company`.
pub async fn step_company(
    State(state): State<AppState>,
    console: Console,
    Query(choice): Query<CompanyChoice>,
) -> Response {
    show_step(&state, &console, &choice, "company", |c, p, page| {
        company_page(c, p, page, None, None);
        Ok(())
    })
    .await
}

/// `GET /console/setup/branch`.
pub async fn step_branch(
    State(state): State<AppState>,
    console: Console,
    Query(choice): Query<CompanyChoice>,
) -> Response {
    show_step(&state, &console, &choice, "branch", |c, p, page| {
        branch_page(c, p, page, None, None);
        Ok(())
    })
    .await
}

/// `GET /console/setup/channel`.
pub async fn step_channel(
    State(state): State<AppState>,
    console: Console,
    Query(choice): Query<CompanyChoice>,
) -> Response {
    show_step(&state, &console, &choice, "channel", |c, p, page| {
        channel_page(c, p, page, None, None);
        Ok(())
    })
    .await
}

/// `GET /console/setup/print`.
pub async fn step_print(
    State(state): State<AppState>,
    console: Console,
    Query(choice): Query<CompanyChoice>,
) -> Response {
    show_step(&state, &console, &choice, "print", |c, p, page| {
        print_page(c, p, page, None, None);
        Ok(())
    })
    .await
}

/// `GET /console/setup/ready`.
pub async fn step_ready(
    State(state): State<AppState>,
    console: Console,
    Query(choice): Query<CompanyChoice>,
) -> Response {
    show_step(&state, &console, &choice, "ready", |c, p, page| {
        ready_page(c, p, page);
        Ok(())
    })
    .await
}

// ---------------------------------------------------------------------------------------------
// The company

/// What the company's form shows: the stored company, or what was typed.
fn company_values(p: &Progress) -> Sent {
    let Some(c) = &p.company else {
        return Sent(vec![("taxpayer_type".into(), "legal_entity".into())]);
    };
    let profile = serde_json::to_value(&c.profile).unwrap_or(Value::Null);
    let text = |v: &Value| match v {
        Value::String(s) => s.clone(),
        Value::Number(n) => n.to_string(),
        _ => String::new(),
    };
    let mut out = vec![("ruc".to_owned(), c.ruc.clone())];
    for name in [
        "legal_name",
        "trade_name",
        "taxpayer_type",
        "tax_regime_code",
        "address",
        "house_number",
        "department_code",
        "district_code",
        "city_code",
        "phone",
        "email",
    ] {
        out.push((name.to_owned(), text(&profile[name])));
    }
    out.push((
        "activity_code".into(),
        text(&profile["economic_activities"][0]["code"]),
    ));
    out.push((
        "activity_description".into(),
        text(&profile["economic_activities"][0]["description"]),
    ));
    Sent(out)
}

/// The department, district and city selects for what was chosen so far.
fn place_fields(console: &Console, sent: &Sent, prefix: &'static str) -> Vec<Field> {
    let tr = console.chrome.tr;
    let (dep_name, dis_name, city_name) = match prefix {
        "" => ("department_code", "district_code", "city_code"),
        _ => (
            "branch_department_code",
            "branch_district_code",
            "branch_city_code",
        ),
    };
    let department = sent.get(dep_name).parse::<u16>().ok();
    let district = sent
        .get(dis_name)
        .parse::<u16>()
        .ok()
        .filter(|d| geography::district(*d).is_some_and(|d| Some(d.department) == department));
    let city = sent.get(city_name).parse::<u32>().ok();
    // A city chosen without its district (a stored company) picks its district.
    let district = district.or_else(|| {
        city.and_then(geography::city)
            .map(|c| c.district)
            .filter(|d| geography::district(*d).is_some_and(|d| Some(d.department) == department))
    });
    let pick = tr.t("setup-pick");
    let mut departments = vec![choice("", pick.clone())];
    departments.extend(geography::departments().map(|d| choice(d.code.to_string(), d.name.clone())));
    let mut districts = vec![choice("", pick.clone())];
    if let Some(dep) = department {
        districts.extend(
            geography::districts_of(dep)
                .into_iter()
                .map(|d| choice(d.code.to_string(), d.name.clone())),
        );
    }
    let mut cities = vec![choice("", pick)];
    if let Some(dis) = district {
        cities.extend(
            geography::cities_of(dis)
                .into_iter()
                .map(|c| choice(c.code.to_string(), c.name.clone())),
        );
    }
    let required = prefix.is_empty();
    let mut out = vec![
        field(
            dep_name,
            tr.t("setup-department"),
            "select",
            department.map(|d| d.to_string()).unwrap_or_default(),
        )
        .options(departments)
        .attrs("data-refresh"),
        field(
            dis_name,
            tr.t("setup-district"),
            "select",
            district.map(|d| d.to_string()).unwrap_or_default(),
        )
        .options(districts)
        .attrs("data-refresh"),
        field(
            city_name,
            tr.t("setup-city"),
            "select",
            city.map(|c| c.to_string()).unwrap_or_default(),
        )
        .options(cities),
    ];
    if required {
        out[0].required = true;
        out[2].required = true;
    }
    out
}

fn company_page(
    console: &Console,
    p: &Progress,
    page: &mut SetupPage,
    sent: Option<&Sent>,
    err: Option<&ApiError>,
) {
    let tr = console.chrome.tr;
    let stored = company_values(p);
    let v = sent.unwrap_or(&stored);
    let editing = p.company.is_some();
    let mut ruc = field("ruc", tr.t("setup-ruc"), "text", v.get("ruc"))
        .required()
        .hint(tr.t("setup-ruc-hint"))
        .attrs("data-ruc inputmode=\"numeric\" autocomplete=\"off\"");
    if editing {
        ruc.attrs = "readonly";
        ruc.hint = Some(tr.t("setup-ruc-fixed"));
    }
    let types = vec![
        choice("legal_entity", tr.t("setup-legal-entity")),
        choice("individual", tr.t("setup-individual")),
    ];
    let mut identity = vec![
        ruc,
        field(
            "legal_name",
            tr.t("setup-legal-name"),
            "text",
            v.get("legal_name"),
        )
        .required()
        .attrs("autocomplete=\"organization\""),
        field(
            "trade_name",
            tr.t("setup-trade-name"),
            "text",
            v.get("trade_name"),
        ),
        field(
            "taxpayer_type",
            tr.t("setup-taxpayer-type"),
            "select",
            v.get("taxpayer_type"),
        )
        .options(types),
        field(
            "tax_regime_code",
            tr.t("setup-tax-regime"),
            "text",
            v.get("tax_regime_code"),
        )
        .hint(tr.t("setup-tax-regime-hint"))
        .attrs("inputmode=\"numeric\""),
    ];
    identity[0].required = true;
    let mut address = vec![
        field("address", tr.t("setup-address"), "text", v.get("address"))
            .required()
            .attrs("autocomplete=\"street-address\""),
        field(
            "house_number",
            tr.t("setup-house-number"),
            "text",
            v.get("house_number"),
        )
        .required(),
    ];
    address.extend(place_fields(console, v, ""));
    let contact = vec![
        field("phone", tr.t("setup-phone"), "tel", v.get("phone"))
            .required()
            .attrs("autocomplete=\"tel\""),
        field("email", tr.t("setup-email"), "email", v.get("email"))
            .required()
            .attrs("autocomplete=\"email\""),
        field(
            "activity_code",
            tr.t("setup-activity-code"),
            "text",
            v.get("activity_code"),
        )
        .required()
        .hint(tr.t("setup-activity-hint"))
        .attrs("inputmode=\"numeric\""),
        field(
            "activity_description",
            tr.t("setup-activity-description"),
            "text",
            v.get("activity_description"),
        )
        .required(),
    ];
    let mut buttons = vec![Button {
        value: "places",
        words: tr.t("setup-refresh-places"),
        id: "refresh-places",
    }];
    if !editing {
        buttons.insert(
            0,
            Button {
                value: "lookup",
                words: tr.t("setup-lookup"),
                id: "lookup-ruc",
            },
        );
    }
    page.forms.push(FormSpec {
        id: "setup-company",
        heading: None,
        action: format!("/console/setup/company{}", p.cq()),
        multipart: false,
        groups: vec![
            Group {
                legend: tr.t("setup-identity"),
                fields: identity,
            },
            Group {
                legend: tr.t("setup-address-legend"),
                fields: address,
            },
            Group {
                legend: tr.t("setup-contact"),
                fields: contact,
            },
        ],
        submit: tr.t(if editing {
            "setup-save"
        } else {
            "setup-save-continue"
        }),
        buttons,
    });
    if let Some(e) = err {
        let errors = by_field(tr, e, &[("economic_activities", "activity_code")]);
        page.problems = said(tr, &mut page.forms, errors, e);
    }
}

/// A number typed in a form, or a refusal of that field.
fn number<T: std::str::FromStr>(
    sent: &Sent,
    name: &str,
    console: &Console,
    required: bool,
) -> Result<Option<T>, (String, String)> {
    let text = sent.get(name);
    if text.is_empty() {
        return if required {
            Err((name.to_owned(), console.chrome.tr.t("setup-required")))
        } else {
            Ok(None)
        };
    }
    text.parse::<T>()
        .map(Some)
        .map_err(|_| (name.to_owned(), console.chrome.tr.t("setup-not-a-number")))
}

/// Refuses in the console's words before the API is asked: every problem at once.
fn refusal(problems: Vec<(String, String)>) -> ApiError {
    crate::routes::companies::invalid(
        problems
            .into_iter()
            .map(|(field, message)| (field, "invalid".to_owned(), message))
            .collect(),
    )
}

/// `POST /console/setup/company`: `action` is `lookup` (the legal name from the registry),
/// `places` (the districts and cities of what was chosen) or `save`.
pub async fn save_company(
    State(state): State<AppState>,
    console: Console,
    Query(choice): Query<CompanyChoice>,
    Form(form): Form<Vec<(String, String)>>,
) -> Response {
    let sent = Sent(form);
    if let Some(r) = console.refuse_forged(sent.opt("csrf").as_deref()) {
        return r;
    }
    let tr = console.chrome.tr;
    let p = match progress(&state, &console, &choice).await {
        Ok(p) => p,
        Err(e) => return console.error_page(&e),
    };
    let action = sent.get("action");
    let redraw = |sent: Sent, err: Option<ApiError>, note: Option<String>| {
        let mut page = frame(&console, &p, "company");
        company_page(&console, &p, &mut page, Some(&sent), err.as_ref());
        page.notes.extend(note);
        console.page(&page)
    };
    if action == "places" {
        return redraw(sent, None, None);
    }
    if action == "lookup" {
        let ruc = match Ruc::parse(&sent.get("ruc")) {
            Ok(ruc) => ruc,
            Err(e) => {
                let err = ApiError::invalid_field("ruc", "invalid", e.to_string());
                return redraw(sent, Some(err), None);
            }
        };
        let mut values = sent.0.clone();
        let note = match state.intake.registry.name_of(&ruc).await {
            Some(name) => {
                values.retain(|(k, _)| k != "legal_name" && k != "taxpayer_type");
                values.push(("legal_name".into(), name.clone()));
                // SET numbers legal entities from 80 000 000 on.
                let entity = ruc
                    .to_string()
                    .split('-')
                    .next()
                    .and_then(|n| n.parse::<u64>().ok())
                    .is_some_and(|n| n >= 80_000_000);
                values.push((
                    "taxpayer_type".into(),
                    if entity { "legal_entity" } else { "individual" }.into(),
                ));
                tr.t1("setup-registry-found", "name", name)
            }
            None => tr.t("setup-registry-unknown"),
        };
        return redraw(Sent(values), None, Some(note));
    }
    // Save: the typed numbers first (said by field), then the API.
    let mut problems = Vec::new();
    let department = number::<u16>(&sent, "department_code", &console, true)
        .map_err(|e| problems.push(e))
        .ok()
        .flatten();
    let district = number::<u16>(&sent, "district_code", &console, false)
        .map_err(|e| problems.push(e))
        .ok()
        .flatten();
    let city = number::<u32>(&sent, "city_code", &console, true)
        .map_err(|e| problems.push(e))
        .ok()
        .flatten();
    let regime = number::<u8>(&sent, "tax_regime_code", &console, false)
        .map_err(|e| problems.push(e))
        .ok()
        .flatten();
    // The RUC in the console's words (the API checks it again).
    if p.company.is_none() {
        match Ruc::parse(&sent.get("ruc")) {
            Ok(_) => {}
            Err(kuatia_domain::ruc::RucError::CheckDigit { expected, .. }) => {
                problems.push(("ruc".into(), tr.t1("setup-ruc-bad", "dv", expected)));
            }
            Err(_) => problems.push(("ruc".into(), tr.t("setup-ruc-format"))),
        }
    }
    if !problems.is_empty() {
        return redraw(sent, Some(refusal(problems)), None);
    }
    let mut body = Map::new();
    for name in [
        "legal_name",
        "address",
        "house_number",
        "phone",
        "email",
        "taxpayer_type",
    ] {
        body.insert(name.into(), json!(sent.get(name)));
    }
    body.insert("trade_name".into(), json!(sent.opt("trade_name")));
    body.insert("tax_regime_code".into(), json!(regime));
    body.insert("department_code".into(), json!(department));
    body.insert("district_code".into(), json!(district));
    body.insert("city_code".into(), json!(city));
    // The wizard edits the first activity; the others are kept.
    let mut activities = p
        .company
        .as_ref()
        .and_then(|c| serde_json::to_value(&c.profile).ok())
        .and_then(|v| v["economic_activities"].as_array().cloned())
        .unwrap_or_default();
    let first = json!({"code": sent.get("activity_code"), "description": sent.get("activity_description")});
    if activities.is_empty() {
        activities.push(first);
    } else {
        activities[0] = first;
    }
    body.insert("economic_activities".into(), Value::Array(activities));
    // The stored names of the place are the table's: dropped so that they follow the codes.
    let s = State(state.clone());
    let saved = match &p.company {
        Some(company) => {
            crate::routes::companies::update_company(s, console.caller.clone(), Path(company.id), Json(body))
                .await
                .map(|c| c.0.id)
        }
        None => {
            body.insert("ruc".into(), json!(sent.get("ruc")));
            crate::routes::companies::create_company(s, console.caller.clone(), Json(body))
                .await
                .map(|c| c.1.0.id)
        }
    };
    match saved {
        Ok(id) => {
            let cq = if p.explicit {
                format!("?company={id}")
            } else {
                String::new()
            };
            let to = if p.company.is_some() {
                format!("/console/setup/company{cq}")
            } else {
                format!("/console/setup/branch{cq}")
            };
            redirect_with(&to, true, &tr.t("setup-company-saved"))
        }
        Err(e) if e.status.is_client_error() && e.status.as_u16() != 403 && e.status.as_u16() != 404 => {
            redraw(sent, Some(e), None)
        }
        Err(e) => console.error_page(&e),
    }
}

// ---------------------------------------------------------------------------------------------
// Branch and issuance point

fn branch_page(
    console: &Console,
    p: &Progress,
    page: &mut SetupPage,
    sent: Option<&Sent>,
    err: Option<&ApiError>,
) {
    let tr = console.chrome.tr;
    for b in &p.branches {
        let points: Vec<String> = p
            .points
            .iter()
            .filter(|pt| pt.branch_id == b.id)
            .map(|pt| {
                tr.tn(
                    "setup-point-line",
                    &[("code", &pt.code), ("name", &pt.name.clone().unwrap_or_default())],
                )
            })
            .collect();
        let mut links = vec![RecordLink {
            href: format!("/console/setup/branch/{}{}", b.id, p.cq()),
            words: tr.t1("setup-branch-edit", "code", &b.code),
            id: format!("edit-branch-{}", b.code),
        }];
        links.extend(
            p.points
                .iter()
                .filter(|pt| pt.branch_id == b.id)
                .map(|pt| RecordLink {
                    href: format!("/console/setup/point/{}{}", pt.id, p.cq()),
                    words: tr.tn("setup-point-edit", &[("branch", &b.code), ("code", &pt.code)]),
                    id: format!("edit-point-{}-{}", b.code, pt.code),
                }),
        );
        page.listed.push(Listed {
            title: format!("{} · {}", b.code, b.name),
            lines: if points.is_empty() {
                vec![tr.t("setup-no-points")]
            } else {
                points
            },
            checks: Vec::new(),
            links,
        });
    }
    let first = p.branches.is_empty();
    let defaults = Sent(vec![
        (
            "branch_code".into(),
            if first { "001".into() } else { String::new() },
        ),
        (
            "branch_name".into(),
            if first {
                tr.t("setup-branch-default-name")
            } else {
                String::new()
            },
        ),
        ("point_code".into(), "001".into()),
    ]);
    let v = sent.unwrap_or(&defaults);
    let mut fields = vec![
        field(
            "branch_code",
            tr.t("setup-branch-code"),
            "text",
            v.get("branch_code"),
        )
        .required()
        .hint(tr.t("setup-code-hint"))
        .attrs("inputmode=\"numeric\" maxlength=\"3\""),
    ];
    fields.extend(branch_fields(console, v));
    let point = vec![
        field(
            "point_code",
            tr.t("setup-point-code"),
            "text",
            v.get("point_code"),
        )
        .required()
        .hint(tr.t("setup-code-hint"))
        .attrs("inputmode=\"numeric\" maxlength=\"3\""),
        field(
            "point_name",
            tr.t("setup-point-name"),
            "text",
            v.get("point_name"),
        ),
    ];
    page.forms.push(FormSpec {
        id: "setup-branch",
        heading: (!first).then(|| tr.t("setup-branch-another")),
        action: format!("/console/setup/branch{}", p.cq()),
        multipart: false,
        groups: vec![
            Group {
                legend: tr.t("setup-branch-legend"),
                fields,
            },
            Group {
                legend: tr.t("setup-point-legend"),
                fields: point,
            },
        ],
        submit: tr.t("setup-save-continue"),
        buttons: vec![Button {
            value: "places",
            words: tr.t("setup-refresh-places"),
            id: "refresh-places",
        }],
    });
    if let Some(e) = err {
        let errors = by_field(tr, e, BRANCH_ALIASES);
        page.problems = said(tr, &mut page.forms, errors, e);
    }
}

/// Where the API's refusals of a branch go in the branch's forms.
const BRANCH_ALIASES: &[(&str, &str)] = &[
    ("code", "branch_code"),
    ("name", "branch_name"),
    ("address", "branch_address"),
    ("house_number", "branch_house_number"),
    ("city_code", "branch_city_code"),
    ("city_name", "branch_city_code"),
    ("department_code", "branch_department_code"),
    ("department_name", "branch_department_code"),
    ("is_default", "branch_default"),
];

/// A branch's fields but its code: name, address, house number and place (for a new branch and
/// for editing one).
fn branch_fields(console: &Console, v: &Sent) -> Vec<Field> {
    let tr = console.chrome.tr;
    let mut fields = vec![
        field(
            "branch_name",
            tr.t("setup-branch-name"),
            "text",
            v.get("branch_name"),
        )
        .required(),
        field(
            "branch_address",
            tr.t("setup-address"),
            "text",
            v.get("branch_address"),
        )
        .hint(tr.t("setup-branch-address-hint")),
        field(
            "branch_house_number",
            tr.t("setup-house-number"),
            "text",
            v.get("branch_house_number"),
        ),
    ];
    fields.extend(place_fields(console, v, "branch_"));
    fields
}

/// The branch's department and city as typed (either may be blank: the company's), or the
/// refusal of what is not a number, in the console's words.
fn branch_place(sent: &Sent, console: &Console) -> Result<(Option<u16>, Option<u32>), ApiError> {
    let department = number::<u16>(sent, "branch_department_code", console, false);
    let city = number::<u32>(sent, "branch_city_code", console, false);
    match (department, city) {
        (Ok(department), Ok(city)) => Ok((department, city)),
        (department, city) => Err(refusal(
            [department.err(), city.err()].into_iter().flatten().collect(),
        )),
    }
}

/// Like [`by_field`] for the point's refusals: its `code` and `name` are the point's.
fn point_error(e: ApiError) -> ApiError {
    let Some(details) = e.details.clone() else {
        return ApiError {
            details: Some(
                json!({"errors": [{"field": "point_code", "code": "invalid", "message": e.message}]}),
            ),
            ..e
        };
    };
    let mut details = details;
    if let Some(errors) = details["errors"].as_array_mut() {
        for issue in errors {
            let renamed = match issue["field"].as_str() {
                Some("code") => "point_code",
                Some("name") => "point_name",
                _ => continue,
            };
            issue["field"] = json!(renamed);
        }
    }
    ApiError {
        details: Some(details),
        ..e
    }
}

/// `POST /console/setup/branch`: the branch (or the existing one of that code) and its point.
pub async fn save_branch(
    State(state): State<AppState>,
    console: Console,
    Query(choice): Query<CompanyChoice>,
    Form(form): Form<Vec<(String, String)>>,
) -> Response {
    let sent = Sent(form);
    if let Some(r) = console.refuse_forged(sent.opt("csrf").as_deref()) {
        return r;
    }
    let tr = console.chrome.tr;
    let p = match progress(&state, &console, &choice).await {
        Ok(p) => p,
        Err(e) => return console.error_page(&e),
    };
    let Some(company) = p.company_id() else {
        return Redirect::to("/console/setup/company").into_response();
    };
    let redraw = |sent: Sent, err: Option<ApiError>| {
        let mut page = frame(&console, &p, "branch");
        branch_page(&console, &p, &mut page, Some(&sent), err.as_ref());
        console.page(&page)
    };
    if sent.get("action") == "places" {
        return redraw(sent, None);
    }
    let (department, city) = match branch_place(&sent, &console) {
        Ok(place) => place,
        Err(e) => return redraw(sent, Some(e)),
    };
    let code = sent.get("branch_code");
    // A branch saved before its point was refused is used again, not made twice.
    let branch = match p.branches.iter().find(|b| b.code == code) {
        Some(b) => b.id,
        None => {
            let body = CreateBranch {
                company_id: Some(company),
                code,
                name: sent.get("branch_name"),
                address: sent.opt("branch_address"),
                house_number: sent.opt("branch_house_number"),
                city_code: city,
                city_name: None,
                department_code: department,
                department_name: None,
                is_default: p.branches.is_empty(),
            };
            match crate::routes::branches::create_branch(
                State(state.clone()),
                console.caller.clone(),
                Json(body),
            )
            .await
            {
                Ok((_, b)) => b.0.id,
                Err(e) if e.status.is_client_error() && e.status.as_u16() != 403 => {
                    return redraw(sent, Some(e));
                }
                Err(e) => return console.error_page(&e),
            }
        }
    };
    let body = CreateIssuancePoint {
        branch_id: branch,
        code: sent.get("point_code"),
        name: sent.opt("point_name"),
        is_default: p.points.is_empty(),
    };
    match crate::routes::branches::create_issuance_point(
        State(state.clone()),
        console.caller.clone(),
        Json(body),
    )
    .await
    {
        Ok(_) => redirect_with(
            &format!("/console/setup/certificate{}", p.cq()),
            true,
            &tr.t("setup-branch-saved"),
        ),
        Err(e) if e.status.is_client_error() && e.status.as_u16() != 403 => {
            // The branch stays; the page is drawn again with it listed.
            let p = match progress(&state, &console, &choice).await {
                Ok(p) => p,
                Err(e) => return console.error_page(&e),
            };
            let mut page = frame(&console, &p, "branch");
            branch_page(&console, &p, &mut page, Some(&sent), Some(&point_error(e)));
            console.page(&page)
        }
        Err(e) => console.error_page(&e),
    }
}

/// What a stored branch's form shows.
fn branch_values(b: &BranchView) -> Sent {
    let text = |v: Option<String>| v.unwrap_or_default();
    Sent(vec![
        ("branch_code".into(), b.code.clone()),
        ("branch_name".into(), b.name.clone()),
        ("branch_address".into(), text(b.address.clone())),
        ("branch_house_number".into(), text(b.house_number.clone())),
        (
            "branch_department_code".into(),
            text(b.department_code.map(|c| c.to_string())),
        ),
        (
            "branch_city_code".into(),
            text(b.city_code.map(|c| c.to_string())),
        ),
        (
            "branch_default".into(),
            if b.is_default { "1" } else { "" }.into(),
        ),
    ])
}

/// The form that edits branch `b`: everything but its code, which is shown, not sent.
fn branch_edit_page(
    console: &Console,
    p: &Progress,
    page: &mut SetupPage,
    b: &BranchView,
    sent: Option<&Sent>,
    err: Option<&ApiError>,
) {
    let tr = console.chrome.tr;
    let stored = branch_values(b);
    let v = sent.unwrap_or(&stored);
    page.title = tr.t1("setup-branch-edit", "code", &b.code);
    page.intro = tr.t("setup-branch-edit-intro");
    page.next = Some((
        format!("/console/setup/branch{}", p.cq()),
        tr.t("setup-back-to-branches"),
    ));
    let mut fields = vec![
        field("branch_code", tr.t("setup-branch-code"), "text", b.code.clone())
            .hint(tr.t("setup-code-fixed"))
            .attrs("readonly"),
    ];
    fields.extend(branch_fields(console, v));
    fields.push(field(
        "branch_default",
        tr.t("setup-branch-is-default"),
        "checkbox",
        if v.checked("branch_default") { "1" } else { "" },
    ));
    page.forms.push(FormSpec {
        id: "setup-branch-edit",
        heading: None,
        action: format!("/console/setup/branch/{}{}", b.id, p.cq()),
        multipart: false,
        groups: vec![Group {
            legend: tr.t("setup-branch-legend"),
            fields,
        }],
        submit: tr.t("setup-save"),
        buttons: vec![Button {
            value: "places",
            words: tr.t("setup-refresh-places"),
            id: "refresh-places",
        }],
    });
    if let Some(e) = err {
        let errors = by_field(tr, e, BRANCH_ALIASES);
        page.problems = said(tr, &mut page.forms, errors, e);
    }
}

/// `GET /console/setup/branch/{id}`: edit a branch.
pub async fn edit_branch(
    State(state): State<AppState>,
    console: Console,
    Path(id): Path<Uuid>,
    Query(choice): Query<CompanyChoice>,
) -> Response {
    show_step(&state, &console, &choice, "branch", |c, p, page| {
        let b = p
            .branches
            .iter()
            .find(|b| b.id == id)
            .ok_or_else(no_such_record)?;
        branch_edit_page(c, p, page, b, None, None);
        Ok(())
    })
    .await
}

/// `POST /console/setup/branch/{id}`: `PATCH /v1/branches/{id}` with what the form says.
pub async fn update_branch(
    State(state): State<AppState>,
    console: Console,
    Path(id): Path<Uuid>,
    Query(choice): Query<CompanyChoice>,
    Form(form): Form<Vec<(String, String)>>,
) -> Response {
    let sent = Sent(form);
    if let Some(r) = console.refuse_forged(sent.opt("csrf").as_deref()) {
        return r;
    }
    let p = match progress(&state, &console, &choice).await {
        Ok(p) => p,
        Err(e) => return console.error_page(&e),
    };
    let Some(b) = p.branches.iter().find(|b| b.id == id) else {
        return console.error_page(&no_such_record());
    };
    let redraw = |err: Option<ApiError>| {
        let mut page = frame(&console, &p, "branch");
        branch_edit_page(&console, &p, &mut page, b, Some(&sent), err.as_ref());
        console.page(&page)
    };
    if sent.get("action") == "places" {
        return redraw(None);
    }
    let (department, city) = match branch_place(&sent, &console) {
        Ok(place) => place,
        Err(e) => return redraw(Some(e)),
    };
    let patch = json!({
        "name": sent.get("branch_name"),
        "address": sent.opt("branch_address"),
        "house_number": sent.opt("branch_house_number"),
        "department_code": department,
        "city_code": city,
        "is_default": sent.checked("branch_default"),
    });
    let Value::Object(patch) = patch else {
        return console.error_page(&no_such_record());
    };
    match crate::routes::branches::update_branch(
        State(state.clone()),
        console.caller.clone(),
        Path(id),
        Json(patch),
    )
    .await
    {
        Ok(_) => redirect_with(
            &format!("/console/setup/branch{}", p.cq()),
            true,
            &console.chrome.tr.t1("setup-branch-updated", "code", &b.code),
        ),
        Err(e) if e.status.is_client_error() && e.status.as_u16() != 403 => redraw(Some(e)),
        Err(e) => console.error_page(&e),
    }
}

/// The form that edits point `pt` of branch `b`: its name and default flag.
fn point_edit_page(
    console: &Console,
    p: &Progress,
    page: &mut SetupPage,
    (b, pt): (&BranchView, &IssuancePointView),
    sent: Option<&Sent>,
    err: Option<&ApiError>,
) {
    let tr = console.chrome.tr;
    let stored = Sent(vec![
        ("point_name".into(), pt.name.clone().unwrap_or_default()),
        (
            "point_default".into(),
            if pt.is_default { "1" } else { "" }.into(),
        ),
    ]);
    let v = sent.unwrap_or(&stored);
    page.title = tr.tn("setup-point-edit", &[("branch", &b.code), ("code", &pt.code)]);
    page.intro = tr.t("setup-point-edit-intro");
    page.next = Some((
        format!("/console/setup/branch{}", p.cq()),
        tr.t("setup-back-to-branches"),
    ));
    page.forms.push(FormSpec {
        id: "setup-point-edit",
        heading: None,
        action: format!("/console/setup/point/{}{}", pt.id, p.cq()),
        multipart: false,
        groups: vec![Group {
            legend: tr.t("setup-point-legend"),
            fields: vec![
                field("point_code", tr.t("setup-point-code"), "text", pt.code.clone())
                    .hint(tr.t("setup-code-fixed"))
                    .attrs("readonly"),
                field(
                    "point_name",
                    tr.t("setup-point-name"),
                    "text",
                    v.get("point_name"),
                ),
                field(
                    "point_default",
                    tr.t("setup-point-is-default"),
                    "checkbox",
                    if v.checked("point_default") { "1" } else { "" },
                ),
            ],
        }],
        submit: tr.t("setup-save"),
        buttons: Vec::new(),
    });
    if let Some(e) = err {
        let errors = by_field(tr, e, &[("name", "point_name"), ("is_default", "point_default")]);
        page.problems = said(tr, &mut page.forms, errors, e);
    }
}

/// A branch or point that is not this company's (or not there at all).
fn no_such_record() -> ApiError {
    ApiError::not_found("no such branch or issuance point in this company")
}

/// Point `id` and its branch among what is configured.
fn point_of(p: &Progress, id: Uuid) -> Option<(&BranchView, &IssuancePointView)> {
    let pt = p.points.iter().find(|pt| pt.id == id)?;
    Some((p.branches.iter().find(|b| b.id == pt.branch_id)?, pt))
}

/// `GET /console/setup/point/{id}`: edit an issuance point.
pub async fn edit_point(
    State(state): State<AppState>,
    console: Console,
    Path(id): Path<Uuid>,
    Query(choice): Query<CompanyChoice>,
) -> Response {
    show_step(&state, &console, &choice, "branch", |c, p, page| {
        let record = point_of(p, id).ok_or_else(no_such_record)?;
        point_edit_page(c, p, page, record, None, None);
        Ok(())
    })
    .await
}

/// `POST /console/setup/point/{id}`: `PATCH /v1/issuance-points/{id}` with what the form says.
pub async fn update_point(
    State(state): State<AppState>,
    console: Console,
    Path(id): Path<Uuid>,
    Query(choice): Query<CompanyChoice>,
    Form(form): Form<Vec<(String, String)>>,
) -> Response {
    let sent = Sent(form);
    if let Some(r) = console.refuse_forged(sent.opt("csrf").as_deref()) {
        return r;
    }
    let p = match progress(&state, &console, &choice).await {
        Ok(p) => p,
        Err(e) => return console.error_page(&e),
    };
    let Some(record) = point_of(&p, id) else {
        return console.error_page(&no_such_record());
    };
    let mut patch = Map::new();
    patch.insert("name".into(), json!(sent.opt("point_name")));
    patch.insert("is_default".into(), json!(sent.checked("point_default")));
    match crate::routes::branches::update_issuance_point(
        State(state.clone()),
        console.caller.clone(),
        Path(id),
        Json(patch),
    )
    .await
    {
        Ok(_) => redirect_with(
            &format!("/console/setup/branch{}", p.cq()),
            true,
            &console.chrome.tr.tn(
                "setup-point-updated",
                &[("branch", &record.0.code), ("code", &record.1.code)],
            ),
        ),
        Err(e) if e.status.is_client_error() && e.status.as_u16() != 403 => {
            let mut page = frame(&console, &p, "branch");
            point_edit_page(&console, &p, &mut page, record, Some(&sent), Some(&e));
            console.page(&page)
        }
        Err(e) => console.error_page(&e),
    }
}

// ---------------------------------------------------------------------------------------------
// The certificate

fn certificate_checks(console: &Console, p: &Progress, c: &CertificateView, checks: &[CheckView]) -> Listed {
    let tr = console.chrome.tr;
    let checks = checks
        .iter()
        .map(|check| Check {
            ok: check.ok,
            words: format!(
                "{}: {}",
                tr.t(&format!("setup-check-{}", check.name)),
                tr.finding(&check.finding, &check.message, &|kind, id| p.name_of(kind, id))
            ),
        })
        .collect();
    Listed {
        title: c.label.clone().unwrap_or_else(|| c.subject.clone()),
        lines: vec![
            tr.t1(
                "setup-cert-holder",
                "ruc",
                c.ruc.clone().unwrap_or_else(|| "—".into()),
            ),
            tr.tn(
                "setup-cert-validity",
                &[
                    ("from", &crate::console::i18n::local(c.not_before)),
                    ("to", &crate::console::i18n::local(c.not_after)),
                ],
            ),
            tr.t1("setup-cert-issuer", "issuer", &c.issuer),
        ],
        checks,
        links: Vec::new(),
    }
}

fn certificate_form(
    console: &Console,
    p: &Progress,
    errors: BTreeMap<String, String>,
    label: &str,
) -> FormSpec {
    let tr = console.chrome.tr;
    let mut form = FormSpec {
        id: "setup-certificate",
        heading: (!p.certificates.is_empty()).then(|| tr.t("setup-cert-another")),
        action: format!("/console/setup/certificate{}", p.cq()),
        multipart: true,
        groups: vec![Group {
            legend: tr.t("setup-cert-legend"),
            fields: vec![
                field("pfx", tr.t("setup-cert-file"), "file", "")
                    .required()
                    .hint(tr.t("setup-cert-file-hint"))
                    .attrs("accept=\".pfx,.p12,application/x-pkcs12\""),
                field("password", tr.t("setup-cert-password"), "password", "")
                    .required()
                    .attrs("autocomplete=\"off\""),
                field("label", tr.t("setup-cert-label"), "text", label),
            ],
        }],
        submit: tr.t("setup-cert-upload"),
        buttons: Vec::new(),
    };
    // What no field takes is listed at the top by the caller.
    place_errors(std::slice::from_mut(&mut form), errors);
    form
}

fn certificate_page(console: &Console, p: &Progress, page: &mut SetupPage) {
    let tr = console.chrome.tr;
    for c in &p.certificates {
        page.listed.push(certificate_checks(console, p, c, &[]));
    }
    page.forms.push(certificate_form(console, p, BTreeMap::new(), ""));
    if p.certificates.is_empty() {
        page.skip = Some((
            format!("/console/setup/channel{}", p.cq()),
            tr.t("setup-cert-skip"),
        ));
    }
}

/// The checks of each certificate, from `POST /v1/certificates/{id}/validate`.
async fn validations(state: &AppState, console: &Console, p: &Progress) -> Vec<Listed> {
    let mut out = Vec::new();
    for c in &p.certificates {
        let mut checks = crate::routes::certificates::validate_certificate(
            State(state.clone()),
            console.caller.clone(),
            Path(c.id),
        )
        .await
        .map(|v| v.0.checks)
        .unwrap_or_default();
        if let Ok(chain) = crate::routes::certificates::certificate_chain(
            State(state.clone()),
            console.caller.clone(),
            Path(c.id),
        )
        .await
        {
            checks.push(chain.0.check);
        }
        out.push(certificate_checks(console, p, c, &checks));
    }
    out
}

/// `GET /console/setup/certificate` shows each certificate's checks and its chain (the generic step page
/// lists them without).
pub async fn certificate(
    State(state): State<AppState>,
    console: Console,
    Query(choice): Query<CompanyChoice>,
) -> Response {
    let (p, mut page) = match open_step(&state, &console, &choice, "certificate").await {
        Ok(opened) => opened,
        Err(answer) => return answer,
    };
    certificate_page(&console, &p, &mut page);
    page.listed = validations(&state, &console, &p).await;
    console.page(&page)
}

/// A part of a multipart form.
struct FormPart {
    name: String,
    file_name: Option<String>,
    bytes: axum::body::Bytes,
}

/// Every part of a multipart form, or the refusal of a malformed one (in the multipart
/// extractor's words and status).
async fn form_parts(multipart: &mut Multipart) -> Result<Vec<FormPart>, ApiError> {
    let refused = |e: axum::extract::multipart::MultipartError| {
        ApiError::validation(e.body_text()).with_status(e.status())
    };
    let mut parts = Vec::new();
    while let Some(part) = multipart.next_field().await.map_err(refused)? {
        let name = part.name().unwrap_or_default().to_owned();
        let file_name = part.file_name().map(str::to_owned);
        let bytes = part.bytes().await.map_err(refused)?;
        parts.push(FormPart {
            name,
            file_name,
            bytes,
        });
    }
    Ok(parts)
}

/// `POST /console/setup/certificate` (multipart: `csrf`, `pfx`, `password`, `label`): uploaded
/// through `POST /v1/certificates`, then its checks shown.
pub async fn upload_certificate(
    State(state): State<AppState>,
    console: Console,
    Query(choice): Query<CompanyChoice>,
    mut multipart: Multipart,
) -> Response {
    let tr = console.chrome.tr;
    let mut csrf = None;
    let mut pfx = Vec::new();
    let mut password = zeroize::Zeroizing::new(String::new());
    let mut label = String::new();
    let parts = match form_parts(&mut multipart).await {
        Ok(parts) => parts,
        Err(e) => return console.error_page(&e),
    };
    for part in parts {
        let text = || String::from_utf8_lossy(&part.bytes).into_owned();
        match part.name.as_str() {
            "csrf" => csrf = Some(text()),
            "pfx" => pfx = part.bytes.to_vec(),
            "password" => password = zeroize::Zeroizing::new(text()),
            "label" => label = text().trim().to_owned(),
            _ => {}
        }
    }
    if let Some(r) = console.refuse_forged(csrf.as_deref()) {
        return r;
    }
    let p = match progress(&state, &console, &choice).await {
        Ok(p) => p,
        Err(e) => return console.error_page(&e),
    };
    let Some(company) = p.company_id() else {
        return Redirect::to("/console/setup/company").into_response();
    };
    let mut problems = Vec::new();
    if pfx.is_empty() {
        problems.push(("pfx".to_owned(), tr.t("setup-cert-file-missing")));
    }
    if password.is_empty() {
        problems.push(("password".to_owned(), tr.t("setup-required")));
    }
    let answer = if problems.is_empty() {
        let body = json!({
            "company_id": company,
            "pfx_base64": base64::engine::general_purpose::STANDARD.encode(&pfx),
            "password": password.as_str(),
            "label": Some(label.clone()).filter(|l| !l.is_empty()),
        });
        let request = Request::builder()
            .method("POST")
            .uri("/v1/certificates")
            .header(header::CONTENT_TYPE, "application/json")
            .body(Body::from(body.to_string()))
            .map_err(|e| ApiError::internal(&e));
        match request {
            Ok(request) => crate::routes::certificates::upload_certificate(
                State(state.clone()),
                console.caller.clone(),
                request,
            )
            .await
            .map(|_| ()),
            Err(e) => Err(e),
        }
    } else {
        Err(refusal(problems))
    };
    match answer {
        Ok(()) => redirect_with(
            &format!("/console/setup/certificate{}", p.cq()),
            true,
            &tr.t("setup-cert-saved"),
        ),
        Err(e) if e.status.is_client_error() && e.status.as_u16() != 403 && e.status.as_u16() != 404 => {
            let mut page = frame(&console, &p, "certificate");
            page.listed = validations(&state, &console, &p).await;
            // A refusal without a field (not a PFX, a wrong password) belongs to the file.
            let mut errors = by_field(tr, &e, &[("pfx_base64", "pfx")]);
            if errors.is_empty() {
                errors.insert("pfx".into(), e.message.clone());
            }
            page.problems = errors
                .iter()
                .map(|(f, m)| format!("{}: {m}", field_words(&console, f)))
                .collect();
            page.forms.push(certificate_form(&console, &p, errors, &label));
            console.page(&page)
        }
        Err(e) => console.error_page(&e),
    }
}

fn field_words(console: &Console, name: &str) -> String {
    let tr = console.chrome.tr;
    match name {
        "pfx" => tr.t("setup-cert-file"),
        "password" => tr.t("setup-cert-password"),
        other => other.to_owned(),
    }
}

// ---------------------------------------------------------------------------------------------
// The channels

fn channel_page(
    console: &Console,
    p: &Progress,
    page: &mut SetupPage,
    sent: Option<(&str, &Sent)>,
    err: Option<&ApiError>,
) {
    let tr = console.chrome.tr;
    let sifen = p.channels.iter().find(|c| c.channel == "sifen");
    let auto = p.channels.iter().find(|c| c.channel == "autoimpresor");
    // The SIFEN form: the stored channel, or what was typed.
    let stored_sifen = Sent(match sifen {
        Some(c) => {
            let s = c.sifen.as_ref();
            vec![
                (
                    "environment".into(),
                    s.map_or("test".into(), |s| {
                        serde_json::to_value(s.environment)
                            .ok()
                            .and_then(|v| v.as_str().map(str::to_owned))
                            .unwrap_or_default()
                    }),
                ),
                ("endpoint".into(), c.credentials.endpoint.clone()),
                (
                    "client_id".into(),
                    c.credentials.client_id.clone().unwrap_or_default(),
                ),
                (
                    "timbrado".into(),
                    s.map(|s| s.timbrado.clone()).unwrap_or_default(),
                ),
                (
                    "timbrado_valid_from".into(),
                    s.map(|s| s.timbrado_valid_from.to_string()).unwrap_or_default(),
                ),
                ("csc_id".into(), s.map(|s| s.csc_id.clone()).unwrap_or_default()),
                (
                    "certificate_id".into(),
                    s.map(|s| s.certificate_id.to_string()).unwrap_or_default(),
                ),
            ]
        }
        None => vec![
            ("environment".into(), "test".into()),
            ("endpoint".into(), SIFEN_TEST.into()),
            ("csc_id".into(), "0001".into()),
            (
                "certificate_id".into(),
                p.certificates
                    .last()
                    .map(|c| c.id.to_string())
                    .unwrap_or_default(),
            ),
        ],
    });
    let vs = match sent {
        Some(("sifen", s)) => s,
        _ => &stored_sifen,
    };
    let environments = vec![
        choice("test", tr.t("setup-env-test")),
        choice("production", tr.t("setup-env-production")),
    ];
    let mut certificates: Vec<Choice> = p
        .certificates
        .iter()
        .map(|c| {
            choice(
                c.id.to_string(),
                format!(
                    "{} ({})",
                    c.label.clone().unwrap_or_else(|| c.subject.clone()),
                    crate::console::i18n::local(c.not_after)
                ),
            )
        })
        .collect();
    if certificates.is_empty() {
        certificates.push(choice("", tr.t("setup-no-certificate")));
    }
    let csc_hint = if sifen
        .and_then(|c| c.sifen.as_ref())
        .is_some_and(|s| s.csc_configured)
    {
        tr.t("setup-secret-kept")
    } else {
        tr.t("setup-csc-hint")
    };
    page.forms.push(FormSpec {
        id: "setup-sifen",
        heading: Some(tr.t("setup-sifen-heading")),
        action: format!("/console/setup/channel/sifen{}", p.cq()),
        multipart: false,
        groups: vec![Group {
            legend: tr.t("setup-sifen-legend"),
            fields: vec![
                field(
                    "environment",
                    tr.t("setup-environment"),
                    "select",
                    vs.get("environment"),
                )
                .options(environments),
                field("endpoint", tr.t("setup-endpoint"), "text", vs.get("endpoint"))
                    .required()
                    .hint(tr.t("setup-endpoint-hint"))
                    .attrs("inputmode=\"url\""),
                field("timbrado", tr.t("setup-timbrado"), "text", vs.get("timbrado"))
                    .required()
                    .attrs("inputmode=\"numeric\" maxlength=\"8\""),
                field(
                    "timbrado_valid_from",
                    tr.t("setup-timbrado-from"),
                    "date",
                    vs.get("timbrado_valid_from"),
                )
                .required(),
                field("csc_id", tr.t("setup-csc-id"), "text", vs.get("csc_id"))
                    .required()
                    .attrs("inputmode=\"numeric\" maxlength=\"4\""),
                field("csc", tr.t("setup-csc"), "password", "")
                    .hint(csc_hint)
                    .attrs("autocomplete=\"off\""),
                field(
                    "certificate_id",
                    tr.t("setup-certificate"),
                    "select",
                    vs.get("certificate_id"),
                )
                .options(certificates),
            ],
        }],
        submit: tr.t("setup-sifen-save"),
        buttons: Vec::new(),
    });
    // The autoimpresor form.
    let stored_auto = Sent(match auto {
        Some(c) => {
            let a = c.autoimpresor.as_ref();
            vec![
                (
                    "authorization".into(),
                    a.map(|a| a.authorization.clone()).unwrap_or_default(),
                ),
                (
                    "a_timbrado".into(),
                    a.map(|a| a.timbrado.clone()).unwrap_or_default(),
                ),
                (
                    "valid_from".into(),
                    a.map(|a| a.valid_from.to_string()).unwrap_or_default(),
                ),
                (
                    "valid_to".into(),
                    a.map(|a| a.valid_to.to_string()).unwrap_or_default(),
                ),
                (
                    "point_id".into(),
                    a.map(|a| a.issuance_point_id.to_string()).unwrap_or_default(),
                ),
                (
                    "range_start".into(),
                    a.map(|a| a.range_start.to_string()).unwrap_or_default(),
                ),
                (
                    "range_end".into(),
                    a.map(|a| a.range_end.to_string()).unwrap_or_default(),
                ),
                (
                    "next_number".into(),
                    a.map(|a| a.next_number.to_string()).unwrap_or_default(),
                ),
                ("report_endpoint".into(), c.credentials.endpoint.clone()),
            ]
        }
        None => vec![("range_start".into(), "1".into())],
    });
    let va = match sent {
        Some(("autoimpresor", s)) => s,
        _ => &stored_auto,
    };
    let points: Vec<Choice> = p
        .points
        .iter()
        .map(|pt| {
            let branch = p
                .branches
                .iter()
                .find(|b| b.id == pt.branch_id)
                .map_or("?", |b| b.code.as_str());
            choice(pt.id.to_string(), format!("{branch}-{}", pt.code))
        })
        .collect();
    page.forms.push(FormSpec {
        id: "setup-autoimpresor",
        heading: Some(tr.t("setup-auto-heading")),
        action: format!("/console/setup/channel/autoimpresor{}", p.cq()),
        multipart: false,
        groups: vec![Group {
            legend: tr.t("setup-auto-legend"),
            fields: vec![
                field(
                    "authorization",
                    tr.t("setup-authorization"),
                    "text",
                    va.get("authorization"),
                )
                .required(),
                field("a_timbrado", tr.t("setup-timbrado"), "text", va.get("a_timbrado"))
                    .required()
                    .attrs("inputmode=\"numeric\" maxlength=\"8\""),
                field(
                    "valid_from",
                    tr.t("setup-valid-from"),
                    "date",
                    va.get("valid_from"),
                )
                .required(),
                field("valid_to", tr.t("setup-valid-to"), "date", va.get("valid_to")).required(),
                field("point_id", tr.t("setup-point"), "select", va.get("point_id")).options(points),
                field(
                    "range_start",
                    tr.t("setup-range-start"),
                    "text",
                    va.get("range_start"),
                )
                .required()
                .attrs("inputmode=\"numeric\""),
                field("range_end", tr.t("setup-range-end"), "text", va.get("range_end"))
                    .required()
                    .attrs("inputmode=\"numeric\""),
                field(
                    "next_number",
                    tr.t("setup-next-number"),
                    "text",
                    va.get("next_number"),
                )
                .hint(tr.t("setup-next-number-hint"))
                .attrs("inputmode=\"numeric\""),
                field(
                    "report_endpoint",
                    tr.t("setup-report-endpoint"),
                    "text",
                    va.get("report_endpoint"),
                )
                .required()
                .hint(tr.t("setup-report-endpoint-hint"))
                .attrs("inputmode=\"url\""),
            ],
        }],
        submit: tr.t("setup-auto-save"),
        buttons: Vec::new(),
    });
    for c in &p.channels {
        page.listed.push(Listed {
            title: tr.t(&format!("setup-channel-{}", c.channel)),
            lines: vec![tr.t(if c.is_default {
                "setup-channel-default"
            } else {
                "setup-channel-other"
            })],
            checks: Vec::new(),
            links: Vec::new(),
        });
    }
    if let Some(e) = err {
        let errors = by_field(
            tr,
            e,
            &[
                ("autoimpresor.timbrado", "a_timbrado"),
                ("autoimpresor.issuance_point_id", "point_id"),
                ("autoimpresor.branch_id", "point_id"),
                (
                    "credentials.endpoint",
                    if matches!(sent, Some(("autoimpresor", _))) {
                        "report_endpoint"
                    } else {
                        "endpoint"
                    },
                ),
                ("sifen.timbrado", "timbrado"),
            ],
        );
        let which = if matches!(sent, Some(("autoimpresor", _))) {
            1
        } else {
            0
        };
        page.problems = said(tr, &mut page.forms[which..=which], errors, e);
    }
}

/// `POST /console/setup/channel/{kind}`: creates the company's channel of that kind, or changes
/// it (a secret left blank is kept).
pub async fn save_channel(
    State(state): State<AppState>,
    console: Console,
    Path(kind): Path<String>,
    Query(choice): Query<CompanyChoice>,
    Form(form): Form<Vec<(String, String)>>,
) -> Response {
    let sent = Sent(form);
    if let Some(r) = console.refuse_forged(sent.opt("csrf").as_deref()) {
        return r;
    }
    let kind: &'static str = match kind.as_str() {
        "sifen" => "sifen",
        "autoimpresor" => "autoimpresor",
        _ => return console.error_page(&ApiError::not_found("no such channel kind")),
    };
    let tr = console.chrome.tr;
    let p = match progress(&state, &console, &choice).await {
        Ok(p) => p,
        Err(e) => return console.error_page(&e),
    };
    let Some(company) = p.company_id() else {
        return Redirect::to("/console/setup/company").into_response();
    };
    let existing = p.channels.iter().find(|c| c.channel == kind);
    let body = match channel_body(&console, &p, kind, &sent, existing.is_some()) {
        Ok(body) => body,
        Err(problems) => {
            let mut page = frame(&console, &p, "channel");
            channel_page(
                &console,
                &p,
                &mut page,
                Some((kind, &sent)),
                Some(&refusal(problems)),
            );
            return console.page(&page);
        }
    };
    let s = State(state.clone());
    let saved = match existing {
        Some(c) => {
            let Value::Object(patch) = body else {
                return console.error_page(&ApiError::validation("not an object"));
            };
            crate::routes::emission_channels::update_channel(
                s,
                console.caller.clone(),
                Path(c.id),
                Json(patch),
            )
            .await
            .map(|_| ())
        }
        None => {
            let mut body = body;
            body["company_id"] = json!(company);
            body["channel"] = json!(kind);
            body["is_default"] = json!(p.channels.is_empty());
            match serde_json::from_value::<ChannelRequest>(body) {
                Ok(request) => {
                    crate::routes::emission_channels::create_channel(s, console.caller.clone(), Json(request))
                        .await
                        .map(|_| ())
                }
                Err(e) => Err(ApiError::validation(e.to_string())),
            }
        }
    };
    match saved {
        Ok(()) => redirect_with(
            &format!("/console/setup/channel{}", p.cq()),
            true,
            &tr.t(&format!("setup-channel-saved-{kind}")),
        ),
        Err(e) if e.status.is_client_error() && e.status.as_u16() != 403 && e.status.as_u16() != 404 => {
            let mut page = frame(&console, &p, "channel");
            channel_page(&console, &p, &mut page, Some((kind, &sent)), Some(&e));
            console.page(&page)
        }
        Err(e) => console.error_page(&e),
    }
}

/// The API body of a channel form; the typed dates and numbers checked first.
fn channel_body(
    console: &Console,
    p: &Progress,
    kind: &str,
    sent: &Sent,
    existing: bool,
) -> Result<Value, Vec<(String, String)>> {
    let tr = console.chrome.tr;
    let mut problems = Vec::new();
    let mut date = |name: &str| {
        let text = sent.get(name);
        match chrono::NaiveDate::parse_from_str(&text, "%Y-%m-%d") {
            Ok(d) => Some(d),
            Err(_) => {
                problems.push((
                    name.to_owned(),
                    tr.t(if text.is_empty() {
                        "setup-required"
                    } else {
                        "setup-not-a-date"
                    }),
                ));
                None
            }
        }
    };
    if kind == "sifen" {
        let from = date("timbrado_valid_from");
        let certificate = sent.get("certificate_id").parse::<Uuid>().ok();
        if certificate.is_none() {
            problems.push(("certificate_id".into(), tr.t("setup-no-certificate")));
        }
        let csc = sent.opt("csc");
        if csc.is_none() && !existing {
            problems.push(("csc".into(), tr.t("setup-required")));
        }
        if !problems.is_empty() {
            return Err(problems);
        }
        let mut sifen = json!({
            "environment": sent.get("environment"),
            "timbrado": sent.get("timbrado"),
            "timbrado_valid_from": from,
            "csc_id": sent.get("csc_id"),
            "certificate_id": certificate,
        });
        if let Some(csc) = csc {
            sifen["csc"] = json!(csc);
        }
        Ok(json!({"credentials": {"endpoint": sent.get("endpoint")}, "sifen": sifen}))
    } else {
        let from = date("valid_from");
        let to = date("valid_to");
        let mut n = |name: &str, required: bool| match number::<u64>(sent, name, console, required) {
            Ok(v) => v,
            Err(e) => {
                problems.push(e);
                None
            }
        };
        let start = n("range_start", true);
        let end = n("range_end", true);
        let next = n("next_number", false);
        let point = p
            .points
            .iter()
            .find(|pt| pt.id.to_string() == sent.get("point_id"));
        if point.is_none() {
            problems.push(("point_id".into(), tr.t("setup-required")));
        }
        if !problems.is_empty() {
            return Err(problems);
        }
        let point = point.expect("checked above");
        let mut auto = json!({
            "authorization": sent.get("authorization"),
            "timbrado": sent.get("a_timbrado"),
            "valid_from": from,
            "valid_to": to,
            "branch_id": point.branch_id,
            "issuance_point_id": point.id,
            "range_start": start,
            "range_end": end,
        });
        if let Some(next) = next {
            auto["next_number"] = json!(next);
        }
        Ok(json!({"credentials": {"endpoint": sent.get("report_endpoint")}, "autoimpresor": auto}))
    }
}

// ---------------------------------------------------------------------------------------------
// Print settings

fn print_page(
    console: &Console,
    p: &Progress,
    page: &mut SetupPage,
    sent: Option<&Sent>,
    err: Option<&ApiError>,
) {
    let tr = console.chrome.tr;
    let settings = p.print.as_ref().map(|s| &s.settings);
    let stored = Sent(match settings {
        Some(s) => vec![
            ("logo_text".into(), s.logo_text.clone()),
            ("business_activity".into(), s.business_activity.clone()),
            ("footer_note".into(), s.footer_note.clone()),
            (
                "paper".into(),
                if s.page_width.is_some_and(|w| w <= 80.0) {
                    "80mm"
                } else {
                    "a4"
                }
                .into(),
            ),
            ("show_logo".into(), if s.show_logo { "1" } else { "" }.into()),
        ],
        None => vec![("paper".into(), "a4".into())],
    });
    let v = sent.unwrap_or(&stored);
    let papers = vec![
        choice("a4", tr.t("setup-paper-a4")),
        choice("80mm", tr.t("setup-paper-80mm")),
    ];
    let logo_hint = match settings.and_then(|s| s.logo_image_name.clone()) {
        Some(name) => tr.t1("setup-logo-kept", "name", name),
        None => tr.t("setup-logo-hint"),
    };
    page.forms.push(FormSpec {
        id: "setup-print",
        heading: None,
        action: format!("/console/setup/print{}", p.cq()),
        multipart: true,
        groups: vec![Group {
            legend: tr.t("setup-print-legend"),
            fields: vec![
                field("logo_text", tr.t("setup-logo-text"), "text", v.get("logo_text")),
                field("logo", tr.t("setup-logo"), "file", "")
                    .hint(logo_hint)
                    .attrs("accept=\"image/jpeg\""),
                field(
                    "show_logo",
                    tr.t("setup-show-logo"),
                    "checkbox",
                    v.get("show_logo"),
                ),
                field(
                    "business_activity",
                    tr.t("setup-business-activity"),
                    "text",
                    v.get("business_activity"),
                ),
                field("footer_note", tr.t("setup-footer"), "text", v.get("footer_note")),
                field("paper", tr.t("setup-paper"), "select", v.get("paper")).options(papers),
            ],
        }],
        submit: tr.t("setup-print-save"),
        buttons: Vec::new(),
    });
    if p.print.as_ref().is_some_and(|s| s.id.is_some()) {
        page.preview = Some(format!("/console/setup/print/preview{}", p.cq()));
    }
    if let Some(e) = err {
        let errors = by_field(tr, e, &[("logo_image_data_url", "logo"), ("page_width", "paper")]);
        page.problems = said(tr, &mut page.forms, errors, e);
    }
}

/// `POST /console/setup/print` (multipart): `PATCH /v1/print-settings` with what was typed, the
/// logo (a JPEG) as a data URL when one was chosen.
pub async fn save_print(
    State(state): State<AppState>,
    console: Console,
    Query(choice): Query<CompanyChoice>,
    mut multipart: Multipart,
) -> Response {
    let tr = console.chrome.tr;
    let mut values = Vec::new();
    let mut logo: Option<(String, Vec<u8>)> = None;
    let parts = match form_parts(&mut multipart).await {
        Ok(parts) => parts,
        Err(e) => return console.error_page(&e),
    };
    for part in parts {
        if part.name == "logo" {
            if !part.bytes.is_empty() {
                logo = Some((
                    part.file_name.unwrap_or_else(|| "logo.jpg".into()),
                    part.bytes.to_vec(),
                ));
            }
        } else {
            values.push((part.name, String::from_utf8_lossy(&part.bytes).into_owned()));
        }
    }
    let sent = Sent(values);
    if let Some(r) = console.refuse_forged(sent.opt("csrf").as_deref()) {
        return r;
    }
    let p = match progress(&state, &console, &choice).await {
        Ok(p) => p,
        Err(e) => return console.error_page(&e),
    };
    let Some(company) = p.company_id() else {
        return Redirect::to("/console/setup/company").into_response();
    };
    let (width, height) = if sent.get("paper") == "80mm" {
        (json!(80.0), Value::Null)
    } else {
        (json!(210.0), json!(297.0))
    };
    let mut body = Map::new();
    body.insert("company_id".into(), json!(company));
    for name in ["logo_text", "business_activity", "footer_note"] {
        body.insert(name.into(), json!(sent.get(name)));
    }
    body.insert("show_logo".into(), json!(sent.checked("show_logo")));
    body.insert("page_width".into(), width);
    body.insert("page_height".into(), height);
    if let Some((name, bytes)) = logo {
        body.insert(
            "logo_image_data_url".into(),
            json!(format!(
                "data:image/jpeg;base64,{}",
                base64::engine::general_purpose::STANDARD.encode(bytes)
            )),
        );
        body.insert("logo_image_name".into(), json!(name));
    }
    match crate::routes::print_settings::patch_print_settings(
        State(state.clone()),
        console.caller.clone(),
        Json(body),
    )
    .await
    {
        Ok(_) => redirect_with(
            &format!("/console/setup/print{}", p.cq()),
            true,
            &tr.t("setup-print-saved"),
        ),
        Err(e) if e.status.is_client_error() && e.status.as_u16() != 403 && e.status.as_u16() != 404 => {
            let mut page = frame(&console, &p, "print");
            print_page(&console, &p, &mut page, Some(&sent), Some(&e));
            console.page(&page)
        }
        Err(e) => console.error_page(&e),
    }
}

/// `GET /console/setup/print/preview`: the KuDE of the sample invoice as the company prints it
/// now, from the sandbox use case (nothing stored); it may be framed by the console's own page.
pub async fn print_preview(
    State(state): State<AppState>,
    console: Console,
    headers: HeaderMap,
    Query(choice): Query<CompanyChoice>,
) -> Response {
    let p = match progress(&state, &console, &choice).await {
        Ok(p) => p,
        Err(e) => return console.error_page(&e),
    };
    let Some(company) = &p.company else {
        return console.error_page(&ApiError::not_found("no such company"));
    };
    let mut document: Value =
        serde_json::from_str(include_str!("../../../../examples/invoice.json")).unwrap_or(Value::Null);
    document["company_id"] = json!(company.id);
    document["seller"] = json!({"ruc": company.ruc, "legal_name": company.profile.legal_name});
    let now = chrono::Utc::now().with_timezone(&kuatia_domain::local_time::offset());
    document["issue_datetime"] = json!(now.to_rfc3339_opts(chrono::SecondsFormat::Secs, false));
    // Simulated: nothing leaves the service, and the KuDE is the company's all the same.
    document["mode"] = json!("demo_simulated");
    let answer = match super::sandbox::run(&state, &console, &headers, document.to_string()).await {
        Ok(answer) => answer,
        Err(e) => return console.error_page(&e),
    };
    match super::sandbox::pdf_of(&answer) {
        Some(pdf) => {
            let mut response = super::sandbox::pdf_response(pdf);
            response.headers_mut().insert(
                crate::console::FRAMEABLE,
                axum::http::HeaderValue::from_static("1"),
            );
            response
        }
        None => console.error_page(&ApiError::validation(answer["problems"].to_string())),
    }
}

// ---------------------------------------------------------------------------------------------
// Ready

fn ready_page(console: &Console, p: &Progress, page: &mut SetupPage) {
    let tr = console.chrome.tr;
    for r in p.readiness.iter().filter(|r| r.channel_id.is_some()) {
        page.listed.push(Listed {
            title: tr.t(&format!("setup-channel-{}", r.channel)),
            lines: vec![tr.t(if r.ready {
                "setup-channel-ready"
            } else {
                "setup-channel-not-ready"
            })],
            checks: r
                .checks
                .iter()
                .map(|c| Check {
                    ok: c.ok,
                    words: tr.finding(&c.finding, &c.message, &|kind, id| p.name_of(kind, id)),
                })
                .collect(),
            links: Vec::new(),
        });
    }
    if p.readiness.iter().all(|r| r.channel_id.is_none()) {
        page.problems.push(tr.t("setup-no-channel"));
    }
    if p.done("ready") {
        page.next = console
            .may(crate::routes::documents::CREATE_DOCUMENT)
            .then(|| ("/console/issue".to_owned(), tr.t("setup-issue-first")));
    } else {
        let first = p.next_step();
        if first != "ready" {
            page.next = Some((
                format!("/console/setup/{first}{}", p.cq()),
                tr.t1("setup-go-to", "step", tr.t(&format!("setup-step-{first}"))),
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::console::i18n::{Lang, Tr};

    #[test]
    fn a_refusal_is_said_in_the_consoles_words_with_the_places_of_sets_table() {
        let es = Tr { lang: Lang::Es };
        assert_eq!(
            said_issue(es, "name", "invalid_length", "name must have 1 to 255 characters"),
            "Escribí entre 1 y 255 caracteres."
        );
        assert_eq!(
            said_issue(
                es,
                "economic_activities[0].code",
                "invalid_code",
                "an activity code has 1 to 8 digits"
            ),
            "El código de actividad tiene de 1 a 8 dígitos."
        );
        assert_eq!(
            said_issue(
                es,
                "department_code",
                "city_department_mismatch",
                "city 6 (AGUARA) is in department 2 CONCEPCION, not in department 12 (SET's geographic table)"
            ),
            "AGUARA es del departamento CONCEPCION: elegí ese departamento o cambiá la ciudad."
        );
        assert_eq!(
            said_issue(
                Tr { lang: Lang::En },
                "autoimpresor.valid_to",
                "invalid_range",
                "valid_to is before valid_from"
            ),
            "The end date is before the start date."
        );
        // A code the catalogues do not know, or a message without the values: the API's words.
        assert_eq!(
            said_issue(es, "x", "brand_new_code", "as the API says"),
            "as the API says"
        );
        assert_eq!(said_issue(es, "name", "invalid_length", "too long"), "too long");
    }
}
