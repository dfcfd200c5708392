//! The web console (`/console`): server-rendered pages for a tenant's people, Spanish first.
//!
//! Every page and action calls the very handlers and use cases of the REST API with a
//! [`Caller`] built from the session cookie and the tenant the user chose (never a copy of one):
//! the role table is the API's, so a refused action is refused server-side whatever the page
//! showed. Forms carry a CSRF token derived from the session (`csrf`); every answer carries a
//! strict Content-Security-Policy (no inline script or style), `X-Frame-Options: DENY` and
//! `no-store`. Templates are compiled (askama, `api/templates/console/`); the stylesheet and the
//! one small script are embedded in the binary.

pub mod i18n;
mod pages;

use askama::Template;
use axum::Router;
use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use kuatia_application::access::sha256_hex;
use kuatia_application::identity::User;
use kuatia_domain::access::Permission;
use kuatia_domain::tenancy::TenantId;
use uuid::Uuid;

use crate::auth::{Caller, Credentials, SESSION_COOKIE};
use crate::error::ApiError;
use crate::state::AppState;
use i18n::{Lang, Tr};

/// The cookie holding the tenant the user works in.
pub const TENANT_COOKIE: &str = "kuatia_tenant";
/// The cookie carrying one message to the next page (after a form's redirect).
const FLASH_COOKIE: &str = "kuatia_flash";

/// The console's routes (merged into the service's router).
pub fn router() -> Router<AppState> {
    Router::new()
        .route("/", get(|| async { Redirect::to("/console") }))
        .route("/console", get(pages::home::show))
        .route("/console/", get(|| async { Redirect::to("/console") }))
        .route(
            "/console/login",
            get(pages::auth::login_page).post(pages::auth::login),
        )
        .route("/console/logout", post(pages::auth::logout))
        .route("/console/tenant", post(pages::auth::switch_tenant))
        .route("/console/lang", get(pages::auth::switch_language))
        .route("/console/assets/{file}", get(asset))
        .route("/console/documents", get(pages::documents::list))
        .route("/console/documents/export", get(pages::documents::export))
        .route("/console/documents/{id}", get(pages::document::show))
        .route("/console/documents/{id}/retry", post(pages::document::retry))
        .route("/console/documents/{id}/cancel", post(pages::document::cancel))
        .route(
            "/console/documents/{id}/inutilize",
            post(pages::document::inutilize),
        )
        .route(
            "/console/documents/{id}/regenerate",
            post(pages::document::regenerate),
        )
        .route(
            "/console/documents/{id}/deliveries",
            post(pages::document::deliver),
        )
        .route(
            "/console/documents/{id}/public-link",
            post(pages::document::public_link),
        )
        .route("/console/documents/{id}/audit", get(pages::audit::show))
        .route("/console/documents/{id}/events", get(pages::audit::download))
        .route(
            "/console/issue",
            get(pages::issue::form).post(pages::issue::submit),
        )
        .route("/console/account", get(pages::account::show))
        .route("/console/account/name", post(pages::account::rename))
        .route("/console/account/password", post(pages::account::change_password))
        .route(
            "/console/account/sessions/end",
            post(pages::account::end_other_sessions),
        )
        .route(
            "/console/sandbox",
            get(pages::sandbox::show).post(pages::sandbox::submit),
        )
        .route(
            "/console/webhooks",
            get(pages::webhooks::show).post(pages::webhooks::create),
        )
        .route("/console/webhooks/{id}", get(pages::webhooks::endpoint))
        .route("/console/webhooks/{id}/test", post(pages::webhooks::test))
        .route("/console/webhooks/{id}/rotate", post(pages::webhooks::rotate))
        .route("/console/webhooks/{id}/active", post(pages::webhooks::set_active))
        .route("/console/webhooks/{id}/delete", post(pages::webhooks::delete))
        .route("/console/webhooks/{id}/replay", post(pages::webhooks::replay))
        .route(
            "/console/webhooks/{id}/deliveries/{delivery_id}",
            get(pages::webhooks::delivery),
        )
        .route("/console/setup", get(pages::setup::start))
        .route(
            "/console/setup/company",
            get(pages::setup::step_company).post(pages::setup::save_company),
        )
        .route(
            "/console/setup/branch",
            get(pages::setup::step_branch).post(pages::setup::save_branch),
        )
        .route(
            "/console/setup/branch/{id}",
            get(pages::setup::edit_branch).post(pages::setup::update_branch),
        )
        .route(
            "/console/setup/point/{id}",
            get(pages::setup::edit_point).post(pages::setup::update_point),
        )
        .route(
            "/console/setup/certificate",
            get(pages::setup::certificate).post(pages::setup::upload_certificate),
        )
        .route("/console/setup/channel", get(pages::setup::step_channel))
        .route("/console/setup/channel/{kind}", post(pages::setup::save_channel))
        .route(
            "/console/setup/print",
            get(pages::setup::step_print).post(pages::setup::save_print),
        )
        .route("/console/setup/print/preview", get(pages::setup::print_preview))
        .route("/console/setup/ready", get(pages::setup::step_ready))
        .route("/console/operators", get(pages::operators::show))
        .route(
            "/console/operators/projections/{name}/rebuild",
            post(pages::operators::rebuild),
        )
        .route("/console/operators/verify", post(pages::operators::verify))
        .route(
            "/console/operators/jobs/{id}/retry",
            post(pages::operators::retry_job),
        )
        .route(
            "/console/operators/jobs/{id}/discard",
            post(pages::operators::discard_job),
        )
        .route("/console/access", get(pages::access::show))
        .route("/console/access/keys", post(pages::access::create_key))
        .route(
            "/console/access/keys/{id}/revoke",
            post(pages::access::revoke_key),
        )
        .route("/console/access/members", post(pages::access::invite))
        .route(
            "/console/access/members/{id}/role",
            post(pages::access::change_role),
        )
        .route(
            "/console/access/members/{id}/remove",
            post(pages::access::remove_member),
        )
        .route(
            "/console/access/invitations/{id}/revoke",
            post(pages::access::revoke_invitation),
        )
        .layer(axum::middleware::map_response(security_headers))
        .layer(axum::middleware::from_fn(count_statements))
}

