//! The OpenAPI 3.1 document (`/openapi.json`) and the API reference page (`/docs`, Swagger UI
//! served from vendored assets so it works offline).
//!
//! Routes are registered through `utoipa_axum::routes!`, so a handler cannot be routed without
//! being documented.

use kuatia_domain::access::Role;
use utoipa::openapi::extensions::ExtensionsBuilder;
use utoipa::openapi::security::{ApiKey, ApiKeyValue, HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::{Modify, OpenApi};

use crate::error::{ErrorBody, ErrorCode};

/// The document's fixed parts.
#[derive(OpenApi)]
#[openapi(
    info(
        title = "kuatia invoicing API",
        version = "0.1.0",
        description = "Electronic invoicing for Paraguay (SIFEN v150) and pre-authorised printed \
                       invoices. Every error body has `code`, `message` and `request_id`; the codes \
                       and their HTTP statuses are listed in the `ErrorCode` schema and in docs/errors.md."
    ),
    components(schemas(ErrorBody, ErrorCode)),
    tags(
        (name = "health", description = "Liveness, readiness and metrics"),
        (name = "tenancy", description = "Tenants, API keys, users, sessions, invitations and memberships"),
        (name = "configuration", description = "Companies, branches, issuance points, channels, certificates"),
        (name = "documents", description = "Document intake, validation, status, list and timeline (issue codes: docs/issue-codes.md); artifacts with presigned downloads (docs/artifacts.md); the autoimpresor channel (docs/autoimpresor.md)"),
        (name = "sandbox", description = "Previews without fiscal effect: signed XML, KuDE or printable, and the channel's answer, inline; nothing stored (docs/sandbox.md)"),
        (name = "audit", description = "The event log, in commit order"),
        (name = "webhooks", description = "Webhook endpoints, signed deliveries, retries and replay (docs/webhooks.md)")
    ),
    modifiers(&SecuritySchemes)
)]
pub struct ApiDoc;

struct SecuritySchemes;

/// The catalogue of issue codes (docs/issue-codes.md), as an enum schema whose description lists
/// each code with its kind and meaning.
fn issue_code_schema() -> utoipa::openapi::schema::Object {
    use kuatia_domain::document::issues::{CATALOGUE, CONFIGURATION_CODES, is_structural};
    let mut lines = vec![
        "The `code` of a ValidationIssue `{field, code, message}`. structural: POST /v1/documents answers 400, \
         nothing stored; configuration: 400 configuration_error/certificate_error, nothing stored; error: the \
         document is stored as validation_failed; warning: never blocks."
            .to_owned(),
    ];
    let mut codes = Vec::new();
    for (code, blocking, meaning) in CATALOGUE {
        let kind = match (is_structural(code), blocking) {
            (true, _) => "structural",
            (false, true) => "error",
            (false, false) => "warning",
        };
        lines.push(format!("- `{code}` ({kind}): {meaning}"));
        codes.push(*code);
    }
    for (code, meaning) in CONFIGURATION_CODES {
        lines.push(format!("- `{code}` (configuration): {meaning}"));
        codes.push(*code);
    }
    utoipa::openapi::schema::ObjectBuilder::new()
        .schema_type(utoipa::openapi::schema::Type::String)
        .enum_values(Some(codes))
        .description(Some(lines.join("\n")))
        .build()
}

/// Writes the roles each tenant route accepts (from [`crate::routes::PERMISSIONS`]) into its
/// operation: `x-kuatia-roles`, `x-kuatia-permission`, and a sentence in the description. Applied
/// once the router has added its paths.
pub struct RolesListing;

impl Modify for RolesListing {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        for (method, path, permission) in crate::routes::PERMISSIONS {
            let Some(item) = openapi.paths.paths.get_mut(*path) else {
                continue;
            };
            let operation = match *method {
                "get" => item.get.as_mut(),
                "post" => item.post.as_mut(),
                "put" => item.put.as_mut(),
                "patch" => item.patch.as_mut(),
                "delete" => item.delete.as_mut(),
                _ => None,
            };
            let Some(operation) = operation else { continue };
            let roles: Vec<&str> = Role::granting(*permission)
                .into_iter()
                .map(Role::as_str)
                .collect();
            let permission_name = serde_json::to_value(permission).unwrap_or_default();
            let extensions = ExtensionsBuilder::new()
                .add("x-kuatia-roles", serde_json::json!(roles))
                .add("x-kuatia-permission", permission_name)
                .build();
            match operation.extensions.as_mut() {
                Some(existing) => existing.merge(extensions),
                None => operation.extensions = Some(extensions),
            }
            let sentence = format!("Roles: {}.", roles.join(", "));
            operation.description = Some(match operation.description.take() {
                Some(d) if !d.is_empty() => format!("{d}\n\n{sentence}"),
                _ => sentence,
            });
        }
    }
}

