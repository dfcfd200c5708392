//! Access (`/console/access`): the tenant's API keys (create with a role and an optional company
//! scope, the key shown once; the list with each key's last use; revoke) and its members (invite,
//! change a role, remove; the tenant's last owner stays one). Every action calls the REST
//! handler of `/v1/api-keys`, `/v1/memberships` or `/v1/invitations`, so the roles, scopes and
//! refusals are the API's.

use askama::Template;
use axum::Form;
use axum::extract::State;
use axum::response::Response;
use chrono::{NaiveDate, TimeZone, Utc};
use kuatia_domain::access::Role;
use kuatia_domain::tenant::TenantError;
use serde::Deserialize;
use serde_json::json;
use uuid::Uuid;

use super::TokenForm;
use crate::console::i18n::{Tr, local};
use crate::console::{Chrome, Console, redirect_with};
use crate::error::ApiError;
use crate::extract::{Json, Path, Query};
use crate::routes::{api_keys, companies, identity};
use crate::state::AppState;

/// Where every form of this page comes back to.
const HERE: &str = "/console/access";

/// The roles in the order offered (a non-owner is not offered `owner`: the API refuses it).
const ROLES: [Role; 5] = [
    Role::Owner,
    Role::Admin,
    Role::Issuer,
    Role::Viewer,
    Role::Auditor,
];

/// A role to choose.
pub struct RoleChoice {
    pub value: &'static str,
    pub words: String,
}

/// A company a key may be limited to.
pub struct CompanyChoice {
    pub id: Uuid,
    pub name: String,
}

/// A key as listed.
pub struct KeyLine {
    pub id: Uuid,
    pub name: String,
    pub role: String,
    pub scope: String,
    pub prefix: String,
    pub created: String,
    pub last_used: String,
    pub expires: String,
    /// When it was revoked, in words; `None` while it works.
    pub revoked: Option<String>,
}

/// A member as listed.
pub struct MemberLine {
    pub id: Uuid,
    pub email: String,
    pub name: String,
    pub role: &'static str,
    pub role_words: String,
    pub since: String,
    pub is_me: bool,
}

/// An invitation waiting for its invitee.
pub struct InvitationLine {
    pub id: Uuid,
    pub email: String,
    pub role: String,
    pub expires: String,
}

/// Something to show once (a key's secret, an invitation's link).
pub struct ShownOnce {
    pub title: String,
    pub value: String,
    pub note: String,
}

/// The access page.
#[derive(Template)]
#[template(path = "console/access.html")]
pub struct AccessPage {
    pub chrome: Chrome,
    pub keys: Vec<KeyLine>,
    pub members: Vec<MemberLine>,
    pub invitations: Vec<InvitationLine>,
    pub roles: Vec<RoleChoice>,
    pub companies: Vec<CompanyChoice>,
    /// Whether the role creates and revokes keys and manages members.
    pub can_manage: bool,
    pub shown_once: Option<ShownOnce>,
    /// A refusal of the form just sent, and what was typed in it.
    pub problem: Option<String>,
    pub typed: Typed,
}

/// What the create-key or invite form held when it was refused (kept, not typed again).
#[derive(Default)]
pub struct Typed {
    pub key_name: String,
    pub key_role: String,
    pub key_company: String,
    pub key_expires: String,
    pub invite_email: String,
    pub invite_role: String,
}

/// `GET /console/access`.
pub async fn show(State(state): State<AppState>, mut console: Console) -> Response {
    console.chrome.nav = "access";
    render(&state, &console, None, None, Typed::default()).await
}

async fn render(
    state: &AppState,
    console: &Console,
    shown_once: Option<ShownOnce>,
    problem: Option<String>,
    typed: Typed,
) -> Response {
    match page(state, console, shown_once, problem, typed).await {
        Ok(page) => console.page(&page),
        Err(e) => console.error_page(&e),
    }
}