/// Runs the page counting the statements it sent to the database, and says how many in
/// `X-Kuatia-Statements` (a test holds the pages to a handful; an operator can see a slow one).
async fn count_statements(request: axum::extract::Request, next: axum::middleware::Next) -> Response {
    let (mut response, n) = kuatia_application::statements::counted(next.run(request)).await;
    response
        .headers_mut()
        .insert("x-kuatia-statements", HeaderValue::from(n));
    response
}

/// Marks an answer the console's own pages may frame (the KuDE preview of the setup wizard); the
/// header itself is removed before the answer leaves.
pub(crate) const FRAMEABLE: &str = "x-kuatia-frameable";

/// The headers of every console answer: no script or style but the console's own files, no
/// framing (but of an answer marked [`FRAMEABLE`], by the console itself), no caching of pages
/// (assets set their own `Cache-Control`).
async fn security_headers(mut response: Response) -> Response {
    let headers = response.headers_mut();
    let frameable = headers.remove(FRAMEABLE).is_some();
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(if frameable {
            "frame-ancestors 'self'"
        } else {
            "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; \
             connect-src 'self'; frame-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
        }),
    );
    headers.insert(
        header::X_FRAME_OPTIONS,
        HeaderValue::from_static(if frameable { "SAMEORIGIN" } else { "DENY" }),
    );
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(header::REFERRER_POLICY, HeaderValue::from_static("same-origin"));
    if !headers.contains_key(header::CACHE_CONTROL) {
        headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    }
    response
}

