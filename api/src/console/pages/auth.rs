//! Logging in and out, switching the tenant and the language.

use askama::Template;
use axum::Form;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};
use kuatia_application::identity;
use serde::Deserialize;
use uuid::Uuid;

use crate::console::i18n::{LANG_COOKIE, Lang, Tr};
use crate::console::{Console, TENANT_COOKIE, cookie, render_status, safe_next, same_token};
use crate::error::ApiError;
use crate::state::AppState;

/// The pre-session form token's cookie (login has no session to derive one from).
const LOGIN_CSRF_COOKIE: &str = "kuatia_login_csrf";

/// The login page.
#[derive(Template)]
#[template(path = "console/login.html")]
pub struct LoginPage {
    pub tr: Tr,
    pub next: String,
    pub email: String,
    pub error: Option<String>,
    pub csrf: String,
    pub other_lang: (&'static str, &'static str),
}

impl LoginPage {
    fn next_encoded(&self) -> String {
        crate::console::url_encode(&format!(
            "/console/login?next={}",
            crate::console::url_encode(&self.next)
        ))
    }
}

/// `?next=` of the login page.
#[derive(Debug, Deserialize)]
pub struct NextQuery {
    next: Option<String>,
}

fn other(lang: Lang) -> (&'static str, &'static str) {
    match lang {
        Lang::Es => ("en", "English"),
        Lang::En => ("es", "Español"),
    }
}

fn login_form(
    headers: &HeaderMap,
    status: StatusCode,
    next: String,
    email: String,
    error: Option<String>,
) -> Response {
    let tr = Tr {
        lang: Lang::of_request(headers),
    };
    // One token per browser: kept while the cookie lives, so two open tabs both work.
    let (csrf, fresh) = match cookie(headers, LOGIN_CSRF_COOKIE) {
        Some(token) if token.len() == 32 => (token.to_owned(), false),
        _ => (kuatia_application::access::random_base62(32), true),
    };
    let page = LoginPage {
        tr,
        next,
        email,
        error,
        csrf: csrf.clone(),
        other_lang: other(tr.lang),
    };
    let mut response = render_status(status, &page, false);
    if fresh
        && let Ok(value) = HeaderValue::from_str(&format!(
            "{LOGIN_CSRF_COOKIE}={csrf}; Path=/console/login; HttpOnly; SameSite=Strict; Max-Age=86400"
        ))
    {
        response.headers_mut().append(header::SET_COOKIE, value);
    }
    response
}

/// `GET /console/login`.
pub async fn login_page(headers: HeaderMap, Query(q): Query<NextQuery>) -> Response {
    login_form(
        &headers,
        StatusCode::OK,
        safe_next(q.next.as_deref()),
        String::new(),
        None,
    )
}

/// The login form.
#[derive(Debug, Deserialize)]
pub struct LoginForm {
    email: Option<String>,
    password: Option<String>,
    next: Option<String>,
    csrf: Option<String>,
}

/// `POST /console/login`: the same use case as `POST /v1/auth/login`, the same cookie.
pub async fn login(
    State(state): State<AppState>,
    headers: HeaderMap,
    limit: Result<crate::rate_limit::PerIp, ApiError>,
    Form(form): Form<LoginForm>,
) -> Response {
    let tr = Tr {
        lang: Lang::of_request(&headers),
    };
    let next = safe_next(form.next.as_deref());
    let email = form.email.clone().unwrap_or_default();
    let expected = cookie(&headers, LOGIN_CSRF_COOKIE).unwrap_or_default();
    if expected.is_empty() || !same_token(form.csrf.as_deref().unwrap_or_default(), expected) {
        return login_form(
            &headers,
            StatusCode::FORBIDDEN,
            next,
            email,
            Some(tr.t("error-csrf")),
        );
    }
    if let Err(e) = limit {
        return login_form(&headers, e.status, next, email, Some(tr.t("login-too-many")));
    }
    let session =
        match identity::login(&state.store, &email, form.password.as_deref().unwrap_or_default()).await {
            Ok(session) => session,
            Err(identity::IdentityError::Store(e)) => {
                let e: ApiError = e.into();
                return login_form(&headers, e.status, next, email, Some(e.message));
            }
            Err(_) => {
                return login_form(
                    &headers,
                    StatusCode::UNAUTHORIZED,
                    next,
                    email,
                    Some(tr.t("login-wrong")),
                );
            }
        };
    let Ok(cookie) = crate::routes::identity::session_cookie(&state, &session) else {
        return (StatusCode::INTERNAL_SERVER_ERROR, "internal error").into_response();
    };
    let mut response = Redirect::to(&next).into_response();
    response.headers_mut().append(header::SET_COOKIE, cookie);
    response
}

/// `POST /console/logout`: ends the session (the API's use case) and clears the cookie.
pub async fn logout(
    State(state): State<AppState>,
    console: Console,
    Form(form): Form<super::TokenForm>,
) -> Response {
    if let Some(refused) = console.refuse_forged(form.csrf.as_deref()) {
        return refused;
    }
    if let crate::auth::Credentials::Session { session_id, .. } = &console.caller.credentials
        && let Err(e) = identity::logout(&state.store, *session_id).await
    {
        return console.error_page(&e.into());
    }
    let mut response = Redirect::to("/console/login").into_response();
    response.headers_mut().append(
        header::SET_COOKIE,
        HeaderValue::from_static("kuatia_session=; Path=/; HttpOnly; SameSite=Lax; Max-Age=0"),
    );
    response
}

/// The tenant switch.
#[derive(Debug, Deserialize)]
pub struct TenantForm {
    csrf: Option<String>,
    tenant: Option<String>,
}

/// `POST /console/tenant`: works in another of the user's tenants from now on.
pub async fn switch_tenant(console: Console, Form(form): Form<TenantForm>) -> Response {
    if let Some(refused) = console.refuse_forged(form.csrf.as_deref()) {
        return refused;
    }
    let chosen = form.tenant.as_deref().and_then(|t| t.parse::<Uuid>().ok());
    let Some(tenant) = chosen.filter(|id| console.chrome.tenants.iter().any(|t| t.id == *id)) else {
        return console.error_page(&ApiError::not_found(console.chrome.tr.t("error-not-found")));
    };
    let mut response = Redirect::to("/console").into_response();
    if let Ok(value) = HeaderValue::from_str(&format!(
        "{TENANT_COOKIE}={tenant}; Path=/; HttpOnly; SameSite=Lax; Max-Age=31536000"
    )) {
        response.headers_mut().append(header::SET_COOKIE, value);
    }
    response
}

/// `?to=&next=` of the language switch.
#[derive(Debug, Deserialize)]
pub struct LangQuery {
    to: Option<String>,
    next: Option<String>,
}

/// `GET /console/lang?to=en&next=/console/…`: remembers the language in this browser and goes
/// back to the page.
pub async fn switch_language(Query(q): Query<LangQuery>) -> Response {
    let lang = q.to.as_deref().and_then(Lang::parse).unwrap_or(Lang::Es);
    let mut response = Redirect::to(&safe_next(q.next.as_deref())).into_response();
    if let Ok(value) = HeaderValue::from_str(&format!(
        "{LANG_COOKIE}={}; Path=/; SameSite=Lax; Max-Age=31536000",
        lang.code()
    )) {
        response.headers_mut().append(header::SET_COOKIE, value);
    }
    response
}