async fn page(
    state: &AppState,
    console: &Console,
    shown_once: Option<ShownOnce>,
    problem: Option<String>,
    typed: Typed,
) -> Result<AccessPage, ApiError> {
    let tr = console.chrome.tr;
    let caller = &console.caller;
    let companies: Vec<CompanyChoice> = if console.may(companies::LIST_COMPANIES) {
        companies::list_companies(State(state.clone()), caller.clone())
            .await?
            .0
            .into_iter()
            .map(|c| CompanyChoice {
                id: c.id,
                name: c.profile.legal_name,
            })
            .collect()
    } else {
        Vec::new()
    };
    let company_name = |id: Option<Uuid>| match id {
        None => tr.t("access-scope-all"),
        Some(id) => companies
            .iter()
            .find(|c| c.id == id)
            .map_or_else(|| id.to_string(), |c| c.name.clone()),
    };
    // Listing keys is the API's to allow (owners, admins, auditors): anyone else is refused.
    let listed = api_keys::list_api_keys(
        State(state.clone()),
        caller.clone(),
        Query(api_keys::ApiKeysQuery { company_id: None }),
    )
    .await?
    .0;
    let never = tr.t("access-never");
    let keys = listed
        .into_iter()
        .rev()
        .map(|k| KeyLine {
            id: k.record.id,
            name: k.record.name,
            role: tr.t(&format!("role-{}", k.record.role.as_str())),
            scope: company_name(k.record.company_id),
            prefix: k.record.prefix,
            created: local(k.record.created_at),
            last_used: k.last_used_at.map_or_else(|| never.clone(), local),
            expires: k.record.expires_at.map_or_else(String::new, local),
            revoked: k.revoked_at.map(local),
        })
        .collect();
    let can_manage = console.may(identity::MANAGE_MEMBERSHIPS) && caller.company_id.is_none();
    let (mut members, mut invitations) = (Vec::new(), Vec::new());
    if can_manage {
        for m in identity::list_memberships(State(state.clone()), caller.clone())
            .await?
            .0
        {
            members.push(MemberLine {
                id: m.id,
                email: m.email.unwrap_or_default(),
                name: m.name.unwrap_or_default(),
                role: m.role.as_str(),
                role_words: tr.t(&format!("role-{}", m.role.as_str())),
                since: local(m.created_at),
                is_me: m.user_id == console.user.id,
            });
        }
        for i in identity::list_invitations(State(state.clone()), caller.clone())
            .await?
            .0
        {
            if i.status == "invited" {
                invitations.push(InvitationLine {
                    id: i.invitation_id,
                    email: i.email,
                    role: tr.t(&format!("role-{}", i.role.as_str())),
                    expires: local(i.expires_at),
                });
            }
        }
    }
    let roles = ROLES
        .iter()
        .filter(|r| **r != Role::Owner || caller.role == Role::Owner)
        .map(|r| RoleChoice {
            value: r.as_str(),
            words: tr.t(&format!("role-{}", r.as_str())),
        })
        .collect();
    Ok(AccessPage {
        chrome: console.chrome.clone(),
        keys,
        members,
        invitations,
        roles,
        companies,
        can_manage,
        shown_once,
        problem,
        typed,
    })
}

/// A refusal of the access rules, in the page's language; `None` for any other refusal.
fn rule_words(tr: Tr, e: &ApiError) -> Option<String> {
    let rules = [
        (TenantError::OwnerOnly, "access-error-owner-only"),
        (TenantError::OwnerKeyOwnerOnly, "access-error-owner-key"),
        (TenantError::OwnersOwnerOnly, "access-error-owners"),
        (TenantError::LastOwner, "access-error-last-owner"),
        (TenantError::AlreadyMember, "access-error-already-member"),
        (TenantError::BadName, "access-error-key-name"),
    ];
    // Refusals of a field, by the code the API gives it.
    let fields = [
        ("in_the_past", "access-error-expires-past"),
        ("invalid_email", "access-error-email"),
    ];
    let code = e
        .details
        .as_ref()
        .and_then(|d| d["errors"][0]["code"].as_str())
        .unwrap_or_default();
    rules
        .iter()
        .find(|(rule, _)| e.message.contains(&rule.to_string()))
        .map(|(_, key)| *key)
        .or_else(|| fields.iter().find(|(c, _)| *c == code).map(|(_, key)| *key))
        .map(|key| tr.t(key))
}