/// The stylesheet and the script, from the binary.
async fn asset(crate::extract::Path(file): crate::extract::Path<String>) -> Response {
    let (content_type, body): (&str, &'static str) = match file.as_str() {
        "console.css" => (
            "text/css; charset=utf-8",
            include_str!("../../assets/console.css"),
        ),
        "console.js" => (
            "text/javascript; charset=utf-8",
            include_str!("../../assets/console.js"),
        ),
        _ => return (StatusCode::NOT_FOUND, "no such file").into_response(),
    };
    (
        [
            (header::CONTENT_TYPE, HeaderValue::from_static(content_type)),
            (
                header::CACHE_CONTROL,
                HeaderValue::from_static("public, max-age=3600"),
            ),
        ],
        body,
    )
        .into_response()
}

/// The value of cookie `name`, if the request has it.
pub(crate) fn cookie<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .find_map(|pair| {
            let (key, value) = pair.trim().split_once('=')?;
            (key == name && !value.is_empty()).then_some(value)
        })
}

/// Compares two tokens in time independent of where they differ.
pub(crate) fn same_token(a: &str, b: &str) -> bool {
    a.len() == b.len() && a.bytes().zip(b.bytes()).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// One tenant the user may switch to.
#[derive(Debug, Clone)]
pub struct TenantChoice {
    /// Its id.
    pub id: Uuid,
    /// Its name.
    pub name: String,
    /// The one in use.
    pub current: bool,
}

/// A message carried to the next page.
#[derive(Debug, Clone)]
pub struct Flash {
    /// Good news (else a refusal).
    pub ok: bool,
    /// The words.
    pub text: String,
    /// A public link just made (shown once, with its WhatsApp message).
    pub link: Option<String>,
}

/// What every page's frame shows: who, where, in which language, the CSRF token, the message.
#[derive(Debug, Clone)]
pub struct Chrome {
    /// Words.
    pub tr: Tr,
    /// The user's email.
    pub user: String,
    /// The user's tenants.
    pub tenants: Vec<TenantChoice>,
    /// The tenant's name.
    pub tenant_name: String,
    /// The role's words.
    pub role: String,
    /// The form token.
    pub csrf: String,
    /// A message from the last form.
    pub flash: Option<Flash>,
    /// The menu entry to mark.
    pub nav: &'static str,
    /// The path (and query) to come back to after switching the language.
    pub here: String,
    /// Whether the role issues documents (the "Emitir" entry of the menu).
    pub can_issue: bool,
    /// Whether the role sees the tenant's keys (the "Acceso" entry of the menu).
    pub can_see_access: bool,
    /// Whether the role may use the sandbox (the "Pruebas" entry of the menu).
    pub can_try: bool,
    /// Whether the role sets the taxpayer up (the "Configuración" entry of the menu).
    pub can_set_up: bool,
}

impl Chrome {
    /// The other language's code and name, for the switch.
    pub fn other_lang(&self) -> (&'static str, &'static str) {
        match self.tr.lang {
            Lang::Es => ("en", "English"),
            Lang::En => ("es", "Español"),
        }
    }

    /// `here`, URL-encoded for a query parameter.
    pub fn here_encoded(&self) -> String {
        url_encode(&self.here)
    }

    /// The refusal (a 403 page) of a form whose token is not this session's; `None` when the
    /// token is right.
    pub fn refuse_forged(&self, token: Option<&str>) -> Option<Response> {
        match token {
            Some(t) if same_token(t, &self.csrf) => None,
            _ => Some(self.error_page(&ApiError::forbidden(self.tr.t("error-csrf")))),
        }
    }

    /// A page for a refusal, in the contract's status (404 stays 404).
    pub fn error_page(&self, err: &ApiError) -> Response {
        let page = pages::ErrorPage {
            chrome: self.clone(),
            title: self.tr.t(match err.status.as_u16() {
                404 => "error-not-found",
                403 => "error-forbidden",
                _ => "error-title",
            }),
            message: err.message.clone(),
        };
        render_status(err.status, &page, self.flash.is_some())
    }

    /// Renders a page of this request (clearing the message it showed).
    pub fn page(&self, template: &impl Template) -> Response {
        render_status(StatusCode::OK, template, self.flash.is_some())
    }
}

/// A console request: a logged-in user, the tenant chosen, the API's [`Caller`] for it.
pub struct Console {
    /// The API's caller (the same role table, scopes and rate limits).
    pub caller: Caller,
    /// The user.
    pub user: User,
    /// The page frame.
    pub chrome: Chrome,
}

impl Console {
    /// Whether the role may do `permission` (to show or hide an action; the action checks anyway).
    pub fn may(&self, permission: Permission) -> bool {
        self.caller.role.allows(permission)
    }

    /// The refusal (a 403 page) of a form whose token is not this session's; `None` when the
    /// token is right.
    pub fn refuse_forged(&self, token: Option<&str>) -> Option<Response> {
        self.chrome.refuse_forged(token)
    }

    /// The thing a form acts on, once the form's token is this session's: a forged form is
    /// refused (403), an id that is not one is not found (404, saying `what`).
    pub fn target(&self, csrf: Option<&str>, id: &str, what: &str) -> Result<Uuid, Box<Response>> {
        if let Some(r) = self.refuse_forged(csrf) {
            return Err(Box::new(r));
        }
        id.parse::<Uuid>()
            .map_err(|_| Box::new(self.error_page(&ApiError::not_found(format!("no such {what}")))))
    }

    /// A page for a refusal, in the contract's status (404 stays 404).
    pub fn error_page(&self, err: &ApiError) -> Response {
        self.chrome.error_page(err)
    }

    /// Renders a page of this request (clearing the message it showed).
    pub fn page(&self, template: &impl Template) -> Response {
        self.chrome.page(template)
    }
}

/// Renders `template` with `status`; `clear_flash` expires the message cookie it showed.
pub(crate) fn render_status(status: StatusCode, template: &impl Template, clear_flash: bool) -> Response {
    match template.render() {
        Ok(html) => {
            let mut response = (
                status,
                [(
                    header::CONTENT_TYPE,
                    HeaderValue::from_static("text/html; charset=utf-8"),
                )],
                html,
            )
                .into_response();
            if clear_flash {
                response.headers_mut().append(
                    header::SET_COOKIE,
                    HeaderValue::from_static(
                        "kuatia_flash=; Path=/console; HttpOnly; SameSite=Lax; Max-Age=0",
                    ),
                );
            }
            response
        }
        Err(err) => {
            tracing::error!(error = %err, "a console page could not be rendered");
            (StatusCode::INTERNAL_SERVER_ERROR, "internal error").into_response()
        }
    }
}

/// 303 to `to` (a path of the console), carrying `text` to the next page.
pub(crate) fn redirect_with(to: &str, ok: bool, text: &str) -> Response {
    let text: String = text.chars().take(600).collect();
    let kind = if ok { '1' } else { '0' };
    redirect_flashing(to, &format!("{kind}{}", URL_SAFE_NO_PAD.encode(text)))
}

/// 303 to `to` with a public link just made, to show once.
pub(crate) fn redirect_with_link(to: &str, link: &str) -> Response {
    redirect_flashing(to, &format!("2{}", URL_SAFE_NO_PAD.encode(link)))
}

/// 303 to `to` with the flash cookie's `value` (its kind, then base64url text).
fn redirect_flashing(to: &str, value: &str) -> Response {
    let mut response = Redirect::to(to).into_response();
    if let Ok(cookie) = HeaderValue::from_str(&format!(
        "{FLASH_COOKIE}={value}; Path=/console; HttpOnly; SameSite=Lax; Max-Age=120"
    )) {
        response.headers_mut().append(header::SET_COOKIE, cookie);
    }
    response
}

fn flash_of(headers: &HeaderMap, tr: Tr) -> Option<Flash> {
    let value = cookie(headers, FLASH_COOKIE)?;
    let (kind, text) = value.split_at_checked(1)?;
    let text = String::from_utf8(URL_SAFE_NO_PAD.decode(text).ok()?).ok()?;
    Some(match kind {
        "2" => Flash {
            ok: true,
            text: tr.t("public-link-made"),
            link: Some(text),
        },
        kind => Flash {
            ok: kind == "1",
            text,
            link: None,
        },
    })
}

/// The session's form token: a hash of the session's secret cookie, so that a page of another
/// site, which cannot read the cookie, cannot forge it.
fn csrf_of(session_token: &str) -> String {
    sha256_hex(&format!("kuatia-console-csrf:{session_token}"))
}

/// Percent-encodes a query value.
pub(crate) fn url_encode(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for b in text.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~' | b'/') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// Where to go after logging in: a console path only (never another site).
pub(crate) fn safe_next(next: Option<&str>) -> String {
    match next {
        Some(n) if n.starts_with("/console") && !n.starts_with("//") && !n.contains("\\") => n.to_owned(),
        _ => "/console".to_owned(),
    }
}

fn to_login(parts: &Parts) -> Response {
    let here = parts.uri.path_and_query().map_or("/console", |p| p.as_str());
    Redirect::to(&format!("/console/login?next={}", url_encode(here))).into_response()
}

impl FromRequestParts<AppState> for Console {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Self::Rejection> {
        let tr = Tr {
            lang: Lang::of_request(&parts.headers),
        };
        let Some(token) = cookie(&parts.headers, SESSION_COOKIE).map(str::to_owned) else {
            return Err(to_login(parts));
        };
        let (session_id, user) = match kuatia_application::identity::session(&state.store, &token).await {
            Ok(Some(found)) => found,
            Ok(None) => return Err(to_login(parts)),
            Err(e) => return Err(plain_error(tr, &e.into())),
        };
        let tenants = crate::routes::identity::tenants_of_user(state, user.id)
            .await
            .map_err(|e| plain_error(tr, &e))?;
        let chosen = cookie(&parts.headers, TENANT_COOKIE).and_then(|t| t.parse::<Uuid>().ok());
        let Some(current) = tenants
            .iter()
            .find(|t| Some(t.tenant_id) == chosen)
            .or_else(|| tenants.first())
            .cloned()
        else {
            return Err(plain_error(
                tr,
                &ApiError::forbidden(tr.t("error-no-tenant")).with_status(StatusCode::FORBIDDEN),
            ));
        };
        let credentials = Credentials::Session {
            session_id,
            user: user.clone(),
        };
        let caller = Caller::for_tenant(parts, state, credentials, TenantId::from_uuid(current.tenant_id))
            .await
            .map_err(|e| plain_error(tr, &e))?;
        let chrome = Chrome {
            tr,
            user: user.email.clone(),
            tenants: tenants
                .iter()
                .map(|t| TenantChoice {
                    id: t.tenant_id,
                    name: t.name.clone(),
                    current: t.tenant_id == current.tenant_id,
                })
                .collect(),
            tenant_name: current.name.clone(),
            role: tr.t(&format!("role-{}", caller.role.as_str())),
            csrf: csrf_of(&token),
            flash: flash_of(&parts.headers, tr),
            nav: "",
            here: parts
                .uri
                .path_and_query()
                .map_or("/console".to_owned(), |p| p.as_str().to_owned()),
            can_issue: caller.role.allows(crate::routes::documents::CREATE_DOCUMENT),
            can_see_access: caller.role.allows(crate::routes::api_keys::LIST_API_KEYS),
            can_try: caller.role.allows(crate::routes::sandbox::USE_SANDBOX),
            can_set_up: caller.role.allows(crate::routes::companies::CREATE_COMPANY),
        };
        Ok(Self { caller, user, chrome })
    }
}

/// A refusal before the frame exists (no session details to show).
fn plain_error(tr: Tr, err: &ApiError) -> Response {
    let page = pages::PlainPage {
        tr,
        title: tr.t("error-title"),
        message: err.message.clone(),
    };
    render_status(err.status, &page, false)
}
