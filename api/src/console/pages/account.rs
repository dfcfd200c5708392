//! The person's own account (`/console/account`): the name to go by, the password (changing it
//! ends every other session), and the live sessions with "sign out everywhere else". Each form
//! calls the REST handler of `/v1/auth/me`, `/v1/auth/password` or `/v1/auth/sessions`.

use askama::Template;
use axum::Form;
use axum::extract::State;
use axum::response::Response;
use serde::Deserialize;

use super::TokenForm;
use crate::auth::Credentials;
use crate::console::i18n::local;
use crate::console::{Chrome, Console, redirect_with};
use crate::error::ApiError;
use crate::extract::Json;
use crate::routes::account;
use crate::state::AppState;

const HERE: &str = "/console/account";

/// A live session as listed.
pub struct SessionLine {
    pub opened: String,
    pub until: String,
    pub current: bool,
}

/// The account page.
#[derive(Template)]
#[template(path = "console/account.html")]
pub struct AccountPage {
    pub chrome: Chrome,
    pub email: String,
    pub name: String,
    pub sessions: Vec<SessionLine>,
    /// A refusal of the password form, said above it.
    pub password_problem: Option<String>,
}

fn credentials(console: &Console) -> Credentials {
    console.caller.credentials.clone()
}

/// `GET /console/account`.
pub async fn show(State(state): State<AppState>, mut console: Console) -> Response {
    console.chrome.nav = "account";
    render(&state, &console, None).await
}

async fn render(state: &AppState, console: &Console, password_problem: Option<String>) -> Response {
    let page = async {
        let me = account::me(credentials(console)).await?.0;
        let sessions = account::list_sessions(State(state.clone()), credentials(console))
            .await?
            .0
            .into_iter()
            .map(|s| SessionLine {
                opened: local(s.created_at),
                until: local(s.expires_at),
                current: s.current,
            })
            .collect();
        Ok::<_, ApiError>(AccountPage {
            chrome: console.chrome.clone(),
            email: me.email,
            name: me.name.unwrap_or_default(),
            sessions,
            password_problem,
        })
    };
    match page.await {
        Ok(page) => console.page(&page),
        Err(e) => console.error_page(&e),
    }
}

/// The name form.
#[derive(Debug, Deserialize)]
pub struct NameForm {
    csrf: Option<String>,
    name: Option<String>,
}

/// `POST /console/account/name`.
pub async fn rename(State(state): State<AppState>, console: Console, Form(form): Form<NameForm>) -> Response {
    if let Some(r) = console.refuse_forged(form.csrf.as_deref()) {
        return r;
    }
    let body = account::UpdateMe {
        name: form.name.unwrap_or_default(),
    };
    let tr = console.chrome.tr;
    match account::update_me(State(state), credentials(&console), Json(body)).await {
        Ok(_) => redirect_with(HERE, true, &tr.t("account-name-saved")),
        Err(e) if e.status.as_u16() == 400 => redirect_with(HERE, false, &tr.t("account-name-too-long")),
        Err(e) => console.error_page(&e),
    }
}

/// The password form.
#[derive(Debug, Deserialize)]
pub struct PasswordForm {
    csrf: Option<String>,
    current: Option<String>,
    new: Option<String>,
    repeat: Option<String>,
}

/// `POST /console/account/password`: a refusal is said above the form (never redirected, so
/// that nothing typed travels in a cookie); the passwords are not written back into the page.
pub async fn change_password(
    State(state): State<AppState>,
    mut console: Console,
    limit: Result<crate::rate_limit::PerIp, ApiError>,
    Form(form): Form<PasswordForm>,
) -> Response {
    console.chrome.nav = "account";
    if let Some(r) = console.refuse_forged(form.csrf.as_deref()) {
        return r;
    }
    let tr = console.chrome.tr;
    let Ok(limit) = limit else {
        return render(&state, &console, Some(tr.t("login-too-many"))).await;
    };
    let new = form.new.unwrap_or_default();
    if form.repeat.as_deref() != Some(new.as_str()) {
        return render(&state, &console, Some(tr.t("account-password-mismatch"))).await;
    }
    let body = account::ChangePassword {
        current_password: form.current.unwrap_or_default(),
        new_password: new,
    };
    match account::change_password(State(state.clone()), limit, credentials(&console), Json(body)).await {
        Ok(ended) => redirect_with(
            HERE,
            true,
            &tr.t1("account-password-changed", "n", ended.0.sessions_ended),
        ),
        Err(e) => {
            let code = e
                .details
                .as_ref()
                .and_then(|d| d["errors"][0]["code"].as_str())
                .unwrap_or_default();
            let words = match code {
                "wrong_password" => tr.t("account-password-wrong"),
                "weak_password" => tr.t("account-password-weak"),
                _ => return console.error_page(&e),
            };
            render(&state, &console, Some(words)).await
        }
    }
}

/// `POST /console/account/sessions/end`: every other session of the person ends.
pub async fn end_other_sessions(
    State(state): State<AppState>,
    console: Console,
    Form(form): Form<TokenForm>,
) -> Response {
    if let Some(r) = console.refuse_forged(form.csrf.as_deref()) {
        return r;
    }
    let tr = console.chrome.tr;
    match account::end_other_sessions(State(state), credentials(&console)).await {
        Ok(ended) => redirect_with(
            HERE,
            true,
            &tr.t1("account-sessions-ended", "n", ended.0.sessions_ended),
        ),
        Err(e) => console.error_page(&e),
    }
}
