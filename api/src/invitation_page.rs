//! The page an invitation's `accept_url` opens (`/invitations/{token}`): what the invitation is,
//! and a form that accepts it, logging the invitee in first when the browser has no session of
//! the invited address. Plain server-rendered HTML in Spanish, no JavaScript; it calls the same
//! use case as `POST /v1/invitations/{token}/accept`.

use axum::Form;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{Html, IntoResponse, Response};
use chrono::Utc;
use kuatia_application::identity;
use serde::Deserialize;

use crate::auth::Credentials;
use crate::error::ApiError;
use crate::extract::Path;
use crate::routes::identity::{accept, identity_error, invitation_of_token, session_cookie};
use crate::state::AppState;

/// The form's fields: a password when the page asked the invitee to log in.
#[derive(Debug, Default, Deserialize)]
pub struct AcceptForm {
    password: Option<String>,
}

fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

fn page(status: StatusCode, title: &str, body: &str) -> Response {
    let html = format!(
        "<!doctype html><html lang=\"es-PY\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <title>{title} · kuatia</title>\
         <style>body{{font-family:system-ui,sans-serif;max-width:32rem;margin:3rem auto;padding:0 1rem;line-height:1.5}}\
         label,input,button{{display:block;font-size:1rem}}input{{width:100%;padding:.4rem;margin:.2rem 0 1rem}}\
         button{{padding:.5rem 1rem}}</style></head>\
         <body><main><h1>{title}</h1>{body}</main></body></html>",
        title = escape(title)
    );
    let mut response = (status, Html(html)).into_response();
    response.headers_mut().insert(
        header::CACHE_CONTROL,
        axum::http::HeaderValue::from_static("no-store"),
    );
    response
}

fn role_name(role: kuatia_domain::access::Role) -> &'static str {
    use kuatia_domain::access::Role;
    match role {
        Role::Owner => "propietario",
        Role::Admin => "administrador",
        Role::Issuer => "emisor",
        Role::Viewer => "consulta",
        Role::Auditor => "auditor",
    }
}

fn failure(err: &ApiError) -> Response {
    page(
        err.status,
        "No se pudo aceptar la invitación",
        &format!("<p>{}</p>", escape(&err.message)),
    )
}

/// `GET /invitations/{token}`.
pub async fn show(
    State(state): State<AppState>,
    credentials: Result<Credentials, ApiError>,
    Path(token): Path<String>,
) -> Response {
    let (invitation, tenant) = match invitation_of_token(&state, &token).await {
        Ok(found) => found,
        Err(e) => {
            return page(
                e.status,
                "Invitación no encontrada",
                "<p>Este enlace de invitación no es válido.</p>",
            );
        }
    };
    let what = format!(
        "<p>Te invitaron a <strong>{}</strong> con el rol <strong>{}</strong>, para la dirección \
         <strong>{}</strong>. Vence el {} (UTC).</p>",
        escape(&tenant.name),
        role_name(invitation.role),
        escape(&invitation.email),
        invitation.expires_at.format("%d/%m/%Y %H:%M")
    );
    if invitation.status != "invited" || Utc::now() >= invitation.expires_at {
        return page(
            StatusCode::CONFLICT,
            "Invitación cerrada",
            &format!("{what}<p>Esta invitación ya fue aceptada, fue revocada o venció.</p>"),
        );
    }
    let action = format!("/invitations/{}", escape(&token));
    let form = match credentials {
        Ok(Credentials::Session { user, .. }) if user.email == invitation.email => format!(
            "<form method=\"post\" action=\"{action}\"><button type=\"submit\">Aceptar la invitación</button></form>"
        ),
        _ => format!(
            "<p>Para aceptarla, ingresá la contraseña de tu cuenta {email}. ¿Todavía no tenés cuenta? \
             Registrate primero con esta misma dirección.</p>\
             <form method=\"post\" action=\"{action}\">\
             <label for=\"password\">Contraseña</label>\
             <input id=\"password\" name=\"password\" type=\"password\" autocomplete=\"current-password\" required>\
             <button type=\"submit\">Iniciar sesión y aceptar</button></form>",
            email = escape(&invitation.email)
        ),
    };
    page(StatusCode::OK, "Invitación", &format!("{what}{form}"))
}

/// `POST /invitations/{token}`: logs in as the invited address when a password is given, then
/// accepts.
pub async fn submit(
    State(state): State<AppState>,
    _limit: crate::rate_limit::PerIp,
    credentials: Result<Credentials, ApiError>,
    Path(token): Path<String>,
    Form(form): Form<AcceptForm>,
) -> Response {
    let (invitation, tenant) = match invitation_of_token(&state, &token).await {
        Ok(found) => found,
        Err(e) => return failure(&e),
    };
    let (user, cookie) = match (form.password.filter(|p| !p.is_empty()), credentials) {
        (Some(password), _) => match identity::login(&state.store, &invitation.email, &password).await {
            Ok(session) => match session_cookie(&state, &session) {
                Ok(cookie) => (session.user, Some(cookie)),
                Err(e) => return failure(&e),
            },
            Err(e) => return failure(&identity_error(e)),
        },
        (None, Ok(Credentials::Session { user, .. })) => (user, None),
        (None, _) => {
            return failure(&ApiError::unauthenticated(
                "iniciá sesión con la dirección invitada para aceptar",
            ));
        }
    };
    let mut response = match accept(&state, &token, &user).await {
        Ok(_) => page(
            StatusCode::OK,
            "Invitación aceptada",
            &format!(
                "<p>Listo: ahora sos {} de <strong>{}</strong>.</p>",
                role_name(invitation.role),
                escape(&tenant.name)
            ),
        ),
        Err(e) => failure(&e),
    };
    if let Some(cookie) = cookie {
        response.headers_mut().insert(header::SET_COOKIE, cookie);
    }
    response
}