/// Documents the refusals every operation of a kind can answer, where its own annotation does not
/// list them already: 400 for a missing or malformed `X-Tenant-Id` or parameter, 401 and 403
/// where credentials are required, 413 and 415 where there is a request body. Each in the
/// contract's error shape (`ErrorBody`). Applied once the router has added its paths.
pub struct StandardResponses;

impl Modify for StandardResponses {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        use utoipa::openapi::path::{Operation, ParameterIn};
        use utoipa::openapi::{ContentBuilder, Ref, RefOr, ResponseBuilder};
        let error = |description: &str| {
            RefOr::T(
                ResponseBuilder::new()
                    .description(description)
                    .content(
                        "application/json",
                        ContentBuilder::new()
                            .schema(Some(Ref::from_schema_name("ErrorBody")))
                            .build(),
                    )
                    .build(),
            )
        };
        let complete = |operation: &mut Operation| {
            let parameters = operation.parameters.as_deref().unwrap_or_default();
            let tenant_header = parameters.iter().any(|p| match p {
                RefOr::T(p) => {
                    p.parameter_in == ParameterIn::Header
                        && p.name.eq_ignore_ascii_case(crate::auth::TENANT_HEADER)
                }
                RefOr::Ref(_) => false,
            });
            let has_body = operation.request_body.is_some();
            let secured = operation.security.as_ref().is_some_and(|requirements| {
                !requirements.is_empty()
                    && requirements
                        .iter()
                        .all(|r| r != &utoipa::openapi::security::SecurityRequirement::default())
            });
            let mut add = |status: &str, description: &str| {
                operation
                    .responses
                    .responses
                    .entry(status.to_owned())
                    .or_insert_with(|| error(description));
            };
            if tenant_header || !parameters.is_empty() || has_body {
                add(
                    "400",
                    "The request is malformed: X-Tenant-Id missing or not a UUID, a parameter or the body \
                     unreadable (validation_error)",
                );
            }
            if secured {
                add("401", "No valid API key or session (authentication_error)");
            }
            if tenant_header {
                add(
                    "403",
                    "X-Tenant-Id is not the credentials' tenant, or the role may not do this (permission_error)",
                );
            }
            if has_body {
                add("413", "The body is too large (validation_error)");
                add(
                    "415",
                    "The body is not declared as the documented content type (validation_error)",
                );
            }
        };
        for item in openapi.paths.paths.values_mut() {
            for operation in [
                item.get.as_mut(),
                item.post.as_mut(),
                item.put.as_mut(),
                item.patch.as_mut(),
                item.delete.as_mut(),
            ]
            .into_iter()
            .flatten()
            {
                complete(operation);
            }
        }
    }
}

impl Modify for SecuritySchemes {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        components
            .schemas
            .insert("IssueCode".to_owned(), issue_code_schema().into());
        components.add_security_scheme(
            "metrics_token",
            SecurityScheme::Http(
                HttpBuilder::new()
                    .scheme(HttpAuthScheme::Bearer)
                    .description(Some("The operator's METRICS_BEARER_TOKEN"))
                    .build(),
            ),
        );
        components.add_security_scheme(
            "session",
            SecurityScheme::ApiKey(ApiKey::Cookie(ApiKeyValue::with_description(
                "kuatia_session",
                "Console session from POST /v1/auth/login; unsafe requests also need X-Tenant-Id",
            ))),
        );
        components.add_security_scheme(
            "api_key",
            SecurityScheme::Http(
                HttpBuilder::new()
                    .scheme(HttpAuthScheme::Bearer)
                    .description(Some(
                        "An API key (`kt_live_…`, `kt_test_…` in demo tenants); every /v1 call also \
                         sends X-Tenant-Id with the key's tenant",
                    ))
                    .build(),
            ),
        );
    }
}