/// A refusal of a form that keeps what was typed: a role not allowed to do it at all, or a
/// thing not there, is the refusal page itself; a rule the form broke is said above the form.
fn refused_in_form(console: &Console, e: &ApiError) -> Result<String, Box<Response>> {
    match rule_words(console.chrome.tr, e) {
        Some(words) => Ok(words),
        None if matches!(e.status.as_u16(), 403 | 404) => Err(Box::new(console.error_page(e))),
        None => Ok(e.message.clone()),
    }
}

/// A form's outcome: back to the page with good news, or with the refusal said there (a role
/// not allowed, or a thing not there, is the refusal page).
fn outcome<T>(console: &Console, answer: Result<T, ApiError>, done: &str) -> Response {
    match answer {
        Ok(_) => redirect_with(HERE, true, &console.chrome.tr.t(done)),
        Err(e) => match refused_in_form(console, &e) {
            Ok(words) => redirect_with(HERE, false, &words),
            Err(page) => *page,
        },
    }
}

/// The create-key form.
#[derive(Debug, Deserialize)]
pub struct KeyForm {
    csrf: Option<String>,
    name: Option<String>,
    role: Option<String>,
    company: Option<String>,
    /// The last day it works (`YYYY-MM-DD`, Paraguay's), or empty.
    expires: Option<String>,
}

/// `POST /console/access/keys`: the key is shown on the answer itself, once (never in a URL or
/// a cookie).
pub async fn create_key(
    State(state): State<AppState>,
    mut console: Console,
    Form(form): Form<KeyForm>,
) -> Response {
    console.chrome.nav = "access";
    if let Some(r) = console.refuse_forged(form.csrf.as_deref()) {
        return r;
    }
    let tr = console.chrome.tr;
    let typed = Typed {
        key_name: form.name.clone().unwrap_or_default(),
        key_role: form.role.clone().unwrap_or_default(),
        key_company: form.company.clone().unwrap_or_default(),
        key_expires: form.expires.clone().unwrap_or_default(),
        ..Typed::default()
    };
    // The last day given is a Paraguay date: the key works through its end.
    let expires_at = match form.expires.as_deref().map(str::trim).filter(|d| !d.is_empty()) {
        None => None,
        Some(day) => match NaiveDate::parse_from_str(day, "%Y-%m-%d").ok().and_then(|d| {
            let end = d.succ_opt()?.and_hms_opt(0, 0, 0)?;
            kuatia_domain::local_time::offset()
                .from_local_datetime(&end)
                .single()
                .map(|t| t.with_timezone(&Utc))
        }) {
            Some(at) => Some(at),
            None => {
                let problem = tr.t("access-error-expires");
                return render(&state, &console, None, Some(problem), typed).await;
            }
        },
    };
    let company = form.company.as_deref().filter(|c| !c.is_empty());
    let body = json!({
        "name": form.name.as_deref().unwrap_or_default().trim(),
        "role": form.role.as_deref().unwrap_or_default(),
        "company_id": company,
        "expires_at": expires_at,
    });
    let created = match serde_json::from_value(body) {
        Ok(body) => api_keys::create_api_key(State(state.clone()), console.caller.clone(), Json(body)).await,
        Err(e) => Err(ApiError::validation(e.to_string())),
    };
    match created {
        Ok((_, created)) => {
            let shown = ShownOnce {
                title: tr.t1("access-key-created", "name", &created.0.record.name),
                value: created.0.key.clone(),
                note: tr.t("access-key-once"),
            };
            render(&state, &console, Some(shown), None, Typed::default()).await
        }
        Err(e) => match refused_in_form(&console, &e) {
            Ok(problem) => render(&state, &console, None, Some(problem), typed).await,
            Err(page) => *page,
        },
    }
}

