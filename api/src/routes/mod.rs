//! Handlers, one module per area of the contract.

pub mod account;
pub mod api_keys;
pub mod artifacts;
pub mod branches;
pub mod certificates;
pub mod companies;
pub mod documents;
pub mod emission_channels;
pub mod events;
pub mod health;
pub mod identity;
pub mod metrics;
pub mod print_settings;
pub mod printing;
pub mod public_links;
pub mod sandbox;
pub mod schemas;
pub mod tenants;
pub mod webhooks;

use kuatia_domain::access::Permission;

/// What each tenant route needs, by `(method, path template)`: the handlers check these very
/// constants, and the OpenAPI document lists the roles that grant them (`x-kuatia-roles`). A
/// test fails when a route that takes `X-Tenant-Id` is missing here.
pub const PERMISSIONS: &[(&str, &str, Permission)] = &[
    ("get", "/v1/tenants/{id}", tenants::GET_TENANT),
    ("post", "/v1/api-keys", api_keys::CREATE_API_KEY),
    ("get", "/v1/api-keys", api_keys::LIST_API_KEYS),
    ("get", "/v1/api-keys/current", api_keys::CURRENT_API_KEY),
    ("delete", "/v1/api-keys/{id}", api_keys::REVOKE_API_KEY),
    ("post", "/v1/memberships", identity::CREATE_MEMBERSHIP),
    ("get", "/v1/memberships", identity::MANAGE_MEMBERSHIPS),
    ("patch", "/v1/memberships/{id}", identity::MANAGE_MEMBERSHIPS),
    ("delete", "/v1/memberships/{id}", identity::MANAGE_MEMBERSHIPS),
    ("get", "/v1/invitations", identity::MANAGE_INVITATIONS),
    ("delete", "/v1/invitations/{id}", identity::MANAGE_INVITATIONS),
    ("get", "/v1/companies", companies::LIST_COMPANIES),
    ("post", "/v1/companies", companies::CREATE_COMPANY),
    ("patch", "/v1/companies/{id}", companies::UPDATE_COMPANY),
    ("get", "/v1/branches", branches::LIST_BRANCHES),
    ("post", "/v1/branches", branches::CREATE_BRANCH),
    ("patch", "/v1/branches/{id}", branches::UPDATE_BRANCH),
    ("post", "/v1/issuance-points", branches::CREATE_POINT),
    ("patch", "/v1/issuance-points/{id}", branches::UPDATE_POINT),
    ("get", "/v1/issuance-points", branches::LIST_POINTS),
    ("get", "/v1/print-settings", print_settings::READ_PRINT_SETTINGS),
    ("put", "/v1/print-settings", print_settings::SAVE_PRINT_SETTINGS),
    ("patch", "/v1/print-settings", print_settings::SAVE_PRINT_SETTINGS),
    ("get", "/v1/certificates", certificates::LIST_CERTIFICATES),
    ("post", "/v1/certificates", certificates::UPLOAD_CERTIFICATE),
    (
        "post",
        "/v1/certificates/{id}/validate",
        certificates::VALIDATE_CERTIFICATE,
    ),
    (
        "get",
        "/v1/certificates/{id}/chain",
        certificates::VALIDATE_CERTIFICATE,
    ),
    ("get", "/v1/emission-channels", emission_channels::LIST_CHANNELS),
    ("post", "/v1/emission-channels", emission_channels::CREATE_CHANNEL),
    (
        "patch",
        "/v1/emission-channels/{id}",
        emission_channels::UPDATE_CHANNEL,
    ),
    (
        "get",
        "/v1/emission-channels/readiness",
        emission_channels::CHANNEL_READINESS,
    ),
    ("post", "/v1/documents/validate", documents::VALIDATE_DOCUMENT),
    ("post", "/v1/documents", documents::CREATE_DOCUMENT),
    ("get", "/v1/documents", documents::READ_DOCUMENTS),
    ("get", "/v1/documents/export", documents::READ_DOCUMENTS),
    ("get", "/v1/documents/stats", documents::READ_DOCUMENTS),
    ("get", "/v1/documents/{id}", documents::READ_DOCUMENTS),
    ("get", "/v1/documents/{id}/status", documents::READ_DOCUMENTS),
    ("get", "/v1/documents/{id}/timeline", documents::READ_TIMELINE),
    ("get", "/v1/documents/{id}/events", documents::READ_TIMELINE),
    ("get", "/v1/documents/{id}/chain", documents::READ_TIMELINE),
    ("get", "/v1/documents/{id}/state", documents::READ_TIMELINE),
    ("get", "/v1/documents/{id}/artifacts", documents::READ_DOCUMENTS),
    ("post", "/v1/documents/{id}/retry", documents::RETRY_DOCUMENT),
    ("post", "/v1/documents/{id}/cancel", documents::VOID_DOCUMENT),
    ("post", "/v1/documents/{id}/inutilize", documents::VOID_DOCUMENT),
    (
        "post",
        "/v1/documents/{id}/deliveries",
        documents::DELIVER_BY_HAND,
    ),
    (
        "post",
        "/v1/documents/{id}/public-links",
        public_links::MANAGE_PUBLIC_LINKS,
    ),
    (
        "get",
        "/v1/documents/{id}/public-links",
        public_links::READ_PUBLIC_LINKS,
    ),
    (
        "delete",
        "/v1/documents/{id}/public-links/{linkId}",
        public_links::MANAGE_PUBLIC_LINKS,
    ),
    (
        "post",
        "/v1/documents/{id}/regenerate-pdf",
        printing::REGENERATE_PDF,
    ),
    ("post", "/v1/sandbox/preview", sandbox::USE_SANDBOX),
    ("get", "/v1/events", events::READ_EVENTS),
    ("get", "/v1/webhooks", webhooks::READ_WEBHOOKS),
    ("post", "/v1/webhooks", webhooks::MANAGE_WEBHOOKS),
    ("patch", "/v1/webhooks/{id}", webhooks::MANAGE_WEBHOOKS),
    ("delete", "/v1/webhooks/{id}", webhooks::MANAGE_WEBHOOKS),
    ("post", "/v1/webhooks/{id}/deactivate", webhooks::MANAGE_WEBHOOKS),
    (
        "post",
        "/v1/webhooks/{id}/rotate-secret",
        webhooks::MANAGE_WEBHOOKS,
    ),
    ("post", "/v1/webhooks/{id}/test", webhooks::MANAGE_WEBHOOKS),
    ("get", "/v1/webhooks/{id}/deliveries", webhooks::READ_WEBHOOKS),
    (
        "get",
        "/v1/webhooks/{id}/deliveries/{delivery_id}",
        webhooks::READ_WEBHOOKS,
    ),
    ("post", "/v1/webhooks/{id}/replay", webhooks::MANAGE_WEBHOOKS),
];
