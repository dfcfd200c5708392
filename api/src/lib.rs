//! kuatia's HTTP edge and command line: routers, error mapping, OpenAPI, the `kuatia` binary.
//!
//! Depends on every other crate; nothing depends on it. [`app`] builds the router (tests drive
//! it); [`compose`] is the composition root that wires adapters into ports (used by `main.rs` and
//! by the black-box tests); [`cli`] holds the subcommands. Handlers extract, call the
//! application, and map the result: no SQL here.

pub mod auth;
pub mod cli;
pub mod compose;
pub mod console;
pub mod demo;
pub mod error;
pub mod extract;
pub mod invitation_page;
pub mod lookup;
pub mod metrics;
pub mod middleware;
pub mod openapi;
pub mod rate_limit;
pub mod routes;
pub mod schema;
pub mod seed;
pub mod serve;
pub mod state;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use tower_http::catch_panic::CatchPanicLayer;
use utoipa::OpenApi;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;
use utoipa_swagger_ui::SwaggerUi;

use crate::error::ApiError;
use crate::state::AppState;

/// The router with the OpenAPI document assembled from its routes.
pub fn api_router() -> (Router<AppState>, utoipa::openapi::OpenApi) {
    let (router, mut api) = routes();
    utoipa::Modify::modify(&openapi::RolesListing, &mut api);
    utoipa::Modify::modify(&openapi::StandardResponses, &mut api);
    (router, api)
}

fn routes() -> (Router<AppState>, utoipa::openapi::OpenApi) {
    OpenApiRouter::with_openapi(openapi::ApiDoc::openapi())
        .routes(routes!(routes::health::health))
        .routes(routes!(routes::health::ready))
        .routes(routes!(routes::metrics::metrics))
        .routes(routes!(routes::tenants::create_tenant))
        .routes(routes!(routes::tenants::get_tenant))
        .routes(routes!(
            routes::api_keys::list_api_keys,
            routes::api_keys::create_api_key
        ))
        .routes(routes!(routes::api_keys::current_api_key))
        .routes(routes!(routes::api_keys::revoke_api_key))
        .routes(routes!(routes::identity::create_user))
        .routes(routes!(routes::identity::login))
        .routes(routes!(routes::identity::logout))
        .routes(routes!(routes::account::me, routes::account::update_me))
        .routes(routes!(routes::account::change_password))
        .routes(routes!(
            routes::account::list_sessions,
            routes::account::end_other_sessions
        ))
        .routes(routes!(routes::identity::list_invitations))
        .routes(routes!(routes::identity::revoke_invitation))
        .routes(routes!(routes::identity::accept_invitation))
        .routes(routes!(
            routes::identity::list_memberships,
            routes::identity::create_membership
        ))
        .routes(routes!(
            routes::identity::update_membership,
            routes::identity::delete_membership
        ))
        .routes(routes!(
            routes::companies::list_companies,
            routes::companies::create_company
        ))
        .routes(routes!(routes::companies::update_company))
        .routes(routes!(
            routes::branches::list_branches,
            routes::branches::create_branch
        ))
        .routes(routes!(routes::branches::update_branch))
        .routes(routes!(routes::branches::update_issuance_point))
        .routes(routes!(
            routes::branches::list_issuance_points,
            routes::branches::create_issuance_point
        ))
        .routes(routes!(
            routes::print_settings::get_print_settings,
            routes::print_settings::put_print_settings,
            routes::print_settings::patch_print_settings
        ))
        .routes(routes!(
            routes::certificates::list_certificates,
            routes::certificates::upload_certificate
        ))
        .routes(routes!(routes::certificates::validate_certificate))
        .routes(routes!(routes::certificates::certificate_chain))
        .routes(routes!(
            routes::emission_channels::list_channels,
            routes::emission_channels::create_channel
        ))
        .routes(routes!(routes::emission_channels::update_channel))
        .routes(routes!(routes::emission_channels::channel_readiness))
        .routes(routes!(routes::schemas::canonical_document_schema))
        .routes(routes!(routes::documents::validate_document))
        .routes(routes!(
            routes::documents::read::list_documents,
            routes::documents::create_document
        ))
        .routes(routes!(routes::documents::read::export_documents))
        .routes(routes!(routes::documents::read::document_stats))
        .routes(routes!(routes::documents::read::get_document))
        .routes(routes!(routes::documents::read::document_status))
        .routes(routes!(routes::documents::read::document_timeline))
        .routes(routes!(routes::documents::audit::document_events))
        .routes(routes!(routes::documents::audit::document_chain))
        .routes(routes!(routes::documents::audit::document_state_as_of))
        .routes(routes!(routes::artifacts::list_artifacts))
        .routes(routes!(routes::artifacts::download_artifact))
        .routes(routes!(routes::documents::actions::retry_document))
        .routes(routes!(routes::documents::actions::cancel_document))
        .routes(routes!(routes::documents::actions::inutilize_document))
        .routes(routes!(routes::documents::actions::deliver_by_hand))
        .routes(routes!(
            routes::public_links::list_public_links,
            routes::public_links::create_public_link
        ))
        .routes(routes!(routes::public_links::revoke_public_link))
        .routes(routes!(routes::printing::regenerate_pdf))
        .routes(routes!(routes::sandbox::preview))
        .routes(routes!(routes::events::list_events))
        .routes(routes!(
            routes::webhooks::list_webhooks,
            routes::webhooks::create_webhook
        ))
        .routes(routes!(
            routes::webhooks::update_webhook,
            routes::webhooks::delete_webhook
        ))
        .routes(routes!(routes::webhooks::deactivate_webhook))
        .routes(routes!(routes::webhooks::rotate_webhook_secret))
        .routes(routes!(routes::webhooks::test_webhook))
        .routes(routes!(routes::webhooks::list_deliveries))
        .routes(routes!(routes::webhooks::get_delivery))
        .routes(routes!(routes::webhooks::replay_delivery))
        .split_for_parts()
}

/// The OpenAPI document.
pub fn openapi() -> utoipa::openapi::OpenApi {
    api_router().1
}

/// The whole invoicing service router.
pub fn app(state: AppState) -> Router {
    let max_body = state.max_body_bytes;
    let (router, api) = api_router();
    router
        .merge(SwaggerUi::new("/docs").url("/openapi.json", api))
        .route(
            "/invitations/{token}",
            axum::routing::get(invitation_page::show).post(invitation_page::submit),
        )
        .route(
            "/p/{token}",
            axum::routing::get(routes::public_links::open_public_link),
        )
        .merge(console::router())
        .fallback(|| async { ApiError::not_found("no such resource") })
        .with_state(state)
        .layer(DefaultBodyLimit::max(max_body))
        .layer(CatchPanicLayer::custom(middleware::panic_response))
        .layer(axum::middleware::from_fn(middleware::request_context))
}