/// `POST /console/access/keys/{id}/revoke`.
pub async fn revoke_key(
    State(state): State<AppState>,
    console: Console,
    Path(id): Path<String>,
    Form(form): Form<TokenForm>,
) -> Response {
    let id = match console.target(form.csrf.as_deref(), &id, "resource") {
        Ok(id) => id,
        Err(refused) => return *refused,
    };
    let answer = api_keys::revoke_api_key(State(state), console.caller.clone(), Path(id)).await;
    outcome(&console, answer, "access-key-revoked")
}

/// The invite form.
#[derive(Debug, Deserialize)]
pub struct InviteForm {
    csrf: Option<String>,
    email: Option<String>,
    role: Option<String>,
}

/// `POST /console/access/members`: an invitation; without a mail server its link is shown once
/// to pass on.
pub async fn invite(
    State(state): State<AppState>,
    mut console: Console,
    headers: axum::http::HeaderMap,
    Form(form): Form<InviteForm>,
) -> Response {
    console.chrome.nav = "access";
    if let Some(r) = console.refuse_forged(form.csrf.as_deref()) {
        return r;
    }
    let tr = console.chrome.tr;
    let typed = Typed {
        invite_email: form.email.clone().unwrap_or_default(),
        invite_role: form.role.clone().unwrap_or_default(),
        ..Typed::default()
    };
    let body = json!({
        "email": form.email.as_deref().unwrap_or_default().trim(),
        "role": form.role.as_deref().unwrap_or_default(),
    });
    let invited = match serde_json::from_value(body) {
        Ok(body) => {
            identity::create_membership(State(state.clone()), console.caller.clone(), headers, Json(body))
                .await
        }
        Err(e) => Err(ApiError::validation(e.to_string())),
    };
    match invited {
        Ok((_, invitation)) => match invitation.0.accept_url.clone() {
            Some(url) => {
                let shown = ShownOnce {
                    title: tr.t1("access-invited", "email", &invitation.0.email),
                    value: url,
                    note: tr.t("access-invite-link-note"),
                };
                render(&state, &console, Some(shown), None, Typed::default()).await
            }
            None => redirect_with(
                HERE,
                true,
                &tr.t1("access-invited-by-email", "email", &invitation.0.email),
            ),
        },
        Err(e) => match refused_in_form(&console, &e) {
            Ok(problem) => render(&state, &console, None, Some(problem), typed).await,
            Err(page) => *page,
        },
    }
}

/// The role form of a member.
#[derive(Debug, Deserialize)]
pub struct RoleForm {
    csrf: Option<String>,
    role: Option<String>,
}

/// `POST /console/access/members/{id}/role`.
pub async fn change_role(
    State(state): State<AppState>,
    console: Console,
    Path(id): Path<String>,
    Form(form): Form<RoleForm>,
) -> Response {
    let id = match console.target(form.csrf.as_deref(), &id, "resource") {
        Ok(id) => id,
        Err(refused) => return *refused,
    };
    let body = json!({ "role": form.role.as_deref().unwrap_or_default() });
    let answer =
        identity::update_membership(State(state), console.caller.clone(), Path(id), Json(body)).await;
    outcome(&console, answer, "access-role-changed")
}

/// `POST /console/access/members/{id}/remove`.
pub async fn remove_member(
    State(state): State<AppState>,
    console: Console,
    Path(id): Path<String>,
    Form(form): Form<TokenForm>,
) -> Response {
    let id = match console.target(form.csrf.as_deref(), &id, "resource") {
        Ok(id) => id,
        Err(refused) => return *refused,
    };
    let answer = identity::delete_membership(State(state), console.caller.clone(), Path(id)).await;
    outcome(&console, answer, "access-member-removed")
}

/// `POST /console/access/invitations/{id}/revoke`.
pub async fn revoke_invitation(
    State(state): State<AppState>,
    console: Console,
    Path(id): Path<String>,
    Form(form): Form<TokenForm>,
) -> Response {
    let id = match console.target(form.csrf.as_deref(), &id, "resource") {
        Ok(id) => id,
        Err(refused) => return *refused,
    };
    let answer = identity::revoke_invitation(State(state), console.caller.clone(), Path(id)).await;
    outcome(&console, answer, "access-invitation-revoked")
}
